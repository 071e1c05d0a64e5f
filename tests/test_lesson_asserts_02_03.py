"""Notebooks 02 and 03's asserts, moved into library functions (`evaluation.teacher_lift_check`,
`lab.kl_on_answer_token`, `lab.check_pg_logit_gradient`): each is shown to FAIL on a case where
the lesson's point is false, where the assert it replaced passed, and to pass on a case where the
point holds. The notebooks are checked to call them."""

import copy
import json
from pathlib import Path

import pytest
import torch

from mopd_mini import lab
from mopd_mini.evaluation import domain_score, teacher_lift_check

ROOT = Path(__file__).parents[1]


def _source(stem: str, cell_id: str) -> str:
    cells = json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text())["cells"]
    (cell,) = [c for c in cells if c.get("id") == cell_id]
    return "".join(cell["source"])


def _table(acc: dict) -> dict:
    return {"acc": acc, "floor": {}, "n": 64, "split": "test"}


# --- 02 section 5: the lift at the lengths never trained on -------------------------------------------

MEASURED = {  # a CI-mode cross table (n = 64): held-out lift binding +0.31, recall +0.47
    "base": {"binding": {16: 0.62, 24: 0.42, 32: 0.27}, "recall": {16: 0.61, 24: 0.31}},
    "teacher_binding": {"binding": {16: 0.91, 24: 0.78, 32: 0.53}, "recall": {16: 0.34, 24: 0.11}},
    "teacher_recall": {"binding": {16: 0.69, 24: 0.52, 32: 0.30}, "recall": {16: 0.91, 24: 0.78}}}


def test_02_passes_where_each_teacher_lifts_its_held_out_lengths():
    out = teacher_lift_check(_table(MEASURED))
    assert out["binding"]["held_out"] == pytest.approx(0.31) and out["recall"]["held_out"] == pytest.approx(0.47)
    assert out["binding"]["others"] == {"teacher_recall": pytest.approx(0.5033, abs=1e-4)}


def test_02_fails_for_a_teacher_that_lifts_only_the_trained_length():
    """The binding teacher lifts the trained L16 by +0.38, the never-trained L24 by +0.20 and L32 by 0:
    the old assert (the lift over all lengths, +0.19, above 0.15) passes; the held-out lift is +0.10
    and the check fails."""
    acc = copy.deepcopy(MEASURED)
    acc["teacher_binding"]["binding"] = {16: 1.0, 24: 0.62, 32: 0.27}
    table = _table(acc)
    assert domain_score(table, "teacher_binding", "binding") - domain_score(table, "base", "binding") > 0.15  # old: passes
    with pytest.raises(AssertionError, match="the binding teacher should beat the base by more than 0.15 at L24, L32"):
        teacher_lift_check(table)


def test_02_fails_where_the_other_teacher_is_better_on_the_domain():
    acc = copy.deepcopy(MEASURED)
    acc["teacher_binding"]["recall"] = {16: 0.95, 24: 0.80}
    with pytest.raises(AssertionError, match="teacher_recall should be the best on recall"):
        teacher_lift_check(_table(acc))


def test_02_calls_the_check():
    assert "teacher_lift_check(table" in _source("02_teachers", "c13")


# --- 03 section 3: the KL sits on the answer token, per domain ------------------------------------------


def _trace(kl_by_domain: dict, steps=(1, 10, 25)) -> list[dict]:
    """Four tracked 3-token samples per domain and step, each with the given per-position KL."""
    return [{"step": s, "domain": d, "kl": list(kl), "advantage": [0.0] * 3, "advantage_raw": [0.0] * 3}
            for s in steps for d, kl in kl_by_domain.items() for _ in range(4)]


def test_03_passes_where_each_domain_has_its_kl_on_the_answer_token():
    by_step = lab.answer_kl(_trace({"binding": (0.3, 0.004, 0.0), "recall": (2.4, 0.01, 0.0)}))
    out = lab.kl_on_answer_token(by_step)
    assert out["binding"] == pytest.approx((0.3, 0.002)) and out["recall"] == pytest.approx((2.4, 0.005))


def test_03_fails_where_one_domains_kl_sits_after_the_answer_token():
    """Binding's KL is as large on the period and end token as on the answer (0.1 each), hidden in
    the old assert's sum over the domains by recall's large t0 KL: the old assert passes, the
    per-domain check fails on binding."""
    by_step = lab.answer_kl(_trace({"binding": (0.1, 0.1, 0.1), "recall": (9.0, 0.0, 0.0)}))
    on_t0 = sum(a for per_domain in by_step.values() for a, _ in per_domain.values())
    after_t0 = sum(b for per_domain in by_step.values() for _, b in per_domain.values())
    assert after_t0 < 0.1 * on_t0                                                  # the old assert: passes
    with pytest.raises(AssertionError, match="on binding, the tokens after the answer token"):
        lab.kl_on_answer_token(by_step)


def test_03_calls_the_checks():
    assert "lab.kl_on_answer_token(by_step" in _source("03_mopd", "slider-numbers")
    assert "lab.check_pg_logit_gradient(" in _source("03_mopd", "c10")
    assert "lab.kl_falls(" in _source("03_mopd", "c18")


# --- 03 step 5: the sign the formula forces, and the gradient check that can fail ------------------------


def test_03_the_sign_passes_for_a_wrong_gradient_the_full_check_catches():
    """A loss summed over the completions (no 1/B') and over the tokens (no 1/L_b) has the same sign
    on every sampled token's own logit, so the old sign-only assert passes; the every-logit check
    against -M clip(A) / (B' L_b) (e_y - pi_S) fails. On the library's loss it passes."""
    from mopd_mini import losses

    g = torch.Generator().manual_seed(0)
    B, C, V = 3, 4, 6
    logits = torch.randn(B, C, V, generator=g, dtype=torch.float64).requires_grad_(True)
    ids = torch.randint(V, (B, C), generator=g)
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1], [1, 1, 0, 0]], dtype=torch.float64)
    teacher = torch.randn(B, C, generator=g, dtype=torch.float64) * 3 - 2
    student = logits.log_softmax(-1).gather(-1, ids[..., None])[..., 0]
    A = (teacher - student).detach().clamp(-5, 5)
    (-(mask * A * student).sum()).backward()                                       # no 1/B', no 1/L_b
    at_token = logits.grad.gather(-1, ids[..., None])[..., 0]
    active = mask.bool() & (A.abs() > 1e-6)
    assert (at_token[active].sign() == -A[active].sign()).all()                   # the sign: passes
    with pytest.raises(AssertionError, match="autograd's gradient differs"):
        lab.check_pg_logit_gradient(logits.grad, logits, ids, A, mask)
    logits.grad = None
    student = logits.log_softmax(-1).gather(-1, ids[..., None])[..., 0]
    loss, info = losses.pg_loss(student, teacher, mask, clip=5.0)
    loss.backward()
    assert lab.check_pg_logit_gradient(logits.grad, logits, ids, info["advantage"], mask) < 1e-12
