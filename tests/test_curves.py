"""Tests for the notebook-05 helpers in mopd_mini.evaluate: a run's logged accuracies as normalised
scores against prompts seen, and the binomial error of a domain score."""

import math

from mopd_mini.evaluate import normalised_curve, score_error

TABLE = {"n": 100, "floor": {}, "acc": {
    "base": {"binding": {16: 0.4, 24: 0.2}, "recall": {16: 0.5}},
    "teacher_binding": {"binding": {16: 0.8, 24: 0.6}, "recall": {16: 0.4}},
    "teacher_recall": {"binding": {16: 0.3, 24: 0.2}, "recall": {16: 0.9}}}}


def test_normalised_curve_is_the_ratio_at_each_evaluated_step():
    """Rows without an evaluation are skipped; prompts = step x prompts per step; the mean is over domains."""
    metrics = [{"step": 10, "acc/binding/L16": 0.6, "acc/binding/L24": 0.4, "acc/recall/L16": 0.9},
               {"step": 11, "reward": 0.5},
               {"step": 20, "acc/binding/L16": 0.8, "acc/binding/L24": 0.6, "acc/recall/L16": 0.5}]
    c = normalised_curve(metrics, TABLE, prompts_per_step=8)
    assert c["prompts"] == [80, 160]
    assert [round(v, 6) for v in c["binding"]] == [0.5, 1.0]   # (0.5 - 0.3) / (0.7 - 0.3), then the teacher
    assert [round(v, 6) for v in c["recall"]] == [1.0, 0.0]
    assert [round(v, 6) for v in c["mean"]] == [0.75, 0.5]


def test_normalised_curve_takes_the_domains_that_were_logged():
    """A cascade's first stage logs one domain only: the curve has that domain alone."""
    c = normalised_curve([{"step": 5, "acc/recall/L16": 0.7}], TABLE, prompts_per_step=4)
    assert set(c) == {"prompts", "recall", "mean"} and math.isclose(c["mean"][0], 0.5)


def test_score_error_is_the_binomial_error_of_the_mean_over_lengths():
    expected = math.sqrt(0.4 * 0.6 / 100 + 0.2 * 0.8 / 100) / 2
    assert math.isclose(score_error(TABLE, "base", "binding"), expected)
    assert math.isclose(score_error(TABLE, "base", "binding", lengths=(16,)), math.sqrt(0.24 / 100))
