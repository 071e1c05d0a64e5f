"""Is MOPD worth it? Every baseline of the paper and of its critique, on the same base, tasks and
budget, tuned the same way on VALIDATION, tested once; with what each costs.

    python -m studies.baselines --seeds 0 1 2 --workers 2           # docs/baselines.md, .json, figures
    python -m studies.baselines --quick --no-write                  # the smoke test's seconds-long run
    python -m studies.baselines --render docs/baselines.json        # the page and figures again, from the JSON
    python -m studies.baselines --seeds 0 1 2 --workers 2 --hours 1.5   # the same, in a time-boxed slice
    python -m studies.baselines --status                            # what the slices recorded (no torch)
    python -m studies.baselines --recheck edges --seeds 0 1 2 --workers 2 --hours 1   # the edges re-checked, in slices

The protocol (what docs/baselines.md states beside its numbers):
  * teachers: one per domain, trained once (seed 0) and shared by every method and seed, with the
    config studies.teacher_headroom chose on validation (`baseline_teacher_config`; the plain
    `GRPOConfig.for_model("tiny")` where that module is absent);
  * every method is a LoRA adapter on the same frozen base with the same LoRA settings, started
    from the base (B = 0) except Cascade RL's second stage (a copy of the first domain's teacher);
  * one budget for every trained method, the course's: 300 optimizer steps of 8 prompts per domain
    (MOPD, Mix-RL, Cascade RL's second stage); RFT and soft labels train 300 steps on 16 teacher
    completions a step, from K = 4 samples of 600 prompts per domain (2,400 samples per domain,
    as many as MOPD draws from the student);
  * the same search for every method, on seed 0, scored on the val split: 3 learning rates for
    each trained method, 3 settings for each merge type; the best mean normalised score on val
    wins; the chosen seed-0 run is the seed-0 result (its test split read once, at the end);
  * test: `--n` prompts per domain and length (500), every method once per seed.
The study is declared on studies.study's runner (`declare`: its methods, grids and the pipelines'
teachers), which does the grid, the choice, the test seeds, the workers and the caching.
Runs live in runs/baselines/<teacher tag>/ and evaluations in its evals*.json, so a re-run (or a
run killed and started again) reloads whatever finished. `--workers N` trains the grid, then the
other seeds, in N processes of one torch thread each (the same runs, only sooner); the main
process then reloads them and writes the report. The report is rewritten
after every seed, so a run stopped early leaves the seeds it finished.

`--hours H` runs the same protocol in time-boxed slices (studies.sliced): every run one job in its
own process, `--workers` at a time, recorded in docs/baselines_jobs.json when it has finished; the
teachers, the val choice's adapters and every run's metrics kept in docs/baselines_inputs/; at the
deadline (less 10 minutes) the running jobs are stopped and nothing of them is kept. The same command
continues on any machine; the page is written (as the whole command writes it) once every job is
recorded, and not before.

`--recheck edges` is the page's amendment of 2026-12-06: the three methods whose choice sat on the grid's
edge (MOPD-Top-k, MOPD exact KL, soft labels) trained again on the same grid with the runner's bracketing
(`study.extend_lr`, up to the ladder's end), on teachers trained fresh in their own run folder
(runs/baselines-recheck/, sha256 recorded), seeds 0 1 2. Written to baselines.json's `recheck_edges` and
its section of the page (labelled partial until every registered seed is in); once complete, a choice
that moved on the same teachers puts that method's re-checked rows in the page's table (`in_use`). With
`--hours` it runs in slices as above, under the key `recheck-edges` of docs/baselines_jobs.json.

The study's files: studies/baselines_plan.py declares the protocol, the methods and the re-check;
studies/baselines_page.py writes the page from the JSON; this module trains and is the command.
"""

from __future__ import annotations

import sys

if __name__ == "__main__" and "--status" in sys.argv[1:]:   # from the JSON alone, before torch loads
    from studies.slices import jobs_status_main

    raise SystemExit(jobs_status_main("baselines", sys.argv[1:]))

import argparse
import json
import time
import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import mopd_mini as mm  # noqa: E402
from mopd_mini import cost, runs  # noqa: E402
from mopd_mini.merge import merge  # noqa: E402
from mopd_mini.config import OfflineConfig  # noqa: E402
from mopd_mini.offline import collect, train_offline  # noqa: E402

from . import sliced, slices, study  # noqa: E402
from tools.provenance import command, machine  # noqa: E402
from .study import Method, Pick, Result, Study, curve, paired_rows, scores, tag  # noqa: E402,F401
from .baselines_plan import (DOCS, DOMAINS, EXPERIMENT, FULL, HELD_OUT, LABEL, MERGES, needs, Protocol, QUICK,  # noqa: E402,F401
                             RECHECK_EXPERIMENT, RECHECK_EXTEND, RECHECK_KEY, RECHECK_METHODS, RECHECK_SEEDS,
                             TRAIN_L, TRAINED)
from .baselines_page import edge_decisions, in_use, markdown, method_stats, ranking, write  # noqa: E402,F401

try:  # the teachers the headroom study chose on validation (branch i10m)
    from .teacher_headroom import BASELINE_TEACHER, baseline_teacher_config
except ImportError:  # pragma: no cover - before that branch is merged
    BASELINE_TEACHER = None

    def baseline_teacher_config(domain, model="tiny", **overrides):
        return mm.GRPOConfig.for_model(model, domain=domain, **overrides)


class Bench:
    def __init__(self, proto: Protocol, experiment: str, progress: bool = True, given: dict | None = None):
        """The bank, the teachers at the protocol's budget (trained, or reloaded from runs/<experiment>/),
        their parameter counts. `given`: {"teacher_<domain>": (adapter folder, run)}: the teachers kept
        by a sliced study's set-up job (studies.sliced), loaded instead of trained."""
        self.proto, self.progress = proto, progress
        self.bank = mm.AdapterBank(*mm.load_base("tiny"))
        self.teacher_cfg = {d: baseline_teacher_config(d, experiment=None, progress=progress, eval_every=0,
                                                       **({} if proto.teacher_steps is None else {"steps": proto.teacher_steps}))
                            for d in DOMAINS}
        tb, tr = self.teacher_cfg["binding"], self.teacher_cfg["recall"]
        self.teacher_tag = f"t{tb.steps}_{tag(tb.lr)}_{tr.steps}_{tag(tr.lr)}"
        self.experiment = f"{experiment}/{self.teacher_tag}"
        self.folder = runs.RUNS_DIR / self.experiment      # its evaluations are cached here (study.Evals)
        self.teachers = {}
        for d in DOMAINS:
            cfg = self.teacher_cfg[d]
            cfg.experiment = self.experiment
            if given is not None:
                folder, self.teachers[d] = given[f"teacher_{d}"]
                self.bank.load(f"teacher_{d}", folder)
            else:
                self.teachers[d] = mm.train_grpo(self.bank, cfg)
        stale = {d: t.count_version for d, t in self.teachers.items() if t.count_version < cost.COUNT_VERSION}
        if stale:   # reloaded teachers whose cost/* columns older code counted (a mixed ledger)
            warnings.warn(f"the teachers {stale} reloaded from {self.folder} were counted by a version of the cost "
                          f"counting older than today's (cost.COUNT_VERSION {cost.COUNT_VERSION}): every pipeline's "
                          "teacher share would mix code versions. Train them again in a fresh experiment, or re-count them with "
                          "`python -m studies.baselines --recount-teachers <json>`", stacklevel=2)
        self.N = cost.param_counts(self.bank)[0]
        self.n_lora = sum(p.numel() for p in self.bank.parameters("teacher_binding").values())
        self.collected = {}

    # -- one trained method at one lr and seed -----------------------------------------------

    def common(self, seed: int, lr: float) -> dict:
        p = self.proto
        return dict(steps=p.steps, lr=lr, seed=seed, eval_every=p.eval_every, eval_n=p.curve_n or p.val_n, eval_split="val",
                    experiment=self.experiment, progress=self.progress)

    def train(self, method: str, lr: float, seed: int, steps: int | None = None, k: int | None = None) -> Result:
        """One run of a trained method; `steps` and `k` (RFT / soft labels' samples per prompt)
        override the protocol's budget and then name the run (studies.matched's budgets)."""
        p = self.proto
        name = f"{method}_lr{tag(lr)}" + (f"_n{steps}" if steps else "") + (f"_k{k}" if k else "") + f"_s{seed}"
        common = {**self.common(seed, lr), **({"steps": steps} if steps else {})}
        if method.startswith("mopd_"):
            run = mm.train_student(self.bank, mm.MOPDConfig.for_model(
                "tiny", loss=method.split("_")[1], prompts_per_domain=p.per_domain, student=name, track_steps=(),
                **common))
        elif method == "mixrl":
            run = mm.train_grpo(self.bank, mm.GRPOConfig.for_model(
                "tiny", domain=DOMAINS, prompts_per_step=p.per_domain, name=name, **common))
        elif method.startswith("cascade_"):
            first, second = ("binding", "recall") if method == "cascade_br" else ("recall", "binding")
            run = mm.train_grpo(self.bank, mm.GRPOConfig.for_model(
                "tiny", domain=second, init_from=f"teacher_{first}", eval_domains=(first,), prompts_per_step=p.per_domain,
                name=name, **common))
        else:
            cfg = OfflineConfig.for_model("tiny", loss={"rft": "ce", "soft": "soft"}[method], name=name,
                                          prompts_per_domain=p.offline_prompts, samples_per_prompt=k or p.offline_k,
                                          batch_size=2 * p.per_domain, **common)
            key = (seed, cfg.samples_per_prompt)
            if key not in self.collected:
                self.collected[key] = collect(self.bank, cfg)
            run = train_offline(self.bank, cfg, self.collected[key])
        return Result.of(name, run)

    def merged(self, how: str, setting: dict, seed: int) -> Result:
        w, density = setting["w"], setting.get("density")
        name = f"merge_{how}_w{tag(w)}" + (f"_d{tag(density)}" if density else "")
        if how == "dare_ties":
            name += f"_s{seed}"
        start = time.perf_counter()
        if name not in self.bank.names:
            merge(self.bank, name, {"teacher_binding": w, "teacher_recall": w}, how=how, density=density, seed=seed)
        return Result(name, None, {}, time.perf_counter() - start)


# ---------------------------------------------------------------------------------------------
# the re-check of the edge choices (the amendment of 2026-12-06): declared, run, reported (decided and
# rendered: studies.baselines_page)
# ---------------------------------------------------------------------------------------------


def declare_recheck(proto: Protocol, quick: bool) -> Study:
    """The three edge methods on the page's grid with the runner's bracketing (`study.extend_lr`, at most
    RECHECK_EXTEND rates past an edge), no tie-break (the page's protocol: seed 0 decides), on teachers
    trained in the re-check's own run folder (never reloaded from the page's)."""
    def trained(m):
        return Method(lambda bench, s, seed: bench.train(m, s["lr"], seed), grid=[{"lr": lr} for lr in proto.lrs],
                      needs=needs(m), scalar="lr", extend=study.extend_lr)

    experiment = RECHECK_EXPERIMENT + ("-quick" if quick else "")
    return Study(module="studies.baselines", argv=["--recheck", "edges", *(["--quick"] if quick else [])],
                 methods={m: trained(m) for m in RECHECK_METHODS},
                 setup=lambda progress: Bench(proto, experiment, progress=progress),
                 given=lambda progress, given: Bench(proto, experiment, progress=progress, given=given),
                 parts={"all": None, "train_L": TRAIN_L, "held_out": HELD_OUT}, max_extend=RECHECK_EXTEND)


def recheck_report(declared: Study, proto: Protocol, args):
    """The re-check's report of `study.run`'s state (or of a sliced study's records): the runner's rows,
    grids and choices, the curves of its MOPD forms, soft labels' kept counts, the teachers' sha256 and
    the references, as the page's rows carry them."""
    def report(bench: Bench, state: study.State) -> dict:
        rows = study.rows(declared, bench, state)
        for seed, row in rows.get("soft", {}).items():
            r = state.per_seed[seed]["soft"]
            row["kept"] = {k: v for k, v in r.run.metrics[0].items() if k.startswith(("sampled", "correct", "kept"))}
        curves = {m: {seed: curve(done[m].run, state.val, proto.per_domain, "base") for seed, done in state.per_seed.items()}
                  for m in declared.methods if m.startswith("mopd_")}
        return {"methods": list(declared.methods), "seeds_done": list(state.per_seed), "elapsed_s": state.elapsed,
                "protocol": {"lrs": list(proto.lrs), "steps": proto.steps, "per_domain": proto.per_domain,
                             "val_n": proto.val_n, "test_n": args.n, "max_extend": declared.max_extend,
                             "registered_seeds": list(RECHECK_SEEDS), "ladder": list(study.LADDER)},
                "teacher": {d: {"steps": c.steps, "lr": c.lr, "seed": c.seed} for d, c in bench.teacher_cfg.items()},
                "teacher_sha256": {d: runs.adapter_digest(bench.bank, f"teacher_{d}") for d in bench.teachers},
                "refs": {split: {a: getattr(state, split)[a] for a in declared.refs} for split in ("val", "test")},
                "grid": state.grid, "chosen": state.chosen, "rows": rows, "curves": curves}
    return report


def recheck_block(part: dict, cmd: str, where: dict | None = None) -> dict:
    """baselines.json's `recheck_edges`: the report, the command, date and machine (as JSON reads it back)."""
    return json.loads(json.dumps({**part, "command": cmd, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                                  "machine": where or machine()}, default=str))


def recheck_target(out: Path) -> dict:
    """The page's baselines.json, which the re-check is written beside, before anything trains."""
    saved = out / "baselines.json"
    rep = json.loads(saved.read_text()) if saved.exists() else {}
    missing = [m for m in RECHECK_METHODS if m not in rep.get("rows", {})]
    if missing:
        raise SystemExit(f"--recheck edges writes beside the page's run in {saved}, which has no rows of {missing}: run "
                         "`python -m studies.baselines` first, or pass --no-write")
    return rep


def write_recheck(block: dict, out: Path) -> dict:
    """The block into out/baselines.json (read again now: every other key as it is on disk), the page and
    its figures from it."""
    rep = recheck_target(out)
    rep[RECHECK_KEY] = block
    write(rep, out)
    return rep


def run_recheck(args, proto: Protocol, argv) -> dict | None:
    """`--recheck edges`: whole (the block written after every seed: resumable, its runs reload from its
    run folder) or in slices (`--hours`: written once every job is recorded)."""
    out = Path(args.out)
    if not args.no_write:
        recheck_target(out)
    if args.hours is not None:
        if args.no_write:
            raise SystemExit("--hours keeps every job's record in docs/: it cannot run with --no-write")
        job = sliced_study(args, proto)
        (out / INPUTS).mkdir(parents=True, exist_ok=True)
        runs.RUNS_DIR.mkdir(parents=True, exist_ok=True)
        again = slices.continuing("studies.baselines", list(argv) if argv is not None else sys.argv[1:])
        if not job.run(workers=args.workers, deadline=slices.Deadline(args.hours), again=again):
            return None
        part = job.report(recheck_report(job.s, proto, args))
        cmd = command("studies.baselines", argv) + f" (in slices: {JOBS}, machines: {' | '.join(job.machines())})"
        rep = write_recheck(recheck_block(part, cmd), out)
        print("every job recorded; the re-check's section is written")
        return rep[RECHECK_KEY]
    declared, cmd, where, kept = declare_recheck(proto, args.quick), command("studies.baselines", argv), machine(), {}

    def save(part):
        kept["block"] = recheck_block(part, cmd, where)
        if not args.no_write:
            write_recheck(kept["block"], out)

    study.run(declared, seeds=args.seeds, n=args.n, val_n=proto.val_n, workers=args.workers, quiet=args.quiet,
              summarise=recheck_report(declared, proto, args), write=save)
    block = kept["block"]
    print(json.dumps({"chosen": block["chosen"], "grid": {m: [(g["lr"], round(g["mean"], 4)) for g in e]
                                                          for m, e in block["grid"].items()},
                      "seeds_done": block["seeds_done"]}))
    return block


# ---------------------------------------------------------------------------------------------
# the report's numbers (which teachers a method reads: studies.baselines_plan.needs)
# ---------------------------------------------------------------------------------------------


def declare(proto: Protocol, quick: bool) -> Study:
    """The study on the runner (studies.study): every trained method at every learning rate of the
    grid (its budget fixed by the protocol), every merge type at its settings, and the best merge
    type picked on val; the set-up trains (or reloads) the shared teachers."""
    def trained(m):
        return Method(lambda bench, s, seed: bench.train(m, s["lr"], seed), grid=[{"lr": lr} for lr in proto.lrs],
                      needs=needs(m), scalar="lr")

    def merged(how):
        return Method(lambda bench, s, seed: bench.merged(how, s, seed), grid=proto.merge_grid[how], needs=DOMAINS,
                      in_workers=False)

    experiment = EXPERIMENT + ("-quick" if quick else "")
    return Study(module="studies.baselines", argv=["--quick"] if quick else [],
                 methods={**{m: trained(m) for m in TRAINED}, **{f"merge_{h}": merged(h) for h in MERGES}},
                 picks={"merge_best": Pick({f"merge_{h}": h for h in MERGES})},
                 setup=lambda progress: Bench(proto, experiment, progress=progress),
                 given=lambda progress, given: Bench(proto, experiment, progress=progress, given=given),
                 parts={"all": None, "train_L": TRAIN_L, "held_out": HELD_OUT})


def recount_flops(rep: dict) -> dict:
    """Every stage's and pipeline's FLOPs again from its token counters, by today's `cost.flops`
    (the counters are what was measured; the formula is an estimate that may be corrected)."""
    N, n = rep["protocol"]["N"], rep["protocol"]["n_lora"]
    for per in rep["rows"].values():
        for p in per.values():
            for part in ("stage", "pipeline"):
                p[part] = cost.with_flops(p[part], N, n)
    rep["protocol"]["flops_formula"] = cost.FORMULA
    return rep


def recount_teachers(rep: dict, progress: bool = True) -> dict:
    """The teachers trained again, from scratch, by today's code (in a temporary runs folder, so
    that no run written by older code is reloaded), with the same config and seed; their cost
    counters replace the teachers' share of every pipeline. The retrained teachers must score
    exactly what the page's teachers scored on the test split, or nothing is changed."""
    import tempfile

    P = rep["protocol"]
    proto = Protocol(**{k: P[k] for k in ("steps", "per_domain", "offline_prompts", "offline_k", "eval_every",
                                          "val_n", "teacher_steps")})
    with tempfile.TemporaryDirectory() as tmp:
        saved, runs.RUNS_DIR = runs.RUNS_DIR, Path(tmp)
        try:
            bench = Bench(proto, "recount", progress=progress)
            cfg = {d: {"steps": c.steps, "lr": c.lr, "seed": c.seed} for d, c in bench.teacher_cfg.items()}
            if cfg != P["teacher"]:
                raise SystemExit(f"the teachers' config changed since the page was made: {cfg} vs {P['teacher']}")
            names = [f"teacher_{d}" for d in DOMAINS]
            acc = mm.evaluate(bench.bank, names, n=P["test_n"])["acc"]
        finally:
            runs.RUNS_DIR = saved
    for name in names:
        old = {d: {int(L): v for L, v in by.items()} for d, by in rep["refs"]["test"][name].items()}
        if acc[name] != old:
            raise SystemExit(f"{name} retrained by today's code is not the page's teacher: test accuracy {acc[name]} "
                             f"vs {old}; re-run the whole benchmark instead")
    teachers = {d: {**cost.totals(t.metrics), "seconds": t.seconds} for d, t in bench.teachers.items()}
    for m, per in rep["rows"].items():
        for p in per.values():
            stage = {k: v for k, v in p["stage"].items() if k != "flops"}
            p["stage"], p["pipeline"] = cost.method_costs(stage, [teachers[d] for d in needs(m)], P["N"], P["n_lora"])
    P["teacher_costs"] = {"recounted": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                          "command": "python -m studies.baselines --recount-teachers docs/baselines.json",
                          **teachers}
    return recount_flops(rep)


def baselines_report(study_: Study, proto: Protocol, args):
    """The report of `study.run`'s state: the runner's rows, the RFT / soft-label kept counts,
    the val curves, the protocol and the references."""
    def report(bench: Bench, state: study.State) -> dict:
        rows = study.rows(study_, bench, state)
        for m in ("rft", "soft"):
            for seed, row in rows[m].items():
                r = state.per_seed[seed][m]
                row["kept"] = {k: v for k, v in r.run.metrics[0].items() if k.startswith(("sampled", "correct", "kept"))}
        curves = {}
        for m in ("mopd_pg", "mopd_topk", "mopd_kl", "mixrl", "cascade_br", "cascade_rb"):
            start = {"cascade_br": "teacher_binding", "cascade_rb": "teacher_recall"}.get(m, "base")
            curves[m] = {seed: curve(done[m].run, state.val, proto.per_domain, start)
                         for seed, done in state.per_seed.items()}
        return make_report(bench, proto, args, state.grid, state.chosen, list(state.per_seed), state.val, state.test,
                           state.elapsed, rows, curves)
    return report


def make_report(bench, proto, args, grid, chosen, seeds_done, val, test, elapsed, rows, curves) -> dict:
    den = scores(test, "teacher_binding", args.n)
    return {"command": command("studies.baselines", args.argv), "machine": machine(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "elapsed_s": elapsed, "protocol": {**proto.__dict__, "test_n": args.n, "seeds_done": seeds_done,
                                               "teacher": {d: {"steps": c.steps, "lr": c.lr, "seed": c.seed}
                                                           for d, c in bench.teacher_cfg.items()},
                                               "teacher_source": "studies.teacher_headroom.BASELINE_TEACHER" if BASELINE_TEACHER
                                               else 'GRPOConfig.for_model("tiny")', "N": bench.N, "n_lora": bench.n_lora},
            "refs": {"val": {a: val[a] for a in ("base", "teacher_binding", "teacher_recall")},
                     "test": {a: test[a] for a in ("base", "teacher_binding", "teacher_recall")}},
            "denominators": {d: den[d]["denominator"] for d in DOMAINS},
            "grid": grid, "chosen": chosen, "rows": rows, "curves": curves}


# ---------------------------------------------------------------------------------------------
# in time-boxed slices (--hours): every run one recorded job (studies.sliced), kept beside the JSON
# ---------------------------------------------------------------------------------------------

JOBS = "baselines_jobs.json"
"""the sliced runs' records (docs/), under the key `baselines` (`baselines-quick` for the smoke test)"""
INPUTS = "baselines_inputs"
"""the folder beside it holding what a later job reads (the teachers, the val choice's adapters) and
every run's metrics (tracked by git)"""

SETUP_S = 1200.0
"""the set-up job's estimate before one is recorded: the two teachers (about 7 min each on an Intel Xeon
core at the headroom study's budget) and the references' evaluations"""


def sliced_study(args, proto: Protocol) -> sliced.Sliced:
    """The study (or `--recheck edges`) as studies.sliced's jobs: each a process of this module with the same
    options and `--job`."""
    out, recheck = Path(args.out), getattr(args, "recheck", None)
    store = slices.Store(out / JOBS, lambda: runs.RUNS_DIR / "baselines_jobs.lock", ("jobs", "plans", "slices"))
    base = [slices.python(), "-m", "studies.baselines", "--out", str(out), "--quiet", "--n", str(args.n),
            "--seeds", *map(str, args.seeds), *(["--recheck", recheck] if recheck else []),
            *(["--quick"] if args.quick else [])]
    made = declare_recheck(proto, args.quick) if recheck else declare(proto, args.quick)
    key = ("recheck-" + recheck if recheck else EXPERIMENT) + ("-quick" if args.quick else "")
    return sliced.Sliced(made, key=key, store=store,
                         inputs=slices.Inputs(out / INPUTS, slices.files_digest), seeds=args.seeds, n=args.n,
                         val_n=proto.val_n, job_argv=lambda job: base + ["--job", json.dumps(job)],
                         setup_s=60.0 if args.quick else SETUP_S)


def run_sliced(args, proto: Protocol, argv) -> dict | None:
    """The study in slices inside `--hours`; once every job is recorded, its report written as the
    whole command writes it (nothing is written to the page before)."""
    job = sliced_study(args, proto)
    (Path(args.out) / INPUTS).mkdir(parents=True, exist_ok=True)
    runs.RUNS_DIR.mkdir(parents=True, exist_ok=True)
    again = slices.continuing("studies.baselines", list(argv) if argv is not None else sys.argv[1:])
    if not job.run(workers=args.workers, deadline=slices.Deadline(args.hours), again=again):
        return None
    rep = job.report(baselines_report(job.s, proto, args))
    rep["command"] += f" (in slices: {JOBS}, machines: {' | '.join(job.machines())})"
    write(rep, Path(args.out))
    print("every job recorded; the page is written")
    return rep


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--n", type=int, default=500, help="test prompts per domain and length")
    p.add_argument("--quick", action="store_true", help="tiny budgets, seconds: the smoke test")
    p.add_argument("--no-write", action="store_true", help="print only; docs/ is left alone")
    slices.quiet_flag(p)
    p.add_argument("--out", default=str(DOCS), help="where baselines.md, .json and figures/ go")
    p.add_argument("--recount-teachers", metavar="JSON", help="train the teachers again by today's code (minutes) "
                   "and re-count every pipeline's cost with their counters; the students are not retrained")
    p.add_argument("--render", metavar="JSON", help="rewrite the page and figures from a saved baselines.json "
                   "(no training, no evaluation: the numbers and the command are the JSON's)")
    p.add_argument("--allow-shrink", action="store_true", help="with --render: write the page even if it shows "
                   "fewer table rows than the one at --out (recorded in the JSON and said on the page)")
    p.add_argument("--workers", type=int, default=1, help="train in this many processes of one torch thread "
                   "(2 on a 2-core CPU); the numbers are the same")
    p.add_argument("--hours", type=float, help="run in a time-boxed slice of this many hours (less 10 minutes to "
                   f"write): every run a recorded job, kept in docs/{JOBS} and docs/{INPUTS}/; the same command "
                   "continues, on any machine")
    p.add_argument("--status", action="store_true", help="what the slices recorded and what is left (no torch)")
    p.add_argument("--recheck", choices=("edges",), help="the amendment of 2026-12-06: MOPD-Top-k, MOPD exact KL and "
                   "soft labels (their choice on the grid's edge) on the bracketed grid, fresh teachers, seeds 0 1 2; "
                   f"written to baselines.json's {RECHECK_KEY} and its section of the page (with --hours: in slices)")
    p.add_argument("--job", help=argparse.SUPPRESS)                  # one job of a slice, in its own process
    study.add_worker_args(p)                                         # internal: one worker of --workers
    args = p.parse_args(argv)
    args.argv = list(argv) if argv is not None else None
    if args.workers < 1:
        raise SystemExit(f"--workers must be >= 1, got {args.workers}")
    if args.status:
        return slices.jobs_status_main("baselines", ["--out", args.out])
    if args.job is not None:
        if args.quick and args.n == 500:
            args.n = 6
        return sliced_study(args, QUICK if args.quick else FULL).job(json.loads(args.job))
    if args.worker is not None:
        if args.quick and args.n == 500:
            args.n = 6
        proto = QUICK if args.quick else FULL
        made = declare_recheck(proto, args.quick) if args.recheck else declare(proto, args.quick)
        return study.worker_main(made, args.worker, args.jobs, args.n, proto.val_n)
    if args.recount_teachers:
        rep = recount_teachers(json.loads(Path(args.recount_teachers).read_text()), progress=not args.quiet)
        if not args.no_write:
            write(rep, Path(args.out))
        print(markdown(rep))
        return rep
    if args.render:
        source = Path(args.render)
        rep = slices.read_record(source, "baselines")
        with slices.rendering(source):
            rep = recount_flops(rep)
            if not args.no_write:
                write(rep, Path(args.out), source, args.allow_shrink)
            print(markdown(rep))
        return rep
    if args.quick and args.n == 500:
        args.n = 6
    proto = QUICK if args.quick else FULL
    if args.recheck:
        return run_recheck(args, proto, argv)
    if args.hours is not None:
        if args.no_write:
            raise SystemExit("--hours keeps every job's record in docs/: it cannot run with --no-write")
        return run_sliced(args, proto, argv)
    writer = None if args.no_write else (lambda rep: write(rep, Path(args.out)))
    declared = declare(proto, args.quick)
    rep = study.run(declared, seeds=args.seeds, n=args.n, val_n=proto.val_n, workers=args.workers, quiet=args.quiet,
                    summarise=baselines_report(declared, proto, args), write=writer)
    print(markdown(rep))
    return rep


if __name__ == "__main__":
    main()
