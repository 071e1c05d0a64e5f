"""Run the course: execute every notebook top to bottom and time it.

    python -m mopd_mini.course                 # the full course, executed copies in build/notebooks/
    python -m mopd_mini.course --fast          # the CI mode: MOPD_FAST=1 (fewer steps, same code)

MOPD_FAST=1 shrinks step counts and evaluation sizes through the trainers' `for_model`
presets (and keeps its runs apart, under runs/<experiment>-fast/); every code path is the same
(`mopd_mini.runs.FAST`). Each notebook runs in its own kernel, in its own folder (notebooks/),
so its runs/ and figures/ land there.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

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


def execute(notebook: Path, out_dir: Path, timeout: int = 3600) -> float:
    """Execute one notebook in its own folder; write the executed copy; return the seconds."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(notebook, as_version=4)
    start = time.time()
    with local_kernel_config() as config:
        NotebookClient(nb, timeout=timeout, kernel_name="python3", config=config,
                       resources={"metadata": {"path": str(notebook.parent)}}).execute()
    seconds = time.time() - start
    out_dir.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, out_dir / notebook.name)
    return seconds


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--notebooks", default="notebooks", help="folder of numbered notebooks")
    p.add_argument("--out", default="build/notebooks", help="where executed copies are written")
    p.add_argument("--fast", action="store_true", help="the CI mode (MOPD_FAST=1)")
    p.add_argument("--only", nargs="*", help="notebook name prefixes to run, e.g. 01 03")
    args = p.parse_args(argv)
    if args.fast:
        os.environ["MOPD_FAST"] = "1"  # inherited by the kernels
    books = sorted(Path(args.notebooks).glob("[0-9][0-9]_*.ipynb"))
    if args.only:
        books = [b for b in books if any(b.name.startswith(o) for o in args.only)]
    if not books:
        raise SystemExit(f"no notebooks matching [0-9][0-9]_*.ipynb in {args.notebooks}")
    times = {}
    for book in books:
        print(f"running {book.name} ...", flush=True)
        times[book.name] = execute(book, Path(args.out))
        print(f"  {times[book.name]:6.0f} s", flush=True)
    times["total"] = sum(times.values())
    mode = "fast" if os.environ.get("MOPD_FAST") else "full"
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / f"timings-{mode}.json").write_text(json.dumps(times, indent=1))
    print(f"\n{mode} course: " + ", ".join(f"{k} {v:.0f} s" for k, v in times.items()))


if __name__ == "__main__":
    main()
