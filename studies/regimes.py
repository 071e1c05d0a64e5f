"""The regime study of docs/regimes.md: one command per arm, as pre-registered.

    python -m studies.regimes --arm 2 --seeds 0 1 2 --workers 2     # chain: GRPO, SFT teacher, MOPD, SFT, RFT
    python -m studies.regimes --arm 1 --seeds 0 1 2 --workers 2     # conflict + memory: interference
    python -m studies.regimes --estimate --arm 2                    # a few timed steps of each method: the time
    python -m studies.regimes --render                              # the page and figures again, from the JSON
    python -m studies.regimes --quick --arm 2 --out /tmp/r          # the smoke test: seconds, every code path
    python -m studies.regimes --arm 2b --seeds 0 1 2 3 4 --workers 2  # arm 2 re-run: depths 2-5, the cures, rates on val
    python -m studies.regimes --arm memory-cures --seeds 0 1 2      # the cures on arm 1's memory domain
    python -m studies.regimes --teacher-depths                      # which chain depths the SFT teacher learns (seed 0)
    python -m studies.regimes --timed-steps 100                     # one arm-2b seed of exact KL, timed (a fraction)

Every method is an existing trainer with the arm's domains and the registered budget (the table
`ARMS`: train_teacher for GRPO and Mix-RL, train_student for MOPD, collect / train_offline for
RFT and SFT on a teacher's samples, train_offline on `offline.gold` for SFT on gold traces,
merge for the merges); one generic loop runs them. The order: the arm's gate (seed 0, val; its
registered fall-backs), then the methods by dependency level (a teacher before what reads it),
each level's (method, seed) jobs in `--workers` processes of one torch thread each.

Every finished job's results (greedy test and val accuracy by domain and length with the trace
diagnostics of `mopd_mini.regimes`, cost totals from `mopd_mini.cost`, wall seconds, MOPD's
per-token KL along the trace at its tracked steps) are stored in docs/regimes.json as it finishes,
keyed by (arm, method, seed); a re-run skips what is recorded there, even on a fresh clone
without runs/ (a recorded teacher that an unrecorded method needs is retrained, deterministically,
when its adapter is missing). Runs live in runs/regimes/arm<a>/s<seed>/. The page's "## Results"
section and docs/figures/regimes_arm<a>_*.png are rewritten from the JSON after every arm.

Arms 2b and memory-cures (the amendment of 2026-12-03) declare a grid per method (`Arm.grids`):
each method's setting is chosen on val first by studies/study.py's runner (`plan_choice`, in slices), the
choice kept in the JSON, then every seed trains at it; their gate is read on every seed
(`Arm.gate_every_seed`), and arm 2b's chain is its own variant of the domain (`domain_variants`).
Their section of the page (`cures_markdown`) is rendered once they have records: the choice, the
gate on every seed, strict and prefix trace by depth and per seed, the stuck share at steps 50,
100, 300 per method and seed, and the amendment's decisions (`decisions_cures`: Holm over H2b.1's
four cures and H2b.3; H2b.2's threshold tested on seeds 3-4) over the seeds that pass the gate.

The store, the workers' claims, the gates, the per-seed rows and the decision rules are those of
the one study runner (bench/study.py); this module declares the arms (`Recipe`: one row of an arm,
a trainer and its budget) and what each arm's page reads.
"""

from __future__ import annotations

import sys

if __name__ == "__main__" and "--status" in sys.argv[1:]:   # from the JSON alone, before torch loads
    from studies.slices import status_main

    raise SystemExit(status_main("regimes", sys.argv[1:]))

import argparse
import dataclasses
import json
import math
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from statistics import fmean

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

import mopd_mini as mm  # noqa: E402
from mopd_mini import cost, runs, stats, views  # noqa: E402
from mopd_mini.adapters import BASE  # noqa: E402
from mopd_mini import domains as domain_table  # noqa: E402
from mopd_mini.domains import Domain, get_domains  # noqa: E402
from mopd_mini.merge import merge  # noqa: E402
from mopd_mini.offline import OfflineConfig, collect, gold, train_offline  # noqa: E402
from mopd_mini.regimes import starting_points  # noqa: E402

from . import slices, study  # noqa: E402
from tools.provenance import above_header, command, machine, machine_line  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
EXPERIMENT = "regimes"
TRACKED = (1, 10, 25, 50, 100, 200, 300)   # MOPD's tracked steps (registered: arm 2's diagnostics)

# ---------------------------------------------------------------------------------------------
# the table: methods, budgets, gates (docs/regimes.md, "Protocol", "Arm 1", "Arm 2")
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Recipe:
    """One row of an arm: an existing trainer, the domains it trains, its budget."""

    key: str                       # the JSON key; also the adapter's name (plus a gate suffix)
    label: str
    trainer: str                   # grpo | mopd | offline | merge | base (no training: the starting point)
    settings: dict = field(default_factory=dict)   # the trainer config's fields: the registered budget
    domains: tuple | None = None   # None: the arm's
    teachers: dict = field(default_factory=dict)   # domain -> method key of the routed teacher (same seed)
    data: str | None = None        # offline: "gold" (the generator's answers) or "collect" (the teachers' samples)
    merged: tuple = ()             # merge: the method keys merged
    adapter: str | None = None     # the adapter's name when a gate's fall-back changed the method

    @property
    def needs(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys([*self.teachers.values(), *self.merged]))

    @property
    def name(self) -> str:
        return self.adapter or self.key


@dataclass(frozen=True)
class Arm:
    number: int
    title: str
    domains: tuple
    max_new_tokens: int
    methods: tuple
    gate: study.Gate | None
    teacher_of: dict               # domain -> the method that is its teacher (normalised scores)
    variants: dict = field(default_factory=dict)   # {domain: Domain}: the arm's own lengths / knobs (domain_variants)
    grids: dict = field(default_factory=dict)
    """{method key: [setting, ...]}: chosen on val by studies/study.py's runner (`plan_choice`); a
    method not named trains at its settings as registered"""
    gate_every_seed: study.Gate | None = None
    """a gate read on every seed at the chosen setting: a seed that fails it is excluded from the tests"""
    seeds: tuple = (0, 1, 2)
    """the seeds its decisions are registered on (more seeds recorded are a check beside them)"""
    compared: tuple = ()
    """an arm with grids: the lengths its decisions read (the mean over them, on CHOICE_KEY's metric)"""


def grpo(steps=200):
    return dict(steps=steps, prompts_per_step=8, group_size=8)


MOPD = dict(steps=300, prompts_per_domain=8, track_steps=TRACKED)

ARM2 = Arm(2, "a long answer, a sparse reward, a teacher built apart", ("chain",), 8, (
    Recipe("base", "base (no training)", "base"),
    Recipe("grpo", "GRPO on the outcome reward", "grpo", grpo()),
    Recipe("sft_teacher", "SFT teacher (SFT on gold traces)", "offline",
           dict(steps=200, batch_size=8, prompts_per_domain=1600), data="gold"),
    *(Recipe(f"mopd_{loss}", f"MOPD {name} from the SFT teacher", "mopd", dict(MOPD, loss=loss),
             teachers={"chain": "sft_teacher"}) for loss, name in (("pg", "PG"), ("topk", "Top-k"), ("kl", "exact KL"))),
    Recipe("sft_traces", "SFT on the teacher's sampled traces", "offline",
           dict(steps=300, batch_size=8, prompts_per_domain=600, samples_per_prompt=4, keep="all"),
           teachers={"chain": "sft_teacher"}, data="collect"),
    Recipe("rft", "RFT (the teacher's samples with a right answer)", "offline",
           dict(steps=300, batch_size=8, prompts_per_domain=600, samples_per_prompt=4, keep="correct"),
           teachers={"chain": "sft_teacher"}, data="collect"),
    Recipe("sft_gold", "SFT on gold traces (the student)", "offline",
           dict(steps=300, batch_size=8, prompts_per_domain=2400), data="gold"),
), study.Gate("G2", "sft_teacher", "chain", (2, 3), 0.80,
        retries=({"sft_teacher": dict(settings=dict(steps=400, prompts_per_domain=3200))},)),
    {"chain": "sft_teacher"})

def interference_arm(number, pair: tuple, title: str) -> Arm:
    """Arm 1's protocol on a pair of domains (its second pair, if H1.1 is not shown on the first, is
    the same protocol: registered)."""
    teachers = {d: f"teacher_{d}" for d in pair}
    return Arm(number, title, pair, 4, (
        Recipe("base", "base (no training)", "base"),
        *(Recipe(f"teacher_{d}", f"GRPO teacher ({d})", "grpo", grpo(), domains=(d,)) for d in pair),
        Recipe("mixrl", "Mix-RL at the teachers' budget", "grpo", grpo()),
        Recipe("mixrl_300", "Mix-RL at 300 steps", "grpo", grpo(300)),
        *(Recipe(f"mopd_{loss}", f"MOPD {name}", "mopd", dict(MOPD, loss=loss), teachers=teachers)
          for loss, name in (("pg", "PG"), ("topk", "Top-k"), ("kl", "exact KL"))),
        Recipe("rft", "RFT", "offline", dict(steps=300, batch_size=16, prompts_per_domain=600, samples_per_prompt=4,
                                             keep="correct"), teachers=teachers, data="collect"),
        *(Recipe(f"merge_{how}", f"merge {how}", "merge", dict(how=how, grid=(0.5, 1.0, 1.5)),
                 merged=tuple(teachers.values())) for how in ("linear", "cat")),
    ), study.Gate("G1", "teacher_memory", "memory", (2, 3), 0.50,
            retries=({k: dict(settings=dict(steps=400)) for k in (*teachers.values(), "mixrl")},),
            fallback={**{f"teacher_{d}": dict(label=f"SFT-on-gold adapter ({d})", trainer="offline", data="gold",
                                               settings=dict(steps=200, batch_size=8, prompts_per_domain=1600))
                         for d in pair},
                      "sft_both": dict(label="SFT on gold, both domains at once", trainer="offline", data="gold",
                                       settings=dict(steps=200, batch_size=16, prompts_per_domain=1600))}),
        teachers)


ARM1 = interference_arm(1, ("conflict", "memory"), "domains that interfere")
ARM1B = interference_arm("1b", ("recall", "memory"), "domains that interfere, the second pair (recall, memory)")

# Arm 2b's chain (docs/regimes.md, "Amendment, 2026-12-03: arm 2b"): a 7-cycle, so depth 6 stays
# below it (held out, descriptive; the one-lookup shortcut of this cycle), trained at depths 2-5.
CHAIN_DEEP = Domain("chain", train_lengths=(2, 3, 4, 5), eval_lengths=(2, 3, 4, 5, 6),
                    knobs={"hop_count": 0, "cycle": 7}, answer_style="trace", metric="final")
ARM2B_STEPS = 400  # every arm-2b student's steps (the budget the measured teacher needed at depths 2-5)
DEEP_TOKENS = 10   # a depth-6 trace: 7 words, its period and the end of turn (9), and one to over-run


@contextmanager
def domain_variants(variants: dict):
    """The regime domains replaced, in this process, by `variants` ({name: Domain}): the trainers
    look a domain up by name (mopd_mini.domains.get_domains), so an arm that changes a domain's
    lengths or knobs keeps its name and its routing. Every process of the arm enters it."""
    table = domain_table.REGIME_DOMAINS
    saved = {k: table[k] for k in variants}
    table.update(variants)
    try:
        yield
    finally:
        table.update(saved)


# ---------------------------------------------------------------------------------------------
# arm 2b and memory-cures (docs/regimes.md, "Amendment, 2026-12-03: arm 2b"): the stuck student's cures
# ---------------------------------------------------------------------------------------------

LR_GRID = (3e-4, 1e-3, 3e-3)
"""every arm-2b and memory-cures method's learning-rate grid (studies.study's LADDER around the presets'
1e-3), bracketed past an edge by studies.study.extend_lr"""
JSD_BETAS = (0.1, 0.5, 0.9)
"""jsd's beta, chosen on val with its rate (TRL's convention: 0 the forward KL, 1 the reverse KL)"""
STUCK_STEPS = (50, 100, 300)
"""the steps whose stuck share (and off-support mass) every MOPD record keeps, beside the last"""
CURES = (   # key, label, MOPDConfig fields: the cures the amendment registers, beside exact KL
    ("mopd_fkl", "MOPD forward KL (on-policy)", dict(loss="fkl")),
    ("mopd_jsd", "MOPD JSD (beta chosen on val)", dict(loss="jsd")),
    ("mopd_kl_lmbda", "MOPD exact KL, lmbda 0.5 (teacher prefixes)", dict(loss="kl", lmbda=0.5, lmbda_prefix="teacher")),
    ("mopd_topk_support", "MOPD Top-k, support matching", dict(loss="topk", topk_support=True)),
)
MOPD_FORMS = (("pg", "PG"), ("topk", "Top-k"), ("kl", "exact KL"))


def lr_grid(key: str) -> list[dict]:
    if key == "mopd_jsd":
        return [{"lr": lr, "beta": b} for b in JSD_BETAS for lr in LR_GRID]
    return [{"lr": lr} for lr in LR_GRID]


def students(budget: dict, teachers: dict, suffix: str = "") -> tuple:
    """MOPD's three forms and the cures, from `teachers` ({domain: method key})."""
    return (*(Recipe(f"mopd_{loss}", f"MOPD {name}{suffix}", "mopd", dict(budget, loss=loss), teachers=teachers)
              for loss, name in MOPD_FORMS),
            *(Recipe(key, label + suffix, "mopd", dict(budget, **fields), teachers=teachers) for key, label, fields in CURES))


MOPD_2B = dict(steps=ARM2B_STEPS, prompts_per_domain=8, track_steps=TRACKED + (ARM2B_STEPS,))
SFT_2B = dict(steps=ARM2B_STEPS, batch_size=8)
ARM2B_METHODS = (
    Recipe("base", "base (no training)", "base"),
    Recipe("grpo", "GRPO on the outcome reward", "grpo", grpo()),
    Recipe("sft_teacher", "SFT teacher (SFT on gold traces)", "offline",
           dict(SFT_2B, prompts_per_domain=8 * ARM2B_STEPS), data="gold"),
    *students(MOPD_2B, {"chain": "sft_teacher"}, " from the SFT teacher"),
    Recipe("sft_traces", "SFT on the teacher's sampled traces", "offline",
           dict(SFT_2B, prompts_per_domain=800, samples_per_prompt=4, keep="all"), teachers={"chain": "sft_teacher"},
           data="collect"),
    Recipe("rft", "RFT (the teacher's samples with a right answer)", "offline",
           dict(SFT_2B, prompts_per_domain=800, samples_per_prompt=4, keep="correct"), teachers={"chain": "sft_teacher"},
           data="collect"),
    Recipe("sft_gold", "SFT on gold traces (the student)", "offline",
           dict(SFT_2B, prompts_per_domain=8 * ARM2B_STEPS), data="gold"),
)
ARM2B = Arm("2b", "the stuck student's cures, on a teacher that knows every compared depth", ("chain",), DEEP_TOKENS,
            ARM2B_METHODS, None, {"chain": "sft_teacher"}, variants={"chain": CHAIN_DEEP},
            grids={m.key: lr_grid(m.key) for m in ARM2B_METHODS if m.trainer != "base"},
            gate_every_seed=study.Gate("G2b", "sft_teacher", "chain", (2, 3, 4, 5), 0.80), seeds=(0, 1, 2, 3, 4),
            compared=(2, 3, 4, 5))

MEMORY_TEACHER = Recipe("teacher_memory", "GRPO teacher (memory), as arm 1 built it (its gate's 400 steps)", "grpo",
                        grpo(400), domains=("memory",))
MEMORY_METHODS = (Recipe("base", "base (no training)", "base"), MEMORY_TEACHER,
                  *students(MOPD, {"memory": "teacher_memory"}))
ARM_MEMORY = Arm("memory-cures", "the cures on arm 1's memory domain", ("memory",), 4, MEMORY_METHODS, None,
                 {"memory": "teacher_memory"},
                 grids={m.key: lr_grid(m.key) for m in MEMORY_METHODS if m.trainer == "mopd"},
                 gate_every_seed=study.Gate("G1m", "teacher_memory", "memory", (2, 3), 0.50), compared=(2, 3, 4, 5))

ARMS = {1: ARM1, "1b": ARM1B, 2: ARM2, "2b": ARM2B, "memory-cures": ARM_MEMORY}

def deep_teacher_cfg(steps: int) -> OfflineConfig:
    """teacher_depths' SFT teacher at `steps` (seed 0; a finished run in its folder reloads)."""
    return OfflineConfig.for_model("tiny", loss="sft", domains=("chain",), name=f"sft_teacher_deep_{steps}",
                                   steps=steps, batch_size=8, prompts_per_domain=8 * steps, seed=0, eval_every=0,
                                   progress=False, max_new_tokens=DEEP_TOKENS, experiment=f"{EXPERIMENT}/depths/s0")


def teacher_depths(args) -> dict:
    """Which chain depths the tiny base can learn (a design measurement, not a study run): the SFT
    teacher of arm 2's recipe (SFT on gold traces) trained at seed 0 on CHAIN_DEEP's depths 2-5 at
    200 and 400 steps (arm 2's budget and its gate's retry), each depth scored on val (100
    prompts): final answer, strict trace, prefix trace."""
    out = {}
    with domain_variants({"chain": CHAIN_DEEP}):
        bank = mm.AdapterBank(*mm.load_base("tiny"))
        for steps in (200, 400):
            cfg = deep_teacher_cfg(steps)
            name = cfg.name
            t = time.perf_counter()
            train_offline(bank, cfg, gold(bank.tokenizer, cfg))
            rows = evaluate_rows(bank, name, ("chain",), 100, "val")
            out[str(steps)] = {"seconds": time.perf_counter() - t,
                               "by_depth": {str(r["length"]): {k: r[k] for k in ("acc", "strict", "trace", "words")}
                                            for r in rows}}
            print(f"SFT teacher, {steps} steps, seed 0, val (100 a depth): " + "; ".join(
                f"depth {L}: acc {v['acc']:.2f} strict {v['strict']:.2f} prefix {v['trace']:.2f} words {v['words']:.2f}"
                for L, v in out[str(steps)]["by_depth"].items()) + f" ({out[str(steps)]['seconds']:.0f} s)", flush=True)
    rec = {"command": command("bench.regimes", args.argv), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "machine": machine_line(machine()), "runs": out}
    with Store(args.out / "regimes.json").edit() as data:
        data["measurements"]["teacher_depths"] = rec
    return rec


def timed_seed(args) -> dict:
    """One seed of one method at arm 2b's registered settings, for the compute statement: MOPD exact
    KL (the arm's most expensive per-step form beside the cures, docs/benchmarks.md) on CHAIN_DEEP
    from `teacher_depths`' 400-step seed-0 teacher, `args.timed_steps` of its 400 steps (a fraction,
    scaled linearly to the budget), then the registered evaluation (test 200 and val 100 a depth)."""
    steps = args.timed_steps
    with domain_variants({"chain": CHAIN_DEEP}):
        bank = mm.AdapterBank(*mm.load_base("tiny"))
        cfg = deep_teacher_cfg(400)
        train_offline(bank, cfg, gold(bank.tokenizer, cfg))   # reloads the measured run
        t = time.perf_counter()
        run = mm.train_student(bank, mm.MOPDConfig.for_model(
            "tiny", domains=("chain",), student=f"timed_mopd_kl_{steps}", teachers={"chain": cfg.name}, loss="kl",
            steps=steps, prompts_per_domain=8, seed=0, eval_every=0, progress=False, max_new_tokens=DEEP_TOKENS,
            experiment=f"{EXPERIMENT}/timed/s0"))
        train = time.perf_counter() - t
        t = time.perf_counter()
        evaluate_rows(bank, f"timed_mopd_kl_{steps}", ("chain",), EVAL["test"], "test")
        evaluate_rows(bank, f"timed_mopd_kl_{steps}", ("chain",), EVAL["val"], "val")
        ev = time.perf_counter() - t
    rec = {"command": command("bench.regimes", args.argv), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "machine": machine_line(machine()), "method": "mopd_kl", "steps": steps, "budget_steps": ARM2B_STEPS,
           "train_seconds": train, "eval_seconds": ev,
           "seconds_at_budget": train / steps * ARM2B_STEPS + ev,
           "stuck_share": {str(r["step"]): r.get("stuck_share/chain") for r in run.metrics if r.get("step") in (50, 100)}}
    print(f"timed seed: mopd_kl, {steps} of {ARM2B_STEPS} steps: {train:.0f} s ({train / steps:.2f} s a step), "
          f"evaluation {ev:.0f} s; at the budget about {rec['seconds_at_budget'] / 60:.1f} min", flush=True)
    with Store(args.out / "regimes.json").edit() as data:
        data["measurements"]["timed_seed"] = rec
    return rec


EVAL = dict(test=200, val=100)   # prompts per domain and length (registered)
QUICK = dict(steps=2, prompts_per_step=2, group_size=2, prompts_per_domain=4, samples_per_prompt=2, batch_size=4,
             track_steps=(1, 2), grid=(1.0,))
QUICK_EVAL = dict(test=3, val=2)


def methods_for(arm: Arm, tried: int, fallback: bool = False) -> dict[str, Recipe]:
    """The arm's methods after `tried` of the gate's retries (cumulative), and its fall-back."""
    out = {m.key: m for m in arm.methods}
    changes = [(i + 1, r) for i, r in enumerate(arm.gate.retries[:tried])] if arm.gate else []
    if fallback and arm.gate and arm.gate.fallback:
        changes.append((len(arm.gate.retries) + 1, arm.gate.fallback))
    for i, change in changes:
        for key, over in change.items():
            old = out.get(key)
            if old is None:
                out[key] = Recipe(key=key, adapter=None, **over)
                continue
            over = dict(over)
            if "settings" in over and "trainer" not in over:
                over["settings"] = {**old.settings, **over["settings"]}
            out[key] = dataclasses.replace(old, adapter=f"{key}_g{i}", **over)
    for key in sorted(out, key=lambda k: level(out, k)):   # what reads a changed adapter is another run too
        m = out[key]
        tags = [out[n].name[len(n):] for n in m.needs if out[n].adapter]
        if tags and not m.adapter:
            out[key] = dataclasses.replace(m, adapter=key + max(tags))
    return out


def signature(methods: dict[str, Recipe], key: str, ctx_settings) -> str:
    """What a record was made by: the method's trainer, domains, data and budget, and those of
    everything it reads; a record is reused only by a method with the same signature."""
    m = methods[key]
    return json.dumps([m.name, m.trainer, m.domains, m.data, sorted(m.teachers.items()), list(m.merged),
                       sorted((k, str(v)) for k, v in ctx_settings(m).items()),
                       [signature(methods, n, ctx_settings) for n in m.needs]])


def level(methods: dict[str, Recipe], key: str) -> int:
    needs = methods[key].needs
    return 0 if not needs else 1 + max(level(methods, n) for n in needs)


def batch_of(methods: dict[str, Recipe], key: str) -> int:
    """When a job can run: after what it reads; a method nothing reads goes in the last batch
    (beside the longest chain's end), so no batch waits on a run that nothing needs yet."""
    read = {n for m in methods.values() for n in m.needs}
    return level(methods, key) if key in read else max(level(methods, k) for k in methods)


def weight(m: Recipe) -> float:
    """A rough relative cost of a job (the longest are handed out first)."""
    s, d = m.settings, len(m.domains or (0, 0))
    return {"grpo": s.get("steps", 0) * s.get("prompts_per_step", 0) * s.get("group_size", 0) * d,
            "mopd": s.get("steps", 0) * s.get("prompts_per_domain", 0) * d * 3,
            "offline": s.get("steps", 0) * s.get("batch_size", 0)
            + (s.get("prompts_per_domain", 0) * s.get("samples_per_prompt", 0) * d if m.data == "collect" else 0),
            }.get(m.trainer, 1.0)


# ---------------------------------------------------------------------------------------------
# the results file: docs/regimes.json, written under a lock by every worker
# ---------------------------------------------------------------------------------------------


SECTIONS = ("runs", "gates", "merges", "invocations", "measurements", "choices")


class Store(study.Store):
    """docs/regimes.json: {"runs": {"<arm>|<method>|<seed>": record}, "gates": {arm: ...}, "merges",
    "invocations", "measurements", "choices"}, bench/study.py's store under this study's lock."""

    def __init__(self, path: Path):
        super().__init__(path, lock_path, SECTIONS)

    def record(self, ctx: "Context", key: str, seed: int) -> dict | None:
        """The recorded result of (arm, method, seed), if it was made by this very method."""
        r = self.read()["runs"].get(key_of(ctx.arm.number, key, seed))
        return r if r is not None and r.get("signature") == ctx.signature(key) else None


def lock_path() -> Path:
    """The lock every process of a run takes to write the JSON or claim a job (beside the runs, out of docs/)."""
    runs.RUNS_DIR.mkdir(parents=True, exist_ok=True)
    return runs.RUNS_DIR / f"{EXPERIMENT}.lock"


def key_of(arm: int, method: str, seed: int) -> str:
    return f"{arm}|{method}|{seed}"


# ---------------------------------------------------------------------------------------------
# one job: a method at one seed (its teachers reloaded, or retrained when missing), evaluated
# ---------------------------------------------------------------------------------------------


@dataclass
class Context:
    arm: Arm
    methods: dict
    quick: bool
    store: Store
    progress: bool = False

    def experiment(self, seed: int) -> str:
        return f"{EXPERIMENT}{'-quick' if self.quick else ''}/arm{self.arm.number}/s{seed}"

    def settings(self, m: Recipe) -> dict:
        s = dict(m.settings)
        if self.quick:
            s.update({k: v for k, v in QUICK.items() if k in s})
            if "steps" in s and m.adapter:   # a fall-back keeps a distinct (longer) budget
                s["steps"] += 1
        return s

    def signature(self, key: str) -> str:
        return signature(self.methods, key, self.settings)

    def adapter_saved(self, m: Recipe, seed: int) -> bool:
        folder = runs.RUNS_DIR / self.experiment(seed) / m.name
        return (folder / "adapter_model.safetensors").exists() and (folder / "checkpoint.pt").exists()


def build_recipe(ctx: Context, bank, m: Recipe, seed: int, built: dict) -> dict:
    """Train `m` at `seed` into the bank (a finished run reloads), after what it reads. Returns
    {"run": Run or None, "counts": ..., "merge_w": ...}."""
    if m.key in built:
        return built[m.key]
    for need in m.needs:
        build_recipe(ctx, bank, ctx.methods[need], seed, built)
    s = ctx.settings(m)
    domains = tuple(m.domains or ctx.arm.domains)
    route = {d: ctx.methods[t].name for d, t in m.teachers.items()}
    common = dict(seed=seed, experiment=ctx.experiment(seed), eval_every=0, progress=ctx.progress,
                  max_new_tokens=ctx.arm.max_new_tokens)
    out = {"run": None}
    if m.trainer == "base":
        pass
    elif m.trainer == "grpo":
        out["run"] = mm.train_teacher(bank, mm.GRPOConfig.for_model(
            "tiny", domain=domains[0] if len(domains) == 1 else domains, name=m.name, **s, **common))
    elif m.trainer == "mopd":
        out["run"] = mm.train_student(bank, mm.MOPDConfig.for_model(
            "tiny", domains=domains, student=m.name, teachers=route or None, **s, **common))
    elif m.trainer == "offline":
        cfg = OfflineConfig.for_model("tiny", loss="sft", domains=domains, name=m.name, teachers=route or None,
                                      **s, **common)
        data = gold(bank.tokenizer, cfg) if m.data == "gold" else collect(bank, cfg)
        out["run"] = train_offline(bank, cfg, data)
        out["counts"] = data.counts()
    elif m.trainer == "merge":
        w = merge_weight(ctx, m, bank, seed, built)
        merge(bank, m.name, {ctx.methods[t].name: w for t in m.merged}, how=s["how"])
        out["merge_w"] = w
    else:
        raise ValueError(f"unknown trainer {m.trainer!r} of method {m.key!r}")
    built[m.key] = out
    return out


def merge_weight(ctx: Context, m: Recipe, bank, seed: int, built: dict) -> float:
    """The merge's weight, chosen on val at seed 0 (the registered grid, studies.baselines' values)
    by the mean val accuracy over the arm's domains, once; recorded in the JSON for the other seeds."""
    key = f"{ctx.arm.number}|{m.key}|{m.name}"
    chosen = ctx.store.read()["merges"].get(key)
    if chosen is not None:
        return chosen["w"]
    s = ctx.settings(m)
    if seed != 0:   # seed 0's teachers choose: build them in a bank of their own
        other = mm.AdapterBank(*mm.load_base("tiny"))
        return merge_weight(ctx, m, other, 0, {})
    for t in m.merged:
        build_recipe(ctx, bank, ctx.methods[t], 0, built)
    n = (QUICK_EVAL if ctx.quick else EVAL)["val"]
    scores = {}
    for w in s["grid"]:
        merge(bank, "merge_probe", {ctx.methods[t].name: w for t in m.merged}, how=s["how"])
        rows = evaluate_rows(bank, "merge_probe", ctx.arm.domains, n, "val")
        scores[w] = fmean(r["acc"] for r in rows)
    w = max(scores, key=lambda x: (scores[x], -abs(x - 1.0)))
    with ctx.store.edit() as data:
        data["merges"][key] = {"w": w, "val": {str(k): v for k, v in scores.items()}}
    return w


def evaluate_rows(bank, adapter: str, domains: tuple, n: int, split: str) -> list[dict]:
    """mopd_mini.regimes' rows (greedy accuracy and trace diagnostics by domain and length)."""
    with bank.use(adapter) as model:
        return starting_points(model, bank.tokenizer, n=n, seed=0, split=split, domains=get_domains(domains))


def kl_along(trace: list[dict]) -> dict:
    """MOPD's tracked records as {step: {"kl": mean per completion position, "n": records there}}."""
    out = {}
    for r in trace:
        s = out.setdefault(str(r["step"]), {"sum": [], "n": []})
        for i, v in enumerate(r["kl"]):
            if i == len(s["sum"]):
                s["sum"].append(0.0), s["n"].append(0)
            s["sum"][i] += v
            s["n"][i] += 1
    return {k: {"kl": [a / b for a, b in zip(v["sum"], v["n"])], "n": v["n"]} for k, v in out.items()}


def stuck_at(run, domains: tuple, window: int = 10) -> dict:
    """The stuck detector's share and the off-support mass per domain at STUCK_STEPS and the last
    step: {domain: {step: {"share", "off_support", "share_window"}}}, share_window the mean share
    over the `window` steps ending there (the registered predictor reads it at step 100; docs/stuck.md)."""
    rows = [r for r in run.metrics if "step" in r]
    last = rows[-1]["step"] if rows else None
    out = {}
    for d in domains:
        by = {r["step"]: r.get(f"stuck_share/{d}") for r in rows}
        out[d] = {}
        for r in rows:
            if r["step"] in (*STUCK_STEPS, last):
                near = [v for st, v in by.items() if r["step"] - window < st <= r["step"] and v is not None]
                out[d][str(r["step"])] = {"share": r.get(f"stuck_share/{d}"), "off_support": r.get(f"off_support/{d}"),
                                          "share_window": fmean(near) if near else None}
    return out


def run_job(ctx: Context, key: str, seed: int) -> dict:
    """Build, evaluate and record one (method, seed)."""
    started = time.perf_counter()
    torch.manual_seed(0)
    bank = mm.AdapterBank(*mm.load_base("tiny"))
    m = ctx.methods[key]
    built = {}
    for need in m.needs:
        build_recipe(ctx, bank, ctx.methods[need], seed, built)
    try:
        out = build_recipe(ctx, bank, m, seed, built)
    except ValueError as err:   # the trainer refused at its registered budget (e.g. RFT with no correct
        print(f"{key} seed {seed} FAILED: {err}", flush=True)   # sample): a result, recorded as such
        with ctx.store.edit() as data:
            data["runs"][key_of(ctx.arm.number, key, seed)] = {
                "arm": ctx.arm.number, "method": key, "seed": seed, "adapter": m.name, "signature": ctx.signature(key),
                "failed": str(err), "wall_seconds": time.perf_counter() - started}
        return data["runs"][key_of(ctx.arm.number, key, seed)]
    name = BASE if m.trainer == "base" else m.name
    n = QUICK_EVAL if ctx.quick else EVAL
    run = out["run"]
    rec = {"arm": ctx.arm.number, "method": key, "seed": seed, "adapter": m.name, "trainer": m.trainer,
           "signature": ctx.signature(key),
           "settings": {k: (list(v) if isinstance(v, tuple) else v) for k, v in ctx.settings(m).items()},
           "needs": list(m.needs), "test": evaluate_rows(bank, name, ctx.arm.domains, n["test"], "test"),
           "val": evaluate_rows(bank, name, ctx.arm.domains, n["val"], "val"),
           "cost": cost.totals(run.metrics) if run is not None else {},
           "train_seconds": run.seconds if run is not None else 0.0,
           "N": cost.param_counts(bank)[0],
           "n": sum(p.numel() for p in bank.parameters(m.name).values()) if m.trainer != "base" else 0,
           "merge_w": out.get("merge_w"), "counts": out.get("counts"),
           "kl_along": kl_along(run.trace) if run is not None and run.trace else None,
           "stuck": stuck_at(run, ctx.arm.domains) if m.trainer == "mopd" else None, "machine": machine_line(machine())}
    rec["wall_seconds"], rec["finished_at"] = time.perf_counter() - started, time.time()
    with ctx.store.edit() as data:
        data["quick"] = ctx.quick
        data["runs"][key_of(ctx.arm.number, key, seed)] = rec
    return rec


# ---------------------------------------------------------------------------------------------
# the arm: gate, then the methods by level, in worker processes
# ---------------------------------------------------------------------------------------------


CHOICE_KEY = {"chain": "strict"}   # what the val choice reads per domain (the primary metric; else "acc")


def with_setting(m: Recipe, setting: dict) -> Recipe:
    """`m` at one setting of its grid, as its own adapter (`mopd_kl_lr1em03`)."""
    tags = "_".join(f"{k}{study.tag(v)}" for k, v in sorted(setting.items()))
    return dataclasses.replace(m, settings={**m.settings, **setting}, adapter=f"{m.key}_{tags}")


class ArmEvals(study.StoreEvals):
    """The runner's evaluation cache on the arm's JSON (its "choices" section): {domain: {L: score}}
    at the lengths a choice reads (the domain's train lengths) by CHOICE_KEY."""

    def __init__(self, arm: Arm, store: Store):
        super().__init__(store, "choices", f"{arm.number}|eval")
        self.arm = arm

    def score(self, bank, name: str, split: str, n: int) -> dict:
        doms = get_domains(self.arm.domains)
        if name in self.refused:   # a run the trainer refused: nothing right
            return {d: {str(L): 0.0 for L in dom.train_lengths} for d, dom in doms.items()}
        rows = evaluate_rows(bank, name, self.arm.domains, n, split)
        return {d: {str(r["length"]): r[CHOICE_KEY.get(d, "acc")] for r in rows
                    if r["domain"] == d and r["length"] in doms[d].train_lengths} for d in self.arm.domains}


def quick_grid(key: str, grid: list) -> list:
    """The smoke test's grid: each method's middle setting; exact KL's two lowest, so the
    bracketing and the tie-break run too."""
    return list(grid[:2]) if key == "mopd_kl" else [grid[len(grid) // 2]]


# ---------------------------------------------------------------------------------------------
# the arms with grids (2b, memory-cures) in time-boxed slices: every run one recorded job, the
# adapters later jobs read kept beside the JSON (studies/slices.py)
# ---------------------------------------------------------------------------------------------


INPUTS = "regimes_inputs"
"""the folder beside regimes.json that holds every adapter a later job reads (tracked by git)"""


def inputs_of(out: Path) -> slices.Inputs:
    return slices.Inputs(out / INPUTS, runs.folder_digest)


def input_key(arm: Arm, name: str, seed: int) -> str:
    return f"arm{arm.number}/s{seed}/{name}"


def run_key(arm: Arm, key: str, setting: dict, seed: int) -> str:
    """A val-choice run's record in the "choices" section: (arm, method, setting, seed)."""
    return f"{arm.number}|run|{key}|{json.dumps(setting, sort_keys=True)}|{seed}"


def choice_spec(args, arm: Arm, keys) -> study.Study:
    """The runner's declaration of the arm's choice for `keys` (what `study.replay_choice` reads):
    each method's grid (the smoke test's shorter one), bracketed by study.extend_lr, a tie-break at
    seed 1. Nothing trains through it: its runs are this study's jobs."""
    return study.Study(module="studies.regimes", methods={k: study.Method(None, grid=quick_grid(k, arm.grids[k])
                                                                          if args.quick else list(arm.grids[k]),
                                                                          extend=study.extend_lr) for k in keys},
                       setup=None, domains=tuple(arm.domains), tie_break=1, val_from_run=False,
                       **(dict(max_extend=1, rebracket=1) if args.quick else {}))


def choice_entry(arm: Arm, base_val: dict, rec: dict, setting: dict, val_n: int) -> dict:
    """A run's grid entry (study.replay_choice's): its normalised val scores against the base and a
    ceiling of 1.0 at every read length (i.e. the mean val score itself), from its record."""
    doms = get_domains(arm.domains)
    accs = {"base": base_val, **{f"teacher_{d}": {d: {L: 1.0 for L in dom.train_lengths}} for d, dom in doms.items()},
            rec["adapter"]: {d: {int(L): v for L, v in by.items()} for d, by in rec["scores"].items()}}
    s = study.scores(accs, rec["adapter"], val_n, domains=tuple(arm.domains))
    return {**setting, "name": rec["adapter"], **{d: s[d]["normalised"] for d in arm.domains}, "mean": s["mean"],
            "se": s["mean_se"], "seconds": rec.get("train_seconds", 0.0)}


def plan_choice(args, arm: Arm, data: dict) -> tuple[list[dict], dict, dict]:
    """(jobs, chosen, grid) of the arm's val choice from its records: the jobs the choice needs next
    (every one independent of the others), the settings chosen so far {method: setting}, and each
    chosen method's grid entries. A method is planned once what it reads is chosen; a run at seed s
    of a method that reads a teacher needs that teacher's chosen run at seed s first (a job of its own),
    or, for a teacher with no grid (memory-cures' teacher_memory), its seed record at s."""
    n = (QUICK_EVAL if args.quick else EVAL)["val"]
    base = data["choices"].get(f"{arm.number}|eval|{BASE}|val|{n}")
    if base is None:
        return [{"kind": "base"}], {}, {}
    base = {d: {int(L): v for L, v in by.items()} for d, by in base.items()}
    methods = {m.key: m for m in arm.methods}
    spec = choice_spec(args, arm, list(arm.grids))
    chosen, grid, jobs = {}, {}, []

    def need(job):
        if job not in jobs:
            jobs.append(job)

    for k in sorted(arm.grids, key=lambda k: level(methods, k)):
        if any(t in arm.grids and t not in chosen for t in methods[k].needs):
            continue                                    # what it reads is not chosen yet
        def val_of(setting, seed, k=k):
            rec = data["choices"].get(run_key(arm, k, setting, seed))
            return None if rec is None else choice_entry(arm, base, rec, setting, n)
        missing, entries, best = study.replay_choice(spec, k, val_of)
        for setting, seed in missing:
            ready = True
            for t in methods[k].needs:                 # its teacher's run at this seed, first
                if t in arm.grids and run_key(arm, t, chosen[t], seed) not in data["choices"]:
                    need({"kind": "choice", "key": t, "setting": chosen[t], "seed": seed})
                    ready = False
                elif t not in arm.grids and not has_input(data, arm, methods[t].name, seed):
                    need({"kind": "seed", "key": t, "seed": seed})   # a teacher with no grid: its seed record
                    ready = False
            if ready:
                need({"kind": "choice", "key": k, "setting": setting, "seed": seed})
        if best is not None:
            chosen[k], grid[k] = study._setting(spec.methods[k], best), entries
    return jobs, chosen, grid


def methods_at(arm: Arm, chosen: dict) -> dict[str, Recipe]:
    """The arm's methods at the settings chosen so far (the others as declared)."""
    return {m.key: with_setting(m, chosen[m.key]) if m.key in chosen else m for m in arm.methods}


def reads(data: dict, inp: str) -> list[str]:
    """The recorded jobs that read input `inp` (their "reads": {input: digest})."""
    recs = [*data["choices"].values(), *data["runs"].values()]
    return [f"{r['method']} at seed {r['seed']}" for r in recs if isinstance(r, dict) and inp in (r.get("reads") or {})]


def arm_records(data: dict, arm: Arm) -> dict[str, dict]:
    """Every record of the arm in the store, {section|key: record} (the inputs' makers and readers)."""
    return {f"{sec}|{k}": r for sec in ("choices", "runs") for k, r in data[sec].items()
            if isinstance(r, dict) and r.get("arm") == arm.number}


def input_records(data: dict, arm: Arm, name: str, seed: int) -> list[dict]:
    """The records that made adapter `name` of the arm at `seed` and kept it as an input."""
    return [r for r in [*data["choices"].values(), *data["runs"].values()]
            if isinstance(r, dict) and r.get("arm") == arm.number and r.get("seed") == seed
            and r.get("adapter") == name and r.get("digest")]


def has_input(data: dict, arm: Arm, name: str, seed: int) -> bool:
    return bool(input_records(data, arm, name, seed))


def provide(ctx: Context, bank, m: Recipe, seed: int, built: dict, data: dict, out: Path) -> tuple[str, str]:
    """Load the input adapter of `m` at `seed` (a teacher a job reads) into the bank from the inputs
    folder, its digest checked against the record that made it. Returns (input, digest). No record:
    the study stops (a teacher's job runs before its readers'); missing or another digest: InputError."""
    made = input_records(data, ctx.arm, m.name, seed)
    if not made:
        raise SystemExit(f"{m.name} at seed {seed} has no record with an input: its job must run first")
    inp, digest = made[0]["input"], made[0]["digest"]
    bank.load(m.name, inputs_of(out).get(inp, digest, reads(data, inp)))
    built[m.key] = {"run": None}
    return inp, digest


def trained_fields(ctx: Context, bank, m: Recipe, out: dict) -> dict:
    """What a record keeps of a training run (its cost, time, MOPD's KL along the trace and stuck shares)."""
    run = out["run"]
    return {"trainer": m.trainer, "settings": {k: (list(v) if isinstance(v, tuple) else v) for k, v in ctx.settings(m).items()},
            "needs": list(m.needs), "cost": cost.totals(run.metrics) if run is not None else {},
            "train_seconds": run.seconds if run is not None else 0.0, "N": cost.param_counts(bank)[0],
            "n": sum(p.numel() for p in bank.parameters(m.name).values()) if m.trainer != "base" else 0,
            "merge_w": out.get("merge_w"), "counts": out.get("counts"),
            "kl_along": kl_along(run.trace) if run is not None and run.trace else None,
            "stuck": stuck_at(run, ctx.arm.domains) if m.trainer == "mopd" and run is not None else None,
            "stuck_series": stuck_series(run, ctx.arm.domains) if m.trainer == "mopd" and run is not None else None}


def stuck_series(run, domains: tuple) -> dict:
    """Every step's stuck share and off-support mass per domain, and whether the step trained on the
    student's own samples (`on_policy`, 1 unless lmbda < 1 drew an off-policy step): the per-step
    curves, and the share read over on-policy steps only where lmbda < 1 (docs/stuck.md)."""
    rows = [r for r in run.metrics if "step" in r]
    out = {"step": [r["step"] for r in rows], "on_policy": [r.get("on_policy", 1.0) for r in rows]}
    for d in domains:
        out[d] = {"share": [r.get(f"stuck_share/{d}") for r in rows], "off_support": [r.get(f"off_support/{d}") for r in rows]}
    return out


def choice_scores(arm: Arm, rows: list[dict]) -> dict:
    """{domain: {str(L): score}} a choice reads: CHOICE_KEY's metric at the domain's train lengths."""
    doms = get_domains(arm.domains)
    return {d: {str(r["length"]): r[CHOICE_KEY.get(d, "acc")] for r in rows
                if r["domain"] == d and r["length"] in doms[d].train_lengths} for d in arm.domains}


def train_job(args, arm: Arm, store: Store, key: str, seed: int, setting: dict | None) -> tuple:
    """Train one run of the arm in a fresh bank, its teachers read from the inputs: (ctx, bank, m,
    fields, reads) or, when the trainer refused at this setting, (ctx, None, m, {"failed": msg}, reads)."""
    data = store.read()
    _, chosen, _ = plan_choice(args, arm, data)
    methods = methods_at(arm, chosen)
    m = with_setting(methods[key], setting) if setting is not None else methods[key]
    ctx = Context(arm, {**methods, key: m}, args.quick, store, not args.quiet)
    torch.manual_seed(0)
    bank = mm.AdapterBank(*mm.load_base("tiny"))
    built, read = {}, {}
    for t in m.needs:
        inp, digest = provide(ctx, bank, ctx.methods[t], seed, built, data, args.out)
        read[inp] = digest
    try:
        out = build_recipe(ctx, bank, m, seed, built)
    except ValueError as err:        # refused at its registered budget (RFT with no correct sample): a result
        print(f"{m.name} seed {seed} FAILED: {err}", flush=True)
        return ctx, None, m, {"failed": str(err)}, read
    return ctx, bank, m, trained_fields(ctx, bank, m, out), read


def save_input(args, arm: Arm, bank, m: Recipe, seed: int) -> dict:
    """The trained adapter saved in the inputs folder (once): {"input": key, "digest": ...}."""
    k = input_key(arm, m.name, seed)
    return {"input": k, "digest": inputs_of(args.out).put(k, lambda tmp: bank.save(m.name, tmp))}


def choice_job(args, arm: Arm, store: Store, key: str, setting: dict, seed: int) -> None:
    """One run of the val choice: trained, scored on val, its adapter kept as an input, recorded."""
    started = time.perf_counter()
    n = QUICK_EVAL if args.quick else EVAL
    ctx, bank, m, fields, read = train_job(args, arm, store, key, seed, setting)
    rec = {"arm": arm.number, "method": key, "setting": setting, "seed": seed, "adapter": m.name,
           "signature": ctx.signature(key), "reads": read, **fields}
    if bank is None:                 # refused: it scores 0 at every read length, as registered
        rec["scores"] = {d: {str(L): 0.0 for L in dom.train_lengths} for d, dom in get_domains(arm.domains).items()}
    else:
        rec["val"] = evaluate_rows(bank, m.name, arm.domains, n["val"], "val")
        rec["scores"] = choice_scores(arm, rec["val"])
        rec.update(save_input(args, arm, bank, m, seed))
    rec.update(machine=machine_line(machine()), wall_seconds=time.perf_counter() - started, finished_at=time.time())
    with store.edit() as data:
        data["quick"] = args.quick
        data["choices"][run_key(arm, key, setting, seed)] = rec


def base_job(args, arm: Arm, store: Store) -> None:
    """The base's val scores, which every choice is normalised against (the choice's first job)."""
    n = (QUICK_EVAL if args.quick else EVAL)["val"]
    bank = mm.AdapterBank(*mm.load_base("tiny"))
    ArmEvals(arm, store).get(bank, BASE, "val", n)


def seed_job(args, arm: Arm, store: Store, key: str, seed: int) -> None:
    """One (method, seed) of the arm at its chosen setting, recorded in "runs" with its test and val
    rows. A run the val choice made at this seed is not trained again: its adapter is read from the
    inputs and its training fields from its record. A teacher's adapter is kept as an input."""
    started = time.perf_counter()
    n = QUICK_EVAL if args.quick else EVAL
    data = store.read()
    _, chosen, _ = plan_choice(args, arm, data)
    made = data["choices"].get(run_key(arm, key, chosen[key], seed)) if key in chosen else None
    methods = methods_at(arm, chosen)
    m = methods[key]
    if made is not None and "digest" in made:
        ctx = Context(arm, methods, args.quick, store, not args.quiet)
        bank = mm.AdapterBank(*mm.load_base("tiny"))
        bank.load(m.name, inputs_of(args.out).get(made["input"], made["digest"], reads(data, made["input"])))
        fields = {k: made[k] for k in ("trainer", "settings", "needs", "cost", "train_seconds", "N", "n", "merge_w",
                                       "counts", "kl_along", "stuck", "stuck_series", "reads", "val", "input", "digest")}
        fields["from_choice"] = run_key(arm, key, chosen[key], seed)
    elif made is not None:           # the choice's run was refused by its trainer: so is this seed's
        ctx, bank, fields = Context(arm, methods, args.quick, store), None, {"failed": made["failed"], "reads": made["reads"]}
    else:
        ctx, bank, m, fields, read = train_job(args, arm, store, key, seed, None)
        fields["reads"] = read
        if bank is not None:
            fields["val"] = evaluate_rows(bank, BASE if m.trainer == "base" else m.name, arm.domains, n["val"], "val")
            if any(key in r.needs for r in methods.values()):   # a teacher: later jobs read it
                fields.update(save_input(args, arm, bank, m, seed))
    rec = {"arm": arm.number, "method": key, "seed": seed, "adapter": m.name, "signature": ctx.signature(key), **fields}
    if bank is not None:
        rec["test"] = evaluate_rows(bank, BASE if m.trainer == "base" else m.name, arm.domains, n["test"], "test")
    rec.update(machine=machine_line(machine()), wall_seconds=time.perf_counter() - started, finished_at=time.time())
    with store.edit() as data:
        data["quick"] = args.quick
        data["runs"][key_of(arm.number, key, seed)] = rec


def plan_seeds(args, arm: Arm, data: dict, chosen: dict) -> list[dict]:
    """The seed jobs left once the choice is made: every (method, seed) with no record at its chosen
    setting whose teachers' records at that seed exist (a teacher's job runs before its readers')."""
    methods = methods_at(arm, chosen)
    ctx = Context(arm, methods, args.quick, None)
    def recorded(k, s):
        r = data["runs"].get(key_of(arm.number, k, s))
        return r is not None and r.get("signature") == ctx.signature(k)
    jobs = []
    for s in args.seeds:
        for k in sorted(methods, key=lambda k: (level(methods, k), -weight(methods[k]))):
            if not recorded(k, s) and all(has_input(data, arm, methods[t].name, s) for t in methods[k].needs):
                jobs.append({"kind": "seed", "key": k, "seed": s})
    return jobs


def job_seconds(arm: Arm, data: dict, job: dict) -> float:
    """A job's estimate: the longest recorded wall time of the same method in this arm (any setting
    or seed), else the timed seed's time at the budget scaled by the method's relative cost
    (`weight`), else 15 minutes."""
    if job["kind"] == "base":
        return 60.0
    walls = [r["wall_seconds"] for r in [*data["choices"].values(), *data["runs"].values()]
             if isinstance(r, dict) and r.get("arm") == arm.number and r.get("method") == job["key"] and r.get("wall_seconds")]
    if walls:
        return max(walls)
    timed = data.get("measurements", {}).get("timed_seed")
    methods = {m.key: m for m in arm.methods}
    ref = methods.get(timed["method"]) if timed else None
    if ref is not None and weight(ref) > 0:
        return timed["seconds_at_budget"] * max(0.2, weight(methods[job["key"]]) / weight(ref))
    return 900.0


def job_argv(args, arm: Arm, job: dict) -> list[str]:
    return [slices.python(), "-m", "studies.regimes", "--arm", str(arm.number), "--out", str(args.out), "--quiet",
            "--job", json.dumps(job), *(["--quick"] if args.quick else [])]


def run_job_json(args, arm: Arm, job: dict) -> None:
    """One job of `run_sliced` in this process (`--job`)."""
    store = Store(args.out / "regimes.json")
    if job["kind"] == "base":
        return base_job(args, arm, store)
    if job["kind"] == "choice":
        return choice_job(args, arm, store, job["key"], job["setting"], job["seed"])
    return seed_job(args, arm, store, job["key"], job["seed"])


def phase_of(args, arm: Arm, data: dict) -> tuple[str, list[dict], dict]:
    """(phase, its jobs now, chosen): the val choice while it has jobs, then the seeds."""
    jobs, chosen, grid = plan_choice(args, arm, data)
    if jobs or set(chosen) < set(arm.grids):
        return "val choice", jobs, chosen
    return "seeds", plan_seeds(args, arm, data, chosen), chosen


def finish_choice(args, arm: Arm, store: Store) -> None:
    """Once every method is chosen: the choice's summary in the JSON (what the page and arm_methods read)."""
    data = store.read()
    jobs, chosen, grid = plan_choice(args, arm, data)
    if jobs or set(chosen) < set(arm.grids) or str(arm.number) in data["choices"]:
        return
    methods = {m.key: m for m in arm.methods}
    sig = json.dumps([str(arm.number), arm.grids, [Context(arm, methods, args.quick, store).signature(k) for k in methods],
                      args.quick], default=str)
    refused = {r["adapter"]: r["failed"] for k, r in data["choices"].items()
               if k.startswith(f"{arm.number}|run|") and "failed" in r}
    runs_ = [r for k, r in data["choices"].items() if k.startswith(f"{arm.number}|run|")]
    with store.edit() as d:
        d["choices"][str(arm.number)] = {"signature": sig, "chosen": chosen, "grid": grid, "refused": refused,
                                         "machine": " | ".join(sorted({r["machine"] for r in runs_})),
                                         "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}


def run_sliced(args, arm: Arm) -> None:
    """The arm, phase after phase, each phase's jobs in `--workers` processes, inside `--hours`: no job
    starts that its estimate says cannot finish before the deadline, the running ones are stopped
    there (nothing of them kept), and the command ends with what is done, what is left and how to
    continue. Running it again continues where it stopped, on any machine holding the JSON and inputs."""
    store = Store(args.out / "regimes.json")
    deadline = slices.Deadline(args.hours)
    started = time.time()
    with store.edit() as data:       # every input a record names, checked first (slices.Inputs.check)
        for k in inputs_of(args.out).check(arm_records(data, arm)):
            sec, key = k.split("|", 1)
            print(f"input of {key} is missing and no recorded job read it: its job runs again", flush=True)
            del data[sec][key]
    again = slices.continuing("studies.regimes", args.argv if args.argv is not None else sys.argv[1:])
    total = slices.run_phases(store.read, lambda data: phase_of(args, arm, data), lambda j: job_argv(args, arm, j),
                              workers=args.workers, deadline=deadline, estimate=lambda data, j: job_seconds(arm, data, j),
                              again=again, label=f"arm {arm.number}", between=lambda: finish_choice(args, arm, store))
    finish_choice(args, arm, store)
    data = store.read()
    phase, jobs, _ = phase_of(args, arm, data)
    left = sum(job_seconds(arm, data, j) for j in jobs)
    with store.edit() as d:
        d.setdefault("slices", {}).setdefault(str(arm.number), []).append(
            {"command": command("studies.regimes", args.argv), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
             "machine": machine_line(machine()), "wall_seconds": time.time() - started, "hours": args.hours,
             "workers": args.workers, "finished": len(total.finished), "stopped": len(total.stopped),
             "phase_wall_seconds": {k: round(v, 1) for k, v in total.phase_wall_s.items()}})
        d.setdefault("plans", {})[str(arm.number)] = {
            "done": not jobs, "phase": phase, "total_left": len(jobs), "seconds": left, "more": phase == "val choice",
            "command": again, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    slices.slice_report(total, jobs, left, again)


def arm_methods(arm: Arm, data: dict, tried: int = 0, fallback: bool = False) -> dict[str, Recipe]:
    """The arm's methods as they run: after its gate's retries (methods_for), or at the settings
    its val choice recorded in `data` (the JSON; an arm with grids, none recorded: as declared)."""
    if not arm.grids:
        return methods_for(arm, tried, fallback)
    chosen = data.get("choices", {}).get(str(arm.number), {}).get("chosen", {})
    return {m.key: with_setting(m, chosen[m.key]) if m.key in chosen else m for m in arm.methods}


def gate_every_seed_values(data: dict, arm: Arm) -> dict:
    """{seed: {length: value}} of the arm's gate read on every seed (arm.gate_every_seed): the gate
    method's recorded val score at each compared length (the strict trace on chain, else accuracy)."""
    g = arm.gate_every_seed
    key = "strict" if g.domain in CHOICE_KEY else "acc"
    return {rec["seed"]: {L: acc(rec, g.domain, (L,), key, "val") for L in g.lengths}
            for rec in data["runs"].values() if rec["arm"] == arm.number and rec["method"] == g.method and "val" in rec}


def gate_every_seed_line(data: dict, arm: Arm) -> list[str]:
    """Each recorded seed's gate (arm.gate_every_seed): the value at every compared length, passed or not."""
    return [] if arm.gate_every_seed is None else study.gate_lines(arm.gate_every_seed, gate_every_seed_values(data, arm))


def gate_value(rec: dict, gate: study.Gate) -> float:
    return fmean(r["acc"] for r in rec["val"] if r["domain"] == gate.domain and r["length"] in gate.lengths)


def run_gate(args, arm: Arm, store: Store) -> tuple[int, bool]:
    """(retries used, fall-back taken): the gate's method at seed 0 on val, then its retries."""
    g = arm.gate
    tries, before = [], (store.read()["gates"].get(str(arm.number)) or {}).get("tries", [])
    for tried in range(len(g.retries) + 1):
        ctx = Context(arm, methods_for(arm, tried), args.quick, store, not args.quiet)
        m = ctx.methods[g.method]
        seen = [t for t in before if t.get("signature") == ctx.signature(g.method)]   # a try made before
        v = seen[0]["val"] if seen else gate_value(store.record(ctx, g.method, 0) or run_job(ctx, g.method, 0), g)
        tries.append({"adapter": m.name, "steps": ctx.settings(m).get("steps"), "val": v, "passed": v >= g.threshold,
                      "signature": ctx.signature(g.method)})
        print(f"gate {g.name}: {m.name} at seed 0, val {g.domain} L{g.lengths}: {v:.3f} "
              f"({'passes' if v >= g.threshold else 'fails'} >= {g.threshold})", flush=True)
        if v >= g.threshold:
            break
    passed = tries[-1]["passed"]
    fallback = not passed and g.fallback is not None
    with store.edit() as data:
        data["gates"][str(arm.number)] = {"name": g.name, "tries": tries, "passed": passed, "fallback": fallback,
                                          "threshold": g.threshold, "lengths": list(g.lengths), "domain": g.domain}
    return len(tries) - 1, fallback


def jobs_to_run(ctx: Context, seeds: list[int]) -> list[list[tuple[str, int]]]:
    """Per dependency level, the (method, seed) jobs to run: those not recorded, and recorded ones
    whose adapter is missing while an unrecorded method of the seed reads it (so no two workers
    retrain one teacher)."""
    todo = {(k, s) for k in ctx.methods for s in seeds if ctx.store.record(ctx, k, s) is None}
    for k, m in ctx.methods.items():
        for s in seeds:
            readers = [r for r, rm in ctx.methods.items() if k in rm.needs and (r, s) in todo]
            if readers and m.trainer not in ("merge", "base") and not ctx.adapter_saved(m, s):
                todo.add((k, s))
    order = list(ctx.methods)
    levels = {}
    for k, s in todo:
        levels.setdefault(batch_of(ctx.methods, k), []).append((k, s))
    return [sorted(levels[lv], key=lambda j: (-weight(ctx.methods[j[0]]), order.index(j[0]), j[1]))
            for lv in sorted(levels)]


def run_arm(args, arm: Arm) -> None:
    """An arm without grids (1, 1b, 2): its gate at seed 0 (and its retries), then every (method,
    seed) by dependency level in claiming workers (the arms with grids run in slices: `run_sliced`)."""
    store = Store(args.out / "regimes.json")
    started = time.time()
    tried, fallback = run_gate(args, arm, store)
    ctx = Context(arm, arm_methods(arm, store.read(), tried, fallback), args.quick, store, not args.quiet)
    with store.edit() as data:   # recorded first: a run stopped early still names its command
        data["invocations"].setdefault(str(arm.number), []).append(
            {"command": command("bench.regimes", args.argv), "started": started, "wall_seconds": None,
             "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": machine_line(machine()),
             "seeds": args.seeds})
    for i, jobs in enumerate(jobs_to_run(ctx, args.seeds)):
        print(f"arm {arm.number}: {len(jobs)} jobs: {jobs}", flush=True)
        if args.workers > 1 and len(jobs) > 1:
            claims = runs.RUNS_DIR / ctx.experiment(0).rsplit("/", 1)[0] / f"claims-{started:.0f}-{i}.json"
            study.in_claiming_workers("studies.regimes", jobs, args.workers, claims,
                                      ["--arm", str(arm.number), "--tried", str(tried), "--out", str(args.out), "--quiet"]
                                      + (["--fallback"] if fallback else []) + (["--quick"] if args.quick else []))
        else:
            for k, s in jobs:
                run_job(ctx, k, s)
    with store.edit() as data:
        data["invocations"][str(arm.number)][-1]["wall_seconds"] = time.time() - started


def estimate(args, arm: Arm) -> float:
    """Seconds the arm would take: each method's first 3 steps timed (in memory), scaled to its
    steps; collect's samples timed on 16 prompts and scaled; one evaluation timed; / workers."""
    methods = methods_for(arm, 0)
    if arm.grids:   # timed at each method's middle setting (the rate does not change a step's cost)
        methods = {k: with_setting(m, arm.grids[k][len(arm.grids[k]) // 2]) if k in arm.grids else m
                   for k, m in methods.items()}
    ctx = Context(arm, methods, args.quick, Store(args.out / "regimes.json"))
    bank = mm.AdapterBank(*mm.load_base("tiny"))
    total, lines, per_method = 0.0, [], {}
    for k, m in methods.items():
        s = ctx.settings(m)
        if m.trainer in ("base", "merge"):
            continue
        steps = s.get("steps", 0)
        probe = dataclasses.replace(m, adapter=f"probe_{k}", settings={
            **s, "steps": 3, **({"prompts_per_domain": min(s["prompts_per_domain"], 16)} if m.trainer == "offline" else {}),
            **({"track_steps": ()} if m.trainer == "mopd" else {}),
            **({"keep": "all"} if "keep" in s else {})})   # an untrained teacher may get nothing right
        pctx = dataclasses.replace(ctx, methods={**ctx.methods, k: probe})
        pctx.experiment = lambda seed: None
        for n in m.needs:   # what it reads: an adapter at the base (the cost does not depend on the weights)
            bank.create(methods[n].name, seed=1)
        t = time.perf_counter()
        build_recipe(pctx, bank, probe, 0, {n: {"run": None} for n in m.needs})
        sec = time.perf_counter() - t
        per = sec / 3 * steps
        if m.data == "collect":
            per += sec * s["prompts_per_domain"] / 16 * len(m.domains or arm.domains)   # the sampling, scaled
        lines.append(f"  {k}: {sec / 3:.2f} s a step x {steps} -> {per / 60:.1f} min a seed")
        total += per
        per_method[k] = per
    t = time.perf_counter()
    evaluate_rows(bank, BASE, arm.domains, (QUICK_EVAL if args.quick else EVAL)["test"], "test")
    ev = (time.perf_counter() - t) * 1.5 * len(methods)
    if arm.grids:   # the val choice at seed 0 (and the tie-break's seed 1), then seeds 1.. at the chosen settings
        one_eval = ev / len(methods)
        grid = sum(len(arm.grids[k]) * (per_method.get(k, 0.0) + one_eval / 1.5) for k in arm.grids)
        worst = sum((2 + 2 + 2 * 4) * (per_method.get(k, 0.0) + one_eval / 1.5) for k in arm.grids)
        seeds = (total + ev) * len([x for x in args.seeds if x != 0])
        # the choice runs in this one process (study.choose with one worker); the seeds in --workers processes
        lo, hi = grid + seeds / max(1, args.workers), grid + worst + seeds / max(1, args.workers)
        print(f"arm {arm.number} estimate ({len(args.seeds)} seeds, {args.workers} workers):\n" + "\n".join(lines)
              + f"\n  the val grid at seed 0: {grid / 3600:.2f} CPU-h; bracketing and tie-breaks at most {worst / 3600:.2f} "
              f"CPU-h more; seeds {[x for x in args.seeds if x != 0]} at the chosen settings: {seeds / 3600:.2f} CPU-h"
              f"\n  total between {lo / 3600:.1f} and {hi / 3600:.1f} h of wall time", flush=True)
        timed = ctx.store.read()["measurements"].get("timed_seed")
        if timed and timed["method"] in per_method and timed.get("budget_steps") == methods[timed["method"]].settings.get("steps"):
            scale = timed["train_seconds"] / timed["steps"] * timed["budget_steps"] / per_method[timed["method"]]
            print(f"  scaled by the timed seed ({timed['method']}: {timed['train_seconds'] / timed['steps']:.2f} s a step "
                  f"over {timed['steps']} steps, {timed['date']}; x{scale:.2f} this probe's): between "
                  f"{lo * scale / 3600:.1f} and {hi * scale / 3600:.1f} h", flush=True)
        return hi
    total = (total + ev) * len(args.seeds) / max(1, args.workers)
    print(f"arm {arm.number} estimate ({len(args.seeds)} seeds, {args.workers} workers, evaluations "
          f"{ev / 60:.1f} min a seed):\n" + "\n".join(lines) + f"\n  total about {total / 60:.0f} min", flush=True)
    return total


# ---------------------------------------------------------------------------------------------
# the report: tables, decisions, figures (a function of the JSON)
# ---------------------------------------------------------------------------------------------


def held(arm: Arm) -> dict[str, dict[str, tuple]]:
    out = {}
    for d, dom in get_domains(arm.domains).items():
        out[d] = {"held-in": tuple(L for L in dom.eval_lengths if L in dom.train_lengths),
                  "held-out": dom.held_out, "all": dom.eval_lengths}
    return out


def acc(rec: dict, domain: str, lengths, key: str = "acc", split: str = "test") -> float:
    vals = [r[key] for r in rec[split] if r["domain"] == domain and r["length"] in lengths and key in r]
    return fmean(vals) if vals else float("nan")


REGISTERED = (0, 1, 2)   # the seeds every decision of the page is registered on; more seeds are a check beside it


class ArmReport:
    """The arm's records by method and seed, and every statistic the page prints."""

    def __init__(self, data: dict, arm: Arm, seeds: tuple | None = REGISTERED):
        """`seeds`: the records read (the registered 3 by default; None: every seed recorded)."""
        self.arm, self.data = arm, data
        self.gate = data["gates"].get(str(arm.number))
        tried = 0 if self.gate is None else len(self.gate["tries"]) - 1
        self.methods = arm_methods(arm, data, tried, bool(self.gate and self.gate.get("fallback")))
        ctx = Context(arm, self.methods, data.get("quick", False), None)
        self.runs, self.failed = {}, {}
        for rec in data["runs"].values():
            if seeds is not None and rec["seed"] not in seeds:
                continue
            if rec["arm"] == arm.number and rec["method"] in self.methods and rec["signature"] == ctx.signature(rec["method"]):
                into = self.failed if "failed" in rec else self.runs
                into.setdefault(rec["method"], {})[rec["seed"]] = rec
        self.held = held(arm)
        self.seeds = sorted({s for per in self.runs.values() for s in per})

    def per_seed(self, method: str, domain: str, lengths, key: str = "acc") -> dict:
        return {s: acc(r, domain, lengths, key) for s, r in self.runs.get(method, {}).items()}

    def lora_n(self, method: str) -> int:
        """The trained adapter's parameter count of `method` (a merge or the base: any run's, for FLOPs)."""
        first = next(iter(self.runs[method].values()))
        return first["n"] or next((r["n"] for p in self.runs.values() for r in p.values() if r["n"]), 0)

    def lift(self, method: str, domain: str, lengths) -> dict:
        base = self.per_seed("base", domain, lengths)
        b = next(iter(base.values()), float("nan"))   # greedy: the base is the same at every seed
        return {s: v - base.get(s, b) for s, v in self.per_seed(method, domain, lengths).items()}

    def normalised(self, method: str, domain: str, lengths) -> dict | None:
        lift, teacher = self.lift(method, domain, lengths), self.lift(self.arm.teacher_of[domain], domain, lengths)
        if not teacher or any(teacher.get(s, 0) <= 0.10 for s in lift):
            return None
        return {s: v / teacher[s] for s, v in lift.items() if s in teacher}

    def pipeline(self, method: str, seed: int) -> dict:
        rec = self.runs.get(method, {}).get(seed)
        if rec is None:
            return {}
        return cost.add(rec["cost"], *(self.pipeline(n, seed) for n in rec["needs"]))


def ms(values) -> str:
    """'mean ± sample std' over seeds, 3 digits (study.cell), '-' with no value."""
    vals = list(values.values()) if isinstance(values, dict) else list(values)
    return "-" if math.isnan(stats.mean_sd(vals)[0]) else study.cell(vals, digits=3)


decide = study.decide   # the registered rule's verb (the runner's), as the tests and bench.findings call it


def holm_of(tests: dict) -> dict:
    """{name: Holm-adjusted p} of a family {name: (stats.paired, the rule's threshold)}: the
    runner's `family`, each p-value the paired t-test against the threshold the rule reads."""
    fam = study.family({k: t[0] for k, t in tests.items()}, nulls={k: t[1] for k, t in tests.items()})
    return {k: v["p_holm"] for k, v in fam.items()}


def decide_holm(p: dict, above: float | None = None, below: float | None = None, p_adj: float | None = None,
                alpha: float | None = None) -> str:
    """`decide` with the Holm-adjusted p put inside the verdict's own parenthesis: "supported (the interval
    at Holm's level (98.33%): a to b; p (Holm) 0.004)", "not resolved: the interval at Holm's level ...
    (uncorrected 95% interval: ...; p (Holm) 0.988)"."""
    v = decide(p, above=above, below=below, p_adj=p_adj, alpha=alpha)
    if p_adj is None or math.isnan(p_adj) or "(p (Holm) " in v:
        return v
    tag = f"p (Holm) {p_adj:.3f}"
    return v[:-1] + f"; {tag})" if v.endswith(")") else f"{v} ({tag})"


def holm_levels_of(tests: dict) -> dict:
    """{name: the level at which Holm's step-down tests it} of the same family as `holm_of` (the
    interval at that level excludes the rule's threshold exactly when the adjusted p is below 0.05)."""
    fam = study.family({k: t[0] for k, t in tests.items()}, nulls={k: t[1] for k, t in tests.items()})
    return {k: v["alpha_holm"] for k, v in fam.items()}


FAMILY_NOTE = ("Multiplicity (amendment, 2026-12-03): the arm's family is its primary comparisons, the rows named "
               "H<k> without brackets ({names}); each decision reads Holm's correction over them (the paired t-test "
               "against the rule's threshold), shown as p (Holm); a bracketed row is reported or descriptive, outside "
               "the family. No equivalence margin was registered: nothing is called equal.")


interval = study.interval


def accuracy_table(rep: ArmReport) -> list[str]:
    lines = []
    n = next(r["n"] for per in rep.runs.values() for rec in per.values() for r in rec["test"])
    for d, parts in rep.held.items():
        L = lambda p: ", ".join(map(str, parts[p]))  # noqa: E731
        lines += [f"**{d}** (test, {n} prompts a length; held-in depths/lengths {L('held-in')}, held-out {L('held-out')}): "
                  "accuracy, absolute lift over the base, normalised score (lift / the teacher's lift, where that "
                  "is above 0.10 at every seed), mean ± sample std over the seeds", "",
                  "| method | seeds | acc held-in | acc held-out | acc all | lift held-in | lift held-out | lift all | "
                  "normalised all |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for k, m in rep.methods.items():
            if k not in rep.runs:
                why = "failed at its budget" if k in rep.failed else "not run"
                lines.append(f"| {m.label} | 0 ({why}) | | | | | | | |")
                continue
            cells = [ms(rep.per_seed(k, d, parts[p])) for p in ("held-in", "held-out", "all")]
            cells += [ms(rep.lift(k, d, parts[p])) if k != "base" else "" for p in ("held-in", "held-out", "all")]
            norm = rep.normalised(k, d, parts["all"]) if k != "base" else None
            lines.append(f"| {m.label} | {len(rep.runs[k])} | " + " | ".join(cells) + f" | {ms(norm) if norm else ''} |")
        lines.append("")
    return lines


def depth_table(rep: ArmReport) -> list[str]:
    arm = rep.arm
    dom = get_domains(arm.domains)
    keys = ["acc"] + (["trace", "steps", "hops", "words"] if "chain" in dom else []) + \
        (["map"] if "conflict" in dom else []) + (["copy"] if "memory" in dom else [])
    cols = [(d, L) for d, x in dom.items() for L in x.eval_lengths]
    lines = ["By length (test, mean over the seeds run): acc is the domain's metric; for chain trace (the prefix trace: the "
             "whole trace right as a prefix, which a right trace that keeps going passes), steps (`trace_steps`), hops (`chain_steps`), words (the answer's length in words; a depth-L gold trace has L + 1); conflict map (says the memorised value); memory copy "
             "(says a context value).", "",
             "| method | measure | " + " | ".join(f"{d} {L}" for d, L in cols) + " |",
             "| --- | --- |" + " --- |" * len(cols)]
    for k, m in rep.methods.items():
        if k not in rep.runs:
            continue
        for key in keys:
            vals = []
            for d, L in cols:
                v = [acc(r, d, (L,), key) for r in rep.runs[k].values()]
                v = [x for x in v if not math.isnan(x)]
                vals.append(f"{fmean(v):.2f}" if v else "")
            if any(vals):
                lines.append(f"| {m.label} | {key} | " + " | ".join(vals) + " |")
    return lines + [""]


def cost_table(rep: ArmReport) -> list[str]:
    lines = ["Cost per seed (mean over the seeds run; `mopd_mini.cost`: the method's own stage, and its pipeline with "
             "the teachers it reads; FLOPs by cost.FORMULA), and wall time of the job (training, reloading what it "
             "reads, evaluating).", "",
             "| method | generated tokens | teacher prefill tokens | trained tokens | stage FLOPs | pipeline FLOPs | "
             "train s | job wall s |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for k, m in rep.methods.items():
        per = rep.runs.get(k)
        if not per or m.trainer == "base":
            continue
        first = next(iter(per.values()))
        N = first["N"]
        n = rep.lora_n(k)

        def mean(f):
            return fmean(f(s, r) for s, r in per.items())
        c = lambda kind: mean(lambda s, r: r["cost"].get(f"cost/{kind}", 0))  # noqa: E731
        lines.append(f"| {m.label} | {c('generated_tokens'):,.0f} | {c('teacher_prefill_tokens'):,.0f} | "
                     f"{c('trained_tokens'):,.0f} | {mean(lambda s, r: cost.flops(r['cost'], N, n)):.2e} | "
                     f"{mean(lambda s, r: cost.flops(rep.pipeline(k, s), N, n)):.2e} | "
                     f"{mean(lambda s, r: r['train_seconds']):.0f} | {mean(lambda s, r: r['wall_seconds']):.0f} |")
    return lines + [""]


def comparison(rep: ArmReport, a: str, b: str | float, domain: str, lengths) -> dict:
    va = rep.per_seed(a, domain, lengths)
    vb = {s: b for s in va} if isinstance(b, float) else rep.per_seed(b, domain, lengths)
    return stats.paired(va, vb)


def primary_arm2(rep: ArmReport) -> dict:
    """Arm 2's family: {hypothesis: (its paired comparison, the threshold its rule reads)}."""
    k, o = ({L: rep.per_seed(x, "chain", (L,)) for L in (2, 3, 4)} for x in ("mopd_kl", "sft_traces"))
    growth = {s: (k[4][s] - o[4][s]) - ((k[2][s] - o[2][s]) + (k[3][s] - o[3][s])) / 2 for s in k[2] if s in o[2]}
    return {"H2.1": (comparison(rep, "grpo", 0.30, "chain", (2, 3)), 0.0),
            "H2.2": (comparison(rep, "mopd_kl", "sft_teacher", "chain", (2, 3)), -0.05),
            "H2.3": (stats.paired(growth, {s: 0.0 for s in growth}), 0.0)}


def decisions_arm2(rep: ArmReport) -> tuple[list[str], dict]:
    hin, h4, h5 = (2, 3), (4,), (5,)
    rows, out = study.DecisionRows(), {}
    row = rows.add

    gate_ok = bool(rep.gate and rep.gate["passed"])
    adj, lv = holm_of(primary_arm2(rep)), holm_levels_of(primary_arm2(rep))
    out["family"] = {h: a for h, a in adj.items()}
    p = comparison(rep, "grpo", 0.30, "chain", hin)
    out["H2.1"] = row("H2.1 GRPO at depths 2, 3 minus 0.30", p, "supported iff below 0; refuted iff above 0",
                      decide_holm(p, below=0.0, p_adj=adj["H2.1"], alpha=lv["H2.1"]))
    for loss in ("kl", "pg", "topk"):
        for lengths, where in ((hin, "depths 2, 3"), (h4, "depth 4")):
            p = comparison(rep, f"mopd_{loss}", "sft_teacher", "chain", lengths)
            primary = loss == "kl" and lengths == hin
            name = f"{'H2.2' if primary else '(H2.2, reported)'} MOPD {loss} minus the SFT teacher, {where}"
            v = (decide_holm(p, above=-0.05, p_adj=adj["H2.2"] if primary else None,
                             alpha=lv["H2.2"] if primary else None)
                 if gate_ok else "not tested (gate G2 failed)")
            if not primary and lengths == h4 and gate_ok:   # the teacher is at 0.00 there: no reach to test
                v = f"descriptive (by the rule: {v}; the teacher scores about 0.00 at depth 4, so this compares near-zero accuracies)"
            v = row(name, p, "supported iff above -0.05; refuted iff below -0.05", v)
            if primary:
                out["H2.2"] = v
    for other, label in (("sft_traces", "SFT on the teacher's traces"), ("rft", "RFT"), ("sft_gold", "SFT on gold")):
        for deep, where in ((h4, "depth 4"), (h5, "depth 5 (shortcut)")):
            k, o = ({L: rep.per_seed(x, "chain", (L,)) for L in (2, 3, deep[0])} for x in ("mopd_kl", other))
            lead = {s: {L: k[L][s] - o[L][s] for L in k} for s in k[2] if s in o[2]}
            growth = {s: v[deep[0]] - (v[2] + v[3]) / 2 for s, v in lead.items()}
            p = stats.paired(growth, {s: 0.0 for s in growth})
            primary = other == "sft_traces" and deep == h4
            name = f"{'H2.3' if primary else '(H2.3, descriptive)'} growth of MOPD kl's lead over {label}, {where}"
            v = (decide_holm(p, above=0.0, p_adj=adj["H2.3"] if primary else None,
                             alpha=lv["H2.3"] if primary else None)
                 if gate_ok else "not tested (gate G2 failed)")
            if not primary and gate_ok:
                v = f"descriptive ({decide(p, above=0.0)} by H2.3's rule)"
            v = row(name, p, "supported iff above 0; refuted iff below 0" if primary else "H2.3's rule", v)
            if primary:
                out["H2.3"] = v
    return rows, out


def decisions(rep: ArmReport) -> tuple[list[str], dict]:
    """The arm's registered comparisons: (the table's rows, {hypothesis: decision})."""
    if rep.arm.grids:
        return decisions_cures(rep)
    return (decisions_arm2 if rep.arm.number == 2 else decisions_arm1)(rep)


def decisions_arm1(rep: ArmReport) -> tuple[list[str], dict]:
    rows, out = study.DecisionRows(), {}
    row = rows.add
    partner = "sft_both" if rep.gate and rep.gate.get("fallback") else "mixrl"
    allL = {d: rep.held[d]["all"] for d in rep.arm.domains}

    shown = []
    fam = {f"H1.1 {d}": (comparison(rep, partner, rep.arm.teacher_of[d], d, rep.held[d]["all"]), 0.0)
           for d in rep.arm.domains}
    pre = [d for d in rep.arm.domains if fam[f"H1.1 {d}"][0]["n"] >= 2 and fam[f"H1.1 {d}"][0]["diff"] <= -0.10
           and fam[f"H1.1 {d}"][0]["hi"] < 0]
    for d in pre:   # the conditional comparisons join the family where H1.1's interval is shown uncorrected
        fam[f"H1.2 {d}"] = (comparison(rep, "mopd_kl", "mixrl", d, allL[d]), 0.0)
        fam[f"H1.3 {d}"] = (comparison(rep, "rft", "mixrl", d, allL[d]), 0.0)
    adj, lv = holm_of(fam), holm_levels_of(fam)
    out["family"] = adj

    def holm_txt(key: str, p: dict) -> str:   # p (Holm) with the interval at Holm's level (stats.holm_levels)
        if key not in adj or math.isnan(adj[key]):
            return ""
        return f" (p (Holm) {adj[key]:.3f}; {stats.holm_interval_text(p, lv[key])})"

    def other_side(v: str, p: dict, q: dict, d: str, o: str) -> str:
        """H1.2's rule is not met on either side when p is above 0 and q, on the other domain, below 0: say so."""
        if p["n"] >= 2 and p["lo"] > 0 and q["n"] >= 2 and q["hi"] < 0:
            return (f"not resolved: above 0 on {d}, but below 0 on {o} ({interval(q)}, uncorrected), which the "
                    "rule's \"not below 0 on the other\" excludes; nor is it below 0, so not refuted")
        return v

    for d in rep.arm.domains:
        for part in ("all", "held-in", "held-out"):
            p = comparison(rep, partner, rep.arm.teacher_of[d], d, rep.held[d][part])
            if part == "all":
                a = adj[f"H1.1 {d}"]
                raw = p["n"] >= 2 and p["diff"] <= -0.10 and p["hi"] < 0
                ok = raw and a < 0.05
                v = ("shown on this domain" if ok else "not shown on this domain"
                     + (" after Holm (uncorrected: shown)" if raw and not ok else "")) + holm_txt(f"H1.1 {d}", p)
                if ok:
                    shown.append(d)
                row(f"H1.1 D_{d} = {partner} minus teacher_{d} ({d}, all lengths)", p,
                    "shown iff mean <= -0.10 and the interval below 0", v)
            else:
                row(f"(H1.1, reported) D_{d}, {part}", p, "descriptive", "descriptive")
        for other in (["mixrl"] if partner != "mixrl" else []) + ["mixrl_300"]:
            p = comparison(rep, other, rep.arm.teacher_of[d], d, rep.held[d]["all"])
            row(f"(H1.1, beside it) {rep.methods[other].label} ({rep.methods[other].settings['steps']} steps) minus "
                f"teacher_{d} ({d}, all lengths)", p, "descriptive", "descriptive")
    out["H1.1"] = f"shown (on {', '.join(shown)})" if shown else "not shown"
    for d in shown:
        o = [x for x in rep.arm.domains if x != d][0]
        for loss in ("kl", "pg", "topk"):
            p, q = comparison(rep, f"mopd_{loss}", "mixrl", d, allL[d]), comparison(rep, f"mopd_{loss}", "mixrl", o, allL[o])
            v = "not resolved (fewer than 2 seeds)" if p["n"] < 2 else "supported" if p["lo"] > 0 and not q["hi"] < 0 \
                else "refuted" if p["hi"] < 0 else "not resolved" + (f" ({p['n']} seeds finished)" if p["n"] < 3 else "")
            v = other_side(v, p, q, d, o)
            if loss == "kl" and v in ("supported", "refuted") and not adj.get(f"H1.2 {d}", 0) < 0.05:
                v = f"not resolved after Holm (uncorrected: {v})"
            if loss == "kl":
                v += holm_txt(f"H1.2 {d}", p)
            row(f"{'H1.2' if loss == 'kl' else '(H1.2 rule)'} MOPD {loss} minus Mix-RL on {d} (on {o}: {interval(q)})", p,
                "supported iff above 0 and not below 0 on the other; refuted iff below 0", v)
            if loss == "kl":
                out["H1.2"] = v
        p, q = comparison(rep, "rft", "mixrl", d, allL[d]), comparison(rep, "rft", "mixrl", o, allL[o])
        v = "not tested (RFT did not finish)" if p["n"] == 0 else "not resolved (fewer than 2 seeds)" if p["n"] < 2 else \
            "supported" if p["lo"] > 0 and not q["hi"] < 0 else "refuted" if p["hi"] < 0 else "not resolved"
        v = other_side(v, p, q, d, o)
        if v in ("supported", "refuted") and not adj.get(f"H1.3 {d}", 0) < 0.05:
            v = f"not resolved after Holm (uncorrected: {v})"
        v += holm_txt(f"H1.3 {d}", p)
        out["H1.3"] = row(f"H1.3 RFT minus Mix-RL on {d} (on {o}: {interval(q)})", p, "H1.2's rule", v)
        p = comparison(rep, "mopd_kl", "rft", d, allL[d])
        row(f"(H1.3) MOPD kl minus RFT on {d}", p, "registered: \"interval includes 0: the simple method did as "
            "well\"; amended 2026-12-03: an interval that includes 0 is not resolved (no equivalence margin was "
            "registered)", stats.reading(p) if p["n"] >= 2 else "not resolved (fewer than 2 seeds)")
    if not shown:
        out["H1.2"] = out["H1.3"] = "not tested (H1.1 not shown)"
    for mg in ("merge_linear", "merge_cat"):
        for d in rep.arm.domains:
            for ref in (rep.arm.teacher_of[d], "mixrl"):
                row(f"{mg} minus {ref} on {d}", comparison(rep, mg, ref, d, allL[d]), "descriptive", "descriptive")
    return rows, out


def markdown(data: dict, arm: Arm, figures: list[str]) -> list[str]:
    rep = ArmReport(data, arm, seeds=arm.seeds)
    title = f"### Arm {arm.number}: {arm.title}"
    if not rep.runs:
        return [title, "", "**Not run**: no job of this arm finished (docs/regimes.json holds none).", ""]
    if arm.grids:
        return cures_markdown(data, arm, figures)
    lines = head_lines(data, arm, rep)
    g = rep.gate
    if g:
        tries = "; ".join(f"{t['adapter']} ({t['steps']} steps): {t['val']:.3f}" for t in g["tries"])
        lines += [f"**Gate {g['name']}** (seed 0, val, {g['domain']} at {', '.join(map(str, g['lengths']))}, "
                  f">= {g['threshold']:.2f}): {tries}: **{'passed' if g['passed'] else 'failed'}**"
                  + (" ; every try failed, so the registered fall-back ran (SFT-on-gold adapters; the interference "
                     "test is SFT on gold, each domain alone against both at once)." if g.get("fallback") else "."), ""]
        lines += gate_check_by_seed(data, arm)
    merges = {k.split("|")[1]: v for k, v in data["merges"].items() if k.startswith(f"{arm.number}|")}
    if merges:
        lines += ["Merge weights chosen on val at seed 0 (mean val accuracy over the domains; conflict has no headroom, "
                  "so the normalised score cannot choose): " + "; ".join(
                      f"{k} w = {v['w']:g} (val " + ", ".join(f"{w}: {a:.3f}" for w, a in v["val"].items()) + ")"
                      for k, v in merges.items()), ""]
    lines += accuracy_table(rep) + depth_table(rep)
    rows, out = decisions(rep)
    lines += ["Pre-registered comparisons: paired per-seed differences, mean ± 95% t half-width [interval] "
              "(`mopd_mini.stats.paired`, t = 4.30 with 3 seeds), on test accuracy (the mean over the lengths named).",
              "", FAMILY_NOTE.format(names=", ".join(k for k in out["family"])), "",
              *study.DecisionRows.HEAD, *rows, "",
              "Decisions against the hypotheses as registered (from the table above, after Holm's correction): "
              + "; ".join(f"**{h}** {v}" for h, v in out.items() if h != "family") + ".", ""]
    lines += five_seed_check(data, arm, out)
    if arm.number == 2:
        lines += per_seed_table(data, arm)
    lines += READING.get(arm.number, [])
    lines += cost_table(rep)
    if arm.number == 2 and "mopd_kl" in rep.runs:
        lines += kl_table(rep)
    lines += [f"![arm {arm.number}](figures/{f})" for f in figures] + [""]
    return lines


def head_lines(data: dict, arm: Arm, rep: ArmReport) -> list[str]:
    """An arm's section up to its tables: title, commands, machine, what finished, what failed."""
    inv = data["invocations"].get(str(arm.number), [])
    lines = [f"### Arm {arm.number}: {arm.title}", ""]
    for i in inv:
        if i["wall_seconds"] is not None:
            took = f"{i['wall_seconds'] / 60:.1f} min"
        else:   # stopped before its end: the time to the last job it finished
            ends = [r["finished_at"] for per in rep.runs.values() for r in per.values()
                    if r.get("finished_at", 0) >= i["started"]]
            took = f"stopped before its end; its last job finished after {(max(ends) - i['started']) / 60:.1f} min" \
                if ends else "stopped before its end, no job finished"
        lines.append(f"*Command:* `{i['command']}` ({i['date']}, {took}, seeds {', '.join(map(str, i['seeds']))})  ")
    if inv:
        lines.append(f"*Machine:* {inv[-1]['machine']}")
    for s in data.get("slices", {}).get(str(arm.number), []):   # the time-boxed slices (run_sliced)
        lines.append(f"*Slice:* `{s['command']}` ({s['date']}, {s['wall_seconds'] / 60:.1f} min, {s['finished']} jobs "
                     f"finished, {s['stopped']} stopped at its deadline; {s['machine'].split(';')[0]})  ")
    if arm.grids:                   # what the jobs cost, to set against the registered estimate (Budget above)
        recs = arm_records(data, arm)
        spent = {sec: sum(r.get("wall_seconds") or 0.0 for k, r in recs.items() if k.startswith(sec + "|")) / 3600
                 for sec in ("choices", "runs")}
        if recs:
            lines.append(f"*Spent:* {sum(spent.values()):.2f} CPU-h in {len(recs)} recorded jobs (each job's wall "
                         f"time on one core: the val choice {spent['choices']:.2f}, the seeds {spent['runs']:.2f}), "
                         "against the estimate in the budget table above  ")
    expected = [(k, s) for k in rep.methods for s in arm.seeds]
    missing = [f"{k} seed {s}" for k, s in expected if s not in rep.runs.get(k, {}) and s not in rep.failed.get(k, {})]
    lines += ["", f"Finished: {sum(len(v) for v in rep.runs.values())} of {len(expected)} (method, seed) jobs of "
              f"the registered {len(arm.seeds)} seeds." + (f" **Not finished** (absent from every table below): "
                                                          f"{', '.join(missing)}." if missing else ""), ""]
    for k, per in rep.failed.items():
        for seed, r in sorted(per.items()):
            lines += [f"**{rep.methods[k].label}, seed {seed}, failed at its registered budget** (the trainer "
                      f"refused; no result): {r['failed']}", ""]
    return lines


# ---------------------------------------------------------------------------------------------
# arms 2b and memory-cures, as registered in their amendment (docs/regimes.md, 2026-12-03)
# ---------------------------------------------------------------------------------------------

CURE_KEYS = tuple(k for k, _, _ in CURES)
MEASURES = {"chain": ("strict", "trace", "acc"), "memory": ("acc", "copy")}
"""each domain's per-seed measures: chain's strict trace (primary), prefix trace and final answer"""
MEASURE_NAMES = {"strict": "strict trace", "trace": "prefix trace", "acc": "accuracy", "copy": "copy", "words": "words"}


def metric(arm: Arm) -> str:
    """The metric an arm's decisions read: the strict trace on chain (CHOICE_KEY), else accuracy."""
    return CHOICE_KEY.get(arm.domains[0], "acc")


def gate_passing(data: dict, arm: Arm) -> tuple[dict, list]:
    """({seed: {length: value}} of the gate read on every seed, the seeds that pass it)."""
    values = gate_every_seed_values(data, arm)
    return values, [s for s, ok in study.gate_by_seed(values, arm.gate_every_seed.threshold).items() if ok]


def tested(data: dict, arm: Arm) -> ArmReport:
    """An arm with a gate on every seed: its records at the registered seeds that pass the gate."""
    _, passing = gate_passing(data, arm)
    return ArmReport(data, arm, seeds=tuple(s for s in arm.seeds if s in passing))


def cure_rows(rep: ArmReport, d: str) -> dict:
    """Arm 2b / memory-cures' family: {hypothesis: (paired comparison, threshold 0)}; H2b.3 on chain."""
    key, L = metric(rep.arm), rep.arm.compared
    fam = {f"H2b.1 {c}": (comparison_on(rep, c, "mopd_kl", d, L, key), 0.0) for c in CURE_KEYS}
    if d == "chain":
        g = growth(rep, "mopd_kl", "sft_traces", d)
        fam["H2b.3"] = (stats.paired(g, {s: 0.0 for s in g}), 0.0)
    return fam


def comparison_on(rep: ArmReport, a: str, b: str, domain: str, lengths, key: str) -> dict:
    """a - b paired by seed on `key` (mean over `lengths`)."""
    return stats.paired(rep.per_seed(a, domain, lengths, key), rep.per_seed(b, domain, lengths, key))


def growth(rep: ArmReport, a: str, b: str, d: str, deep: tuple = (4, 5)) -> dict:
    """{seed: the mean of lead(L) over `deep` minus the mean of lead(2) and lead(3)}, lead = a - b
    at depth L on the arm's metric (H2b.3's measure; deep (6,): at the held-out depth)."""
    key, out = metric(rep.arm), {}
    for seed in rep.seeds:
        ra, rb = rep.runs.get(a, {}).get(seed), rep.runs.get(b, {}).get(seed)
        if ra is not None and rb is not None:
            lead = {L: acc(ra, d, (L,), key) - acc(rb, d, (L,), key) for L in (2, 3, *deep)}
            out[seed] = fmean(lead[L] for L in deep) - (lead[2] + lead[3]) / 2
    return out


def decisions_cures(rep: ArmReport) -> tuple[list[str], dict]:
    """The amendment's rules over the seeds that pass the gate (rep: `tested`): H2b.1's four cures
    minus exact KL and (chain) H2b.3's growth, decided by Holm over that family; H2b.2 (chain) by
    its own test. Fewer than 3 passing seeds: every hypothesis is descriptive, not tested."""
    arm, rows, out = rep.arm, study.DecisionRows(), {}
    row = rows.add
    d = arm.domains[0]
    key, L = metric(arm), arm.compared
    fam = cure_rows(rep, d)
    adj, lv = holm_of(fam), holm_levels_of(fam)
    out["family"] = adj
    few = len(rep.seeds) < 3
    where = f"{MEASURE_NAMES[key]}, mean over {', '.join(map(str, L))}"

    def verdict(h):
        if few:
            return f"not tested (fewer than 3 seeds pass gate {arm.gate_every_seed.name})"
        return decide_holm(fam[h][0], above=0.0, p_adj=adj[h], alpha=lv[h])

    rule = "supported iff above 0; refuted iff below 0 (Holm over the family)"
    for c in CURE_KEYS:
        h = f"H2b.1 {c}"
        out[h] = row(f"{h}: {rep.methods[c].label} minus MOPD exact KL ({where})", fam[h][0], rule, verdict(h))
        for Lx in get_domains(arm.domains)[d].eval_lengths:
            row(f"(H2b.1, descriptive) {c} minus mopd_kl, {MEASURE_NAMES[key]} at {Lx}",
                comparison_on(rep, c, "mopd_kl", d, (Lx,), key), "descriptive", "descriptive")
        if d == "chain":
            row(f"(H2b.1, descriptive) {c} minus mopd_kl, prefix trace ({', '.join(map(str, L))})",
                comparison_on(rep, c, "mopd_kl", d, L, "trace"), "descriptive", "descriptive")
    if d != "chain":
        return rows, out
    out["H2b.3"] = row("H2b.3: growth of MOPD exact KL's lead over SFT on the teacher's traces (mean lead at 4, 5 minus "
                       "at 2, 3; strict trace)", fam["H2b.3"][0], rule, verdict("H2b.3"))
    best = max(CURE_KEYS, key=lambda c: -math.inf if math.isnan(fam[f"H2b.1 {c}"][0]["diff"]) else fam[f"H2b.1 {c}"][0]["diff"])
    for a, b, deep, name in (("mopd_kl", "rft", (4, 5), "over RFT"), ("mopd_kl", "sft_gold", (4, 5), "over SFT on gold"),
                             (best, "sft_traces", (4, 5), f"of the best cure ({best}) over SFT on the teacher's traces"),
                             ("mopd_kl", "sft_traces", (6,), "over SFT on the teacher's traces at depth 6 (held out; "
                                                             "lead at 6 minus at 2, 3)")):
        g = growth(rep, a, b, d, deep)
        row(f"(H2b.3, descriptive) growth of the lead {name}", stats.paired(g, {s: 0.0 for s in g}), "H2b.3's rule",
            "descriptive")
    out["H2b.2"] = stuck_predicts(rep)["decision"]
    return rows, out


MOPD_KEYS = ("mopd_pg", "mopd_topk", "mopd_kl", *CURE_KEYS)


def share_window(rec: dict, d: str, step: int = 100, window: int = 10) -> float | None:
    """The stuck share H2b.2 reads: its mean over the `window` steps ending at `step`; where the run
    drew off-policy steps (lmbda < 1), over its last `window` on-policy steps up to `step`, from the
    per-step series (the amendment of 2026-12-05: an off-policy step scores the teacher's prefixes)."""
    series = rec.get("stuck_series")
    if series and not all(series["on_policy"]):
        vals = [v for st, on, v in zip(series["step"], series["on_policy"], series[d]["share"])
                if st <= step and on and v is not None][-window:]
        return fmean(vals) if vals else None
    return (((rec.get("stuck") or {}).get(d) or {}).get(str(step)) or {}).get("share_window")


def stuck_predicts(rep: ArmReport) -> dict:
    """H2b.2: does the stuck share at step 100 (its mean over steps 91-100) predict a run's failure
    (test strict trace below 0.50 over the compared depths)? tau chosen on seeds 0-2
    (stats.best_threshold), tested on seeds 3-4 (the one-sided Fisher exact test)."""
    d, key = rep.arm.domains[0], metric(rep.arm)
    units = []
    for k in MOPD_KEYS:
        for seed, r in rep.runs.get(k, {}).items():
            share = share_window(r, d)
            if share is not None:
                units.append((seed, share, acc(r, d, rep.arm.compared, key) < 0.50))
    fit = [(x, f) for s, x, f in units if s in (0, 1, 2)]
    held = [(x, f) for s, x, f in units if s in (3, 4)]
    out = {"units": len(units), "fit": len(fit), "test": len(held)}
    if len(rep.seeds) < 3:
        out["decision"] = f"not tested (fewer than 3 seeds pass gate {rep.arm.gate_every_seed.name})"
        return out
    for part, name in ((fit, "seeds 0-2"), (held, "seeds 3-4")):
        fails = sum(f for _, f in part)
        if not part or fails in (0, len(part)):
            out["decision"] = f"not tested ({name} have {'no run with a step-100 share' if not part else 'no failure' if not fails else 'no success'})"
            return out
    tau = stats.best_threshold([x for x, _ in fit], [f for _, f in fit])
    a = sum(x > tau and f for x, f in held)
    b = sum(x > tau and not f for x, f in held)
    c = sum(x <= tau and f for x, f in held)
    dd = sum(x <= tau and not f for x, f in held)
    p = stats.fisher_greater(a, b, c, dd)
    bal = stats.balanced_accuracy([x for x, _ in held], [f for _, f in held], tau)
    out.update(tau=tau, table=[[a, b], [c, dd]], p=p, balanced_accuracy=bal,
               decision=f"{'supported' if p < 0.05 else 'not supported'} (tau {tau:.3f} on seeds 0-2; on seeds 3-4 "
                        f"predicted failure x failure [[{a}, {b}], [{c}, {dd}]], Fisher p {p:.3f}, balanced accuracy {bal:.2f})")
    return out


def setting_text(setting: dict) -> str:
    return ", ".join(f"{k} {v:g}" for k, v in sorted(setting.items())) or "as registered"


def choice_table(data: dict, arm: Arm) -> list[str]:
    """Every gridded method's chosen setting and its grid on val (study.choose's record)."""
    rec = data["choices"].get(str(arm.number))
    if rec is None:
        return []
    lines = [f"Settings chosen on val by the study runner (seed 0; a two-seed mean where the tie-break trained seed 1; "
             f"* an extension past the grid's edge; recorded {rec.get('date', '')}, {rec.get('machine', '')}):", "",
             "| method | chosen | val score of each setting tried |", "| --- | --- | --- |"]
    for k, chosen in rec["chosen"].items():
        tried = "; ".join(f"{setting_text({x: g[x] for x in g if x in ('lr', 'beta')})}: {g['mean']:.3f}"
                          + (f" (two seeds {g['mean2']:.3f})" if "mean2" in g else "") + ("*" if g.get("extended") else "")
                          for g in rec["grid"].get(k, []))
        lines.append(f"| {k} | {setting_text(chosen)} | {tried} |")
    if rec.get("refused"):
        lines += ["", "Refused by the trainer (scored 0 in the choice): " + "; ".join(f"{k}: {v}" for k, v in rec["refused"].items())]
    return lines + [""]


def cures_markdown(data: dict, arm: Arm, figures: list[str]) -> list[str]:
    """Arm 2b's or memory-cures' section: the choice, the gate on every seed, by depth, per seed,
    the stuck shares, the decisions (Holm over the registered family), the costs, the figures."""
    every = ArmReport(data, arm, seeds=arm.seeds)
    g = arm.gate_every_seed
    values, passing = gate_passing(data, arm)
    d = arm.domains[0]
    dom = get_domains(arm.domains)[d]
    lines = head_lines(data, arm, every) + choice_table(data, arm)
    lens = dom.eval_lengths
    cols = [(key, x) for key in MEASURES.get(d, ("acc",)) for x in lens] + ([("words", lens[0])] if d == "chain" else [])
    if not complete(every):          # partial, on purpose: the records so far, no decision, interval or figure
        return lines + ["**Partial** (the arm runs in slices, `python -m studies.regimes --status` says what is left): "
                        "until every registered seed of every method is recorded this section shows the records so "
                        "far and nothing read from them: no mean, no interval, no decision, no figure.", "",
                        *gate_line(g, values, None, every), *per_seed_table_rows(every, d, cols, passing, g)]
    rep = tested(data, arm)
    lines += gate_line(g, values, rep, every)
    lines += [f"By length (test, the mean over the seeds that pass the gate; {d} compared at "
              f"{', '.join(map(str, arm.compared))}, held out {', '.join(map(str, dom.held_out)) or 'none'}):", "",
              "| method | measure | " + " | ".join(f"{d} {x}" for x in lens) + " |", "| --- | --- |" + " --- |" * len(lens)]
    for k, m in rep.methods.items():
        for key in MEASURES.get(d, ("acc",)):
            vals = [rep.per_seed(k, d, (x,), key) for x in lens]
            if k in rep.runs:
                lines.append(f"| {m.label} | {MEASURE_NAMES[key]} | " + " | ".join(
                    ms(v) if v else "" for v in vals) + " |")
    lines += ["", *per_seed_table_rows(every, d, cols, passing, g)]
    lines += ["", f"The stuck detector per MOPD method and seed (p_S(y) > 0.9 and log p_T(y) < -5; at steps "
              f"{', '.join(map(str, STUCK_STEPS))} and the last: the share (its mean over the 10 steps ending there); "
              "off: the off-support mass; '-' where the run has no such step):", "",
              "| method | seed | " + " | ".join(f"step {x}" for x in STUCK_STEPS) + " | last | last step |",
              "| --- | --- |" + " --- |" * (len(STUCK_STEPS) + 2)]
    for k in MOPD_KEYS:
        if k in every.runs:
            lines += study.stuck_rows(every.methods[k].label, {s: r.get("stuck") for s, r in every.runs[k].items()},
                                      STUCK_STEPS, d)
    rows, out = decisions_cures(rep)
    lines += ["", f"Pre-registered comparisons over the seeds that pass gate {g.name} (paired per-seed differences, mean ± "
              f"95% t half-width [interval], `mopd_mini.stats.paired`). Family: {', '.join(out['family'])}, Holm's "
              "step-down (`mopd_mini.stats.holm`) of the paired t-test against 0; a row is decided only when its Holm-"
              "adjusted p is below 0.05. No equivalence margin was registered: nothing is called equal.", "",
              *study.DecisionRows.HEAD, *rows, "",
              "Decisions against the hypotheses as registered: "
              + "; ".join(f"**{h}** {v}" for h, v in out.items() if h != "family") + ".", ""]
    lines += cost_table(rep) if rep.runs else []
    if any(f.endswith("_stuck.png") for f in figures):
        lines += ["The stuck-share figure draws each MOPD record's per-step series (`stuck_series`): one panel per "
                  "method, one line per recorded seed, dashed where the seed fails the gate; the dotted line is the "
                  "warning's share; gaps are off-policy steps of lmbda < 1, which have no share. It is descriptive: "
                  "the registered reading of the share is H2b.2's above.", ""]
    lines += [f"![arm {arm.number}](figures/{f})" for f in figures] + [""]
    return lines



def complete(every: ArmReport) -> bool:
    """Whether every method of the arm has a record (or the trainer's refusal) at every registered seed."""
    return all(s in every.runs.get(k, {}) or s in every.failed.get(k, {}) for k in every.methods for s in every.arm.seeds)


def gate_line(g: study.Gate, values: dict, rep: ArmReport | None, every: ArmReport) -> list[str]:
    """The gate read on every recorded seed, and (`rep`: the tested report) the seeds it leaves."""
    tested_ = ("" if rep is None else f" Seeds tested: {', '.join(map(str, rep.seeds)) or 'none'}"
               + (" (fewer than 3: every hypothesis is descriptive)." if len(rep.seeds) < 3 else "."))
    return [f"**Gate {g.name} on every seed** ({every.methods[g.method].label} on val, "
            f"{MEASURE_NAMES[metric(every.arm)] if g.domain in CHOICE_KEY else 'accuracy'} "
            f"at each of {', '.join(map(str, g.lengths))}, >= {g.threshold:.2f}; a failing seed is excluded from every "
            f"test, all its methods): " + ("; ".join(study.gate_lines(g, values)) or "no seed recorded yet") + "." + tested_, ""]


def per_seed_table_rows(every: ArmReport, d: str, cols: list, passing, g: study.Gate) -> list[str]:
    """The per-seed table (test): every recorded seed of every method, a seed that fails the gate marked."""
    lines = ["Per seed (test, every recorded seed; a seed that fails the gate is marked and excluded from the "
             "tests): " + ", ".join(f"{MEASURE_NAMES[key]} at {x}" for key, x in cols) + ".", "",
             "| method | seed | " + " | ".join(f"{MEASURE_NAMES[key]} {x}" for key, x in cols) + " |",
             "| --- | --- |" + " --- |" * len(cols)]
    for k, m in every.methods.items():
        for seed, r in sorted(every.runs.get(k, {}).items()):
            mark = "" if seed in passing else f" (fails {g.name})"
            lines.append(f"| {m.label} | {seed}{mark} | " + " | ".join(
                f"{v:.3f}" if not math.isnan(v := acc(r, d, (x,), key)) else "" for key, x in cols) + " |")
    return lines + [""]


def five_seed_check(data: dict, arm: Arm, registered: dict) -> list[str]:
    """The comparisons again over every recorded seed, when there are more than the registered 3
    (the matched study's rule: five seeds before a comparison is stated as a finding in a notebook summary or
    the README). The registered decisions above stay those of seeds 0, 1, 2."""
    rep = ArmReport(data, arm, seeds=None)
    extra = [s for s in rep.seeds if s not in REGISTERED]
    if not extra:
        return []
    complete = [k for k in rep.methods if set(rep.runs.get(k, {})) >= set(rep.seeds)]
    rows, out = decisions(rep)
    if arm.number != 2:   # the registered run's H1.2 / H1.3 comparisons, descriptive here if H1.1 is not shown again
        shown = [d for d in arm.domains if f"on {d}" in registered["H1.1"]
                 and f"on {d}" not in out["H1.1"]]
        for d in shown:
            for a, b in (("mopd_kl", "mixrl"), ("mopd_pg", "mixrl"), ("mopd_topk", "mixrl"), ("rft", "mixrl"),
                         ("mopd_kl", "rft"), ("mopd_kl", arm.teacher_of[d])):
                rows.append(f"| (the registered H1.2 / H1.3 comparisons, descriptive) {rep.methods[a].label} minus "
                            f"{rep.methods[b].label} on {d} | {interval(comparison(rep, a, b, d, rep.held[d]['all']))} "
                            "| descriptive | descriptive |")
    t = stats.t975(len(rep.seeds) - 1)
    per_seed = []
    if arm.number != 2:
        per_seed = ["Test accuracy per seed (all lengths), the methods those comparisons read:", "",
                    *study.seed_header(["method", "domain"], rep.seeds)]
        for d in arm.domains:
            for k in (arm.teacher_of[d], "mixrl", "mopd_kl", "mopd_pg", "mopd_topk", "rft"):
                per_seed.append(study.seed_row([rep.methods[k].label, d], rep.per_seed(k, d, rep.held[d]["all"]), rep.seeds))
        per_seed.append("")
    return [f"**The {len(rep.seeds)}-seed check** (seeds {', '.join(map(str, rep.seeds))}; seeds "
            f"{', '.join(map(str, extra))} added after the registered run, by the same command with `--seeds "
            f"{' '.join(map(str, rep.seeds))}`; methods with every seed: {len(complete)} of {len(rep.methods)}): the "
            f"same comparisons and rules, t = {t:.2f}. The registered decisions are those above.", "",
            *study.DecisionRows.HEAD, *rows, "",
            f"Decisions with {len(rep.seeds)} seeds: " + "; ".join(f"**{h}** {v}" for h, v in out.items()
                                                                  if h != "family") + ".", "",
            *per_seed]


def gate_check_by_seed(data: dict, arm: Arm) -> list[str]:
    """The gate's value on every recorded seed (the registration checks seed 0 only): the gate's
    method's val accuracy at the gate's lengths, each seed marked passed or failed."""
    rep = ArmReport(data, arm, seeds=None)
    g = arm.gate
    per = rep.runs.get(g.method, {})
    if len(per) < 2:
        return []
    vals = {s: gate_value(r, g) for s, r in sorted(per.items())}
    failed = [s for s, v in vals.items() if v < g.threshold]
    return [f"The gate's value on every seed (registered on seed 0 only; the same measure, {rep.methods[g.method].label} "
            f"on val {g.domain} at {', '.join(map(str, g.lengths))}): "
            + ", ".join(f"seed {s} {v:.3f} ({'passes' if v >= g.threshold else '**fails**'})" for s, v in vals.items())
            + (f". **Seed(s) {', '.join(map(str, failed))} fail the gate**: their results below come from a "
               f"{rep.methods[g.method].label.split(' (')[0]} the gate would not have passed, and a mean over seeds "
               "that includes them is not a reading of the gated method." if failed else ".") , ""]


def per_seed_table(data: dict, arm: Arm) -> list[str]:
    """Arm 2's per-seed values where a mean over seeds hides one seed: held-in accuracy, depth 2's
    accuracy, trace and words (a right trace that does not stop scores 0), depth 5's accuracy."""
    rep = ArmReport(data, arm, seeds=None)
    cols = [("held-in acc", (2, 3), "acc"), ("depth 2 acc", (2,), "acc"), ("depth 2 trace", (2,), "trace"),
            ("depth 2 words", (2,), "words"), ("depth 4 acc", (4,), "acc"), ("depth 5 acc", (5,), "acc")]
    lines = ["Per seed (test, every recorded seed; the means above can hide one seed): " + ", ".join(c for c, _, _ in cols)
             + ". A depth-2 gold trace has 3 words; a right trace written past its period scores trace 1 and acc 0.",
             "", *study.seed_header(["method", "measure"], rep.seeds)]
    for k in ("sft_teacher", "mopd_kl", "sft_traces", "rft", "sft_gold"):
        if k not in rep.runs:
            continue
        for name, lengths, key in cols:
            lines.append(study.seed_row([rep.methods[k].label, name], rep.per_seed(k, "chain", lengths, key), rep.seeds))
    return lines + [""]


def kl_table(rep: ArmReport) -> list[str]:
    P = kl_positions(rep)
    lines = ["MOPD's per-token reverse KL to the SFT teacher along the student's own sample (the trainer's 4 tracked "
             "depth-2 test prompts, sampled at each tracked step; at each position the mean over the seeds, with the "
             "median and the maximum over the seeds beside it: mean (median, max); a mean far above its median is one "
             "seed's value averaged). On a depth-2 gold trace position 0 is the start node, 1 the first hop, 2 the "
             "answer, 3 the period, 4 the end of turn; a cell past 4 exists only where the student wrote a longer "
             "completion.", "",
             "| loss | step | " + " | ".join(f"pos {i}" for i in range(P)) + " |", "| --- | --- |" + " --- |" * P]
    for loss in ("pg", "topk", "kl"):
        per = rep.runs.get(f"mopd_{loss}", {})
        steps = sorted({int(s) for r in per.values() if r.get("kl_along") for s in r["kl_along"]})
        for st in steps:
            cells = []
            for i in range(P):
                v = [r["kl_along"][str(st)]["kl"][i] for r in per.values()
                     if r.get("kl_along") and str(st) in r["kl_along"] and len(r["kl_along"][str(st)]["kl"]) > i]
                sp = stats.spread(v)
                cells.append(f"{sp['mean']:.3f} ({sp['median']:.3f}, {sp['max']:.3f})" if v else "")
            lines.append(f"| {loss} | {st} | " + " | ".join(cells) + " |")
    return lines + [""]


def kl_positions(rep: ArmReport) -> int:
    """The longest tracked completion of any MOPD run (at least the depth-2 gold's 5 tokens)."""
    return max([5] + [len(v["kl"]) for k in ("mopd_pg", "mopd_topk", "mopd_kl") for r in rep.runs.get(k, {}).values()
                      for v in (r.get("kl_along") or {}).values()])


POSITIONS = ["start", "hop 1", "answer", ".", "end"]   # a depth-2 gold trace, token by token


def _over_seeds(values: dict) -> dict:
    """{"mean", "half" (95% t half-width; NaN below 2 seeds), "n"} of {seed: value}."""
    vals = list(values.values())
    return {"mean": stats.mean_sd(vals)[0], "half": stats.t_half_width(vals), "n": sum(v == v for v in vals)}


def view(data: dict, arm: Arm) -> dict:
    """What the figures (views.regime_*) draw, in plain numbers: the page's figures and notebook 07
    draw the same dict, which render() stores in regimes.json["views"][arm]."""
    rep = tested(data, arm) if arm.gate_every_seed else ArmReport(data, arm)
    out = {"arm": str(arm.number), "title": arm.title, "domains": list(arm.domains), "seeds": rep.seeds,
           "parts": {d: {p: list(v) for p, v in parts.items()} for d, parts in rep.held.items()},
           "positions": POSITIONS, "methods": {}, "kl": {}}
    for k, m in rep.methods.items():
        if k not in rep.runs:
            continue
        per = rep.runs[k]
        first = next(iter(per.values()))
        n = rep.lora_n(k)
        lifts = {d: rep.lift(k, d, rep.held[d]["all"]) for d in arm.domains}
        out["methods"][k] = {
            "label": m.label, "seeds": sorted(per),
            "lift": {} if k == "base" else {d: {p: _over_seeds(rep.lift(k, d, rep.held[d][p])) for p in
                                                ("held-in", "held-out", "all")} for d in arm.domains},
            "mean_lift": None if k == "base" else _over_seeds({s: fmean(lifts[d][s] for d in arm.domains)
                                                               for s in per}),
            "pipeline_flops": fmean(cost.flops(rep.pipeline(k, s), first["N"], n) for s in per),
            "by_length": {d: {str(L): fmean(acc(r, d, (L,)) for r in per.values()) for L in rep.held[d]["all"]}
                          for d in arm.domains}}
    for loss in ("pg", "topk", "kl"):
        per = [r["kl_along"] for r in rep.runs.get(f"mopd_{loss}", {}).values() if r.get("kl_along")]
        if not per or arm.number != 2:
            continue
        steps = sorted({int(s) for r in per for s in r}, key=int)
        out["kl"][loss] = {}
        for st in steps:
            width = max(len(r[str(st)]["kl"]) for r in per if str(st) in r)
            out["kl"][loss][str(st)] = [fmean(r[str(st)]["kl"][i] for r in per if str(st) in r and len(r[str(st)]["kl"]) > i)
                                        for i in range(width)]
    if arm.grids:
        out["stuck"] = stuck_view(data, arm)
    dec = decisions(rep)[1] if rep.runs else {}
    out["decisions"] = {h: v for h, v in dec.items() if h != "family"}
    out["holm"] = dec.get("family", {})       # each primary comparison's Holm-adjusted p over the arm's family
    every = ArmReport(data, arm, seeds=None)
    if not arm.grids and set(every.seeds) - set(REGISTERED):   # the check beside the registered decisions (five_seed_check)
        out["check"] = {"seeds": every.seeds,
                        "decisions": {h: v for h, v in decisions(every)[1].items() if h != "family"}}
    return out


def stuck_view(data: dict, arm: Arm) -> dict:
    """The stuck-share curves of a cures arm, from each MOPD record's per-step series: {method:
    {"label", "seeds": {seed: {"step", "share", "passes"}}}} over every recorded seed (a seed that
    fails the gate kept, marked); an off-policy step (lmbda < 1) has no share (None: the amendment
    of 2026-12-05); the threshold is MOPDConfig's stuck_warn_share."""
    every = ArmReport(data, arm, seeds=None)
    _, passing = gate_passing(data, arm)
    d = arm.domains[0]
    out = {"domain": d, "threshold": mm.MOPDConfig.stuck_warn_share, "methods": {}}
    for k in MOPD_KEYS:
        seeds = {}
        for seed, r in sorted(every.runs.get(k, {}).items()):
            series = r.get("stuck_series")
            if series:
                seeds[str(seed)] = {"step": series["step"], "passes": seed in passing,
                                    "share": [v if on else None for v, on in zip(series[d]["share"], series["on_policy"])]}
        if seeds:
            out["methods"][k] = {"label": every.methods[k].label, "seeds": seeds}
    return out


def figures(v: dict, arm: Arm, folder: Path, draw: bool = True) -> list[str]:
    """The arm's figures, drawn by mopd_mini.views from its view(): lift by domain, lift against
    pipeline FLOPs; for the cures' arms the stuck share per method and seed; for arm 2 accuracy by
    depth and the per-token KL early and late. `draw=False`: their names only (nothing drawn)."""
    if not v["methods"]:
        return []
    drawn = [(views.regime_lift, "lift"), (views.regime_cost, "cost")]
    if v.get("stuck", {}).get("methods"):
        drawn.append((views.regime_stuck, "stuck"))
    if arm.number == 2:
        drawn.append((views.regime_depth, "depth"))
        if v["kl"]:
            drawn.append((views.regime_kl, "kl"))
    if draw:
        folder.mkdir(parents=True, exist_ok=True)
    return [_save(fig(v), folder, f"regimes_arm{arm.number}_{name}.png") if draw else f"regimes_arm{arm.number}_{name}.png"
            for fig, name in drawn]


def _save(fig, folder: Path, name: str) -> str:
    fig.savefig(folder / name, dpi=110)
    plt.close(fig)
    return name


RESULTS = "## Results"
READING = {   # hand-written for the recorded runs (2026-12-02; re-read 2026-12-03 against the per-seed rows and
    # Holm's correction); each sentence names its table. Sentences marked "not a finding" say what seeds did.
    2: ["**Reading** (hand-written for the runs recorded on 2026-12-02, re-read 2026-12-03, from this arm's tables; "
        "the decisions are the Holm-corrected ones of the comparison table, and a sentence marked *not a finding* "
        "says what particular seeds did):",
        "",
        "* The SFT teacher is right at the trained depths on seeds 0-3 (0.980-1.000 held-in, per-seed table) and at "
        "neither held-out depth (0.003 ± 0.004 over seeds 0-2, chain accuracy table); by length it writes 1.99 words "
        "at depth 4, where a depth-4 trace has 5 (by-length table). Seed 4's SFT teacher is at 0.485 held-in and "
        "fails gate G2 on val (0.495 against 0.80, gate line), which was checked on seed 0 only: the 5-seed check "
        "includes a seed whose teacher the gate would have stopped (*not a finding*: what seed 4 did).",
        "* At depth 4 the teacher scores 0.00 and every student built from it or from the gold but MOPD-PG is at "
        "0.00-0.01 (by-length table), so the depth-4 rows of H2.2 and H2.3 compare near-zero accuracies: their "
        "\"supported\" by the rule is descriptive, not a finding. MOPD-PG's +0.090 there is its 0.09 at depth 4, below "
        "the 0.20 chance level H2.1 uses.",
        "* GRPO writes about one word at every depth (words 1.00-1.11, by-length table) and scores 0.12-0.17 at "
        "every depth: on the final-answer reward it learned to answer without the trace, and after Holm's correction "
        "<!-- finding: regimes/2/H2.1 -->x<!-- /finding -->",
        "* MOPD exact KL's seeds do different things (per-seed table; *not a finding*): seeds 0 and 3 match the "
        "teacher at the trained depths and score 0.00 at depths 4 and 5; seed 1 writes the right depth-2 trace and "
        "does not stop (trace 1.00, acc 0.00, 6 words at depth 2), so the by-length table's depth-2 \"acc 0.66, trace "
        "1.00\" is seed 1's over-running averaged with two seeds that stop; seed 1 also writes the full path at depth "
        "5 (0.875), so the \"depth 5 is a one-lookup shortcut\" reading does not hold for it; seed 2 reaches 0.380 at "
        "depth 5; seed 4 follows its failed-gate teacher (0.460 held-in). <!-- finding: regimes/2/H2.2 -->x<!-- "
        "/finding --> <!-- finding: regimes/2/H2.3 -->x<!-- /finding -->",
        "* At the period (position 3): <!-- finding: regimes/2/kl/kl/300/3 -->x<!-- /finding --> The max is seed "
        "1's, averaged into the mean (median far below it): late in training the KL is near 0 at every position for "
        "seeds 0 and 2, and at the period seed 1's is large, the stop decision behind its depth-2 acc 0.00 (*not a "
        "finding*). MOPD Top-k scores 0.000 at every depth on every seed and MOPD-PG 0.128 ± 0.017 overall (chain "
        "accuracy table), each at the one preset learning rate: the loss forms and their rate are confounded, so "
        "these rows do not say which form suits the task.",
        "* Off-policy SFT on the teacher's sampled traces reaches 0.975 ± 0.026 held-in (chain accuracy table) at "
        "0.82x MOPD exact KL's pipeline FLOPs (4.29e+11 against 5.24e+11, cost table). No registered hypothesis "
        "compares the two: this is not a finding that it did as well as MOPD.",
        "* The 5-seed check, after Holm's correction: <!-- finding: regimes/2/H2.1@5 -->x<!-- /finding --> <!-- "
        "finding: regimes/2/H2.2@5 -->x<!-- /finding --> <!-- finding: regimes/2/H2.3@5 -->x<!-- /finding --> Its "
        "seed 4 fails gate G2.",
        ""],
    1: ["**Reading** (hand-written for the runs recorded on 2026-12-02, re-read 2026-12-03, from this arm's tables):",
        "",
        "* <!-- finding: regimes/1/H1.1 -->x<!-- /finding --> Mix-RL minus each teacher: <!-- finding: "
        "regimes/1/cmp/mixrl-teacher_conflict/conflict -->x<!-- /finding --> <!-- finding: "
        "regimes/1/cmp/mixrl-teacher_memory/memory -->x<!-- /finding --> What the tables do show is the memory "
        "teacher losing conflict: 0.056 ± 0.029 against the base's 0.994 (conflict accuracy table), while Mix-RL, "
        "trained on both, keeps conflict at 1.000 ± 0.001 and reaches 0.494 ± 0.305 on memory against the memory "
        "teacher's 0.564 ± 0.166 (memory accuracy table). Seed 2's memory teacher fails gate G1 on val (0.325 "
        "against 0.50, gate line), which was checked on seed 0 only.",
        "* MOPD exact KL and RFT score as their teachers do on each domain's accuracy table (conflict 1.000, memory "
        "0.564 ± 0.167 and 0.567 ± 0.165 against the memory teacher's 0.564 ± 0.166; both accuracy tables); no "
        "comparison with the teacher or margin was registered for them, so this is the tables' means, not a "
        "finding that they reach it; MOPD Top-k scores 0.000 on memory and MOPD-PG 0.105 ± 0.032 (memory "
        "accuracy table). H1.2 and H1.3 are not tested (their rule needs H1.1 shown).",
        "* The merges lose conflict: linear 0.470 ± 0.072, cat 0.841 ± 0.023 (conflict accuracy table; merge linear "
        "minus teacher_conflict -0.530 ± 0.180, comparison table).",
        ""],
}
READING["1b"] = [
    "**Reading** (hand-written for the runs recorded on 2026-12-02, re-read 2026-12-03, from this arm's tables; "
    "the registered 3-seed decisions are Holm-corrected over the arm's family of 4):",
    "",
    "* With the registered 3 seeds, after Holm's correction: <!-- finding: regimes/1b/H1.1 -->x<!-- /finding --> "
    "<!-- finding: regimes/1b/cmp/mixrl-teacher_memory/memory -->x<!-- /finding --> <!-- finding: "
    "regimes/1b/H1.2 -->x<!-- /finding --> <!-- finding: regimes/1b/cmp/mopd_kl-mixrl/recall -->x<!-- /finding "
    "--> <!-- finding: regimes/1b/H1.3 -->x<!-- /finding --> RFT is above Mix-RL on memory and below it on "
    "recall: <!-- finding: regimes/1b/cmp/rft-mixrl/recall -->x<!-- /finding --> <!-- finding: "
    "regimes/1b/cmp/mopd_kl-rft/memory -->x<!-- /finding --> By the amended rule that is not \"the simple method "
    "did as well\".",
    "* The 5-seed check does not confirm the interference: <!-- finding: "
    "regimes/1b/cmp/mixrl-teacher_memory/memory@5 -->x<!-- /finding --> <!-- finding: regimes/1b/H1.1@5 -->x<!-- "
    "/finding --> So the 3-seed H1.1 and H1.2 decisions above are not findings. The per-seed table shows why: "
    "the memory teacher's own RL run reached 0.180 on seed 3 (0.372-0.674 on the others) while Mix-RL reached "
    "0.627 there, and the gate line shows seeds 2 and 3's memory teachers failing gate G1 on val (0.325 and "
    "0.185 against 0.50; the gate was checked on seed 0 only). MOPD exact KL is within 0.02 of its memory "
    "teacher on every seed (per-seed table; the interval of the difference allows -0.008 to +0.012, 5-seed "
    "table). What these runs measure is how often each RL run learns the memorised map, not a resolved cost of "
    "training the two domains together.",
    "* At 5 seeds MOPD-PG and MOPD-Top-k are below Mix-RL on memory (descriptive, uncorrected: <!-- finding: "
    "regimes/1b/cmp/mopd_pg-mixrl/memory@5 -->x<!-- /finding --> <!-- finding: "
    "regimes/1b/cmp/mopd_topk-mixrl/memory@5 -->x<!-- /finding -->): Top-k scores 0.000 on memory on every seed "
    "(per-seed table), at the one preset rate.",
    "* On recall, <!-- finding: regimes/1b/cmp/mixrl-teacher_recall/recall@5 -->x<!-- /finding --> The merges "
    "lose recall (cat -0.305 ± 0.135 against the recall teacher, 5-seed table, descriptive).",
    ""]

DEVIATIONS = [
    "**Deviation notes** (where the runs differ from, or had to settle what is not fixed by, the registration above):", "",
    "* *Merges, chosen on val at seed 0*: the registration names bench.baselines' grid (w = 0.5, 1.0, 1.5 for "
    "linear and cat); bench.baselines chose by the mean normalised score, which conflict (no headroom: its teacher "
    "cannot beat a base at 0.98-1.00) leaves undefined, so the choice here is the mean val accuracy over the two "
    "domains (ties to the w nearer 1).",
    "* *Arm 1 under its fall-back* (gate G1 failing twice, if it does): MOPD, RFT and the merges read the SFT-on-gold "
    "adapters as the domains' teachers (the registration builds \"both domains' adapters\" that way and does not "
    "name other teachers), and Mix-RL is reported at its last budget (400 steps) beside the SFT interference test.",
    "* *Arm 1's second pair* (recall against memory, registered to run once if H1.1 is not shown on the first pair) "
    "is `python -m bench.regimes --arm 1b`: the same table of methods, budgets and gate G1 (its memory teacher is "
    "retrained in its own run folder, the same config and seeds as arm 1's). *Arm 3* is not run. Each arm's section "
    "says which of its jobs finished.",
    "* *The trainers' periodic evaluations are off* (`eval_every = 0`): every number below is the one evaluation "
    "after training (greedy, test 200 and val 100 prompts per length, seed-0 prompts), as registered.",
    "* *A method the trainer refuses at its registered budget* (RFT with no correct teacher sample) is recorded as "
    "failed, with the trainer's message, not retuned.", ""]


def in_variants(arm: Arm, fn, *args):
    """fn(*args) with the arm's domain variants in place (its lengths: arm 2b's 7-cycle chain)."""
    with domain_variants(arm.variants):
        return fn(*args)


def render(out: Path, page_from: Path | None = None, allow_shrink: bool = False) -> Path:
    """Rewrite the page's Results section (every arm, arm 2 first: the order they run) and the figures.
    The JSON is checked first (`slices.read_record`); nothing is written (page, figures, "views") if the
    page would show fewer table rows than the one in `out`, or "views" would hold fewer values, unless
    `allow_shrink` (`slices.guard_render`)."""
    store = out / "regimes.json"
    slices.read_record(store, "regimes")
    with slices.rendering(store):
        return _render(out, page_from, allow_shrink)


def _render(out: Path, page_from: Path | None, allow_shrink: bool) -> Path:
    data = Store(out / "regimes.json").read()
    source = out / "regimes.md" if (out / "regimes.md").exists() else (page_from or DOCS / "regimes.md")
    text = source.read_text()
    head = above_header(text, RESULTS).rstrip() + "\n\n"
    body = [RESULTS, "",
            "Written by `python -m bench.regimes` from docs/regimes.json (every finished (arm, method, seed) job); "
            "nothing above this section changed. Every sentence here that states an outcome names the table it "
            "comes from; the decisions are the registered rules applied to the comparison tables.", ""]
    body += DEVIATIONS
    shown = [a for a in (2, 1, "1b") if a != "1b" or ArmReport(data, ARMS[a]).runs]   # the second pair runs only
    shown += [a for a in ("2b", "memory-cures") if ArmReport(data, ARMS[a], seeds=None).runs]   # if H1.1 is not shown
    drawn = [a for a in shown if not ARMS[a].grids or complete(ArmReport(data, ARMS[a], seeds=ARMS[a].seeds))]
    views = {str(a): in_variants(ARMS[a], view, data, ARMS[a]) for a in drawn}              # on the first; the cures'
    figs = {a: figures(views[str(a)], ARMS[a], out / "figures", draw=False) if a in drawn else [] for a in shown}
    for a in shown:                                # the cures' arms once they ran (partial: no view, no figure)
        body += in_variants(ARMS[a], markdown, data, ARMS[a], figs[a])
    from .matched import cures_sections     # the course-setting check (bench.matched --cures), from its JSON
    body += cures_sections(slices.read_record(out / "matched.json", "matched-cures")) if (out / "matched.json").exists() else []
    body += ["### Arm 3: capacity", "", "**Not run**: it was registered to run after arms 1 and 2, and the sessions "
             "that ran them spent the rest of their CPU on the matched-budget study (docs/matched.md) and on arm 1b's "
             "5-seed check. Its registration above stands for a later run.", ""]
    page = out / "regimes.md"
    from tools.findings import fill     # the Readings' marked findings, rendered from this JSON
    text = fill(head + "\n".join(body).rstrip() + "\n", out, strict=False)
    shrunk = {k: list(v) for k, v in data.items() if k == slices.SHRINK}   # the renders told to shrink, said again
    text = slices.guard_render(page, text, out / "regimes.json", shrunk, allow_shrink,
                               {"views": (data.get("views"), views)})
    for a in drawn:
        figures(views[str(a)], ARMS[a], out / "figures")
    with Store(out / "regimes.json").edit() as stored:   # what the figures draw, for notebook 07
        stored["views"] = views
        stored.update(shrunk)
    page.write_text(text)
    return page


# ---------------------------------------------------------------------------------------------
# the command
# ---------------------------------------------------------------------------------------------


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--arm", choices=[str(a) for a in ARMS], default="2",
                   help="1, 2, 1b (arm 1's second pair), 2b (arm 2 re-run with the cures) or memory-cures")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--workers", type=int, default=1, help="processes of one torch thread each [default: 1]")
    p.add_argument("--out", type=Path, default=None, help="where regimes.json, regimes.md and figures/ go "
                   "[default: docs/, or a temporary-looking runs/regimes-quick/docs with --quick]")
    p.add_argument("--quick", action="store_true", help="every method at a few steps (the smoke test)")
    p.add_argument("--estimate", action="store_true", help="time a few steps of every method; train nothing")
    p.add_argument("--render", action="store_true", help="the page and figures from the JSON only")
    p.add_argument("--allow-shrink", action="store_true", help="write the page even if it shows fewer table rows "
                   "than the one at --out, or its views fewer values (recorded in the JSON and said on the page)")
    p.add_argument("--teacher-depths", action="store_true",
                   help="measure which chain depths (2-5, a 7-cycle) the SFT teacher learns at seed 0; train nothing else")
    p.add_argument("--timed-steps", type=int, default=0,
                   help="time this many steps of one arm-2b seed of MOPD exact KL (after --teacher-depths); train nothing else")
    slices.quiet_flag(p)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--jobs", default="[]", help=argparse.SUPPRESS)
    p.add_argument("--tried", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--claims", default=None, help=argparse.SUPPRESS)
    p.add_argument("--fallback", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--hours", type=float, default=None,
                   help="a time-boxed slice (arms with grids: 2b, memory-cures): stop starting jobs that cannot end "
                   f"{slices.RESERVE_S / 60:.0f} min before this many hours, stop the running ones at that point "
                   "(nothing of them kept), print what is left and the command that continues")
    p.add_argument("--status", action="store_true", help="per arm and phase: jobs recorded and left, CPU-hours, "
                   "machines (from the JSON alone; answered before torch loads)")
    p.add_argument("--job", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.argv = list(argv) if argv is not None else None
    args.out = args.out or (runs.RUNS_DIR / "regimes-quick" / "docs" if args.quick else DOCS)
    torch.set_num_threads(1)
    if args.teacher_depths:
        return teacher_depths(args)
    if args.timed_steps:
        return timed_seed(args)
    arm = {str(k): v for k, v in ARMS.items()}[args.arm]
    with domain_variants(arm.variants):
        return _main(args, arm)


def _main(args, arm: Arm):
    if args.job is not None:         # one job of a slice (run_sliced), in its own process
        return run_job_json(args, arm, json.loads(args.job))
    if args.worker:
        store = Store(args.out / "regimes.json")
        ctx = Context(arm, arm_methods(arm, store.read(), args.tried, args.fallback), args.quick, store)
        for k, s in study.claimed(json.loads(args.jobs), lock_path(), args.claims and Path(args.claims)):
            run_job(ctx, k, s)
        return None
    if args.estimate:
        return estimate(args, arm)
    if not args.render and arm.grids:
        run_sliced(args, arm)
    elif not args.render:
        if args.hours is not None:
            raise SystemExit(f"--hours slices the arms with grids (2b, memory-cures); arm {arm.number} is recorded in full")
        run_arm(args, arm)
    if arm.grids and not args.render:   # the amendment's arms: recorded; their tables are written with their results
        gates = gate_every_seed_line(Store(args.out / "regimes.json").read(), arm)
        print(f"arm {arm.number}: recorded in {args.out / 'regimes.json'}" + "".join(f"; {g}" for g in gates), flush=True)
        return Store(args.out / "regimes.json").read()
    page = render(args.out, allow_shrink=args.allow_shrink)
    print(f"wrote {page} and {args.out / 'figures'}")
    return Store(args.out / "regimes.json").read()


if __name__ == "__main__":
    main()
