"""Wall time of the course's stages on this CPU: the tiny default, full mode (not MOPD_FAST), one
run each, in memory (experiment=None: nothing is reloaded from runs/).

    stage 1   pretraining of the tiny base: not re-run (the course ships the checkpoint); its own
              record (mopd_mini/tiny_base/pretrain_metrics.json) is quoted
    stage 2   GRPO teachers: GRPOConfig.for_model("tiny", domain=...) for binding, then recall
    stage 3   the MOPD student: MOPDConfig.for_model("tiny")
    evaluate  the four models (base, both teachers, student) at n = 200, as notebook 03 does

    python -m bench.course_stages               # several minutes
    python -m bench.course_stages --quick       # 2 steps per stage, n = 8 (smoke test)
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace

from .common import ROOT, ms, print_and_write, section_head, set_threads


def pretrain_record() -> str:
    path = ROOT / "mopd_mini" / "tiny_base" / "pretrain_metrics.json"
    try:
        curve = json.loads(path.read_text())["curve"]
        last = curve[-1]
        return f"{last['seconds']:.0f} s for {last['step']:,} steps (its own record, {path.relative_to(ROOT)})"
    except (OSError, KeyError, IndexError, ValueError):
        return "no record found (the Makefile quotes about 3 CPU minutes)"


def run_stages(quick: bool) -> dict:
    from mopd_mini import AdapterBank, GRPOConfig, MOPDConfig, evaluate, load_base, train_grpo, train_student

    fast = dict(steps=2, eval_every=0) if quick else {}
    bank = AdapterBank(*load_base("tiny", device="cpu"))
    times = {}

    def timed(name, fn):
        wall, cpu = time.perf_counter(), time.process_time()
        out = fn()
        times[name] = {"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu}
        print(f"{name}: {times[name]['wall']:.1f} s", flush=True)
        return out

    for d in ("binding", "recall"):
        cfg = replace(GRPOConfig.for_model("tiny", domain=d, experiment=None, progress=False), **fast)
        timed(f"stage 2: GRPO teacher_{d} ({cfg.steps} steps)", lambda cfg=cfg: train_grpo(bank, cfg))
    cfg = replace(MOPDConfig.for_model("tiny", experiment=None, progress=False), **fast)
    if quick:
        cfg = replace(cfg, track_steps=(1,))
    timed(f"stage 3: MOPD student ({cfg.steps} steps)", lambda: train_student(bank, cfg))
    n = 8 if quick else 200
    timed(f"evaluate 4 models (n = {n} per domain and length)",
          lambda: evaluate(bank, ["base", "teacher_binding", "teacher_recall", "student"], n=n))
    return times


def main(argv=None, write: bool = True):
    p = argparse.ArgumentParser(description="wall time of the course's stages, tiny default, full mode")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1; see the note)")
    p.add_argument("--quick", action="store_true", help="2 steps per stage, n = 8 (smoke test)")
    p.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    args = p.parse_args(argv)
    from mopd_mini.runs import FAST
    if FAST and not args.quick:
        raise SystemExit("MOPD_FAST is set: unset it to time the full course")
    set_threads(args.threads)
    times = run_stages(args.quick)
    total = sum(t["wall"] for t in times.values())
    lines = [section_head("Wall time of the course's stages (tiny, this CPU)", "bench.course_stages", argv=argv), "",
             "One run of each stage, in order, in one process (full mode: the presets' step counts, not "
             "MOPD_FAST), with one torch thread. CPU time beside the wall time shows how much of the wall "
             "time went to waiting for a core on this shared machine.", "",
             "| stage | wall time | CPU time |", "| --- | --- | --- |",
             f"| stage 1: pretraining the tiny base (not re-run; the course ships it) | {pretrain_record()} | |"]
    lines += [f"| {name} | {ms(t['wall'])} | {ms(t['cpu'])} |" for name, t in times.items()]
    lines += [f"| **stages 2-3 and evaluation** | **{ms(total)}** | |", "",
              "The notebooks add plotting and a few small hand-run steps on top; `make course` executes them all "
              "(`python -m mopd_mini.course` prints each notebook's time). The notebooks do not set a thread "
              "count, so torch uses every core: on a quiet laptop that is fine, but on a machine where other "
              "jobs hold the cores the tiny model's small ops stall on thread synchronisation (several times "
              "slower here), which is why these figures use one thread, as the test suite does."]
    figures = {"course stages 2-3 + evaluation (tiny, CPU, wall)": {"goal": "(time, no goal)",
                                                                     "measured": ms(total), "ok": None}}
    print_and_write("stages", "\n".join(lines), None if args.quick else figures,
                    write and not args.no_write and not args.quick)
    return times


if __name__ == "__main__":
    main()
