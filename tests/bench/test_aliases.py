"""The modules that left bench/ (studies to studies/, tools to tools/) keep the commands the pages
quote: every `python -m bench.<x>` and `bench/<x>.py` named by a page is a file of bench/, and each
alias runs its new home as the program (`--help` here) and is that module when imported."""

import importlib
import re
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MOVED = {"study": "studies", "baselines": "studies", "matched": "studies", "ablations": "studies",
         "regimes": "studies", "teacher_headroom": "studies", "bad_inputs": "tools", "notebook_soak": "tools",
         "verl_export_tiny": "tools", "run_all": "tools", "findings": "tools", "results": "studies"}
ALONE = {"bad_inputs"}  # a script that sets process-wide state when imported (RUNS_DIR, the hub's cache): run apart
REMOVED = {"speedups"}  # docs/benchmarks.md quotes its old command as "a script removed", on purpose
PAGES = [ROOT / "README.md", ROOT / "Makefile", ROOT / ".ci" / "run", *sorted((ROOT / "docs").glob("*.md")),
         *sorted((ROOT / "notebooks").glob("*.ipynb"))]


def quoted_bench_modules() -> set[str]:
    names = set()
    for page in PAGES:
        text = page.read_text()
        names.update(re.findall(r"python -m bench\.(\w+)", text))
        names.update(re.findall(r"(?<![\w/])bench/(\w+)\.py\b", text))   # not tests/bench/: the tests of bench/
    return names


def test_every_bench_module_a_page_quotes_is_a_file_of_bench():
    quoted = quoted_bench_modules()
    assert quoted & set(MOVED), "the pages quote no moved module: the scan is broken"
    assert not {m for m in quoted - REMOVED if not (ROOT / "bench" / f"{m}.py").is_file()}


def test_every_module_that_left_bench_has_its_alias():
    for name, home in MOVED.items():
        assert (ROOT / home / f"{name}.py").is_file()
        assert f'alias(__name__, "{home}.{name}")' in (ROOT / "bench" / f"{name}.py").read_text()


@pytest.mark.parametrize("name", sorted(set(MOVED) - ALONE))
def test_the_alias_is_the_module_and_runs_it(name, monkeypatch, capsys):
    home = importlib.import_module(f"{MOVED[name]}.{name}")
    assert importlib.import_module(f"bench.{name}") is home
    if not hasattr(home, "main"):
        return                          # the runner: imported by the studies, never run alone
    monkeypatch.setattr(sys, "argv", [f"bench/{name}.py", "--help"])
    monkeypatch.delitem(sys.modules, f"bench.{name}")   # as in a fresh `python -m bench.<x>`: the file runs
    with pytest.raises(SystemExit) as stop:
        runpy.run_module(f"bench.{name}", run_name="__main__", alter_sys=True)
    assert stop.value.code in (0, None)
    assert capsys.readouterr().out.startswith("usage:")


@pytest.mark.parametrize("name", sorted(ALONE))
def test_the_alias_of_a_script_runs_it_in_its_own_process(name):
    out = subprocess.run([sys.executable, "-m", f"bench.{name}", "--help"], capture_output=True, text=True,
                         timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage:")


def test_check_verl_runs_by_its_old_path():
    """`make check-verl` and docs/scale_out.md run it with verl's own Python, as a file: the alias too."""
    pytest.importorskip("yaml")
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "check_verl.py"), "--help"], capture_output=True,
                         text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage:") and "EXPORT" in out.stdout.upper()
