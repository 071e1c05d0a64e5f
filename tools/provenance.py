"""What the studies, the benchmarks and the tools all record or use: the machine a run ran on, the
command that reproduces it, the worker processes a run is dealt to, and a page's pre-registered text
(what a study keeps when it rewrites its Results).

One home for both kinds of script: bench/ (speed and memory) and studies/ import it from here, so
neither imports the other for these.
"""

from __future__ import annotations

import os
import platform
import re
import shlex
import subprocess
import sys
from pathlib import Path

import torch


def machine() -> dict:
    """CPU model, cores, memory, GPU, library versions and torch threads of this run."""
    info = {"cpu": platform.processor() or "unknown", "cores": os.cpu_count(), "memory_gb": None}
    try:
        text = Path("/proc/cpuinfo").read_text()
        names = re.findall(r"^model name\s*:\s*(.+)$", text, re.M)
        info["cpu"] = names[0].strip() if names else info["cpu"]
        mem = re.search(r"^MemTotal:\s*(\d+) kB", Path("/proc/meminfo").read_text(), re.M)
        info["memory_gb"] = round(int(mem.group(1)) / 2**20, 1) if mem else None
    except OSError:
        pass
    import peft
    import transformers

    info.update(torch=torch.__version__, transformers=transformers.__version__, peft=peft.__version__,
                python=platform.python_version(), threads=torch.get_num_threads(),
                gpu=torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)
    return info


def machine_line(info: dict | None = None) -> str:
    m = info or machine()
    gpu = f", GPU {m['gpu']}" if m["gpu"] else ", no GPU"
    return (f"{m['cpu']}, {m['cores']} cores, {m['memory_gb']} GB RAM{gpu}; torch {m['torch']}, "
            f"transformers {m['transformers']}, peft {m['peft']}, Python {m['python']}; "
            f"torch threads {m['threads']}")


def command(module: str, argv: list[str] | None = None) -> str:
    """The exact command that reproduces this run (from the repository root)."""
    argv = sys.argv[1:] if argv is None else argv
    env = " ".join(f"{k}={os.environ[k]}" for k in ("OMP_NUM_THREADS", "MOPD_FAST") if k in os.environ)
    return " ".join(x for x in [env, "python -m", module, shlex.join(argv)] if x)


def in_processes(module: str, jobs: list, workers: int, argv_of) -> None:
    """Run `jobs` in `workers` processes of one torch thread each, dealt round-robin: process i runs
    `python -m <module> *argv_of(i, its jobs)`. Waits for all; a failing one stops the command (the
    benchmarks reload what finished, so running it again resumes)."""
    procs = [subprocess.Popen([sys.executable, "-m", module, *argv_of(w, jobs[w::workers])],
                              env={**os.environ, "OMP_NUM_THREADS": "1"})
             for w in range(workers) if jobs[w::workers]]
    print(f"{module}: {len(jobs)} jobs in {len(procs)} worker processes", flush=True)
    failed = sum(p.wait() != 0 for p in procs)
    if failed:
        raise SystemExit(f"{failed} worker process(es) of {module} failed; run the same command again "
                         "(finished runs reload)")



def above_header(text: str, header: str) -> str:
    """`text` above its first line that is exactly `header` (a page's results section, which a
    bench rewrites), the whole text if there is none. A mention of the header inside a sentence
    (e.g. "appends a `## Results` section") is not the header: splitting on the bare string would
    cut the page there and lose what follows (it did, once, to docs/matched.md's pre-registration)."""
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.rstrip("\n") == header:
            return "".join(lines[:i])
    return text
