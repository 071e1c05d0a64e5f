"""Hosted notebooks: every numbered notebook has the Colab badge and the setup cell, and the cell
(taken from the .ipynb itself, run with pip mocked) installs the package only when it is missing,
from the right place, and finds or makes a runs/ folder it can write."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mopd_mini import hosted

NOTEBOOKS = sorted((Path(__file__).parents[1] / "notebooks").glob("[0-9][0-9]*_*.ipynb"))


def cells(path):
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def setup_source(path) -> str:
    return next(c["source"] for c in cells(path) if c["cell_type"] == "code")


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_notebook_opens_with_the_badge_and_the_setup_cell(notebook):
    first_md = next(c for c in cells(notebook) if c["cell_type"] == "markdown")
    assert hosted.badge(notebook.name) in first_md["source"].split("\n")[:3]
    assert f"/notebooks/{notebook.name})" in hosted.badge(notebook.name)
    assert setup_source(notebook) == hosted.SETUP_CELL, \
        f"re-stamp it: python -m mopd_mini.hosted notebooks/{notebook.name}"


def test_stamping_twice_changes_nothing():
    nb = json.loads(NOTEBOOKS[0].read_text(encoding="utf-8"))
    once = json.dumps(hosted.stamp(json.loads(json.dumps(nb)), NOTEBOOKS[0].name))
    assert once == json.dumps(nb)                                       # the committed notebook is stamped
    bare = {"cells": [{"cell_type": "markdown", "source": "# T\n\nGoals"},
                      {"cell_type": "code", "source": "MODEL = 'tiny'", "outputs": [], "metadata": {}}]}
    stamped = hosted.stamp(bare, "09_x.ipynb")
    assert [c["cell_type"] for c in stamped["cells"]] == ["markdown", "code", "code"]
    assert stamped["cells"][0]["source"] == f"# T\n\n{hosted.badge('09_x.ipynb')}\n\nGoals"
    assert json.dumps(hosted.stamp(json.loads(json.dumps(stamped)), "09_x.ipynb")) == json.dumps(stamped)


# ------------------------------------------------------------------- the cell, run with pip mocked

@pytest.fixture
def pip(monkeypatch):
    """Records the pip commands the cell runs instead of running them."""
    calls = []
    monkeypatch.setattr(subprocess, "check_call", lambda cmd, **kw: calls.append(cmd) or 0)
    monkeypatch.setattr(sys, "path", list(sys.path))           # the cell may prepend a checkout
    monkeypatch.delenv("MOPD_MINI_REPO", raising=False)
    return calls


def missing(monkeypatch, *names):
    """Make `names` look not installed to the cell's find_spec."""
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in names else real(name, *a))


def run_cell(capsys) -> str:
    exec(compile(setup_source(NOTEBOOKS[0]), "setup cell", "exec"), {"__name__": "__main__"})
    return capsys.readouterr().out


def test_installed_package_means_no_pip(tmp_path, monkeypatch, pip, capsys):
    monkeypatch.chdir(tmp_path)
    out = run_cell(capsys)
    assert pip == []
    assert (tmp_path / "runs").is_dir() and str(tmp_path / "runs") in out


def test_hosted_without_the_package_installs_it_from_the_repo(tmp_path, monkeypatch, pip, capsys):
    monkeypatch.chdir(tmp_path)
    missing(monkeypatch, "mopd_mini")
    run_cell(capsys)
    assert pip == [[sys.executable, "-m", "pip", "install", "-q", hosted.REPO_URL]]
    assert (tmp_path / "runs").is_dir()


def test_the_repo_comes_from_MOPD_MINI_REPO_and_ipywidgets_is_added_when_missing(tmp_path, monkeypatch, pip, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MOPD_MINI_REPO", "/content/mopd_mini-0.1.0-py3-none-any.whl")
    missing(monkeypatch, "mopd_mini", "ipywidgets")
    run_cell(capsys)
    assert pip == [[sys.executable, "-m", "pip", "install", "-q", "/content/mopd_mini-0.1.0-py3-none-any.whl",
                    "ipywidgets"]]


def test_in_a_checkout_it_installs_the_checkout_and_imports_from_it(tmp_path, monkeypatch, pip, capsys):
    checkout = tmp_path / "clone"
    (checkout / "mopd_mini").mkdir(parents=True)
    (checkout / "mopd_mini" / "__init__.py").write_text("")
    (checkout / "pyproject.toml").write_text("[project]\nname = 'mopd_mini'\n")
    (checkout / "notebooks").mkdir()
    monkeypatch.chdir(checkout / "notebooks")
    missing(monkeypatch, "mopd_mini")
    run_cell(capsys)
    assert pip == [[sys.executable, "-m", "pip", "install", "-q", "-e", str(checkout)]]
    assert sys.path[0] == str(checkout)
    assert (checkout / "notebooks" / "runs").is_dir()


def test_a_read_only_folder_moves_the_runs_home(tmp_path, monkeypatch, pip, capsys):
    shared, home = tmp_path / "shared_course", tmp_path / "home"
    shared.mkdir(), home.mkdir()
    monkeypatch.chdir(shared)
    monkeypatch.setenv("HOME", str(home))
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if Path(p) == shared else real_access(p, mode))
    out = run_cell(capsys)
    assert pip == []
    assert Path.cwd() == home / "mopd_mini_course" and (home / "mopd_mini_course" / "runs").is_dir()
    assert not (shared / "runs").exists() and "read-only" in out
