"""The study pages docs/matched.md, docs/baselines.md and docs/regimes.md as committed: each is what its
study's `--render` writes from the committed JSON, byte for byte (rendered into a temporary folder,
never into docs/), and each page's registered text (what was stated before the runs) is frozen as
committed in tests/data/registered/: it may only grow by dated amendments, so an edit to a
registered sentence fails here.

After a re-run that rewrites a page, this test passes again on its own (the page is the render of
the new JSON). After a new amendment (a paragraph that starts "Amendment, <date>", dated on or after
the freeze, with the paragraphs that follow it), it passes too; to freeze the amended text, copy the
page's registered part into tests/data/registered/ again (`python -m tests.studies.test_study_pages`).
"""

from __future__ import annotations

import contextlib
import io
import re
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
FROZEN = ROOT / "tests" / "data" / "registered"
FROZEN_ON = "2026-12-06"          # the date the copies in tests/data/registered/ were taken
JSONS = ("matched.json", "regimes.json", "baselines.json", "ablations.json", "results.json")
PAGES = ("matched.md", "baselines.md", "regimes.md")


# ---------------------------------------------------------------------------------------------
# the pages re-render byte-identically from their JSON
# ---------------------------------------------------------------------------------------------


def copy_docs(src: Path, dst: Path) -> Path:
    """The pages and the JSON a render reads, copied into dst (a render writes only there)."""
    dst.mkdir(parents=True, exist_ok=True)
    for name in JSONS + PAGES:
        shutil.copy(src / name, dst / name)
    return dst


def render(page: str, out: Path) -> bytes:
    """The study's own `--render` of `page` into `out` (which holds a copy of the page and its JSON):
    the bytes it writes. The figures it draws go to out/figures."""
    with contextlib.redirect_stdout(io.StringIO()):
        if page == "matched.md":
            from studies import matched
            matched.main(["--render", str(out / "matched.json"), "--out", str(out)])
        elif page == "baselines.md":
            from studies import baselines
            baselines.main(["--render", str(out / "baselines.json"), "--out", str(out)])
        elif page == "regimes.md":
            from studies import regimes
            regimes.main(["--render", "--out", str(out)])
        else:
            raise KeyError(page)
    return (out / page).read_bytes()


def rerender_diff(page: str, docs: Path, tmp: Path) -> list[str]:
    """The lines where `docs`/page differs from its render from `docs`' JSON (empty: byte-identical)."""
    before = (docs / page).read_bytes()
    after = render(page, copy_docs(docs, tmp))
    if before == after:
        return []
    import difflib
    diff = list(difflib.unified_diff(before.decode().splitlines(), after.decode().splitlines(), "committed",
                                     "rendered", n=0, lineterm=""))
    return diff or ["the bytes differ (line endings or a final newline)"]


@pytest.mark.parametrize("page", PAGES)
def test_the_committed_study_page_is_its_render_from_the_json(page, tmp_path):
    bad = rerender_diff(page, DOCS, tmp_path / "out")
    assert bad == [], f"docs/{page} is not what its study renders from the JSON:\n" + "\n".join(bad[:40])


def test_a_one_character_edit_of_a_page_fails_the_rerender_check(tmp_path):
    edited = copy_docs(DOCS, tmp_path / "edited")
    text = (edited / "matched.md").read_text()
    i = text.index("\n## Results\n")                # the rendered part (the registered text above is kept)
    i = text.index("0.", i)                         # its first number
    (edited / "matched.md").write_text(text[:i] + "9" + text[i + 1:])
    assert rerender_diff("matched.md", edited, tmp_path / "out") != []


# ---------------------------------------------------------------------------------------------
# the registered text is frozen: it may only grow by dated amendments
# ---------------------------------------------------------------------------------------------

AMENDMENT = re.compile(r"^\W*Amendment, (\d{4}-\d{2}-\d{2})")


def registered(page: str, text: str) -> str:
    """The registered part of a study page: everything above its `## Results` line (matched, regimes:
    pre-registered pages), or baselines' Protocol section (the design it states beside its numbers)."""
    lines = text.splitlines(keepends=True)
    if page == "baselines.md":
        start = lines.index("## Protocol\n")
        end = next(j for j in range(start + 1, len(lines)) if lines[j].startswith("## "))
        return "".join(lines[start:end])
    end = next((i for i, line in enumerate(lines) if line.rstrip("\n") == "## Results"), None)
    assert end is not None, f"{page} has no '## Results' line"
    return "".join(lines[:end])


def paragraphs(text: str) -> list[str]:
    return [p.rstrip() for p in re.split(r"\n[ \t]*\n", text) if p.strip()]


def growth(frozen: str, now: str, since: str = FROZEN_ON) -> list[str]:
    """What in `now` is not `frozen` grown by dated amendments: every frozen paragraph must be in `now`,
    unchanged and in order; each run of paragraphs `now` adds must start with a paragraph that opens
    "Amendment, <date>" (any markdown before it), dated on or after `since`."""
    old, new = paragraphs(frozen), paragraphs(now)
    bad, j, added = [], 0, []

    def close_run():
        if added:
            m = AMENDMENT.match(added[0])
            if m is None:
                bad.append(f"added without a dated amendment: {added[0][:160]!r}")
            elif m.group(1) < since:
                bad.append(f"an amendment dated {m.group(1)}, before the freeze of {since}: {added[0][:120]!r}")
            added.clear()

    for p in new:
        if j < len(old) and p == old[j]:
            close_run()
            j += 1
        else:
            added.append(p)
    close_run()
    if j < len(old):
        bad.insert(0, f"a registered paragraph is changed or gone: {old[j][:200]!r}")
    return bad


@pytest.mark.parametrize("page", PAGES)
def test_the_registered_text_only_grows_by_dated_amendments(page):
    frozen = (FROZEN / page).read_text()
    assert frozen.strip(), page
    assert growth(frozen, registered(page, (DOCS / page).read_text())) == []


def test_an_edited_registered_sentence_fails_and_a_dated_amendment_passes():
    frozen = (FROZEN / "matched.md").read_text()
    now = registered("matched.md", (DOCS / "matched.md").read_text())
    # an edited sentence of the hypotheses, a dropped paragraph, an undated addition: each fails
    first = next(p for p in paragraphs(now) if p.startswith("* **H1 "))
    assert growth(frozen, now.replace(first, first.replace("MOPD", "MOPD-PG", 1)))
    assert growth(frozen, now.replace(first + "\n", ""))
    assert growth(frozen, now + "\nA new rule, not dated.\n")
    assert growth(frozen, now + "\n**Amendment, 2026-12-01** (backdated) a new rule.\n")
    # a dated amendment after the freeze, with a paragraph of its own, grows it
    grown = now + "\n**Amendment, 2026-12-07** (after the freeze) a new rule.\n\nIts second paragraph.\n"
    assert growth(frozen, grown) == []


def freeze(pages=PAGES) -> None:
    """Copy each page's registered part into tests/data/registered/ (after a reviewed amendment)."""
    FROZEN.mkdir(parents=True, exist_ok=True)
    for page in pages:
        (FROZEN / page).write_text(registered(page, (DOCS / page).read_text()))


if __name__ == "__main__":
    freeze(sys.argv[1:] or PAGES)
