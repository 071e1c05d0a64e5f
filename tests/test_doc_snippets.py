"""The scripts the pages print run against today's code: every `from <ours> import a, b` and
`import <ours>.x` inside a page's code block names a module and names that exist, and every
`python -m <ours>.<x>` a page quotes names a module file. (docs/stuck.md's script imported
`bench.regimes`' `build` and `evaluate` for two days after they were renamed: nothing read it.)"""

import importlib
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OURS = ("mopd_mini", "studies", "tools", "bench", "factworld")
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "notebooks" / "solutions").glob("*.md"))]
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
FROM = re.compile(r"^\s*from ((?:%s)(?:\.\w+)*) import \(?([\w ,]+)\)?\s*(?:#.*)?$" % "|".join(OURS), re.M)
IMPORT = re.compile(r"^\s*import ((?:%s)(?:\.\w+)*)(?: as \w+)?\s*(?:#.*)?$" % "|".join(OURS), re.M)
MODULE = re.compile(r"python3? -m ((?:%s)(?:\.\w+)+)" % "|".join(OURS))
# Modules renamed since a page quoted them in text that records history (a study's registered text):
# {old module: its home today}. Such a quote passes only on a page that says so (`says_it_moved`).
MOVED = {"mopd_mini.regimes": "mopd_mini.starting_points"}


def snippets() -> list[tuple[str, str]]:
    return [(page.relative_to(ROOT).as_posix(), block) for page in PAGES for block in FENCE.findall(page.read_text())]


def imports() -> list[tuple[str, str, tuple[str, ...]]]:
    found = []
    for page, block in snippets():
        for module, names in FROM.findall(block):
            found.append((page, module, tuple(n.strip() for n in names.split(",") if n.strip())))
        found.extend((page, module, ()) for module in IMPORT.findall(block))
    return found


def test_the_scan_reads_the_pages_scripts():
    pages = {page for page, _, _ in imports()}
    assert "docs/stuck.md" in pages and len(imports()) >= 5, "the scan found too few imports: it is broken"


@pytest.mark.parametrize("page,module,names", imports(), ids=lambda v: v if isinstance(v, str) else None)
def test_a_page_script_imports_what_exists(page, module, names):
    mod = importlib.import_module(module)
    missing = [n for n in names if not hasattr(mod, n) and importlib.util.find_spec(f"{module}.{n}") is None]
    assert not missing, f"{page}: `from {module} import ...` names {missing}, which {module} does not define"


def says_it_moved(text: str, old: str) -> bool:
    """The page says the module `old` is now its home in MOVED (a dated note beside the quote)."""
    return re.search(rf"`{re.escape(old)}`[^.]*? is now `{re.escape(MOVED[old])}`", text) is not None


def test_every_module_a_page_runs_is_a_file():
    """(bench/'s: tests/bench/test_quoted_homes.py, where a study's recorded command may still say bench.)
    A renamed module (MOVED) may stay quoted where the page says where it is now."""
    texts = {p.relative_to(ROOT).as_posix(): p.read_text() for p in PAGES}
    missing = sorted({(page, m) for page, text in texts.items() for m in MODULE.findall(text)
                      if not m.startswith("bench.") and not any((ROOT / Path(*m.split("."))).with_suffix(s).is_file() for s in (".py",))
                      and not (ROOT / Path(*m.split(".")) / "__main__.py").is_file()
                      and not (m in MOVED and says_it_moved(text, m))})
    assert not missing, f"pages run modules that do not exist: {missing}"


def test_a_renamed_module_passes_only_where_the_page_says_it_moved():
    assert not any((ROOT / Path(*old.split("."))).with_suffix(".py").exists() for old in MOVED)
    assert all((ROOT / Path(*new.split("."))).with_suffix(".py").is_file() for new in MOVED.values())
    assert not says_it_moved("python -m mopd_mini.regimes --n 50", "mopd_mini.regimes")
    assert says_it_moved("the module `mopd_mini.regimes` (the starting points) is now `mopd_mini.starting_points`",
                         "mopd_mini.regimes")
