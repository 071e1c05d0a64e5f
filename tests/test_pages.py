"""The pages agree with the course as it is: no page calls a notebook that exists "planned" or "not
written", every notebook's time is the same number wherever it is printed (the README's course
table, docs/course.md's "## Time" table, docs/instructor.md's lecture plan and each notebook's own
**Time:** line), the totals agree with each other and with the sum of the parts, and every
notebook figure a page names is one a notebook saves.

The set of notebooks is whatever `notebooks/NN_*.ipynb` holds: a notebook that exists must be in
every table, and a table must not list one that does not exist. One source of truth for the times
is docs/course.md's table (written from `python -m mopd_mini.course`); the others quote it, and
this test is what keeps the quotes from drifting.
"""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]*_*.ipynb"))
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


# --- the times ---------------------------------------------------------------------------------

STEM = re.compile(r"\b(\d\d[a-z]?_[a-z0-9_]+)\b")
WORDS = "zero one two three four five six seven eight nine ten eleven twelve".split()


def tables(text: str) -> list[list[list[str]]]:
    """Every markdown table of `text` as its rows (the header first, the `---` row dropped), each row
    a list of stripped cells."""
    found, rows = [], []
    for line in [*text.splitlines(), ""]:
        if line.lstrip().startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(re.fullmatch(r":?-+:?", c) for c in cells):
                rows.append(cells)
        elif rows:
            found.append(rows)
            rows = []
    return found


def column(text: str, header: str) -> tuple[list[list[str]], int]:
    """The one table of `text` with a header cell that starts with `header`, and that cell's index."""
    found = [(rows, i) for rows in tables(text) for i, cell in enumerate(rows[0]) if cell.startswith(header)]
    assert len(found) == 1, f"expected one table with a column {header!r}, found {len(found)}"
    return found[0]


class Times(dict):
    """{notebook stem: seconds} as one page prints them, with the page's total (None when it prints
    none) and what in its table could not be read."""

    def __init__(self, where: str):
        super().__init__()
        self.where, self.total, self.problems = where, None, []

    def add(self, stem: str, cell: str, pattern: str) -> None:
        found = re.search(pattern, cell)
        if found is None:
            self.problems.append(f"{self.where}: no time for {stem} in {cell!r}")
        elif stem in self:
            self.problems.append(f"{self.where} lists {stem} twice")
        else:
            self[stem] = int(found.group(1))


def read_table(where: str, rows: list[list[str]], name: int, time: int, pattern: str,
               total_label: str | None = None) -> Times:
    """A time table's rows: a notebook's row is the one whose `name` cell names it, the total's the
    one whose `name` cell matches `total_label`; `pattern` reads the seconds from the `time` cell.
    The total's cell may also give minutes ("(8.4 min"), and its label a count ("all six"): both
    are checked against the table."""
    out, label, cell = Times(where), "", ""
    for row in rows[1:]:
        stem = STEM.search(row[name])
        if stem:
            out.add(stem.group(1), row[time], pattern)
        elif total_label and re.search(total_label, row[name]):
            label, cell = row[name], row[time]
    if total_label is None:
        return out
    found = re.search(pattern, cell)
    if found is None:
        out.problems.append(f"{where}: no total row, or no seconds in it")
        return out
    out.total = int(found.group(1))
    minutes = re.search(r"\((\d+(?:\.\d)?) min", cell)
    if minutes and abs(float(minutes.group(1)) - out.total / 60) > 0.051:
        out.problems.append(f"{where}: the total's {out.total} s is not {minutes.group(1)} min")
    count = re.search(r"\ball (\w+)\b", label)
    if count and count.group(1) in WORDS and WORDS.index(count.group(1)) != len(out):
        out.problems.append(f"{where}: the total row says 'all {count.group(1)}' over {len(out)} notebooks")
    return out


def readme_times(text: str) -> Times:
    rows, time = column(text, "time (tiny, CPU)")
    return read_table("README.md", rows, 0, time, r"^\**(\d+) s\b", total_label=r"\*\*all \w+\*\*")


def course_md_times(text: str) -> Times:
    section = re.split(r"^## ", text.split("\n## Time\n", 1)[1], maxsplit=1, flags=re.M)[0]
    rows, time = column(section, "full course")
    return read_table("docs/course.md", rows, 0, time, r"^\**(\d+)\b", total_label=r"^total$")


def instructor_times(text: str) -> Times:
    rows, cell = column(text, "notebook (run time, tiny, CPU)")
    out = read_table("docs/instructor.md", rows, cell, cell, r"\((\d+) s\)")
    quoted = re.search(r"^make course .*\((\d+) s of notebooks", text, re.M)   # the "Running it" block
    out.total = int(quoted.group(1)) if quoted else None
    return out


def notebook_times(notebooks: list[Path]) -> Times:
    out = Times("the notebooks' **Time:** lines")
    for nb in notebooks:
        first = "".join(json.loads(nb.read_text())["cells"][0]["source"])
        out.add(nb.stem, first, r"\*\*Time:\*\* (\d+) s in the full mode")
    return out


def disagreements(pages: list[Times], notebooks: list[str]) -> list[str]:
    """Every way the pages' times disagree: what a table could not read; a notebook (one that exists
    or one that any page lists) missing from a page; a page listing a notebook that does not exist;
    a notebook's seconds differing between pages; totals differing, or off the sum of the parts by
    more than the rounding of each part to the second."""
    problems = [p for page in pages for p in page.problems]
    for stem in sorted(set(notebooks).union(*pages)):
        listed = {page.where: page[stem] for page in pages if stem in page}
        if stem not in notebooks:
            problems.append(f"{', '.join(listed)} list {stem}, but notebooks/{stem}.ipynb does not exist")
        problems += [f"{stem} is missing from {page.where}" for page in pages if stem not in page]
        if len(set(listed.values())) > 1:
            problems.append(f"{stem}'s time differs: " + ", ".join(f"{w} {s} s" for w, s in listed.items()))
    totals = {page.where: page.total for page in pages if page.total is not None}
    if len(set(totals.values())) > 1:
        problems.append("the totals differ: " + ", ".join(f"{w} {s} s" for w, s in totals.items()))
    for page in pages:
        if page.total is not None and page and abs(sum(page.values()) - page.total) > len(page) / 2:
            problems.append(f"{page.where}: the parts add up to {sum(page.values())} s, the total says {page.total} s")
    return problems


def read(name: str) -> str:
    return (ROOT / name).read_text()


def all_times(readme: str, course: str, instructor: str) -> list[Times]:
    return [readme_times(readme), course_md_times(course), instructor_times(instructor),
            notebook_times(NOTEBOOKS)]


def test_every_page_prints_the_same_time_for_each_notebook():
    pages = all_times(read("README.md"), read("docs/course.md"), read("docs/instructor.md"))
    assert all(page.total is not None for page in pages[:2]), "README and docs/course.md each print a total"
    problems = disagreements(pages, STEMS)
    assert problems == [], "\n".join(problems)


def test_the_time_check_fails_on_a_doctored_page():
    readme, course, instructor = read("README.md"), read("docs/course.md"), read("docs/instructor.md")
    assert disagreements(all_times(readme, course, instructor), STEMS) == []
    first, last = STEMS[0], STEMS[-1]
    seconds = course_md_times(course)[first]

    # one notebook's time changed in the README's table
    row = next(line for line in readme.splitlines() if line.startswith(f"| [{first}]"))
    doctored = readme.replace(row, row.replace(f"| {seconds} s |", f"| {seconds + 1} s |"))
    assert doctored != readme
    found = disagreements(all_times(doctored, course, instructor), STEMS)
    assert any(p.startswith(f"{first}'s time differs") and "README.md" in p for p in found), found

    # a row dropped from docs/course.md's table (and the total no longer the sum of the parts)
    row = f"| {last} | {course_md_times(course)[last]} |"
    found = disagreements(all_times(readme, course.replace(row + "\n", ""), instructor), STEMS)
    assert f"{last} is missing from docs/course.md" in found, found
    assert any(p.startswith("docs/course.md: the parts add up") for p in found), found

    # the instructor's total differs
    found = disagreements(all_times(readme, course, instructor.replace(
        f"({course_md_times(course).total} s of notebooks", "(1 s of notebooks")), STEMS)
    assert any(p.startswith("the totals differ") for p in found), found

    # a notebook file that no table lists yet, and a table listing a notebook that does not exist
    found = disagreements(all_times(readme, course, instructor), [*STEMS, "99_new"])
    assert "99_new is missing from README.md" in found and "99_new is missing from docs/instructor.md" in found
    found = disagreements(all_times(readme, course, instructor), STEMS[:-1])
    assert any(p.endswith(f"notebooks/{last}.ipynb does not exist") for p in found), found


# --- the figures ---------------------------------------------------------------------------------


def saved_figures() -> set[str]:
    """The names the notebooks save their figures under (`plots.save(fig, "NN_name")`)."""
    code = ["".join(c["source"]) for nb in NOTEBOOKS for c in json.loads(nb.read_text())["cells"]
            if c["cell_type"] == "code"]
    return {m for source in code for m in re.findall(r"\"(\d\d_[a-z0-9_]+)\"", source)}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_notebook_figure_a_page_names_is_saved_by_a_notebook(page):
    named = set(re.findall(r"`(\d\d_[a-z0-9_]+)(?:\.png)?`", page.read_text())) - set(STEMS)
    assert named <= saved_figures(), f"{page.name} names figures no notebook saves: {sorted(named - saved_figures())}"
