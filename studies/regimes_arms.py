"""The regime study's declarations (docs/regimes.md's registration and its amendments): the arms
(`Recipe`: one row of an arm, a trainer and its budget; `Arm`; the table `ARMS`), their domains and
domain variants, gates, grids and evaluation sizes. studies.regimes trains them; studies.regimes_report
reads their records and applies the registered rules; studies.regimes_page writes the page.
"""

from __future__ import annotations

import dataclasses
import json
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from mopd_mini import domains as domain_table
from mopd_mini.domains import Domain

from . import study
from .cures import CURES, JSD_BETAS

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
# the arm: gate, then the methods by level, in worker processes
# ---------------------------------------------------------------------------------------------


CHOICE_KEY = {"chain": "strict"}   # what the val choice reads per domain (the primary metric; else "acc")


def in_variants(arm: Arm, fn, *args):
    """fn(*args) with the arm's domain variants in place (its lengths: arm 2b's 7-cycle chain)."""
    with domain_variants(arm.variants):
        return fn(*args)
