"""`python -m mopd_mini.course` (make course), the notebook re-run test and nbmake (`pytest -p
mopd_mini.course --nbmake`) execute notebooks with `course.HeadlessClient`: a kernel that talks over
IPC (no "TCP without encryption" warning), widget cells that run headless, and a cell that fails,
naming itself, when its kernel stops answering (jupyter/nbclient#312: a missed wake-up used to cost
the whole cell timeout, 30 minutes, and then pass)."""

import asyncio
import os
import subprocess
import sys

import pytest

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("nbclient")

from mopd_mini import course  # noqa: E402

pytestmark = pytest.mark.skipif(os.name == "nt", reason="no IPC transport, no SIGSTOP on Windows")

WIDGET_CELL = """
import matplotlib.pyplot as plt
from ipywidgets import IntSlider, interact

def show(k=3):
    plt.figure(figsize=(2, 1)); plt.bar(range(k), range(k)); plt.show()

interact(show, k=IntSlider(value=3, min=1, max=5));
"""


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


def test_widget_cells_run_headless_and_keep_their_figures(tmp_path):
    """interact draws into an Output widget, whose nbclient mimic sends on the shell socket while
    the reply is awaited there: the cells complete and each figure is in its widget's state."""
    book = notebook(tmp_path, "%matplotlib inline", WIDGET_CELL, WIDGET_CELL, "print('after the widgets')")
    client = course.execute(book, None)
    figures = [o for state in client.widget_state.values() for o in state.get("outputs", [])
               if "image/png" in o.get("data", {})]
    assert len(figures) == 2
    assert client.nb.cells[-1].outputs[0]["text"] == "after the widgets\n"


class DeafShellClient(course.HeadlessClient):
    """Every wake-up of the shell socket is missed, as in nbclient#312: its poll sleeps out the
    whole timeout it is given, then looks once (what pyzmq's timed poll does when it missed it).
    For a cell whose source holds LOST, it never looks: the reply is lost."""

    async def async_start_new_kernel_client(self):
        kc = await super().async_start_new_kernel_client()
        socket, poll = kc.shell_channel.socket, kc.shell_channel.socket.poll
        self.asked, self.lose = [], False

        async def deaf_poll(timeout=None, flags=1):
            self.asked.append(timeout)
            await asyncio.sleep(timeout / 1000)
            return 0 if self.lose else await poll(0, flags)

        socket.poll = deaf_poll
        return kc

    async def async_execute_cell(self, cell, cell_index, *args, **kwargs):
        self.lose = "LOST" in cell.source
        return await super().async_execute_cell(cell, cell_index, *args, **kwargs)


def run_deaf(book, **options):
    nb = nbformat.read(book, as_version=4)
    with course.local_kernel_config() as config:
        client = DeafShellClient(nb, kernel_name="python3", config=config,
                                 resources={"metadata": {"path": str(book.parent)}}, **options)
        try:
            client.execute()
        finally:
            client.nb = nb
    return client


def test_a_missed_wake_up_costs_one_poll_slice_not_the_cell_timeout(tmp_path):
    client = run_deaf(notebook(tmp_path, "x = 6 * 7", "print(x)", WIDGET_CELL), timeout=300, poll_slice=0.2)
    assert client.nb.cells[1].outputs[0]["text"] == "42\n"
    assert client.asked and max(client.asked) <= 200      # never asked to wait longer than a slice
    assert client.missed_wakeups >= 3    # each cell's reply was found at a slice's end (and kernel_info's)


def test_a_reply_lost_after_the_kernel_went_idle_fails_naming_the_cell(tmp_path):
    """The stall of the issue: the kernel idle, the client waiting; it used to last the cell timeout."""
    from nbclient.exceptions import CellTimeoutError

    book = notebook(tmp_path, "print('fine')", "print('LOST')", "print('never')")
    with pytest.raises(CellTimeoutError) as err:
        run_deaf(book, timeout=600, poll_slice=0.2, idle_grace=1, shutdown_kernel="immediate")
    assert str(err.value).startswith("cell 1: the kernel went idle after the cell but its reply did not come in 1 s")
    assert "print('LOST')" in str(err.value)


def test_a_stopped_kernel_fails_within_the_silence_limit_naming_the_cell(tmp_path):
    from nbclient.exceptions import CellTimeoutError

    book = notebook(tmp_path, "print('fine')", "import os, signal\nos.kill(os.getpid(), signal.SIGSTOP)",
                    "print('never')")
    with pytest.raises(CellTimeoutError) as err:
        course.execute(book, None, timeout=600, silence_limit=2, shutdown_kernel="immediate")
    message = str(err.value)
    assert message.startswith("cell 1: ")
    assert "has not answered its heartbeat for 2 s" in message and "signal.SIGSTOP" in message


def test_a_dead_kernel_names_the_cell(tmp_path):
    from nbclient.exceptions import DeadKernelError

    book = notebook(tmp_path, "print('fine')", "import os\nos._exit(3)")
    with pytest.raises(DeadKernelError, match=r"^cell 1: Kernel died") as err:
        course.execute(book, None)
    assert "os._exit(3)" in str(err.value)


def test_the_pytest_plugin_gives_nbmake_the_headless_client(monkeypatch):
    nb_run = pytest.importorskip("nbmake.nb_run")
    monkeypatch.setattr(nb_run, "NotebookClient", nb_run.NotebookClient)   # restored after the test
    course.pytest_configure(None)
    assert nb_run.NotebookClient is course.HeadlessClient
    with pytest.raises(RuntimeError, match="cannot be given"):              # not silently a no-op
        course.pytest_configure(None)


@pytest.mark.slow
def test_nbmake_with_the_plugin_names_the_cell_that_timed_out(tmp_path):
    """`pytest -p mopd_mini.course --nbmake` as `make test` runs it (a subprocess: it imports torch
    through mopd_mini, about 10 s on a quiet CPU, a minute on a loaded one)."""
    pytest.importorskip("nbmake")
    book = notebook(tmp_path, "print('fine')", "import time\ntime.sleep(60)")
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "mopd_mini.course", "--nbmake",
                          "--nbmake-timeout=2", "-q", "-p", "no:cacheprovider", str(book)],
                         cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "cell 1: A cell timed out" in run.stdout, run.stdout
