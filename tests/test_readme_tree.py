"""README's tree against the files: every file and folder it names exists, and it names every
top-level package folder and every module of the library (mopd_mini/, factworld/)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIBRARIES = ("mopd_mini", "factworld")


def tree() -> dict[str, set[str]]:
    """{top-level entry: {the names listed under it}} from the README's "## The tree" block: a
    top-level entry starts its line, a name under it is indented by two spaces (deeper lines
    continue a description)."""
    text = (ROOT / "README.md").read_text()
    block = re.search(r"^## The tree\n\n```\n(.*?)^```", text, re.S | re.M).group(1)
    entries, top = {}, None
    for line in block.splitlines():
        if line and not line[0].isspace():
            top = line.split()[0]
            entries[top] = set()
        elif line.startswith("  ") and not line.startswith("   "):
            entries[top].add(line.split()[0])
    return entries


def test_every_name_in_the_tree_exists():
    entries = tree()
    assert len(entries) >= 5
    missing = [top for top in entries if not (ROOT / top).exists()]
    missing += [f"{top}{name}" for top, names in entries.items() for name in names if not (ROOT / top / name).exists()]
    assert missing == []


def test_the_tree_names_every_package_folder_and_library_module():
    entries = tree()
    packages = {f"{d.name}/" for d in ROOT.iterdir() if (d / "__init__.py").is_file()}
    assert {"mopd_mini/", "bench/", "studies/", "tools/"} <= packages
    assert packages - set(entries) == set()
    for library in LIBRARIES:
        modules = {f.name for f in (ROOT / library).glob("*.py") if f.name != "__init__.py"}
        modules |= {f"{d.name}/" for d in (ROOT / library).iterdir() if d.is_dir() and d.name != "__pycache__"}
        assert modules - entries[f"{library}/"] == set(), library
