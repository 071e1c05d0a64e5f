"""Tests for the trainers (grpo.train_teacher, distill.train_student), the MOPD objective, and the
evaluation tables. Every run is a handful of steps on tiny batches, in memory (experiment=None)."""

import copy
import json
import math

import pytest
import torch

import factworld
from mopd_mini import (AdapterBank, GRPOConfig, MOPDConfig, evaluate, format_table, normalised_scores,
                       train_student, train_teacher)
from mopd_mini import routing, runs
from mopd_mini.distill import LOSSES, domain_metrics, mopd_objective
from mopd_mini.evaluation import accuracy
from mopd_mini.rollout import completion_logits, sample

from tests.conftest import TEACHERS

DOMAINS = ("binding", "recall")
PER_DOMAIN = ("loss", "kl", "sampled_kl", "clipped", "student_topk_mass", "teacher_topk_mass",
              "adv_mean", "adv_min", "adv_max", "tokens", "reward")


def frozen(bank):
    """True when no parameter of the bank's model requires grad."""
    return not any(p.requires_grad for p in bank.model.parameters())


# ------------------------------------------------------------------------------------ GRPO teacher

def test_train_teacher_runs_and_moves_the_teacher(bank):
    """Three GRPO steps log reward and groups_kept per step and move the teacher off its init."""
    cfg = GRPOConfig(domain="binding", steps=3, prompts_per_step=4, group_size=6, eval_every=0,
                     experiment=None, progress=False)
    run = train_teacher(bank, cfg)
    assert run.dir is None
    assert [row["step"] for row in run.metrics] == [1, 2, 3]
    for row in run.metrics:
        assert 0.0 <= row["reward"] <= 1.0 and 0.0 <= row["groups_kept"] <= 1.0
    kept = [row for row in run.metrics if row["groups_kept"] > 0]
    assert kept, "no group had mixed rewards in 3 steps: nothing to learn from"
    assert all(math.isfinite(row["loss"]) and row["skipped_nonfinite"] is False for row in kept)
    assert bank.names == ["teacher_binding"] and frozen(bank)
    lora_B = [p for n, p in bank.parameters("teacher_binding").items() if "lora_B" in n]
    assert any(torch.count_nonzero(p) > 0 for p in lora_B)  # B = 0 at init


def test_train_teacher_writes_its_run_folder(bank, tmp_path, monkeypatch):
    """With an experiment name, the run lands under RUNS_DIR/<experiment>/<adapter>/ and the saved
    adapter loads back with the trained weights."""
    monkeypatch.setattr(runs, "RUNS_DIR", tmp_path)
    cfg = GRPOConfig(domain="recall", steps=2, prompts_per_step=2, group_size=4, eval_every=2, eval_n=2,
                     experiment="t", progress=False)
    run = train_teacher(bank, cfg)
    folder = tmp_path / "t" / "teacher_recall"
    assert run.dir == folder
    assert {"adapter_config.json", "adapter_model.safetensors", "checkpoint.pt", "metrics.jsonl",
            "config.json"} <= {f.name for f in folder.iterdir()}
    lines = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in lines] == [1, 2]
    assert {"acc/recall/L16", "acc/recall/L24"} <= set(lines[-1]) and "acc/recall/L16" not in lines[0]
    trained = bank.state("teacher_recall")
    bank.load("again", folder)
    for (_, p), (_, q) in zip(sorted(trained.items()), sorted(bank.state("again").items())):
        assert torch.equal(p, q)


@pytest.mark.parametrize("bad", [dict(domain="math"), dict(steps=0), dict(group_size=0)])
def test_train_teacher_refuses_bad_configs(bank, bad):
    """An unknown domain or an empty batch raises ValueError."""
    with pytest.raises(ValueError):
        train_teacher(bank, GRPOConfig(**{**dict(experiment=None, progress=False), **bad}))


def test_mix_rl_batches_hold_every_domain_in_balance(bank, monkeypatch):
    """GRPO over two domains (Mix-RL): every step samples P prompts of EACH domain, G times each,
    in domain blocks, and logs each domain's reward; the adapter is called mixrl."""
    from mopd_mini import grpo
    seen = []
    real = grpo.sample
    monkeypatch.setattr(grpo, "sample", lambda model, tok, exs, **kw: seen.append([e.task for e in exs]) or real(model, tok, exs, **kw))
    cfg = GRPOConfig(domain=("binding", "recall"), steps=2, prompts_per_step=3, group_size=2, eval_every=0,
                     experiment=None, progress=False)
    run = train_teacher(bank, cfg)
    assert bank.names == ["mixrl"]
    assert seen == [["binding"] * 6 + ["recall"] * 6] * 2
    assert all({"reward/binding", "reward/recall"} <= set(row) for row in run.metrics)


def test_cascade_starts_from_the_first_stage_and_logs_it(teacher_bank):
    """A cascade stage is GRPO started from another adapter (a copy, so the first stage is kept)
    that also evaluates the first stage's domain."""
    first = teacher_bank.state("teacher_binding")
    cfg = GRPOConfig(domain="recall", init_from="teacher_binding", name="cascade", eval_domains=("binding",),
                     steps=1, prompts_per_step=2, group_size=2, lr=1e-12, eval_every=1, eval_n=2,
                     experiment=None, progress=False)
    run = train_teacher(teacher_bank, cfg)
    for n, t in teacher_bank.state("cascade").items():  # lr ~0: the copy is still the first stage
        assert torch.allclose(t, first[n.replace(".cascade.", ".teacher_binding.")], atol=1e-9)
    assert {"acc/binding/L16", "acc/recall/L16"} <= set(run.metrics[-1])
    with pytest.raises(ValueError, match="init_from"):
        train_teacher(teacher_bank, GRPOConfig(domain="recall", init_from="teacher_recall", experiment=None))


# ----------------------------------------------------------------------------------- MOPD student

def student_config(**overrides):
    """A two-step MOPD run on two prompts per domain, nothing written to disk."""
    return MOPDConfig(**{**dict(steps=2, prompts_per_domain=2, topk=8, eval_every=0, track_steps=(1, 2, 99),
                                track_prompts=2, experiment=None, progress=False), **overrides})


@pytest.fixture(scope="module", params=LOSSES)
def distilled(request, tiny, add_teachers):
    """(bank, run, teacher weights before, student init) for two steps of each loss."""
    bank = add_teachers(AdapterBank(copy.deepcopy(tiny[0]), tiny[1]))
    before = {name: bank.state(name) for name in TEACHERS.values()}
    cfg = student_config(loss=request.param)
    run = train_student(bank, cfg)
    return bank, run, before, cfg


def test_student_logs_every_domain(distilled):
    """Each step's row holds the per-domain metrics, all finite, with sane ranges."""
    bank, run, _, cfg = distilled
    assert [row["step"] for row in run.metrics] == [1, 2]
    for row in run.metrics:
        assert math.isfinite(row["loss"]) and math.isfinite(row["kl"]) and row["skipped_nonfinite"] is False
        for d in DOMAINS:
            for name in PER_DOMAIN:
                assert math.isfinite(row[f"{name}/{d}"]), f"{name}/{d}"
            assert row[f"kl/{d}"] >= 0 and row[f"kl/{d}"] > 1e-4  # the teachers are not at the base
            assert row[f"tokens/{d}"] >= cfg.prompts_per_domain and isinstance(row[f"tokens/{d}"], int)
            assert 0 <= row[f"clipped/{d}"] <= 1 and 0 <= row[f"reward/{d}"] <= 1
            assert 0 < row[f"student_topk_mass/{d}"] <= 1 + 1e-6 and 0 < row[f"teacher_topk_mass/{d}"] <= 1 + 1e-6
            assert row[f"adv_min/{d}"] <= row[f"adv_mean/{d}"] <= row[f"adv_max/{d}"]


def test_teachers_never_move(distilled):
    """Distillation leaves every teacher weight bit-for-bit unchanged."""
    bank, _, before, _ = distilled
    for name, state in before.items():
        after = bank.state(name)
        assert after.keys() == state.keys()
        for n in state:
            assert torch.equal(after[n], state[n]), n


def test_student_moves_and_ends_frozen(distilled):
    """The student adapter leaves its zero init, and after training nothing requires grad."""
    bank, _, _, cfg = distilled
    assert cfg.student in bank.names
    lora_B = [p for n, p in bank.parameters(cfg.student).items() if "lora_B" in n]
    assert any(torch.count_nonzero(p) > 0 for p in lora_B)
    assert frozen(bank)


def test_trace_has_per_token_records_at_the_track_steps(distilled):
    """The trace holds one record per tracked prompt at each track step that ran, with per-token
    lists as long as the tokens."""
    _, run, _, cfg = distilled
    steps = [s for s in cfg.track_steps if s <= cfg.steps]
    assert sorted({r["step"] for r in run.trace}) == steps
    assert len(run.trace) == len(steps) * cfg.track_prompts * len(DOMAINS)
    for r in run.trace:
        assert r["domain"] in DOMAINS and r["tokens"]
        for key in ("kl", "advantage_raw", "advantage", "student_logprob", "teacher_logprob"):
            assert len(r[key]) == len(r["tokens"]), key
        assert all(k >= -1e-6 for k in r["kl"])
        assert all(abs(a) <= cfg.clip + 1e-6 for a in r["advantage"])


def test_domain_metrics_split_by_domain(tiny, mixed_examples):
    """Per-domain metrics average only that domain's rows and tokens: binding rows carry 1s, recall
    rows 2s, so every mean is exactly its domain's value."""
    rollout = sample(*tiny, mixed_examples, temperature=3.0, max_new_tokens=5,
                     generator=torch.Generator().manual_seed(0))
    value = torch.tensor([1.0 if d == "binding" else 2.0 for d in rollout.domains])[:, None]
    per_token = value.expand_as(rollout.completion_mask).clone()                # (B, C)
    info = {name: per_token for name in ("loss", "kl", "sampled_kl", "clipped", "student_topk_mass",
                                         "teacher_topk_mass", "advantage_raw", "off_support", "grad_norm",
                                         "kl_grad_norm")}
    info["stuck"] = (per_token == 1).float()                                   # every binding token stuck
    rewards = value[:, 0] - 1                                                  # binding 0, recall 1
    row = domain_metrics(info, rollout, rewards)
    for d, v in (("binding", 1.0), ("recall", 2.0)):
        rows = [i for i, x in enumerate(rollout.domains) if x == d]
        assert row[f"tokens/{d}"] == int(rollout.completion_mask[rows].sum())
        for name in ("loss", "kl", "clipped", "student_topk_mass", "adv_mean", "adv_min", "adv_max", "off_support"):
            assert row[f"{name}/{d}"] == v, f"{name}/{d}"
        assert row[f"reward/{d}"] == v - 1
    assert row["stuck_share/binding"] == 1 and row["stuck_tokens/binding"] == row["tokens/binding"]
    assert row["grad_stuck/binding"] == row["kl_grad_stuck/binding"] == row["kl_stuck/binding"] == 1
    assert row["grad_rest/binding"] is None and row["kl_rest/binding"] is None  # no other token
    assert row["stuck_share/recall"] == 0 and row["stuck_tokens/recall"] == 0 and row["grad_stuck/recall"] is None
    assert row["grad_rest/recall"] == row["kl_grad_rest/recall"] == 2


def test_student_needs_the_teachers(bank, add_teachers):
    """Without teacher adapters in the bank train_student raises ValueError naming the missing one."""
    with pytest.raises(ValueError, match="teacher_binding"):
        train_student(bank, student_config())
    bank.create("teacher_binding", seed=1)
    with pytest.raises(ValueError, match="teacher_recall"):
        train_student(bank, student_config())


@pytest.mark.parametrize("bad, words", [
    (dict(loss="foo"), ("pg", "topk", "kl")),
    (dict(clip=0), ("clip",)),
    (dict(topk=0), ("topk",)),
    (dict(temperature=0), ("temperature",)),
    (dict(scoring="average"), ("mixed", "swap")),
    (dict(domains=("math",)), ("math", "binding")),
    (dict(prompts_per_domain=0), ("prompts_per_domain",)),
])
def test_student_refuses_bad_configs(teacher_bank, bad, words):
    """Bad config values raise ValueError naming the fix, before the bank is touched."""
    names = list(teacher_bank.names)
    with pytest.raises(ValueError) as err:
        train_student(teacher_bank, student_config(**bad))
    for word in words:
        assert word in str(err.value)
    assert teacher_bank.names == names


# ------------------------------------------------------------------------------- the MOPD objective

@pytest.mark.parametrize("loss", LOSSES)
def test_objective_is_zero_when_the_student_is_the_teacher(teacher_bank, perturb, mixed_examples, loss):
    """Routed to itself (binding) or to an identical twin (recall), the student gets ~0 KL, ~0
    advantage and ~0 loss everywhere, while the real teachers give a clearly positive KL."""
    bank = teacher_bank
    for name in ("student", "twin"):
        bank.create(name, seed=5)
        perturb(bank, name, seed=9)
    cfg = MOPDConfig(loss=loss, topk=8)
    with bank.use("student") as model:
        rollout = sample(model, bank.tokenizer, mixed_examples, max_new_tokens=5,
                         generator=torch.Generator().manual_seed(0))
        student_logits = completion_logits(model, rollout)
    mask = rollout.completion_mask.bool()

    self_scores = routing.score(bank, rollout, {"binding": "student", "recall": "twin"}, k=cfg.topk)
    value, info = mopd_objective(cfg, student_logits, rollout, self_scores)
    # ~0 up to fp32 rounding: the routed pass scores with the merged weights W + s B A of the tiny
    # base (routing.MERGED_LIMIT), the student's forward with W and B A apart
    assert abs(value.item()) < 5e-5
    for key in ("kl", "sampled_kl", "advantage_raw", "advantage", "loss"):
        assert info[key][mask].abs().max() < 5e-5, key
    assert info["clipped"].sum() == 0

    real = routing.score(bank, rollout, TEACHERS, k=cfg.topk)
    _, info = mopd_objective(cfg, student_logits, rollout, real)
    assert info["kl"][mask].mean() > 1e-3


def test_objective_gradient_reaches_the_student_only(teacher_bank, mixed_examples):
    """The objective's gradient flows into the student's logits; the teacher's scores are constants."""
    with teacher_bank.use("teacher_binding") as model:
        rollout = sample(model, teacher_bank.tokenizer, mixed_examples, max_new_tokens=4,
                         generator=torch.Generator().manual_seed(1))
    scores = routing.score(teacher_bank, rollout, TEACHERS, k=8)
    for loss in LOSSES:
        logits = torch.randn(scores.logits.shape, generator=torch.Generator().manual_seed(2), requires_grad=True)
        value, _ = mopd_objective(MOPDConfig(loss=loss, topk=8), logits, rollout, scores)
        value.backward()
        assert logits.grad is not None and logits.grad.abs().sum() > 0
        assert not scores.logits.requires_grad and not scores.logprobs.requires_grad


# ------------------------------------------------------------------------------------- evaluation

def table(student_recall=0.5, teacher_recall=0.5):
    """A hand-made evaluate() table: binding at L16/L24, recall at L16."""
    return {"acc": {
        "base": {"binding": {16: 0.2, 24: 0.4}, "recall": {16: 0.5}},
        "teacher_binding": {"binding": {16: 0.8, 24: 1.0}, "recall": {16: 0.4}},
        "teacher_recall": {"binding": {16: 0.1, 24: 0.1}, "recall": {16: teacher_recall}},
        "student": {"binding": {16: 0.5, 24: 0.7}, "recall": {16: student_recall}},
    }, "floor": {16: 0.25, 24: 0.125}, "n": 10}


def test_normalised_scores_are_the_papers_ratio():
    """s_d = (s - b) / (t - b) on each domain's mean accuracy, the mean over domains, denominators shown."""
    scores = normalised_scores(table(student_recall=0.7, teacher_recall=0.9))
    b = scores["binding"]
    assert (b["model"], b["base"], b["teacher"]) == pytest.approx((0.6, 0.3, 0.9))
    assert b["denominator"] == pytest.approx(0.6) and b["normalised"] == pytest.approx(0.5)
    assert scores["recall"]["normalised"] == pytest.approx((0.7 - 0.5) / (0.9 - 0.5))
    assert scores["mean"] == pytest.approx((0.5 + 0.5) / 2)
    swapped = normalised_scores(table(student_recall=0.7, teacher_recall=0.9),
                                teachers={"binding": "teacher_recall", "recall": "teacher_binding"})
    assert swapped["binding"]["normalised"] == pytest.approx((0.6 - 0.3) / (0.1 - 0.3))


def test_normalised_score_is_nan_without_teacher_headroom():
    """A domain whose teacher scores like the base has denominator 0 and a nan ratio (and mean)."""
    scores = normalised_scores(table(student_recall=0.7, teacher_recall=0.5))
    assert scores["recall"]["denominator"] == 0
    assert math.isnan(scores["recall"]["normalised"]) and math.isnan(scores["mean"])
    assert scores["binding"]["normalised"] == pytest.approx(0.5)


def test_format_table_has_every_model_and_the_binding_floor():
    """format_table prints one row per adapter, one column per (domain, length), and the floor row."""
    text = format_table(table())
    lines = text.splitlines()
    assert "binding L16" in lines[0] and "binding L24" in lines[0] and "recall L16" in lines[0]
    for name in ("base", "teacher_binding", "teacher_recall", "student"):
        assert any(line.startswith(f"| {name} |") for line in lines)
    floor = [line for line in lines if "binding floor" in line]
    assert len(floor) == 1 and "0.25" in floor[0] and "0.12" in floor[0]


def test_evaluate_builds_the_table(teacher_bank, tiny):
    """evaluate() measures each adapter on the same test examples; base is the plain base; the
    binding floor is factworld.floor of those examples."""
    lengths = {"binding": (8,), "recall": (12,)}
    result = evaluate(teacher_bank, ["base", "teacher_binding"], n=4, lengths=lengths)
    assert result["n"] == 4 and set(result["acc"]) == {"base", "teacher_binding"}
    assert result["acc"]["base"]["binding"].keys() == {8} and result["acc"]["base"]["recall"].keys() == {12}
    tests = {d: factworld.generate(d, "test", n=4, length=L[0], seed=0) for d, L in lengths.items()}
    for d, examples in tests.items():
        assert result["acc"]["base"][d][lengths[d][0]] == accuracy(tiny[0], tiny[1], examples)
        with teacher_bank.use("teacher_binding") as model:
            assert result["acc"]["teacher_binding"][d][lengths[d][0]] == accuracy(model, tiny[1], examples)
    assert result["floor"] == {8: factworld.floor(tests["binding"])}
    assert "binding floor" in format_table(result)


def test_evaluate_on_the_validation_split(teacher_bank, tiny):
    """split="val" evaluates on Domain.val_examples: prompts disjoint from train and test, so
    hyperparameters chosen on them never see the test set; an unknown split is refused."""
    from mopd_mini import DOMAINS
    lengths = {"binding": (8,), "recall": (12,)}
    result = evaluate(teacher_bank, ["teacher_binding"], n=4, lengths=lengths, split="val")
    assert result["split"] == "val"
    for d, (L,) in lengths.items():
        val = DOMAINS[d].val_examples(L, 4)
        assert all(ex.split == "val" for ex in val)
        test = {ex.prompt for ex in DOMAINS[d].test_examples(L, 200)}
        train = {ex.prompt for step in range(25) for ex in DOMAINS[d].train_examples(step, 8)}
        assert not {ex.prompt for ex in val} & (test | train)
        with teacher_bank.use("teacher_binding") as model:
            assert result["acc"]["teacher_binding"][d][L] == accuracy(model, tiny[1], val)
    with pytest.raises(ValueError, match="split"):
        evaluate(teacher_bank, ["base"], n=2, split="train")
    with pytest.raises(ValueError, match="eval_split"):
        train_teacher(teacher_bank, GRPOConfig(eval_split="dev", experiment=None, progress=False))
