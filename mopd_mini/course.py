"""Run the course: execute every notebook top to bottom and time it.

    python -m mopd_mini.course                 # the full course, executed copies in build/notebooks/
    python -m mopd_mini.course --fast          # the CI mode: MOPD_FAST=1 (fewer steps, same code)

MOPD_FAST=1 shrinks step counts and evaluation sizes through the trainers' `for_model`
presets (and keeps its runs apart, under runs/<experiment>-fast/); every code path is the same
(`mopd_mini.runs.FAST`). Each notebook runs in its own kernel, in its own folder (notebooks/),
so its runs/ and figures/ land there.

Every runner of the notebooks (this one, tests/test_notebook_reruns.py, nbmake in `make test`
through `pytest -p mopd_mini.course`) executes them with `HeadlessClient`: a cell whose kernel
stops answering fails within minutes, naming the cell, instead of waiting out a 30-minute limit
(docs/reliability.md, "Headless notebook runs").
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from contextlib import contextmanager
from datetime import datetime
from functools import partial
from pathlib import Path
from queue import Empty

try:
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionComplete, CellTimeoutError, DeadKernelError
    from traitlets import Float, Integer
except ImportError as err:  # pragma: no cover
    raise SystemExit(f"running the notebooks needs the notebooks extra ({err.name} is missing): "
                     "pip install -e '.[notebooks]'") from err

NOTEBOOK_GLOB = "[0-9][0-9]*_*.ipynb"
"""the numbered notebooks, in course order: 01_factworld ... 05_baselines, 05b_evidence, 06_ablations ..."""

CELL_TIMEOUT = 1200
"""seconds one cell may run before a headless run fails naming it (nbclient's per-cell timeout): a
backstop for a cell that computes forever, since a kernel that stops answering is caught sooner
(IDLE_GRACE, SILENCE_LIMIT). Generous on purpose: on this project's 2 shared cores at a load
average of 8 to 12 (torch's default 2 threads in the kernel), the CI mode's teacher-training cells (02 cell 8, 04 cell 2) ran past 600 s
(docs/reliability.md, "Headless notebook runs"); 1800 s, the old limit, was what a stall cost."""

POLL_SLICE = 1.0
"""seconds of one wait on a kernel socket. pyzmq's asyncio poll can miss the wake-up for a reply
that has arrived (nbclient's Output-widget mimic sends on the shell socket while the reply is
awaited on it); a timed poll ends with a zero-timeout check that finds the reply. So every wait
is a loop of polls this long, and a missed wake-up costs at most this, not the cell's timeout."""

IDLE_GRACE = 30.0
"""seconds the reply to a cell may lag the kernel's "idle" after it before the run fails naming
the cell: the stall of jupyter/nbclient#312 exactly (the kernel idle, the client still waiting)"""

SILENCE_LIMIT = 60.0
"""seconds the kernel's heartbeat may go unanswered while a cell runs before the run fails naming
the cell. The heartbeat is answered by a thread of the kernel in C, outside the GIL, even while a
cell computes; it goes silent when the kernel process is stopped (SIGSTOP, a frozen machine)."""

@contextmanager
def local_kernel_config():
    """traitlets config for a kernel that talks to this process over IPC (Unix sockets in a
    private temporary folder) instead of TCP ports on localhost.

    ipykernel warns "Kernel is running over TCP without encryption" for every TCP kernel without
    CurveZMQ keys: true, and irrelevant for a kernel on the same machine, but a newcomer reads it
    as something wrong. IPC needs no encryption (the sockets are files only this user can open),
    so the warning is not silenced but made untrue; nothing else the kernel prints is touched.
    The socket path is absolute because the kernel runs in the notebook's folder and this client
    in ours. Windows has no IPC transport: there the kernel keeps TCP (and the warning)."""
    from traitlets.config import Config

    config = Config()
    if os.name == "nt":
        yield config
        return
    with tempfile.TemporaryDirectory(prefix="mopd-kernel-") as folder:   # mode 0700
        config.KernelManager.transport = "ipc"
        config.KernelManager.ip = os.path.join(folder, "kernel")
        yield config


class HeadlessClient(NotebookClient):
    """nbclient's NotebookClient for headless runs, with two changes.

    1. Every wait on the kernel's shell and IOPub sockets is a loop of `poll_slice`-second
       polls (jupyter/nbclient#312; nbclient PR #311 did this for the untimed wait only): a
       missed wake-up is recovered at the end of the slice and counted in `missed_wakeups`.
    2. Between two polls for a cell's reply, the kernel is checked: its reply more than
       `idle_grace` seconds late after its "idle" status, or its heartbeat silent for
       `silence_limit` seconds, and the cell fails (CellTimeoutError, which nbmake reports with
       the cell's index). A cell fails after `timeout` seconds (default CELL_TIMEOUT; a
       timeout of None or 0 means CELL_TIMEOUT, not "wait forever"), and when the kernel dies
       (nbclient's check, every second). Each message starts with "cell <index>" and shows
       the cell's source."""

    timeout = Integer(CELL_TIMEOUT, allow_none=True).tag(config=True)
    poll_slice = Float(POLL_SLICE, help="seconds of one poll of a kernel socket").tag(config=True)
    idle_grace = Float(IDLE_GRACE, help="seconds a reply may lag the kernel's idle").tag(config=True)
    silence_limit = Float(SILENCE_LIMIT, help="seconds of an unanswered heartbeat that fail a cell").tag(config=True)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.missed_wakeups = 0    # replies found at the end of a slice instead of when they came
        self._silent = None        # why the current cell stopped waiting, when a liveness check did it
        self._idle_at = None       # when the kernel said "idle" after the current cell

    async def async_start_new_kernel_client(self):
        kc = await super().async_start_new_kernel_client()
        kc.shell_channel.get_msg = partial(self._get_msg, kc.shell_channel, kc.shell_channel.get_msg, True)
        kc.iopub_channel.get_msg = partial(self._get_msg, kc.iopub_channel, kc.iopub_channel.get_msg, False)
        self._note_ctrl_c()
        return kc

    def _note_ctrl_c(self) -> None:
        """nbclient takes SIGINT over while it runs (its handler shuts the kernel down; the cell then
        fails as a dead kernel, and the clean-up after it with an AssertionError): the same, after
        telling the command line it was Ctrl-C (`cli.interrupt.note_ctrl_c`: one line, exit 130)."""
        import asyncio
        import atexit
        import signal

        from .cli.interrupt import note_ctrl_c

        def on_sigint():   # nbclient's own on_signal, after the note
            note_ctrl_c()
            self._async_cleanup_kernel_future = asyncio.ensure_future(self._async_cleanup_kernel())
            atexit.unregister(self._cleanup_kernel)

        try:
            asyncio.get_event_loop().add_signal_handler(signal.SIGINT, on_sigint)
        except (RuntimeError, NotImplementedError, ValueError):  # not the main thread, or Windows: nbclient's as is
            pass

    async def _get_msg(self, channel, get_now, watch, timeout=None):
        """channel.get_msg(timeout) as polls of at most poll_slice seconds; `watch`: between
        two, raise Empty (nbclient's timeout path, which names the cell) when a liveness check
        fails (self._stopped)."""
        start = time.monotonic()
        silent_since = None
        while True:
            left = None if timeout is None else timeout - (time.monotonic() - start)
            wait = self.poll_slice if left is None else max(0.0, min(self.poll_slice, left))
            polled = time.monotonic()
            if await channel.socket.poll(int(wait * 1000)):
                if wait > 0 and time.monotonic() - polled >= wait:
                    self.missed_wakeups += 1
                return await get_now(timeout=0)
            if left is not None and left <= wait:
                raise Empty
            if watch:
                silent_since = None if self.kc.hb_channel.is_beating() else silent_since or time.monotonic()
                self._silent = self._stopped(silent_since)
                if self._silent:
                    raise Empty

    def _stopped(self, silent_since):
        """Why the kernel is taken to have stopped answering, or None."""
        now = time.monotonic()
        if self._idle_at is not None and now - self._idle_at >= self.idle_grace:
            return f"the kernel went idle after the cell but its reply did not come in {self.idle_grace:g} s"
        if silent_since is not None and now - silent_since >= self.silence_limit:
            return f"the kernel has not answered its heartbeat for {self.silence_limit:g} s (stopped or frozen)"
        return None

    def process_message(self, msg, cell, cell_index):
        try:
            return super().process_message(msg, cell, cell_index)
        except CellExecutionComplete:       # the kernel's "idle" after this cell
            self._idle_at = time.monotonic()
            raise

    def _get_timeout(self, cell):
        return super()._get_timeout(cell) or CELL_TIMEOUT

    async def async_execute_cell(self, cell, cell_index, *args, **kwargs):
        self._silent = self._idle_at = None
        try:
            return await super().async_execute_cell(cell, cell_index, *args, **kwargs)
        except CellTimeoutError as err:
            why = f"{self._silent}. The cell:\n{cell.source}" if self._silent else err
            raise CellTimeoutError(f"cell {cell_index}: {why}") from None
        except DeadKernelError as err:
            raise DeadKernelError(f"cell {cell_index}: {err} while it ran:\n{cell.source}") from None


def pytest_configure(config):
    """`pytest -p mopd_mini.course --nbmake ...`: nbmake executes each notebook with HeadlessClient.
    nbmake has no option for a client class: it calls the NotebookClient it imported into
    nbmake.nb_run, which is replaced here (refused loudly if nbmake no longer has it)."""
    import nbmake.nb_run

    if getattr(nbmake.nb_run, "NotebookClient", None) is not NotebookClient:
        raise RuntimeError("nbmake.nb_run.NotebookClient is not nbclient's NotebookClient: this nbmake "
                           "cannot be given mopd_mini.course.HeadlessClient; see docs/reliability.md")
    nbmake.nb_run.NotebookClient = HeadlessClient


def cell_seconds(nb) -> list[tuple[int, float]]:
    """(index, seconds) of every executed code cell, from the kernel's own timestamps
    (nbclient's record_timing: the cell's execute_input to its execute_reply)."""
    times = []
    for i, cell in enumerate(nb.cells):
        stamps = cell.get("metadata", {}).get("execution", {})
        if "iopub.execute_input" in stamps and "shell.execute_reply" in stamps:
            t0, t1 = (datetime.fromisoformat(stamps[k].replace("Z", "+00:00"))
                      for k in ("iopub.execute_input", "shell.execute_reply"))
            times.append((i, (t1 - t0).total_seconds()))
    return times


def execute(notebook: Path, out_dir: Path, timeout: int = CELL_TIMEOUT, nb=None, **client_options):
    """Execute one notebook (or `nb`, its cells changed) in the notebook's folder; write the
    executed copy to out_dir (None: not written); return the client (its `nb` holds the executed
    cells; cell_seconds(client.nb) the time of each)."""
    import nbformat

    nb = nbformat.read(notebook, as_version=4) if nb is None else nb
    with local_kernel_config() as config:
        client = HeadlessClient(nb, timeout=timeout, kernel_name="python3", config=config,
                                resources={"metadata": {"path": str(notebook.parent)}}, **client_options)
        client.execute()
    if out_dir is not None:
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, out_dir / notebook.name)
    return client


PROGRESS: dict = {}
"""the notebooks `main` runs and those it has executed, for the line after a Ctrl-C (`interrupted`)"""


def _without_only(argv: list[str]) -> list[str]:
    """`argv` without its --only and the prefixes that follow it."""
    kept, skipping = [], False
    for a in argv:
        if a == "--only":
            skipping = True
        elif a.startswith("--only="):
            skipping = False
        elif skipping and not a.startswith("-"):
            continue
        else:
            skipping = False
            kept.append(a)
    return kept


def interrupted(argv: list[str], prog: str = "python -m mopd_mini.course") -> str:
    """What a course run stopped by Ctrl-C kept, in words (the line `cli.interrupt.interruptible`
    prints): the notebooks executed (their copies in --out), the one stopped, and the command that runs
    the rest (--only the notebooks not executed; a notebook's training runs resume from their last
    checkpoints)."""
    from .cli.interrupt import command_line

    books, done = PROGRESS.get("books", []), PROGRESS.get("done", [])
    rest = [b for b in books if b not in done]
    if not rest:
        return f"no notebook was running. Run the same command to start again: {command_line(prog, argv)}"
    finished = (f"{len(done)} notebook(s) executed ({', '.join(b.name for b in done)}; copies in "
                f"{PROGRESS['out']})" if done else "no notebook finished")
    again = command_line(prog, [*_without_only(list(argv)), "--only", *(b.stem for b in rest)])
    return (f"{finished}; {rest[0].name} stopped (its training runs resume from their last checkpoints). "
            f"Run the rest with: {again}")


def main(argv=None, prog: str = "python -m mopd_mini.course"):
    """Execute the notebooks, in order, and time them. Ctrl-C: one line (`interrupted`) where it runs
    as a command (`cli.interrupt.run_main`)."""
    PROGRESS.clear()
    p = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n")[0])
    p.add_argument("--notebooks", default="notebooks", help="folder of numbered notebooks")
    p.add_argument("--out", default="build/notebooks", help="where executed copies are written")
    p.add_argument("--fast", action="store_true", help="the CI mode (MOPD_FAST=1)")
    p.add_argument("--only", nargs="*", help="notebook name prefixes to run, e.g. 01 03")
    args = p.parse_args(argv)
    if args.fast:
        os.environ["MOPD_FAST"] = "1"  # inherited by the kernels
    books = sorted(Path(args.notebooks).glob(NOTEBOOK_GLOB))
    if args.only:
        books = [b for b in books if any(b.name.startswith(o) for o in args.only)]
    if not books:
        raise SystemExit(f"no notebooks matching {NOTEBOOK_GLOB} in {args.notebooks}")
    times, slowest = {}, {}
    PROGRESS.update(books=books, done=[], out=Path(args.out))
    for book in books:
        print(f"running {book.name} ...", flush=True)
        start = time.time()
        client = execute(book, Path(args.out))
        times[book.name] = time.time() - start
        cell, seconds = max(cell_seconds(client.nb), key=lambda c: c[1], default=(None, 0.0))
        slowest[book.name] = {"cell": cell, "seconds": round(seconds, 1)}
        print(f"  {times[book.name]:6.0f} s (slowest: cell {cell}, {seconds:.0f} s)", flush=True)
        PROGRESS["done"].append(book)
    times["total"] = sum(times.values())
    times["slowest_cell"] = slowest
    mode = "fast" if os.environ.get("MOPD_FAST") else "full"
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / f"timings-{mode}.json").write_text(json.dumps(times, indent=1))
    print(f"\n{mode} course: " + ", ".join(f"{k} {times[k]:.0f} s" for k in [*(b.name for b in books), "total"]))


if __name__ == "__main__":
    import sys

    from .cli.interrupt import run_main

    sys.exit(run_main(main, sys.argv[1:], "python -m mopd_mini.course", interrupted))
