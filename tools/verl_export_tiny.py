"""A few-step tiny course run (two GRPO teachers, one MOPD student), exported for verl.

    python -m tools.verl_export_tiny --out build/verl_export     # what `make check-verl` runs first

So that the verl check works on a clean clone: it makes its own run (about half a CPU minute)
under <work>/runs/verl-tiny/ (mopd_mini.export.tiny_run, which the export's tests train too), then calls `mopd_mini.export.main` on it, exactly as a user would
(`python -m mopd_mini.export verl --run runs/verl-tiny --out ...`). The run's numbers mean nothing;
what matters is that its folders are a real course run's.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from mopd_mini.export import tiny_run


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default="build/verl_export", help="the export folder")
    p.add_argument("--work", default="build/verl_tiny_run", help="where the tiny run is trained")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    out, work = Path(args.out).resolve(), Path(args.work).resolve()
    start = time.time()
    run = tiny_run(work)
    print(f"tiny run in {run} ({time.time() - start:.0f} s); exporting:")
    print(f"python -m mopd_mini.export verl --run {run} --out {out} --force")
    from mopd_mini.export import main as export

    export(["verl", "--run", str(run), "--out", str(out), "--force"])  # its own output: replaced whole


if __name__ == "__main__":
    main()
