"""Re-running a notebook is safe: every code cell of each numbered notebook runs TWICE in one
kernel (all cells, then all cells again, as a student pressing "Run all" twice does), in the CI
mode (MOPD_FAST=1), without an error: no stacked adapters, no "already exists", no stale state.

The notebooks run in a copy of notebooks/ in a temporary folder (one per test session), so their
runs/ and figures/ start empty and a stale run folder from an older version of the code cannot
make this test pass or fail; a notebook that trains reuses the runs of an earlier one in the same
session, as in the course. About 1-3 minutes per notebook on a CPU. They run through
`mopd_mini.course.execute` (its HeadlessClient), as `make course` runs them: a cell whose kernel
stops answering fails within `course.CELL_TIMEOUT`, or the heartbeat's silence limit, naming the
cell, instead of waiting out half an hour (jupyter/nbclient#312).
"""

import copy
import shutil
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError  # noqa: E402

from mopd_mini import course  # noqa: E402

NOTEBOOKS = sorted((Path(__file__).parents[1] / "notebooks").glob("[0-9][0-9]*_*.ipynb"))


@pytest.fixture(scope="session")
def course_dir(tmp_path_factory):
    """A temporary copy of the notebooks folder (the notebooks only: no runs, no figures)."""
    folder = tmp_path_factory.mktemp("course") / "notebooks"
    folder.mkdir()
    for notebook in NOTEBOOKS:
        shutil.copy(notebook, folder / notebook.name)
    return folder


def failed_cell(nb) -> int | None:
    """Index of the first cell whose outputs hold an error or that never got its reply (a timeout)."""
    return next((i for i, cell in enumerate(nb.cells)
                 if any(o.get("output_type") == "error" for o in cell.get("outputs", []))
                 or "shell.execute_reply" not in cell.get("metadata", {}).get("execution", {})), None)


@pytest.mark.slow
@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_twice_in_one_kernel(notebook, course_dir, monkeypatch):
    """All code cells, then all of them again, in one kernel: no cell raises on either pass."""
    monkeypatch.setenv("MOPD_FAST", "1")        # inherited by the kernel
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    nb = nbformat.read(course_dir / notebook.name, as_version=4)
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    nb.cells = [copy.deepcopy(cell) for cell in code + code]
    try:
        course.execute(course_dir / notebook.name, None, nb=nb)   # IPC, as `make course` runs them
        error = None
    except (CellExecutionError, CellTimeoutError, DeadKernelError) as err:
        error = str(err)
    if error is not None:
        i = failed_cell(nb)
        second = i is not None and i >= len(code)
        where = "pass 2: a RE-RUN bug" if second else "pass 1: the notebook fails on its first run"
        cell = "?" if i is None else i % len(code) + 1
        pytest.fail(f"{notebook.name}: code cell {cell} fails on {where}\n{error[-3000:]}", pytrace=False)
