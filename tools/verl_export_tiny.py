"""A few-step tiny course run (two GRPO teachers, one MOPD student), exported for verl.

    python -m tools.verl_export_tiny --out build/verl_export     # what `make check-verl` runs first

So that the verl check works on a clean clone: it makes its own run (about half a CPU minute)
under <work>/runs/verl-tiny/, then calls `mopd_mini.export.main` on it, exactly as a user would
(`python -m mopd_mini.export verl --run runs/verl-tiny --out ...`). The run's numbers mean nothing;
what matters is that its folders are a real course run's.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import torch


def tiny_run(work: Path, experiment: str = "verl-tiny") -> Path:
    """Train teacher_binding, teacher_recall and the student for a few steps; returns the run folder."""
    from mopd_mini import AdapterBank, GRPOConfig, MOPDConfig, load_base, train_student, train_teacher

    work.mkdir(parents=True, exist_ok=True)
    here = os.getcwd()
    os.chdir(work)  # runs/ is relative to the working folder
    try:
        bank = AdapterBank(*load_base("tiny", device="cpu"))
        small = dict(experiment=experiment, eval_every=0, progress=False, checkpoint_every=100)
        for domain in ("binding", "recall"):
            train_teacher(bank, GRPOConfig(domain=domain, steps=2, prompts_per_step=4, group_size=4, **small))
        train_student(bank, MOPDConfig(steps=2, prompts_per_domain=4, topk=8, track_steps=(), eval_n=8, **small))
    finally:
        os.chdir(here)
    return work / "runs" / experiment


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
