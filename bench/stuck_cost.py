"""The stuck detector's own cost: CPU time per MOPD step with the detector as it runs and with it
replaced by a stub (no stuck mask, no closed-form gradient norms: zeros where the metrics read it),
interleaved run by run on the same bank, for each loss form it computes a norm for.

    python -m bench.stuck_cost                 # about two minutes on a 2-core CPU
    python -m bench.stuck_cost --quick

Prints one line per loss, `kl: detector 3.1% of a step (on 41.2 ms, off 40.0 ms, median of 40 steps each)`:
the issue's budget is 3% of a step. The first step of every run is not counted (bench.trainer_step's clock).
"""

from __future__ import annotations

import argparse
import os
from unittest import mock

import torch

from .common import make_bank, median, set_threads
from .trainer_step import per_step


def stub(cfg, student_logits, rollout, teacher, student_logprobs, advantage, student_topk_mass) -> dict:
    """What stuck_info returns with the detector off: zeros for the two tensors the metrics read."""
    zeros = torch.zeros_like(rollout.completion_mask, dtype=torch.float32)
    return {"stuck": zeros, "off_support": zeros}


LOSSES = {"pg": {}, "kl": {}, "topk": {}, "fkl": {}, "jsd": {"beta": 0.5}, "topk_support": {"loss": "topk", "topk_support": True}}


def main(argv=None) -> dict:
    from mopd_mini import MOPDConfig, distill, train_student

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=21, help="steps per run (the first is not counted)")
    p.add_argument("--runs", type=int, default=2, help="runs of each setting, on and off alternated")
    p.add_argument("--losses", nargs="+", default=list(LOSSES), choices=list(LOSSES))
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--quick", action="store_true", help="3 steps, one run, kl only")
    args = p.parse_args(argv)
    set_threads(args.threads)
    if args.quick:
        args.steps, args.runs, args.losses = 3, 1, ["kl"]
    bank = make_bank("tiny")
    out = {}
    for name in args.losses:
        fields = {"loss": name, **LOSSES[name]}
        cfg = MOPDConfig.for_model("tiny", track_steps=(), steps=args.steps, eval_every=0, experiment=None,
                                   progress=False, **fields)
        on, off = [], []
        for _ in range(args.runs):
            on += per_step(lambda: train_student(bank, cfg))
            with mock.patch.object(distill, "stuck_info", stub):
                off += per_step(lambda: train_student(bank, cfg))
        a, b = median(on), median(off)
        out[name] = {"on_ms": a * 1000, "off_ms": b * 1000, "share": (a - b) / a}
        print(f"{name}: detector {100 * (a - b) / a:.1f}% of a step (on {a * 1000:.2f} ms, off {b * 1000:.2f} ms, "
              f"median of {len(on)} steps each)", flush=True)
    print("load average: {:.1f} / {:.1f} / {:.1f}; torch threads {}".format(*os.getloadavg(), torch.get_num_threads()))
    return out


if __name__ == "__main__":
    main()
