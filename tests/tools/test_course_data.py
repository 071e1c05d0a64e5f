"""The widgets of notebooks 05b, 06 and 07 read mopd_mini/data/evidence.json: it is what
`python -m tools.course_data` makes from the committed study JSON now, each pick maps to the
values of that JSON (the matched study's decisions as bench.matched computes them), and every
figure of a pick says what it draws."""

import json
from pathlib import Path

import pytest

import matplotlib  # noqa: E402

matplotlib.use("Agg")

from studies import matched  # noqa: E402
from tools import course_data  # noqa: E402
from mopd_mini import evidence  # noqa: E402
from tests.test_plots import assert_labelled  # noqa: E402

ROOT = Path(__file__).parents[2]
VIEW = evidence.load_view()


def test_the_committed_view_is_not_stale():
    assert evidence.VIEW_PATH.read_text() == course_data.text(course_data.make()), \
        f"mopd_mini/data/evidence.json is stale: run `{evidence.MADE_BY}`"


def test_a_changed_study_json_stales_the_view(tmp_path):
    for name in ("matched.json", "ablations.json", "regimes.json"):
        (tmp_path / name).write_text((ROOT / "docs" / name).read_text())
    rep = json.loads((tmp_path / "matched.json").read_text())
    rep["by_T"]["400"]["rows"]["mixrl"]["0"]["lift"]["mean"] += 0.05
    (tmp_path / "matched.json").write_text(json.dumps(rep))
    assert course_data.text(course_data.make(tmp_path)) != evidence.VIEW_PATH.read_text()


def test_the_view_ships_as_package_data():
    import fnmatch
    import tomllib

    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["mopd_mini"]
    rel = evidence.VIEW_PATH.relative_to(Path(evidence.__file__).parent).as_posix()
    assert any(fnmatch.fnmatch(rel, p) for p in patterns)


@pytest.mark.parametrize("method", list(evidence.RIVALS))
def test_a_matched_pick_is_the_studys_holm_corrected_comparison(method):
    fam = matched.family(json.loads((ROOT / "docs" / "matched.json").read_text()))
    a, b = evidence.rival_pair(method)
    for T in (100, 200, 400):
        pick = evidence.matched_pick(VIEW, T, method)
        want = fam[(T, a, b)]
        assert pick["picked"]["T"] == T and [r["T"] for r in pick["rows"]] == [100, 200, 400]
        for k in ("diff", "lo", "hi", "p_holm"):
            assert pick["picked"][k] == pytest.approx(want[k], abs=1e-6), (method, T, k)
        assert pick["picked"]["resolved_holm"] == want["resolved_holm"] and pick["m"] == want["m"]


def test_05bs_question_has_the_answer_the_json_gives():
    """At which T can you tell MOPD from Mix-RL? Only MOPD-PG at T = 400 survives Holm; exact KL
    minus RFT at T = 400 is resolved uncorrected only."""
    fam = matched.family(json.loads((ROOT / "docs" / "matched.json").read_text()))
    survivors = sorted((T, a) for (T, a, b), v in fam.items() if v["resolved_holm"] and v["n"] >= matched.FIVE)
    assert {m: evidence.told_apart(VIEW, m) for m in evidence.RIVALS} == {
        m: [T for T, a in survivors if (a, evidence.rival_pair(m)[1]) == evidence.rival_pair(m)] for m in evidence.RIVALS}
    kl_rft = evidence.matched_pick(VIEW, 400, "mopd_kl-rft")["picked"]
    assert kl_rft["resolved"] and not kl_rft["resolved_holm"]
    with pytest.raises(KeyError, match="T = 300"):
        evidence.matched_pick(VIEW, 300, "mopd_kl")


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


def test_the_pickers_offer_the_studys_settings_and_draw_headless():
    widgets = pytest.importorskip("mopd_mini.widgets")
    m = widgets.matched_picker()
    assert widgets.options(m.controls["T"]) == [100, 200, 400] and m.controls["T"].value == 400
    assert widgets.options(m.controls["method"]) == list(evidence.RIVALS)
    assert m.show(T=400, method="mopd_pg")["picked"]["resolved_holm"]
    m.controls["method"].value = "mopd_pg"
    assert "resolved below 0" in m.note.value
    o, d = widgets.origin_picker(), widgets.depth_picker()
    assert widgets.options(o.controls["seed"]) == ["mean", *VIEW["origin"]["seeds"]]
    assert widgets.options(d.controls["depth"]) == [2, 3, 4, 5]
    for p in (m, o, d):
        p.warming.join()
        assert len(p.cache) == len(widgets.every(p.controls, *p.controls)())
