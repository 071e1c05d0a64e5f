"""The house's figures, read from the working tree with the checks the tests make: files per folder,
the longest .py files, the import circles among studies/ and tools/ (every import, a function's lazy
one too: tests/test_import_graph.py), and how many of README's tree entries a newcomer opens to
find each of the paper's concepts (tests/test_readme_tree.py).

    python -m tools.house            # prints the figures (a second or two; nothing is run or written)
"""

from __future__ import annotations

import collections
import subprocess
from pathlib import Path

from tests.test_import_graph import cycles, library_graph
from tests.test_readme_tree import CONCEPTS, look_ups

ROOT = Path(__file__).resolve().parents[1]


def tracked() -> list[Path]:
    """The files git tracks (the studies' kept inputs, docs/*_inputs/, left out: data, not the house)."""
    names = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    return [Path(n) for n in names if not (n.startswith("docs/") and "_inputs/" in n)]


def figures(longest: int = 8) -> dict:
    files = tracked()
    per = collections.Counter(f.parts[0] if len(f.parts) > 1 else "." for f in files)
    lines = sorted(((len((ROOT / f).read_text().splitlines()), f.as_posix()) for f in files if f.suffix == ".py"),
                   reverse=True)
    return {"files per folder": dict(sorted(per.items())), "longest": lines[:longest],
            "over 1000 lines": sum(n > 1000 for n, _ in lines), "over 800 lines": sum(n > 800 for n, _ in lines),
            "circles in studies/ and tools/": cycles(library_graph(("studies", "tools"))),
            "look-ups": {concept: look_ups(word, symbol) for concept, (word, symbol) in CONCEPTS.items()}}


def main() -> None:
    f = figures()
    print("files per folder:", ", ".join(f"{k} {v}" for k, v in f["files per folder"].items()))
    print("longest .py files:", ", ".join(f"{name} {n}" for n, name in f["longest"]))
    print(f"over 1,000 lines: {f['over 1000 lines']}; over 800: {f['over 800 lines']}")
    print(f"import circles among studies/ and tools/: {len(f['circles in studies/ and tools/'])}",
          f["circles in studies/ and tools/"] or "")
    counts = f["look-ups"]
    for concept, n in counts.items():
        print(f"  {concept:38s} {n if n is not None else 'not found from the tree'}")
    found = [n for n in counts.values() if n is not None]
    print(f"the paper's concepts from README's tree: {sum(found)} look-ups for {len(found)} of {len(counts)} concepts")


if __name__ == "__main__":
    main()
