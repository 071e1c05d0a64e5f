"""Real size on this CPU: one MOPD step with the real Qwen3-1.7B architecture (random weights, bf16,
vocabulary 151,936), LoRA r = 16 on every linear layer, two teachers and a student on one base.

The step runs in a fresh subprocess, so its peak resident memory (VmHWM) is its own: the child
records the peak of loading, resets the high-water mark (/proc/self/clear_refs), then runs one
MOPD step (bench.common.Steps.mopd: what train_student does per step) and one SFT step on the
same prompts, and prints what it measured as JSON.

    python -m bench.real_size_cpu               # about 4 minutes on 2 cores; about 7 GB of RAM
    python -m bench.real_size_cpu --4bit        # also on an NF4 base (bitsandbytes on the CPU): a few minutes more
    python -m bench.real_size_cpu --quick       # one small layer, full vocabulary (smoke test)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from .gpu_h200 import save_random_qwen3
from .common import (ROOT, Steps, gb, make_bank, ms, peak_rss_bytes, print_and_write, release_free_memory,
                     reset_peak_rss, rss_bytes, section_head, set_threads, step_examples)

GOAL_GB = 10
SMALL = dict(num_hidden_layers=1, hidden_size=64, intermediate_size=128, num_attention_heads=2,
             num_key_value_heads=1, head_dim=32)


def child(args) -> dict:
    """Runs in the subprocess: load, then one MOPD step and one SFT step, measured."""
    from mopd_mini import MOPDConfig
    from mopd_mini.tokenizer import is_real_qwen3

    set_threads(args.threads)
    if args.quantize:   # bitsandbytes quantises at load time, from a checkpoint: the random weights go to disk once
        with tempfile.TemporaryDirectory(prefix="qwen3-random-") as folder:
            save_random_qwen3(Path(folder), toy=args.quick)
            release_free_memory()
            reset_peak_rss()
            start = time.perf_counter()
            bank = make_bank(folder, quantize=args.quantize)
    else:
        start = time.perf_counter()
        bank = make_bank("qwen3-1.7b-random", shrink=SMALL if args.quick else None)
    out = {"load_s": time.perf_counter() - start, "load_peak": peak_rss_bytes(), "after_load": rss_bytes(),
           "threads": torch.get_num_threads(),
           "params": sum(p.numel() for p in bank.base.parameters()),
           "embed_params": bank.base.get_input_embeddings().weight.numel(),
           "adapter_params": sum(p.numel() for p in bank.parameters("student").values()),
           "tokenizer": "Qwen3's real tokenizer" if is_real_qwen3(bank.tokenizer) else "the stand-in tokenizer"}
    if args.quantize:
        import bitsandbytes

        out["bnb"] = bitsandbytes.__version__
    cfg = MOPDConfig.for_model("qwen3", experiment=None, progress=False, prompts_per_domain=args.prompts)
    steps = Steps(bank, cfg, step_examples(cfg), phases={})

    def unchecked(fn):
        """The same step with activation checkpointing off (the tiny presets' setting, and the old code's)."""
        def run(model):
            bank.set_checkpointing(False)
            try:
                return fn(model)
            finally:
                bank.set_checkpointing(cfg.gradient_checkpointing)
        return run

    with bank.use(cfg.student, trainable=True) as model:
        runs = {"mopd": steps.mopd, "sft": steps.sft, "mopd_no_checkpointing": unchecked(steps.mopd)}
        for name, fn in runs.items():
            steps.reset()
            release_free_memory()
            reset_peak_rss()
            wall, cpu = time.perf_counter(), time.process_time()
            info = fn(model)
            out[name] = {"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu,
                         "peak": peak_rss_bytes(), **info}
            if name == "mopd":
                out["phases"] = {k: v[0] for k, v in steps.phases.items()}
            print(f"{name}: {out[name]['wall']:.1f} s, peak RSS {gb(out[name]['peak'])}", file=sys.stderr, flush=True)
    out["step_peak"] = max(out["mopd"]["peak"], out["sft"]["peak"])
    return out


def run_child(argv: list[str]) -> dict:
    cmd = [sys.executable, "-m", "bench.real_size_cpu", "--child", *argv]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"the measuring subprocess failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def runs_range(runs: list[dict]) -> str:
    """The range over the bf16 runs of each step's times and peaks (one run: says so)."""
    if len(runs) < 2:
        return "One run (`--runs N` repeats it, each in a fresh subprocess, and gives the spread)."

    def span(key, field, fmt):
        xs = [r[key][field] for r in runs]
        return f"{fmt(min(xs))} to {fmt(max(xs))}"

    return (f"Spread over {len(runs)} bf16 runs, each in a fresh subprocess, the 4-bit one between them; the "
            "machine was shared with other jobs throughout, so wall time moves far more than CPU time: MOPD step "
            f"(checkpointing on) CPU {span('mopd', 'cpu', ms)}, wall {span('mopd', 'wall', ms)}, peak RSS "
            f"{span('mopd', 'peak', gb)}; SFT step CPU {span('sft', 'cpu', ms)}, peak RSS {span('sft', 'peak', gb)}; "
            f"checkpointing off CPU {span('mopd_no_checkpointing', 'cpu', ms)}, peak RSS "
            f"{span('mopd_no_checkpointing', 'peak', gb)}.")


def report(res: dict, args, argv) -> tuple[str, dict]:
    m, s = res["mopd"], res["sft"]
    ok = res["step_peak"] <= GOAL_GB * 2**30
    head = section_head("Real size on this CPU: Qwen3-1.7B architecture, one MOPD step", "bench.real_size_cpu",
                        argv=argv)
    lines = [head.replace(f"torch threads {torch.get_num_threads()}", f"torch threads {res['threads']}"), "",
             f"Random weights in bf16 ({res['params'] / 1e9:.2f} B parameters"
             f"{', one small layer: --quick' if args.quick else ''}), three LoRA adapters (r = 16, every linear "
             f"layer; {res['adapter_params'] / 1e6:.1f} M parameters each), {args.prompts} prompts per domain with "
             f"the Qwen3 preset (`MOPDConfig.for_model('qwen3')`: max_new_tokens 8, {res.get('tokenizer', 'the stand-in tokenizer')}'s chat "
             f"format with FactWorld's instruction). MOPD block {m['shape'][0]} x {m['shape'][1]} tokens "
             f"({m['tokens']} sampled: random weights never stop early, so every row runs the whole budget). "
             "Measured in a fresh subprocess, one run of each step; each step's peak RSS is its own (the "
             "high-water mark is reset before it).", "",
             "| | wall time | peak RSS | goal |", "| --- | --- | --- | --- |",
             f"| one MOPD step, as the Qwen3 preset runs it (activation checkpointing on) | **{ms(m['wall'])}** "
             f"(CPU {ms(m['cpu'])}) | **{gb(m['peak'])}** | peak <= {GOAL_GB} GB: {'met' if ok else '**missed**'} |",
             f"| one SFT step, same prompts, same setting | {ms(s['wall'])} (MOPD / SFT = {m['wall'] / s['wall']:.2f}x) "
             f"| {gb(s['peak'])} | |"]
    u = res["mopd_no_checkpointing"]
    lines.append(f"| one MOPD step, activation checkpointing off | {ms(u['wall'])} ({u['wall'] / m['wall']:.2f}x) "
                 f"| {gb(u['peak'])} | |")
    lines += [f"| after loading (base + adapters, resident) | | {gb(res['after_load'])} | |",
              f"| while loading (random init, built in bf16) | {ms(res['load_s'])} | {gb(res['load_peak'])} | |"]
    q = res.get("4bit")
    if q:
        lines += [f"| NF4 base (bitsandbytes {q.get('bnb', '?')} on this CPU, bf16 compute): one MOPD step, checkpointing on "
                  f"| {ms(q['mopd']['wall'])} (CPU {ms(q['mopd']['cpu'])}; {q['mopd']['wall'] / m['wall']:.2f}x bf16) "
                  f"| {gb(q['mopd']['peak'])} | |",
                  f"| NF4 base: one SFT step | {ms(q['sft']['wall'])} | {gb(q['sft']['peak'])} | |",
                  f"| NF4 base: one MOPD step, checkpointing off | {ms(q['mopd_no_checkpointing']['wall'])} "
                  f"| {gb(q['mopd_no_checkpointing']['peak'])} | |",
                  f"| NF4 base: after loading (resident) | | {gb(q['after_load'])} | |",
                  f"| NF4 base: while loading (quantised from a bf16 checkpoint) | {ms(q['load_s'])} | {gb(q['load_peak'])} | |"]
    lines += ["", runs_range(res.get("runs", [res])), "",
              "MOPD step by phase (CPU time, as the preset runs it):", "", "| phase | CPU time |", "| --- | --- |"]
    lines += [f"| {k} | {ms(v)} |" for k, v in res["phases"].items()]
    per_row = (m["peak"] - res["after_load"]) / m["shape"][0]
    per_row_off = (u["peak"] - res["after_load"]) / m["shape"][0]
    proj, proj_off = res["after_load"] + 16 * per_row, res["after_load"] + 16 * per_row_off
    embed = res["embed_params"]
    adapters = 3 * res["adapter_params"]  # `params` counts the base and its three adapters
    w4 = (res["params"] - embed - adapters) * 0.5 + embed * 2 + adapters * 4  # bytes
    proj4 = w4 + 16 * per_row
    lines += ["", f"**What this says about the GPU (a rough projection).** Above the resident model, a step with "
              f"activation checkpointing off peaks at {gb(per_row_off)} per row of {m['shape'][1]} tokens, most of "
              "it the activations that the student's forward keeps for backward (28 layers; RMSNorm and peft's LoRA "
              f"path keep fp32 copies of their inputs): about {gb(proj_off)} in all at batch 16, "
              f"{'over' if proj_off > 16 * 2**30 else 'under'} the 16 GB bf16 goal of the GPU section. With "
              "checkpointing (keep each layer's input, recompute the layer in backward), as the Qwen3 presets run "
              f"it, {gb(per_row)} per row, about {gb(proj)} at batch 16, "
              f"{'over' if proj > 16 * 2**30 else 'under'} that goal. In 4-bit the weights shrink to about "
              f"{gb(w4)} (NF4 linear layers, the tied embedding kept in bf16, three fp32 adapters) and the "
              f"activations do not, so batch 16 projects to about {gb(proj4)}, "
              f"{'over' if proj4 > 8 * 2**30 else 'under'} the 8 GB 4-bit goal (fewer prompts per step, or a "
              "shorter completion budget, are the levers there; "
              "the GPU script measures it). These are resident-set figures: they move by a GB or two between runs and "
              "count what the CPU allocator keeps after frees, so they overstate a CUDA allocator's peak; the GPU "
              "script measures both settings exactly."]
    lines += ["", "On this CPU a real-size step "
              f"takes {m['cpu']:.0f} s of CPU time (wall time counts the waits for a core other jobs hold): the "
              "course's Qwen3 path is for a GPU (next section)."]
    figures = {"real size on CPU: peak RSS of a MOPD step": {"goal": f"<= {GOAL_GB} GB", "measured": gb(m["peak"]),
                                                            "ok": ok},
               "real size on CPU: one MOPD step (batch 4)": {"goal": "(time, no goal)", "measured": ms(m["wall"]),
                                                             "ok": None}}
    return "\n".join(lines), figures


def main(argv=None, write: bool = True):
    p = argparse.ArgumentParser(description="one MOPD step at the real Qwen3-1.7B size on this CPU")
    p.add_argument("--prompts", type=int, default=2, help="prompts per domain")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1: on this shared machine 2 "
                   "threads ran a Qwen3 forward 3x slower than 1, the other core being busy)")
    p.add_argument("--quick", action="store_true", help="one small layer, full vocabulary (smoke test)")
    p.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    p.add_argument("--4bit", dest="four_bit", action="store_true", help="also the same steps on an NF4 base "
                   "(bitsandbytes on this CPU, bf16 compute; the random weights saved to a temporary folder first)")
    p.add_argument("--runs", type=int, default=1, help="bf16 runs, each in a fresh subprocess (the table shows the "
                   "first; the spread of all is printed under it)")
    p.add_argument("--quantize", default=None, help=argparse.SUPPRESS)   # the child's: load the base quantised
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(args)))
        return None
    argv_all = sys.argv[1:] if argv is None else argv
    passed = [a for i, a in enumerate(argv_all) if a not in ("--no-write", "--4bit", "--runs")
              and not (i and argv_all[i - 1] == "--runs")]          # what the children take
    runs, quantised = [], []
    for _ in range(args.runs):   # bf16 and 4-bit children alternate, so a busy spell of the machine hits both
        runs.append(run_child(passed))
        if args.four_bit and len(quantised) < 1:
            quantised.append(run_child(passed + ["--quantize", "4bit"]))
    res = dict(runs[0], runs=runs)
    if quantised:
        res["4bit"] = quantised[0]
    body, figures = report(res, args, argv)
    print_and_write("real_size", body, None if args.quick else figures, write and not args.no_write and not args.quick)
    return res


if __name__ == "__main__":
    main()
