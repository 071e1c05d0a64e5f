"""Bad input: every mistake a student can feed the course gets a clear error that names the fix,
raised before anything is written to disk (and, for a bad config, before any adapter in the bank
is touched); and a non-finite loss skips its step without touching a weight.

Bad inputs already covered elsewhere (docs/reliability.md lists them all, with their messages):
unknown adapter names (test_adapters), unknown loss / scoring / domain and clip, topk, temperature
and prompts_per_domain of MOPDConfig (test_distill), k outside the vocabulary in teacher scoring
(test_routing), the losses' own checks (test_losses), prompts beyond the context or the vocabulary
(test_rollout), quantize without a GPU and a hub id offline (test_models), FactWorld knobs
(test_factworld), a missing or corrupt adapter folder and an adapter of another base (test_adapters).
"""

import copy
import json
import math
import sys

import pytest
import torch
from transformers import Qwen3ForCausalLM

from mopd_mini import (AdapterBank, Domain, GRPOConfig, MOPDConfig, evaluate, load_base, train_student,
                       train_grpo)
from mopd_mini import distill, grpo, runs
from mopd_mini.adapters import ORIGIN_FILE
from mopd_mini.models import TINY_DIR, _quantization_config, tiny_config
from mopd_mini.rollout import generate_answers
from mopd_mini.tokenizer import build_tiny_tokenizer

from tests.conftest import TEACHERS


@pytest.fixture
def runs_dir(tmp_path, monkeypatch):
    """RUNS_DIR pointed at an empty temporary folder."""
    monkeypatch.setattr(runs, "RUNS_DIR", tmp_path / "runs")
    return tmp_path / "runs"


def teacher_config(**overrides):
    """A short GRPO run written under RUNS_DIR/bad/."""
    return GRPOConfig(**{**dict(steps=2, prompts_per_step=2, group_size=4, eval_every=0, experiment="bad",
                                progress=False), **overrides})


def student_config(**overrides):
    """A short MOPD run written under RUNS_DIR/bad/."""
    return MOPDConfig(**{**dict(steps=2, prompts_per_domain=2, topk=8, eval_every=0, track_steps=(),
                                experiment="bad", progress=False), **overrides})


def snapshot(bank):
    """Every adapter's weights, by adapter name."""
    return {name: bank.state(name) for name in bank.names}


def assert_unchanged(bank, before):
    """The bank holds the same adapters with the same weights as in `before`."""
    assert bank.names == list(before)
    for name, state in before.items():
        assert all(torch.equal(p, state[n]) for n, p in bank.state(name).items()), name


# ------------------------------------------------------------------------------ trainer configs

@pytest.mark.parametrize("bad, pattern", [
    (dict(domain="math"), r"unknown domain.*'math'.*valid domains: \['binding', 'recall'\]"),
    (dict(prompts_per_step=0), r"prompts_per_step must be >= 1"),
    (dict(group_size=0), r"group_size must be >= 2"),
    (dict(group_size=1), r"group_size must be >= 2.*never learns"),
    (dict(steps=0), r"steps must be >= 1"),
    (dict(temperature=0.0), r"temperature must be > 0"),
    (dict(temperature=-1.0), r"temperature must be > 0"),
    (dict(lr=0.0), r"lr must be > 0"),
    (dict(grad_clip=0.0), r"grad_clip must be > 0"),
    (dict(max_new_tokens=0), r"max_new_tokens must be >= 1"),
    (dict(eval_n=0), r"eval_n must be >= 1"),
    (dict(eval_every=-1), r"eval_every must be >= 0 \(0: never"),
    (dict(checkpoint_every=0), r"checkpoint_every must be >= 1"),
], ids=lambda v: "-".join(f"{k}={x}" for k, x in v.items()) if isinstance(v, dict) else None)
def test_grpo_config_refuses_bad_values(teacher_bank, runs_dir, bad, pattern):
    """GRPOConfig.check (called first by train_grpo) names the field; the bank's adapters keep their
    weights and nothing is written."""
    before = snapshot(teacher_bank)
    with pytest.raises(ValueError, match=pattern):
        train_grpo(teacher_bank, teacher_config(**bad))
    assert_unchanged(teacher_bank, before)
    assert not runs_dir.exists()


@pytest.mark.parametrize("bad, pattern", [
    (dict(domains=()), r"no domains given; valid domains: \['binding', 'recall'\]"),
    (dict(clip=-1.0), r"clip must be > 0, or None"),
    (dict(clip=float("nan")), r"MOPDConfig.clip=nan is not a finite float .* or None"),
    (dict(topk=-3), r"topk must be >= 1"),
    (dict(topk=10_000), r"topk=10000 exceeds the vocabulary of 282 tokens; pick topk <= 282"),
    (dict(temperature=-0.5), r"temperature must be > 0"),
    (dict(steps=0), r"steps must be >= 1"),
    (dict(lr=-1e-3), r"lr must be > 0"),
    (dict(grad_clip=0.0), r"grad_clip must be > 0"),
    (dict(checkpoint_every=0), r"checkpoint_every must be >= 1"),
], ids=lambda v: "-".join(f"{k}={x}" for k, x in v.items()) if isinstance(v, dict) else None)
def test_mopd_config_refuses_bad_values(teacher_bank, runs_dir, bad, pattern):
    """The MOPD checks test_distill does not already make: each names the field, before the bank
    (its teachers, any student) or the disk is touched."""
    before = snapshot(teacher_bank)
    with pytest.raises(ValueError, match=pattern):
        train_student(teacher_bank, student_config(**bad))
    assert_unchanged(teacher_bank, before)
    assert not runs_dir.exists()


def test_prompt_beyond_the_context_writes_nothing(bank, runs_dir):
    """A prompt plus completion budget longer than the model's context (512 for the tiny model) is
    refused by name at the first step, before any checkpoint is written."""
    limit = bank.base.config.max_position_embeddings
    with pytest.raises(ValueError, match=rf"exceeds the model's context of {limit}; use a shorter FactWorld "
                                         r"length or fewer max_new_tokens"):
        train_grpo(bank, teacher_config(max_new_tokens=limit))
    assert not runs_dir.exists()


def test_clip_active_on_most_tokens_is_logged_not_silent(teacher_bank):
    """A clip that binds on nearly every token shows in the per-domain `clipped/<domain>` metric, next to
    the advantage before the clip; with no clip the same step logs 0."""
    tight = train_student(teacher_bank, student_config(steps=1, clip=1e-4, experiment=None)).metrics[0]
    free = train_student(teacher_bank, student_config(steps=1, clip=None, experiment=None)).metrics[0]
    for d in TEACHERS:
        assert tight[f"clipped/{d}"] > 0.9 and free[f"clipped/{d}"] == 0, d
        assert max(abs(tight[f"adv_min/{d}"]), abs(tight[f"adv_max/{d}"])) > 1e-4, d


# ------------------------------------------------------------------------------ domains and data

@pytest.mark.parametrize("lengths, pattern", [
    (dict(train_lengths=(), eval_lengths=(16,)), r"empty train_lengths: no prompts to train on"),
    (dict(train_lengths=(8,), eval_lengths=()), r"empty eval_lengths: no prompts to evaluate on"),
])
def test_a_domain_with_no_prompts_is_refused(lengths, pattern):
    """A Domain with no training or no evaluation lengths cannot make prompts: a ValueError at creation."""
    with pytest.raises(ValueError, match=pattern):
        Domain("binding", **lengths)


@pytest.mark.parametrize("domain, pattern", [
    (dict(name="binding", knobs={"n_objects": 3, "n_active": 4}), r"n_active=4 must be between 2 and n_objects=3"),
    (dict(name="recall", knobs={"agent_pool": 8}), r"length \(pool size\) 16 > agent_pool=8: raise agent_pool"),
    (dict(name="binding", train_lengths=(1,)), r"length must be an integer >= 2, got 1"),
    (dict(name="sorting"), r"unknown FactWorld task 'sorting'; valid tasks: binding, recall"),
])
def test_a_domain_with_out_of_range_knobs_is_refused(domain, pattern):
    """FactWorld's knob checks fire when a course Domain is made, not at the first training step."""
    spec = {"train_lengths": (8, 16), "eval_lengths": (16,), **domain}
    with pytest.raises(ValueError, match=pattern):
        Domain(**spec)


def test_batch_size_zero_in_evaluation_is_refused(teacher_bank, tiny):
    """evaluate(n=0) and generate_answers(batch_size=0) name the argument instead of failing deep inside."""
    with pytest.raises(ValueError, match=r"n \(test prompts per domain and length\) must be >= 1, got 0"):
        evaluate(teacher_bank, ["base"], n=0)
    with pytest.raises(ValueError, match=r"batch_size must be >= 1, got 0"):
        generate_answers(*tiny, ["who is the final holder of o1?"], batch_size=0)


# ------------------------------------------------------------------------------ non-finite steps

def record_updates(monkeypatch, module):
    """Spy on `module.guarded_step`: a list of (skipped, any adapter weight changed), one per call."""
    calls, real = [], module.guarded_step

    def spy(loss, params, optimizer, grad_clip):
        before = [p.detach().clone() for p in params]
        out = real(loss, params, optimizer, grad_clip)
        calls.append((out["skipped_nonfinite"], any(not torch.equal(b, p) for b, p in zip(before, params))))
        return out

    monkeypatch.setattr(module, "guarded_step", spy)
    return calls


def poison(monkeypatch, module, call, make_bad):
    """Make the `call`-th student forward of `module` (1-based) return make_bad(logits)."""
    count, real = [0], module.completion_logits

    def forward(model, rollout, **kwargs):
        count[0] += 1
        logits = real(model, rollout, **kwargs)
        return make_bad(logits) if count[0] == call else logits

    monkeypatch.setattr(module, "completion_logits", forward)
    return count


def test_nan_logits_skip_the_student_step(teacher_bank, runs_dir, monkeypatch):
    """NaN student logits at step 2: the row logs skipped_nonfinite (in metrics.jsonl too), no student
    weight moves on that step, the other steps update, and the run finishes with finite weights."""
    poison(monkeypatch, distill, call=2, make_bad=lambda z: z * float("nan"))
    updates = record_updates(monkeypatch, distill)
    run = train_student(teacher_bank, student_config(steps=3))
    assert updates == [(False, True), (True, False), (False, True)]
    assert [row["skipped_nonfinite"] for row in run.metrics] == [False, True, False]
    assert math.isnan(run.metrics[1]["loss"])
    assert [row["skipped_nonfinite"] for row in runs.read_metrics(run.dir)] == [False, True, False]
    assert all(torch.isfinite(p).all() for p in teacher_bank.state("student").values())


def test_inf_logits_skip_the_teacher_step(bank, runs_dir, monkeypatch):
    """+inf in a teacher's logits at its second update: that step is skipped and logged, and no
    weight moves on it; the other updates go through."""
    poison(monkeypatch, grpo, call=2, make_bad=lambda z: z.index_fill(-1, torch.tensor([0]), float("inf")))
    updates = record_updates(monkeypatch, grpo)
    run = train_grpo(bank, teacher_config(steps=4, prompts_per_step=4, group_size=6, temperature=2.0))
    assert len(updates) >= 3, "too few groups with mixed rewards to test a skipped update"
    assert updates[1] == (True, False) and all(u == (False, True) for i, u in enumerate(updates) if i != 1)
    updated = [row for row in runs.read_metrics(run.dir) if "loss" in row]    # the steps that had an update
    assert updated[1]["skipped_nonfinite"] is True and not math.isfinite(updated[1]["loss"])
    assert all(torch.isfinite(p).all() for p in bank.state("teacher_binding").values())


def test_guarded_step_skips_a_finite_loss_with_a_nonfinite_gradient():
    """A finite loss whose gradient is inf (sqrt at 0) is skipped too: weights and optimizer state unchanged."""
    w = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
    optimizer = torch.optim.AdamW([w], lr=0.1)
    loss = torch.sqrt((w * 0).sum())                       # 0, with d/dw = inf
    out = runs.guarded_step(loss, [w], optimizer, grad_clip=1.0)
    assert out["skipped_nonfinite"] is True and not math.isfinite(out["grad_norm"])
    assert torch.equal(w.detach(), torch.tensor([1.0, 2.0])) and not optimizer.state


# ------------------------------------------------------------------------------ adapters of another origin

def test_teacher_of_another_tokenizer_is_refused(bank, tiny, tmp_path):
    """A teacher trained with another tokenizer of the SAME size on the same base would score the
    wrong token ids without any shape error; loading it is refused, naming the tokenizer and
    allow_foreign."""
    other_tok = build_tiny_tokenizer(agents=32, values=160)
    assert len(other_tok) == len(bank.tokenizer)
    g40 = bank.tokenizer.convert_tokens_to_ids("▁g40")
    assert other_tok.convert_ids_to_tokens(g40) != "▁g40"          # same id, another word
    other = AdapterBank(copy.deepcopy(tiny[0]), other_tok)
    other.create("teacher_binding", seed=1)
    other.save("teacher_binding", tmp_path / "t")
    with pytest.raises(ValueError, match=r"trained on another tokenizer than this bank's .*allow_foreign=True"):
        bank.load("teacher_binding", tmp_path / "t")
    assert bank.names == []


def test_teacher_of_another_vocabulary_is_refused(bank, tmp_path):
    """A teacher on a model of another vocabulary (and tokenizer) is refused, naming both."""
    other_tok = build_tiny_tokenizer(agents=32)
    config = tiny_config(len(other_tok), pad_token_id=other_tok.pad_token_id, eos_token_id=other_tok.eos_token_id)
    other = AdapterBank(Qwen3ForCausalLM(config).eval(), other_tok)
    other.create("teacher_binding", seed=1)
    other.save("teacher_binding", tmp_path / "t")
    with pytest.raises(ValueError, match=r"another base and tokenizer than this bank's .*allow_foreign=True"):
        bank.load("teacher_binding", tmp_path / "t")
    assert bank.names == []


def test_corrupt_adapter_config_is_a_value_error(bank, tmp_path):
    """A garbage adapter_config.json is refused like corrupt weights: ValueError naming the fix."""
    bank.create("t", seed=1)
    folder = bank.save("t", tmp_path / "t")
    (folder / "adapter_config.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"could not load the adapter at .*Delete the folder and re-create"):
        bank.load("u", folder)
    assert bank.names == ["t"]


@pytest.mark.parametrize("origin, pattern", [
    (None, rf"has no {ORIGIN_FILE} .*allow_foreign=True"),
    ("{not json", rf"origin file .*{ORIGIN_FILE} is corrupt; re-create the adapter"),
])
def test_adapter_of_unknown_origin_is_refused(bank, tmp_path, origin, pattern):
    """An adapter folder whose origin cannot be read (a plain peft folder, or a corrupt fingerprint)
    is refused unless allow_foreign=True, which loads it."""
    bank.create("t", seed=1)
    folder = bank.save("t", tmp_path / "t")
    if origin is None:
        (folder / ORIGIN_FILE).unlink()
    else:
        (folder / ORIGIN_FILE).write_text(origin)
    with pytest.raises(ValueError, match=pattern):
        bank.load("u", folder)
    assert bank.names == ["t"]
    bank.load("u", folder, allow_foreign=True)
    assert sorted(bank.names) == ["t", "u"]


# ------------------------------------------------------------------------------ base checkpoints

def corrupt_base(folder, how):
    """A copy of the shipped tiny base with one thing broken."""
    folder.mkdir()
    if how == "empty":
        return folder
    for f in TINY_DIR.iterdir():
        if f.is_file():
            (folder / f.name).write_bytes(f.read_bytes())
    weights = folder / "model.safetensors"
    if how == "garbage config.json":
        (folder / "config.json").write_text("{not json")
    elif how == "garbage weights":
        weights.write_bytes(b"not a safetensors file" * 8)
    elif how == "truncated weights":
        weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    elif how == "no weights":
        weights.unlink()
    elif how == "wrong shapes":
        config = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps({**config, "hidden_size": 64, "head_dim": 16}))
    return folder


@pytest.mark.parametrize("how", ["empty", "garbage config.json", "garbage weights", "truncated weights",
                                 "no weights", "wrong shapes"])
def test_corrupt_base_folder_is_a_clear_value_error(tmp_path, how):
    """load_base of a folder that is not a whole checkpoint raises ValueError saying so and how to fix it."""
    folder = corrupt_base(tmp_path / "base", how)
    with pytest.raises(ValueError, match=r"(?s)is not a usable checkpoint .*config.json, model.safetensors and "
                                         r"the tokenizer files.*download it again"):
        load_base(str(folder), device="cpu")


def test_missing_base_folder_is_file_not_found(tmp_path):
    """A path that does not exist is a FileNotFoundError naming it (not a hub lookup)."""
    with pytest.raises(FileNotFoundError, match=r"no folder at .*nope.*config.json"):
        load_base(str(tmp_path / "nope"), device="cpu")


def test_quantize_without_bitsandbytes_says_how_to_install_it(monkeypatch):
    """On a CUDA device without bitsandbytes, quantize names the package and the pip extra."""
    monkeypatch.setitem(sys.modules, "bitsandbytes", None)          # `import bitsandbytes` fails
    for quantize in ("4bit", "8bit"):
        with pytest.raises(RuntimeError, match=r"needs bitsandbytes: pip install 'mopd_mini\[quant\]'"):
            _quantization_config(quantize, torch.bfloat16, torch.device("cuda"))


# ------------------------------------------------------------------------------ checkpoints

def test_unreadable_checkpoint_says_delete_it(bank, runs_dir):
    """A checkpoint.pt that is not a checkpoint is refused on resume, naming the file and the fix."""
    folder = runs_dir / "bad" / "teacher_binding"
    folder.mkdir(parents=True)
    (folder / "checkpoint.pt").write_bytes(b"garbage")
    with pytest.raises(ValueError, match=r"checkpoint .*checkpoint.pt is unreadable .*delete it to start over"):
        train_grpo(bank, teacher_config())


def test_resuming_with_another_config_is_refused(bank, runs_dir):
    """The same experiment with another config (other than steps) is refused: another name, or delete."""
    train_grpo(bank, teacher_config(steps=1))
    train_grpo(bank, teacher_config(steps=2))                 # more steps: a resumption, fine
    with pytest.raises(ValueError, match=r"holds a run with another config \(lr: saved 0.001, now 0.005\); "
                                         r"use another experiment name"):
        train_grpo(bank, teacher_config(steps=2, lr=5e-3))
