"""Tests for mopd_mini.evidence, read from the committed mopd_mini/data/evidence.json: the view
ships as package data, the origin and depth picks hold the values of the study JSON they came from
(docs/ablations.json, docs/regimes.json), and every figure of a pick says what it draws. That the
view is not stale, and the matched picks, are tested beside the tool that makes it
(tests/tools/test_course_data.py)."""

import json
from pathlib import Path

import pytest

import matplotlib  # noqa: E402

matplotlib.use("Agg")

from mopd_mini import evidence  # noqa: E402
from tests.test_plots import assert_labelled  # noqa: E402

ROOT = Path(__file__).parents[1]
VIEW = evidence.load_view()


def test_the_view_ships_as_package_data():
    import fnmatch
    import tomllib

    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["mopd_mini"]
    rel = evidence.VIEW_PATH.relative_to(Path(evidence.__file__).parent).as_posix()
    assert any(fnmatch.fnmatch(rel, p) for p in patterns)


def test_an_origin_pick_reads_the_ablation_curves():
    rep = json.loads((ROOT / "docs" / "ablations.json").read_text())
    one = evidence.origin_pick(VIEW, "topk", "1")
    runs = rep["origin"]["1"]["runs"]
    assert one["other"] == pytest.approx([r["kl/binding"] for r in runs["foreign_topk_s1"]["curve"]], abs=1e-6)
    assert one["same"] == pytest.approx([r["kl/binding"] for r in runs["student_topk_s1"]["curve"]], abs=1e-6)
    mean = evidence.origin_pick(VIEW, "pg")
    assert mean["seeds"] == rep["summary"]["origin"]["seeds"]
    assert mean["same"][0] == pytest.approx(sum(rep["origin"][s]["runs"][f"student_pg_s{s}"]["curve"][0]["kl/binding"]
                                                for s in mean["seeds"]) / len(mean["seeds"]), abs=1e-6)


def test_a_depth_pick_reads_arm_2s_per_seed_rows():
    rep = json.loads((ROOT / "docs" / "regimes.json").read_text())
    pick = evidence.depth_pick(VIEW, 2, "acc")
    row = next(r for r in rep["runs"]["2|mopd_kl|1"]["test"] if r["length"] == 2)
    assert pick["methods"]["mopd_kl"]["per_seed"]["1"] == pytest.approx(row["acc"])
    assert pick["methods"]["mopd_kl"]["mean"] == pytest.approx(rep["views"]["2"]["methods"]["mopd_kl"]["by_length"]["chain"]["2"])
    assert not pick["held_out"] and evidence.depth_pick(VIEW, 4, "trace")["held_out"]
    with pytest.raises(KeyError):
        evidence.depth_pick(VIEW, 7)


FIGURES = {
    "matched_figure (05b)": lambda: evidence.matched_figure(evidence.matched_pick(VIEW, 400, "mopd_pg")),
    "origin_figure (06)": lambda: evidence.origin_figure(evidence.origin_pick(VIEW, "pg", "0"), ymax=1.0),
    "depth_figure (07)": lambda: evidence.depth_figure(evidence.depth_pick(VIEW, 4, "trace")),
}


@pytest.mark.parametrize("name", FIGURES)
def test_every_pick_figure_has_a_title_and_axis_labels(name):
    assert_labelled(FIGURES[name]())
