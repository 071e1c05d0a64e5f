"""Tests for the notebook-05 helpers in mopd_mini.evaluation: a run's logged accuracies as normalised
scores against prompts seen, and the binomial error of a domain score."""

import math

import numpy as np

from mopd_mini.evaluation import normalised_curve, score_error

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


def fake_report():
    """The shape of docs/baselines.json (studies.baselines.baselines_report), two methods, two seeds."""
    def row(b, r, flops):
        return {"all": {"binding": {"normalised": b}, "recall": {"normalised": r}, "mean": (b + r) / 2},
                "stage": {"flops": flops}, "pipeline": {"flops": flops + 100.0}}
    curve = lambda a: [{"step": s, "prompts": 8 * s, "binding": a * s, "recall": s, "mean": (a + 1) * s / 2}  # noqa: E731
                       for s in (0, 10)]
    return {"rows": {"mopd_pg": {"0": row(0.8, 1.0, 50.0), "1": row(1.0, 0.8, 70.0)},
                     "merge_cat": {"0": row(0.5, 0.5, 0.0), "1": row(0.5, 0.5, 0.0)}},
            "curves": {"mopd_pg": {"0": curve(1.0), "1": curve(3.0)}, "cascade_br": {"0": curve(1.0)}},
            "grid": {"mopd_pg": [{"lr": 1e-3, "mean": 0.9}],
                     "merge_cat": [{"w": 0.5, "binding": 0.1, "recall": 0.2, "mean": 0.15}]}}


def test_baselines_view_reads_the_report():
    from mopd_mini.views import baselines_view
    v = baselines_view(fake_report())
    assert np.allclose(v["scores"]["mopd_pg"]["binding"], (0.9, 0.02 ** 0.5))   # mean and SAMPLE std (ddof 1)
    assert np.allclose(v["scores"]["mopd_pg"]["mean"], (0.9, 0.0))
    stage, pipe = v["cost_panels"].values()
    assert np.allclose(stage["mopd_pg"], (60.0, 0.9, 0.0)) and pipe["merge_cat"][0] == 100.0
    assert v["curves"]["mopd_pg"] == ([0, 80], [0.0, 15.0])          # mean over seeds of (a + 1) s / 2: 10, 20
    assert v["forgetting"]["cascade_br"]["binding"] == ([0, 10], [0.0, 10.0])
    assert v["merges"] == {"cat": {"w 0.5": {"binding": 0.1, "recall": 0.2, "mean": 0.15}}}
