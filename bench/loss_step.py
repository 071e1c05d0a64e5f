"""One MOPD step per loss, against the exact reverse KL's: the trainer's own step (bench.trainer_step's
clock: CPU time between logged steps, the first not counted) of `train_student` on the tiny default,
for every loss and for the cures' rollout options, runs alternated (the order rotates every
repetition); each figure is the median over repetitions of (step of the variant) / (step with
loss="kl").

    python -m bench.loss_step                   # a minute or two
    python -m bench.loss_step --quick

The three MOPD loss forms (pg, topk, kl) are computed every step for logging, whatever the loss; a cure
(fkl, jsd) is computed only when it is the loss, so its step is kl's plus one chunked KL of its own.
At the tiny vocabulary the loss is a small part of a step; at Qwen3's, bench.loss_memory times the
losses alone.
"""

from __future__ import annotations

import os

import torch

from .common import make_bank, median, ms, print_and_write, section_head, step_bench_args
from .trainer_step import per_step

VARIANTS = {  # name: MOPDConfig overrides
    "kl (exact reverse KL)": dict(loss="kl"),
    "fkl (on-policy forward KL)": dict(loss="fkl"),
    "jsd (beta = 0.5)": dict(loss="jsd", beta=0.5),
    "topk (k = 64)": dict(loss="topk"),
    "topk, support matching": dict(loss="topk", topk_support=True),
    "pg": dict(loss="pg"),
    "kl, top_p = 0.9": dict(loss="kl", top_p=0.9),
    "kl, lmbda = 0.5 (teacher prefixes)": dict(loss="kl", lmbda=0.5),
}
REFERENCE = "kl (exact reverse KL)"
GOAL = 1.1


def main(argv=None, write: bool = True) -> dict:
    from mopd_mini import MOPDConfig, train_student

    args = step_bench_args(__doc__.split("\n")[0], argv)
    bank = make_bank("tiny")
    common = dict(steps=args.steps, eval_every=0, experiment=None, progress=False, track_steps=())
    names = list(VARIANTS)
    times = {v: [] for v in names}
    train_student(bank, MOPDConfig.for_model("tiny", **{**common, "steps": 2}))  # warm-up, not timed
    load = ["{:.1f}".format(os.getloadavg()[0])]
    for rep in range(args.reps):
        for v in names[rep % len(names):] + names[:rep % len(names)]:
            cfg = MOPDConfig.for_model("tiny", **common, **VARIANTS[v])
            times[v].append(median(per_step(lambda: train_student(bank, cfg))))
        load.append("{:.1f}".format(os.getloadavg()[0]))
        print(f"repetition {rep + 1}: " + "; ".join(f"{v}: {ms(times[v][-1])}" for v in names), flush=True)
    base = times[REFERENCE]
    ratio = {v: median([x / y for x, y in zip(times[v], base)]) for v in names}
    for v in names:
        print(f"MOPD step ({v}): {median(times[v]) * 1000:.2f} ms, {ratio[v]:.2f}x kl")
    lines = [section_head("One MOPD step per loss, against the exact KL (tiny, this CPU)", "bench.loss_step",
                          argv=argv), "",
             f"`train_student` on the tiny default, bench.trainer_step's clock (CPU time between logged steps, the "
             f"first not counted), {args.steps} steps per run, {args.reps} repetitions alternated, "
             f"{torch.get_num_threads()} torch thread(s); load average (1 min) during: {' -> '.join(load)} "
             "(a shared machine). The ratio is the median over repetitions of the variant's step over kl's step "
             "in the same repetition; the goal for each loss is within 1.1x of kl.", "",
             "| variant | step | vs kl |", "| --- | --- | --- |"]
    lines += [f"| {v} | {ms(median(times[v]))} | {ratio[v]:.2f}x |" for v in names]
    lines += ["", "The three MOPD loss forms (pg, topk, kl) are computed every step for logging, so their "
              "steps differ only in the backward; fkl and jsd are computed only when chosen, on top of the exact "
              "KL that is always logged. top_p and lmbda change the rollout, not the loss: an off-policy step "
              "samples with the teachers and trains without the sampler's prefill (its prompt forward runs again)."]
    figures = {f"loss step: {v} vs kl (tiny)": {"goal": f"<= {GOAL}x", "measured": f"{ratio[v]:.2f}x",
                                                 "ok": ratio[v] <= GOAL}
               for v in ("fkl (on-policy forward KL)", "jsd (beta = 0.5)", "topk, support matching")}
    print_and_write("loss_step", "\n".join(lines), None if args.quick else figures,
                    write and not args.no_write and not args.quick)
    return {"times": times, "ratio": ratio}


if __name__ == "__main__":
    main()
