"""`python -m mopd_mini.course` (make course) runs each notebook in a kernel that talks over IPC:
no "TCP without encryption" warning per notebook, and a failing cell still fails loudly."""

import os

import pytest

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("nbclient")

from mopd_mini import course  # noqa: E402

pytestmark = pytest.mark.skipif(os.name == "nt", reason="no IPC transport on Windows")


def notebook(tmp_path, *sources):
    path = tmp_path / "book" / "00_probe.ipynb"
    path.parent.mkdir()
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources]), path)
    return path


def test_the_course_kernel_runs_in_the_notebooks_folder_without_the_tcp_warning(tmp_path, capfd):
    book = notebook(tmp_path, "import os, sys\nprint(os.getcwd())\nprint('to stderr', file=sys.stderr)")
    course.execute(book, tmp_path / "out")
    err = capfd.readouterr().err
    assert "without encryption" not in err, err
    done = nbformat.read(tmp_path / "out" / book.name, as_version=4)
    texts = {o["name"]: o["text"] for o in done.cells[0].outputs}
    assert texts["stdout"].strip() == str(book.parent)      # the kernel ran in the notebook's folder
    assert "to stderr" in texts["stderr"]                   # a cell's own stderr is kept
    assert not any(p.name.startswith("kernel") for p in book.parent.iterdir())   # no socket files left


def test_a_failing_cell_still_fails_the_course(tmp_path):
    from nbclient.exceptions import CellExecutionError

    book = notebook(tmp_path, "raise ValueError('a real error')")
    with pytest.raises(CellExecutionError, match="a real error"):
        course.execute(book, tmp_path / "out")
