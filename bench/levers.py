"""The trainers' speed levers, each switched off in turn, in one process: the trainers' own step time
(bench.trainer_step's clock) with everything on, with prefill once off (the two-pass path that
tests/test_prefill_once.py keeps as its reference: `prefill_reusable` answers False), and with
fused AdamW off (torch's plain AdamW). Runs alternate (the order rotates every repetition); each
figure is the median over repetitions of (step with the lever off) / (step with everything on).

    python -m bench.levers                      # a few minutes
    python -m bench.levers --quick

(`bench.compare_commits` measures a change against its parent commit instead, in two processes.)
"""

from __future__ import annotations

import os
from contextlib import ExitStack
from unittest import mock

import torch

from .common import make_bank, median, ms, print_and_write, section_head, step_bench_args
from .trainer_step import per_step


def plain_adamw(params, lr, weight_decay=0.0):
    return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)


def variants():
    from mopd_mini import distill, grpo, routing

    def never(model, checkpointing):
        return False

    return {"all on": [],
            "prefill once off (two passes, train/eval toggles)": [(distill, "prefill_reusable", never), (grpo, "prefill_reusable", never)],
            "fused AdamW off (plain AdamW)": [(distill, "adamw", plain_adamw), (grpo, "adamw", plain_adamw)],
            "folded teacher weights off (low-rank routed pass)": [(routing, "FOLDED_LIMIT", -1)]}


def main(argv=None, write: bool = True) -> dict:
    from mopd_mini import GRPOConfig, MOPDConfig, train_grpo, train_student

    args = step_bench_args(__doc__.split("\n")[0], argv)
    bank = make_bank("tiny")
    common = dict(steps=args.steps, eval_every=0, experiment=None, progress=False)
    trainers = {"MOPD (train_student)": lambda: train_student(bank, MOPDConfig.for_model("tiny", track_steps=(), **common)),
                "GRPO (train_grpo)": lambda: train_grpo(bank, GRPOConfig.for_model("tiny", domain="binding",
                                                                                      name="bench_grpo", **common))}
    names = list(variants())
    times = {t: {v: [] for v in names} for t in trainers}
    load = ["{:.1f}".format(os.getloadavg()[0])]
    for rep in range(args.reps):
        for v in names[rep % len(names):] + names[:rep % len(names)]:
            with ExitStack() as stack:
                for module, attr, value in variants()[v]:
                    stack.enter_context(mock.patch.object(module, attr, value))
                for t, fn in trainers.items():
                    times[t][v].append(median(per_step(fn)))
        load.append("{:.1f}".format(os.getloadavg()[0]))
        print(f"repetition {rep + 1}: " + "; ".join(f"{t} {v}: {ms(times[t][v][-1])}" for t in trainers for v in names),
              flush=True)
    lines = [section_head("The trainers' speed levers, each off in turn (tiny, this CPU)", "bench.levers", argv=argv), "",
             f"The trainers' own steps (bench.trainer_step's clock: CPU time between logged steps, the first not "
             f"counted), {args.steps} steps per run, {args.reps} repetitions alternated, {torch.get_num_threads()} "
             f"torch thread(s); load average (1 min) during: {' -> '.join(load)} (a shared machine).", "",
             "| trainer | " + " | ".join(names) + " |", "| --- |" + " --- |" * len(names)]
    for t in trainers:
        base = times[t]["all on"]
        cells = [ms(median(base))] + [f"{ms(median(times[t][v]))} ({median([x / y for x, y in zip(times[t][v], base)]):.2f}x)"
                                      for v in names[1:]]
        lines.append(f"| {t} | " + " | ".join(cells) + " |")
    lines += ["", "A ratio above 1 is what the lever saves: the step with it off, over the step with everything "
              "on. The per-step overhead changes (LoRA layers found once, one batch_decode) and the skipped "
              "train/eval toggles have no switch; they are inside every column."]
    print_and_write("levers", "\n".join(lines), None, write and not args.no_write and not args.quick)
    return times


if __name__ == "__main__":
    main()
