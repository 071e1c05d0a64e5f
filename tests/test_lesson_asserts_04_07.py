"""Notebooks 04 and 07's asserts, as the library checks the notebooks call: each passes on the
notebook's case and FAILS on a case where the lesson's point is false (the per-token gradient and
the sequence KL's, the clip's bias/variance table, Top-k's zero, 07's grades of a chain answer and
its chance line). tests/test_lessons.py holds the checks of notebooks 02 and 03 and the rest of 04's."""

import json
from pathlib import Path

import pytest
import torch

import factworld
from mopd_mini import lab, starting_points as sp
from mopd_mini.domains import REGIME_DOMAINS

ROOT = Path(__file__).parents[1]
Z_S = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0, -2.0])   # notebook 04's six-token categorical
Z_T = torch.tensor([0.0, 2.5, 0.5, 1.0, -1.0, -3.0])
CLIPS = (None, 5.0, 2.0, 1.0, 0.5, 0.1)                 # the notebook's rows


def _cell(stem: str, cell_id: str) -> str:
    cells = json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text())["cells"]
    (cell,) = [c for c in cells if c.get("id") == cell_id]
    return "".join(cell["source"])


# --- 04 section 2: PG with a return-to-go descends the sequence KL, MOPD-PG does not -------------


def test_pg_with_a_return_to_go_is_the_sequence_kl_gradient_to_1e_10():
    """The sequence KL's gradient by autograd against PG's exact expectation with the return-to-go
    advantage (the stretch exercise's answer): equal to 1e-10; MOPD-PG's own advantage is not."""
    seq = lab.two_step_gradients(samples=1000)["sequence KL"]        # autograd of E[KL_1 + KL_2(y_1)]
    rtg = lab.two_step_pg_gradient(lambda s, t, m: ((t - s) * m).flip(1).cumsum(1).flip(1))
    assert (rtg - seq).abs().max() < 1e-10
    tok = lab.two_step_pg_gradient(lab.per_token_advantage)
    assert (tok - seq).abs().max() > 0.05                            # 0.080 on the third logit


# --- 04 section 1: the clip's bias and variance -----------------------------------------------------


def test_the_clip_table_checks_pass_on_the_notebooks_categorical():
    table = lab.clip_bias_variance(Z_S, Z_T, clips=CLIPS)
    assert lab.clip_table_checks(table, n=16) == {"one sample": 2.0, "mean of 16": None}
    assert "lab.clip_table_checks(table_bv, n=16)" in _cell("04_loss_lab", "c05-bv")


@pytest.mark.parametrize("z_s, z_t, fails", [
    # a categorical where a binding clip (0.5) has the lowest error over 16 samples
    ((3.0, -1.0, -4.0, 1.0, -2.0, -3.0), (1.0, 3.0, -2.0, -1.0, -2.0, 1.0), "over 16 samples an unclipped"),
    # one where a tighter clip LOWERS the bias (1.0 -> 0.5 -> 0.1)
    ((1.0, 1.0, -1.0, -2.0, 3.0, 5.0), (-2.0, -3.0, -8.0, 3.0, -8.0, 0.0), "a tighter clip raises the bias"),
    # one where a tighter clip RAISES the variance (5 -> 2)
    ((2.0, -2.0, 2.0, 4.0, -1.0, 1.0), (4.0, 1.0, 4.0, -1.0, 0.0, 1.0), "a tighter clip lowers the variance"),
])
def test_the_clip_table_checks_fail_where_the_lesson_is_false(z_s, z_t, fails):
    """The table's three relations hold on the notebook's categorical, not on every one: on each of
    these the check names the relation that fails (the notebook says 'this one categorical')."""
    table = lab.clip_bias_variance(torch.tensor(z_s), torch.tensor(z_t), clips=CLIPS)
    with pytest.raises(AssertionError, match=fails):
        lab.clip_table_checks(table, n=16)


# --- 04 section 3: Top-k's zero is not the reverse KL's ---------------------------------------------

Z_T8 = (2.0, 1.5, 1.0, 0.5, 0.0, -0.5, -1.0, -1.5)


def test_topk_blind_spot_check_passes_on_the_notebooks_spreads():
    for off in ((0.0,) * 5, (-1.5, -1.0, -0.5, 0.0, 0.5), (-20.0,) * 4 + (0.0,)):
        lab.topk_blind_spot_check(lab.topk_off_set(Z_T8, 3, off), min_kl=0.04)
    assert "lab.topk_blind_spot_check(r, min_kl=0.04)" in _cell("04_loss_lab", "c10-blind")


def test_topk_blind_spot_check_fails_where_topk_is_the_reverse_kl():
    """k = V - 1: one token off the set, nothing to arrange: the student equal to the teacher on the set
    is the teacher, and the exact KL at Top-k's zero is 0. An off-set spread that matches the
    teacher's (k = 3, the teacher's own logits off the set) is the same false case."""
    with pytest.raises(AssertionError, match="Top-k's zero is not the reverse KL's"):
        lab.topk_blind_spot_check(lab.topk_off_set(Z_T8, 7, (0.0,)), min_kl=0.04)
    with pytest.raises(AssertionError, match="Top-k's zero is not the reverse KL's"):
        lab.topk_blind_spot_check(lab.topk_off_set(Z_T8, 3, Z_T8[3:]), min_kl=0.04)


def test_topk_blind_spot_check_fails_for_a_student_off_the_teacher_on_the_set():
    r = dict(lab.topk_off_set(Z_T8, 3, (0.0,) * 5))
    r["top-k"], r["top-k gradient"] = 0.02, 0.1          # what a student that differs on the set would show
    with pytest.raises(AssertionError, match="the Top-k loss and its gradient are 0"):
        lab.topk_blind_spot_check(r)


# --- 07 section 1: the reward, the prefix trace and the strict trace --------------------------------


@pytest.fixture(scope="module")
def example():
    return REGIME_DOMAINS["chain"].test_examples(3, 1, 0)[0]   # the notebook's example


def test_the_grading_checks_pass_with_the_library_graders(example):
    graded = sp.grade_answers(example)
    sp.grading_checks(graded)
    over = graded["over-running"]
    assert (over["reward"], over["prefix"], over["strict"]) == (0, 1, 0)
    assert "grading_checks(graded)" in _cell("07_regimes", "r07-06")


def test_the_grading_checks_fail_where_the_prefix_trace_requires_the_stop(example):
    """If the 'prefix trace' were the strict one, the over-running answer would score 0 on it: the
    check that it passes the prefix trace fails."""
    graded = sp.grade_answers(example, prefix=factworld.strict_trace)
    with pytest.raises(AssertionError, match="the prefix trace passes a trace that never stops"):
        sp.grading_checks(graded)


def test_the_grading_checks_fail_where_the_reward_sees_the_trace(example):
    """A reward that grades the whole trace and the stop (the strict trace) sees the wrong middle node."""
    graded = sp.grade_answers(example, reward=lambda a, ex: factworld.strict_trace(a, ex.answer))
    with pytest.raises(AssertionError, match="cannot see a wrong intermediate node"):
        sp.grading_checks(graded)


def test_the_grading_checks_fail_where_the_strict_trace_ignores_the_stop(example):
    graded = sp.grade_answers(example, strict=factworld.score)
    with pytest.raises(AssertionError, match="the prefix trace passes a trace that never stops"):
        sp.grading_checks(graded)


def test_the_chance_line_is_the_registered_one():
    """1 / (nodes other than the start) on every evaluated depth: docs/regimes.md's 0.20."""
    chain = REGIME_DOMAINS["chain"]
    for L in chain.eval_lengths:
        assert {sp.chain_chance(e) for e in chain.test_examples(L, 20, 0)} == {0.2}
    assert "| 0.20 (a node other than the start) |" in (ROOT / "docs" / "regimes.md").read_text()
    assert "chain_chance(" in _cell("07_regimes", "r07-12")
