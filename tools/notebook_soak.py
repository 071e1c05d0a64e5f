"""Soak: execute one notebook many times, headless, while a training process competes for the cores,
and report each run's time and any stall (jupyter/nbclient#312, docs/reliability.md "Headless
notebook runs").

    python -m tools.notebook_soak                                   # 04_loss_lab x 30, CI mode, a teacher trains beside it
    python -m tools.notebook_soak --runs 5 --compete matmul         # a torch matmul loop competes instead
    python -m tools.notebook_soak --client stock --cell-timeout 120 # nbclient's own client: a stall costs the cell timeout
    python -m tools.notebook_soak --widget-cells 200 [--no-output-mimic]   # the cause, counted (below)

Each run executes the notebook in a fresh kernel, in a temporary copy of it (one folder for the
whole soak, so its runs/ hold the teachers the first run trains and later runs reload, as
tests/test_notebook_reruns.py does), in the CI mode (MOPD_FAST=1) unless --full, with one torch
thread in the kernel (OMP_NUM_THREADS=1 unless set, as that test runs it). `--client
headless` (the default) is mopd_mini.course.HeadlessClient, what every runner of the course uses;
it counts the replies it found only at the end of a poll slice (a missed wake-up: with nbclient's
own client, each would have waited out the whole cell timeout and then passed). A run that fails
(a cell error, a timeout, a silent heartbeat) is reported with its message and the soak goes on.

`--widget-cells N` executes instead, once, a notebook of N copies of an `interact` cell that draws
a figure (what widgets.gradient_panel does) and counts the missed wake-ups; `--no-output-mimic`
turns off nbclient's Output-widget mimic (its `widget_registry`), whose sends on the shell socket
while the reply is awaited there are what loses the wake-ups.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

from mopd_mini import course

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"

COMPETITORS = {
    "teachers": lambda work: [sys.executable, "-m", "mopd_mini.cli", "teachers", "--runs-dir", str(work / "compete"),
                              "--experiment", "soak-competitor", "--domain", "binding", "--steps", "1000000",
                              "--eval-every", "1000000", "--checkpoint-every", "1000000", "--no-progress"],
    "matmul": lambda work: [sys.executable, "-c", "import torch\na = torch.randn(1024, 1024)\nwhile True:\n    a @ a"],
}
"""a process that keeps the cores busy for the whole soak (restarted if it ends): a GRPO teacher
trained for a million steps (the issue's case: another training process on the same cores), or a
torch matmul loop; both with torch's default threads (every core)"""


def start_competitor(kind: str, work: Path):
    if kind == "none":
        return None
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MOPD_FAST")}
    return subprocess.Popen(COMPETITORS[kind](work), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def run_once(book: Path, client: str, cell_timeout: int) -> dict:
    """Execute the notebook once; its time, its slowest cell, missed wake-ups, or its failure."""
    nb = nbformat.read(book, as_version=4)
    start = time.time()
    row = {"ok": True, "missed_wakeups": None}
    try:
        if client == "headless":
            done = course.execute(book, None, timeout=cell_timeout, nb=nb)
            row["missed_wakeups"] = done.missed_wakeups
        else:
            with course.local_kernel_config() as config:
                NotebookClient(nb, timeout=cell_timeout, kernel_name="python3", config=config,
                               resources={"metadata": {"path": str(book.parent)}}).execute()
    except (CellExecutionError, CellTimeoutError, DeadKernelError) as err:
        row.update(ok=False, error=f"{type(err).__name__}: {str(err).strip().splitlines()[0]}")
    row["seconds"] = round(time.time() - start, 1)
    cell, seconds = max(course.cell_seconds(nb), key=lambda c: c[1], default=(None, 0.0))
    row["slowest_cell"] = {"cell": cell, "seconds": round(seconds, 1)}
    return row


def soak_summary(rows: list, args, restarts: int) -> dict:
    times = [r["seconds"] for r in rows]
    later = times[1:] or times      # the first run trains the teachers the others reload
    return {
        "runs": len(rows), "failed": sum(not r["ok"] for r in rows),
        "first_run_s": times[0] if times else None,
        "later_runs_s": {"min": min(later), "median": statistics.median(later), "max": max(later)} if later else None,
        "stalled_runs": sum(r["seconds"] >= args.cell_timeout for r in rows),
        "missed_wakeups": None if args.client == "stock" else sum(r["missed_wakeups"] or 0 for r in rows),
        "slowest_cell_s": max((r["slowest_cell"]["seconds"] for r in rows), default=None),
        "competitor_restarts": restarts,
    }


def write(args, rows: list, summary: dict) -> None:
    if args.json:
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "runs": rows,
                                         "summary": summary}, indent=1))


WIDGET_CELL = """
import matplotlib.pyplot as plt
from ipywidgets import IntSlider, interact

def show(k=3):
    plt.figure(figsize=(3, 2)); plt.bar(range(k), range(k)); plt.show()

interact(show, k=IntSlider(value=3, min=1, max=6));
"""


def count_missed_wakeups(cells: int, mimic: bool) -> dict:
    """One kernel, `cells` interact cells: how many replies HeadlessClient found only at a slice's end."""
    work = Path(tempfile.mkdtemp(prefix="mopd-widgets-"))
    book = work / "widgets.ipynb"
    code = ["%matplotlib inline"] + [WIDGET_CELL] * cells
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in code])
    start = time.time()
    with course.local_kernel_config() as config:
        client = course.HeadlessClient(nb, kernel_name="python3", config=config,
                                       resources={"metadata": {"path": str(work)}})
        if not mimic:
            client.widget_registry = {}
        client.execute()
    shutil.rmtree(work, ignore_errors=True)
    return {"cells": cells, "output_mimic": mimic, "missed_wakeups": client.missed_wakeups,
            "seconds": round(time.time() - start, 1), "load": round(os.getloadavg()[0], 1)}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--notebook", default="04_loss_lab", help="the notebook's name, without .ipynb")
    p.add_argument("--runs", type=int, default=30)
    p.add_argument("--full", action="store_true", help="the full mode (default: the CI mode, MOPD_FAST=1)")
    p.add_argument("--compete", choices=["teachers", "matmul", "none"], default="teachers")
    p.add_argument("--client", choices=["headless", "stock"], default="headless",
                   help="mopd_mini.course.HeadlessClient, or nbclient's NotebookClient as it ships")
    p.add_argument("--cell-timeout", type=int, default=course.CELL_TIMEOUT, help="seconds per cell")
    p.add_argument("--json", type=Path, help="write every run's row and the summary here")
    p.add_argument("--widget-cells", type=int, help="count missed wake-ups over this many interact cells instead")
    p.add_argument("--no-output-mimic", action="store_true", help="with --widget-cells: nbclient's Output mimic off")
    args = p.parse_args(argv)
    if args.widget_cells:
        print(json.dumps(count_missed_wakeups(args.widget_cells, mimic=not args.no_output_mimic)))
        return 0

    if args.full:
        os.environ.pop("MOPD_FAST", None)
    else:
        os.environ["MOPD_FAST"] = "1"           # inherited by the kernels
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("OMP_NUM_THREADS", "1")   # the kernel's, as tests/test_notebook_reruns.py sets it
    work = Path(tempfile.mkdtemp(prefix="mopd-soak-"))
    book = work / "notebooks" / f"{args.notebook}.ipynb"
    book.parent.mkdir()
    shutil.copy(NOTEBOOKS / book.name, book)
    mode = "full" if args.full else "CI mode (MOPD_FAST=1)"
    print(f"{args.runs} runs of {book.name}, {mode}, client {args.client}, cell timeout {args.cell_timeout} s, "
          f"competitor: {args.compete}; in {work}; load average {os.getloadavg()[0]:.1f}", flush=True)
    competitor = start_competitor(args.compete, work)
    rows, restarts = [], 0
    try:
        for i in range(args.runs):
            if competitor is not None and competitor.poll() is not None:
                competitor, restarts = start_competitor(args.compete, work), restarts + 1
            row = run_once(book, args.client, args.cell_timeout)
            row["load"] = round(os.getloadavg()[0], 1)
            rows.append(row)
            slow = row["slowest_cell"]
            print(f"run {i + 1:2}: {row['seconds']:6.1f} s  slowest cell {slow['cell']} ({slow['seconds']:.0f} s)  "
                  f"missed wake-ups {row['missed_wakeups']}  load {row['load']}  "
                  f"{'ok' if row['ok'] else row['error']}", flush=True)
            write(args, rows, soak_summary(rows, args, restarts))    # an interrupted soak keeps its runs
    finally:
        if competitor is not None:
            competitor.kill()
            competitor.wait()
        shutil.rmtree(work, ignore_errors=True)

    summary = soak_summary(rows, args, restarts)
    print(json.dumps(summary))
    write(args, rows, summary)
    return 1 if summary["failed"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
