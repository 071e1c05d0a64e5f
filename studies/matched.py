"""Is MOPD worth it at a MATCHED RL budget? The teachers and Mix-RL at the same per-domain GRPO
budget T, for several T; from each teacher set every method of studies.baselines; each reported
by its absolute accuracy lift per domain and its normalised score, against its whole pipeline's
FLOPs, with the cost of reaching 95% of the teachers' lift. The pre-registration (hypotheses,
metric, budgets, seeds, statistics, decision rule) is docs/matched.md, written before this ran.

    python -m studies.matched --workers 2              # docs/matched.json, the results in docs/matched.md, figures
    python -m studies.matched --estimate               # time a few steps of every trainer; the plan's CPU time
    python -m studies.matched --quick --no-write       # the smoke test (seconds)
    python -m studies.matched --render docs/matched.json
    python -m studies.matched --T 200 --seeds 0 1 2 3 4 --cures   # the stuck student's cures beside exact KL at T = 200
    python -m studies.matched --T 200 --seeds 0 1 2 3 4 --cures --workers 2 --hours 1.5   # the same, in a slice
    python -m studies.matched --T 400 --recheck rft --seeds 0 1 2 3 4 --workers 2 --hours 1.5   # RFT re-checked, in slices
    python -m studies.matched --status                 # what the slices recorded and what is left (no torch)

A declaration on studies.study's runner, one study per T, each with its own teacher set (the
baselines' Bench with the teachers at T steps):

  * teachers: GRPO, T steps x 8 prompts x 8 samples of their own domain (lr 1e-3, the course's,
    chosen on val by studies.teacher_headroom at 200 steps; seed 0, shared by every method and seed);
  * Mix-RL: the same GRPO loop on both domains, T steps x 8 prompts per domain x 8 samples: the
    SAME samples per domain as one teacher;
  * Cascade RL: stage 1 is the domain's teacher at T, stage 2 T steps on the other domain;
  * MOPD (pg, topk, kl): the course's student budget, `student_steps` x 8 prompts per domain, one
    sample each, from the teachers at T;
  * RFT and soft labels: their own budget, chosen on val with the learning rate: optimizer
    steps and K samples per prompt from `offline_prompts` prompts per domain (the grid `offline`);
  * the merges of the teachers at T (studies.baselines' grid) and the best merge type on val.

Every trained method searches the same bracketed learning-rate grid `lrs` (RFT and soft also
their budget); the choice is the best mean normalised val score at seed 0 on `val_n` prompts per
domain and length, with a second seed (1) where the margin over the runner-up is within one val
SE (studies.study's tie_break). Test: `test_n` prompts per domain and length, once per seed.

The JSON is written after every seed of every T and the runs reload from runs/matched/, so a
stopped command resumes where it stopped.

`--cures` is docs/regimes.md's course-setting check of the stuck student's cures (its amendment of
2026-12-03): at one T, exact KL and the four cures (studies.cures.CURES: forward KL, JSD with beta
chosen on val, exact KL at lmbda 0.5 on the teachers' prefixes, Top-k with support matching), each
on exact KL's grid of this sweep by the same runner, from the sweep's teachers at T (its run folder:
what it holds reloads); each cure minus that exact KL, paired, Holm over the cures, H2b.1's rule.
Written to matched.json's `by_T.<T>.cures` (nothing else there changes) and rendered in
docs/regimes.md's Results, the page that registered it.

`--recheck rft` is docs/matched.md's re-check of one registered comparison at one T (its amendment of
2026-12-06: at T = 400 RFT's choice sat on its grid's edge and the sweep's run kept no hash of its
teachers): fresh teachers at T in their own run folder (runs/matched-recheck/, sha256 recorded), MOPD
exact KL and RFT each on the sweep's grid by the same runner (bracketed before and after the
tie-break), paired by seed on the mean lift. Written to matched.json's `by_T.<T>.recheck_rft` and
rendered in docs/matched.md's Results; once it holds every seed its command asked for (at least five),
the registered comparison "MOPD exact KL minus RFT" at that T reads from it (`compared_rows`: the T's
paired table, the family's Holm correction, the decisions and the findings cited from them).

`--hours H` runs any of these in time-boxed slices (studies.sliced): every run one job in its own
process, `--workers` at a time, recorded in docs/matched_jobs.json when it has finished; the teachers,
the val choice's adapters and every run's metrics kept in docs/matched_inputs/; at the deadline (less
10 minutes) the running jobs are stopped and nothing of them is kept. The same command continues on
any machine; a T's report is written (as the whole command writes it) once every job is recorded.
"""

from __future__ import annotations

import sys

if __name__ == "__main__" and "--status" in sys.argv[1:]:   # from the JSON alone, before torch loads
    from studies.slices import jobs_status_main

    raise SystemExit(jobs_status_main("matched", sys.argv[1:]))

import argparse
import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from statistics import fmean
from typing import Callable

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import mopd_mini as mm  # noqa: E402
from mopd_mini import cost, plots, runs, stats, views  # noqa: E402
from mopd_mini.adapters import atomic_write  # noqa: E402

from . import baselines, sliced, slices, study  # noqa: E402
from .study import LADDER, RESULTS, extend_lr  # noqa: E402
from .baselines import DOMAINS, LABEL, MERGES  # noqa: E402
from .cures import (CURE_FIELDS, CURE_LABEL, CURES_ESTIMATE, CURES_HEADING, CURES_METHODS, CURES_T,  # noqa: E402,F401
                    choice_lines, cure_grid, cures_decisions, cures_sections, logged_at, on_edge, render_cures,
                    series_of, teachers_line)
from tools.provenance import above_header, command, machine, machine_line  # noqa: E402

DOCS = Path("docs")
EXPERIMENT = "matched"
RL = ("mixrl", "cascade_br", "cascade_rb")              # trained T steps: the matched RL budget
STUDENTS = ("mopd_pg", "mopd_topk", "mopd_kl")          # trained student_steps from the teachers at T
OFFLINE = ("rft", "soft")                               # their own budget (steps, K) and lr


@dataclass
class Plan:
    """The sweep's budgets and grids (FULL: the pre-registered command; QUICK: the smoke test)."""

    Ts: tuple = (100, 200, 400)           # per-domain GRPO steps of the teachers, Mix-RL and each cascade stage
    per_domain: int = 8                   # prompts per domain per step (online); offline batch = 2x this
    group: int = 8                        # GRPO samples per prompt (the teachers', Mix-RL's, the cascades')
    student_steps: int = 300              # MOPD's budget (the course's)
    lrs: dict = field(default_factory=lambda: dict(LR_CENTRE))
    """each trained method's learning-rate grid: 3 points, x3 apart, around its val choice at the
    course budget (docs/baselines.json); extended by one x3 step past an edge the best sits on
    (at most `extend` times), so every chosen rate is interior or the page says it is not"""
    extend: int = 2
    offline: tuple = ((300, 4), (600, 4), (300, 1))  # RFT / soft labels: (steps, K) searched beside the lrs
    offline_prompts: int = 600            # prompts per domain the teachers sample for RFT / soft labels
    merge_grid: dict = field(default_factory=lambda: baselines.FULL.merge_grid)
    eval_every: int = 50                  # periodic val evaluations: the curves and the cost to reach 95%
    curve_n: int = 100                    # val prompts per domain and length of the periodic evaluations
    val_n: int = 300                      # val prompts per domain and length of the choice (a separate evaluation)
    test_n: int = 500                     # test prompts per domain and length
    target: float = 0.95                  # the fraction of the teachers' lift whose cost is reported
    tie_break: int = 1                    # the second seed for a val choice within one SE

    def protocol(self, T: int) -> baselines.Protocol:
        """studies.baselines' Protocol for the study at T (its Bench trains the teachers at T)."""
        return baselines.Protocol(steps=self.student_steps, per_domain=self.per_domain, lrs=(),
                                  offline_prompts=self.offline_prompts, offline_k=self.offline[0][1],
                                  merge_grid=self.merge_grid, eval_every=self.eval_every, val_n=self.val_n,
                                  teacher_steps=T, curve_n=self.curve_n)


# the course-budget val choices (docs/baselines.json, 300 steps, teachers at 200): each grid's centre
LR_CENTRE = {"mopd_pg": 1e-3, "mopd_topk": 3e-3, "mopd_kl": 3e-3, "mixrl": 1e-3, "cascade_br": 1e-3,
             "cascade_rb": 1e-3, "rft": 1e-3, "soft": 3e-3}


def around(lr: float) -> tuple:
    """The rate and its two neighbours on studies.study's LADDER (1e-3: 3e-4, 1e-3, 3e-3)."""
    i = LADDER.index(lr)
    return LADDER[max(0, i - 1):i + 2]


FULL = Plan(lrs={m: around(lr) for m, lr in LR_CENTRE.items()})
QUICK = Plan(Ts=(2,), per_domain=2, student_steps=2, lrs={m: (1e-3, 3e-3) if m == "rft" else (1e-2,) for m in LR_CENTRE},
             extend=1, offline=((2, 2), (3, 1)), offline_prompts=3, merge_grid=baselines.QUICK.merge_grid, eval_every=1,
             curve_n=4, val_n=4, test_n=6)


def sweep_method(plan: Plan, T: int, m: str) -> study.Method:
    """A trained method of the sweep at T: its grid (RFT and soft labels' budgets beside the lrs), how
    one run trains, the teachers it needs and the bracketing."""
    if m in RL:
        grid = [{"lr": lr} for lr in plan.lrs[m]]
        train = lambda bench, s, seed: bench.train(m, s["lr"], seed, steps=T)  # noqa: E731
    elif m in OFFLINE:
        grid = [{"steps": n, "k": k, "lr": lr} for n, k in plan.offline for lr in plan.lrs[m]]
        train = lambda bench, s, seed: bench.train(m, s["lr"], seed, steps=s["steps"], k=s["k"])  # noqa: E731
    else:
        grid = [{"lr": lr} for lr in plan.lrs[m]]
        train = lambda bench, s, seed: bench.train(m, s["lr"], seed)  # noqa: E731
    return study.Method(train, grid=grid, needs=baselines.needs(m), extend=extend_lr)


def declared(plan: Plan, T: int, quick: bool, methods: dict, picks: dict | None = None, flag: tuple = (),
             experiment: str = EXPERIMENT) -> study.Study:
    """A study at teacher budget T on the sweep's protocol: `methods` ({key: study.Method}), its
    teachers trained in runs/<experiment>/ (or reloaded from there); `flag`: the command-line words
    that select it (a check's), which its workers and jobs are given."""
    proto = plan.protocol(T)
    experiment += "-quick" if quick else ""
    return study.Study(module="studies.matched", argv=["--T", str(T), *flag] + (["--quick"] if quick else []),
                       methods=methods, picks=picks or {},
                       setup=lambda progress: baselines.Bench(proto, experiment, progress=progress),
                       given=lambda progress, given: baselines.Bench(proto, experiment, progress=progress, given=given),
                       parts={"all": None}, tie_break=plan.tie_break, val_from_run=False, max_extend=plan.extend)


def declare(plan: Plan, T: int, quick: bool) -> study.Study:
    """The study at teacher budget T: every method, its grid and its pipeline's teachers."""
    def merged(how):
        return study.Method(lambda bench, s, seed: bench.merged(how, s, seed), grid=plan.merge_grid[how],
                            needs=DOMAINS, in_workers=False)

    return declared(plan, T, quick, {**{m: sweep_method(plan, T, m) for m in STUDENTS + RL + OFFLINE},
                                     **{f"merge_{h}": merged(h) for h in MERGES}},
                    picks={"merge_best": study.Pick({f"merge_{h}": h for h in MERGES})})


# ---------------------------------------------------------------------------------------------
# the report of one T: the runner's rows, the curves and the cost to reach the target
# ---------------------------------------------------------------------------------------------


def lift_curve(run, ref: dict) -> list[tuple[int, float]]:
    """(step, mean lift over domains) at every periodic val evaluation of the run."""
    out = []
    for row in run.metrics:
        accs = {d: [v for k, v in row.items() if k.startswith(f"acc/{d}/")] for d in DOMAINS}
        if all(accs.values()) and row["step"] > 0:
            out.append((row["step"], fmean(fmean(accs[d]) - fmean(ref["base"][d].values()) for d in DOMAINS)))
    return out


def cost_to(run, step: int) -> dict:
    """The stage's cost counters up to and including `step` (step 0: RFT's sampling)."""
    return cost.totals([r for r in run.metrics if r["step"] <= step])


def reach(bench, m: str, r, state: study.State, needs: tuple, target: float) -> dict | None:
    """The first periodic val evaluation at which the run's mean lift reaches `target` x the
    teachers' mean val lift: its step, the pipeline FLOPs to it (the teachers it needs in full)
    and the wall seconds (the stage's pro-rated by FLOPs, plus the teachers'). None if never."""
    if r.run is None:
        return None
    teachers_lift = fmean(fmean(state.val[f"teacher_{d}"][d].values()) - fmean(state.val["base"][d].values())
                          for d in DOMAINS)
    if not teachers_lift > 0:                  # teachers no better than the base: no target to reach
        return None
    for step, lifted in lift_curve(r.run, state.val):
        if lifted >= target * teachers_lift:
            stage = cost_to(r.run, step)
            teachers = [bench.teachers[d] for d in needs]
            pipe = cost.add(stage, *(cost.totals(t.metrics) for t in teachers))
            whole = cost.flops(cost.totals(r.run.metrics), bench.N, bench.n_lora)
            part = cost.flops(stage, bench.N, bench.n_lora)
            seconds = r.seconds * (part / whole if whole else 1.0) + sum(t.seconds for t in teachers)
            return {"step": step, "lift": lifted, "teachers_lift": teachers_lift,
                    "flops": cost.flops(pipe, bench.N, bench.n_lora), "stage_flops": part, "seconds": seconds}
    return None


def matched_report(declared: study.Study, plan: Plan, T: int):
    def report(bench, state: study.State) -> dict:
        rows = study.rows(declared, bench, state)
        for m, per in rows.items():
            for seed, row in per.items():
                r = state.per_seed[seed][m]
                row["reach"] = reach(bench, m, r, state, study.needs_of(declared, m), plan.target)
        return {"T": T, "teacher": {d: {"steps": c.steps, "lr": c.lr, "seed": c.seed} for d, c in bench.teacher_cfg.items()},
                "teacher_cost": {d: {**cost.totals(t.metrics), "seconds": t.seconds,
                                     "flops": cost.flops(cost.totals(t.metrics), bench.N, bench.n_lora)}
                                 for d, t in bench.teachers.items()},
                "teacher_sha256": {d: runs.adapter_digest(bench.bank, f"teacher_{d}") for d in bench.teachers},
                "N": bench.N, "n_lora": bench.n_lora, "seeds_done": list(state.per_seed), "elapsed_s": state.elapsed,
                "refs": {split: {a: getattr(state, split)[a] for a in declared.refs} for split in ("val", "test")},
                "grid": state.grid, "chosen": state.chosen, "rows": rows}
    return report


# ---------------------------------------------------------------------------------------------
# the page's results and the figure
# ---------------------------------------------------------------------------------------------


COMPARISONS = (("mopd_kl", "mixrl"), ("mopd_pg", "mixrl"), ("mopd_topk", "mixrl"), ("mopd_kl", "rft"),
               ("mopd_kl", "soft"))
"""the pre-listed comparisons of docs/matched.md's "Multiplicity", at every T: with 3 T, the family of 15
that Holm's correction runs over (on the mean lift, the primary metric)"""
MARGINS: dict = {}
"""equivalence margins registered before a run, {"<a>-<b>@T": delta}: none was, so no comparison here is
called equal (stats.reading: "not resolved", with the differences the interval still allows)"""
FIVE = 5
"""docs/matched.md's rule: a comparison is stated as a finding only from a T run with this many seeds"""


def family(rep: dict, override: dict | None = None) -> dict:
    """{(T, a, b): the paired mean-lift comparison with its Holm-adjusted p over the whole family
    (every T of the report, COMPARISONS at each) and its reading} (studies.study.family). Each reads
    `compared_rows` (a complete re-check in the sweep's place); `override`: {(T, a, b): rows} read instead."""
    comp, override = {}, override or {}
    for key, by_T in sorted(rep["by_T"].items(), key=lambda kv: int(kv[0])):
        for a, b in COMPARISONS:
            rows = override.get((int(key), a, b)) or compared_rows(by_T, a, b)[0]
            if a in rows and b in rows:
                comp[f"{a}-{b}@{int(key)}"] = study.paired_rows(rows, a, b, "lift")
    fam = study.family(comp, MARGINS)
    return {(int(k.split("@")[1]), *k.split("@")[0].split("-")): v for k, v in fam.items()}


METHODS = STUDENTS + RL + OFFLINE + tuple(f"merge_{h}" for h in MERGES) + ("merge_best",)
FIGURE = STUDENTS + RL + OFFLINE + ("merge_best",)     # the figure's lines (each merge type is in the table)
CRITIQUE = 14.8                                         # the low end of the critique's 14.8-23.1x


def cost_ratio(rows: dict, a: str, b: str, key: str = "flops") -> dict:
    """H3: a's cost to reach the target over b's, per seed where both reach it; the geometric mean
    and the 95% t-interval of the log ratio (stats.paired of the logs)."""
    la = {s: math.log(p["reach"][key]) for s, p in rows[a].items() if p.get("reach")}
    lb = {s: math.log(p["reach"][key]) for s, p in rows[b].items() if p.get("reach")}
    p = stats.paired(la, lb)
    return {**p, "ratio": math.exp(p["diff"]) if p["n"] else float("nan"),
            "below_critique": p["n"] >= 2 and not math.isnan(p["hi"]) and p["hi"] < math.log(CRITIQUE)}


def below(r: dict) -> str:
    """H3's column: yes / no by the interval's upper end, n/a where fewer than 2 seeds reached the
    target (no interval to decide on)."""
    if r["n"] < 2 or math.isnan(r["half"]):
        return f"n/a ({r['n']} seed{'s' if r['n'] != 1 else ''} reached it: no interval)"
    return "yes" if r["below_critique"] else "no"


def written_by(rep: dict, by_T: dict) -> str:
    """The command that wrote this T's section: its own, or (a section saved before sections
    recorded one) the report's."""
    return by_T.get("command", rep["command"])


def ran_on(rep: dict, by_T: dict) -> str:
    """The machine that ran this T's section, as written_by finds its command."""
    return machine_line(by_T.get("machine", rep["machine"]))


def teachers_lift(by_T: dict) -> dict:
    """Each teacher's test lift on its own domain (accuracy over the domain's lengths minus the
    base's) and their mean: the cap a distilled student's lift is read against."""
    test = by_T["refs"]["test"]
    out = {d: fmean(test[f"teacher_{d}"][d].values()) - fmean(test["base"][d].values()) for d in DOMAINS}
    return {**out, "mean": fmean(out.values())}


def across_T(rep: dict) -> list[str]:
    """H4's table (descriptive): the teachers' lift and each method's mean lift, T by T."""
    shown = ("mopd_kl", "mopd_topk", "mopd_pg", "mixrl", "rft", "soft", "merge_best")
    lines = ["### Across T (H4, descriptive)", "",
             "Mean test lift over the base (mean ± sample std over the seeds of each T). The teachers are one "
             "seed (0) each, scored on their own domain; \"teachers\" is their mean.", "",
             "| T | seeds | teacher binding | teacher recall | teachers | " + " | ".join(LABEL[m] for m in shown) + " |",
             "| --- | --- | --- | --- | --- | " + " | ".join("---" for _ in shown) + " |"]
    for key, by_T in sorted(rep["by_T"].items(), key=lambda kv: int(kv[0])):
        t = teachers_lift(by_T)
        cells = [study.cell([p["lift"]["mean"] for p in by_T["rows"][m].values()]) for m in shown]
        lines.append(f"| {key} | {len(by_T['seeds_done'])} | {t['binding']:.2f} | {t['recall']:.2f} | {t['mean']:.2f} | "
                     + " | ".join(cells) + " |")
    return lines + [""]


def method_table(rep: dict, by_T: dict, methods: tuple) -> list[str]:
    """A T's (or a check's) table of methods: the chosen setting (marked when still on its grid's
    edge), the lift per domain and its mean, the normalised score, the pipeline FLOPs and the cost to
    reach the target fraction of the teachers' val lift."""
    target = by_T.get("plan", {}).get("target") or rep.get("plan", {}).get("target", FULL.target)
    out = ["| method | chosen | lift binding | lift recall | mean lift | normalised | pipeline FLOPs | "
           f"FLOPs to {target:.0%} of the teachers' lift (val) | wall s to it |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for m in methods:
        per = by_T["rows"][m].values()
        col = lambda f: study.cell([f(p) for p in per])  # noqa: E731
        reached = [p["reach"] for p in per if p.get("reach")]
        to = (f"{fmean(x['flops'] for x in reached):.2e} ({len(reached)}/{len(per)} seeds)" if reached
              else f"not reached (0/{len(per)})")
        wall = f"{fmean(x['seconds'] for x in reached):.0f}" if reached else "—"
        chosen = json.dumps(by_T["chosen"][m]) + (" **(on the grid's edge: not bracketed)**" if on_edge(by_T, m) else "")
        out.append(f"| {LABEL[m]} | {chosen} | {col(lambda p: p['lift']['binding'])} | "
                   f"{col(lambda p: p['lift']['recall'])} | {col(lambda p: p['lift']['mean'])} | "
                   f"{col(lambda p: p['all']['mean'])} | {fmean(p['pipeline']['flops'] for p in per):.2e} | "
                   f"{to} | {wall} |")
    return out


def results_markdown(rep: dict) -> str:
    """The results section (below the pre-registration, which this never rewrites)."""
    by_Ts = sorted(rep["by_T"].items(), key=lambda kv: int(kv[0]))
    commands = list(dict.fromkeys(written_by(rep, v) for _, v in by_Ts)) or [rep["command"]]
    machines = list(dict.fromkeys(ran_on(rep, v) for _, v in by_Ts)) or [machine_line(rep["machine"])]
    out = [RESULTS, "", "Written by" + (" (each T's section names its own)" if len(commands) > 1 else "") + ":", "",
           "```bash", *commands, "```", "",
           ("Machines: each T's section names its own." if len(machines) > 1 else f"Machine: {machines[0]}.")
           + f" Finished {rep['date']}.", ""]
    for key, by_T in by_Ts:
        rows, seeds = by_T["rows"], by_T["seeds_done"]
        stale = sorted({LABEL[m] for m, per in rows.items() for p in per.values() if p.get("ledger", 0) < cost.LEDGER})
        out += [f"### T = {key} GRPO steps per domain (seeds {seeds})", "",
                *([f"Written by `{written_by(rep, by_T)}`" + (f", finished {by_T['date']}" if by_T.get("date") else "")
                   + (f", on {ran_on(rep, by_T)}." if len(machines) > 1 else "."),
                   ""] if len(commands) > 1 or len(machines) > 1 else []),
                *study.unfinished(written_by(rep, by_T), seeds),
                *([f"**Mixed ledger**: the costs of {', '.join(stale)} include runs counted by older code "
                   f"(cost ledger below {cost.LEDGER}); their FLOPs are not comparable with the others'.", ""]
                  if stale else []),
                "Test split, mean ± sample std over seeds (ddof = 1). Lift: mean accuracy over the domain's lengths minus "
                "the base's. Pipeline FLOPs: the method's stage plus the teachers it needs (cost.FORMULA).", "",
                *method_table(rep, by_T, METHODS)]
        fam = family(rep)
        m = next(iter(fam.values()))["m"] if fam else 0
        out += ["", f"Paired by seed, on the mean lift (the primary metric): mean difference ± 95% t half-width "
                f"(uncorrected), the per-seed differences, the paired t-test's p uncorrected and Holm-adjusted over the "
                f"family of {m} pre-listed comparisons (every T), and the reading after the correction, printed with the "
                "interval at Holm's level (the level at which Holm's step-down tests that comparison, "
                "`mopd_mini.stats.holm_levels`: it excludes 0 exactly when the reading is resolved) and the "
                "uncorrected one beside it (no equivalence margin was registered, so an unresolved difference is "
                "\"not resolved\", never \"equal\"). The uncorrected columns say only whether the 95% interval "
                "excludes 0, which is not *resolved* for a comparison of the family. The normalised score's difference "
                "is descriptive (uncorrected).", "",
                "| comparison | mean lift (uncorrected) | per seed | p | p (Holm) | reading (Holm) | normalised (uncorrected) |",
                "| --- | --- | --- | --- | --- | --- | --- |"]
        for a, b in COMPARISONS:
            ab, rechecked = compared_rows(by_T, a, b)
            f, pn = fam[(int(key), a, b)], study.paired_rows(ab, a, b)
            res = lambda p: stats.interval_text(p) + (" (excludes 0)" if p["resolved"] else " (includes 0)")  # noqa: E731
            out.append(f"| {LABEL[a]} minus {LABEL[b]}" + (" (the re-check's, below: fresh teachers)" if rechecked else "")
                       + f" | {res(f)} | "
                       f"{study.seeds_text({x: ab[a][x]['lift']['mean'] - ab[b][x]['lift']['mean'] for x in ab[a] if x in ab[b]})} | {f['p']:.3f} | {f['p_holm']:.3f} | "
                       f"{f['reading']} | {res(pn)} |")
        if len(seeds) < FIVE:
            out += ["", f"**{len(seeds)} seeds at this T**: below the page's five-seed rule, so no comparison of this T "
                    "is stated as a finding anywhere (README, guide, notebooks)."]
        best = max(STUDENTS, key=lambda m: stats.mean_sd([p["lift"]["mean"] for p in rows[m].values()])[0])
        out += ["", f"H3, the cost to reach {rep['plan']['target']:.0%} of the teachers' val lift, {LABEL[best]} (the "
                "MOPD form with the highest mean test lift here) over each offline baseline: geometric mean over the "
                "seeds where both reach it, 95% t-interval of the log ratio as a ratio interval; supported at this T "
                f"when the interval's upper end is below {CRITIQUE}x.", "",
                "| ratio | pipeline FLOPs | stage FLOPs | wall s | seeds | below 14.8x |", "| --- | --- | --- | --- | --- | --- |"]
        for b in OFFLINE:
            r = {k: cost_ratio(rows, best, b, k) for k in ("flops", "stage_flops", "seconds")}
            txt = lambda q: (f"{q['ratio']:.2f}x" + (f" [{math.exp(q['lo']):.2f}, {math.exp(q['hi']):.2f}]"  # noqa: E731
                                                      if not math.isnan(q["half"]) else "")) if q["n"] else "—"
            out.append(f"| {LABEL[best]} / {LABEL[b]} | {txt(r['flops'])} | {txt(r['stage_flops'])} | "
                       f"{txt(r['seconds'])} | {r['flops']['n']} | {below(r['flops'])} |")
        out.append("")
        out += [line for b in RECHECKED if f"recheck_{b}" in by_T for line in recheck_markdown(rep, int(key), b)]
    out += across_T(rep)
    out += decisions_markdown(rep)
    out += ["![lift and normalised score against pipeline FLOPs](figures/matched_cost.png)", ""]
    return "\n".join(out) + "\n"


def decisions(rep: dict) -> dict:
    """The registered rules (the page's "Hypotheses", on the mean lift) applied to the T's run:
    {"H1": ..., "H1'": ..., "H2": ..., "H3": ..., "by_T": {T: {comparison: paired}}}."""
    by_T = {int(k): v for k, v in rep["by_T"].items()}
    Ts = sorted(by_T)
    fam = family(rep)   # every decision reads the Holm-corrected resolution over the family (docs/matched.md)
    comp = {T: {f"{m}-mixrl": {**fam[(T, m, "mixrl")], "resolved": fam[(T, m, "mixrl")]["resolved_holm"]}
                for m in ("mopd_kl", "mopd_pg", "mopd_topk")} for T in Ts}
    out = {"by_T": comp, "Ts": Ts, "family": fam}
    resolved = {T: c["mopd_kl-mixrl"] for T, c in comp.items() if c["mopd_kl-mixrl"]["resolved"]}
    out["H1"] = ("not contradicted: MOPD exact KL minus Mix-RL is not resolved at any T run (" + ", ".join(map(str, Ts))
                 + ") after Holm's correction; not resolved is not a tie (no equivalence margin was registered)"
                 if not resolved else
                 "contradicted at " + ", ".join(f"T = {T} (MOPD exact KL {'ahead' if p['diff'] > 0 else 'behind'})"
                                                for T, p in resolved.items()))
    ahead = all(comp[T][f"{m}-mixrl"]["hi"] < 0 for T in Ts for m in ("mopd_kl", "mopd_pg", "mopd_topk"))
    out["H1'"] = ("supported" if ahead and set(Ts) >= {100, 200, 400} else
                  "not supported" if not ahead else "not decided (not every T has run)")
    if {100, 400} <= set(Ts):
        a, b = comp[100]["mopd_kl-mixrl"], comp[400]["mopd_kl-mixrl"]
        out["H2"] = ("supported" if a["resolved"] and b["resolved"] and (a["diff"] > 0) != (b["diff"] > 0) else
                     "not resolved (signs differ; neither is resolved after Holm's correction)"
                     if (a["diff"] > 0) != (b["diff"] > 0)
                     else "not supported (the same sign at T = 100 and 400)")
    else:
        out["H2"] = "not decided (T = 100 and 400 are both needed)"
    h3 = {}
    for T, v in by_T.items():
        best = max(STUDENTS, key=lambda m: stats.mean_sd([p["lift"]["mean"] for p in v["rows"][m].values()])[0])
        r = cost_ratio(v["rows"], best, "rft")
        h3[T] = (f"not decided ({LABEL[best]} / RFT, {r['n']} seeds reached the target: no interval)" if r["n"] < 2
                 else f"{'supported' if r['below_critique'] else 'not supported'} ({LABEL[best]} / RFT, {r['n']} seeds)")
        if len(v.get("seeds_done", [])) < FIVE and "seeds_done" in v:
            h3[T] += f", a T run with {len(v['seeds_done'])} seeds: below the five-seed rule, not a finding"
    out["H3"] = "; ".join(f"T = {T}: {d}" for T, d in sorted(h3.items())) or "not decided"
    return out


def decisions_markdown(rep: dict) -> list[str]:
    d = decisions(rep)
    txt = lambda p: f"{stats.interval_text(p)}, p (Holm) {p['p_holm']:.3f}: {p['reading']}"  # noqa: E731
    m = next(iter(d["family"].values()))["m"] if d["family"] else 0
    lines = ["### Decisions against the registered hypotheses", "",
             "The rules of \"Hypotheses\" above, applied to the tables above (mean lift, paired by seed, 95% "
             f"t-intervals), with the amended multiplicity rule: a comparison is resolved only when its Holm-adjusted "
             f"p over the family of {m} is below 0.05. H4 is descriptive: read it from the rows across T.", "",
             "H1 and H2 read the first column; H1' is supported only if all three columns are resolved below 0 "
             "(Mix-RL ahead) at every T.", "",
             "| T | seeds | MOPD exact KL minus Mix-RL | MOPD-PG minus Mix-RL | MOPD-Top-k minus Mix-RL |",
             "| --- | --- | --- | --- | --- |"]
    for T in d["Ts"]:
        c = d["by_T"][T]
        lines.append(f"| {T} | {c['mopd_kl-mixrl']['n']} | {txt(c['mopd_kl-mixrl'])} | {txt(c['mopd_pg-mixrl'])} | "
                     f"{txt(c['mopd_topk-mixrl'])} |")
    lines += ["", *(f"* **{h}**: {d[h]}" for h in ("H1", "H1'", "H2", "H3")), ""]
    survive = [(k, v) for k, v in d["family"].items() if v["resolved_holm"]]
    uncorrected = [(k, v) for k, v in d["family"].items() if v["resolved"] and not v["resolved_holm"]]
    lines += ["Resolved after Holm's correction over the family of " + f"{m}: "
              + ("; ".join(f"{LABEL[a]} minus {LABEL[b]} at T = {T}, {stats.interval_text(v)} (p (Holm) {v['p_holm']:.3f}; "
                           f"{stats.holm_interval_text(v, v['alpha_holm'])}"
                           + (f", {v['n']} seeds: below the five-seed rule" if v["n"] < FIVE else "") + ")"
                           for (T, a, b), v in survive) or "none") + ".", ""]
    if uncorrected:
        lines += ["Resolved only uncorrected (each 95% interval alone excludes 0; **not** resolved over the family, "
                  "so not a finding): " + "; ".join(f"{LABEL[a]} minus {LABEL[b]} at T = {T}, {stats.interval_text(v)} "
                                                    f"(p {v['p']:.3f}, p (Holm) {v['p_holm']:.3f}; "
                                                    f"{stats.holm_interval_text(v, v['alpha_holm'])}, which includes 0)"
                                                    for (T, a, b), v in uncorrected) + ".", ""]
    return lines


def figure(rep: dict, folder: Path) -> None:
    """Mean lift and mean normalised score (± sample std over seeds) against whole-pipeline FLOPs,
    log axis, one line per method of FIGURE (the merges as the best one on val) through its
    teacher budgets T (`views.cost_curves`): the
    sample-efficiency picture and the cost argument in one."""
    panels = {"mean accuracy lift over the base": {}, "mean normalised score": {}}
    for m in FIGURE:
        for key, by_T in sorted(rep["by_T"].items(), key=lambda kv: int(kv[0])):
            per = list(by_T["rows"][m].values())
            x = fmean(p["pipeline"]["flops"] for p in per)
            for panel, f in zip(panels, (lambda p: p["lift"]["mean"], lambda p: p["all"]["mean"])):
                panels[panel].setdefault(LABEL[m], []).append((x, *stats.mean_sd([f(p) for p in per]), f"T={key}"))
    fig = views.cost_curves(panels, title="Matched RL budget T, test split, mean ± std over seeds\n"
                            "`python -m bench.matched` (docs/matched.md names each T's command)")
    plots.save(fig, "matched_cost", folder)
    plt.close(fig)


def write(rep: dict, docs: Path = DOCS, source: Path | None = None, allow_shrink: bool = False) -> None:
    """docs/matched.json, the figure, and docs/matched.md's results section (the pre-registration
    above it is kept as committed). Rendered from the JSON at `source` (--render): refused before any
    write if the page would show fewer table rows than the one there (`slices.guard_render`)."""
    page = docs / "matched.md"
    head = above_header(page.read_text(), RESULTS).rstrip() + "\n\n" if page.exists() else "# Matched RL budgets\n\n"
    text = head + results_markdown(rep)
    if source is not None:
        text = slices.guard_render(page, text, source, rep, allow_shrink)
    atomic_write(docs / "matched.json", json.dumps(rep, indent=1, default=str).encode())
    figure(rep, docs / "figures")
    page.write_text(text)


# ---------------------------------------------------------------------------------------------
# the estimate: a few timed steps of every trainer, times the plan's steps
# ---------------------------------------------------------------------------------------------


def estimate(plan: Plan, steps: int = 4, seeds: int = 3, workers: int = 2) -> dict:
    """Time `steps` training steps of every trainer at the plan's batch sizes (in memory, on the
    tiny base) and one val evaluation at val_n, then multiply by what the plan trains and
    evaluates: the CPU seconds of the whole command and its wall time with `workers` processes
    (the teachers train in the main process before the workers start). Upper bounds, stated:
    the tie-break is counted for every method (its two best settings at seed 1), the
    bracketing for one extension per method, and the re-bracketing after the tie-break for one
    more setting per method on both seeds. On a shared machine the times are scaled by this
    process's CPU share (process time / wall time over the timed part) to a quiet machine's."""
    import torch
    from mopd_mini.offline import OfflineConfig, collect, train_offline

    torch.set_num_threads(1)
    bank = mm.AdapterBank(*mm.load_base("tiny"))
    common = dict(steps=steps, eval_every=0, experiment=None, progress=False)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    per_step = {}
    t = [mm.train_teacher(bank, mm.GRPOConfig(domain=d, prompts_per_step=plan.per_domain, group_size=plan.group, **common))
         for d in DOMAINS]
    per_step["teacher"] = fmean(r.seconds for r in t) / steps
    per_step["mixrl"] = mm.train_teacher(bank, mm.GRPOConfig(domain=DOMAINS, prompts_per_step=plan.per_domain,
                                                             group_size=plan.group, **common)).seconds / steps
    per_step["cascade"] = mm.train_teacher(bank, mm.GRPOConfig(domain="recall", init_from="teacher_binding", name="c",
                                                               prompts_per_step=plan.per_domain, group_size=plan.group,
                                                               **common)).seconds / steps
    for loss in ("pg", "topk", "kl"):
        per_step[f"mopd_{loss}"] = mm.train_student(bank, mm.MOPDConfig(
            loss=loss, prompts_per_domain=plan.per_domain, student=f"s_{loss}", track_steps=(), **common)).seconds / steps
    ocfg = OfflineConfig(prompts_per_domain=50, samples_per_prompt=4, batch_size=2 * plan.per_domain, **common)
    data = collect(bank, ocfg)
    per_sample = data.seconds / len(data.completions)
    for loss, m in (("sft", "rft"), ("soft", "soft")):
        per_step[m] = (train_offline(bank, OfflineConfig(**{**asdict(ocfg), "loss": loss}), data).seconds
                       - data.seconds) / steps
    started = time.perf_counter()
    mm.evaluate(bank, ["base"], n=plan.val_n, split="val")
    val_eval = time.perf_counter() - started
    share = (time.process_time() - cpu0) / (time.perf_counter() - wall0)
    curve_eval, test_eval = val_eval * plan.curve_n / plan.val_n, val_eval * plan.test_n / plan.val_n
    kind = {**{m: m for m in STUDENTS}, "mixrl": "mixrl", "cascade_br": "cascade", "cascade_rb": "cascade",
            "rft": "rft", "soft": "soft"}

    def run_s(m, n_steps, choice):
        return per_step[kind[m]] * n_steps + curve_eval * (n_steps // plan.eval_every) + (val_eval if choice else 0)

    def settings(m, T):   # (steps) of one run per grid setting, learning rates included
        if m in OFFLINE:
            return [n for n, _ in plan.offline for _ in plan.lrs[m]]
        return [T if m in RL else plan.student_steps] * len(plan.lrs[m])

    def chosen(m, T):     # one run at a typical chosen setting
        return sum(settings(m, T)) / len(settings(m, T))

    total, teachers_s, lines = 0.0, 0.0, []
    ks = sorted({k for _, k in plan.offline})
    for T in plan.Ts:
        teach = 2 * per_step["teacher"] * T
        ms = STUDENTS + RL + OFFLINE
        grid = sum(run_s(m, n, True) for m in ms for n in settings(m, T))
        extend = sum(run_s(m, chosen(m, T), True) for m in ms)
        tie = sum(2 * run_s(m, chosen(m, T), True) for m in ms)
        tie += sum(2 * run_s(m, chosen(m, T), True) for m in ms)   # one re-bracketing after it (two seeds)
        tests = (seeds - 1) * sum(run_s(m, chosen(m, T), False) for m in ms)
        sampling = seeds * sum(ks) * plan.offline_prompts * len(DOMAINS) * per_sample
        evals = seeds * len(METHODS) * test_eval + 3 * (val_eval + test_eval) + sum(len(plan.merge_grid[h]) for h in MERGES) * val_eval
        teachers_s += teach
        total += grid + extend + tie + tests + sampling + evals
        lines.append(f"T={T}: teachers {teach:.0f} s (main process), grid {grid:.0f} s, bracketing <= {extend:.0f} s, "
                     f"tie-break and one re-bracketing <= {tie:.0f} s, other seeds {tests:.0f} s, teachers' sampling {sampling:.0f} s, "
                     f"test and merge evaluations {evals:.0f} s")
    wall = teachers_s + total / workers
    return {"per_step_s": per_step, "per_collected_sample_s": per_sample, "val_eval_s": val_eval,
            "cpu_share": share, "lines": lines, "cpu_s": teachers_s + total, "wall_s": wall,
            "quiet_wall_s": wall * share, "workers": workers, "machine": machine_line()}


# ---------------------------------------------------------------------------------------------
# the course-setting check of the stuck student's cures (docs/regimes.md, "Amendment, 2026-12-03:
# arm 2b", "Course-setting check"): the four cures beside exact KL at one T, on this sweep's protocol
# (its table, grid and section: studies.cures; here the training on this sweep's runner)
# ---------------------------------------------------------------------------------------------


def train_cure(bench, key: str, setting: dict, seed: int) -> study.Result:
    """One run of a cure at (setting, seed): bench.baselines' MOPD run (its budget, evaluations and
    folder) with the cure's MOPDConfig fields and the setting's beta (jsd)."""
    fields = {**CURE_FIELDS[key], **{k: v for k, v in setting.items() if k != "lr"}}
    name = f"{key}_lr{study.tag(setting['lr'])}" + "".join(f"_b{study.tag(v)}" for k, v in setting.items()
                                                           if k == "beta") + f"_s{seed}"
    run = mm.train_student(bench.bank, mm.MOPDConfig.for_model(
        "tiny", prompts_per_domain=bench.proto.per_domain, student=name, track_steps=(), **fields,
        **bench.common(seed, setting["lr"])))
    return study.Result.of(name, run)


def declare_cures(plan: Plan, T: int, quick: bool) -> study.Study:
    """The check on the runner: exact KL (trained as the sweep trains it: the same run names, so a
    folder holding the sweep's runs at T reloads them) and the four cures, each on its grid, with the
    sweep's bracketing, tie-break and val choice; the teachers are the sweep's at T (its folder)."""
    def method(m):
        train = ((lambda bench, s, seed: bench.train(m, s["lr"], seed)) if m == "mopd_kl" else
                 (lambda bench, s, seed: train_cure(bench, m, s, seed)))
        return study.Method(train, grid=cure_grid(plan, m), needs=baselines.needs(m), extend=extend_lr)

    return declared(plan, T, quick, {m: method(m) for m in CURES_METHODS}, flag=("--cures",))


def summarise_cures(declared: study.Study, plan: Plan, T: int):
    """The sweep's report of a T (its rows, grids, choices, teachers and their sha256), each row with
    the stuck share and the off-support mass at steps 50, 100, 300 and the last, and their per-step
    series (`series_of`; descriptive)."""
    base = matched_report(declared, plan, T)

    def report(bench, state: study.State) -> dict:
        rep = base(bench, state)
        for m, per in rep["rows"].items():
            for seed, row in per.items():
                run = state.per_seed[seed][m].run
                row["stuck_share"], row["off_support"] = logged_at(run, "stuck_share"), logged_at(run, "off_support")
                row["stuck_series"] = series_of(run)
        return rep
    return report


# ---------------------------------------------------------------------------------------------
# the re-check of a registered comparison at one T (docs/matched.md, amendment of 2026-12-06): MOPD
# exact KL and the baseline trained again on fresh teachers, each on its sweep grid by the runner
# ---------------------------------------------------------------------------------------------

RECHECK_T = 400                                         # the T the amendment names
RECHECK_EXPERIMENT = "matched-recheck"
"""the re-check's run folder (runs/matched-recheck/): its own, so its teachers are trained by it, never
reloaded from the sweep's folder"""
RECHECKED = {"rft": "in the sweep's run at T = 400 RFT's choice sat on its grid's edge at 3e-3, where the tie-break put "
                    "it before the runner re-bracketed such a choice, and that run kept no hash of its teachers"}
"""`--recheck B`: MOPD exact KL minus B trained again, and why the amendment registered it"""
RECHECK_ESTIMATE = (0.6, 1.3)
"""the re-check's CPU-hours on a quiet machine as registered (docs/matched.md, amendment of 2026-12-06)"""
RECHECK_HEADING = "### Re-check at T ="


def declare_recheck(against: str):
    """The re-check of "MOPD exact KL minus `against`": both trained as the sweep trains them (its grids,
    bracketing, tie-break and val choice, `sweep_method`) in their own run folder, on teachers this
    study trains (their sha256 recorded by `matched_report`)."""
    def declare_at(plan: Plan, T: int, quick: bool) -> study.Study:
        return declared(plan, T, quick, {m: sweep_method(plan, T, m) for m in ("mopd_kl", against)},
                        flag=("--recheck", against), experiment=RECHECK_EXPERIMENT)
    return declare_at


def complete(block: dict) -> bool:
    """A check's block holds every seed its command asked for, and at least the page's five."""
    return not study.unfinished(block["command"], block["seeds_done"]) and len(block["seeds_done"]) >= FIVE


def compared_rows(by_T: dict, a: str, b: str) -> tuple[dict, str | None]:
    """The rows the registered comparison a minus b reads at a T, and where from: a complete re-check
    of b there (`by_T.<T>.recheck_<b>`, holding a too) in place of the sweep's recorded rows (the
    amendment of 2026-12-06), else the sweep's (None)."""
    block = by_T.get(f"recheck_{b}")
    if block and a in block.get("rows", {}) and complete(block):
        return block["rows"], f"recheck_{b}"
    return by_T.get("rows", {}), None


def recheck_markdown(rep: dict, T: int, against: str) -> list[str]:
    """The re-check's section of docs/matched.md's Results (a function of matched.json: its block at T,
    the sweep's recorded rows there beside it, and the family of the other T)."""
    key, a, b = f"recheck_{against}", "mopd_kl", against
    by_T = rep["by_T"][str(T)]
    block = by_T[key]
    rows, seeds, recorded = block["rows"], block["seeds_done"], by_T.get("rows", {})
    used = compared_rows(by_T, a, b)[1] == key
    out = [f"{RECHECK_HEADING} {T}: {LABEL[a]} and {LABEL[b]} on fresh teachers", "",
           f"Written by `{block['command']}`, finished {block['date']}, on {machine_line(block['machine'])}. Its "
           f"registration is this page's amendment of 2026-12-06 ({RECHECKED[b]}); its data is docs/matched.json, "
           f"`by_T.{T}.{key}`, beside the sweep's recorded rows at T = {T}.", "",
           *study.unfinished(block["command"], seeds), *study.spent_line(block, RECHECK_ESTIMATE, "2026-12-06"),
           teachers_line(by_T, block, T, f"trained by this command in its own run folder (runs/{RECHECK_EXPERIMENT}/; in "
                         "slices by its set-up job, kept in docs/matched_inputs/)") + f" {LABEL[a]} and {LABEL[b]} are "
           "both trained on them, each on the sweep's grid by the same runner (bracketed past an edge, before and after "
           "the tie-break), and paired by seed: the same teachers, seeds and test prompts.", "",
           "Test split, mean ± sample std over seeds (ddof = 1), as in the T tables above.", "",
           *method_table(rep, block, (a, b)), "", *choice_lines(block, (a, b), LABEL), ""]
    per = {f"{LABEL[m]}, this re-check": rows[m] for m in (a, b)}
    per.update({f"{LABEL[m]}, the sweep's recorded run": recorded[m] for m in (a, b) if m in recorded})
    out += [f"Per seed, mean test lift (the sweep's recorded rows at T = {T}: descriptive, its own teachers):", "",
            "| method | " + " | ".join(f"seed {s}" for s in seeds) + " |", "| --- | " + " | ".join("---" for _ in seeds) + " |"]
    out += [f"| {label} | " + " | ".join(f"{v[str(s)]['lift']['mean']:.3f}" if str(s) in v else "—" for s in seeds) + " |"
            for label, v in per.items()]
    here = family(rep, {(T, a, b): rows})[(T, a, b)]
    before = family(rep, {(T, a, b): recorded})[(T, a, b)] if a in recorded and b in recorded else None
    txt = lambda f: (f"{stats.interval_text(f)} [{f['lo']:+.3f}, {f['hi']:+.3f}] (n = {f['n']}) | {f['p']:.3f} | "  # noqa: E731
                     f"{f['p_holm']:.3f} | {f['reading']}")
    out += ["", f"{LABEL[a]} minus {LABEL[b]} at T = {T}, on the mean lift (the primary metric), paired by seed: mean "
            "difference ± 95% t half-width [interval], the paired t-test's p, and its Holm adjustment over the registered "
            f"family of {here['m']} with this comparison in the place of the sweep's cell at T = {T} (the amendment of "
            "2026-12-03's rule: resolved only when p (Holm) < 0.05; no equivalence margin was registered, so nothing is "
            "called equal). The sweep's recorded cell is shown beside it.", "",
            "| comparison | mean lift | p | p (Holm) | reading (Holm) |", "| --- | --- | --- | --- | --- |",
            f"| {LABEL[a]} minus {LABEL[b]}, this re-check | {txt(here)} |"]
    if before is not None:
        out.append(f"| {LABEL[a]} minus {LABEL[b]}, the sweep's recorded run | {txt(before)} |")
    norm = study.paired_rows(rows, a, b)
    ratio = cost_ratio(rows, a, b) if all("reach" in p for m in (a, b) for p in rows[m].values()) else None
    out += ["", f"Descriptive, outside the family: the normalised score's difference {stats.interval_text(norm)} "
            f"(n = {norm['n']})" + (f"; {LABEL[a]} / {LABEL[b]} pipeline FLOPs to {rep['plan']['target']:.0%} of the "
            f"teachers' val lift, geometric mean {ratio['ratio']:.2f}x over the {ratio['n']} seeds where both reach it"
            if ratio and ratio["n"] else "") + ". H3 at this T reads the MOPD form with the highest mean lift, which "
            "the re-check does not train again: its row above stands."]
    for m in (a, b):
        if m in recorded:
            d = study.paired_rows({"here": rows[m], "recorded": recorded[m]}, "here", "recorded", "lift")
            out.append("")
            out.append(f"{LABEL[m]} here minus the sweep's recorded {LABEL[m]}, mean lift: {stats.interval_text(d)} "
                       f"(n = {d['n']}; the same grid and seeds, teachers trained again).")
    out += ["", (f"**The registered comparison at T = {T} now reads from this re-check**: {here['reading']} (p (Holm) "
                 f"{here['p_holm']:.3f}); the T = {T} paired table above and the decisions below use it." if used else
                 f"**Not in use**: {len(seeds)} seeds recorded of the amendment's {FIVE} (or of the seeds its command "
                 f"asked for), so the T = {T} paired table and the decisions keep the sweep's recorded cell."), ""]
    return out


def recheck_sections(rep: dict) -> list[str]:
    """Every re-check section of a matched.json (the whole Results page: `results_markdown`)."""
    return [line for key, by_T in sorted(rep.get("by_T", {}).items(), key=lambda kv: int(kv[0])) for b in RECHECKED
            if f"recheck_{b}" in by_T for line in recheck_markdown(rep, int(key), b)]


# ---------------------------------------------------------------------------------------------
# a check beside the sweep (the cures at T = 200, a re-check at T = 400): declared, run, written
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Check:
    """A check at one T on the sweep's runner: its methods (`declare(plan, T, quick)`), its report
    (`summarise(declared, plan, T)`, as study.run takes it), kept in matched.json's `by_T.<T>.<key>`
    and rendered on the page that registered it (`render(matched.json, out)`, `sections(matched.json)`)."""

    key: str
    flag: tuple                   # the command-line words that select it
    T: int                        # the T its registration names (the default --T)
    methods: tuple
    declare: Callable
    summarise: Callable
    render: Callable
    sections: Callable
    registered: tuple             # its CPU-hours on a quiet machine as registered, and the amendment's date


CHECKS = {"cures": Check("cures", ("--cures",), CURES_T, CURES_METHODS, declare_cures, summarise_cures, render_cures,
                         cures_sections, (CURES_ESTIMATE, "2026-12-04")),
          **{f"recheck_{b}": Check(f"recheck_{b}", ("--recheck", b), RECHECK_T, ("mopd_kl", b), declare_recheck(b),
                                   matched_report, write, recheck_sections,
                                   (RECHECK_ESTIMATE, "2026-12-06")) for b in RECHECKED}}


def check_of(args) -> Check | None:
    """The check the command asks for (`--cures`, `--recheck B`), or None: the sweep."""
    if getattr(args, "cures", False) and getattr(args, "recheck", None):
        raise SystemExit("--cures and --recheck are two checks: run them one at a time")
    if getattr(args, "cures", False):
        return CHECKS["cures"]
    return CHECKS[f"recheck_{args.recheck}"] if getattr(args, "recheck", None) else None


def write_check(rep: dict, out: Path, check: Check, source: Path | None = None, allow_shrink: bool = False) -> None:
    """The check's blocks into out/matched.json (read again now: every other key as it is on disk)
    and its page from them. Rendered from the JSON at `source` (--render): the page is checked
    (`slices.guard_render`) and written first, so a refused render writes nothing."""
    saved = out / "matched.json"
    kind = "matched-cures" if check.key == "cures" else "matched"
    disk = slices.read_record(saved, kind) if source is not None else json.loads(saved.read_text())
    for key, by_T in rep["by_T"].items():
        if check.key in by_T:
            disk["by_T"][key][check.key] = by_T[check.key]
    check.render(disk, out, source, allow_shrink)       # the page first: a refused render writes nothing
    atomic_write(saved, json.dumps(disk, indent=1, default=str).encode())


def write_cures(rep: dict, out: Path) -> None:
    """The `cures` blocks into out/matched.json and their sections into out/regimes.md's Results."""
    write_check(rep, out, CHECKS["cures"])


def check_target(out: Path, Ts: tuple, check: Check) -> dict:
    """matched.json's sweep at each T (a check is written beside it), before anything trains."""
    saved = out / "matched.json"
    rep = json.loads(saved.read_text()) if saved.exists() else {}
    missing = [T for T in Ts if "rows" not in rep.get("by_T", {}).get(str(T), {})]
    if missing:
        raise SystemExit(f"{' '.join(check.flag)} writes beside the matched sweep's run at T = {missing} in {saved}, which "
                         f"has none: run `python -m studies.matched --T {missing[0]}` first, or pass --no-write")
    return rep


def check_block(part: dict, plan: Plan, cmd: str, where: dict) -> dict:
    """matched.json's `by_T.<T>.<check>`: the runner's report, the plan, the command, date and machine."""
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return json.loads(json.dumps({**part, "plan": {k: getattr(plan, k) for k in ("student_steps", "per_domain", "val_n",
                                                                                 "test_n", "target")},
                                  "command": cmd, "date": date, "machine": where}, default=str))


def run_check(args, plan: Plan, Ts: tuple, argv, check: Check) -> dict:
    """The check at each T: the runner's protocol, the block written after every seed (resumable:
    the runs and evaluations reload from its run folder at T)."""
    out = Path(args.out)
    rep = {"by_T": {str(T): {} for T in Ts}}
    if not args.no_write:
        target = check_target(out, Ts, check)
        rep["by_T"] = {str(T): target["by_T"][str(T)] for T in Ts}
    cmd, where = command("studies.matched", argv), machine()
    for T in Ts:
        declared_ = check.declare(plan, T, args.quick)

        def save(part, T=T):
            rep["by_T"][str(T)][check.key] = check_block(part, plan, cmd, where)
            if not args.no_write:
                write_check(rep, out, check)

        study.run(declared_, seeds=args.seeds, n=plan.test_n, val_n=plan.val_n, workers=args.workers,
                  quiet=args.quiet, summarise=check.summarise(declared_, plan, T), write=save)
    print("\n".join(check.sections(rep)))
    return rep


def estimate_check(plan: Plan, T: int, seeds: int, workers: int, check: Check, quick: bool = False,
                   steps: int = 4) -> dict:
    """A check's time: `steps` timed steps of the teachers' GRPO and of each method at the plan's batch
    sizes (in memory, on the tiny base; a method at its grid's middle setting; an offline one's teachers'
    sampling timed per completion) and one val evaluation, times what the runner trains and evaluates. Two
    figures: the least (each grid at seed 0, the other seeds at a run of the grid's mean length, no
    bracketing or tie-break) and the most (every extension the runner allows: `plan.extend` past the
    edge, the tie-break's two settings at seed 1, `Study.rebracket` more on two seeds, each and the other
    seeds at the grid's longest run); the teachers once, in the main process. Scaled by this process's CPU
    share to a quiet machine's, as `estimate` is."""
    import torch
    from mopd_mini.offline import OfflineConfig, collect, train_offline

    torch.set_num_threads(1)
    grids = {m: meth.grid for m, meth in check.declare(plan, T, quick).methods.items()}
    bank = mm.AdapterBank(*mm.load_base("tiny"))
    common = dict(steps=steps, eval_every=0, experiment=None, progress=False)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    teacher = fmean(mm.train_teacher(bank, mm.GRPOConfig(domain=d, prompts_per_step=plan.per_domain,
                                                         group_size=plan.group, **common)).seconds for d in DOMAINS) / steps
    per_step, per_sample = {}, 0.0
    for m in check.methods:
        setting = grids[m][len(grids[m]) // 2]
        if m in OFFLINE:
            cfg = OfflineConfig(loss={"rft": "sft", "soft": "soft"}[m], prompts_per_domain=50, samples_per_prompt=4,
                                batch_size=2 * plan.per_domain, name=f"probe_{m}", **common)
            data = collect(bank, cfg)
            per_sample = data.seconds / len(data.completions)
            per_step[m] = (train_offline(bank, cfg, data).seconds - data.seconds) / steps
            continue
        fields = {**CURE_FIELDS.get(m, {"loss": m.split("_")[1]}), **{k: v for k, v in setting.items() if k != "lr"}}
        per_step[m] = mm.train_student(bank, mm.MOPDConfig(prompts_per_domain=plan.per_domain, student=f"probe_{m}",
                                                           track_steps=(), **fields, **common)).seconds / steps
    started = time.perf_counter()
    mm.evaluate(bank, ["base"], n=plan.val_n, split="val")
    val_eval = time.perf_counter() - started
    share = (time.process_time() - cpu0) / (time.perf_counter() - wall0)
    curve_eval, test_eval = val_eval * plan.curve_n / plan.val_n, val_eval * plan.test_n / plan.val_n

    def run_s(m, s):      # one run at setting s: the teachers' sampling (offline), its steps, its curve evaluations
        n = s.get("steps", plan.student_steps)
        sampled = s["k"] * plan.offline_prompts * len(DOMAINS) * per_sample if m in OFFLINE else 0.0
        return sampled + per_step[m] * n + curve_eval * (n // plan.eval_every)

    mean_run = {m: fmean(run_s(m, s) for s in grids[m]) for m in check.methods}
    long_run = {m: max(run_s(m, s) for s in grids[m]) for m in check.methods}
    grid = sum(run_s(m, s) + val_eval for m in check.methods for s in grids[m])
    more = sum((plan.extend + 2 + 2 * study.Study.rebracket) * (long_run[m] + val_eval) for m in check.methods)
    tests = seeds * len(check.methods) * test_eval + 3 * (val_eval + test_eval)
    others, others_most = (seeds - 1) * sum(mean_run.values()) + tests, (seeds - 1) * sum(long_run.values()) + tests
    teachers = 2 * teacher * T
    least, most = teachers + grid + others, teachers + grid + more + others_most
    lines = [f"{m}: {per_step[m]:.3f} s a step, {mean_run[m] / 60:.1f} min a run on average over its grid of "
             f"{len(grids[m])} (the longest {long_run[m] / 60:.1f} min)" for m in check.methods]
    lines += [f"teachers {teachers:.0f} s (main process, when the folder does not hold them), the val grid {grid:.0f} s, "
              f"bracketing and tie-breaks at most {more:.0f} s, seeds 1.. and the test evaluations {others:.0f} to "
              f"{others_most:.0f} s"]
    return {"per_step_s": {"teacher": teacher, **per_step}, "per_collected_sample_s": per_sample, "val_eval_s": val_eval,
            "cpu_share": share, "lines": lines, "cpu_s": [least, most], "quiet_cpu_s": [share * least, share * most],
            "wall_s": [teachers + (least - teachers) / workers, teachers + (most - teachers) / workers],
            "quiet_wall_s": [share * (teachers + (x - teachers) / workers) for x in (least, most)], "workers": workers,
            "machine": machine_line()}


# ---------------------------------------------------------------------------------------------
# in time-boxed slices (--hours): every run one recorded job (studies.sliced), kept beside the JSON
# ---------------------------------------------------------------------------------------------

JOBS = "matched_jobs.json"
"""the sliced runs' records (docs/), one store for every T and the cures' check, each under its key"""
INPUTS = "matched_inputs"
"""the folder beside it holding what a later job reads (teachers, the val choice's adapters) and every
run's metrics (tracked by git)"""


SETUP_S, TEACHER_STEP_S = 120.0, 0.5
"""the set-up job's estimate before any is recorded: loading and the references' evaluations, and a
GRPO teacher step (an Intel Xeon core: 200 steps in about 12 s; this allows 8x that)"""


def sliced_key(T: int, check: Check | None, quick: bool) -> str:
    """The records' key of the study at T, or of a check there: T200-cures, T400-recheck-rft, T2-quick."""
    return f"T{T}" + (f"-{check.key.replace('_', '-')}" if check else "") + ("-quick" if quick else "")


def sliced_study(args, plan: Plan, T: int) -> sliced.Sliced:
    """The study at T (or the check the command asks for: --cures, --recheck B) as studies.sliced's
    jobs: each a process of this module with the same options and `--job`."""
    out, check = Path(args.out), check_of(args)
    made = (check.declare if check else declare)(plan, T, args.quick)
    store = slices.Store(out / JOBS, lambda: runs.RUNS_DIR / "matched_jobs.lock", ("jobs", "plans", "slices"))
    base = [slices.python(), "-m", "studies.matched", "--T", str(T), "--out", str(out), "--quiet",
            "--seeds", *map(str, args.seeds), *(check.flag if check else ()), *(["--quick"] if args.quick else [])]
    return sliced.Sliced(made, key=sliced_key(T, check, args.quick), store=store,
                         inputs=slices.Inputs(out / INPUTS, slices.files_digest), seeds=args.seeds, n=plan.test_n,
                         val_n=plan.val_n, job_argv=lambda job: base + ["--job", json.dumps(job)],
                         setup_s=SETUP_S + 2 * T * TEACHER_STEP_S)


def run_sliced(args, plan: Plan, Ts: tuple, argv) -> dict | None:
    """Each T in slices inside `--hours`: its jobs, then, once every one is recorded, its report written
    as the whole command writes it (the sweep's `by_T.<T>`, or a check's block there and its page's
    section). A T not complete writes nothing to matched.json or the pages."""
    out, deadline, check = Path(args.out), slices.Deadline(args.hours), check_of(args)
    again = slices.continuing("studies.matched", list(argv) if argv is not None else sys.argv[1:])
    saved = out / "matched.json"
    rep = json.loads(saved.read_text()) if saved.exists() else {"by_T": {}}
    if check:
        check_target(out, Ts, check)
    for T in Ts:
        job = sliced_study(args, plan, T)
        (out / INPUTS).mkdir(parents=True, exist_ok=True)
        runs.RUNS_DIR.mkdir(parents=True, exist_ok=True)
        if not job.run(workers=args.workers, deadline=deadline, again=again):
            return None
        part = job.report((check.summarise if check else matched_report)(job.s, plan, T))
        cmd = command("studies.matched", argv) + f" (in slices: {JOBS}, machines: {' | '.join(job.machines())})"
        if check:
            rep["by_T"][str(T)][check.key] = check_block(part, plan, cmd, machine())
            write_check(rep, out, check)
        else:
            now = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
            kept = {k: v for k, v in rep["by_T"].get(str(T), {}).items() if k in CHECKS}
            rep["by_T"][str(T)] = json.loads(json.dumps({**part, "command": cmd, "date": now, "machine": machine()},
                                                        default=str))
            rep["by_T"][str(T)].update(kept)              # the checks at this T are kept as written
            rep.update(date=now, flops_formula=cost.FORMULA)
            rep.setdefault("plan", {**asdict(plan), "Ts": []})["Ts"] = sorted({*rep["plan"]["Ts"], T})
            write(rep, out)
        print(f"T = {T}: every job recorded; the report is written")
    return rep


# ---------------------------------------------------------------------------------------------


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--T", type=int, nargs="+", help="teacher budgets to run (default: the plan's)")
    p.add_argument("--quick", action="store_true", help="tiny budgets, seconds: the smoke test")
    p.add_argument("--no-write", action="store_true", help="print only; docs/ is left alone")
    slices.quiet_flag(p)
    p.add_argument("--out", default=str(DOCS), help="where matched.json, the results in matched.md and the figure go")
    p.add_argument("--workers", type=int, default=1, help="train in this many processes of one torch thread")
    p.add_argument("--estimate", action="store_true", help="time a few steps of every trainer and print the "
                   "plan's CPU and wall time (nothing trained to disk)")
    p.add_argument("--render", metavar="JSON", help="rewrite the results section and figure from a saved matched.json")
    p.add_argument("--allow-shrink", action="store_true", help="with --render: write the page even if it shows "
                   "fewer table rows than the one at --out (recorded in the JSON and said on the page)")
    p.add_argument("--cures", action="store_true", help="the stuck student's cures beside exact KL at --T (default "
                   f"{CURES_T}): docs/regimes.md's course-setting check, written to matched.json's by_T.<T>.cures and "
                   "regimes.md's Results")
    p.add_argument("--recheck", choices=RECHECKED, help="MOPD exact KL and this baseline trained again on fresh "
                   f"teachers at --T (default {RECHECK_T}), each on its grid, paired: docs/matched.md's amendment of "
                   "2026-12-06, written to matched.json's by_T.<T>.recheck_<B> and matched.md's Results")
    p.add_argument("--hours", type=float, help="run in a time-boxed slice of this many hours (less 10 minutes to "
                   "write): every run a recorded job, kept in docs/matched_jobs.json and docs/matched_inputs/; the "
                   "same command continues, on any machine")
    p.add_argument("--status", action="store_true", help="what the slices recorded and what is left (no torch)")
    p.add_argument("--job", help=argparse.SUPPRESS)                  # one job of a slice, in its own process
    p.add_argument("--n", type=int, help=argparse.SUPPRESS)          # set by the runner for its workers
    study.add_worker_args(p)
    args = p.parse_args(argv)
    plan = QUICK if args.quick else FULL
    if args.workers < 1:
        raise SystemExit(f"--workers must be >= 1, got {args.workers}")
    if args.status:
        return slices.jobs_status_main("matched", ["--out", args.out])
    if args.job is not None:
        return sliced_study(args, plan, args.T[0]).job(json.loads(args.job))
    if args.worker is not None:
        check = check_of(args)
        made = (check.declare if check else declare)(plan, args.T[0], args.quick)
        return study.worker_main(made, args.worker, args.jobs, plan.test_n, plan.val_n)
    check = check_of(args)
    if args.estimate and check:
        est = estimate_check(plan, (args.T or [check.T])[0], seeds=len(args.seeds), workers=args.workers, check=check,
                             quick=args.quick)
        print(json.dumps(est, indent=1))
        h = lambda k: f"{est[k][0] / 3600:.1f} to {est[k][1] / 3600:.1f}"  # noqa: E731
        print(f"estimate ({' '.join(check.flag)}): {h('cpu_s')} CPU-hours as measured, {h('wall_s')} h wall with {est['workers']} "
              f"worker(s); on a quiet machine (CPU share {est['cpu_share']:.2f}) {h('quiet_cpu_s')} CPU-hours, "
              f"{h('quiet_wall_s')} h wall")
        return est
    if args.estimate:
        est = estimate(plan, seeds=len(args.seeds), workers=max(args.workers, 2))
        print(json.dumps(est, indent=1))
        print(f"estimate: {est['cpu_s'] / 3600:.1f} CPU-hours as measured; {est['wall_s'] / 3600:.1f} h wall with "
              f"{est['workers']} workers; {est['quiet_wall_s'] / 3600:.1f} h on a quiet machine (CPU share "
              f"{est['cpu_share']:.2f})")
        return est
    if args.render and check:
        source = Path(args.render)
        rep = slices.read_record(source, "matched-cures" if check.key == "cures" else "matched")
        with slices.rendering(source):
            if not args.no_write:
                write_check(rep, Path(args.out), check, source, args.allow_shrink)
            print("\n".join(check.sections(rep)))
        return rep
    if args.render:
        source = Path(args.render)
        rep = slices.read_record(source, "matched")
        with slices.rendering(source):
            if not args.no_write:
                write(rep, Path(args.out), source, args.allow_shrink)
            print(results_markdown(rep))
        return rep
    Ts = tuple(args.T or (plan.Ts if args.quick or not check else (check.T,)))
    unknown = [T for T in Ts if T < 1]
    if unknown:
        raise SystemExit(f"--T must be >= 1 steps, got {unknown}")
    if args.hours is not None:
        if args.no_write:
            raise SystemExit("--hours keeps every job's record in docs/: it cannot run with --no-write")
        return run_sliced(args, plan, Ts, argv)
    if check:
        return run_check(args, plan, Ts, argv, check)
    out = Path(args.out)
    saved = out / "matched.json"
    rep = {"command": command("studies.matched", argv), "machine": machine(), "plan": {**asdict(plan), "Ts": list(Ts)},
           "flops_formula": cost.FORMULA, "by_T": {}}
    if not args.no_write and saved.exists() and not args.quick:   # resume: keep every T already reported,
        rep["by_T"] = json.loads(saved.read_text()).get("by_T", {})  # those this command does not run included
        rep["plan"]["Ts"] = sorted({*Ts, *map(int, rep["by_T"])})

    for T in Ts:
        declared = declare(plan, T, args.quick)

        def save(part, T=T):
            rep["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
            rep["by_T"][str(T)] = {**part, "command": rep["command"], "date": rep["date"], "machine": rep["machine"]}
            kept = json.loads(saved.read_text())["by_T"].get(str(T), {}) if saved.exists() and not args.no_write else {}
            rep["by_T"][str(T)].update({k: v for k, v in kept.items() if k in CHECKS})   # the checks kept as written
            if not args.no_write:
                write(rep, out)

        study.run(declared, seeds=args.seeds, n=plan.test_n, val_n=plan.val_n, workers=args.workers,
                  quiet=args.quiet, summarise=matched_report(declared, plan, T), write=save)
    rep["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(results_markdown(json.loads(json.dumps(rep, default=str))))
    return rep


if __name__ == "__main__":
    main()
