"""A study's page is rendered only from a JSON that passes one schema check (studies.slices.read_record:
finite numbers, accuracies in [0, 1], normalised scores their accuracies' ones, the sections the renderer
reads), which fails naming the file, the key and what it expected; and a render never writes a page, or
rewrites a section of its store, from fewer table rows or records than the page already shows, unless
told to (--allow-shrink, recorded in the JSON and said on the page). One test per renderer: studies.
baselines, matched, ablations, regimes --render, and tools.findings."""

import json
import shutil
from pathlib import Path

import pytest

from studies import slices

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def copy_docs(tmp_path: Path, *names: str) -> Path:
    out = tmp_path / "docs"
    out.mkdir()
    for n in names:
        (out / n).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(DOCS / n, out / n)
    return out


def files(folder: Path) -> dict:
    return {str(f.relative_to(folder)): f.read_bytes() for f in sorted(folder.rglob("*")) if f.is_file()}


def write(path: Path, data) -> Path:
    path.write_text(json.dumps(data, indent=1))
    return path


# ------------------------------------------------------------------------------ the schema check


def baselines_json() -> dict:
    return json.loads((DOCS / "baselines.json").read_text())


@pytest.mark.parametrize("case, pattern", [
    ("truncated", r"baselines.json: not valid JSON \(.*\); a truncated or hand-edited file\? Restore it with git checkout"),
    ("no rows", r"baselines.json: key 'rows' is missing: expected a mapping with at least one record"),
    ("a string for a number", r"baselines.json: key 'rows.mopd_pg.0.all.mean': expected a finite number, found a str"),
    ("a string for a mapping", r"baselines.json: key 'rows.mopd_pg': expected a mapping with at least one record, "
                               r"found a str"),
    ("nan", r"baselines.json: key 'rows.mopd_pg.1.all.binding.se': expected a finite number, found nan"),
    ("accuracy 7.5", r"baselines.json: key 'rows.mopd_pg.0.acc.binding.16': expected an accuracy in \[0, 1\], found 7.5"),
    ("score 7.5", r"baselines.json: key 'rows.mopd_pg.0.all.mean': expected the mean of its domains' normalised "
                  r"scores, 0.88\d+, found 7.5"),
])
def test_the_schema_check_names_the_file_the_key_and_what_it_expected(tmp_path, case, pattern):
    rep = baselines_json()
    path = tmp_path / "baselines.json"
    if case == "truncated":
        path.write_text((DOCS / "baselines.json").read_text()[:5000])
    else:
        if case == "no rows":
            del rep["rows"]
        elif case == "a string for a number":
            rep["rows"]["mopd_pg"]["0"]["all"]["mean"] = "0.88"
        elif case == "a string for a mapping":
            rep["rows"]["mopd_pg"] = "see the notebook"
        elif case == "nan":
            rep["rows"]["mopd_pg"]["1"]["all"]["binding"]["se"] = float("nan")
        elif case == "accuracy 7.5":
            rep["rows"]["mopd_pg"]["0"]["acc"]["binding"]["16"] = 7.5
        else:
            rep["rows"]["mopd_pg"]["0"]["all"]["mean"] = 7.5
        write(path, rep)
    with pytest.raises(slices.RecordError, match=pattern):
        slices.read_record(path, "baselines")


def test_nan_is_accepted_only_where_a_normalised_score_is_undefined():
    """A smoke run's teachers equal the base (denominator 0): its normalised scores are NaN, and its page renders;
    the same NaN beside a denominator that is not 0 is refused."""
    nan = float("nan")
    rep = baselines_json()
    row = rep["rows"]["mopd_pg"]["0"]["all"]
    row["binding"].update(teacher=row["binding"]["base"], denominator=0.0, normalised=nan, se=nan)
    row["mean"] = row["mean_se"] = nan
    slices.check_record(rep, "baselines", Path("b.json"))
    row["binding"]["denominator"] = 0.3
    with pytest.raises(slices.RecordError, match=r"b.json: key 'rows.mopd_pg.0.all.mean': expected a finite number"):
        slices.check_record(rep, "baselines", Path("b.json"))
    row["mean"] = 0.5
    with pytest.raises(slices.RecordError, match=r"key 'rows.mopd_pg.0.all.binding.normalised': expected a finite "
                                                 r"number \(its denominator is 0.3\), found nan"):
        slices.check_record(rep, "baselines", Path("b.json"))


def test_every_committed_study_json_passes_the_check():
    for study in ("baselines", "matched", "ablations", "regimes", "results"):
        slices.read_record(DOCS / f"{study}.json", study)


def test_a_shrinking_render_is_refused_unless_told_and_then_recorded(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("# P\n\n| a | b |\n| --- | --- |\n| 1 | 2 |\n| 3 | 4 |\n")
    smaller = "# P\n\n| a | b |\n| --- | --- |\n| 1 | 2 |\n"
    data = {}
    with pytest.raises(slices.ShrinkError, match=r"p.md would show 2 table rows where it shows 3 .*--allow-shrink"):
        slices.guard_render(page, smaller, tmp_path / "p.json", data)
    assert data == {}
    text = slices.guard_render(page, smaller, tmp_path / "p.json", data, allow_shrink=True)
    assert data[slices.SHRINK][0]["rows"] == [3, 2] and data[slices.SHRINK][0]["page"] == "p.md"
    assert text.startswith(smaller.rstrip()) and "**Partial on purpose**" in text and "2 table rows where the page showed 3" in text
    page.write_text(text)
    assert slices.guard_render(page, smaller, tmp_path / "p.json", data) == text   # said again on every render
    assert slices.guard_render(page, smaller + "| 5 | 6 |\n", tmp_path / "p.json", {}) == smaller + "| 5 | 6 |\n"
    with pytest.raises(slices.ShrinkError, match=r"section 'views' would hold 1 values where it holds 2"):
        slices.guard_render(tmp_path / "none.md", "", tmp_path / "p.json", {}, sections={"views": ({"a": [1, 2]}, {"a": [1]})})


# ------------------------------------------------------------------------------ one test per renderer


def test_baselines_render_checks_its_json_and_never_shrinks_the_page(tmp_path):
    from studies import baselines

    out = copy_docs(tmp_path, "baselines.md")
    before = files(out)
    rep = baselines_json()
    rep["rows"]["mopd_pg"]["0"]["acc"]["binding"]["16"] = 7.5
    with pytest.raises(SystemExit, match=r"bad.json: key 'rows.mopd_pg.0.acc.binding.16': expected an accuracy"):
        baselines.main(["--render", str(write(tmp_path / "bad.json", rep)), "--out", str(out)])
    rep = baselines_json()
    del rep["protocol"]["teacher"]           # beyond the schema: the render's own KeyError, named with the file
    with pytest.raises(SystemExit, match=r"bad.json: the page cannot be rendered from it \(no key 'teacher'\); "
                                         r"nothing was written"):
        baselines.main(["--render", str(write(tmp_path / "bad.json", rep)), "--out", str(out)])
    rep = baselines_json()                   # a JSON of fewer records: the page would lose rows
    for per in rep["rows"].values():
        per.pop("2")
    rep["protocol"]["seeds_done"] = [0, 1]
    with pytest.raises(SystemExit, match=r"baselines.md would show \d+ table rows where it shows \d+"):
        baselines.main(["--render", str(write(tmp_path / "fewer.json", rep)), "--out", str(out)])
    assert files(out) == before              # nothing written: no page, no JSON, no figure


def test_matched_render_checks_its_json_and_never_shrinks_the_page(tmp_path):
    from studies import matched

    out = copy_docs(tmp_path, "matched.md")
    before = files(out)
    rep = json.loads((DOCS / "matched.json").read_text())
    rep["by_T"]["100"]["rows"]["mopd_kl"]["1"]["lift"]["mean"] = float("nan")
    with pytest.raises(SystemExit, match=r"bad.json: key 'by_T.100.rows.mopd_kl.1.lift.mean': expected a finite number"):
        matched.main(["--render", str(write(tmp_path / "bad.json", rep)), "--out", str(out)])
    (tmp_path / "cut.json").write_text((DOCS / "matched.json").read_text()[:-100])
    with pytest.raises(SystemExit, match=r"cut.json: not valid JSON"):
        matched.main(["--render", str(tmp_path / "cut.json"), "--out", str(out)])
    rep = json.loads((DOCS / "matched.json").read_text())
    del rep["by_T"]["400"]                   # one teacher budget fewer
    with pytest.raises(SystemExit, match=r"matched.md would show \d+ table rows where it shows \d+"):
        matched.main(["--render", str(write(tmp_path / "fewer.json", rep)), "--out", str(out)])
    assert files(out) == before
    matched.main(["--render", str(tmp_path / "fewer.json"), "--out", str(out), "--allow-shrink"])   # on purpose
    page = (out / "matched.md").read_text()
    assert page.rstrip().splitlines()[-1].startswith("**Partial on purpose**") and "rendered from fewer.json with " \
        "--allow-shrink, " in page
    [said] = json.loads((out / "matched.json").read_text())[slices.SHRINK]
    assert said["page"] == "matched.md" and said["rows"][0] > said["rows"][1]
    matched.main(["--render", str(out / "matched.json"), "--out", str(out)])   # the label stays on every render
    assert (out / "matched.md").read_text() == page


def test_ablations_render_checks_its_json_and_never_shrinks_the_page(tmp_path, monkeypatch):
    from studies import ablations

    out = copy_docs(tmp_path, "ablations.md")
    monkeypatch.setattr(ablations, "DOCS", out)
    before = files(out)
    rep = json.loads((DOCS / "ablations.json").read_text())
    rep["table"]["acc"]["base"]["binding"]["16"] = 1.5
    with pytest.raises(SystemExit, match=r"bad.json: key 'table.acc.base.binding.16': expected an accuracy in \[0, 1\]"):
        ablations.main(["--render", str(write(tmp_path / "bad.json", rep))])
    rep = json.loads((DOCS / "ablations.json").read_text())
    rep["settings"] = "300 steps"
    with pytest.raises(SystemExit, match=r"bad.json: key 'settings': expected a mapping, found a str"):
        ablations.main(["--render", str(write(tmp_path / "bad.json", rep))])
    rep = json.loads((DOCS / "ablations.json").read_text())
    del rep["control"], rep["ucmopd_own"]    # two studies fewer: their rows would go
    with pytest.raises(SystemExit, match=r"ablations.md would show \d+ table rows where it shows \d+"):
        ablations.main(["--render", str(write(tmp_path / "fewer.json", rep))])
    assert files(out) == before


def test_regimes_render_checks_its_store_and_never_shrinks_the_page_or_its_views(tmp_path):
    from studies import regimes

    out = copy_docs(tmp_path, "regimes.json", "regimes.md", "matched.json")
    data = json.loads((out / "regimes.json").read_text())
    del data["runs"]                         # the case: was rc 0, 1,027 -> 521 lines, "views" emptied
    write(out / "regimes.json", data)
    before = files(out)
    with pytest.raises(SystemExit, match=r"regimes.json: key 'runs' is missing: expected a mapping with at least one record"):
        regimes.main(["--render", "--out", str(out)])
    assert files(out) == before
    data = json.loads((DOCS / "regimes.json").read_text())
    data["runs"] = {k: r for k, r in data["runs"].items() if not k.startswith("1b|")}   # arm 1b's records lost
    write(out / "regimes.json", data)
    before = files(out)
    with pytest.raises(SystemExit, match=r"regimes.md would show \d+ table rows where it shows \d+; .*regimes.json's "
                                         r"section 'views' would hold \d+ values where it holds \d+ .*--allow-shrink"):
        regimes.main(["--render", "--out", str(out)])
    assert files(out) == before              # the page, the views and the figures as they were


def test_findings_read_the_json_through_the_check(tmp_path):
    from tools import findings

    data = copy_docs(tmp_path, "matched.json", "regimes.json", "ablations.json", "baselines.json", "results.json",
                     "figures/token_kl.json")
    assert findings.check(ROOT, data) == []
    rep = json.loads((data / "matched.json").read_text())
    del rep["by_T"]["400"]["rows"]
    write(data / "matched.json", rep)
    with pytest.raises(SystemExit, match=r"matched.json: key 'by_T.400.rows' is missing"):   # was "no such finding"
        findings.check(ROOT, data)
    (data / "baselines.json").write_text("{")
    with pytest.raises(SystemExit, match=r"baselines.json: not valid JSON"):
        findings.render("baselines/ranking", data)
