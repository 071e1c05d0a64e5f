"""Every relative link and image in the project's prose resolves to a file that git tracks.

Checked: README.md, every docs/**/*.md, notebooks/solutions/*.md and the markdown cells of every
notebook. A link counts when it is relative (URLs with a scheme such as https: or mailto:, and
in-page anchors `#...`, are skipped); its target, resolved from the page's own folder and with
any `#anchor` or `?query` dropped, must be a file `git ls-files` lists (or a folder holding one).
A file that exists on this disk but is ignored by git fails: a fresh clone would not have it,
which is how the README's first figure went missing once.
"""

import json
import re
import subprocess
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).parents[1]

# [text](target "title") and ![alt](target); the target may be wrapped in <...>
INLINE = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+[\"'(][^)]*)?\)")
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)", re.MULTILINE)   # [label]: target
HTML = re.compile(r"""<(?:img|a|source)\b[^>]*?\b(?:src|href)\s*=\s*["']([^"']+)["']""", re.IGNORECASE)
FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.DOTALL)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def links(markdown: str) -> list[str]:
    """The link and image targets of a markdown text, code blocks and code spans left out."""
    text = CODE_SPAN.sub("", FENCE.sub("", markdown))
    found = [m.group(1) for pattern in (INLINE, REFERENCE, HTML) for m in pattern.finditer(text)]
    return [t[1:-1] if t.startswith("<") and t.endswith(">") else t for t in found]


def relative_target(target: str) -> str | None:
    """The path part of a relative link, or None for URLs, mailto: and in-page anchors."""
    if not target or target.startswith("#") or SCHEME.match(target) or target.startswith("//"):
        return None
    path = unquote(re.split(r"[#?]", target, maxsplit=1)[0])
    return path or None


def pages(root: Path) -> list[tuple[Path, str, str]]:
    """(page, where, markdown) for every markdown text to check: files, and notebook cells."""
    out = []
    files = [root / "README.md", *sorted((root / "docs").rglob("*.md")),
             *sorted((root / "notebooks" / "solutions").glob("*.md"))]
    for f in files:
        if f.exists():
            out.append((f, f.relative_to(root).as_posix(), f.read_text(encoding="utf-8")))
    for nb_path in sorted((root / "notebooks").glob("*.ipynb")):
        cells = json.loads(nb_path.read_text(encoding="utf-8"))["cells"]
        for i, cell in enumerate(cells):
            if cell["cell_type"] == "markdown":
                source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
                out.append((nb_path, f"{nb_path.relative_to(root).as_posix()} cell {i}", source))
    return out


def broken_links(root: Path, tracked: set[str]) -> tuple[int, list[str]]:
    """(how many relative links were checked, 'page: target (why)' for each broken one)."""
    folders = {p.rsplit("/", 1)[0] for p in tracked if "/" in p}
    folders |= {f.rsplit("/", i)[0] for f in list(folders) for i in range(1, f.count("/") + 1)}
    checked, broken = 0, []
    for page, where, markdown in pages(root):
        for target in links(markdown):
            path = relative_target(target)
            if path is None:
                continue
            checked += 1
            resolved = (page.parent / path).resolve()
            try:
                rel = resolved.relative_to(root.resolve()).as_posix()
            except ValueError:
                broken.append(f"{where}: {target} (points outside the repository)")
                continue
            if rel in tracked or rel in folders:
                continue
            why = "exists here but git does not track it (.gitignore?)" if resolved.exists() else "no such file"
            broken.append(f"{where}: {target} ({why})")
    return checked, broken


def git_tracked(root: Path) -> set[str]:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout (or no git): the tracked files are unknown")
    return {p for p in out.decode().split("\0") if p}


# ---------------------------------------------------------------------------------------------


def test_every_relative_link_resolves_to_a_tracked_file():
    checked, broken = broken_links(ROOT, git_tracked(ROOT))
    print(f"{checked} relative links and images checked")
    assert checked >= 10, f"only {checked} links found: is the link parser broken?"
    assert not broken, f"{len(broken)} of {checked} relative links are broken:\n  " + "\n  ".join(broken)


def test_the_checker_finds_broken_links_on_a_fake_page(tmp_path):
    (tmp_path / "docs" / "figures").mkdir(parents=True)
    (tmp_path / "docs" / "figures" / "ok.png").write_bytes(b"png")
    (tmp_path / "docs" / "figures" / "ignored.png").write_bytes(b"png")  # on disk, not tracked
    (tmp_path / "docs" / "other.md").write_text("# other\n")
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "README.md").write_text(
        "![fig](docs/figures/ok.png) ![gone](docs/figures/ignored.png)\n"
        "[page](docs/other.md#a-section) [web](https://example.org/x.png) [mail](mailto:a@b.c)\n"
        "[anchor](#top) [missing](docs/missing.md) [outside](../elsewhere.md)\n"
        "[ref]: docs/ref_missing.md\n"
        '<img src="docs/figures/html_missing.png" width="300">\n'
        "`[code](not/a/link.md)`\n```\n[fenced](not/a/link.md)\n```\n"
        "[folder](docs/figures/) [spaced](<docs/figures/ok.png> \"title\")\n")
    (tmp_path / "docs" / "page.md").write_text("![up](figures/ok.png) [back](../README.md) [bad](figures/no.png)\n")
    nb = {"cells": [{"cell_type": "markdown", "source": "[nb](../docs/other.md) [nbbad](../docs/nope.md)"},
                    {"cell_type": "code", "source": "# [not markdown](nothing.md)"}]}
    (tmp_path / "notebooks" / "01_x.ipynb").write_text(json.dumps(nb))
    tracked = {"README.md", "docs/other.md", "docs/page.md", "docs/figures/ok.png", "notebooks/01_x.ipynb"}

    checked, broken = broken_links(tmp_path, tracked)
    targets = sorted(b.split(": ", 1)[1].split(" (")[0] for b in broken)
    assert targets == sorted(["docs/figures/ignored.png", "docs/missing.md", "../elsewhere.md",
                              "docs/ref_missing.md", "docs/figures/html_missing.png", "figures/no.png",
                              "../docs/nope.md"])
    assert any("git does not track it" in b for b in broken if "ignored.png" in b)
    assert any(b.startswith("notebooks/01_x.ipynb cell 0:") for b in broken)
    # ok.png, other.md#a-section, folder, <ok.png> "title", figures/ok.png, ../README.md, ../docs/other.md
    assert checked == len(targets) + 7


def test_link_targets_are_parsed_as_markdown_writes_them():
    assert sorted(links('![a](x.png "t") [b [c]](y.md)\n[d]: z.md')) == ["x.png", "y.md", "z.md"]
    assert relative_target("https://a.b/c") is None and relative_target("#x") is None
    assert relative_target("mailto:x@y") is None and relative_target("a%20b.md#s") == "a b.md"
