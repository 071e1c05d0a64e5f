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
"""

from __future__ import annotations

import sys

if __name__ == "__main__" and "--status" in sys.argv[1:]:   # from the JSON alone, before torch loads
    from studies.slices import jobs_status_main

    raise SystemExit(jobs_status_main("baselines", sys.argv[1:]))

import argparse
import json
import math
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from statistics import fmean

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import mopd_mini as mm  # noqa: E402
from mopd_mini import cost, plots, runs, stats, views  # noqa: E402
from mopd_mini.adapters import atomic_write  # noqa: E402
from mopd_mini.merge import merge  # noqa: E402
from mopd_mini.offline import OfflineConfig, collect, train_offline  # noqa: E402

from . import sliced, slices, study  # noqa: E402
from tools.provenance import command, machine, machine_line  # noqa: E402
from .study import Method, Pick, Result, Study, cell, curve, fmt_int, paired_rows, scores, tag  # noqa: E402

try:  # the teachers the headroom study chose on validation (branch i10m)
    from .teacher_headroom import BASELINE_TEACHER, baseline_teacher_config
except ImportError:  # pragma: no cover - before that branch is merged
    BASELINE_TEACHER = None

    def baseline_teacher_config(domain, model="tiny", **overrides):
        return mm.GRPOConfig.for_model(model, domain=domain, **overrides)

DOCS = Path("docs")
FIGURES = DOCS / "figures"
EXPERIMENT = "baselines"
DOMAINS = ("binding", "recall")
TRAIN_L = {"binding": (16,), "recall": (16,)}      # evaluated lengths that are also train lengths
HELD_OUT = {"binding": (24, 32), "recall": (24,)}  # never trained on

# the paper's Table 2 (Qwen3-30B-A3B, three domains), where it has the method
PAPER = {"mopd_pg": 0.937, "mopd_topk": 0.909, "mixrl": 0.882, "rft": 0.824, "cascade_br": 0.775,
         "cascade_rb": 0.775, "merge_cat": 0.857, "merge_linear": 0.328}
PAPER_NAME = {"rft": "off-policy FT", "merge_cat": "task arithmetic", "merge_linear": "linear",
              "cascade_br": "Cascade RL", "cascade_rb": "Cascade RL"}
LABEL = {"mopd_pg": "MOPD-PG", "mopd_topk": "MOPD-Top-k", "mopd_kl": "MOPD exact KL", "mixrl": "Mix-RL",
         "cascade_br": "Cascade binding→recall", "cascade_rb": "Cascade recall→binding",
         "rft": "RFT (rejection-sampled SFT)", "soft": "soft-label KD (offline)",
         "merge_linear": "merge linear", "merge_cat": "merge cat (task arithmetic)", "merge_ties": "merge ties",
         "merge_dare_ties": "merge dare_ties", "merge_best": "best merge (chosen on val)"}
TRAINED = ("mopd_pg", "mopd_topk", "mopd_kl", "mixrl", "cascade_br", "cascade_rb", "rft", "soft")
MERGES = ("linear", "cat", "ties", "dare_ties")


@dataclass
class Protocol:
    """Budgets and grids (FULL for the report, QUICK for the smoke test)."""

    steps: int = 300                      # optimizer steps of every trained method (the course's MOPD preset)
    per_domain: int = 8                   # prompts per domain per step (online); offline batch = 2x this
    lrs: tuple = (3e-4, 1e-3, 3e-3)       # the learning-rate grid of every trained method
    offline_prompts: int = 600            # RFT / soft: prompts per domain the teachers sample (x K = MOPD's samples)
    offline_k: int = 4                    # RFT / soft: samples per prompt (K)
    merge_grid: dict = field(default_factory=lambda: {
        "linear": [dict(w=0.5), dict(w=1.0), dict(w=1.5)],
        "cat": [dict(w=0.5), dict(w=1.0), dict(w=1.5)],
        "ties": [dict(w=1.0, density=d) for d in (0.3, 0.6, 0.9)],
        "dare_ties": [dict(w=1.0, density=d) for d in (0.3, 0.6, 0.9)]})
    eval_every: int = 50                  # periodic val evaluations (the curves)
    val_n: int = 100                      # val prompts per domain and length (grid, curves)
    teacher_steps: int | None = None      # None: the chosen teacher config's
    curve_n: int | None = None            # val prompts of the periodic evaluations (None: val_n; bench.matched: fewer)


FULL = Protocol()
QUICK = Protocol(steps=2, per_domain=2, lrs=(1e-3, 3e-3), offline_prompts=3, offline_k=2, eval_every=1, val_n=4,
                 teacher_steps=3, merge_grid={"linear": [dict(w=1.0)], "cat": [dict(w=1.0)],
                                              "ties": [dict(w=1.0, density=0.5)], "dare_ties": [dict(w=1.0, density=0.5)]})


# ---------------------------------------------------------------------------------------------
# the re-check of the three edge choices (this page's amendment of 2026-12-06), registered before it ran
# ---------------------------------------------------------------------------------------------

RECHECK_METHODS = ("mopd_topk", "mopd_kl", "soft")
"""the methods whose val choice sat on the grid's edge (lr 3e-3, the top of FULL.lrs) in the page's run"""
RECHECK_EXPERIMENT = "baselines-recheck"
"""the re-check's run folder (runs/baselines-recheck/): its own, so its teachers are trained by it, never
reloaded from the page's folder"""
RECHECK_SEEDS = (0, 1, 2)
RECHECK_ESTIMATE = (0.5, 1.2)
"""the re-check's CPU-hours as registered (the amendment below, from recorded job wall times)"""
RECHECK_DATE = "2026-12-06"
RECHECK_EXTEND = 2
"""at most this many rates past an edge (`Study.max_extend`): from 3e-3, 1e-2 and 3e-2, the ladder's end"""
RECHECK_KEY = "recheck_edges"
"""the re-check's block in docs/baselines.json (and `--recheck edges`'s records' key in docs/baselines_jobs.json:
recheck-edges)"""
RECHECK_HEADING = "## Re-check of the three edge choices"

AMENDMENT_EDGES = [
    "**Amendment, 2026-12-06: the three edge choices re-checked** (committed before its run, beside the registered "
    "protocol above, which stands as written):", "",
    "* **Why.** The val search chose lr 0.003, the top of the grid, for MOPD-Top-k, MOPD exact KL and soft-label KD "
    "(offline); \"What this setting can and cannot show\" below says their optimum is not bracketed. The run predates "
    "the runner's bracketing (`studies.study.extend_lr`), which today extends a grid whose best sits on its edge.",
    "* **What runs.** `python -m studies.baselines --recheck edges --seeds 0 1 2 --workers 2 --hours H`, in time-boxed "
    "slices (`studies.sliced`): each run one job, recorded in docs/baselines_jobs.json under `recheck-edges`; the "
    "teachers and the val choice's adapters kept in docs/baselines_inputs/. The same command continues on any machine; "
    "`--status` says what is left. Only these three methods train; every other row of this page stands as recorded.",
    "* **Teachers.** Trained fresh by the re-check's set-up job with this page's teacher config (binding and recall "
    "200 GRPO steps at lr 0.001, seed 0, `teacher_headroom.BASELINE_TEACHER`) in its own run folder "
    "(runs/baselines-recheck/, never this page's), their sha256 recorded. This page's run kept no hash of its "
    "teachers, so the two sets are compared by their test accuracies at 500 prompts a length: *the same teachers* "
    "means equal at every length (as the re-count of 2026-12-02 found for this config and seed), anything else "
    "*other teachers*.",
    "* **Grid and bracketing.** Each of the three on this page's grid, lr in {3e-4, 1e-3, 3e-3}, budget fixed (300 "
    "steps of 8 prompts a domain; soft labels K = 4 of 600 prompts a domain), at seed 0, scored on val (100 prompts "
    "a domain and length), by the runner's bracketing: a best on the grid's edge gets the next rate of the ladder "
    "(`studies.study.LADDER`: 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2), again while the best stays on the edge, at most 2 "
    "extensions (`Study.max_extend`), which from 3e-3 is the ladder's end: the grid becomes {3e-4, 1e-3, 3e-3, 1e-2} "
    "and, where 1e-2 is best, 3e-2 too (from a best at 3e-4: 1e-4, the ladder's other end). No tie-break: this "
    "page's protocol chooses on seed 0 alone.",
    "* **Seeds**: 0, 1, 2 at each chosen rate (seed 0's run is the grid's), each tested once on 500 prompts a domain "
    "and length, as above.",
    "* **Metric and decision rule.** The choice is the best mean normalised val score, this page's rule. A method's "
    "choice **moves** when the re-check chooses another rate than this page's 0.003; it is **bracketed** when its "
    "chosen rate has a rate tried on each side; it is **on its hard limit** when its best is still at an end of the "
    "ladder (3e-2 or 1e-4), past which no rate is tried, and the page then says so.",
    "* **What it can change.** Its data is docs/baselines.json's `recheck_edges`; nothing else there changes. Its "
    "section goes on this page after the validation grids: the extended grids, the choices, the teachers against "
    "this page's. Only a complete re-check (seeds 0, 1, 2 recorded) decides; a partial one is shown labelled "
    "partial and changes nothing. Where a choice moves on the same teachers, that method's rows (the table, the "
    "paired differences and their Holm family, the ranking, the figures, the per-seed accuracies, the costs) and "
    "its validation grid are rendered from the re-check's seeds at the new rate, marked so, and the findings cited "
    "from this page (tools/findings.py) read them too; on other teachers its rows stay and the section shows the "
    "re-check's beside them, descriptive. A choice that does not move keeps this page's rows, with the re-check's "
    "at 0.003 beside them, descriptive. The edge sentence below then names each method as bracketed by the "
    "re-check or on its hard limit. Whatever it shows is reported.",
    "* **Compute**, estimated from recorded wall times, not timed afresh (this page's run was not in slices, so "
    "docs/baselines_jobs.json holds none). The sliced re-check at T = 400 (docs/matched_jobs.json, "
    "`T400-recheck-rft`, 2026-12-06, Intel Xeon, 2 cores shared with other jobs) recorded its MOPD exact KL jobs of "
    "the same 300 steps x 8 prompts a domain at 91 to 181 s wall each (process start, model load and every "
    "evaluation included), a test-only job at 17 to 19 s and its set-up (two teachers of 400 steps, twice these) at "
    "183 s. This page's stage seconds put Top-k and soft labels at or below exact KL's (142 and 148 s against 162 "
    "s); soft labels add their teachers' sampling, about 20 s a job (4,800 completions at the 3.8 ms a completion "
    "docs/matched.md's estimate timed). The re-check runs one set-up, 9 to 15 val-choice jobs (the 9 grid runs and "
    "0 to 2 extensions a method), 3 test-only jobs (seed 0's chosen runs) and 6 runs of seeds 1 and 2: 0.55 "
    "CPU-hours at 110 s a run job and no extension, 1.16 at 181 s and every extension, so **0.5 to 1.2 "
    "CPU-hours** on that shared machine (about 0.4 to 0.7 h wall with 2 workers: the set-up runs alone and the val "
    "choice's rounds leave a core idle). Process starts are included, as the recorded jobs include them.",
]
"""registered beside the Protocol (the page's frozen text may only grow by dated amendments)"""


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
                self.teachers[d] = mm.train_teacher(self.bank, cfg)
        stale = {d: t.ledger for d, t in self.teachers.items() if t.ledger < cost.LEDGER}
        if stale:   # reloaded teachers whose cost/* columns older code counted (a mixed ledger)
            warnings.warn(f"the teachers {stale} reloaded from {self.folder} were counted by cost ledger "
                          f"version(s) older than today's {cost.LEDGER}: every pipeline's teacher share would mix "
                          "code versions. Train them again in a fresh experiment, or re-count them with "
                          "`python -m bench.baselines --recount-teachers <json>`", stacklevel=2)
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
            run = mm.train_teacher(self.bank, mm.GRPOConfig.for_model(
                "tiny", domain=DOMAINS, prompts_per_step=p.per_domain, name=name, **common))
        elif method.startswith("cascade_"):
            first, second = ("binding", "recall") if method == "cascade_br" else ("recall", "binding")
            run = mm.train_teacher(self.bank, mm.GRPOConfig.for_model(
                "tiny", domain=second, init_from=f"teacher_{first}", eval_domains=(first,), prompts_per_step=p.per_domain,
                name=name, **common))
        else:
            cfg = OfflineConfig.for_model("tiny", loss={"rft": "sft", "soft": "soft"}[method], name=name,
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
# the re-check of the edge choices (the amendment of 2026-12-06): declared, reported, decided, rendered
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


def recheck_complete(block: dict) -> bool:
    """Every registered seed recorded (and every seed its command asked for): only then does it decide."""
    done = {int(x) for x in block["seeds_done"]}
    return set(RECHECK_SEEDS) <= done and not study.unfinished(block["command"], block["seeds_done"])


def _plain(x):
    return json.loads(json.dumps(x, default=str))


def same_teachers(rep: dict, block: dict) -> bool:
    """The amendment's test of "the same teachers" (the page's run kept no hash): equal test accuracy at
    every length of both domains, on the same number of test prompts."""
    if block["protocol"]["test_n"] != rep["protocol"]["test_n"]:
        return False
    return all(_plain(block["refs"]["test"][t]) == _plain(rep["refs"]["test"][t]) for t in ("teacher_binding", "teacher_recall"))


def edge_decisions(rep: dict) -> dict:
    """{method: {was, chosen, moved, bracketing, lrs}} of the page's `recheck_edges` (its choices so far):
    the page's rate, the re-check's, whether it moved, and `study.bracketing` of the re-check's choice."""
    block, out = rep[RECHECK_KEY], {}
    for m in RECHECK_METHODS:
        if m in block.get("chosen", {}):
            ch, was = block["chosen"][m], rep["chosen"][m]
            out[m] = {"was": was, "chosen": ch, "moved": not math.isclose(ch, was),
                      "bracketing": study.bracketing(block["grid"][m], ch), "lrs": sorted(g["lr"] for g in block["grid"][m])}
    return out


def in_use(rep: dict) -> dict:
    """The report the page renders: a complete re-check whose choice moved, on the same teachers, puts that
    method's rows, choice, val grid and curves in the page's place (`recheck_in_use` names them); else
    the report as recorded. The findings read it too (tools/findings.py)."""
    block = rep.get(RECHECK_KEY)
    if not block or not recheck_complete(block) or not same_teachers(rep, block):
        return rep
    moved = [m for m, d in edge_decisions(rep).items() if d["moved"]]
    if not moved:
        return rep
    out = {**rep, **{k: dict(rep.get(k, {})) for k in ("rows", "chosen", "grid", "curves")}, "recheck_in_use": moved}
    for m in moved:
        for k in ("rows", "chosen", "grid"):
            out[k][m] = block[k][m]
        if m in block.get("curves", {}):
            out["curves"][m] = block["curves"][m]
    return out


def recheck_mark(rep: dict, m: str) -> str:
    """' (re-check, lr X)' beside a method whose rows are the re-check's, else ''."""
    return f" (re-check, lr {rep['chosen'][m]:g})" if m in rep.get("recheck_in_use", ()) else ""


def tuning_edges(rep: dict, edge: list[str]) -> str:
    """The "Tuning" bullet's sentence on the choices on an edge (`edge`: the methods whose chosen rate is
    at an end of the page's grid), with what the re-check decided once it is complete."""
    block = rep.get(RECHECK_KEY)
    if not block or not recheck_complete(block):
        partial = f" (the re-check of the amendment of {RECHECK_DATE} is partial: its section below)" if block else ""
        return (f"the chosen rate sits on the grid's edge for {', '.join(LABEL[m] for m in edge)}, so their optimum is "
                f"not bracketed{partial}. " if edge else "every chosen rate is inside its grid. ")
    dec = edge_decisions(rep)
    left = [LABEL[m] for m in edge if m not in dec]
    by = {k: [LABEL[m] + (f" (lr {d['chosen']:g})" if k != "bracketed" else "") for m, d in dec.items()
              if d["bracketing"] == k] for k in ("bracketed", "hard limit", "edge")}
    out = (f"the chosen rate sits on the grid's edge for {', '.join(left)}, so their optimum is not bracketed. "
           if left else "")
    said = [f"bracketed the choice of {', '.join(by['bracketed'])}"] if by["bracketed"] else []
    said += [f"left {', '.join(by['hard limit'])} on the hard limit (the ladder's end: no rate past it is tried)"] \
        if by["hard limit"] else []
    said += [f"left {', '.join(by['edge'])} on the grid's edge after its {RECHECK_EXTEND} extensions"] if by["edge"] else []
    return out + (f"{'The' if left else 'the'} re-check of the amendment of {RECHECK_DATE} (its section below) "
                  + "; ".join(said) + ". "
                  if said else "")


def recheck_section(rep: dict) -> list[str]:
    """The re-check's section of the page (a function of baselines.json as recorded: its `recheck_edges`
    beside the page's own rows); [] without one. Partial until every registered seed is in."""
    block = rep.get(RECHECK_KEY)
    if not block:
        return []
    done, seeds, dec = recheck_complete(block), block["seeds_done"], edge_decisions(rep)
    same = same_teachers(rep, block)
    test = lambda r, t, d: fmean(r["refs"]["test"][t][d].values())  # noqa: E731
    out = [f"{RECHECK_HEADING} (amendment of {RECHECK_DATE})" + ("" if done else ": partial"), "",
           f"Written by `{block['command']}`, finished {block['date']}, on {machine_line(block['machine'])}. Its "
           f"registration is this page's amendment of {RECHECK_DATE} (under Protocol); its data is docs/baselines.json, "
           f"`{RECHECK_KEY}`.", ""]
    if not done:
        out += [f"**Partial**: seeds {seeds} recorded of the registered {list(RECHECK_SEEDS)}. No choice is decided "
                "and nothing else on this page reads it; the same command continues it.", ""]
    out += study.spent_line(block, RECHECK_ESTIMATE, RECHECK_DATE, "on the shared machine it was estimated from")
    out += [f"**Teachers.** Trained by the re-check in its own run folder (runs/{RECHECK_EXPERIMENT}/; in slices by its "
            "set-up job, kept in docs/baselines_inputs/), " + ", ".join(f"{d} {t['steps']} GRPO steps at lr {t['lr']:g}, "
                                                                       f"seed {t['seed']}" for d, t in block["teacher"].items())
            + "; sha256 " + ", ".join(f"{d} {h[:16]}" for d, h in block["teacher_sha256"].items()) + ". Test accuracy, "
            "mean over the lengths, the re-check's against this page's: "
            + "; ".join(f"{d} {test(block, f'teacher_{d}', d):.3f} against {test(rep, f'teacher_{d}', d):.3f}" for d in DOMAINS)
            + ". " + ("**The same teachers** by the amendment's test (equal test accuracy at every length; this page's "
                      "run kept no hash)." if same else "**Other teachers** by the amendment's test (the test accuracies "
                                                         "differ, or were scored on another number of prompts)."), "",
            "Mean normalised val score (seed 0, val "
            f"{block['protocol']['val_n']} prompts a domain and length) at every rate tried; the choice in bold; "
            "[extended]: added by the bracketing.", "",
            "| method | this page (its run) | the re-check | decision |", "| --- | --- | --- | --- |"]
    for m, d in dec.items():
        page = "; ".join((f"**{g['lr']:g}: {g['mean']:.3f}**" if math.isclose(g["lr"], d["was"]) else
                          f"{g['lr']:g}: {g['mean']:.3f}") for g in rep["grid"][m])
        mine = "; ".join((f"**{g['lr']:g}: {g['mean']:.3f}**" if math.isclose(g["lr"], d["chosen"]) else
                          f"{g['lr']:g}: {g['mean']:.3f}") + (" [extended]" if g.get("extended") else "")
                         for g in block["grid"][m])
        where = {"bracketed": "bracketed ({} and {} tried beside it)".format(
                     *(f"{x:g}" for x in (max(x for x in d["lrs"] if x < d["chosen"]),
                                          min(x for x in d["lrs"] if x > d["chosen"])))) if d["bracketing"] == "bracketed"
                 else "", "hard limit": "on its hard limit (the ladder's end: no rate past it is tried)",
                 "edge": f"on the grid's edge after {block['protocol']['max_extend']} extensions"}[d["bracketing"]]
        moved = f"moves from {d['was']:g} to {d['chosen']:g}" if d["moved"] else f"stays at {d['chosen']:g}"
        out.append(f"| {LABEL[m]} | {page} | {mine} | " + (f"{moved}, {where}" if done else
                                                            f"partial, not decided (so far: {moved}, {where})") + " |")
    out += ["", "Mean normalised test score per seed: the re-check's rows at its choice, this page's at its own "
            "(descriptive; paired by seed, the same test prompts" + (")." if same else ", other teachers)."), "",
            "| method | rows | " + " | ".join(f"seed {x}" for x in seeds) + " | re-check minus this page |",
            "| --- | --- | " + " | ".join("---" for _ in seeds) + " | --- |"]
    for m in dec:
        mine, page = block["rows"][m], rep["rows"][m]
        diff = study.paired_rows({"a": mine, "b": page}, "a", "b")
        for who, rows_ in ((f"the re-check (lr {dec[m]['chosen']:g})", mine), (f"this page (lr {dec[m]['was']:g})", page)):
            out.append(f"| {LABEL[m]} | {who} | " + " | ".join(
                f"{rows_[str(x)]['all']['mean']:.3f}" if str(x) in rows_ else "—" for x in seeds)
                + f" | {stats.interval_text(diff) if who.startswith('the re-check') and diff['n'] else ''} |")
    if done:
        out += ["", "**Decision** (the amendment's rule):"]
        for m, d in dec.items():
            if not d["moved"]:
                then = "this page's rows stay (the same rate); the re-check's are beside them above, descriptive"
            elif same:
                then = (f"its rows on this page (the table, the paired differences and their Holm family, the ranking, "
                        f"the figures, the costs, the per-seed accuracies) and its validation grid are the re-check's at lr "
                        f"{d['chosen']:g}, marked \"(re-check, lr {d['chosen']:g})\"")
            else:
                then = "on other teachers, so this page's rows stay; the re-check's are beside them above, descriptive"
            where = {"bracketed": "bracketed", "hard limit": "on its hard limit",
                     "edge": "on the grid's edge after its extensions"}[d["bracketing"]]
            out.append(f"* **{LABEL[m]}**: the choice " + (f"moves ({d['was']:g} to {d['chosen']:g})" if d["moved"] else
                                                          f"does not move ({d['chosen']:g})") + f", {where}; {then}.")
    return out + [""]


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
# the report's numbers
# ---------------------------------------------------------------------------------------------


def needs(method: str) -> tuple[str, ...]:
    """The teachers (by domain) a method's pipeline needs before its own stage."""
    if method == "mixrl":
        return ()
    if method.startswith("cascade_"):
        return ("binding" if method == "cascade_br" else "recall",)
    return DOMAINS


def pipeline_of(method: str, stage: dict, teachers: dict) -> dict:
    """Cost totals of the whole pipeline: the method's stage plus the teachers it needs."""
    return cost.add(stage, *(teachers[d] for d in needs(method)))


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
                p[part]["flops"] = cost.flops(p[part], N, n)
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
            p["pipeline"] = pipeline_of(m, stage, teachers)
    P["teacher_costs"] = {"recounted": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                          "command": "python -m bench.baselines --recount-teachers docs/baselines.json",
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
                                               "teacher_source": "bench.teacher_headroom.BASELINE_TEACHER" if BASELINE_TEACHER
                                               else 'GRPOConfig.for_model("tiny")', "N": bench.N, "n_lora": bench.n_lora},
            "refs": {"val": {a: val[a] for a in ("base", "teacher_binding", "teacher_recall")},
                     "test": {a: test[a] for a in ("base", "teacher_binding", "teacher_recall")}},
            "denominators": {d: den[d]["denominator"] for d in DOMAINS},
            "grid": grid, "chosen": chosen, "rows": rows, "curves": curves}


# ---------------------------------------------------------------------------------------------
# the page and the figures
# ---------------------------------------------------------------------------------------------


def method_stats(rep: dict, m: str, part: str = "all", key: str = "mean") -> tuple[float, float, float, int]:
    per = rep["rows"][m]
    vals = [p[part][key] if key == "mean" else p[part][key]["normalised"] for p in per.values()]
    ses = [p[part]["mean_se"] if key == "mean" else p[part][key]["se"] for p in per.values()]
    mu, sd = stats.mean_sd(vals)
    return mu, sd, fmean(ses), len(vals)


def ranking(rep) -> list[str]:
    """Methods by mean normalised test score, best first (nan last)."""
    key = lambda m: -method_stats(rep, m)[0] if not math.isnan(method_stats(rep, m)[0]) else math.inf  # noqa: E731
    return sorted(rep["rows"], key=key)


def markdown(rep: dict) -> str:
    recorded, rep = rep, in_use(rep)        # a complete re-check's moved rows in the page's place (else as recorded)
    P = rep["protocol"]
    seeds = P["seeds_done"]
    out = ["# Baselines: is MOPD worth it?", "",
           "Every number on this page was written by one command, on the machine below:", "",
           "```bash", rep["command"], "```", "",
           f"Machine: {machine_line(rep['machine'])}. Finished {rep['date']} after {rep['elapsed_s'] / 60:.0f} min "
           f"(runs already in runs/baselines/ are reloaded, not retrained). Seeds finished: {seeds}.", "",
           *study.unfinished(rep["command"], P["seeds_done"]),
           "## Protocol", "",
           f"* **Teachers**: one per domain, seed 0, shared by every method and seed: "
           + ", ".join(f"{d} {t['steps']} GRPO steps at lr {t['lr']:g}" for d, t in P["teacher"].items())
           + f" (from `{P['teacher_source']}`).",
           f"* **Budget of every trained method** (the course's MOPD preset): {P['steps']} optimizer steps with {P['per_domain']} prompts per domain "
           f"per step = **{P['steps'] * P['per_domain']} prompts per domain** for MOPD (1 sample each), Mix-RL and the "
           f"second stage of Cascade RL (G = 8 samples each); RFT and soft labels: the teachers sample K = {P['offline_k']} "
           f"completions of {P['offline_prompts']} prompts per domain (temperature 1), and the student trains "
           f"{P['steps']} steps of {2 * P['per_domain']} kept completions. Same LoRA (r 16, alpha 32, all linear), "
           "every adapter from B = 0 (Cascade's second stage from a copy of the first domain's teacher).",
           f"* **Search, identical for every method** (seed 0, val split, {P['val_n']} prompts per domain and length): "
           f"learning rate in {list(P['lrs'])} for each trained method (budget fixed), 3 settings per merge type; "
           "the best mean normalised val score is chosen; that seed-0 run is the seed-0 result.",
           f"* **Test**: {P['test_n']} prompts per domain and length, each method once per seed. Normalised score per domain "
           "= (model - base) / (teacher - base), on the mean accuracy over the domain's lengths.",
           "* **Uncertainty**: each cell is mean ± std over seeds (the sample std, ddof = 1; absent with one seed) and, in "
           "brackets, the binomial standard error of that score from the test sample alone "
           "(sqrt(p(1-p)/n) per length, propagated through the mean and divided by the denominator, which is taken as fixed).",
           "", *AMENDMENT_EDGES, ""]
    # denominators
    refs = rep["refs"]["test"]
    out += ["## Denominators (test)", "", "| domain | base | teacher | denominator |", "| --- | --- | --- | --- |"]
    for d in DOMAINS:
        b, t = fmean(refs["base"][d].values()), fmean(refs[f"teacher_{d}"][d].values())
        out.append(f"| {d} (L {', '.join(map(str, refs['base'][d]))}) | {b:.3f} | {t:.3f} | {t - b:+.3f} |")
    out += ["", "## The table (the paper's Table 2 at course scale)", "",
            f"Normalised score on the test split, seeds {seeds}: mean ± std over seeds (binomial SE).", "",
            "| method | binding | recall | mean | mean at train length 16 | mean held out (b 24, 32; r 24) | paper |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    order = ranking(rep)
    for m in order:
        per = rep["rows"][m].values()
        c = lambda part, key: cell([p[part][key] if key == "mean" else p[part][key]["normalised"] for p in per],  # noqa: E731
                                   [p[part]["mean_se"] if key == "mean" else p[part][key]["se"] for p in per])
        paper = f"{PAPER[m]:.3f} ({PAPER_NAME.get(m, LABEL[m])})" if m in PAPER else "—"
        label = LABEL[m] + (f" = {rep['chosen']['merge_best']['how']}" if m == "merge_best" else "") + recheck_mark(rep, m)
        out.append(f"| {label} | {c('all', 'binding')} | {c('all', 'recall')} | **{c('all', 'mean')}** | "
                   f"{c('train_L', 'mean')} | {c('held_out', 'mean')} | {paper} |")
    out += ["", "Merges of linear, cat and ties are deterministic given the teachers (shared by all seeds), so their "
            "seed std is 0 by construction; dare_ties draws its masks from the seed.", ""]
    # paired differences
    best_mopd = max(("mopd_pg", "mopd_topk", "mopd_kl"), key=lambda m: method_stats(rep, m)[0])
    k = len(seeds)
    out += ["### Which differences are resolved", "",
            "Each method minus MOPD-PG (the paper's default) and minus the best MOPD form here "
            f"({LABEL[best_mopd]}), paired by seed: the mean of the {k} per-seed differences of the mean normalised "
            f"score ± the half-width of its 95% t-interval (t = {stats.t975(k - 1) if k > 1 else float('nan'):.2f} "
            f"with {k} seeds; `mopd_mini.stats.paired`). A difference is **resolved** only when that interval "
            "excludes 0; otherwise it is *not resolved*: these seeds cannot tell the two apart, which is not the same "
            "as showing them equal.", "",
            "Multiplicity (amendment, 2026-12-03): the comparisons of this table are one family; each verdict is "
            "Holm's step-down correction of the paired t-tests' p-values over the whole family (`bench.study.family`), "
            "and a verdict that holds only uncorrected is labelled so. No equivalence margin was registered: nothing "
            "here is called equal. So *resolved* here means p (Holm) below 0.05, which is the same as the interval at Holm's "
            "level (printed in each verdict: the level at which Holm's step-down tests that comparison, "
            "`mopd_mini.stats.holm_levels`) excluding 0; the ± column is the uncorrected 95% interval.", "",
            f"| method | minus MOPD-PG | per seed | verdict | minus {LABEL[best_mopd]} | per seed | verdict |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    fam = study.family({f"{m}|{ref}": paired_rows(rep["rows"], m, ref) for m in order for ref in ("mopd_pg", best_mopd)
                        if m != ref})

    def verdict(p, ref, key=None):
        f = fam.get(key) if key else None
        at = f" ({stats.holm_interval_text(f, f['alpha_holm'], 2)})" if f is not None and f["n"] >= 2 else ""
        if f is not None and f["resolved"] and not f["resolved_holm"]:
            return (f"not resolved after Holm (p (Holm) {f['p_holm']:.2f}{at[1:-1] and '; ' + at[1:-1]}); uncorrected: "
                    + (f"better than {ref}" if p["diff"] > 0 else f"worse than {ref}"))
        if not (f["resolved_holm"] if f is not None else p["resolved"]):
            return "not resolved" + at
        return (f"better than {ref}" if p["diff"] > 0 else f"worse than {ref}") + at

    for m in order:
        cells = []
        for ref in ("mopd_pg", best_mopd):
            if m == ref:
                cells.append("— | — | —")
                continue
            p = paired_rows(rep["rows"], m, ref)
            cells.append(f"{stats.interval_text(p)} | {', '.join(f'{d:+.2f}' for d in p['per_seed'])} | "
                         f"{verdict(p, LABEL[ref], f'{m}|{ref}')}")
        out.append(f"| {LABEL[m]} | " + " | ".join(cells) + " |")
    ranked = ", ".join(f"{LABEL[m]} {method_stats(rep, m)[0]:.2f}" for m in order)
    baselines = [m for m in order if not m.startswith("mopd_")]
    held = {m: fam[f"{m}|{best_mopd}"]["resolved_holm"] for m in baselines}      # after Holm's correction
    better = [LABEL[m] for m in baselines if held[m] and paired_rows(rep["rows"], m, best_mopd)["diff"] > 0]
    worse = [LABEL[m] for m in baselines if held[m] and paired_rows(rep["rows"], m, best_mopd)["diff"] < 0]
    level = [LABEL[m] for m in baselines if not held[m]]
    out += ["", f"**Ranking as measured** (mean normalised test score): {ranked}.", "",
            f"**Against the best MOPD form ({LABEL[best_mopd]}), paired by seed, after Holm's correction: resolved better: "
            f"{', '.join(better) or 'none'}; resolved worse: {', '.join(worse) or 'none'}; not resolved: "
            f"{', '.join(level) or 'none'}.**", ""]
    above = [LABEL[m] for m in TRAINED if method_stats(rep, m)[0] > 1.0]
    t_steps = {t["steps"] for t in P["teacher"].values()}
    rl_ratio = P["steps"] / max(t_steps) if t_steps and None not in t_steps else float("nan")
    edge = [m for m in TRAINED if m in rep["chosen"] and rep["grid"].get(m)
            and rep["chosen"][m] in (min(g["lr"] for g in rep["grid"][m]), max(g["lr"] for g in rep["grid"][m]))]
    out += ["### What this setting can and cannot show", "",
            f"* **The RL budgets are not matched.** Each teacher had {max(t_steps)} GRPO steps x {P['per_domain']} prompts "
            f"x 8 samples = {max(t_steps) * P['per_domain'] * 8:,} samples of its domain; Mix-RL and Cascade RL's second "
            f"stage had {P['steps']} steps = {P['steps'] * P['per_domain'] * 8:,} samples per domain, "
            f"**{rl_ratio:.1f}x** the teachers' RL. So Mix-RL's place against MOPD here mixes the method with a larger "
            "RL budget; a comparison at the same per-domain RL budget is not on this page: it is "
            "[docs/matched.md](matched.md), pre-registered before it ran, whose Results section compares every method "
            "at equal RL budgets (its tables supersede this page's ranking for that question). "
            "A score above 1 means better than that domain's teacher"
            + (f" ({', '.join(above)} here)" if above else "") + ": RL on the reward can get there; a "
            "distilled student is trained to match its teachers, not to pass them, though at these scales a student "
            "has scored above 1 too (docs/matched.md's tables), so the scale is not a cap.",
            f"* The ranking depends on the budget: the same protocol at 50 steps (400 prompts per domain; "
            "`git show 435aea9:docs/baselines.md`) put the weight merges first and MOPD-PG last. The "
            "sample-efficiency figure shows the curves up to this budget.",
            "* The teachers are rank-16 LoRA updates of a 0.36M-parameter base, trained from the same base on two "
            "narrow tasks that do not interfere, each answer three tokens long: none of the conditions under which "
            "MOPD is argued to win (interfering domains, long answers with a sparse reward, teachers built another "
            "way) holds here. The paper's teachers are full fine-tunes of a 30B model on broad domains.",
            f"* Tuning: every method had the same {len(P['lrs'])}-point learning-rate search (trained methods) or "
            f"3-point search (each merge type), on seed 0 with {P['val_n']} val prompts per domain and length; "
            + tuning_edges(recorded, edge)
            + "Teachers are shared across seeds, so the seed std measures the students' training noise only.",
            *close_choices(rep),
            "* docs/results.md trains every MOPD form at the course preset (lr 1e-3, the notebooks' setting), on its "
            "own 200 test prompts per cell; this page trains each at the rate its val search chose. Where the two rates "
            "differ, so do the two pages' MOPD numbers: compare the two tables, not a single number across them.", ""]
    # grids
    out += ["", "## Validation grids (seed 0) and what was chosen", "",
            "Mean normalised score on val (binding, recall); the chosen setting in bold.", ""]
    for m, entries in rep["grid"].items():
        ch = rep["chosen"][m]
        cells = []
        for g in entries:
            setting = f"lr {g['lr']:g}" if "lr" in g else "w " + f"{g['w']:g}" + (f", density {g['density']:g}" if "density" in g else "")
            setting += " [extended]" if g.get("extended") else ""
            hit = (g.get("lr") == ch) if "lr" in g else all(g.get(k) == v for k, v in ch.items())
            txt = f"{setting}: {g['mean']:.2f} ({g['binding']:.2f}, {g['recall']:.2f})"
            cells.append(f"**{txt}**" if hit else txt)
        out.append(f"* {LABEL[m]}{recheck_mark(rep, m)}: " + "; ".join(cells))
    out += [f"* best merge type on val: **{rep['chosen']['merge_best']['how']}**", ""]
    out += recheck_section(recorded)
    # costs
    out += cost_section(rep)
    # figures
    out += ["## Figures", "",
            "![score by method](figures/baselines_scores.png)", "",
            "![score against cost](figures/baselines_cost.png)", "",
            "![cascade forgetting](figures/baselines_forgetting.png)", "",
            "![MOPD against Mix-RL by prompts seen](figures/baselines_efficiency.png)", "",
            "![merge sweep](figures/baselines_merge_sweep.png)", "",
            "## Per-seed test accuracies", "", "| model | seed | " + " | ".join(
                f"{d} L{L}" for d in DOMAINS for L in refs['base'][d]) + " |",
            "| --- | --- |" + " --- |" * sum(len(refs['base'][d]) for d in DOMAINS)]
    for a in ("base", "teacher_binding", "teacher_recall"):
        out.append(f"| {a} | — | " + " | ".join(f"{refs[a][d][L]:.3f}" for d in DOMAINS for L in refs['base'][d]) + " |")
    for m in rep["rows"]:
        for seed, p in rep["rows"][m].items():
            out.append(f"| {LABEL[m]}{recheck_mark(rep, m)} | {seed} | " + " | ".join(f"{p['acc'][d][L]:.3f}" for d in DOMAINS for L in refs['base'][d]) + " |")
    return "\n".join(out) + "\n"


def close_choices(rep: dict) -> list[str]:
    """A bullet naming the methods whose val choice beat the runner-up by less than one val standard
    error of a mean normalised score (binomial, at val_n prompts per length): a choice within noise."""
    P, den = rep["protocol"], rep["denominators"]
    if any(not abs(den[d]) > 1e-9 for d in DOMAINS):   # no headroom (a smoke run): no score, no SE
        return []
    # SE of the mean over domains of (accuracy - base) / denominator, at accuracy 0.75, the lengths averaged
    se = 0.5 * math.sqrt(sum((0.75 * 0.25 / (P["val_n"] * len(rep["refs"]["val"]["base"][d]))) / den[d] ** 2
                             for d in DOMAINS))
    close = []
    for m, entries in rep["grid"].items():
        if m not in TRAINED or len(entries) < 2:
            continue
        best, second = sorted((g["mean"] for g in entries), reverse=True)[:2]
        if best - second < se:
            close.append(f"{LABEL[m]} ({best - second:.3f})")
    if not close:
        return []
    return ["* The val search's margin between the chosen setting and the runner-up is below one val standard error "
            f"of the score (about {se:.3f} at {P['val_n']} prompts per length) for " + ", ".join(close)
            + ": those choices are within the val split's noise."]


def cost_means(rep, m, part):
    per = list(rep["rows"][m].values())
    keys = per[0][part].keys()
    return {k: fmean(p[part][k] for p in per) for k in keys}


def cost_section(rep: dict) -> list[str]:
    P = rep["protocol"]
    out = ["## What each method costs", "",
           f"Mean over the seeds run. Tokens are real tokens (padding not counted). FLOPs estimate: "
           f"`{cost.FORMULA}`; here N = {P['N']:,}, n = {P['n_lora']:,} (the adapter is {P['n_lora'] / P['N']:.0%} of this "
           "tiny base; on Qwen3-1.7B it is about 1%). Attention-score FLOPs, padding, evaluations and checkpointing are not counted. Wall time: the "
           "training steps (and the teachers' sampling) on this CPU, one torch thread per process, evaluations excluded; "
           "the machine ran other jobs too, so times are indicative and the FLOPs are the figure to compare. Under "
           "prefill once (train_student, train_teacher) the sampler's prompt prefill runs with grad and IS the "
           "training forward over the prompt: those tokens are counted as trained, not as sampled prefill.", "",
           "| method | stage: sampled tokens (prefill + generated) | teacher-prefilled | trained | FLOPs | wall s | "
           "whole pipeline FLOPs | whole pipeline wall s |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for m in list(TRAINED) + [f"merge_{h}" for h in MERGES]:
        s, p = cost_means(rep, m, "stage"), cost_means(rep, m, "pipeline")
        out.append(f"| {LABEL[m]} | {fmt_int(s.get('cost/sample_prefill_tokens', 0))} + {fmt_int(s.get('cost/generated_tokens', 0))} | "
                   f"{fmt_int(s.get('cost/teacher_prefill_tokens', 0))} | {fmt_int(s.get('cost/trained_tokens', 0))} | "
                   f"{s['flops']:.2e} | {s['seconds']:.1f} | {p['flops']:.2e} | {p['seconds']:.0f} |")
    mo, rf = cost_means(rep, "mopd_pg", "stage"), cost_means(rep, "rft", "stage")
    mp, rp = cost_means(rep, "mopd_pg", "pipeline"), cost_means(rep, "rft", "pipeline")
    rows = P["steps"] * 2 * P["per_domain"]                   # MOPD's sampled completions per run
    completion_len = mo["cost/generated_tokens"] / rows
    prompt_len = (mo["cost/teacher_prefill_tokens"] - mo["cost/generated_tokens"]) / rows  # the teacher reads both
    teacher_share = 1 - mo["flops"] / mp["flops"]
    out += ["", f"**MOPD-PG over RFT** (distillation stage alone): **{mo['flops'] / rf['flops']:.2f}x the FLOPs, "
            f"{mo['seconds'] / rf['seconds']:.2f}x the wall time**; whole pipeline (teachers included): "
            f"{mp['flops'] / rp['flops']:.2f}x FLOPs, {mp['seconds'] / rp['seconds']:.2f}x wall time. "
            "The critique reports 14.8-23.1x the training GPU-hours.", "",
            "Why the FLOPs ratio is so much smaller here, and what that does and does not say. Under this protocol both "
            f"methods train on the same {2 * P['per_domain']} completions a step, so per completion of a P-token prompt and a "
            "C-token answer MOPD pays the training pass (4N per token of P + C), the student's decode (2N per token of C) "
            "and the teacher's prefill (2N per token of P + C), about 6P + 8C (in units of N), and RFT the same training "
            "pass plus its one-off sampling spread over the rows it keeps, about 4.5P + 6C: a ratio near 1.33 "
            f"**whatever the completion length** (here C = {completion_len:.1f} tokens after a P = {prompt_len:.0f}-token "
            "prompt, measured from MOPD-PG's sampler). So the short completions explain why the *wall-time* ratio is "
            "small (decoding, which is slow per token, is nearly absent), not the FLOPs ratio. The critique's "
            "14.8-23.1x is GPU-hours, with separate teacher models, memory-bound decoding of long traces and an SFT "
            "trained at its own tuned budget; here RFT is held to MOPD's rows and steps and its teachers are adapters "
            "on the student's own base (one routed forward, no second model). This page therefore does not test the "
            "critique on its own terms. "
            f"The teachers' own GRPO runs, which both need, are {teacher_share:.0%} of MOPD's whole-pipeline FLOPs.",
            "",
            (f"**One ledger.** The teachers' counters were re-counted on {P['teacher_costs']['recounted']} by "
             f"`{P['teacher_costs']['command']}`: both teachers trained again from scratch by the code that counted "
             "the students (same config and seed; their test accuracies equal the page's to the last prompt), so every "
             "row is counted by one code version. Their wall seconds are from that re-run (a 2-core CPU shared with "
             "other work: indicative only)." if P.get("teacher_costs") else
             "**The ledger is not one code version.** The teachers' counters were recorded by the code before "
             "prefill-once (their prompt prefill counted as sampled as well as trained, every row's prompt trained), "
             "the distillation stages after it, so the teachers' share is overstated; "
             "`python -m bench.baselines --recount-teachers docs/baselines.json` re-counts them."), ""]
    return out


def figures(rep: dict, folder: Path) -> None:
    """The page's five figures, drawn by `mopd_mini.plots` from the view of the results that notebook
    05 draws its own from (`views.baselines_view`): one piece of plotting code for both. A complete
    re-check's moved rows are drawn in the page's place (`in_use`)."""
    rep = in_use(rep)
    view = views.baselines_view(rep)
    made_by = f"`{rep['command']}`, seeds {rep['protocol']['seeds_done']}"
    scores = {LABEL[m]: view["scores"][m] for m in ranking(rep)}                     # best first
    short = {m: LABEL[m].split(" (")[0] for m in LABEL}                           # the crowded cost panels
    panels = {panel: {short[m]: point for m, point in points.items()} for panel, points in view["cost_panels"].items()}
    efficiency = {LABEL[m]: view["curves"][m] for m in ("mopd_pg", "mopd_topk", "mopd_kl", "mixrl") if m in view["curves"]}
    drawn = {
        "baselines_scores": plots.method_bars(scores, paper={LABEL[m]: v for m, v in PAPER.items()},
                                              title=f"Normalised score on test, mean ± std over seeds\n{made_by}"),
        "baselines_cost": plots.score_vs_cost(panels, title=f"Score against cost\n{made_by}"),
        "baselines_efficiency": plots.sample_efficiency(
            efficiency, title=f"MOPD against Mix-RL, val split, mean over seeds\n{made_by}"),
        "baselines_forgetting": plots.forgetting_normalised({LABEL[m]: c for m, c in view["forgetting"].items()},
                                                 title=made_by),
        "baselines_merge_sweep": plots.merge_sweep(view["merges"], title=f"Param-Merge grid on val (seed 0)\n{made_by}"),
    }
    for name, fig in drawn.items():
        plots.save(fig, name, folder)
        plt.close(fig)


def write(rep: dict, docs: Path = DOCS, source: Path | None = None, allow_shrink: bool = False) -> None:
    """The page, the figures and the JSON into `docs`; rendered from the JSON at `source` (--render):
    refused if the page would show fewer table rows than the one there (`slices.guard_render`)."""
    saved = docs / "baselines.json"
    if RECHECK_KEY not in rep and source is None and saved.exists():     # a run of the page keeps the re-check
        kept = json.loads(saved.read_text()).get(RECHECK_KEY)
        rep = {**rep, RECHECK_KEY: kept} if kept else rep
    text = markdown(rep)
    if source is not None:
        text = slices.guard_render(docs / "baselines.md", text, source, rep, allow_shrink)
    figures(rep, docs / "figures")
    (docs / "baselines.md").write_text(text)
    atomic_write(docs / "baselines.json", json.dumps(rep, indent=1, default=str).encode())


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
