"""Run every CPU benchmark and rewrite docs/benchmarks.md (what `make bench` does).

    python -m tools.run_all                     # everything, about 20-30 minutes on 2 cores
    python -m tools.run_all --only step routing
    python -m tools.run_all --quick             # every script at its smallest size; writes nothing

Order: the tiny benchmarks first, then the memory ones, the course's stages, the GPU script's dry
run (its section says how to run it on a GPU; on a machine with CUDA the real run replaces it),
and the real-size CPU step last (the longest). A benchmark that fails is reported and the others
still run; the exit status is then 1.
"""

from __future__ import annotations

import argparse
import sys
import traceback

import torch

from bench import (bf16_floor, course_stages, gpu_h200, loss_memory, loss_step, peers, real_size_cpu, routing, scaling,
               step_vs_sft, stuck_gradient)
from bench import common
from bench.common import command, reset_doc, write_section

BENCHMARKS = {  # section key: (module, arguments of the full run)
    "step": (step_vs_sft, []),
    "routing": (routing, []),
    "loss_memory": (loss_memory, []),
    "loss_step": (loss_step, []),
    "stuck_gradient": (stuck_gradient, []),
    "peers": (peers, []),
    "stages": (course_stages, []),
    "gpu": (gpu_h200, [] if torch.cuda.is_available() else ["--dry-run"]),
    "real_size": (real_size_cpu, []),
    "bf16_floor": (bf16_floor, ["--allow-reuse"]),
    "scaling": (scaling, []),
}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--only", nargs="*", choices=list(BENCHMARKS), help="run these sections only (the page "
                   "keeps the others as they are)")
    p.add_argument("--quick", action="store_true", help="smallest sizes, print only (what the smoke test runs)")
    args = p.parse_args(argv)
    keys = args.only or list(BENCHMARKS)
    common.RUN_BY = command("tools.run_all", argv)
    if not args.quick and not args.only:
        reset_doc()
    failed = []
    for key in keys:
        module, bench_argv = BENCHMARKS[key]
        if args.quick:
            bench_argv = (["--dry-run"] if key == "gpu" else ["--quick"]) + ["--no-write"]
        print(f"\n===== {key}: python -m {module.__name__} {' '.join(bench_argv)}", flush=True)
        try:
            module.main(bench_argv)
        except Exception:  # report, keep going
            failed.append(key)
            error = traceback.format_exc()
            print(error, file=sys.stderr)
            if not args.quick:
                write_section(key, f"## {key}\n\n**This benchmark failed** in the last `make bench`:\n\n"
                                   f"```\n{error[-2000:]}\n```")
    print(f"\n{len(keys) - len(failed)} of {len(keys)} benchmarks ran" + (f"; failed: {failed}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
