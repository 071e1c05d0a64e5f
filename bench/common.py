"""What every benchmark shares: the machine (from tools.provenance, which the studies share too),
side-by-side timing, peak memory, the benchmark bank, one MOPD step and one SFT step, and the
sections of docs/benchmarks.md.

Why ratios, interleaved: the machines these run on are shared and noisy, so an absolute time
says little. Every figure is a ratio of two things timed in the same run, alternated
(A, B, A, B, ...; the order rotates every repetition), and reported as the median of the
per-repetition ratios, with the medians of the raw times beside it.
"""

from __future__ import annotations

import argparse

import dataclasses
import gc
import json
import os
import re
import statistics
import time
from contextlib import contextmanager
from pathlib import Path

import torch

from tools.provenance import command, machine, machine_line  # noqa: F401 (the benches import them from here)

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "benchmarks.md"


def step_bench_args(description: str, argv=None) -> argparse.Namespace:
    """The flags the step benches share (bench.levers, bench.loss_step): --steps per run (the first
    not counted), --reps, --threads (set here), --quick (3 steps, 1 repetition) and --no-write."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--steps", type=int, default=11, help="steps per run (the first is not counted)")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--no-write", action="store_true")
    args = p.parse_args(argv)
    set_threads(args.threads)
    if args.quick:
        args.steps, args.reps = 3, 1
    return args


def set_threads(n: int | None) -> None:
    """Torch intra-op threads (None: leave the default)."""
    if n:
        torch.set_num_threads(n)


# ---------------------------------------------------------------------------------------------
# timing, side by side
# ---------------------------------------------------------------------------------------------


class Timings:
    """Seconds per repetition of each function, by two clocks: `wall` (perf_counter) and `cpu`
    (process_time: the CPU time this process used, so time spent waiting for a core that other
    jobs hold is not counted; with one torch thread it is the closest thing to a quiet machine)."""

    def __init__(self, names):
        self.wall = {n: [] for n in names}
        self.cpu = {n: [] for n in names}

    def median(self, name: str, clock: str = "cpu") -> float:
        return median(getattr(self, clock)[name])

    def ratio(self, a: str, b: str, clock: str = "cpu") -> float:
        """Median over repetitions of time(a) / time(b), each pair from the same repetition."""
        t = getattr(self, clock)
        return median([x / y for x, y in zip(t[a], t[b])])


def side_by_side(fns: dict, reps: int, warmup: int = 1, before_each=None, after_warmup=None) -> Timings:
    """Time each function `reps` times, interleaved (A, B, C, then B, C, A, ...: the order rotates
    each repetition so no function always runs first). `before_each(name)` runs untimed;
    `after_warmup()` once, between the warm-up rounds and the timed ones."""
    names = list(fns)
    for _ in range(warmup):
        for name in names:
            if before_each:
                before_each(name)
            fns[name]()
    if after_warmup:
        after_warmup()
    times = Timings(names)
    for rep in range(reps):
        for name in names[rep % len(names):] + names[:rep % len(names)]:
            if before_each:
                before_each(name)
            wall, cpu = time.perf_counter(), time.process_time()
            fns[name]()
            times.cpu[name].append(time.process_time() - cpu)
            times.wall[name].append(time.perf_counter() - wall)
    return times


def pyplot():
    """matplotlib.pyplot on the headless Agg backend (the benches only save figures), imported when
    a report first draws rather than when its module loads."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def median(xs) -> float:
    return statistics.median(xs)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 10 else f"{seconds:.1f} s"


# ---------------------------------------------------------------------------------------------
# memory: resident set size of this process (CPU), or the CUDA allocator's peak
# ---------------------------------------------------------------------------------------------


def _status_kb(field: str) -> int:
    match = re.search(rf"^{field}:\s*(\d+) kB", Path("/proc/self/status").read_text(), re.M)
    return int(match.group(1)) if match else 0


def rss_bytes() -> int:
    """Resident memory now (VmRSS)."""
    return _status_kb("VmRSS") * 1024


def peak_rss_bytes() -> int:
    """The process's peak resident memory (VmHWM) since start or since `reset_peak_rss`."""
    return _status_kb("VmHWM") * 1024


def reset_peak_rss() -> bool:
    """Reset VmHWM to the current RSS (Linux: write 5 to /proc/self/clear_refs)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def release_free_memory() -> None:
    """Hand memory that the allocator keeps after frees back to the OS (glibc malloc_trim), so that
    RSS counts only what is alive."""
    gc.collect()
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def peak_extra_bytes(fn) -> tuple[float, int]:
    """(seconds, peak resident bytes above the resident set before the call) of fn().
    Large tensors are mmap-ed and handed back on free, so RSS follows what is alive."""
    release_free_memory()
    before = rss_bytes()
    if not reset_peak_rss():
        raise RuntimeError("cannot reset the peak RSS (needs Linux /proc/self/clear_refs)")
    start = time.perf_counter()
    fn()
    seconds = time.perf_counter() - start
    return seconds, peak_rss_bytes() - before


def gb(n_bytes: float) -> str:
    return f"{n_bytes / 2**30:.2f} GB" if n_bytes >= 2**30 else f"{n_bytes / 2**20:.0f} MB"


# ---------------------------------------------------------------------------------------------
# the benchmark bank: one base, two teachers, a student; and the two steps compared
# ---------------------------------------------------------------------------------------------

TEACHERS = ("teacher_binding", "teacher_recall")


def make_bank(model: str = "tiny", device: str = "cpu", shrink: dict | None = None, dtype=None,
              quantize: str | None = None, teachers: tuple = TEACHERS):
    """An AdapterBank with distinct teachers (`teachers`: their names; lora_B set to seeded noise,
    so they differ from the base and from each other) and a fresh student. The cost of a step does not depend on the
    adapters' values, only on the sampled completion lengths; training real teachers first would
    only add minutes."""
    from mopd_mini import AdapterBank, load_base

    if dtype is None and model != "tiny":   # the bf16 model a GPU runs, also on CPU (load_base would take fp32 there)
        dtype = torch.bfloat16
    base, tokenizer = load_base(model, device=device, shrink=shrink, dtype=dtype, quantize=quantize)
    bank = AdapterBank(base, tokenizer)
    for i, name in enumerate(teachers):
        bank.create(name, seed=i + 1)
        g = torch.Generator().manual_seed(100 + i)
        with torch.no_grad():
            for n, p in bank.parameters(name).items():
                if "lora_B" in n:
                    p.copy_((torch.randn(p.shape, generator=g) * 0.02).to(p.dtype))
    bank.create("student", seed=0)
    return bank


def make_rollout(prompt_ids, prompt_mask, completion_ids, completion_mask, examples):
    """A Rollout of GIVEN completions (gold answers, or random tokens where only the cost matters):
    the prompts left-padded as `encode_prompts` returns them, then C columns."""
    from mopd_mini.rollout import Rollout

    fields = {f.name for f in dataclasses.fields(Rollout)}
    kwargs = dict(input_ids=torch.cat([prompt_ids, completion_ids], 1),
                  attention_mask=torch.cat([prompt_mask, completion_mask.long()], 1),
                  completion_mask=completion_mask.float(), prompt_len=prompt_ids.shape[1],
                  examples=list(examples), sample_logprobs=torch.zeros(completion_ids.shape))
    if "ended" in fields:  # every given completion counts as finished
        kwargs["ended"] = torch.ones(len(completion_ids), dtype=torch.bool)
    return Rollout(**kwargs)


def step_examples(cfg, step: int = 1) -> list:
    """The prompts of one MOPD step: `prompts_per_domain` of every domain (as train_student)."""
    from mopd_mini.domains import get_domains

    return [ex for d in get_domains(cfg.domains).values()
            for ex in d.train_examples(step, cfg.prompts_per_domain, cfg.seed)]


def copy_name(i: int) -> tuple[str, str]:
    """(domain tag, teacher adapter) of the i-th copy domain of `copies`."""
    return f"copy{i}", f"teacher_copy{i}"


def copies(cfg, n: int, batch: int, step: int = 1):
    """N domains for the N-teacher benchmarks: copies of binding under distinct routing tags
    (`copy_name`), `batch` // n prompts each, and a config that routes each tag to its own teacher.
    The cost of a routed step depends on how many teachers a batch holds, not on what the domains
    ask, so binding's prompts under new names measure what N real domains would cost."""
    import dataclasses as dc

    from mopd_mini.domains import get_domains

    if batch % n:
        raise ValueError(f"a batch of {batch} rows does not split evenly over {n} teachers")
    binding = get_domains("binding")["binding"]
    examples = [dc.replace(ex, task=copy_name(i)[0]) for i in range(n)
                for ex in binding.train_examples(step + 1000 * i, batch // n, cfg.seed)]
    routes = dict(copy_name(i) for i in range(n))

    @dc.dataclass
    class Routed(type(cfg)):
        @property
        def route(self) -> dict[str, str]:
            return routes

    return examples, Routed(**{f.name: getattr(cfg, f.name) for f in dc.fields(cfg)})


def reusable(model, checkpointing: bool) -> bool:
    """Whether the library at hand trains on the sampler's prefill (rollout.prefill_reusable; False for
    a library from before it, which bench.compare_commits may be measuring)."""
    try:
        from mopd_mini.rollout import prefill_reusable
    except ImportError:
        return False
    return prefill_reusable(model, checkpointing)


class Steps:
    """One MOPD step and one SFT step on the same prompts, on the bank's student adapter.

    mopd(): exactly the body of `distill.train_student`'s loop minus logging and evaluation:
            sample -> routing.teacher_outputs -> student forward -> mopd_objective -> guarded_step (the student
            forward on the sampler's prefill where the trainer reuses it, as train_student does).
    sft():  teacher forcing on prompt + gold answer (+ EOS), right-padded to the same C columns
            as MOPD's completion budget: one student forward + backward, loss on answer tokens.
    Each call restores the student's weights first (untimed, via `reset`) so every repetition
    starts from the same state, and the MOPD sampler is reseeded so it draws the same completions.
    """

    def __init__(self, bank, cfg, examples: list, phases: dict | None = None):
        from mopd_mini.runs import guarded_step  # noqa: F401  (import errors surface here)
        try:
            from mopd_mini.runs import adamw         # the trainers' optimizer
        except ImportError:                          # a library from before it (bench.compare_commits)
            def adamw(params, lr):
                return torch.optim.AdamW(params, lr=lr, weight_decay=0.0)

        self.bank, self.cfg, self.examples = bank, cfg, examples
        bank.set_checkpointing(cfg.gradient_checkpointing)  # as train_student does
        self.params = list(bank.parameters(cfg.student).values())
        self.optimizer = adamw(self.params, cfg.lr)
        self.snapshot = bank.state(cfg.student)
        self.phases = phases  # {phase: [seconds]}, filled when given
        self.sft_batch = self._sft_batch()

    def reset(self, *_):
        self.bank.load_state(self.cfg.student, self.snapshot)

    def _tick(self, phase: str, start: float) -> float:
        """Record the CPU time (process_time) since `start` under `phase`."""
        now = time.process_time()
        if self.phases is not None:
            self.phases.setdefault(phase, []).append(now - start)
        return now

    def mopd(self, model, seed: int = 0, teacher_outputs=None) -> dict:
        """`teacher_outputs`: what gives the teachers' outputs in place of the routed adapters
        (`routing.teacher_outputs`' signature), e.g. separate teacher models (bench.peers.separate_scorer)."""
        from mopd_mini import routing
        from mopd_mini.distill import mopd_objective
        from mopd_mini.rollout import completion_logits, sample
        from mopd_mini.runs import guarded_step

        cfg, bank = self.cfg, self.bank
        reuse = reusable(model, cfg.gradient_checkpointing)          # as train_student decides
        t = time.process_time()
        rollout = sample(model, bank.tokenizer, self.examples, temperature=cfg.temperature,
                         max_new_tokens=cfg.max_new_tokens, generator=torch.Generator().manual_seed(seed),
                         **({"min_new_tokens": cfg.min_new_tokens} if getattr(cfg, "min_new_tokens", 0) else {}),
                         **({"grad_prefill": True} if reuse else {}))
        t = self._tick("mopd: sample", t)
        teacher = (teacher_outputs or routing.teacher_outputs)(bank, rollout, cfg.route, mode=cfg.scoring, k=cfg.topk)
        t = self._tick("mopd: routing.teacher_outputs", t)
        if reuse:   # the training forward over the completion only, on the sampler's grad prefill
            student_logits = completion_logits(model, rollout, prefill=rollout.prefill)
        else:
            model.train()
            student_logits = completion_logits(model, rollout)
            model.eval()
        t = self._tick("mopd: student forward", t)
        loss, info = mopd_objective(cfg, student_logits, rollout, teacher)
        t = self._tick("mopd: mopd_objective", t)
        out = guarded_step(loss, self.params, self.optimizer, cfg.grad_clip)
        self._tick("mopd: backward + AdamW", t)
        return {"loss": loss.item(), "tokens": int(rollout.completion_mask.sum()),
                "shape": tuple(rollout.input_ids.shape), **out}

    def _sft_batch(self):
        """A Rollout-shaped block: the same left-padded prompts, then gold answer + EOS, C columns."""
        from mopd_mini.rollout import encode_prompts

        tok, C = self.bank.tokenizer, self.cfg.max_new_tokens
        ids, mask = encode_prompts(self.bank.model, tok, [e.prompt for e in self.examples], C)
        answers = [(tok(e.answer, add_special_tokens=False)["input_ids"] + [tok.eos_token_id])[:C]
                   for e in self.examples]
        comp = torch.full((len(answers), C), tok.pad_token_id)
        comp_mask = torch.zeros(len(answers), C)
        for b, a in enumerate(answers):
            comp[b, :len(a)], comp_mask[b, :len(a)] = torch.tensor(a), 1.0
        device = next(self.bank.model.parameters()).device
        return make_rollout(ids.to(device), mask.to(device), comp.to(device), comp_mask.to(device), self.examples)

    @torch.no_grad()
    def prefill(self, model):
        """The student's sampling prefill alone: one no-grad forward over the step's prompts (the SFT
        block's prompt columns), logits at the last position only, keeping the cache (its output)."""
        from mopd_mini.rollout import position_ids

        P = self.sft_batch.prompt_len
        ids, mask = self.sft_batch.input_ids[:, :P], self.sft_batch.attention_mask[:, :P]
        return model(input_ids=ids, attention_mask=mask, position_ids=position_ids(mask), logits_to_keep=1,
                     use_cache=True)

    def sft(self, model) -> dict:
        from mopd_mini.losses import masked_mean
        from mopd_mini.rollout import completion_logits, token_logprobs
        from mopd_mini.runs import guarded_step

        batch = self.sft_batch
        t = time.process_time()
        model.train()
        logits = completion_logits(model, batch)                                   # (B, C, V)
        model.eval()
        loss = -masked_mean(token_logprobs(logits, batch.completion_ids), batch.completion_mask)
        t = self._tick("sft: student forward + loss", t)
        out = guarded_step(loss, self.params, self.optimizer, self.cfg.grad_clip)
        self._tick("sft: backward + AdamW", t)
        return {"loss": loss.item(), "tokens": int(batch.completion_mask.sum()),
                "shape": tuple(batch.input_ids.shape), **out}


# ---------------------------------------------------------------------------------------------
# docs/benchmarks.md: one section per benchmark, rewritten in place
# ---------------------------------------------------------------------------------------------

HEADER = """# Benchmarks

How fast the course is on a small CPU (every time here was measured on 2-core servers, not on a
laptop), and whether it fits one consumer GPU with Qwen3-1.7B. Everything on this page is written by the scripts in `bench/` (`make bench`, or
`python -m tools.run_all`; each script also runs alone and rewrites only its own section). A section
measured before 2026-12-06 may say it ran as part of `bench.run_all`: the module is now `tools.run_all`.

Every figure is a **ratio measured side by side in one run**: the machines are shared and noisy,
so the two things compared are timed alternately (A, B, A, B, ...; the order rotates each
repetition) and the figure is the median of the per-repetition ratios. Absolute times are
printed beside them for scale only. Each section names the machine it ran on and the command
that made it.

**Goals against the ceiling and the floor.** Two goals of the first performance issue (TRL's step
>= 1.25x this library's; MOPD's step <= 1.5x an SFT step) were shown to sit at or past what this
design can reach at the tiny size: the one-teacher ceiling of TRL / this library is 1.23-1.26x, and
the prefill-once floor of MOPD / SFT was measured at 1.33x. They are now read against those limits, each
measured in the same run as the figure it judges: TRL / this library >= 0.95 x the ceiling (one
teacher, batch 8 and 16) and >= 1.4x with two teachers against two TRL trainers; MOPD / SFT <= 1.25 x
the floor; routing two teachers over one <= 1.1x at both sizes, read only when the 95% interval of
the ratio is within +/- 0.03. How the costs grow with the number of teachers, the completion length
and the batch is in the three `scale_*` sections (`python -m bench.scaling`).
"""

SECTIONS = ["summary", "step", "peers", "peers_memory", "peers_gpu", "peers_gpu_memory", "levers", "routing", "loss_memory", "loss_step", "stuck_gradient", "speedups", "stages", "real_size", "bf16_floor", "gpu", "scale_teachers", "scale_length", "scale_batch"]
_FIG = re.compile(r"<!-- figures (\{.*?\}) -->", re.S)


def _blocks(text: str) -> dict[str, str]:
    return {m.group(1): m.group(0) for m in
            re.finditer(r"<!-- begin:(\w+) -->.*?<!-- end:\1 -->", text, re.S)}


def write_section(key: str, body: str, figures: dict | None = None, doc: Path | None = None) -> Path:
    """Replace (or add) the section `key` of docs/benchmarks.md and refresh the summary table.
    `figures` ({"name": {"goal":..., "measured":..., "ok": bool}}) are stored in the section so the
    summary can be rebuilt from the page alone, whichever script ran last."""
    doc = doc or DOC
    doc.parent.mkdir(parents=True, exist_ok=True)
    text = doc.read_text() if doc.exists() else HEADER
    blocks = _blocks(text)
    fig = f"\n<!-- figures {json.dumps(figures)} -->" if figures else ""
    blocks[key] = f"<!-- begin:{key} -->\n{body.strip()}\n{fig}\n<!-- end:{key} -->"
    blocks["summary"] = f"<!-- begin:summary -->\n{_summary(blocks)}\n<!-- end:summary -->"
    head = text.split("<!-- begin:", 1)[0].rstrip() + "\n"
    ordered = [k for k in SECTIONS if k in blocks] + [k for k in blocks if k not in SECTIONS]
    doc.write_text(head + "\n" + "\n\n".join(blocks[k] for k in ordered) + "\n")
    return doc


def kept_on_reset(key: str) -> bool:
    """Sections no script of run_all rewrites: before/after records of past changes (bench.compare_commits
    writes change_*; `speedups` is the record of the first speed changes, measured with a copy of the
    old code that has since been removed)."""
    return key == "speedups" or key.startswith("change_")


def reset_doc(doc: Path | None = None) -> None:
    """Start docs/benchmarks.md afresh (run_all does this before running every benchmark), keeping
    the before/after records (`kept_on_reset`)."""
    doc = doc or DOC
    doc.parent.mkdir(parents=True, exist_ok=True)
    kept = {k: v for k, v in _blocks(doc.read_text()).items() if kept_on_reset(k)} if doc.exists() else {}
    doc.write_text(HEADER + "".join(f"\n{v}\n" for v in kept.values()))


def _summary(blocks: dict[str, str]) -> str:
    rows = []
    for key in SECTIONS:
        for m in _FIG.finditer(blocks.get(key, "")):
            for name, f in json.loads(m.group(1)).items():
                ok = {True: "met", False: "**missed**", None: "n/a"}[f.get("ok")]
                rows.append(f"| {name} | {f.get('goal', '')} | {f.get('measured', '')} | {ok} |")
    return "\n".join(["## Summary", "", "| figure | goal | measured | |", "| --- | --- | --- | --- |", *rows])


RUN_BY: str | None = None  # set by run_all: the command that ran this script as part of a whole run


def section_head(title: str, module: str, info: dict | None = None, argv=None) -> str:
    by = f" (run as part of `{RUN_BY}`)" if RUN_BY else ""
    return (f"## {title}\n\n*Machine:* {machine_line(info)}  \n*Command:* `{command(module, argv)}`{by}  \n"
            f"*Date:* {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n")


def print_and_write(key: str, body: str, figures: dict | None, write: bool) -> None:
    print(body)
    if write:
        print(f"\nwrote section {key!r} of {write_section(key, body, figures)}")


@contextmanager
def env(**values):
    """Temporarily set environment variables."""
    old = {k: os.environ.get(k) for k in values}
    os.environ.update({k: str(v) for k, v in values.items()})
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
