"""Tests for the pure functions of mopd_mini.ablation_runs that notebook 06 prints from: `kl_window`,
`mean_accuracy`, `round1_normalised` and `summary`, on hand-made curves and tables (the studies
themselves train, and run in tests/studies/test_studies_smoke.py)."""

import math
import statistics

import pytest

from mopd_mini.ablation_runs import PAPER_ROUNDS, kl_window, mean_accuracy, round1_normalised, summary

TABLE = {"acc": {
    "base": {"binding": {16: 0.2, 24: 0.4}, "recall": {16: 0.5}},            # 0.3, 0.5
    "teacher_binding": {"binding": {16: 0.8, 24: 1.0}},                      # 0.9: headroom 0.6
    "teacher_recall": {"recall": {16: 0.9}},                                 # 0.9: headroom 0.4
    "student_pg_s0": {"binding": {16: 0.5, 24: 0.7}, "recall": {16: 0.7}},   # normalised 0.5, 0.5
    "student_pg_s1": {"binding": {16: 0.9, 24: 0.9}, "recall": {16: 0.9}},   # normalised 1.0, 1.0
    "uc_s0": {"binding": {16: 0.6, 24: 0.6}, "recall": {16: 0.4}},           # normalised 0.5, -0.25
    "mopd_s0": {"binding": {16: 0.3, 24: 0.3}, "recall": {16: 0.5}},         # normalised 0, 0
}}


def test_kl_window_means_the_first_and_last_share_of_the_logged_steps():
    curve = [{"step": s, "kl/binding": float(s)} for s in range(1, 21)]
    curve.insert(5, {"step": 99, "kl/binding": None})                        # an unlogged step is skipped
    assert kl_window(curve) == (1.5, 19.5)                                   # 10% of 20 steps: 2 each end
    assert kl_window(curve, share=0.25) == (3.0, 18.0)
    assert kl_window(curve[:3], key="kl/binding") == (1.0, 3.0)             # never an empty window
    assert kl_window([{"kl/recall": 2.0}, {"kl/recall": 4.0}], key="kl/recall", share=0.5) == (2.0, 4.0)


def test_mean_accuracy_and_the_round1_normalised_score():
    assert mean_accuracy(TABLE, "base", "binding") == pytest.approx(0.3)
    assert mean_accuracy(TABLE, "teacher_recall", "recall") == pytest.approx(0.9)
    assert round1_normalised(TABLE, "student_pg_s0", "binding") == pytest.approx(0.5)
    assert round1_normalised(TABLE, "uc_s0", "recall") == pytest.approx(-0.25)   # below the base: negative
    flat = {"acc": {**TABLE["acc"], "teacher_recall": {"recall": {16: 0.5}}}}      # no headroom: nan
    assert math.isnan(round1_normalised(flat, "student_pg_s0", "recall"))


def test_summary_of_a_hand_made_study():
    """The rows present in the table and only those; the mean and the sample std over seeds; the
    per-seed mean of binding and recall; UCMOPD's cells per setting and method."""
    curve = [{"gg_kept/binding": 0.2, "gg_kept/recall": 0.4, "tef_masked/binding": 0.0, "tef_masked/recall": 0.1},
             {"gg_kept/binding": 0.4, "gg_kept/recall": 0.6, "tef_masked/binding": 0.2, "tef_masked/recall": 0.3}]
    results = {"table": TABLE, "rounds": {"1": {}, "0": {}},
               "ucmopd": {"0": {"runs": {"uc_s0": {"setting": "two", "method": "ucmopd", "seed": 0, "curve": curve},
                                         "mopd_s0": {"setting": "two", "method": "mopd", "seed": 0}}}}}
    out = summary(results)
    assert out["base"] == pytest.approx({"binding": 0.3, "recall": 0.5})
    assert out["teachers"] == pytest.approx({"binding": 0.9, "recall": 0.9})

    rounds = out["rounds"]
    assert rounds["seeds"] == ["0", "1"] and rounds["paper"] == PAPER_ROUNDS
    assert list(rounds["rows"]) == ["round-1 student"]                        # no round-2 adapter in the table
    row = rounds["rows"]["round-1 student"]
    assert row["per_seed"] == pytest.approx([0.5, 1.0])
    assert row["mean"] == pytest.approx((0.75, statistics.stdev([0.5, 1.0])))
    assert row["binding"] == pytest.approx((0.75, statistics.stdev([0.5, 1.0])))

    cells = out["ucmopd"]["settings"]
    assert list(cells) == ["two"] and set(cells["two"]) == {"mopd", "ucmopd"}
    uc, plain = cells["two"]["ucmopd"], cells["two"]["mopd"]
    assert uc["binding"] == (pytest.approx(0.6), None)                       # one seed: no std
    assert uc["binding_gained"][0] == pytest.approx(0.3) and uc["recall_kept"][0] == pytest.approx(-0.1)
    assert uc["normalised"]["recall"][0] == pytest.approx(-0.25)
    assert uc["gg_kept/binding"][0] == pytest.approx(0.3) and uc["tef_masked/recall"][0] == pytest.approx(0.2)
    assert uc["per_seed"] == {0: pytest.approx((0.5 - 0.25) / 2)}
    assert plain["gg_kept/binding"] == (None, None)                          # a run without a curve
    assert plain["binding_gained"][0] == pytest.approx(0.0)
    assert "rounds" not in summary({"table": TABLE}) and "ucmopd" not in summary({"table": TABLE})
