"""docs/glossary.md defines every term that the "Terms" cells of notebooks 05-08 list, and the
README, docs/course.md and those cells link to it (tests/test_links.py checks that the links resolve)."""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
GLOSSARY = ROOT / "docs" / "glossary.md"
TERMS_CELLS = ["05_baselines", "05b_evidence", "06_ablations", "07_regimes", "08_stuck"]


def plain(term: str) -> str:
    return term.replace("`", "").strip().lower()


def glossary_names(text: str) -> set[str]:
    """The names in the first column of the glossary's tables ("a, b / c; d" names a, b, c and d)."""
    names = set()
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("| ") or cells[0] in ("term", "---"):
            continue
        names |= {plain(n) for n in re.split(r",\s|\s/\s|;\s", cells[0])}
    return names


def terms_cell(stem: str) -> list[str]:
    """The terms a notebook's "Terms" cell lists (parenthetical glosses dropped)."""
    cells = json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text())["cells"]
    found = [c["source"] for c in cells if c["cell_type"] == "markdown" and c["source"].startswith("**Terms**")]
    assert len(found) == 1, f"{stem} should have one **Terms** cell"
    assert "(../docs/glossary.md)" in found[0]
    listed = found[0].split("glossary.md): ", 1)[1].rstrip(".")
    return [plain(re.sub(r"\s+\([^()]*\)", "", t)) for t in re.split(r",\s(?![^()]*\))", listed)]


def test_the_glossary_names_are_read():
    names = glossary_names(GLOSSARY.read_text())
    assert {"mix-rl", "rft", "h1-h4", "d_memory", "bracketed", "grid's edge", "stuck share", "mult(gold)"} <= names


@pytest.mark.parametrize("stem", TERMS_CELLS)
def test_every_term_a_notebook_lists_is_in_the_glossary(stem):
    missing = [t for t in terms_cell(stem) if t not in glossary_names(GLOSSARY.read_text())]
    assert missing == [], f"{stem}'s Terms cell lists terms docs/glossary.md does not define: {missing}"


def test_the_terms_cell_sits_right_after_the_goals_cell():
    for stem in TERMS_CELLS:
        cells = json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text())["cells"]
        assert cells[0]["source"].startswith("# ") and cells[1]["source"].startswith("**Terms**"), stem


def test_the_readme_and_the_course_page_link_the_glossary():
    assert "(docs/glossary.md)" in (ROOT / "README.md").read_text()
    assert "(glossary.md)" in (ROOT / "docs" / "course.md").read_text()
