"""mopd_mini/data/evidence.json, which the widgets of notebooks 05b, 06 and 07 read, is what
`python -m tools.course_data` makes from the committed study JSON now, and each matched pick maps to
the matched study's decisions as studies.matched computes them. What needs the library only (the
package data, the origin and depth picks, the figures) is tested in tests/test_evidence.py."""

import json
from pathlib import Path

import pytest

import matplotlib  # noqa: E402

matplotlib.use("Agg")

from studies import matched  # noqa: E402
from tools import course_data  # noqa: E402
from mopd_mini import evidence  # noqa: E402

ROOT = Path(__file__).parents[2]
VIEW = evidence.load_view()


def test_the_committed_view_is_not_stale():
    assert evidence.VIEW_PATH.read_text() == course_data.text(course_data.make()), \
        f"mopd_mini/data/evidence.json is stale: run `{evidence.MADE_BY}`"


def test_a_changed_study_json_stales_the_view(tmp_path):
    for name in ("matched.json", "ablations.json", "regimes.json", "baselines.json"):
        (tmp_path / name).write_text((ROOT / "docs" / name).read_text())
    rep = json.loads((tmp_path / "matched.json").read_text())
    rep["by_T"]["400"]["rows"]["mixrl"]["0"]["lift"]["mean"] += 0.05
    (tmp_path / "matched.json").write_text(json.dumps(rep))
    assert course_data.text(course_data.make(tmp_path)) != evidence.VIEW_PATH.read_text()


@pytest.mark.parametrize("method", list(evidence.RIVALS))
def test_a_matched_pick_is_the_studys_holm_corrected_comparison(method):
    fam = matched.family(json.loads((ROOT / "docs" / "matched.json").read_text()))
    a, b = evidence.rival_pair(method)
    for T in (100, 200, 400):
        pick = evidence.matched_pick(VIEW, T, method)
        want = fam[(T, a, b)]
        assert pick["picked"]["T"] == T and [r["T"] for r in pick["rows"]] == [100, 200, 400]
        for k in ("diff", "lo", "hi", "p_holm", "alpha_holm", "lo_holm", "hi_holm"):
            assert pick["picked"][k] == pytest.approx(want[k], abs=1e-6), (method, T, k)
        r = pick["picked"]
        assert (r["lo_holm"] > 0 or r["hi_holm"] < 0) == r["resolved_holm"], (method, T)   # the figure's wide bar
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


def test_05b_section_1_draws_the_same_from_the_package_data_as_from_docs():
    """05b's section 1 reads docs/baselines.json trimmed into the package data (a hosted copy has no
    docs/): the view its figures draw is the same as from the full JSON as docs/baselines.md renders it (a
    complete re-check's moved rows in the page's place: studies.baselines.in_use), and so are its printed fields."""
    from mopd_mini import views
    from studies.baselines import in_use
    full = in_use(json.loads((ROOT / "docs" / "baselines.json").read_text()))
    shipped = VIEW["baselines"]
    a, b = views.baselines_view(full), views.baselines_view(shipped)
    assert a.keys() == b.keys()
    for m, sc in a["scores"].items():
        for d, (mean, sd) in sc.items():
            assert b["scores"][m][d][0] == pytest.approx(mean, abs=1e-5) and b["scores"][m][d][1] == pytest.approx(sd, abs=1e-5)
    assert a["merges"].keys() == b["merges"].keys() and a["curves"].keys() == b["curves"].keys()
    assert shipped["command"] == full["command"] and list(shipped["rows"]["mopd_pg"]) == list(full["rows"]["mopd_pg"])
    assert list(shipped["recheck_in_use"]) == list(full.get("recheck_in_use", ()))
