"""The trainers' own step, as they run it: CPU time per step of `train_student` (MOPD) and
`train_grpo` (GRPO), tiny default, evaluation and tracking off, runs in memory. Everything a step
does is in it: prompts, sampling, teacher scoring, the loss, backward and AdamW, rewards, metrics,
logging. The clock reads at every `Run.log` (one per step); the first step is not counted.

    python -m bench.trainer_step                # about a minute
    python -m bench.trainer_step --quick

Prints one line per trainer (`MOPD step: 41.2 ms`, ...), which `bench.compare_commits` reads:

    python -m bench.compare_commits --base HEAD~1 --metric "MOPD=MOPD step: ([0-9.]+)" \\
        --metric "GRPO=GRPO step: ([0-9.]+)" -- python -m bench.trainer_step
"""

from __future__ import annotations

import argparse
import os
import time
from contextlib import contextmanager
from unittest import mock

import torch

from .common import make_bank, median, set_threads


@contextmanager
def step_clock(times: list, clock=time.process_time):
    """clock() at every Run.log (one call per step), appended to `times` (default: process_time)."""
    from mopd_mini import runs

    original = runs.Run.log

    def log(self, row):
        times.append(clock())
        return original(self, row)

    with mock.patch.object(runs.Run, "log", log):
        yield


def per_step(fn) -> list[float]:
    stamps = []
    with step_clock(stamps):
        fn()
    return [b - a for a, b in zip(stamps, stamps[1:])]


def main(argv=None) -> dict:
    from mopd_mini import GRPOConfig, MOPDConfig, train_grpo, train_student

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=21, help="steps per run (the first is not counted)")
    p.add_argument("--runs", type=int, default=2, help="runs of each trainer, alternated")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--quick", action="store_true", help="3 steps, one run")
    args = p.parse_args(argv)
    set_threads(args.threads)
    if args.quick:
        args.steps, args.runs = 3, 1
    bank = make_bank("tiny")
    common = dict(steps=args.steps, eval_every=0, experiment=None, progress=False)
    mopd = MOPDConfig.for_model("tiny", track_steps=(), **common)
    grpo = GRPOConfig.for_model("tiny", domain="binding", name="bench_grpo", **common)
    times = {"MOPD": [], "GRPO": []}
    for _ in range(args.runs):
        times["MOPD"] += per_step(lambda: train_student(bank, mopd))
        times["GRPO"] += per_step(lambda: train_grpo(bank, grpo))
    out = {k: median(v) for k, v in times.items()}
    load = "{:.1f} / {:.1f} / {:.1f}".format(*os.getloadavg())
    print(f"MOPD step: {out['MOPD'] * 1000:.2f} ms (median of {len(times['MOPD'])} steps, train_student, tiny default)")
    print(f"GRPO step: {out['GRPO'] * 1000:.2f} ms (median of {len(times['GRPO'])} steps, train_grpo, tiny default)")
    print(f"load average: {load}; torch threads {torch.get_num_threads()}")
    return out


if __name__ == "__main__":
    main()
