"""Tests for the MOPD student (distill.train_student) and the MOPD objective (distill.mopd_objective,
domain_metrics). Every run is a handful of steps on tiny batches, in memory (experiment=None)."""

import copy
import math

import pytest
import torch

from mopd_mini import AdapterBank, MOPDConfig, train_student
from mopd_mini import routing
from mopd_mini.distill import LOSSES, domain_metrics, mopd_objective
from mopd_mini.rollout import completion_logits, sample

from tests.conftest import TEACHERS, frozen

DOMAINS = ("binding", "recall")
PER_DOMAIN = ("loss", "kl", "sampled_kl", "clipped", "student_topk_mass", "teacher_topk_mass",
              "adv_mean", "adv_min", "adv_max", "tokens", "reward")


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

    self_scores = routing.teacher_outputs(bank, rollout, {"binding": "student", "recall": "twin"}, k=cfg.topk)
    value, info = mopd_objective(cfg, student_logits, rollout, self_scores)
    # ~0 up to fp32 rounding: the routed pass scores with the folded weights W + s B A of the tiny
    # base (routing.FOLDED_LIMIT), the student's forward with W and B A apart
    assert abs(value.item()) < 5e-5
    for key in ("kl", "sampled_kl", "advantage_raw", "advantage", "loss"):
        assert info[key][mask].abs().max() < 5e-5, key
    assert info["clipped"].sum() == 0

    real = routing.teacher_outputs(bank, rollout, TEACHERS, k=cfg.topk)
    _, info = mopd_objective(cfg, student_logits, rollout, real)
    assert info["kl"][mask].mean() > 1e-3


def test_objective_gradient_reaches_the_student_only(teacher_bank, mixed_examples):
    """The objective's gradient flows into the student's logits; the teacher's scores are constants."""
    with teacher_bank.use("teacher_binding") as model:
        rollout = sample(model, teacher_bank.tokenizer, mixed_examples, max_new_tokens=4,
                         generator=torch.Generator().manual_seed(1))
    scores = routing.teacher_outputs(teacher_bank, rollout, TEACHERS, k=8)
    for loss in LOSSES:
        logits = torch.randn(scores.logits.shape, generator=torch.Generator().manual_seed(2), requires_grad=True)
        value, _ = mopd_objective(MOPDConfig(loss=loss, topk=8), logits, rollout, scores)
        value.backward()
        assert logits.grad is not None and logits.grad.abs().sum() > 0
        assert not scores.logits.requires_grad and not scores.logprobs.requires_grad
