"""The pages agree with the course as it is: no page calls a notebook that exists "planned" or "not
written", and every notebook's time is the same number wherever it is printed (the notebook's own
**Time:** line, the README's course map, docs/course.md's time table and docs/instructor.md's
lecture plan), with the totals equal to the sum of the parts.

One source of truth for the times is docs/course.md's table (written from `python -m
mopd_mini.course`); the others quote it, and this test is what keeps the quotes from drifting.
"""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
STEMS = [p.stem for p in NOTEBOOKS]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
NOT_YET = re.compile(r"\bplanned\b|\bnot (?:yet )?written\b|\bnot written yet\b", re.IGNORECASE)


def paragraphs(text: str) -> list[str]:
    return [p for p in re.split(r"\n\s*\n", text) if p.strip()]


def markdown_of(notebook: Path) -> str:
    cells = json.loads(notebook.read_text())["cells"]
    return "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


def names_notebook(paragraph: str, stem: str) -> bool:
    """The paragraph names this notebook: by its file stem, or as "notebook(s) NN ..." / "NN and"."""
    number = stem[:2]
    if stem in paragraph:
        return True
    return re.search(rf"\b(?:notebooks?|lectures?)\s+(?:\d\d(?:,\s*|\s+and\s+))*{number}\b", paragraph,
                     re.IGNORECASE) is not None


def stale_mentions(text: str) -> list[str]:
    """Paragraphs that call an existing notebook planned or not written."""
    return [p.strip()[:160] for p in paragraphs(text) if NOT_YET.search(p)
            and any(names_notebook(p, stem) for stem in STEMS)]


def test_the_detector_finds_a_stale_mention_and_passes_a_clean_one():
    assert stale_mentions("Notebooks 05 and\n06 are **planned, not written yet**: see below.")
    assert stale_mentions("| 5 | Baselines (planned `05_baselines`) | 75 | not written yet |")
    assert not stale_mentions("The planned study has its own page (docs/regimes.md).")
    assert not stale_mentions("Notebook 05 puts the baselines beside MOPD.")


@pytest.mark.parametrize("page", PAGES + NOTEBOOKS, ids=lambda p: p.name)
def test_no_page_calls_an_existing_notebook_planned(page):
    text = markdown_of(page) if page.suffix == ".ipynb" else page.read_text()
    assert stale_mentions(text) == [], f"{page.name} calls an existing notebook planned / not written"


# --- the times -----------------------------------------------------------------------------------


def course_md_times() -> tuple[dict[str, int], int]:
    text = (ROOT / "docs" / "course.md").read_text()
    section = text.split("## Time", 1)[1]
    times = {m.group(1): int(m.group(2)) for m in re.finditer(r"^\| (\d\d_\w+) \| (\d+) \|", section, re.M)}
    total = int(re.search(r"^\| total \| \*\*(\d+)\*\*", section, re.M).group(1))
    return times, total


def readme_times() -> tuple[dict[str, int], int]:
    text = (ROOT / "README.md").read_text()
    times = {m.group(1): int(m.group(2))
             for m in re.finditer(r"^\| \[(\d\d_\w+)\]\([^)]*\) \|[^\n]*\| (\d+) s \|$", text, re.M)}
    total = int(re.search(r"^\| \*\*all \w+\*\* \| \| \*\*(\d+) s\*\*", text, re.M).group(1))
    return times, total


def instructor_times() -> dict[str, int]:
    text = (ROOT / "docs" / "instructor.md").read_text()
    return {m.group(1): int(m.group(2))
            for m in re.finditer(r"\[(\d\d_\w+)\]\(\.\./notebooks/\1\.ipynb\) \((\d+) s\)", text)}


def notebook_times() -> dict[str, int]:
    out = {}
    for nb in NOTEBOOKS:
        first = "".join(json.loads(nb.read_text())["cells"][0]["source"])
        found = re.search(r"\*\*Time:\*\* (\d+) s in the full mode", first)
        out[nb.stem] = int(found.group(1)) if found else None
    return out


def test_every_page_prints_the_same_time_for_each_notebook():
    source, total = course_md_times()
    assert sorted(source) == STEMS, "docs/course.md's time table must list every notebook"
    # each time is rounded to the second, so the parts may miss the total by half a second each
    assert abs(sum(source.values()) - total) <= len(source) / 2, \
        f"docs/course.md: parts {sum(source.values())} != total {total}"
    quotes = {"README.md": readme_times()[0], "docs/instructor.md": instructor_times(),
              "the notebooks' **Time:** lines": notebook_times()}
    for where, times in quotes.items():
        assert times == source, f"{where} disagrees with docs/course.md: {times} vs {source}"
    assert readme_times()[1] == total, "the README's total differs from docs/course.md's"
