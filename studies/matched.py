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

The study's files: studies/matched_plan.py declares the plan, the methods and the registered family;
studies/matched_page.py writes the page from the JSON; studies/cures.py holds the cures' table and the
check's section; this module trains (the sweep, the checks, the slices) and is the command.
"""

from __future__ import annotations

import sys

if __name__ == "__main__" and "--status" in sys.argv[1:]:   # from the JSON alone, before torch loads
    from studies.slices import jobs_status_main

    raise SystemExit(jobs_status_main("matched", sys.argv[1:]))

import argparse
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from statistics import fmean
from typing import Callable

import matplotlib

matplotlib.use("Agg")

import mopd_mini as mm  # noqa: E402
from mopd_mini import cost, runs  # noqa: E402
from mopd_mini.adapters import atomic_write  # noqa: E402

from . import baselines, sliced, slices, study  # noqa: E402
from .study import RESULTS, extend_lr  # noqa: E402,F401
from .baselines import DOMAINS, MERGES  # noqa: E402
from .cures import (CURE_FIELDS, CURE_LABEL, CURES_ESTIMATE, CURES_HEADING, CURES_METHODS, CURES_T,  # noqa: E402,F401
                    cure_grid, cures_decisions, cures_sections, logged_at, on_edge, render_cures, series_of)
from tools.provenance import command, machine, machine_line  # noqa: E402
from .matched_plan import (COMPARISONS, CRITIQUE, DOCS, EXPERIMENT, FIVE, FULL, MARGINS, METHODS, OFFLINE, Plan,  # noqa: E402,F401
                           QUICK, RECHECK_ESTIMATE, RECHECK_EXPERIMENT, RECHECK_T, RECHECKED, RL, STUDENTS)
from .matched_page import (below, compared_rows, cost_ratio, decisions, family, recheck_sections, results_markdown,  # noqa: E402,F401
                           teachers_lift, write, written_by)


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
            teachers = [bench.teachers[d] for d in needs]
            stage, pipe = cost.method_costs(cost_to(r.run, step), [cost.totals(t.metrics) for t in teachers],
                                            bench.N, bench.n_lora)
            whole = cost.flops(cost.totals(r.run.metrics), bench.N, bench.n_lora)
            part = stage["flops"]
            seconds = r.seconds * (part / whole if whole else 1.0) + sum(t.seconds for t in teachers)
            return {"step": step, "lift": lifted, "teachers_lift": teachers_lift,
                    "flops": pipe["flops"], "stage_flops": part, "seconds": seconds}
    return None


def matched_report(declared: study.Study, plan: Plan, T: int):
    def report(bench, state: study.State) -> dict:
        rows = study.rows(declared, bench, state)
        for m, per in rows.items():
            for seed, row in per.items():
                r = state.per_seed[seed][m]
                row["reach"] = reach(bench, m, r, state, study.needs_of(declared, m), plan.target)
        return {"T": T, "teacher": {d: {"steps": c.steps, "lr": c.lr, "seed": c.seed} for d, c in bench.teacher_cfg.items()},
                "teacher_cost": {d: cost.with_flops({**cost.totals(t.metrics), "seconds": t.seconds}, bench.N, bench.n_lora)
                                 for d, t in bench.teachers.items()},
                "teacher_sha256": {d: runs.adapter_digest(bench.bank, f"teacher_{d}") for d in bench.teachers},
                "N": bench.N, "n_lora": bench.n_lora, "seeds_done": list(state.per_seed), "elapsed_s": state.elapsed,
                "refs": {split: {a: getattr(state, split)[a] for a in declared.refs} for split in ("val", "test")},
                "grid": state.grid, "chosen": state.chosen, "rows": rows}
    return report


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
    from mopd_mini.config import OfflineConfig
    from mopd_mini.offline import collect, train_offline

    torch.set_num_threads(1)
    bank = mm.AdapterBank(*mm.load_base("tiny"))
    common = dict(steps=steps, eval_every=0, experiment=None, progress=False)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    per_step = {}
    t = [mm.train_grpo(bank, mm.GRPOConfig(domain=d, prompts_per_step=plan.per_domain, group_size=plan.group, **common))
         for d in DOMAINS]
    per_step["teacher"] = fmean(r.seconds for r in t) / steps
    per_step["mixrl"] = mm.train_grpo(bank, mm.GRPOConfig(domain=DOMAINS, prompts_per_step=plan.per_domain,
                                                          group_size=plan.group, **common)).seconds / steps
    per_step["cascade"] = mm.train_grpo(bank, mm.GRPOConfig(domain="recall", init_from="teacher_binding", name="c",
                                                            prompts_per_step=plan.per_domain, group_size=plan.group,
                                                            **common)).seconds / steps
    for loss in ("pg", "topk", "kl"):
        per_step[f"mopd_{loss}"] = mm.train_student(bank, mm.MOPDConfig(
            loss=loss, prompts_per_domain=plan.per_domain, student=f"s_{loss}", track_steps=(), **common)).seconds / steps
    ocfg = OfflineConfig(prompts_per_domain=50, samples_per_prompt=4, batch_size=2 * plan.per_domain, **common)
    data = collect(bank, ocfg)
    per_sample = data.seconds / len(data.completions)
    for loss, m in (("ce", "rft"), ("soft", "soft")):
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
    """One run of a cure at (setting, seed): studies.baselines' MOPD run (its budget, evaluations and
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
# (its T and reasons: studies.matched_plan; its section: studies.matched_page)
# ---------------------------------------------------------------------------------------------


def declare_recheck(against: str):
    """The re-check of "MOPD exact KL minus `against`": both trained as the sweep trains them (its grids,
    bracketing, tie-break and val choice, `sweep_method`) in their own run folder, on teachers this
    study trains (their sha256 recorded by `matched_report`)."""
    def declare_at(plan: Plan, T: int, quick: bool) -> study.Study:
        return declared(plan, T, quick, {m: sweep_method(plan, T, m) for m in ("mopd_kl", against)},
                        flag=("--recheck", against), experiment=RECHECK_EXPERIMENT)
    return declare_at


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
    from mopd_mini.config import OfflineConfig
    from mopd_mini.offline import collect, train_offline

    torch.set_num_threads(1)
    grids = {m: meth.grid for m, meth in check.declare(plan, T, quick).methods.items()}
    bank = mm.AdapterBank(*mm.load_base("tiny"))
    common = dict(steps=steps, eval_every=0, experiment=None, progress=False)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    teacher = fmean(mm.train_grpo(bank, mm.GRPOConfig(domain=d, prompts_per_step=plan.per_domain,
                                                      group_size=plan.group, **common)).seconds for d in DOMAINS) / steps
    per_step, per_sample = {}, 0.0
    for m in check.methods:
        setting = grids[m][len(grids[m]) // 2]
        if m in OFFLINE:
            cfg = OfflineConfig(loss={"rft": "ce", "soft": "soft"}[m], prompts_per_domain=50, samples_per_prompt=4,
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
