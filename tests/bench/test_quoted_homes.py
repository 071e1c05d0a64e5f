"""bench/ holds benchmarks only, and the pages quote each script at its real home: every
`python -m bench.<x>` and `bench/<x>.py` a page names is a benchmark file of bench/. The studies left
for studies/ and the tools for tools/ (MOVED); a page may still quote one of them under bench/ only
where that is a command as it ran (a study's recorded command), and then the page says so beside it
("ran as `bench.<x>`") and names the module's home today."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MOVED = {"study": "studies", "baselines": "studies", "matched": "studies", "ablations": "studies",
         "regimes": "studies", "teacher_headroom": "studies", "results": "studies", "bad_inputs": "tools",
         "notebook_soak": "tools", "verl_export_tiny": "tools", "run_all": "tools", "findings": "tools",
         "check_verl": "tools"}
REMOVED = {"speedups"}  # docs/benchmarks.md quotes its old command as "a script removed", on purpose
# A page whose recorded command still says bench.<x> but whose renderer (outside bench/) cannot yet say
# the module moved: {page: {module: what must change}}. Each entry must still be needed (test below).
PENDING: dict[str, dict[str, str]] = {}   # none left: every page quotes the real home or says the module moved
PAGES = [ROOT / "README.md", ROOT / "Makefile", ROOT / ".ci" / "run", ROOT / "pyproject.toml",
         *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "notebooks").glob("*.ipynb")),
         *sorted((ROOT / "notebooks" / "solutions").glob("*.md"))]
QUOTE = (re.compile(r"python3? -m bench\.(\w+)"), re.compile(r"(?<![\w/])bench/(\w+)\.py\b"))  # not tests/bench/


def quoted(text: str) -> set[str]:
    return {name for pattern in QUOTE for name in pattern.findall(text)}


def says_it_moved(text: str, name: str) -> bool:
    """The page says a quote ran under bench/ and names the module's home today."""
    home = MOVED[name]
    ran_as = re.search(r"ran as\b[^`]*`bench", text) is not None
    return ran_as and (f"`{home}.{name}`" in text or f"`{home}/{name}.py`" in text)


def misquoted() -> dict[str, set[str]]:
    """{page: the bench/ modules it quotes that are no benchmark of bench/ and not noted as moved}."""
    bad = {}
    for page in PAGES:
        if not page.is_file():
            continue
        text = page.read_text()
        names = {n for n in quoted(text) - REMOVED if not (ROOT / "bench" / f"{n}.py").is_file()
                 and not (n in MOVED and says_it_moved(text, n))}
        if names:
            bad[page.relative_to(ROOT).as_posix()] = names
    return bad


def test_the_scan_reads_the_pages_quotes():
    text = "".join(p.read_text() for p in PAGES if p.is_file())
    assert {"scaling", "stuck_copy", "matched"} <= quoted(text), "the scan finds too few quotes: it is broken"


def test_every_bench_module_a_page_quotes_is_a_benchmark_of_bench():
    pending = {(page, n) for page, names in PENDING.items() for n in names}
    bad = {(page, n) for page, names in misquoted().items() for n in names} - pending
    assert not bad, f"pages quote bench/ modules that are not benchmarks (quote the real home): {sorted(bad)}"


def test_every_pending_page_is_still_pending():
    bad = {(page, n) for page, names in misquoted().items() for n in names}
    done = {(page, n) for page, names in PENDING.items() for n in names} - bad
    assert not done, f"these pages say the module moved now: drop them from PENDING: {sorted(done)}"


def test_a_moved_quote_passes_only_with_its_note():
    assert not says_it_moved("python -m bench.matched --T 200", "matched")
    assert not says_it_moved("python -m bench.matched, ran as `bench.matched`", "matched")   # no home named
    assert says_it_moved("python -m bench.matched\nIt ran as `bench.matched`; the module is now `studies.matched`.",
                         "matched")


def test_bench_holds_no_forwarding_module():
    """No file of bench/ shares its name with a study or a tool, re-exports another module or runs one;
    each but the package and its shared helpers is a script."""
    files = sorted(f for f in (ROOT / "bench").glob("*.py"))
    assert len(files) > 5
    for f in files:
        assert not (ROOT / "studies" / f.name).exists() and not (ROOT / "tools" / f.name).exists() \
            or f.name == "__init__.py", f
        source = f.read_text()
        assert "runpy" not in source and "sys.modules[" not in source and "import_module(" not in source, f
        assert f.stem not in MOVED, f
        if f.name not in ("__init__.py", "common.py"):
            defs = {n.name for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)}
            assert "main" in defs or '__name__ == "__main__"' in source, f"{f} is not a script"
