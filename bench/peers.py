"""This library against its peer: the same on-policy distillation work through `train_student` and
through Hugging Face TRL's `DistillationTrainer` (trl 1.16.0), interleaved in one process; and the
memory of several teachers held as LoRA adapters on one base against teachers held as separate models.

    pip install -e '.[bench]'                   # trl==1.16.0 beside this project's torch/transformers/peft
    python -m bench.peers                       # about 10 minutes on 2 cores, ~11 GB of RAM at peak
    python -m bench.peers --quick               # tiny settings, no Qwen3 memory figure (smoke test)
    python -m bench.peers --no-memory           # the tiny step comparison only

What is compared (tiny default, fp32, 2 torch threads, 4 new tokens, temperature 1, no truncation):
  * one teacher (binding), batch 8 and 16: `train_student` with loss "kl" (the exact full-vocabulary
    reverse KL, which is what TRL minimises at beta = 1) against `DistillationTrainer` with the
    teacher as a separate model (a folded copy of base + teacher LoRA: how TRL holds a teacher), the
    same student LoRA (r 16, alpha 32, all linear layers, the same initial A), the same prompts
    in the same order, lr 1e-3 constant, grad clip 1, no activation checkpointing, no evaluation,
    metrics logged every step on both sides. A step's time is the time between consecutive logged
    steps (after the first), on two clocks (wall time, the goal's, and the process's CPU time),
    measured in each trainer's own loop: `Run.log` on this side, a `TrainerCallback.on_step_end` on
    TRL's. Each repetition runs both (the order alternates); the figure is the median over
    repetitions of TRL's median step / this library's median step, per clock.
  * the per-token check: on one rollout, TRL's own divergence kernel (ChunkedDivergenceFunction,
    beta = 1) against `losses.reverse_kl`, on the same student and teacher logits.
  * two teachers (binding and recall, 8 prompts each): this library's routed step (one forward for
    both teachers, 16 rows, one update) against the closest TRL set-up without writing routing code:
    two DistillationTrainers sharing one student model, one per domain with its own teacher model,
    stepped alternately (two generations and two updates of 8 rows). Not the same optimisation (two
    smaller updates instead of one), so the ratio is of cost per 16 routed rows, not of learning.
  * memory (Qwen3-1.7B architecture, random weights, CPU, bf16): two teachers + student as this
    library holds them (one base, three LoRA adapters) against the same MOPD step with each teacher
    a separate model (a folded copy of the base, as TRL and verl hold teachers), each configuration
    in a fresh subprocess, peak resident memory of the whole process (getrusage ru_maxrss).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch

from mopd_mini import stats
from mopd_mini.adapters import atomic_write

from .common import (Steps, gb, make_bank, median, ms, peak_rss_bytes, print_and_write, section_head, set_threads,
                     side_by_side, step_examples)
from .trainer_step import step_clock

GOAL_OF_CEILING = 0.95  # TRL's step / this library's, one teacher: >= 0.95 x the structure's ceiling
GOAL_TWO = 1.4          # two TRL trainers / this library's routed step, two teachers
GOAL_MEMORY = 0.45  # this library's peak / separate teachers' peak
DEVICE = "cpu"      # --device: "cuda" on a GPU (bench.gpu_h200 --peers runs it so)


def have_trl() -> bool:
    return importlib.util.find_spec("trl") is not None


def load_avg() -> str:
    return "{:.1f} / {:.1f} / {:.1f}".format(*os.getloadavg())


# ---------------------------------------------------------------------------------------------
# a teacher as a separate model: the base with the teacher's LoRA folded in (TRL's, verl's way)
# ---------------------------------------------------------------------------------------------


def separate_teacher(bank, name: str, model: str = "tiny", **load_kwargs):
    """A full model of its own: a fresh copy of the base with W += s B A of adapter `name`."""
    from peft.tuners.lora import LoraLayer

    from mopd_mini import load_base

    load_kwargs.setdefault("dtype", next(bank.base.parameters()).dtype)  # the student's base's dtype (bf16 at Qwen3 size)
    teacher, _ = load_base(model, device=DEVICE, **load_kwargs)
    modules = dict(teacher.named_modules())
    with torch.no_grad():
        for path, layer in bank.model.named_modules():
            if isinstance(layer, LoraLayer) and name in layer.lora_A:
                target = modules[path.removeprefix("base_model.model.")]
                A, B = layer.lora_A[name].weight.float(), layer.lora_B[name].weight.float()
                target.weight += (B @ A * layer.scaling[name]).to(target.weight.dtype)
    return teacher.eval().requires_grad_(False)


def separate_scorer(models: dict):
    """A `routing.teacher_outputs` stand-in for teachers held as separate models ({domain: model}): each model
    runs over its own domain's rows (no grad), the logits are gathered into one (B, C, V) block and
    summarised as the routed scores are."""
    from mopd_mini.rollout import completion_logits
    from mopd_mini.routing import summarise

    @torch.no_grad()
    def teacher_outputs(bank, rollout, route, mode=None, k: int = 64):
        logits = None
        for d, teacher in models.items():
            rows = [i for i, x in enumerate(rollout.domains) if x == d]
            if not rows:
                continue
            part = completion_logits(teacher, rollout.rows(rows))
            logits = part.new_empty((len(rollout.domains),) + part.shape[1:]) if logits is None else logits
            logits[rows] = part
        return summarise(logits, rollout.completion_ids, k, True)
    return teacher_outputs


# ---------------------------------------------------------------------------------------------
# this library: train_student, timed between logged steps
# ---------------------------------------------------------------------------------------------


def lib_config(domains: tuple, prompts: int, steps: int, length: int | None = None):
    """`length`: every completion exactly that many tokens (bench.scaling's length curve)."""
    from mopd_mini import MOPDConfig

    forced = {"max_new_tokens": length, "min_new_tokens": length} if length else {}
    return MOPDConfig.for_model("tiny", loss="kl", domains=domains, prompts_per_domain=prompts, steps=steps,
                                eval_every=0, track_steps=(), experiment=None, progress=False, **forced)


CLOCKS = ("wall", "cpu")


def now() -> dict:
    """Both clocks at once: wall time (perf_counter) and this process's CPU time (process_time)."""
    return {"wall": time.perf_counter(), "cpu": time.process_time()}


def per_step(stamps: list[dict]) -> dict:
    """{clock: [seconds between consecutive stamps]} for both clocks."""
    return {c: [b[c] - a[c] for a, b in zip(stamps, stamps[1:])] for c in CLOCKS}


def run_library(bank, cfg) -> dict:
    """`steps` steps of train_student from a fresh student; per-step times (both clocks) and the logged KL."""
    from mopd_mini import train_student

    stamps = []
    with step_clock(stamps, now):
        run = train_student(bank, cfg)
    return {"step": per_step(stamps), "kl": [r["kl"] for r in run.metrics]}


# ---------------------------------------------------------------------------------------------
# TRL: DistillationTrainer on the same prompts, the same student init, a separate teacher
# ---------------------------------------------------------------------------------------------


def trl_trainer(bank, cfg, teacher_model, student_model, examples: list, student_init: dict, out_dir: str,
                peft: bool = True):
    """A DistillationTrainer set up to do what `train_student(cfg)` does (see the module docstring).
    `student_model`: a plain base (peft wraps it) or, with peft=False, a PeftModel to share."""
    from datasets import Dataset
    from peft import set_peft_model_state_dict
    from trl import DistillationConfig, DistillationTrainer

    from mopd_mini.rollout import chat_prompt

    tok = bank.tokenizer
    data = Dataset.from_dict({"prompt": [chat_prompt(tok, ex.prompt) for ex in examples]})
    args = DistillationConfig(
        output_dir=out_dir, per_device_train_batch_size=len(examples) // cfg.steps, gradient_accumulation_steps=1,
        max_steps=cfg.steps, learning_rate=cfg.lr, lr_scheduler_type="constant", warmup_steps=0, weight_decay=0.0,
        max_grad_norm=cfg.grad_clip, bf16=False, fp16=False, gradient_checkpointing=False, use_cpu=DEVICE == "cpu",
        report_to="none", save_strategy="no", logging_steps=1, disable_tqdm=True, max_completion_length=cfg.max_new_tokens,
        temperature=cfg.temperature, top_k=0, top_p=1.0, beta=1.0, shuffle_dataset=False, seed=cfg.seed,
        dataloader_num_workers=0,
        generation_kwargs={"min_new_tokens": cfg.min_new_tokens} if cfg.min_new_tokens else None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer = DistillationTrainer(model=student_model, teacher_model=teacher_model, args=args, train_dataset=data,
                                      processing_class=tok, peft_config=bank.lora.peft_config() if peft else None)
    if student_init is not None:  # the same initial adapter as this library's student
        state = {k.replace(f".{cfg.student}.", "."): v for k, v in student_init.items()}
        set_peft_model_state_dict(trainer.model, state)
    return trainer


def trl_callback(stamps: list, losses: list):
    from transformers import TrainerCallback

    class Clock(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            stamps.append(now())

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "loss" in logs:
                losses.append(logs["loss"])
    return Clock()


def run_trl(trainer) -> dict:
    stamps, losses = [], []
    trainer.add_callback(trl_callback(stamps, losses))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.train()
    return {"step": per_step(stamps), "kl": losses}


def all_examples(cfg) -> list:
    """Every step's prompts, in train_student's order (step 1's, then step 2's, ...)."""
    return [ex for step in range(1, cfg.steps + 1) for ex in step_examples(cfg, step)]


def student_init(bank, cfg) -> dict:
    bank.start(cfg.student, seed=cfg.seed)          # what train_student starts from
    return bank.state(cfg.student)


def compare_one_teacher(bank, batch: int, steps: int, reps: int, tmp: str, length: int | None = None) -> dict:
    from mopd_mini import load_base

    cfg = lib_config(("binding",), batch, steps, length)
    teacher = separate_teacher(bank, "teacher_binding")
    init = student_init(bank, cfg)
    examples = all_examples(cfg)
    res = {**new_result(), "lib_kl": None, "trl_kl": None}
    for rep in range(reps):
        order = ("lib", "trl") if rep % 2 == 0 else ("trl", "lib")
        out = {}
        for side in order:
            if side == "lib":
                out["lib"] = run_library(bank, cfg)
            else:
                student, _ = load_base("tiny", device=DEVICE)
                out["trl"] = run_trl(trl_trainer(bank, cfg, teacher, student, examples, init, tmp))
        add_repetition(res, {c: median(out["lib"]["step"][c]) for c in CLOCKS},
                       {c: median(out["trl"]["step"][c]) for c in CLOCKS}, f"batch {batch}, repetition {rep + 1}")
        res["lib_kl"], res["trl_kl"] = out["lib"]["kl"], out["trl"]["kl"]
    return res


def new_result() -> dict:
    return {**{k: {c: [] for c in CLOCKS} for k in ("lib", "trl", "ratio")}, "load": [load_avg()]}


def add_repetition(res: dict, lib: dict, trl: dict, what: str) -> None:
    """One repetition's median step of each side, on both clocks, and TRL / this library."""
    for c in CLOCKS:
        res["lib"][c].append(lib[c]), res["trl"][c].append(trl[c]), res["ratio"][c].append(trl[c] / lib[c])
    res["load"].append(load_avg())
    print(f"  {what}: this library {ms(lib['wall'])} wall / {ms(lib['cpu'])} CPU, TRL {ms(trl['wall'])} wall / "
          f"{ms(trl['cpu'])} CPU per step ({trl['wall'] / lib['wall']:.2f}x wall, {trl['cpu'] / lib['cpu']:.2f}x "
          f"CPU); load {res['load'][-1]}", flush=True)


PASSES = {"prefill": "the student's prompt prefill, no grad (TRL's generation)",
          "train": "the student's forward + backward + AdamW over prompt + completion (both)",
          "routed": "the teacher as a routed LoRA pass (this library)",
          "merged": "the teacher as a folded model (TRL)"}


def ceiling(bank, batch: int, reps: int) -> dict:
    """Each pass of the two one-teacher steps timed alone on one batch (interleaved, medians, both
    clocks), and what TRL's step / this library's would be if decoding and every per-call cost were
    free on both sides: TRL runs the student's prefill to sample, the folded teacher, and the
    training pass; this library runs the training pass (whose prompt prefill is the sampler's) and
    the routed teacher. Both teachers score the completion positions only."""
    from mopd_mini import routing
    from mopd_mini.rollout import completion_logits

    cfg = lib_config(("binding",), batch, 1)
    steps = Steps(bank, cfg, step_examples(cfg))
    teacher = separate_teacher(bank, "teacher_binding")
    block = steps.sft_batch                      # the prompts and C completion columns
    with bank.use(cfg.student, trainable=True) as model:
        @torch.no_grad()
        def merged():
            completion_logits(teacher, block)

        fns = {"prefill": lambda: steps.prefill(model), "train": lambda: steps.sft(model), "merged": merged,
               "routed": lambda: routing.teacher_outputs(bank, block, cfg.route, k=cfg.topk)}
        t = side_by_side(fns, reps=reps, warmup=2, before_each=steps.reset)
    out = {c: {k: t.median(k, c) for k in fns} for c in CLOCKS}
    for c, p in out.items():
        p["ratio"] = (p["prefill"] + p["merged"] + p["train"]) / (p["train"] + p["routed"])
    return {**out, "reps": reps}


def compare_two_teachers(bank, prompts: int, steps: int, reps: int, tmp: str) -> dict:
    """Routed (one trainer, both domains) vs two TRL trainers on one shared student, stepped alternately."""
    from peft import get_peft_model, set_peft_model_state_dict

    from mopd_mini import load_base

    cfg = lib_config(("binding", "recall"), prompts, steps)
    teachers = {d: separate_teacher(bank, f"teacher_{d}") for d in cfg.domains}
    init = student_init(bank, cfg)
    res = new_result()
    for rep in range(reps):
        order = ("lib", "trl") if rep % 2 == 0 else ("trl", "lib")
        for side in order:
            if side == "lib":
                lib = {c: median(v) for c, v in run_library(bank, cfg)["step"].items()}
                continue
            base, _ = load_base("tiny", device=DEVICE)
            shared = get_peft_model(base, bank.lora.peft_config())
            set_peft_model_state_dict(shared, {k.replace(f".{cfg.student}.", "."): v for k, v in init.items()})
            per_domain = {}
            for d in cfg.domains:
                one = lib_config((d,), prompts, steps)
                per_domain[d] = trl_trainer(bank, one, teachers[d], shared, all_examples(one), None,
                                            os.path.join(tmp, d), peft=False)
            # alternate: one step of each trainer per routed step (each trainer.train() does `steps`)
            stamps = {d: [] for d in cfg.domains}
            for d, trainer in per_domain.items():
                trainer.add_callback(trl_callback(stamps[d], []))
            for d, trainer in per_domain.items():   # trainers run their steps back to back; per-step times add
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    trainer.train()
            trl = {c: sum(median(per_step(s)[c]) for s in stamps.values()) for c in CLOCKS}
        add_repetition(res, lib, trl, f"two teachers (TRL: two trainers), repetition {rep + 1}")
    return res


def kl_agreement(bank) -> dict:
    """TRL's divergence kernel at beta = 1 vs losses.reverse_kl, per token, on one rollout's logits.
    The kernel takes hidden states and an LM head: feeding the logits themselves through an identity
    head gives it exactly the logits that reverse_kl sees."""
    from trl.kernels.chunked_divergence import ChunkedDivergenceFunction

    from mopd_mini import routing
    from mopd_mini.losses import reverse_kl
    from mopd_mini.rollout import completion_logits, sample

    cfg = lib_config(("binding", "recall"), 8, 1)
    examples = step_examples(cfg)
    with bank.use("teacher_binding") as model:     # a student that is not the teacher: a real KL
        rollout = sample(model, bank.tokenizer, examples, max_new_tokens=cfg.max_new_tokens,
                         generator=torch.Generator().manual_seed(0))
    with bank.use("teacher_recall") as model, torch.no_grad():
        student = completion_logits(model, rollout)
    teacher = routing.teacher_outputs(bank, rollout, cfg.route, k=cfg.topk).logits
    mask = rollout.completion_mask
    _, info = reverse_kl(student, teacher, mask)
    V = student.shape[-1]
    eye = torch.eye(V)
    div, _ = ChunkedDivergenceFunction.apply(student.reshape(-1, V), eye, None, teacher.reshape(-1, V), eye, None,
                                             1.0, 1.0, 1.0, None, 1.0, None)
    trl = div.view(mask.shape) * mask
    ours = info["kl"] * mask
    return {"tokens": int(mask.sum()), "max_abs_diff": (trl - ours).abs().max().item(),
            "mean_kl": (ours.sum() / mask.sum()).item()}


# ---------------------------------------------------------------------------------------------
# memory at the Qwen3 size, each configuration in its own process
# ---------------------------------------------------------------------------------------------


def memory_child(kind: str, prompts: int, shrink: dict | None, checkpointing: bool = True) -> dict:
    """One MOPD step of a student distilled from two teachers, with the teachers `kind`:
    "shared" (LoRA adapters on the student's base: this library) or "separate" (full models).
    `checkpointing`: activation checkpointing of the student's training forward (the qwen3
    preset's default: on), the same on both sides."""
    from mopd_mini import MOPDConfig

    model_name = "qwen3-1.7b-random"
    bank = make_bank(model_name, device=DEVICE, shrink=shrink)
    cfg = MOPDConfig.for_model("qwen3", experiment=None, progress=False, prompts_per_domain=prompts,
                               gradient_checkpointing=checkpointing)
    steps = Steps(bank, cfg, step_examples(cfg))
    out = {"kind": kind, "params_base": sum(p.numel() for n, p in bank.base.named_parameters() if "lora_" not in n)}
    outputs = None
    if kind == "separate":
        outputs = separate_scorer({d: separate_teacher(bank, f"teacher_{d}", model_name, shrink=shrink) for d in cfg.domains})
        for d in cfg.domains:
            bank._drop(f"teacher_{d}")              # the teachers live in their own models only
    with bank.use(cfg.student, trainable=True) as model:
        out["step"] = steps.mopd(model, teacher_outputs=outputs)
    out["peak_rss"] = peak_rss_bytes()   # VmHWM: this process's own peak (ru_maxrss carries the parent's across exec)
    if DEVICE != "cpu":  # on a GPU the figure is the CUDA allocator's peak (weights, activations, caches)
        out["peak_rss"] = torch.cuda.max_memory_allocated()
    return out


MEMORY_JSON = Path(__file__).resolve().parents[1] / "docs" / "peers_memory.json"
STEPS_JSON = MEMORY_JSON.with_name("peers_steps.json")   # the step comparison's figures (--render-steps)
MALLOC_FIXED = {"MALLOC_MMAP_THRESHOLD_": "131072"}
"""glibc's malloc, with its mmap threshold fixed at its initial 128 KiB. By default glibc raises
the threshold (up to 32 MiB) each time a large block is freed, after which activation-sized
tensors come from the heap, and a freed heap block is kept by the process: the peak RSS then
counts memory the step no longer uses (measured: 7.1 GB against 4.5 GB for the same shared step
at Qwen3-1.7B size). Fixed, every tensor over 128 KiB is its own mapping, returned on free, so the
peak is what the step needs at once, the figure a GPU's allocator would see. Both sides run with
the same allocator; `--memory-malloc default` measures glibc's default behaviour."""


def memory(prompts: int, quick: bool, layers: int | None = None, checkpointing: bool = True,
           threads: int = 2, malloc: str = "fixed") -> dict:
    """Peak memory of both configurations, each in a fresh process; `layers`: that many of Qwen3-1.7B's
    28 layers (its width and vocabulary unchanged), for a machine without room for three full models."""
    res = {"load": [load_avg()], "layers": layers, "checkpointing": checkpointing, "malloc": malloc}
    env = {k: v for k, v in os.environ.items() if k not in MALLOC_FIXED} | (MALLOC_FIXED if malloc == "fixed" else {})
    for kind in ("shared", "separate"):
        cmd = [sys.executable, "-m", "bench.peers", "--memory-child", kind, "--prompts", str(prompts),
               "--device", DEVICE, "--threads", str(threads), "--memory-checkpointing", "on" if checkpointing else "off"]
        cmd += ["--quick"] if quick else []
        cmd += ["--memory-layers", str(layers)] if layers else []
        start = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=os.path.dirname(os.path.dirname(__file__)),
                              env=env)
        if done.returncode != 0:
            raise RuntimeError(f"the {kind} memory run failed:\n{done.stderr[-3000:]}")
        res[kind] = json.loads(done.stdout.strip().splitlines()[-1])
        res[kind]["wall"] = time.perf_counter() - start
        res["load"].append(load_avg())
        print(f"  memory, teachers {kind}: peak RSS {gb(res[kind]['peak_rss'])}; load {res['load'][-1]}", flush=True)
    res["ratio"] = res["shared"]["peak_rss"] / res["separate"]["peak_rss"]
    return res


def project(depths: dict, layers: int) -> dict:
    """Each configuration's peak as a + b x layers through the measured depths (least squares), at `layers`."""
    out = {"load": [], "projected_from": sorted(depths)}
    for kind in ("shared", "separate"):
        xs = sorted(depths)
        ys = [depths[L][kind]["peak_rss"] for L in xs]
        mx, my = statistics.mean(xs), statistics.mean(ys)
        b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
        out[kind] = {"peak_rss": my + b * (layers - mx), "per_layer": b, "wall": sum(depths[L][kind]["wall"] for L in xs)}
    for L in sorted(depths):
        out["load"] += depths[L]["load"]
    out["ratio"] = out["shared"]["peak_rss"] / out["separate"]["peak_rss"]
    return out


# ---------------------------------------------------------------------------------------------
# the report
# ---------------------------------------------------------------------------------------------


def versions() -> str:
    import accelerate
    import peft
    import transformers
    import trl

    return (f"trl {trl.__version__}, transformers {transformers.__version__}, peft {peft.__version__}, "
            f"accelerate {accelerate.__version__}, torch {torch.__version__}")


def report(res: dict, args, argv) -> tuple[str, dict]:
    where = "" if DEVICE == "cpu" else f" (on {torch.cuda.get_device_name(0)})"
    lines = [section_head("Against the peer: TRL's DistillationTrainer, and teachers as separate models" + where,
                          "bench.peers", argv=argv), "",
             f"*Versions:* {versions()}  \n*Load average (1 / 5 / 15 min) at the start:* {res['load_start']}.", "",
             f"Tiny default, fp32, {args.threads} torch threads, {args.steps} steps per run (the first step of each "
             f"run is not timed), {args.reps} repetition{'s' if args.reps != 1 else ''}; see `bench/peers.py` for what each side runs.", "",
             "**Two clocks**, both read at every step in each trainer's own loop: wall time (`perf_counter`), how "
             "long a user waits for a step, and the process's CPU time (`process_time`), which other jobs on a "
             "shared machine do not inflate. With more than one torch thread they can part: CPU time adds up every "
             "thread, a worker's spin-waits between parallel regions included, so two trainers that use their "
             "threads differently could rank differently on the two clocks; the line under the table says how many "
             "cores each side kept busy. The goal is read on wall time, which needs an idle machine: the load "
             "average is recorded through every comparison.", "",
             "| set-up | this library, per step: wall (CPU) | TRL, per step: wall (CPU) | TRL / this library, wall | "
             "goal | TRL / this library, CPU time | load during |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    figures = {}

    def goal_of(batch) -> float | None:
        """The one-teacher goal at `batch`: GOAL_OF_CEILING x the ceiling measured in this run."""
        c = (res.get("ceiling") or {}).get(batch)
        return GOAL_OF_CEILING * c["wall"]["ratio"] if c else None

    def goal_text(goal: float, batch=None) -> str:
        return f">= {GOAL_OF_CEILING:g} x ceiling = {goal:.2f}x" if batch is not None else f">= {goal:g}x"

    def row(name: str, r: dict, goal: float | None, batch=None, trl_note: str = "") -> tuple[float, float]:
        wall, cpu = median(r["ratio"]["wall"]), median(r["ratio"]["cpu"])
        reps = {c: ", ".join(f"{x:.2f}" for x in r["ratio"][c]) for c in CLOCKS}
        verdict = (f"{goal_text(goal, batch)}: {'met' if wall >= goal else '**missed**'}" if goal else "(reported)")
        lines.append(f"| {name} | {ms(median(r['lib']['wall']))} ({ms(median(r['lib']['cpu']))}) | "
                     f"{ms(median(r['trl']['wall']))} ({ms(median(r['trl']['cpu']))}){trl_note} | **{wall:.2f}x** "
                     f"(repetitions: {reps['wall']}) | {verdict} | {cpu:.2f}x (repetitions: {reps['cpu']}) | "
                     f"{' -> '.join(r['load'][::max(1, len(r['load']) - 1)])} |")
        return wall, cpu

    for batch, r in res["one"].items():
        goal = goal_of(batch)
        wall, cpu = row(f"one teacher (binding), batch {batch}", r, goal, batch)
        figures[f"TRL step / this library's, one teacher, batch {batch}"] = {
            "goal": goal_text(goal, batch) if goal else "(no ceiling measured)",
            "measured": f"{wall:.2f}x (± {stats.t_half_width(r['ratio']['wall']):.2f})",
            "ok": wall >= goal if goal else None}
        figures[f"TRL step / this library's, one teacher, batch {batch}, CPU time"] = {
            "goal": "(reported)", "measured": f"{cpu:.2f}x", "ok": None}
    if "two" in res:
        wall, cpu = row("two teachers, 8 prompts each: routed step vs two TRL trainers (one per teacher)", res["two"],
                        GOAL_TWO, trl_note=", both trainers' steps")
        figures["TRL (two trainers) / this library's routed step, two teachers"] = {
            "goal": f">= {GOAL_TWO:g}x", "measured": f"{wall:.2f}x (± {stats.t_half_width(res['two']['ratio']['wall']):.2f})",
            "ok": wall >= GOAL_TWO}
        figures["TRL (two trainers) / this library's routed step, two teachers, CPU time"] = {
            "goal": "(reported)", "measured": f"{cpu:.2f}x", "ok": None}
    busy = {side: statistics.mean(median(r[side]["cpu"]) / median(r[side]["wall"]) for r in res["one"].values())
            for side in ("lib", "trl")} if res["one"] else None
    if busy:
        lines += ["", f"Cores kept busy (CPU time / wall time per step, mean over the one-teacher rows): this library "
                  f"{busy['lib']:.2f}, TRL {busy['trl']:.2f}, of {args.threads} threads"
                  + (": both sides keep every thread busy, so the two clocks give the same ratios."
                     if min(busy.values()) > 0.9 * args.threads else ".")]
    if res.get("ceiling"):
        lines += ["", "**The ceiling of the structure.** Each pass of the two steps timed alone on one batch (wall "
                  f"time, medians of {next(iter(res['ceiling'].values()))['reps']} interleaved repetitions): TRL's step runs the student's prefill "
                  "to sample, the teacher and the training pass; this library's runs the training pass, whose prompt "
                  "prefill is the sampler's, and the teacher. If decoding and every per-call cost were free on both "
                  "sides, TRL's step / this library's would be (prefill + folded teacher + training pass) / (training "
                  "pass + routed teacher):", "",
                  "| batch | " + " | ".join(PASSES.values()) + " | ceiling: TRL / this library |",
                  "| --- | " + " | ".join("---" for _ in PASSES) + " | --- |"]
        for batch, c in res["ceiling"].items():
            w = c["wall"]
            lines.append(f"| {batch} | " + " | ".join(ms(w[k]) for k in PASSES) + f" | **{w['ratio']:.2f}x** |")
        measured = "; ".join(f"batch {b}: {median(res['one'][b]['ratio']['wall']):.2f}x measured against a "
                             f"ceiling of {c['wall']['ratio']:.2f}x" for b, c in res["ceiling"].items() if b in res["one"])
        lines += ["", f"{measured}. Beyond these passes each step spends more: this library its decode steps and its "
                  "forward over the completion on the prefill's cache, TRL its generation loop, and each trainer its "
                  "own per-step work. Where both spend alike, the measured ratio lies between the ceiling and 1. "
                  f"The goal is therefore set against the ceiling measured in the same run: TRL's step / this "
                  f"library's >= {GOAL_OF_CEILING:g} x the ceiling (it replaced a fixed 1.25x, which sat at or past "
                  "the ceiling at the tiny size). The summary gives each ratio with the half-width of the 95% "
                  "t-interval of its repetitions' mean: where that is wider than the distance to the goal, the "
                  "verdict is the median's, and another run may read the other way."]
        for batch, c in res["ceiling"].items():
            figures[f"TRL / this library, one teacher, batch {batch}: the structure's ceiling"] = {
                "goal": "(reported)", "measured": f"{c['wall']['ratio']:.2f}x", "ok": None}
    a = res["agreement"]
    lines += ["", f"**The same objective.** On one rollout ({a['tokens']} completion tokens, mean reverse KL "
              f"{a['mean_kl']:.4f}), TRL's divergence kernel at beta = 1 and `losses.reverse_kl` agree per token to "
              f"{a['max_abs_diff']:.1e} (fp32).", ""]
    one = res["one"][max(res["one"])] if res["one"] else {}
    if one.get("lib_kl") and one.get("trl_kl"):
        n = min(len(one["lib_kl"]), len(one["trl_kl"]))
        head = min(3, n)
        lines += [f"**Learning, side by side** (the last repetition at batch {max(res['one'])}; the mean reverse KL "
                  f"each trainer logged): this library {statistics.mean(one['lib_kl'][:head]):.4f} over its first "
                  f"{head} steps -> {statistics.mean(one['lib_kl'][-head:]):.4f} over its last {head}; TRL "
                  f"{statistics.mean(one['trl_kl'][:head]):.4f} -> {statistics.mean(one['trl_kl'][-head:]):.4f}. "
                  "Same initial student, same prompts; the samples differ (each trainer draws with its own "
                  "generator: this library's seeded sampler, TRL's `model.generate`), so the two curves agree "
                  "in trend, not token for token. One difference in what is computed: TRL's training forward "
                  "passes no position ids, so a left-padded prompt's positions start at its padding; this "
                  "library counts positions from each row's first real token, when sampling and when scoring.", ""]
    lines += ["**What is and is not comparable.** One teacher: the same work on both sides (one sampled completion "
              "per prompt, the teacher's full distribution over the completion, the exact reverse KL, one AdamW "
              "step on a LoRA student); TRL holds its teacher as a separate model, this library as a LoRA adapter "
              "on the student's base, so the teacher's forward is a folded model there and a routed LoRA pass "
              "here. Two teachers: TRL 1.16's DistillationTrainer takes one teacher; routing each prompt to its "
              "domain's teacher needs either user code or one trainer per teacher. The row above runs one trainer "
              "per teacher on a shared student, stepped one after the other: it does two generations, two teacher "
              "forwards and two optimizer steps of 8 rows where this library does one of each over 16 rows, so it "
              "compares the cost of serving 16 routed rows, not the same optimisation."]
    return "\n".join(lines), figures


def report_memory(res: dict, args, argv) -> tuple[str, dict]:
    """The memory section: one table per activation-checkpointing setting measured."""
    where = "" if DEVICE == "cpu" else f" (on {torch.cuda.get_device_name(0)})"
    lines = [section_head("Memory: two teachers + student at the Qwen3-1.7B size, as adapters or as separate models"
                          + where, "bench.peers", argv=argv)]
    lines += ["", "Two teachers and a student at Qwen3-1.7B's size: here the teachers are LoRA adapters on the "
              "student's own base (one 3.4 GB bf16 base, three adapters); there each teacher is a separate model "
              "(the base with that teacher's update folded in, as TRL and verl hold teachers). The student's step is "
              "the same on both sides: sample, score with the routed teachers (here) or each teacher model (there), "
              "train. The figure is the peak resident memory of the whole process, loading included, each "
              "configuration in a fresh process. **The allocator matters on a CPU:** with glibc's default, a "
              "freed block of activation size stays in the process's heap, so the peak counts memory the step no "
              "longer uses, about 2 GB of it at this size; with the mmap threshold fixed (`MALLOC_FIXED`), large "
              "tensors are returned when freed and the peak is what the step holds at once, which is what a GPU's "
              "caching allocator would see. Both are measured, with the same allocator on both sides; the goal is "
              "read on the qwen3 preset's setting (activation checkpointing on) with the fixed threshold."]
    figures = {}
    for m in res["memory"]:
        is_goal = m["checkpointing"] and m.get("malloc") == "fixed"   # the setting the goal is read on
        ok = m["ratio"] <= GOAL_MEMORY if is_goal else None
        s, p = m["shared"], m["separate"]
        if "depths" in m:
            measured = "; ".join(f"{L} layers: {gb(d['shared']['peak_rss'])} vs {gb(d['separate']['peak_rss'])} "
                                 f"({d['ratio']:.2f}x; load {d['load'][0]} -> {d['load'][-1]})"
                                 for L, d in sorted(m["depths"].items()))
            lines += ["", f"**Memory, measured at reduced depth and projected** (`--memory-layers`): Qwen3-1.7B's "
                      f"width and vocabulary with "
                      f"{', '.join(map(str, sorted(m['depths'])))} of its 28 layers, each configuration "
                      f"in a fresh process (this library vs separate teachers): {measured}. The table below is the "
                      f"straight line through those points at 28 layers (per layer: "
                      f"{gb(m['shared']['per_layer'])} shared, {gb(m['separate']['per_layer'])} separate): a "
                      "projection, not a measurement at 28 layers."]
        ck = "on (the qwen3 preset's default)" if m["checkpointing"] else "off"
        alloc = ("glibc malloc with a fixed mmap threshold (`bench.peers.MALLOC_FIXED`)" if m.get("malloc") == "fixed"
                 else "glibc malloc's default (dynamic mmap threshold)")
        lines += ["", f"**Activation checkpointing {ck}; {alloc}** (random weights, bf16, {DEVICE}, {args.threads} torch threads, "
                  f"{args.memory_prompts} prompts per domain, one MOPD step, the same setting on both sides; each "
                  f"configuration in a fresh process; "
                  f"{'peak resident memory of the whole process, loading included' if DEVICE == 'cpu' else 'the CUDA allocator peak'}):",
                  "", f"| teachers held as | peak {'RSS' if DEVICE == 'cpu' else 'CUDA memory'} | wall time | load during |",
                  "| --- | --- | --- | --- |",
                  f"| LoRA adapters on the student's base (this library) | {gb(s['peak_rss'])} | {s['wall']:.0f} s | "
                  f"{'(projected)' if 'projected_from' in m else m['load'][0] + ' -> ' + m['load'][1]} |",
                  f"| separate models (a folded copy of the base each, as TRL and verl hold them) | {gb(p['peak_rss'])} "
                  f"| {p['wall']:.0f} s | {'(projected)' if 'projected_from' in m else m['load'][1] + ' -> ' + m['load'][2]} |", "",
                  f"This library / separate teachers: **{m['ratio']:.2f}x**" + (
                      f" (goal <= {GOAL_MEMORY}x: {'met' if ok else '**missed**'})." if is_goal
                      else " (reported beside the goal's setting).")]
        size = ("Qwen3-1.7B size" if "projected_from" not in m else
                f"Qwen3-1.7B width, projected to 28 layers from {', '.join(map(str, m['projected_from']))}")
        size += ", activation checkpointing " + ("on" if m["checkpointing"] else "off")
        size += "" if m.get("malloc") == "fixed" else ", default malloc"
        figures[f"peak memory, two teachers + student, {size}: this library / separate teachers"] = {
            "goal": f"<= {GOAL_MEMORY}x" if is_goal else "(reported)", "measured": f"{m['ratio']:.2f}x", "ok": ok}
    return "\n".join(lines), figures


def write_memory(saved: dict, args, write: bool) -> None:
    """The memory section of docs/benchmarks.md from `saved` ({"argv", "threads", "memory_prompts",
    "memory"}), and (write) that dict itself beside it, for --render-memory."""
    args.threads, args.memory_prompts = saved["threads"], saved["memory_prompts"]
    set_threads(args.threads)  # the section's header names the measurement's threads
    body, figures = report_memory(saved, args, saved["argv"])
    if write:
        name = MEMORY_JSON.name if DEVICE == "cpu" else "peers_gpu_memory.json"
        atomic_write(MEMORY_JSON.with_name(name), json.dumps(saved, indent=1, default=str).encode())
    print_and_write("peers_memory" if DEVICE == "cpu" else "peers_gpu_memory", body, figures, write)


def main(argv=None, write: bool = True):
    p = argparse.ArgumentParser(description="this library against TRL's DistillationTrainer")
    p.add_argument("--reps", type=int, default=5, help="interleaved repetitions of each comparison")
    p.add_argument("--steps", type=int, default=8, help="steps per run (the first is not timed)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batches", type=int, nargs="*", default=[8, 16])
    p.add_argument("--memory-prompts", type=int, default=2, help="prompts per domain in the memory step")
    p.add_argument("--no-memory", action="store_true", help="skip the Qwen3-size memory figure")
    p.add_argument("--memory-layers", type=int, nargs="*", default=None,
                   help="measure the memory at these depths (of 28 layers) and project to 28 by a straight line "
                        "per configuration; default: the full 28 (three full models: ~11 GB of RAM)")
    p.add_argument("--no-two", action="store_true", help="skip the two-teacher comparison")
    p.add_argument("--no-steps", action="store_true", help="the memory figure only (no TRL step comparison)")
    p.add_argument("--quick", action="store_true", help="tiny settings (smoke test): batch 2, 3 steps, 1 rep, "
                   "no memory figure")
    p.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda: models, TRL and the memory figure "
                   "there (on cuda the memory is the CUDA allocator's peak; section peers_gpu)")
    p.add_argument("--memory-checkpointing", nargs="+", choices=("on", "off"), default=["on"],
                   help="activation checkpointing in the memory step (on: the qwen3 preset's); both: one table each")
    p.add_argument("--memory-malloc", nargs="+", choices=("fixed", "default"), default=["fixed"],
                   help="glibc malloc in the memory children: a fixed mmap threshold (MALLOC_FIXED), or its default")
    p.add_argument("--memory-child", choices=("shared", "separate"), help=argparse.SUPPRESS)
    p.add_argument("--prompts", type=int, default=2, help=argparse.SUPPRESS)
    p.add_argument("--render-memory", metavar="JSON", help="rewrite the memory section from a saved "
                   f"{MEMORY_JSON.name} (no measurement; its numbers and command)")
    p.add_argument("--render-steps", metavar="JSON", help=f"rewrite the step comparison's section from a saved "
                   f"{STEPS_JSON.name} (no measurement; its numbers and command)")
    args = p.parse_args(argv)
    global DEVICE
    DEVICE = args.device
    set_threads(args.threads)
    if args.render_steps:
        saved = json.loads(Path(args.render_steps).read_text())
        res = saved["res"]
        for part in ("one", "ceiling"):   # JSON made the batch keys strings
            res[part] = {int(b): v for b, v in (res.get(part) or {}).items()}
        for k in ("threads", "steps", "reps"):
            setattr(args, k, saved["args"][k])
        body, figures = report(res, args, saved["argv"])
        print_and_write("peers" if DEVICE == "cpu" else "peers_gpu", body, figures, write and not args.no_write)
        return res
    if args.render_memory:
        saved = json.loads(Path(args.render_memory).read_text())
        write_memory(saved, args, write and not args.no_write)
        return saved
    if args.memory_child:
        shrink = dict(num_hidden_layers=1, hidden_size=64, intermediate_size=128, num_attention_heads=2,
                      num_key_value_heads=1, head_dim=32) if args.quick else None
        if args.memory_layers and not args.quick:
            shrink = {"num_hidden_layers": args.memory_layers[0]}
        print(json.dumps(memory_child(args.memory_child, args.prompts, shrink, args.memory_checkpointing[0] == "on")))
        return None
    if args.quick:
        args.reps, args.steps, args.batches, args.no_memory = 1, 3, [2], True
    res = {"load_start": load_avg(), "one": {}}
    key = "peers" if DEVICE == "cpu" else "peers_gpu"
    if not args.no_memory:  # first: its subprocesses need the most memory, best before this one holds models
        res["memory"] = []
        for malloc in args.memory_malloc:
            for ck in args.memory_checkpointing:
                on = ck == "on"
                if args.memory_layers:
                    depths = {L: memory(args.memory_prompts, args.quick, L, on, args.threads, malloc)
                              for L in args.memory_layers}
                    res["memory"].append({**project(depths, 28), "checkpointing": on, "malloc": malloc, "depths": depths})
                else:
                    res["memory"].append(memory(args.memory_prompts, args.quick, None, on, args.threads, malloc))
        write_memory({"argv": argv if argv is not None else sys.argv[1:], "threads": args.threads,
                      "memory_prompts": args.memory_prompts, "memory": res["memory"]}, args,
                     write and not args.no_write and not args.quick)
    if args.no_steps:
        return res
    if not have_trl():
        print("bench.peers: the step comparison is skipped, trl is not installed (pip install -e '.[bench]' "
              "installs trl==1.16.0)")
        return res if not args.no_memory else None
    bank = make_bank("tiny", device=DEVICE)
    with tempfile.TemporaryDirectory(prefix="mopd-peers-") as tmp:
        res["agreement"] = kl_agreement(bank)
        print(f"per-token KL, TRL vs reverse_kl: max abs diff {res['agreement']['max_abs_diff']:.1e}", flush=True)
        for batch in args.batches:
            res["one"][batch] = compare_one_teacher(bank, batch, args.steps, args.reps, tmp)
        res["ceiling"] = {batch: ceiling(bank, batch, max(3, args.reps)) for batch in args.batches}
        if not args.no_two:
            res["two"] = compare_two_teachers(bank, 2 if args.quick else 8, args.steps, args.reps, tmp)
    print(json.dumps(res, default=str), file=sys.stderr)  # everything measured, for the record
    if write and not args.no_write and not args.quick:
        atomic_write(STEPS_JSON.with_name(key + "_steps.json"), json.dumps(
            {"argv": argv if argv is not None else sys.argv[1:], "args": vars(args), "res": res}, indent=1,
            default=str).encode())
    body, figures = report(res, args, argv)
    print_and_write(key, body, figures, write and not args.no_write and not args.quick)
    return res


if __name__ == "__main__":
    main()
