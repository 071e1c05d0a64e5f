"""Tests for the GRPO teacher (grpo.train_grpo): one domain, Mix-RL over two, and a cascade
stage. Every run is a handful of steps on tiny batches, in memory unless the test names an experiment."""

import json
import math

import pytest
import torch

from mopd_mini import GRPOConfig, runs, train_grpo

from tests.conftest import frozen


def test_train_grpo_runs_and_moves_the_teacher(bank):
    """Three GRPO steps log reward and groups_kept per step and move the teacher off its init."""
    cfg = GRPOConfig(domain="binding", steps=3, prompts_per_step=4, group_size=6, eval_every=0,
                     experiment=None, progress=False)
    run = train_grpo(bank, cfg)
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


def test_train_grpo_writes_its_run_folder(bank, tmp_path, monkeypatch):
    """With an experiment name, the run lands under RUNS_DIR/<experiment>/<adapter>/ and the saved
    adapter loads back with the trained weights."""
    monkeypatch.setattr(runs, "RUNS_DIR", tmp_path)
    cfg = GRPOConfig(domain="recall", steps=2, prompts_per_step=2, group_size=4, eval_every=2, eval_n=2,
                     experiment="t", progress=False)
    run = train_grpo(bank, cfg)
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
def test_train_grpo_refuses_bad_configs(bank, bad):
    """An unknown domain or an empty batch raises ValueError."""
    with pytest.raises(ValueError):
        train_grpo(bank, GRPOConfig(**{**dict(experiment=None, progress=False), **bad}))


def test_mix_rl_batches_hold_every_domain_in_balance(bank, monkeypatch):
    """GRPO over two domains (Mix-RL): every step samples P prompts of EACH domain, G times each,
    in domain blocks, and logs each domain's reward; the adapter is called mixrl."""
    from mopd_mini import grpo
    seen = []
    real = grpo.sample
    monkeypatch.setattr(grpo, "sample", lambda model, tok, exs, **kw: seen.append([e.task for e in exs]) or real(model, tok, exs, **kw))
    cfg = GRPOConfig(domain=("binding", "recall"), steps=2, prompts_per_step=3, group_size=2, eval_every=0,
                     experiment=None, progress=False)
    run = train_grpo(bank, cfg)
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
    run = train_grpo(teacher_bank, cfg)
    for n, t in teacher_bank.state("cascade").items():  # lr ~0: the copy is still the first stage
        assert torch.allclose(t, first[n.replace(".cascade.", ".teacher_binding.")], atol=1e-9)
    assert {"acc/binding/L16", "acc/recall/L16"} <= set(run.metrics[-1])
    with pytest.raises(ValueError, match="init_from"):
        train_grpo(teacher_bank, GRPOConfig(domain="recall", init_from="teacher_recall", experiment=None))
