"""Issue 48, the core lessons taught right: the relations notebooks 02-04 assert, computed by the
library, and each changed assert shown to FAIL on a case where the lesson's point is false."""

import re
from pathlib import Path

import pytest
import torch

from mopd_mini import lab

ROOT = Path(__file__).parents[1]


# --- per position, not the sequence (04 section 2) -------------------------------------------------


def test_the_sequence_kl_gradient_is_the_per_token_one_plus_the_return_to_go():
    out = lab.two_step_gradients()
    lab.seq_kl_checks(out)   # every relation the notebook asserts
    seq, tok, rtg = out["sequence KL"], out["per token"], out["return-to-go"]
    assert torch.allclose(tok + rtg, seq, atol=1e-14, rtol=0)
    assert (tok - seq).abs().max() > 0.05, "on this case the dropped term is not small"
    # each term by hand: the return-to-go term is E_{y1}[(e_{y1} - p_1) KL_2(y1)]
    p1, kl_2 = out["p_S(y_1)"], out["KL_2 after y_1"]
    by_hand = sum(p1[y] * (torch.nn.functional.one_hot(torch.tensor(y), 3).double() - p1) * kl_2[y] for y in range(3))
    assert torch.allclose(rtg, by_hand, atol=1e-14, rtol=0)
    # the sequence KL's gradient by finite differences of the sequence KL itself
    def seq_kl(z):
        case = {**lab.TWO_STEP, "student": tuple(z.tolist())}
        lp1, lp2, lq1, lq2 = lab._two_step_tables(torch.tensor(case["student"], dtype=torch.float64), case)
        return ((lp1.exp() * (lp1 - lq1)).sum() + (lp1.exp() * (lp2.exp() * (lp2 - lq2)).sum(-1)).sum()).item()
    z, h = torch.tensor(lab.TWO_STEP["student"], dtype=torch.float64), 1e-6
    fd = torch.tensor([(seq_kl(z + h * e) - seq_kl(z - h * e)) / (2 * h) for e in torch.eye(3, dtype=torch.float64)], dtype=torch.float64)
    assert torch.allclose(fd, seq, atol=1e-8, rtol=0)


def test_the_per_token_check_fails_where_the_later_kl_does_not_depend_on_the_first_token():
    """If KL_2 is the same after every first token (no offsets, one teacher row), the dropped term
    is E[grad log pi(y1)] * KL_2 = 0: per token IS the sequence KL's gradient, and the notebook's
    assert that PG's samples tell them apart fails."""
    flat = {**lab.TWO_STEP, "offsets": ((0.0,) * 3,) * 3, "teacher_2": ((2.0, 0.0, -2.0),) * 3}
    out = lab.two_step_gradients(flat, samples=20_000)
    assert out["return-to-go"].abs().max() < 1e-15
    with pytest.raises(AssertionError, match="the per-token gradient is not the sequence KL's"):
        lab.seq_kl_checks(out)


def test_the_checks_fail_on_a_wrong_identity():
    out = dict(lab.two_step_gradients(samples=20_000))
    out["PG return-to-go"] = out["PG per token"]          # a PG that drops the KL still to come
    with pytest.raises(AssertionError, match="E\\[PG with return-to-go\\]"):
        lab.seq_kl_checks(out)


def test_the_solution_pages_return_to_go_exercise_runs_and_checks():
    page = (ROOT / "notebooks" / "solutions" / "04_loss_lab.md").read_text()
    blocks = [b for b in re.findall(r"```python\n(.*?)```", page, re.S) if "def rtg_advantage" in b]
    assert len(blocks) == 1
    namespace: dict = {}
    exec(blocks[0], namespace)                            # its own asserts: equal to the sequence KL's
    wrong = namespace["lab"].two_step_pg_gradient(namespace["lab"].per_token_advantage)
    assert not torch.allclose(wrong, lab.two_step_gradients()["sequence KL"], atol=1e-3)


# --- Top-k is not the same reverse KL (04 section 3) -------------------------------------------


Z_T8 = (2.0, 1.5, 1.0, 0.5, 0.0, -0.5, -1.0, -1.5)


@pytest.mark.parametrize("off", [(0.0,) * 5, (-1.5, -1.0, -0.5, 0.0, 0.5), (-20.0,) * 4 + (0.0,)])
def test_topk_is_zero_with_zero_gradient_for_any_student_equal_to_the_teacher_on_the_set(off):
    r = lab.topk_off_set(Z_T8, 3, off)
    assert r["top-k"] < 1e-12 and r["top-k gradient"] < 1e-12
    assert r["exact KL"] > 0.04
    p_S, p_T = r["p_S"], r["p_T"]
    assert torch.allclose(p_S[:3], p_T[:3], atol=1e-15) and abs(p_S.sum().item() - 1) < 1e-12


def test_the_worst_case_bound_and_the_false_case():
    """All the off-set mass on the least likely token reaches (1 - m_T) log((1 - m_T) / min p_T);
    with one token off the set there is nothing to arrange: the exact KL is 0 too, and the
    notebook's assert `exact KL > 0.04` fails (Top-k is then the reverse KL's zero)."""
    r = lab.topk_off_set(Z_T8, 3, (-30.0,) * 4 + (0.0,))
    m = r["teacher top-k mass"]
    bound = (1 - m) * torch.log((1 - m) / r["p_T"][-1]).item()
    assert r["exact KL"] == pytest.approx(bound, rel=1e-6)
    full = lab.topk_off_set(Z_T8, 7, (0.0,))
    with pytest.raises(AssertionError):
        assert full["top-k"] < 1e-12 and full["top-k gradient"] < 1e-12 and full["exact KL"] > 0.04


# --- 02's reward and schedule, as the config and the code have them -------------------------------


def _cell(stem: str, cell_id: str) -> str:
    import json

    cells = json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text())["cells"]
    (cell,) = [c for c in cells if c.get("id") == cell_id]
    return "".join(cell["source"])


def test_02s_text_quotes_the_configs_schedule_and_budget():
    from mopd_mini import GRPOConfig

    cfg = GRPOConfig.for_model("tiny", domain="binding")
    text = _cell("02_teachers", "c06")
    assert int(re.search(r"evaluates it every (\d+) steps \(`eval_every`\)", text).group(1)) == cfg.eval_every
    assert int(re.search(r"checkpoints every (\d+) steps \(`checkpoint_every`", text).group(1)) == cfg.checkpoint_every
    reward = _cell("02_teachers", "c04")
    assert f"`max_new_tokens` ({cfg.max_new_tokens} on the tiny model" in reward
    assert "exact-match" not in _cell("02_teachers", "c16")


def test_the_reward_is_a_prefix_match_times_ended():
    """What 02's reward cell asserts, on the library: a right answer followed by more words scores 1,
    a right start that never ends scores 0."""
    import factworld

    assert factworld.score("g0. g3", "g0.") == 1 and factworld.score("g3 g0.", "g0.") == 0


# --- 03 step 5: MOPD-PG's gradient on every logit, with the 1/B' ----------------------------------


def _pg_case(seed: int = 0):
    from mopd_mini import losses

    g = torch.Generator().manual_seed(seed)
    B, C, V = 4, 5, 7
    logits = torch.randn(B, C, V, generator=g, dtype=torch.float64).requires_grad_(True)
    ids = torch.randint(V, (B, C), generator=g)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [0, 0, 0, 0, 0], [1, 0, 0, 0, 0]], dtype=torch.float64)
    teacher = torch.randn(B, C, V, generator=g, dtype=torch.float64).log_softmax(-1).gather(-1, ids[..., None])[..., 0] * 4
    return losses, logits, ids, mask, teacher


@pytest.mark.parametrize("clip", [5.0, 0.5, None])
def test_the_closed_form_matches_autograd_on_every_logit(clip):
    losses, logits, ids, mask, teacher = _pg_case()
    student = logits.log_softmax(-1).gather(-1, ids[..., None])[..., 0]
    loss, info = losses.pg_loss(student, teacher, mask, clip=clip)
    loss.backward()
    assert lab.check_pg_logit_gradient(logits.grad, logits, ids, info["advantage"], mask) < 1e-12
    assert (logits.grad[2] == 0).all()   # the empty completion: no gradient, and not counted in B' = 3


def test_the_gradient_check_fails_without_the_stopgrad_or_the_1_over_B_prime():
    losses, logits, ids, mask, teacher = _pg_case()
    student = logits.log_softmax(-1).gather(-1, ids[..., None])[..., 0]
    advantage = (teacher - student).clamp(-5, 5)
    # no stop-gradient: the advantage's own -log pi_S adds a gradient
    (-losses.masked_mean(advantage * student, mask)).backward()
    with pytest.raises(AssertionError, match="autograd's gradient differs"):
        lab.check_pg_logit_gradient(logits.grad, logits, ids, advantage, mask)
    # a sum over the completions (no 1/B'): B' = 3 times too large
    logits.grad = None
    student = logits.log_softmax(-1).gather(-1, ids[..., None])[..., 0]
    per_seq = (mask * advantage.detach() * student).sum(1) / mask.sum(1).clamp(min=1)
    (-per_seq.sum()).backward()
    with pytest.raises(AssertionError, match="autograd's gradient differs"):
        lab.check_pg_logit_gradient(logits.grad, logits, ids, advantage, mask)
