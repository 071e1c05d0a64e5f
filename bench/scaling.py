"""How the cost grows: N teachers on one base, longer completions, bigger batches.

    python -m bench.scaling --curve teachers     # N in {2, 4, 8, 16}: tiny and Qwen3-1.7B width (~20 min)
    python -m bench.scaling --curve length       # C in {4, 16, 64}: against TRL and against SFT (~10 min)
    python -m bench.scaling --curve batch        # B in {8, 16, 32, 64}: MOPD, GRPO, SFT per sample (~5 min)
    python -m bench.scaling --quick              # every curve at toy sizes, nothing written (smoke test)

Each curve writes its own section of docs/benchmarks.md (scale_teachers, scale_length, scale_batch)
and a figure in docs/figures/. Timings are interleaved repetitions (bench.common.side_by_side, or
runs alternated), one torch thread, and the clock is the process's CPU time (wall time beside it);
the spread over repetitions is stated with every ratio.

1. **N teachers.** N copies of binding under distinct routing tags (`bench.common.copies`), each
   routed to its own teacher adapter (random lora_B), the batch fixed (16 rows: 16 / N prompts a
   teacher): the routed MOPD step (`bench.common.Steps.mopd`, what `train_student` runs per step)
   against the same step with N separate teacher models (the base with each teacher folded in, as
   TRL and verl hold teachers: `bench.peers.separate_scorer`). Peak memory of one step at the
   Qwen3-1.7B width and vocabulary, each configuration in its own process; N separate models that
   would not fit are projected from the measured ones, a straight line in N, and say so. The shared
   base is measured twice: with peft's fp32 teacher adapters and with them compacted to the base's
   bf16 (`AdapterBank.compact`, `MOPDConfig.compact_teachers`); `--memory-only --memory-kinds compact`
   measures only the compact rows again and keeps every other saved figure.
2. **Completion length.** Every completion forced to exactly C tokens (`sample(min_new_tokens=)`,
   `generate`'s `min_new_tokens` on TRL's side): this library's `train_student` step against TRL's
   DistillationTrainer (`bench.peers.compare_one_teacher`), MOPD's step against an SFT step on
   C-token targets, and the sampler's cost per token against transformers' `generate`.
3. **Batch.** Each trainer's own step (train_student, train_grpo, train_offline on gold answers),
   timed between its logged steps, per sample of the batch.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from mopd_mini import stats
from mopd_mini.adapters import atomic_write

from .common import (ROOT, Steps, copies, copy_name, gb, machine, make_bank, median, ms, print_and_write, pyplot,
                     section_head, set_threads, side_by_side, step_examples)

FIGURES = ROOT / "docs" / "figures"
TEACHER_NS = (2, 4, 8, 16)
LENGTHS = (4, 16, 64)
BATCHES = (8, 16, 32, 64)
GOAL_TIME = 1.15     # routed step at 8 teachers / at 2, fixed batch
GOAL_MEMORY = 1.05   # peak memory at 8 teachers / at 2, Qwen3 size
QWEN3 = "qwen3-1.7b-random"


def min_max(xs: list[float]) -> str:
    """'min-max' of per-repetition values, for the tables."""
    return f"{min(xs):.3f}-{max(xs):.3f}" if len(xs) > 1 else f"{xs[0]:.3f}"


def ratio_interval(a: list[float], b: list[float]) -> tuple[float, float]:
    """Median of the per-repetition ratios a/b and the half-width of the 95% t-interval of their
    mean (NaN with one repetition): how well the repetitions pin the ratio down."""
    r = [x / y for x, y in zip(a, b)]
    return median(r), stats.t_half_width(r)


def log_ticks(ax, xs, y: bool = False) -> None:
    """A log axis labelled at `xs` only, as plain numbers (no minor ticks' 10^x labels)."""
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    ax.set_xticks(xs, [str(x) for x in xs])
    ax.xaxis.set_minor_formatter(NullFormatter())
    if y:
        ax.yaxis.set_major_formatter(ScalarFormatter())
        ax.yaxis.set_minor_formatter(NullFormatter())


def teacher_names(n: int) -> tuple[str, ...]:
    return tuple(copy_name(i)[1] for i in range(n))


def config(size: str, **overrides):
    from mopd_mini import MOPDConfig

    return MOPDConfig.for_model("tiny" if size == "tiny" else "qwen3", experiment=None, progress=False, **overrides)


QUICK_SHRINK = dict(hidden_size=64, intermediate_size=128, num_attention_heads=2, num_key_value_heads=1, head_dim=32)
"""--quick: a toy Qwen3 (its vocabulary, a tiny width), so the smoke test's memory children take seconds"""


def shrink(layers: int, quick: bool) -> dict:
    return {"num_hidden_layers": layers, **(QUICK_SHRINK if quick else {})}


def bank_for(size: str, n: int, layers: int, quick: bool = False):
    if size == "tiny":
        return make_bank("tiny", teachers=teacher_names(n))
    return make_bank(QWEN3, shrink=shrink(layers, quick), teachers=teacher_names(n))


# ---------------------------------------------------------------------------------------------
# 1. N teachers
# ---------------------------------------------------------------------------------------------


def separate_models(bank, size: str, n: int, layers: int, quick: bool = False) -> dict:
    """{routing tag: a full model with that teacher folded in} for the first n copy domains."""
    from .peers import separate_teacher

    model = "tiny" if size == "tiny" else QWEN3
    kw = {} if size == "tiny" else {"shrink": shrink(layers, quick)}
    return {copy_name(i)[0]: separate_teacher(bank, copy_name(i)[1], model, **kw) for i in range(n)}


def time_teachers(size: str, ns, batch: int, reps: int, layers: int, separate_ns=()) -> dict:
    """The routed step at each N (one bank holding the largest N's teachers), and with N separate
    teacher models at each of `separate_ns`, interleaved."""
    from .peers import separate_scorer

    bank = bank_for(size, max(ns), layers)
    cfg = config(size)
    steps, fns = {}, {}
    models = separate_models(bank, size, max(separate_ns), layers) if separate_ns else {}
    with bank.use(cfg.student, trainable=True) as model:
        for n in ns:
            examples, routed = copies(cfg, n, batch)
            steps[f"routed N={n}"] = Steps(bank, routed, examples)
            fns[f"routed N={n}"] = (lambda s: lambda: s.mopd(model))(steps[f"routed N={n}"])
        for n in separate_ns:
            examples, routed = copies(cfg, n, batch)
            outputs = separate_scorer({d: m for d, m in models.items() if d in routed.route})
            steps[f"separate N={n}"] = Steps(bank, routed, examples)
            fns[f"separate N={n}"] = (lambda s, f: lambda: s.mopd(model, teacher_outputs=f))(steps[f"separate N={n}"], outputs)
        shape = steps[f"routed N={ns[0]}"].mopd(model)["shape"]
        t = side_by_side(fns, reps=reps, warmup=1, before_each=lambda name: steps[name].reset())
    return {"timings": t, "shape": shape, "layers": layers if size != "tiny" else None}


MEMORY_KINDS = ("shared", "compact", "separate")
"""the memory children: the teachers as fp32 adapters on the student's base, the same compacted to the
base's bf16 (`AdapterBank.compact`), or n separate folded models"""


def memory_child(kind: str, n: int, batch: int, layers: int, quick: bool = False) -> dict:
    """One MOPD step at the Qwen3 width with n teachers: `shared` (adapters on the student's base),
    `compact` (the same, each teacher's adapter compacted to the base's bf16, as
    `MOPDConfig.compact_teachers` does) or `separate` (n folded models); the process's peak RSS (VmHWM:
    this process's own, where getrusage's ru_maxrss would carry the parent's peak across exec)."""
    from .common import peak_rss_bytes
    from .peers import separate_scorer

    bank = bank_for("qwen3", n, layers, quick)
    cfg = config("qwen3")
    examples, routed = copies(cfg, n, batch)
    steps = Steps(bank, routed, examples)
    outputs = None
    if kind == "separate":
        outputs = separate_scorer(separate_models(bank, "qwen3", n, layers, quick))
        for name in teacher_names(n):
            bank._drop(name)                     # the teachers live in their own models only
    if kind == "compact":
        for name in teacher_names(n):
            bank.compact(name)                   # before the step, whose peak the RSS reads
    with bank.use(cfg.student, trainable=True) as model:
        steps.mopd(model, teacher_outputs=outputs)
    size = lambda name: sum(p.numel() * p.element_size() for p in bank.parameters(name).values())  # noqa: E731
    return {"kind": kind, "n": n, "layers": layers, "peak_rss": peak_rss_bytes(),
            "adapter_bytes": size(cfg.student),
            "teacher_bytes": size(teacher_names(n)[0]) if kind != "separate" else None}


def memory(kind: str, n: int, batch: int, layers: int, quick: bool) -> dict:
    """`memory_child` in a fresh process (its own peak), glibc's mmap threshold fixed."""
    from .peers import MALLOC_FIXED

    cmd = [sys.executable, "-m", "bench.scaling", "--memory-child", kind, "--n", str(n), "--batch", str(batch),
           "--layers", str(layers)] + (["--quick"] if quick else [])
    env = {**os.environ, **MALLOC_FIXED, "OMP_NUM_THREADS": "1"}
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"the {kind} memory run (N={n}, {layers} layers) failed:\n{done.stderr[-3000:]}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    out["wall"] = time.perf_counter() - start
    print(f"  memory {kind} N={n}, {layers} layers: peak RSS {gb(out['peak_rss'])} ({out['wall']:.0f} s)", flush=True)
    return out


def line(xs, ys) -> tuple[float, float]:
    """Least-squares a, b of y = a + b x."""
    mx, my = statistics.mean(xs), statistics.mean(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return my - b * mx, b


def teachers_curve(args) -> dict:
    """Memory first (each configuration in its own process), then the step times in this one."""
    ns = (2, 4) if args.quick else TEACHER_NS
    res = {}
    batch = 4 if args.quick else 16
    if args.quick:   # one toy configuration each: the code path, in seconds
        plan = {kind: [(2, 1)] for kind in MEMORY_KINDS}
    else:            # every N at `layers`; N = 2 and 8 also at twice the depth (the slope to 28 layers)
        L, L2 = args.layers, 2 * args.layers
        shared = [(n, L) for n in ns] + [(2, L2), (8, L2)]
        plan = {"shared": shared, "compact": shared, "separate": [(2, L), (4, L), (2, L2)]}
        plan = {kind: plan[kind] for kind in MEMORY_KINDS if kind in args.memory_kinds}
    mem = {kind: {} for kind in plan}
    for kind, points in plan.items():
        for n, L in points:
            mem[kind][(n, L)] = memory(kind, n, batch, L, args.quick)
    res["memory"] = mem
    res["batch"] = batch
    if args.memory_only:   # the step times of the last saved run stay
        return res
    res["tiny"] = time_teachers("tiny", ns, 4 if args.quick else 16, 1 if args.quick else args.reps, 0, separate_ns=ns)
    if not args.quick:
        res["qwen3"] = time_teachers("qwen3", ns, 16, args.qwen3_reps, args.layers, separate_ns=(2, 8))
    return res


def report_teachers(res: dict, args, argv) -> tuple[str, dict, dict]:
    plt = pyplot()

    lines = [section_head("How the cost grows with N teachers on one base", "bench.scaling", argv=argv), "",
             f"N domains (copies of binding under distinct routing tags), each routed to its own teacher adapter, "
             f"a fixed batch of {res['tiny']['shape'][0]} rows ({res['tiny']['shape'][0]} / N prompts a teacher). The "
             "routed MOPD step is what `train_student` runs per step (one mixed forward scores every teacher); "
             "beside it the same step with N separate teacher models (the base with that teacher folded in, as "
             "TRL and verl hold teachers), the student's part unchanged. Medians of interleaved repetitions "
             "(CPU time, one torch thread); ratios are medians of per-repetition ratios, the 95% t-interval "
             "half-width of their mean beside them.", ""]
    figures, fig_data = {}, {}
    for size, label in (("tiny", "tiny"), ("qwen3", f"Qwen3-1.7B width and vocabulary, {args.layers} of its 28 "
                                                     "layers, bf16")):
        if size not in res:
            continue
        t = res[size]["timings"]
        ns = [int(k.split("=")[1]) for k in t.cpu if k.startswith("routed")]
        first = f"routed N={ns[0]}"
        lines += [f"**Step time, {label}** ({res[size]['shape'][0]} x {res[size]['shape'][1]} tokens, "
                  f"{len(t.cpu[first])} repetitions):", "",
                  f"| N | routed step | vs N = {ns[0]} | separate models' step | separate / routed |",
                  "| --- | --- | --- | --- | --- |"]
        fig_data[size] = {"n": ns, "routed": [], "separate": {}}
        for n in ns:
            r, half = ratio_interval(t.cpu[f"routed N={n}"], t.cpu[first])
            sep = f"separate N={n}"
            s_cell = (f"{ms(t.median(sep))} | {ratio_interval(t.cpu[sep], t.cpu[f'routed N={n}'])[0]:.3f}x"
                      if sep in t.cpu else "(not timed) | ")
            lines.append(f"| {n} | {ms(t.median(f'routed N={n}'))} | {r:.3f}x ± {half:.3f} | {s_cell} |")
            fig_data[size]["routed"].append(t.median(f"routed N={n}"))
            if sep in t.cpu:
                fig_data[size]["separate"][n] = t.median(sep)
        if 8 in ns:
            r8, half8 = ratio_interval(t.cpu["routed N=8"], t.cpu[first])
            figures[f"routed MOPD step, 8 teachers / {ns[0]}, fixed batch ({size})"] = {
                "goal": f"<= {GOAL_TIME}x", "measured": f"{r8:.3f}x ± {half8:.3f}", "ok": r8 <= GOAL_TIME}
        lines.append("")
    mem = res["memory"]
    sh, sep, co = mem["shared"], mem["separate"], mem.get("compact", {})
    L1 = min(L for _, L in sh)
    ns_mem = sorted(n for n, L in sh if L == L1)
    # per-layer slope of each configuration from its two depths, then every figure at 28 layers
    proj = {}
    for kind, table in (("shared", sh), ("separate", sep), ("compact", co)):
        for n in {n for n, _ in table}:
            Ls = sorted(L for m, L in table if m == n)
            if len(Ls) > 1:
                a, b = line(Ls, [table[(n, L)]["peak_rss"] for L in Ls])
                proj[(kind, n)] = (a, b)
    sep_n = sorted(n for n, L in sep if L == L1)
    a_n, b_n = line(sep_n, [sep[(n, L1)]["peak_rss"] for n in sep_n]) if len(sep_n) > 1 else (None, None)
    with_compact = all((n, L1) in co for n in ns_mem)
    lines += [f"**Peak memory of one step** at the Qwen3-1.7B width and vocabulary (bf16, batch {res['batch']}, "
              f"activation checkpointing on as the qwen3 preset, glibc's mmap threshold fixed as in the peers' "
              f"memory figure), each configuration in a fresh process, measured at {L1} layers"
              + (": the teachers as peft's fp32 adapters on the shared base, the same compacted to the base's bf16 "
                 "(`AdapterBank.compact`, what `MOPDConfig(compact_teachers=True)` does), and N separate models:"
                 if with_compact else ":"), "",
              "| N | shared base (this library) | vs N = 2 |" + (" shared, compact teachers | vs N = 2 |" if with_compact else "")
              + " N separate teacher models | separate / shared |",
              "| --- | --- | --- |" + (" --- | --- |" if with_compact else "") + " --- | --- |"]
    base2 = sh[(ns_mem[0], L1)]["peak_rss"]
    for n in ns_mem:
        s = sh[(n, L1)]["peak_rss"]
        if (n, L1) in sep:
            p, note = sep[(n, L1)]["peak_rss"], ""
        else:
            p, note = a_n + b_n * n, " (projected: a straight line through the measured N)"
        c_cell = (f" {gb(co[(n, L1)]['peak_rss'])} | {co[(n, L1)]['peak_rss'] / co[(ns_mem[0], L1)]['peak_rss']:.3f}x |"
                  if with_compact else "")
        lines.append(f"| {n} | {gb(s)} | {s / base2:.3f}x |{c_cell} {gb(p)}{note} | {p / s:.2f}x |")
    depths = sorted({L for _, L in sh})
    at28, r28 = {}, {}
    for kind in ("shared", "compact"):
        if (kind, ns_mem[0]) in proj and (kind, 8) in proj:
            at28[kind] = {n: proj[(kind, n)][0] + proj[(kind, n)][1] * 28 for n in (ns_mem[0], 8)}
            r28[kind] = at28[kind][8] / at28[kind][ns_mem[0]]
    if "shared" in r28:
        t28 = at28["shared"]
        lines += ["", f"**At 28 layers (projected).** Each configuration's peak was also measured at "
                  f"{depths[-1]} layers and continued to Qwen3-1.7B's 28 by a straight line through its two depths: "
                  f"the shared base with {ns_mem[0]} teachers {gb(t28[ns_mem[0]])}, with 8 teachers {gb(t28[8])}: "
                  f"**{r28['shared']:.3f}x**"
                  + (f"; with the teachers compacted, {gb(at28['compact'][ns_mem[0]])} and {gb(at28['compact'][8])}: "
                     f"**{r28['compact']:.3f}x**." if "compact" in r28 else ".")]
        if ("separate", ns_mem[0]) in proj:
            a, b = proj[("separate", ns_mem[0])]
            per_model = (a + b * 28) - t28[ns_mem[0]]
            lines.append(f"{ns_mem[0]} separate teachers at 28 layers: {gb(a + b * 28)} (projected), i.e. about "
                         f"{gb(per_model / max(ns_mem[0] - 0, 1))} more per teacher model than the shared base; "
                         f"8 separate models would hold about {gb(t28[ns_mem[0]] + per_model * 8 / ns_mem[0])}.")
    labels = {"shared": "", "compact": ", compact teachers (bf16)"}
    r8m = {}
    for kind, table in (("shared", sh), ("compact", co)):
        if kind in r28:
            figures[f"peak memory, 8 teachers / 2, shared base{labels[kind]}, Qwen3-1.7B size (28 layers, projected)"] = {
                "goal": f"<= {GOAL_MEMORY}x", "measured": f"{r28[kind]:.3f}x", "ok": r28[kind] <= GOAL_MEMORY}
        if (8, L1) in table and (ns_mem[0], L1) in table:
            r8m[kind] = table[(8, L1)]["peak_rss"] / table[(ns_mem[0], L1)]["peak_rss"]
            figures[f"peak memory, 8 teachers / 2, shared base{labels[kind]}, Qwen3 width ({L1} layers, measured)"] = {
                "goal": f"<= {GOAL_MEMORY}x", "measured": f"{r8m[kind]:.3f}x", "ok": r8m[kind] <= GOAL_MEMORY}
    adapter = sh[(ns_mem[0], L1)]["adapter_bytes"]
    per28 = adapter / L1 * 28
    lines += ["", f"What grows: one teacher adapter at {L1} layers is {gb(adapter)} (LoRA r = 16 on every linear "
              "layer, the student's size), so each added teacher adds that and nothing else; a separate teacher "
              "adds a whole model (its embedding and LM head alone are 151,936 x 2,048 weights). peft holds the "
              "adapters in fp32 over the bf16 base (which the student's AdamW needs; a frozen teacher does "
              f"not): at 28 layers one is {gb(per28)}, so six more teachers add about {gb(6 * per28)}, which "
              "is what separates 8 teachers from 2 in the projection above (the rest of that step's peak is the "
              "base and the activations of a 16-row batch)."]
    if "compact" in r28 or "compact" in r8m:
        c_bytes = co[(ns_mem[0], L1)]["teacher_bytes"]
        goal = lambda r: "within" if r <= GOAL_MEMORY else "outside"  # noqa: E731
        mb = lambda x: f"{x / 2**20:.1f} MB"  # noqa: E731
        grow = {k: (t[(8, L1)]["peak_rss"] - t[(ns_mem[0], L1)]["peak_rss"]) / (8 - ns_mem[0])
                for k, t in (("shared", sh), ("compact", co)) if (8, L1) in t and (ns_mem[0], L1) in t}
        lines[-1] += (f" Compacted (`AdapterBank.compact`: each frozen teacher's LoRA weights cast once to the "
                      f"base's bf16), a teacher adapter at {L1} layers is {mb(c_bytes)} ({c_bytes / adapter:.2f} of the "
                      f"fp32 one's {mb(adapter)}), about {gb(c_bytes / L1 * 28)} at 28 layers"
                      + (f"; from {ns_mem[0]} to 8 teachers the measured peak grows by {mb(grow['compact'])} a teacher "
                         f"({mb(grow['shared'])} with fp32 adapters)" if len(grow) == 2 else "")
                      + ", and the 8 / 2 ratio reads "
                      + "; ".join(f"{r8m[k]:.3f}x measured at {L1} layers against {r8m['shared']:.3f}x with fp32 adapters"
                                  for k in ("compact",) if k in r8m and "shared" in r8m)
                      + (f"; {r28['compact']:.3f}x projected to 28 layers against {r28['shared']:.3f}x, "
                         f"{goal(r28['compact'])} the goal of <= {GOAL_MEMORY}x" if "compact" in r28 and "shared" in r28 else "")
                      + " (the memory table and the 28-layer projection above). The compacted teachers' scores agree "
                      "with the fp32 adapters' within the bf16 base's own rounding (tests/test_compact.py); it is "
                      "opt-in, `MOPDConfig(compact_teachers=True)`, and every other figure on this page uses fp32 "
                      "adapters.")
    else:
        lines[-1] += (" Compacting the frozen teachers to bf16 (`AdapterBank.compact`, "
                      "`MOPDConfig(compact_teachers=True)`) halves that growth; its rows are measured by "
                      "`python -m bench.scaling --curve teachers --memory-only --memory-kinds compact`.")
    lines += ["",
              "Reading the time rows: at the tiny size more teachers mean more, smaller matmuls per layer (each "
              "teacher's rows through its folded weight), a per-call cost; at the Qwen3 width a 16-row step is "
              "about 27 s of base matmuls, and the teachers' low-rank updates are a small part of it. The Qwen3 "
              "rows have 3 repetitions each, so their intervals are wide: their medians do not grow with N, "
              "and their intervals cannot resolve a change of 0.15."]
    # the figure
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for size, d in fig_data.items():
        axes[0].plot(d["n"], [v / d["routed"][0] for v in d["routed"]], "o-", label=f"routed, {size}")
        if d["separate"]:
            ks = sorted(d["separate"])
            axes[0].plot(ks, [d["separate"][k] / d["routed"][0] for k in ks], "s--", label=f"separate models, {size}")
    axes[0].set(xscale="log", xlabel="teachers N", ylabel=f"step time / routed at N={ns_mem[0]}",
                title="step time, fixed batch")
    log_ticks(axes[0], ns_mem)
    axes[0].legend(fontsize=8)
    xs = ns_mem
    axes[1].plot(xs, [sh[(n, L1)]["peak_rss"] / 2**30 for n in xs], "o-", label="shared base (measured)")
    if with_compact:
        axes[1].plot(xs, [co[(n, L1)]["peak_rss"] / 2**30 for n in xs], "^-", label="shared base, compact teachers (measured)")
    axes[1].plot(xs, [(sep[(n, L1)]["peak_rss"] if (n, L1) in sep else a_n + b_n * n) / 2**30 for n in xs], "s--",
                 label="separate models (measured, then projected)")
    axes[1].set(xscale="log", yscale="log", xlabel="teachers N", ylabel="peak RSS (GB)",
                title=f"memory, Qwen3 width, {L1} layers")
    log_ticks(axes[1], xs, y=True)
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    return "\n".join(lines), figures, {"scale_teachers.png": fig}


# ---------------------------------------------------------------------------------------------
# 2. completion length
# ---------------------------------------------------------------------------------------------


def forced(cfg, C: int):
    cfg.max_new_tokens = cfg.min_new_tokens = C
    return cfg


def length_curve(args) -> dict:
    from mopd_mini.rollout import encode_prompts, sample

    from . import peers

    Cs = (4, 8) if args.quick else LENGTHS
    bank = make_bank("tiny")
    res = {"C": list(Cs), "step": {}, "sampler": {}, "trl": {}}
    with tempfile.TemporaryDirectory(prefix="mopd-scaling-") as tmp:
        for C in Cs:
            cfg = forced(config("tiny", prompts_per_domain=2 if args.quick else 8), C)
            steps = Steps(bank, cfg, step_examples(cfg))
            with bank.use(cfg.student, trainable=True) as model:
                steps.sft_batch = sample(model, bank.tokenizer, steps.examples, max_new_tokens=C, min_new_tokens=C,
                                         generator=torch.Generator().manual_seed(1))   # SFT on C-token targets
                steps.sft_batch.prefill = None
                ids, mask = encode_prompts(model, bank.tokenizer, [e.prompt for e in steps.examples], C)

                @torch.no_grad()
                def generate():
                    model.generate(input_ids=ids, attention_mask=mask, do_sample=True, top_k=0, top_p=1.0,
                                   temperature=1.0, max_new_tokens=C, min_new_tokens=C,
                                   pad_token_id=bank.tokenizer.pad_token_id)

                fns = {"MOPD step": lambda: steps.mopd(model), "SFT step": lambda: steps.sft(model),
                       "sample": lambda: sample(model, bank.tokenizer, steps.examples, max_new_tokens=C, min_new_tokens=C,
                                                generator=torch.Generator().manual_seed(0)),
                       "generate": generate}
                t = side_by_side(fns, reps=2 if args.quick else args.reps, warmup=1, before_each=steps.reset)
            res["step"][C] = {"mopd": t.cpu["MOPD step"], "sft": t.cpu["SFT step"],
                              "shape": list(steps.sft_batch.input_ids.shape)}
            res["sampler"][C] = {"sample": t.cpu["sample"], "generate": t.cpu["generate"], "rows": len(steps.examples)}
            print(f"  C={C}: MOPD {ms(t.median('MOPD step'))}, SFT {ms(t.median('SFT step'))}, sample "
                  f"{ms(t.median('sample'))}, generate {ms(t.median('generate'))}", flush=True)
            if peers.have_trl():
                res["trl"][C] = peers.compare_one_teacher(bank, 2 if args.quick else 8, 3 if args.quick else args.trl_steps,
                                                          1 if args.quick else args.trl_reps, tmp, length=C)
    return res


def report_length(res: dict, args, argv) -> tuple[str, dict, dict]:
    plt = pyplot()

    Cs = res["C"]
    lines = [section_head("How the cost grows with the completion length", "bench.scaling", argv=argv), "",
             "Every completion forced to exactly C tokens (the end of turn suppressed before C: "
             "`sample(min_new_tokens=C)`, and `min_new_tokens` in TRL's generation kwargs), binding prompts, the "
             "tiny model, one torch thread, CPU time. The SFT step trains on C-token targets (completions the "
             "student sampled), so both steps train the same tokens.", "",
             "| C | MOPD step | SFT step | MOPD / SFT | per-rep range | sampler | `generate` | sampler / generate | sampler per token |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    ratios, per_token, trl_r = [], [], []
    for C in Cs:
        s, p = res["step"][C], res["sampler"][C]
        r, _ = ratio_interval(s["mopd"], s["sft"])
        rr = [a / b for a, b in zip(s["mopd"], s["sft"])]
        g, _ = ratio_interval(p["sample"], p["generate"])
        tok = median(p["sample"]) / (C * p["rows"])
        ratios.append(r), per_token.append(tok)
        lines.append(f"| {C} | {ms(median(s['mopd']))} | {ms(median(s['sft']))} | **{r:.2f}x** | {min_max(rr)} | "
                     f"{ms(median(p['sample']))} | {ms(median(p['generate']))} | {g:.2f}x | {ms(tok)} |")
    if res["trl"]:
        lines += ["", "**Against TRL's DistillationTrainer** (one teacher, batch 8; each side's `train` step timed "
                  "between logged steps, runs alternated; `bench.peers.compare_one_teacher` at each C):", "",
                  "| C | this library's step | TRL's step | TRL / this library (wall) | (CPU) | per-rep range (wall) |",
                  "| --- | --- | --- | --- | --- | --- |"]
        for C in Cs:
            t = res["trl"].get(C)
            if not t:
                continue
            r_w = median(t["ratio"]["wall"])
            trl_r.append(r_w)
            lines.append(f"| {C} | {ms(median(t['lib']['wall']))} | {ms(median(t['trl']['wall']))} | **{r_w:.2f}x** | "
                         f"{median(t['ratio']['cpu']):.2f}x | {min_max(t['ratio']['wall'])} |")
    share = [median(res["sampler"][C]["sample"]) / median(res["step"][C]["mopd"]) for C in Cs]
    lines += ["", "Reading it: prefill-once saves one prompt pass a step, which matters less as C grows, while the "
              "student's decoding (one forward per token, no grad) and the training pass over C tokens grow with C. "
              "Decoding is the part SFT does not pay at all: the sampler alone is "
              + ", ".join(f"{x:.0%} of the MOPD step at C = {C}" for x, C in zip(share, Cs))
              + f". MOPD / SFT goes from {ratios[0]:.2f}x to {ratios[-1]:.2f}x. This library's sampler costs what "
              "`generate` does per token (the sampler / generate column), so the growth is decoding itself, not "
              "the sampler's code."]
    if trl_r:
        lines[-1] += (f" Against TRL, whose step decodes too, TRL / this library reads {', '.join(f'{r:.2f}x' for r in trl_r)} "
                      f"at C = {', '.join(map(str, Cs[:len(trl_r)]))}: decoding, which both pay alike, takes more of both "
                      "steps as C grows, so the share prefill-once and the routed teacher save gets smaller.")
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    ax.plot(Cs, ratios, "o-", label="MOPD step / SFT step")
    if trl_r:
        ax.plot(Cs[:len(trl_r)], trl_r, "s-", label="TRL step / this library's")
    ax.set(xscale="log", xlabel="completion tokens C", ylabel="ratio", title="cost against completion length")
    log_ticks(ax, Cs)
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return "\n".join(lines), {}, {"scale_length.png": fig}


# ---------------------------------------------------------------------------------------------
# 3. batch
# ---------------------------------------------------------------------------------------------


def batch_curve(args) -> dict:
    from mopd_mini import GRPOConfig, MOPDConfig, train_grpo, train_student
    from mopd_mini.config import OfflineConfig
    from mopd_mini.offline import Collected, train_offline

    from .trainer_step import per_step

    Bs = (4, 8) if args.quick else BATCHES
    steps = 3 if args.quick else args.batch_steps
    bank = make_bank("tiny")
    tok = bank.tokenizer
    common = dict(steps=steps, eval_every=0, experiment=None, progress=False)
    res = {"B": list(Bs), "MOPD": {}, "GRPO": {}, "SFT": {}}
    for B in Bs:
        mopd = MOPDConfig.for_model("tiny", track_steps=(), prompts_per_domain=B // 2, **common)
        grpo = GRPOConfig.for_model("tiny", domain="binding", name="bench_grpo", prompts_per_step=max(1, B // 8),
                                    group_size=min(8, B), **common)
        sft = OfflineConfig.for_model("tiny", name="bench_sft", batch_size=B, **common)
        examples = step_examples(mopd, 1) * 4
        gold = Collected(examples, [tok(e.answer, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
                                    for e in examples], [1.0] * len(examples))
        runs = {"MOPD": lambda: train_student(bank, mopd), "GRPO": lambda: train_grpo(bank, grpo),
                "SFT": lambda: train_offline(bank, sft, gold)}
        for k in runs:
            res[k][B] = []
        for rep in range(1 if args.quick else args.batch_reps):
            for k in (list(runs) if rep % 2 == 0 else list(runs)[::-1]):
                res[k][B] += per_step(runs[k])[1:]        # the first logged interval holds set-up
        print(f"  B={B}: " + ", ".join(f"{k} {ms(median(res[k][B]))}" for k in runs), flush=True)
    return res


def report_batch(res: dict, args, argv) -> tuple[str, dict, dict]:
    plt = pyplot()

    Bs = res["B"]
    lines = [section_head("How the cost grows with the batch", "bench.scaling", argv=argv), "",
             "Each trainer's own step on the tiny model (train_student: MOPD over both domains, B / 2 prompts "
             "each; train_grpo: GRPO on binding, B / 8 prompts x 8 samples; train_offline: SFT on gold "
             "answers, batch B), timed between logged steps (evaluation off, runs in memory, one torch thread, CPU "
             "time), per sample of the batch. Medians over the steps of alternated runs.", "",
             "| B | MOPD per sample | GRPO per sample | SFT per sample | MOPD / SFT | GRPO / SFT |",
             "| --- | --- | --- | --- | --- | --- |"]
    per = {k: [median(res[k][B]) / B for B in Bs] for k in ("MOPD", "GRPO", "SFT")}
    for i, B in enumerate(Bs):
        lines.append(f"| {B} | {ms(per['MOPD'][i])} | {ms(per['GRPO'][i])} | {ms(per['SFT'][i])} | "
                     f"{per['MOPD'][i] / per['SFT'][i]:.2f}x | {per['GRPO'][i] / per['SFT'][i]:.2f}x |")
    best = {k: Bs[min(range(len(Bs)), key=lambda i: v[i])] for k, v in per.items()}
    lines += ["", f"Per sample, B = {Bs[-1]} against B = {Bs[0]}: "
              + ", ".join(f"{k} {per[k][-1] / per[k][0]:.2f}x" for k in per)
              + "; the cheapest batch per sample: " + ", ".join(f"{k} at B = {b}" for k, b in best.items())
              + ". A bigger batch spreads each step's fixed per-call cost (the modules and kernels every layer "
              "launches, whatever the rows) until the arithmetic that grows with the rows takes over; where the "
              "cheapest batch is below the largest, that point has been passed. GRPO's samples are cheaper than "
              "either because its B samples are B / 8 prompts drawn 8 times: the sampler prefills each distinct "
              "prompt once and copies its cache to the group's rows, and no teacher runs. MOPD's B samples are B "
              "distinct prompts, each prefilled, decoded and scored by its teacher."]
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for k, v in per.items():
        ax.plot(Bs, [x * 1000 for x in v], "o-", label=k)
    ax.set(xscale="log", yscale="log", xlabel="batch B (samples)", ylabel="ms per sample (CPU)",
           title="step time per sample, tiny")
    log_ticks(ax, Bs, y=True)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return "\n".join(lines), {}, {"scale_batch.png": fig}


# ---------------------------------------------------------------------------------------------


JSON = ROOT / "docs" / "scaling.json"


def encode(x):
    """A curve's results as JSON: Timings as their two clocks, tuple keys as "a,b", int keys as strings."""
    from .common import Timings

    if isinstance(x, Timings):
        return {"__timings__": True, "wall": x.wall, "cpu": x.cpu}
    if isinstance(x, dict):
        return {(",".join(map(str, k)) if isinstance(k, tuple) else str(k)): encode(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [encode(v) for v in x]
    return x


def decode(x, key: str = ""):
    """The inverse of `encode` (numeric keys back to ints and int tuples)."""
    from .common import Timings

    if isinstance(x, dict):
        if x.get("__timings__"):
            t = Timings(list(x["cpu"]))
            t.wall, t.cpu = x["wall"], x["cpu"]
            return t
        def k_of(k):
            if all(part.lstrip("-").isdigit() for part in k.split(",")):
                parts = tuple(int(p) for p in k.split(","))
                return parts if len(parts) > 1 else parts[0]
            return k
        return {k_of(k): decode(v, k) for k, v in x.items()}
    if isinstance(x, list):
        return [decode(v) for v in x]
    return x


CURVES = {"teachers": (teachers_curve, report_teachers, "scale_teachers"),
          "length": (length_curve, report_length, "scale_length"),
          "batch": (batch_curve, report_batch, "scale_batch")}


def main(argv=None, write: bool = True):
    p = argparse.ArgumentParser(description="how the cost grows: N teachers, completion length, batch")
    p.add_argument("--curve", nargs="+", choices=list(CURVES), default=list(CURVES))
    p.add_argument("--reps", type=int, default=10, help="interleaved repetitions at the tiny size")
    p.add_argument("--qwen3-reps", type=int, default=3, help="repetitions at the Qwen3 width")
    p.add_argument("--layers", type=int, default=2, help="Qwen3-1.7B layers at its width (memory also at twice this)")
    p.add_argument("--trl-steps", type=int, default=6, help="steps per TRL / library run (the first is not timed)")
    p.add_argument("--trl-reps", type=int, default=3)
    p.add_argument("--batch-steps", type=int, default=8)
    p.add_argument("--batch-reps", type=int, default=2)
    p.add_argument("--memory-only", action="store_true", help="teachers curve: measure the memory again and keep "
                   f"the step times saved in {JSON.name}")
    p.add_argument("--memory-kinds", nargs="+", choices=MEMORY_KINDS, default=list(MEMORY_KINDS),
                   help="teachers curve: which memory rows to measure (shared: fp32 teacher adapters; compact: "
                   "compacted to bf16; separate: folded models); with --memory-only the others stay as saved")
    p.add_argument("--quick", action="store_true", help="toy sizes, one repetition, nothing written (smoke test)")
    p.add_argument("--no-write", action="store_true", help="print only; leave docs/ alone")
    p.add_argument("--render", action="store_true", help=f"the sections and figures again from {JSON.name} "
                   "(no measurement; the command shown stays that of the measuring run)")
    p.add_argument("--memory-child", choices=MEMORY_KINDS, help=argparse.SUPPRESS)
    p.add_argument("--n", type=int, default=2, help=argparse.SUPPRESS)
    p.add_argument("--batch", type=int, default=16, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    set_threads(1)
    if args.memory_child:
        print(json.dumps(memory_child(args.memory_child, args.n, args.batch, args.layers, args.quick)))
        return None
    out = {}
    saved = json.loads(JSON.read_text()) if JSON.exists() else {}
    for name in args.curve:
        measure, report, key = CURVES[name]
        if args.render:
            if name not in saved:
                raise SystemExit(f"{JSON} has no {name!r} curve: measure it first (python -m bench.scaling --curve {name})")
            res, run_argv = decode(saved[name]["res"]), saved[name]["argv"]
            for k, v in saved[name]["args"].items():
                if k != "no_write":          # --render --no-write prints only, whatever the measuring run had
                    setattr(args, k, v)
        else:
            res, run_argv = measure(args), (argv if argv is not None else sys.argv[1:])
            if name == "teachers" and args.memory_only:
                if name not in saved:
                    raise SystemExit("--memory-only keeps the saved step times: run the whole teachers curve first")
                old = decode(saved[name]["res"])
                if res["batch"] != old["batch"]:
                    raise SystemExit(f"--memory-only measured batch {res['batch']}, the saved rows batch {old['batch']}")
                res = {**old, "memory": {**old["memory"], **res["memory"]}}   # the kinds not measured stay
                run_argv = saved[name]["argv"] + ["(memory: " + " ".join(argv if argv is not None else sys.argv[1:]) + ")"]
            if write and not args.no_write and not args.quick:  # the raw figures first: a failing report loses nothing
                entry = {"res": encode(res), "argv": run_argv, "args": {k: v for k, v in vars(args).items()
                                                                         if k not in ("render", "curve")}}
                saved = json.loads(JSON.read_text()) if JSON.exists() else {}   # again: another curve may have written
                saved[name] = entry
                atomic_write(JSON, json.dumps(saved, indent=1).encode())
        out[name] = res
        body, figures, plots = report(res, args, run_argv)
        do_write = write and not args.no_write and not args.quick
        if do_write:
            FIGURES.mkdir(parents=True, exist_ok=True)
            for fname, fig in plots.items():
                fig.savefig(FIGURES / fname, dpi=110)
            body += "\n\n" + "\n".join(f"![{key}](figures/{f})" for f in plots)
        print_and_write(key, body, figures or None, do_write)
    return out


if __name__ == "__main__":
    main()
