"""Three ablations on the tiny default, 3 seeds: a binding teacher of another origin, multi-round
MOPD, and UCMOPD vs plain MOPD. Rewrites docs/ablations.md, docs/ablations.json and the figures
docs/figures/ablation_*.png.

    python -m studies.ablations --workers 2                  # everything, seeds 0 1 2
    python -m studies.ablations --seeds 0 --studies origin   # a part
    python -m studies.ablations --quick --no-write           # a smoke test of every code path (seconds)

The studies are the functions of `mopd_mini.ablation_runs` (notebook 06 runs them for one seed),
and this study's own arms (`round1_control`, `specialist`, `ucmopd_own`), declared over the one
study runner (studies.study: its workers and its store of evaluations); runs live in runs/ablations/
(the other base's teacher in runs/ablations/other_strong/), so a re-run reloads finished ones and
evaluates only what runs/ablations/evals.json lacks. One torch thread per process; `--workers 2`
trains the runs in two processes (the normal students first, then the studies' own runs), and
the main process then reloads them, evaluates and writes: the same numbers, sooner.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")
import torch  # noqa: E402

import mopd_mini as mm  # noqa: E402
from mopd_mini import ablation_runs as ab  # noqa: E402
from mopd_mini import plots, views  # noqa: E402
from mopd_mini.adapters import atomic_write  # noqa: E402

from mopd_mini import stats  # noqa: E402

from tools.provenance import command, machine_line  # noqa: E402
from . import slices  # noqa: E402
from .study import Evals, Method, Study, add_worker_args, in_workers, worker_main  # noqa: E402

DOCS = Path(__file__).resolve().parents[1] / "docs"
STUDIES = ("origin", "rounds", "ucmopd", "control", "ucmopd_own")


EXP = "ablations"   # every run's experiment: runs/ablations/ (MOPD_FAST=1: runs/ablations-fast/)


def mean_sd_cell(c, digits=2, signed=False):
    """'mean ± std' of a (mean, std) pair of the summary; '-' without a mean, the mean alone without a std."""
    if c is None or c[0] is None:
        return "-"
    f = f"{{:{'+' if signed else ''}.{digits}f}}"
    return f.format(c[0]) + (f" ± {c[1]:.{digits}f}" if c[1] else "")


# ---------------------------------------------------------------------------------------------
# the study's own arms (notebook 06 runs the others, from mopd_mini.ablation_runs)
# ---------------------------------------------------------------------------------------------


def round1_control(bank, seed: int, experiment: str = EXP, quick: bool = False, steps: int = 300, **overrides) -> dict:
    """The control multi_round lacks: a round-1 student (MOPD-PG from the base, the round-1
    teachers) trained for TWICE the steps, student_pg_long_s<seed>, as many distillation steps
    as the round-2 student started from the round-1 student has had in all."""
    name = f"student_pg_long_s{seed}"
    run = mm.train_student(bank, ab.student_config(name, seed, experiment, quick, 2 * steps, loss="pg", **overrides))
    return {"runs": {name: {"steps": run.config.get("steps"), "seed": seed, "curve": ab.logged_curve(run)}}}


SPECIALIST = "specialist_rb"
"""UCMOPD's own setting: Cascade RL recall -> binding (GRPO on binding from a copy of the recall
teacher), a binding specialist that forgets recall while specialising"""


SPECIALIST_STEPS = 300
"""its GRPO steps on binding (the baselines' Cascade RL second stage: the course's student budget)"""


def specialist(bank, experiment: str = EXP, quick: bool = False, steps: int = SPECIALIST_STEPS) -> str:
    """The specialist that forgot (seed 0, shared by every seed, as the teachers are): the second
    stage of the cascade recall -> binding, `steps` GRPO steps (the baselines' cascade budget)."""
    mm.train_grpo(bank, ab.teacher_config("binding", 0, experiment, quick, steps, init_from="teacher_recall",
                                          name=SPECIALIST, eval_domains=("recall",)))
    return SPECIALIST


def ucmopd_own(bank, seed: int, experiment: str = EXP, quick: bool = False, steps: int | None = None,
               **overrides) -> dict:
    """UCMOPD where its claim applies: every student starts from a copy of the specialist that
    forgot recall; binding prompts are scored by the specialist itself (keep the specialty), recall
    prompts by the recall teacher (the general capability to recover). Three students: plain MOPD
    (1 rollout per prompt), MOPD with UCMOPD's rollout budget (4x the prompts per domain: as many
    rollouts per step as UCMOPD's anchor + m = 3 explorations), and UCMOPD."""
    start = specialist(bank, experiment, quick)
    route = {"binding": start, "recall": "teacher_recall"}
    per_domain = mm.MOPDConfig.for_model("tiny").prompts_per_domain
    options = ab.ucmopd_options()
    arms = {"mopd": {}, "mopd_rollouts": {"prompts_per_domain": per_domain * (1 + options["golden_gain"].samples)},
            "ucmopd": options}
    out = {"specialist": start, "runs": {}}
    for method, settings in arms.items():
        name = f"own_{method}_s{seed}"
        run = mm.train_student(bank, ab.student_config(name, seed, experiment, quick, steps, teachers=route,
                                                       init_from=start, **settings, **overrides))
        out["runs"][name] = {"method": method, "seed": seed, "curve": ab.logged_curve(run)}
    return out


# ---------------------------------------------------------------------------------------------
# the studies as a declaration over the one runner (studies.study): its workers and its store
# ---------------------------------------------------------------------------------------------


def train_part(args, part: str):
    """Method.train of one study: (ctx, setting, seed) -> that study's results for the seed (its
    runs trained, or reloaded); "normal" is the normal student of setting["loss"]."""
    def train(ctx, setting: dict, seed: int) -> dict:
        kw = {"experiment": EXP, "quick": args.quick, **args.student}
        if part == "normal":
            return ab.normal_student(ctx.bank, seed, setting["loss"], **kw)
        if part == "origin":
            return ab.origin_study(ctx.bank, seed, losses=args.losses, **kw)
        if part == "rounds":
            return ab.multi_round(ctx.bank, seed, teacher_steps=args.teacher_steps,
                                  from_round1=seed in args.from_round1_seeds, **kw)
        return {"control": round1_control, "ucmopd_own": ucmopd_own, "ucmopd": ab.ucmopd_study}[part](ctx.bank, seed, **kw)
    return train


def declare(args) -> Study:
    """The ablations for the runner: one Method per study (and the normal students the others
    reuse), the set-up every process runs first (the banks, the round-1 teachers and, for
    UCMOPD's own setting, the specialist: trained by the main process, reloaded by a worker)."""
    def setup(progress: bool):
        # rounds and UCMOPD need no teacher of another origin
        bank, other = ab.ablation_banks(ab.TINY_OTHER if "origin" in args.studies else None, device="cpu")
        t = time.time()
        ab.teachers(bank, other, EXP, quick=args.quick)
        seconds = {"teachers": time.time() - t}
        if "ucmopd_own" in args.studies and not args.quick:   # shared by every seed: trained once, before any worker
            t = time.time()
            specialist(bank, EXP, quick=args.quick)
            seconds["specialist"] = time.time() - t
        folder = mm.runs.RUNS_DIR / mm.runs.experiment_name(EXP)
        return SimpleNamespace(bank=bank, other=other, folder=folder, seconds=seconds)

    return Study(module="studies.ablations", methods={part: Method(train_part(args, part)) for part in ("normal", *STUDIES)},
                 setup=setup, argv=[*args.argv, "--no-write"])


def plan(args) -> list[tuple[str, int]]:
    """The order the studies run in: seed by seed, the origin study first (the rounds and the
    two-teacher UCMOPD comparison reuse its normal PG student), so that a run stopped early has
    every study for the first seeds."""
    seeds = {"origin": args.seeds, "rounds": args.rounds_seeds or args.seeds, "ucmopd": args.ucmopd_seeds or args.seeds,
             "control": args.rounds_seeds or args.seeds, "ucmopd_own": args.ucmopd_seeds or args.seeds}
    order = sorted({s for study in args.studies for s in seeds[study]})
    return [(study, s) for s in order for study in STUDIES if study in args.studies and s in seeds[study]]


def train_in_workers(declared: Study, args) -> None:
    """Train every run of the plan in args.workers processes (studies.study.in_workers): first the
    normal students (the other studies reuse them), then the studies. A worker runs this same
    command with --worker and --jobs (studies.study.worker_main): it trains its jobs, nothing else."""
    losses = set(args.losses if "origin" in args.studies else ()) | {"pg"}
    seeds = sorted({s for _, s in plan(args)})
    reuse = {"origin", "rounds", "ucmopd"} & set(args.studies)   # the studies that reuse the normal students
    normal = [("normal", {"loss": loss}, s, None) for s in seeds for loss in sorted(losses)] if reuse else []
    for jobs in (normal, [(part, {}, s, None) for part, s in plan(args)]):
        in_workers(declared, jobs, args.workers, args.n)


def run_plan(args, write=None, base: dict | None = None) -> dict:
    """Train (or reload) every run of the plan; evaluate each new adapter once; after each study,
    `write(results)` if given (so docs/ always reflect the studies finished so far). With `base`
    (saved results, `--add`), the studies run are added to it: the round-1 teachers are trained
    again and must score exactly what the saved ones scored, or nothing is added."""
    torch.set_num_threads(1)
    n = 8 if args.quick else args.n
    settings = {**args.student, "teacher_steps": args.teacher_steps, "seeds": args.seeds,
                "rounds_seeds": args.rounds_seeds or args.seeds, "ucmopd_seeds": args.ucmopd_seeds or args.seeds,
                "from_round1_seeds": [s for s in args.from_round1_seeds if s in (args.rounds_seeds or args.seeds)],
                "n": n}
    if base is None:
        seconds, results = {}, {"origin": {}, "rounds": {}, "ucmopd": {}}
        results["settings"] = settings
    else:
        same = ("steps", "eval_every", "eval_n", "teacher_steps", "n")
        differ = {k: (base["settings"].get(k), settings[k]) for k in same if base["settings"].get(k) != settings[k]}
        if differ:
            raise SystemExit(f"--add: these settings differ from the saved results' (saved, now): {differ}")
        results = base
        seconds = results["seconds"]
    results["seconds"] = seconds
    declared = declare(args)
    ctx = declared.setup(True)
    bank, other = ctx.bank, ctx.other
    key = "round-1 teachers (and the other base's)" if base is None else \
        f"round-1 teachers again (--add {' '.join(args.studies)})"
    seconds[key] = ctx.seconds["teachers"]
    # the study's store (runs/ablations/evals.json; the other base's adapters, of the same names, in its own folder)
    evals = Evals(None if args.quick else ctx.folder / "evals.json")
    evaluated = lambda b, store, names: {a: store.get(b, a, "test", n) for a in names}  # noqa: E731
    if other is not None:
        other_evals = Evals(None if args.quick else ctx.folder / ab.OTHER_EXPERIMENT / "evals.json")
        results["other_table"] = {"acc": evaluated(other, other_evals, ["base", "teacher_binding"]), "n": n}
    fresh = evaluated(bank, evals, ["base", "teacher_binding", "teacher_recall"])
    if base is not None:
        as_int = lambda acc: {d: {int(L): v for L, v in by.items()} for d, by in acc.items()}  # noqa: E731 (JSON keys)
        saved = {a: as_int(base["table"]["acc"][a]) for a in fresh}
        if saved != {a: as_int(acc) for a, acc in fresh.items()}:
            raise SystemExit("--add: the round-1 teachers trained by today's code are not the saved results' teachers "
                             f"(test accuracies {fresh} vs {saved}); re-run every study instead")
        results["table"]["acc"].update(fresh)
    else:
        results["table"] = {"acc": fresh, "n": n}
    if "specialist" in ctx.seconds:
        seconds["the specialist (cascade recall -> binding)"] = ctx.seconds["specialist"]
    if args.workers > 1 and not args.quick:  # (--quick runs in memory: nothing for workers to share)
        t = time.time()
        train_in_workers(declared, args)
        seconds[f"training in {args.workers} workers" + ("" if base is None else f" (--add {' '.join(args.studies)})")] = \
            time.time() - t
    for part, seed in plan(args):
        t, s = time.time(), str(seed)
        results.setdefault(part, {})[s] = declared.methods[part].train(ctx, {}, seed)
        new = [a for a in bank.names if a not in results["table"]["acc"]]
        results["table"]["acc"].update(evaluated(bank, evals, new))
        seconds[f"{part} seed {seed}"] = time.time() - t
        print(f"{part} seed {seed}: {seconds[f'{part} seed {seed}']:.0f} s", flush=True)
        if write:
            write(results)
    if "origin" not in args.studies and base is None:
        results["origin"] = {}
    return results


# ---------------------------------------------------------------------------------------------
# the page's numbers: mopd_mini.ablation_runs.summary (what notebook 06 shows), and what only this
# study adds: the origin verdicts, the control, UCMOPD's own setting, the paired per-seed intervals
# ---------------------------------------------------------------------------------------------


def binding_curve(curve: list[dict]) -> list[tuple[int, float]]:
    """(step, mean binding accuracy over its evaluated lengths) at each evaluation of a run."""
    out = []
    for r in curve:
        accs = [v for k, v in r.items() if k.startswith("acc/binding/")]
        if accs:
            out.append((r["step"], sum(accs) / len(accs)))
    return out


def origin_verdict(same_final: float, other_final: float, other_peak: float, kl_first: float, kl_last: float,
                   margin: float = 0.05) -> str:
    """"diverges" if the KL to the foreign teacher ends higher than it began; "degrades" if the
    foreign run ends more than `margin` below the same-origin run AND below its own peak by more
    than `margin`; else "neither". (The thresholds are ours; the paper gives none.)"""
    if kl_last > kl_first:
        return "diverges"
    if other_final < same_final - margin and other_final < other_peak - margin:
        return "degrades"
    return "neither"


def origin_summary(results: dict) -> dict:
    """The origin study over its seeds: the initial KL, and per loss both origins' final accuracies,
    KL windows and peaks, the paired binding difference and the verdict."""
    table, ms, acc = results["table"], stats.mean_sd_or_none, ab.mean_accuracy
    seeds = sorted(results["origin"], key=int)
    kl = [results["origin"][s]["initial_kl"] for s in seeds]
    o = {"seeds": seeds, "other_teacher_binding": acc(results["other_table"], "teacher_binding", "binding"),
         "other_base_binding": acc(results["other_table"], "base", "binding"),
         "initial_kl": {k: ms([x[k] for x in kl]) for k in ("same_origin", "other_origin", "ratio")}, "losses": {}}
    losses = sorted({r["loss"] for s in seeds for r in results["origin"][s]["runs"].values()})
    for loss in losses:
        row = {}
        for kind in ("same", "other"):
            names = [n for s in seeds for n, r in results["origin"][s]["runs"].items()
                     if r["loss"] == loss and r["origin"] == kind]
            curves = [results["origin"][s]["runs"][n]["curve"] for s in seeds for n in names
                      if n in results["origin"][s]["runs"]]
            firsts, lasts = zip(*[ab.kl_window(c) for c in curves])
            peaks = [max(a for _, a in binding_curve(c)) for c in curves]
            row[kind] = {"binding": ms([acc(table, n, "binding") for n in names]),
                         "recall": ms([acc(table, n, "recall") for n in names]),
                         "kl_first": ms(firsts), "kl_last": ms(lasts), "peak": ms(peaks),
                         "step1_kl": ms([c[0]["kl/binding"] for c in curves]),
                         "per_seed_binding": [acc(table, n, "binding") for n in names]}
        s, x = row["same"], row["other"]
        row["paired_binding"] = stats.paired(x["per_seed_binding"], s["per_seed_binding"])
        row["verdict"] = origin_verdict(s["binding"][0], x["binding"][0], x["peak"][0], x["kl_first"][0], x["kl_last"][0])
        o["losses"][loss] = row
    return o


def rounds_summary(results: dict, shown: dict) -> dict:
    """multi_round's rows (`shown`, from mopd_mini.ablation_runs.summary) with each round-2 row paired
    against the round-1 student, and the control: the round-1 student given twice the steps."""
    table, seeds, ms = results["table"], shown["seeds"], stats.mean_sd_or_none
    r = {"seeds": seeds, "rows": dict(shown["rows"])}
    first = r["rows"].get("round-1 student")
    r["paired"] = {label: stats.paired(row["per_seed"], first["per_seed"]) for label, row in r["rows"].items()
                   if first is not None and label != "round-1 student"}
    if results.get("control"):
        cseeds = [s for s in seeds if s in results["control"]]
        names = {s: f"student_pg_long_s{s}" for s in cseeds if f"student_pg_long_s{s}" in table["acc"]}
        if names:
            per = {d: [ab.round1_normalised(table, names[s], d) for s in names] for d in ("binding", "recall")}
            mean = [(b + c) / 2 for b, c in zip(per["binding"], per["recall"])]
            r["rows"]["round-1 student, twice the steps (control)"] = {
                "binding": ms(per["binding"]), "recall": ms(per["recall"]), "mean": ms(mean), "per_seed": mean}
            by_seed = dict(zip(names, mean))

            def seeded(label):  # {seed: per-seed mean} of a row, on the control's seeds
                row = r["rows"].get(label)
                return {} if row is None else {s: v for s, v in zip(seeds, row["per_seed"]) if s in by_seed}
            r["control"] = {
                "from_round1_minus_control": stats.paired(seeded("round-2 student (from round-1 student)"), by_seed),
                "control_minus_round1": stats.paired(by_seed, seeded("round-1 student"))}
    r["paper"] = shown["paper"]
    return r


def own_summary(results: dict) -> dict:
    """UCMOPD's own setting over its seeds: the specialist, each arm's accuracies and normalised
    scores, and UCMOPD paired against each MOPD arm per domain."""
    table, ms, acc, norm = results["table"], stats.mean_sd_or_none, ab.mean_accuracy, ab.round1_normalised
    seeds = sorted(results["ucmopd_own"], key=int)
    own = {"seeds": seeds, "specialist": {d: acc(table, SPECIALIST, d) for d in ("binding", "recall")}
           if SPECIALIST in table["acc"] else None, "rows": {}, "per_seed": {}}
    for method in ("mopd", "mopd_rollouts", "ucmopd"):
        names = {s: f"own_{method}_s{s}" for s in seeds if f"own_{method}_s{s}" in table["acc"]}
        if not names:
            continue
        per = {s: {d: acc(table, n, d) for d in ("binding", "recall")} for s, n in names.items()}
        own["rows"][method] = {"binding": ms([v["binding"] for v in per.values()]),
                               "recall": ms([v["recall"] for v in per.values()]),
                               "recall_normalised": ms([norm(table, n, "recall") for n in names.values()]),
                               "mean_normalised": ms([(norm(table, n, "binding") + norm(table, n, "recall")) / 2
                                                      for n in names.values()])}
        own["per_seed"][method] = per
    ps = own["per_seed"]
    if "ucmopd" in ps:
        own["paired"] = {f"ucmopd minus {ref}": {d: stats.paired({s: v[d] for s, v in ps["ucmopd"].items()},
                                                                 {s: v[d] for s, v in ps[ref].items()})
                                                 for d in ("binding", "recall")}
                         for ref in ("mopd_rollouts", "mopd") if ref in ps}
    return own


def page_summary(results: dict) -> dict:
    """Every number docs/ablations.md and the summary of docs/ablations.json hold (mean and sample
    std over seeds, paired per-seed differences), from the results of `run_plan`: {"table",
    "other_table", "origin", "rounds", "ucmopd", "control", "ucmopd_own"} (a study may be absent)."""
    shown = ab.summary(results)
    out = {"base": shown["base"], "teachers": shown["teachers"]}
    if results.get("origin"):
        out["origin"] = origin_summary(results)
    if "rounds" in shown:
        out["rounds"] = rounds_summary(results, shown["rounds"])
    if "ucmopd" in shown:
        u = shown["ucmopd"]
        out["ucmopd"] = {**u, "paired": {setting: stats.paired(rows["ucmopd"]["per_seed"], rows["mopd"]["per_seed"])
                                         for setting, rows in u["settings"].items() if {"mopd", "ucmopd"} <= set(rows)}}
    if results.get("ucmopd_own"):
        out["ucmopd_own"] = own_summary(results)
    return out


def paired_line(p: dict, what: str) -> str:
    """One sentence: a paired per-seed difference, its 95% t-interval and the verdict."""
    if p["n"] < 2:
        return f"{what}: {stats.interval_text(p, 2)} ({p['n']} seed: no interval)."
    verdict = "resolved" if p["resolved"] else "not resolved (the interval includes 0)"
    return (f"{what}: **{stats.interval_text(p, 2)}** (95% t-interval over {p['n']} seeds, per seed "
            + ", ".join(f"{d:+.2f}" for d in p["per_seed"]) + f"): {verdict}.")


def report(results: dict, summary: dict, cmd: str, machine: str, date: str | None = None) -> str:
    st = results["settings"]
    lines = ["# Ablations: a teacher of another origin, multi-round MOPD, UCMOPD", "",
             "Every number on this page was written by one command, on the machine below:", "",
             "```bash", cmd, "```", "",
             f"Machine: {machine}. Date: {date or time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. "
             f"Test prompts per domain and length: {results['table']['n']}. Students: `MOPDConfig.for_model(\"tiny\")` "
             f"with {st['steps']} steps (the course's notebook 03: 300; in-run evaluation every {st['eval_every']} steps on "
             f"{st['eval_n']} prompts per length); round-1 teachers: `GRPOConfig.for_model(\"tiny\")` (200 steps, seed 0, "
             "as notebook 02); the studies are the functions of "
             "`mopd_mini/ablation_runs.py`. Accuracy: greedy, relaxed match, test split, mean over the domain's "
             "evaluation lengths (binding 16/24/32, recall 16/24). Mean ± sample std (ddof = 1) over the seeds shown; "
             "differences are paired by seed with a 95% t-interval (`mopd_mini.stats.paired`), resolved only when it "
             "excludes 0.", "",
             f"Base: binding {summary['base']['binding']:.2f}, recall {summary['base']['recall']:.2f}. "
             f"Round-1 teachers (seed 0, shared by every student): binding {summary['teachers']['binding']:.2f}, "
             f"recall {summary['teachers']['recall']:.2f}.", ""]
    if "origin" in summary:
        o = summary["origin"]
        kl = o["initial_kl"]
        lines += ["## 1. Same origin matters? (paper section 4.4.2)", "",
                  "The student sits on the course base; its binding prompts are scored by the binding teacher of "
                  "ANOTHER base (`load_base(\"tiny-other\")`: same tokenizer, other weights, 3 layers; docs/tiny_base.md), "
                  "its recall prompts by the course's own recall teacher. Beside it, the normal two-teacher run "
                  "with the same seed.", "",
                  f"Binding teachers on the course's test prompts: same origin {summary['teachers']['binding']:.2f} "
                  f"(its base {summary['base']['binding']:.2f}; GRPO 200 steps at lr 1e-3, the course preset); other "
                  f"origin {o['other_teacher_binding']:.2f} (its base {o['other_base_binding']:.2f}; GRPO "
                  f"{ab.OTHER_TEACHER['steps']} steps at lr {ab.OTHER_TEACHER['lr']:g}, the binding recipe "
                  "studies/teacher_headroom.py chose on validation, meant to make it the stronger teacher, as in the "
                  f"paper): the foreign teacher is {o['other_teacher_binding'] - summary['teachers']['binding']:+.2f} "
                  "ahead on one seed each (descriptive: no interval, so not shown to be the stronger).", "",
                  f"**Initial per-token KL** (student at init = the course base; {results['origin'][o['seeds'][0]]['initial_kl']['n']} "
                  f"binding prompts per seed, the SAME samples scored by both teachers; seeds {', '.join(o['seeds'])}):", "",
                  "| binding teacher | initial per-token reverse KL |", "| --- | --- |",
                  f"| same origin | {mean_sd_cell(kl['same_origin'], 3)} |", f"| other origin | {mean_sd_cell(kl['other_origin'], 3)} |",
                  f"| ratio other / same | **{mean_sd_cell(kl['ratio'])}** |", "",
                  "The paper: about 2x to 5x (0.04 to 0.19 by one summary).", "",
                  "![initial KL](figures/ablation_initial_kl.png)", "",
                  "| loss | origin | final binding | final recall | KL/binding first 10% of steps | last 10% | "
                  "peak binding during the run | verdict |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        for loss, row in o["losses"].items():
            for kind in ("same", "other"):
                r = row[kind]
                lines.append(f"| {loss} | {kind} | {mean_sd_cell(r['binding'])} | {mean_sd_cell(r['recall'])} | {mean_sd_cell(r['kl_first'], 3)} | "
                             f"{mean_sd_cell(r['kl_last'], 3)} | {mean_sd_cell(r['peak'])} | {row['verdict'] if kind == 'other' else ''} |")
        lines += ["", "Verdict rule (ours; the paper gives no threshold): *diverges* if the KL to the foreign teacher "
                  "is higher over the last 10% of steps than over the first 10%; *degrades* if the foreign run ends more "
                  "than 0.05 below the same-origin run AND more than 0.05 below its own peak; else *neither*.", "",
                  "Per-seed final binding accuracy: " + "; ".join(
                      f"{loss} {kind} " + ", ".join(f"{v:.2f}" for v in row[kind]['per_seed_binding'])
                      for loss, row in o["losses"].items() for kind in ("same", "other")) + ".", "",
                  *[paired_line(row["paired_binding"], f"Final binding, other origin minus same origin ({loss})")
                    for loss, row in o["losses"].items() if "paired_binding" in row], "",
                  "![origin curves](figures/ablation_origin_curves.png)", ""]
    if "rounds" in summary and summary["rounds"]["rows"]:
        r = summary["rounds"]
        lines += ["## 2. Multi-round MOPD (paper section 4.4.3, Table 4)", "",
                  f"Round 2: each domain's teacher is trained by GRPO ({st['teacher_steps']} steps) starting from a "
                  "COPY of the round-1 student (`GRPOConfig(init_from=\"student_pg_s<seed>\")`); a round-2 student is "
                  f"then distilled from the round-2 teachers (MOPD-PG, {st['steps']} steps), starting from the base (as stage 3 "
                  f"does) and, for seeds {st['from_round1_seeds']}, from a copy of the round-1 student (`MOPDConfig(init_from=...)`). All are "
                  "normalised against the ROUND-1 teachers (fixed denominator: above 1.0 = better than round 1); "
                  "each round-2 teacher on its own domain.", "",
                  "| model | binding | recall | mean | per seed (mean) | paper |", "| --- | --- | --- | --- | --- | --- |",
                  "| round-1 teachers | 1.00 | 1.00 | 1.00 | | 1.000 |"]
        for label, row in r["rows"].items():
            lines.append(f"| {label} | {mean_sd_cell(row['binding'])} | {mean_sd_cell(row['recall'])} | **{mean_sd_cell(row['mean'])}** | "
                         + ", ".join(f"{v:.2f}" for v in row["per_seed"]) + f" | {r['paper'].get(label, '')} |")
        lines += ["", f"Seeds {', '.join(r['seeds'])}; seed s's round 2 starts from seed s's round-1 student.", "",
                  *[paired_line(p, f"{label} minus round-1 student (mean normalised)") for label, p in r.get("paired", {}).items()
                    if "student" in label],
                  "",
                  *([paired_line(r["control"]["from_round1_minus_control"],
                                 "round-2 student (from round-1 student) minus the round-1 student with twice the steps"),
                     paired_line(r["control"]["control_minus_round1"],
                                 "the round-1 student with twice the steps minus the round-1 student"), "",
                     f"**The control.** The round-2 student from the round-1 student has had {2 * st['steps']} "
                     f"distillation steps in all; the control row is a round-1 student given the same {2 * st['steps']} "
                     "steps on the round-1 teachers (`ablations.round1_control`), so the first line above is the second "
                     f"round's effect with the steps matched (its teachers' {st['teacher_steps']} GRPO steps each "
                     "are extra compute the control does not get)."]
                    if r.get("control") else
                    [f"**What this cannot separate.** The round-2 student from the round-1 student has had {st['steps']} "
                     f"more distillation steps than the round-1 student ({2 * st['steps']} in all), and its teachers "
                     f"{st['teacher_steps']} more GRPO steps each; no round-1 student trained {2 * st['steps']} steps was "
                     "run, so a gain here is the second round AND the extra steps together, not the second round "
                     "alone."]), "",
                  "![rounds](figures/ablation_rounds.png)", ""]
    if "ucmopd" in summary and summary["ucmopd"]["settings"]:
        u = summary["ucmopd"]
        opts = ab.ucmopd_options()
        lines += ["## 3. UCMOPD vs plain MOPD (arXiv 2608.26735)", "",
                  f"UCMOPD = Golden-Gain Enhancement ({opts['golden_gain']}) + Teacher-Endorsement Filtering; MOPD-PG, "
                  f"{st['steps']} steps, both. *two teachers*: the course's setting (the plain run is the origin study's normal "
                  "run). *capability preservation*: binding from its teacher, recall prompts routed to the stage-1 base "
                  "as the \"general\" teacher (`MOPDConfig(teachers={\"recall\": \"base\"})`).", "",
                  "| setting | method | binding | recall | binding normalised | recall normalised | binding gained "
                  "(vs base) | recall kept (vs base) | exploration kept (bind / rec) | tokens masked (bind / rec) |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for setting, rows in u["settings"].items():
            for method, c in rows.items():
                kept = (f"{mean_sd_cell(c['gg_kept/binding'])} / {mean_sd_cell(c['gg_kept/recall'])}"
                        if c.get("gg_kept/binding", (None,))[0] is not None else "")
                masked = (f"{mean_sd_cell(c['tef_masked/binding'])} / {mean_sd_cell(c['tef_masked/recall'])}"
                          if c.get("tef_masked/binding", (None,))[0] is not None else "")
                lines.append(f"| {setting} | {method} | {mean_sd_cell(c['binding'])} | {mean_sd_cell(c['recall'])} | "
                             f"{mean_sd_cell(c['normalised']['binding'])} | {mean_sd_cell(c['normalised']['recall'])} | "
                             f"{mean_sd_cell(c['binding_gained'], signed=True)} | {mean_sd_cell(c['recall_kept'], signed=True)} | "
                             f"{kept} | {masked} |")
        lines += ["", *[paired_line(p, f"UCMOPD minus MOPD, mean normalised, {setting}")
                        for setting, p in u.get("paired", {}).items()], "",
                  "**What this setting cannot test.** UCMOPD's claim is that it recovers general ability in a student "
                  "that LOST it while specialising. Here every student starts from the base, which is also the \"general\" "
                  "teacher of the preservation setting, so there is nothing to recover; UCMOPD draws 4 rollouts per "
                  "prompt against plain MOPD's 1, and no MOPD run with UCMOPD's rollout budget was made. A level result "
                  "here says nothing for or against UCMOPD in its own setting.", "",
                  f"Seeds {', '.join(u['seeds'])}. Kept / masked: means over the run's steps of `gg_kept/<domain>` "
                  "(share of exploration samples whose positive-advantage density reached the anchor's) and "
                  "`tef_masked/<domain>` (share of the loss's tokens the endorsement mask dropped).", "",
                  "![ucmopd](figures/ablation_ucmopd.png)", ""]
    if summary.get("ucmopd_own", {}).get("rows"):
        o = summary["ucmopd_own"]
        sp = o["specialist"]
        label = {"mopd": "MOPD (1 rollout per prompt)", "mopd_rollouts": "MOPD, UCMOPD's rollout budget (4x prompts)",
                 "ucmopd": "UCMOPD"}
        lines += ["## 4. UCMOPD in its own setting: a specialist that forgot", "",
                  "The student starts from a copy of a binding specialist that FORGOT recall while specialising: "
                  "Cascade RL recall -> binding (`ablations.specialist`: GRPO on binding from a copy of the recall "
                  f"teacher, {SPECIALIST_STEPS} steps, seed 0, shared by every seed). Binding prompts are scored by the specialist "
                  "itself (keep the specialty), recall prompts by the recall teacher (the capability to recover). "
                  "MOPD-PG, " + f"{st['steps']} steps, every arm (`ablations.ucmopd_own`).", "",
                  (f"Specialist: binding {sp['binding']:.2f}, recall {sp['recall']:.2f} (base: binding "
                   f"{summary['base']['binding']:.2f}, recall {summary['base']['recall']:.2f}; recall teacher "
                   f"{summary['teachers']['recall']:.2f})." if sp else ""), "",
                  "| arm | binding | recall | recall normalised | mean normalised |", "| --- | --- | --- | --- | --- |"]
        for method, row in o["rows"].items():
            lines.append(f"| {label[method]} | {mean_sd_cell(row['binding'])} | {mean_sd_cell(row['recall'])} | "
                         f"{mean_sd_cell(row['recall_normalised'])} | {mean_sd_cell(row['mean_normalised'])} |")
        lines += [""]
        for what, by_domain in o.get("paired", {}).items():
            for d, p in by_domain.items():
                ref = label[what.split(" minus ")[1]]
                lines.append(paired_line(p, f"UCMOPD minus {ref}, {d} accuracy"))
        lines += ["", f"Seeds {', '.join(o['seeds'])}.", ""]
    lines += ["## Wall time", "", "| part | seconds |", "| --- | --- |"]
    lines += [f"| {k} | {v:.0f} |" for k, v in results["seconds"].items()]
    lines += ["", "Runs that already existed in runs/ablations/ were reloaded, not retrained: their time is the reload.", ""]
    return "\n".join(lines)


def write_report(results: dict, cmd: str, machine: str, date: str, write: bool = True, source: Path | None = None,
                 allow_shrink: bool = False) -> tuple[dict, str]:
    """The summary and the page from the results; with `write`, docs/ablations.md, .json and the figures.
    Rendered from the JSON at `source` (--render): refused before any write if the page would show
    fewer table rows than the one there (`slices.guard_render`)."""
    summary = page_summary(results)
    text = report(results, summary, cmd, machine, date)
    page = DOCS / "ablations.md"
    if page.exists():  # the hand-written sections (pre-registrations, the reading) are kept across re-renders
        kept = "".join(m.group(0) for m in re.finditer(r"^## (?:Pre-registered|Reading the numbers).*?(?=^## )",
                                                        page.read_text(), re.S | re.M))
        text = text.replace("## Wall time\n", kept + "## Wall time\n", 1)
    if write and source is not None:
        text = slices.guard_render(page, text, source, results, allow_shrink)
    if write:
        (DOCS / "figures").mkdir(parents=True, exist_ok=True)
        figures(results, summary, DOCS / "figures")
        atomic_write(DOCS / "ablations.json", json.dumps({"command": cmd, "machine": machine, "date": date, **results,
                                                          "summary": summary}, indent=1, default=str).encode())
        atomic_write(DOCS / "ablations.md", text.encode())
    return summary, text


def render(path: Path, write: bool = True, allow_shrink: bool = False) -> tuple[dict, dict]:
    """The page again from a saved ablations.json, with today's summary code (nothing is trained).
    The runs' date is the JSON's (older files have none: it is read from the page they wrote).
    The JSON is checked first (`slices.read_record`); a page with fewer table rows than the one in
    docs/ is refused unless `allow_shrink` (`slices.guard_render`)."""
    path = Path(path)
    saved = slices.read_record(path, "ablations")
    with slices.rendering(path):
        cmd, machine, date = saved.pop("command"), saved.pop("machine"), saved.pop("date", None)
        saved.pop("summary", None)
        if date is None and (DOCS / "ablations.md").exists():
            found = re.search(r"Date: ([0-9-]+ [0-9:]+ UTC)", (DOCS / "ablations.md").read_text())
            date = found.group(1) if found else None
        summary, text = write_report(saved, cmd, machine, date or "unknown", write=write, source=path,
                                     allow_shrink=allow_shrink)
    print(text)
    return saved, summary


def figures(results: dict, summary: dict, folder: Path) -> list[Path]:
    import matplotlib.pyplot as plt

    out = []
    if "origin" in summary:
        per_seed = [results["origin"][s]["initial_kl"] for s in summary["origin"]["seeds"]]
        out.append(plots.save(views.initial_kl(summary, per_seed), "ablation_initial_kl", folder))
        out.append(plots.save(views.origin_curves(results), "ablation_origin_curves", folder))
    if "rounds" in summary and summary["rounds"]["rows"]:
        out.append(plots.save(views.rounds(summary), "ablation_rounds", folder))
    if "ucmopd" in summary and summary["ucmopd"]["settings"]:
        out.append(plots.save(views.ucmopd(summary), "ablation_ucmopd", folder))
    plt.close("all")
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--losses", nargs="+", default=["pg", "topk"], help="origin study: the loss forms")
    p.add_argument("--studies", nargs="+", default=list(STUDIES), choices=STUDIES)
    p.add_argument("--n", type=int, default=200, help="test prompts per domain and length")
    p.add_argument("--steps", type=int, default=300, help="steps of every student (the course's preset)")
    p.add_argument("--teacher-steps", type=int, default=200, help="GRPO steps of each round-2 teacher (round 1's)")
    p.add_argument("--eval-every", type=int, default=25, help="students' in-run evaluation interval")
    p.add_argument("--eval-n", type=int, default=32, help="test prompts per length in the in-run evaluations")
    p.add_argument("--from-round1-seeds", type=int, nargs="*", default=None,
                   help="multi-round: seeds that also train a round-2 student started from the round-1 student")
    p.add_argument("--rounds-seeds", type=int, nargs="*", help="multi-round: other seeds than --seeds")
    p.add_argument("--ucmopd-seeds", type=int, nargs="*", help="UCMOPD: other seeds than --seeds")
    p.add_argument("--quick", action="store_true", help="3 steps per run, in memory, one seed: a smoke test")
    p.add_argument("--no-write", action="store_true", help="print only; leave docs/ alone")
    p.add_argument("--workers", type=int, default=1, help="train in this many processes of one torch thread "
                   "(2 on a 2-core CPU); the numbers are the same")
    add_worker_args(p)                                     # internal: a worker's number and jobs (studies.study)
    slices.quiet_flag(p, help=argparse.SUPPRESS)  # internal: the workers are run with it
    p.add_argument("--render", metavar="JSON", help="rewrite the page and figures from a saved ablations.json "
                   "(nothing is trained or evaluated)")
    p.add_argument("--allow-shrink", action="store_true", help="with --render: write the page even if it shows "
                   "fewer table rows than docs/ablations.md (recorded in the JSON and said on the page)")
    p.add_argument("--add", metavar="JSON", help="run --studies that the saved ablations.json lacks and add them to "
                   "it (the round-1 teachers are retrained and must match the saved ones)")
    args = p.parse_args(argv)
    if args.render:
        return render(Path(args.render), write=not args.no_write, allow_shrink=args.allow_shrink)
    base = None
    if args.add:
        base = json.loads(Path(args.add).read_text())
        cmd0, saved_date = base.pop("command"), base.pop("date", None)
        if saved_date is None:   # older files: the date their page printed
            found = re.search(r"Date: ([0-9-]+ [0-9:]+ UTC)", (DOCS / "ablations.md").read_text())
            saved_date = found.group(1) if found else "unknown"
        saved_machine = base.pop("machine")
        base.pop("summary", None)
        taken = [st for st in args.studies if base.get(st)]
        if taken:
            raise SystemExit(f"--add: {taken} already in {args.add}; --add runs studies it does not have yet")
    args.argv = list(argv) if argv is not None else sys.argv[1:]
    if args.workers < 1:
        raise SystemExit(f"--workers must be >= 1, got {args.workers}")
    if args.quick:  # one seed, PG only, 3 steps per run, in memory
        args.seeds, args.losses, args.from_round1_seeds = args.seeds[:1], ["pg"], []
        args.rounds_seeds = args.ucmopd_seeds = None
    args.student = {"steps": args.steps, "eval_every": args.eval_every, "eval_n": args.eval_n}
    if args.from_round1_seeds is None:
        args.from_round1_seeds = list(args.rounds_seeds or args.seeds)
    if args.jobs is not None:   # a worker of train_in_workers: the teachers (and the specialist) reload
        worker_main(declare(args), args.worker, args.jobs, args.n, args.n)
        return None
    now = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    cmd = command("studies.ablations", argv)
    date = now
    if base is not None:   # the page was made by the saved command, then this one
        cmd, date = f"{cmd0}\n{cmd}", f"{saved_date}; {', '.join(args.studies)} added {now}"

    machine = machine_line()
    if base is not None and saved_machine != machine:   # each part says where it ran
        machine = f"{saved_machine} ({', '.join(args.studies)} added on: {machine})"

    def write(results):
        return write_report(results, cmd, machine, date, write=not args.no_write)

    results = run_plan(args, write, base)
    summary, text = write(results)
    print(text)
    if not args.no_write:
        print(f"wrote {DOCS / 'ablations.md'}, {DOCS / 'ablations.json'} and the figures")
    return results, summary


if __name__ == "__main__":
    main()
