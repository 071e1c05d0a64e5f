"""One runner for the studies that compare methods (studies.baselines, studies.matched): a study
declares its methods (how to train one run at a (setting, seed)), a grid per method, the seeds,
budgets, hypotheses and decision rule; the runner does the rest, the same way for every study.

    study = Study(module="studies.baselines", methods={"mopd_pg": Method(train, grid=[{"lr": 1e-3}, ...]), ...},
                  setup=lambda progress: Bench(...), ...)
    report = run(study, seeds=[0, 1, 2], n=500, val_n=100, workers=2, summarise=..., write=...)

The protocol:
  1. the grid, seed 0, on VAL: every method at every setting of its grid, scored by the mean
     normalised val score; the best is chosen. With `tie_break` (a second seed), a method whose
     chosen setting beats the runner-up by less than the chosen one's val standard error has its
     two best settings trained again at that seed, on val, and the choice is the best mean over
     the two seeds (recorded as `mean2` in the grid). When that choice sits on the grid's edge
     (`Method.extend` proposes a setting past it), the grid is extended around it again: the new
     setting is trained on the same two seeds and the choice made again on the two-seed mean,
     until it is interior or `Study.rebracket` extensions (the hard limit, recorded in the grid as
     `after_tie_break`) are spent;
  2. TEST, once per method and seed, at the chosen setting (the seed-0 run chosen in 1 is the
     seed-0 result; nothing reads the test split before every choice is made);
  3. the rows (`rows`): for every method and seed, the normalised scores (every length and the
     study's named subsets of lengths) with binomial SEs, the absolute lift per domain (mean
     accuracy minus the base's, which no budget moves), the accuracies, and the costs of the
     method's own stage and of its whole pipeline (the teachers it needs included), with FLOPs
     (`cost.method_costs`).

A `Pick` is a method that is the best of other methods on val (the best merge type): its result
is theirs, chosen once on val. Runs live in runs/ and reload (a killed run resumes, a re-run
retrains nothing); evaluations are cached in the study's folder (`Evals`); `workers` > 1 trains
each phase's jobs in that many processes of the study's own module (`tools.provenance.in_processes`,
see `worker_main`), which the main process then reloads; `write` is called after every seed, so a
run stopped early leaves the seeds it finished. The statistics are `mopd_mini.stats`'s: sample
std over seeds, paired per-seed t-intervals (`paired`), and over a study's family of
pre-registered comparisons Holm's correction and the registered equivalence margins (`family`).

A study whose jobs are records (studies.regimes: each (arm, method, seed) trained, evaluated and kept
as it finishes) uses the same runner's pieces for what it adds: one locked JSON `Store`, a job list
its workers `claim`, an evaluation cache on the store (`StoreEvals`, for `choose`), a `Gate` read on
every seed (`gate_by_seed`, `gate_lines`), per-seed rows (`seed_row`), the stuck detector's shares
(`stuck_rows`), and the decisions against a registered rule (`decide`, `DecisionRows`, `family` with
a threshold per comparison).
"""

from __future__ import annotations

import fcntl
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from statistics import fmean
from typing import Any, Callable

import torch
from tqdm.auto import tqdm

import mopd_mini as mm
from mopd_mini import cost, stats
from mopd_mini.adapters import atomic_write

from tools.provenance import in_processes

from . import slices

DOMAINS = ("binding", "recall")
RESULTS = "## Results"   # a study's page from this header on is its report, written from its JSON


def tag(x: float) -> str:
    """A number as a module-name-safe tag: 1e-03 -> 1em03, 0.5 -> 0p5."""
    return (f"{x:.0e}" if x < 0.01 else f"{x:g}").replace("-", "m").replace(".", "p").replace("+", "")


# the learning-rate ladder every study's bracketing climbs (Method.extend)

LADDER = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2)
"""the learning rates a grid takes its points from, about x3 apart (the baselines' grid is 3e-4, 1e-3, 3e-3);
its two ends are the hard limit of every bracketing: past 1e-4 or 3e-2 a study stops and says so"""


def extend_lr(best: dict, tried: list[dict]) -> dict | None:
    """The next LADDER rate past the grid's edge when the best sits on it (the other keys held at
    the best's), else None: the choice is interior (or the ladder ends)."""
    same = sorted(t["lr"] for t in tried if {k: v for k, v in t.items() if k != "lr"}
                  == {k: v for k, v in best.items() if k != "lr"})
    if len(same) < 2 or same[0] < best["lr"] < same[-1]:
        return None
    i = LADDER.index(best["lr"]) + (1 if best["lr"] == same[-1] else -1)
    return {**best, "lr": LADDER[i]} if 0 <= i < len(LADDER) else None


def on_edge(entries: list[dict], chosen) -> bool:
    """Whether a chosen learning rate (a setting with "lr", or the rate itself) is still at an end of the
    rates tried around it (the grid `entries` at the chosen setting's other keys): not bracketed."""
    if not isinstance(chosen, dict):
        chosen = {"lr": chosen}
    if "lr" not in chosen:
        return False
    rest = {k: v for k, v in chosen.items() if k != "lr"}
    lrs = [g["lr"] for g in entries if {k: g.get(k) for k in rest} == rest]
    return len(lrs) > 1 and chosen["lr"] in (min(lrs), max(lrs))


def bracketing(entries: list[dict], chosen) -> str:
    """"bracketed" (a rate tried on each side of the choice), "hard limit" (on an edge that is an end of
    LADDER: no rate past it is tried) or "edge" (on an edge the extensions allowed did not pass)."""
    if not on_edge(entries, chosen):
        return "bracketed"
    lr = chosen["lr"] if isinstance(chosen, dict) else chosen
    return "hard limit" if any(math.isclose(lr, end) for end in (LADDER[0], LADDER[-1])) else "edge"


def moved_note(command: str) -> list[str]:
    """A page's line under a recorded command that ran as `python -m bench.<x>` (history, kept as it ran):
    the module's home now (studies/, since 2026-12-06); nothing for any other command."""
    if not command.startswith("python -m bench."):
        return []
    name = command.split()[2].split(".", 1)[1]
    return [f"The command above ran as `bench.{name}`; the module is now `studies.{name}` (`python -m studies.{name}`, "
            "the same flags; the old name no longer runs).", ""]


def spent_line(block: dict, registered: tuple, amendment: str, where: str = "on a quiet machine") -> list[str]:
    """What a check spent against its registered estimate (CPU-hours `where`, in the amendment of that
    date): in slices, the recorded jobs' CPU-hours (each job one core); run whole, its wall time and the
    most CPU-hours its `--workers` allow."""
    words, secs = block["command"].split(), block.get("elapsed_s")
    if secs is None:
        return []
    lo, hi = registered
    if "(in slices:" in block["command"]:
        spent = f"{secs / 3600:.2f} CPU-h in its recorded jobs (each job's wall time on one core)"
    else:
        w = int(words[words.index("--workers") + 1]) if "--workers" in words else 1
        spent = (f"{secs / 60:.0f} min wall with {w} worker(s), so at most {w * secs / 3600:.2f} CPU-h (the teachers and "
                 "the main process's evaluations ran while a worker's core could idle)")
    return [f"*Spent:* {spent}, against the registered estimate of {lo} to {hi} CPU-hours {where} "
            f"(the amendment of {amendment}).", ""]


# ---------------------------------------------------------------------------------------------
# evaluations, cached on disk
# ---------------------------------------------------------------------------------------------


class Evals:
    """evaluate() results keyed by (adapter, split, n), stored in one JSON file (atomic writes)."""

    def __init__(self, path: Path | None):
        self.path = path
        self.data = {}
        if path is not None:  # the workers' files beside this one (evals-w0.json, ...) first
            for f in sorted(path.parent.glob(f"{path.stem}-w*.json")) + [path]:
                if f.exists():
                    self.data.update(json.loads(f.read_text()))

    def refresh(self) -> None:
        """Read what the workers have evaluated since (their files), keeping this file's entries."""
        if self.path is not None:
            for f in sorted(self.path.parent.glob(f"{self.path.stem}-w*.json")):
                self.data = {**json.loads(f.read_text()), **self.data}

    def get(self, bank, name: str, split: str, n: int) -> dict:
        key = f"{name}|{split}|{n}"
        if key not in self.data:
            table = mm.evaluate(bank, [name], n=n, split=split)
            self.data[key] = {d: {str(L): a for L, a in by.items()} for d, by in table["acc"][name].items()}
            if self.path is not None:
                atomic_write(self.path, json.dumps(self.data, indent=0).encode())
        return {d: {int(L): a for L, a in by.items()} for d, by in self.data[key].items()}


# ---------------------------------------------------------------------------------------------
# what a study declares
# ---------------------------------------------------------------------------------------------


@dataclass
class Result:
    """One method's run at one (setting, seed): the adapter's name in the bank, its Run (None for
    a merge), the cost totals and wall seconds of the method's own stage."""

    name: str
    run: object = None
    stage: dict = field(default_factory=dict)
    seconds: float = 0.0

    @classmethod
    def of(cls, name: str, run) -> "Result":
        return cls(name, run, cost.totals(run.metrics), run.seconds)


@dataclass
class Method:
    """How to train one run of a method: `train(ctx, setting, seed) -> Result`, at every setting
    of `grid`. `needs`: the domains whose teachers its pipeline needs first (their cost is added);
    `in_workers`: whether worker processes train it (False: the main process does, e.g. a merge,
    which lives in the bank only); `scalar`: the grid's one key, when the chosen setting is
    reported as that value rather than as a dict (the baselines' learning rate)."""

    train: Callable[[Any, dict, int], Result]
    grid: list[dict] = field(default_factory=lambda: [{}])
    needs: tuple[str, ...] = ()
    in_workers: bool = True
    scalar: str | None = None
    extend: Callable[[dict, list[dict]], dict | None] | None = None
    """bracketing: extend(best setting, settings tried) -> a setting beyond the grid's edge when the
    best is on it (None: it is interior); the runner trains it at seed 0 on val and chooses again"""

    def __post_init__(self):
        if not self.grid:
            raise ValueError("a method's grid needs at least one setting ([{}] for none)")
        if self.scalar is not None and any(set(s) != {self.scalar} for s in self.grid):
            raise ValueError(f"scalar={self.scalar!r}: every setting must have that one key, got {self.grid}")


@dataclass
class Pick:
    """A method that is the best, on val, of other methods of the study: {method: label}; the
    choice is reported as {"how": label, **that method's chosen setting}."""

    among: dict[str, str]


@dataclass
class Study:
    """A study: its methods, the set-up every process runs first (`setup(progress) -> ctx`, with
    ctx.bank, ctx.teachers {domain: Run}, ctx.N, ctx.n_lora and ctx.folder, where its evaluations
    are cached), and what the workers need to rebuild it (`module`, `argv`)."""

    module: str
    methods: dict[str, Method]
    setup: Callable[[bool], Any]
    picks: dict[str, Pick] = field(default_factory=dict)
    argv: list[str] = field(default_factory=list)
    refs: tuple[str, ...] = ("base", "teacher_binding", "teacher_recall")
    domains: tuple[str, ...] = DOMAINS
    parts: dict = field(default_factory=lambda: {"all": None})
    """the scores each row reports: {part: {domain: lengths} or None for every length}"""
    tie_break: int | None = None
    """a second seed for a val choice within one SE (None: seed 0 decides alone)"""
    val_from_run: bool = True
    """score the val choice on the run's last periodic evaluation (True: the periodic evaluations
    use the choice's val_n prompts) or on a separate evaluation at val_n (False: the periodic ones
    are smaller, for the curves only)"""
    max_extend: int = 2
    """at most this many settings a method's grid is extended by (`Method.extend`) before the tie-break"""
    given: Callable[[bool, dict], Any] | None = None
    """the set-up from kept teachers, `given(progress, {name: (adapter folder, Recorded run)})`: the
    same ctx as `setup`'s, no teacher trained (studies.sliced: each job reads the teachers a set-up
    job kept); None: the study runs only whole (`run`)"""
    rebracket: int = 4
    """the hard limit after the tie-break: at most this many settings added around a two-seed choice on
    the grid's edge (each trained on seed 0 and the tie-break seed); 0: the choice stays where the
    tie-break put it"""

    def __post_init__(self):
        for name, pick in self.picks.items():
            unknown = set(pick.among) - set(self.methods)
            if unknown:
                raise ValueError(f"pick {name!r} chooses among unknown methods {sorted(unknown)}")


@dataclass
class State:
    """What the runner has done so far: the study's JSON is made from it (`rows`)."""

    grid: dict = field(default_factory=dict)       # {method: [{**setting, name, <domain>, mean, se}, ...]}
    chosen: dict = field(default_factory=dict)     # {method: setting (or its scalar)}
    per_seed: dict = field(default_factory=dict)   # {seed: {method: Result}}
    val: dict = field(default_factory=dict)        # {adapter: {domain: {L: acc}}}
    test: dict = field(default_factory=dict)
    n: int = 0                                     # test prompts per domain and length
    val_n: int = 0
    elapsed: float = 0.0


# ---------------------------------------------------------------------------------------------
# scores
# ---------------------------------------------------------------------------------------------


def scores(accs: dict, name: str, n: int, lengths=None, domains=DOMAINS) -> dict:
    """normalised_scores of `name` against base and the teachers, plus binomial standard errors."""
    s = mm.normalised_scores({"acc": accs, "floor": {}, "n": n}, student=name, lengths=lengths)
    for d in domains:
        cells = [accs[name][d][L] for L in ((lengths or {}).get(d) or accs[name][d])]
        se = math.sqrt(sum(p * (1 - p) / n for p in cells)) / len(cells)
        s[d]["se"] = se / abs(s[d]["denominator"]) if abs(s[d]["denominator"]) > 1e-9 else float("nan")
    s["mean_se"] = math.sqrt(sum(s[d]["se"] ** 2 for d in domains)) / len(domains)
    return s


def lift(accs: dict, name: str, domains=DOMAINS) -> dict:
    """Absolute accuracy lift per domain: the mean over the domain's lengths minus the base's
    (no teacher in it, so it does not move when the teachers' budget does), and their mean."""
    out = {d: fmean(accs[name][d].values()) - fmean(accs["base"][d].values()) for d in domains}
    out["mean"] = fmean(out[d] for d in domains)
    return out


def final_accs(run, domains=DOMAINS) -> dict | None:
    """{domain: {L: acc}} of the run's last row, when it holds an evaluation of every domain."""
    row = run.metrics[-1] if run is not None and run.metrics else {}
    accs = {d: {int(k.split("/L")[1]): v for k, v in row.items() if k.startswith(f"acc/{d}/")} for d in domains}
    return accs if all(accs.values()) else None


def curve(run, ref: dict, per_domain: int, start: str = "base", domains=DOMAINS) -> list[dict]:
    """(prompts seen per domain, normalised score per domain and mean) at every periodic eval,
    from the starting adapter's val scores (`start`: the base, or a cascade's first teacher)."""
    def point(step, accs):
        p = {"step": step, "prompts": step * per_domain}
        for d in domains:
            b, t = (fmean(ref[a][d].values()) for a in ("base", f"teacher_{d}"))
            p[d] = (fmean(accs[d].values()) - b) / (t - b) if abs(t - b) > 1e-9 else float("nan")
        p["mean"] = fmean(p[d] for d in domains)
        return p

    out = [point(0, ref[start])]
    for row in run.metrics:
        accs = {d: {int(k.split("/L")[1]): v for k, v in row.items() if k.startswith(f"acc/{d}/")} for d in domains}
        if all(accs.values()) and row["step"] > 0:
            out.append(point(row["step"], accs))
    return out


# ---------------------------------------------------------------------------------------------
# the runner
# ---------------------------------------------------------------------------------------------


def in_workers(study: Study, jobs: list, workers: int, n: int, evals: Evals | None = None) -> None:
    """Train `jobs` ([method, setting, seed, split or None], ...) in `workers` processes of the
    study's module (see `worker_main`); a job with a split is evaluated there too. Each worker
    writes its own evals file, which `evals` then reads; the runs go where the main process
    looks for them."""
    jobs = [j for j in jobs if study.methods[j[0]].in_workers]
    if workers > 1 and jobs:
        in_processes(study.module, [list(j) for j in jobs], workers,
                     lambda w, mine: ["--worker", str(w), "--jobs", json.dumps(mine), "--n", str(n), "--quiet",
                                      *study.argv])
        if evals is not None:
            evals.refresh()


def worker_main(study: Study, worker: int, jobs: str, n: int, val_n: int) -> None:
    """One worker of `in_workers`: set the study up (its teachers reload), train its jobs and
    evaluate those that ask for it, nothing else."""
    torch.set_num_threads(1)
    ctx = study.setup(False)
    evals = Evals(ctx.folder / f"evals-w{worker}.json")
    for m, setting, seed, split in json.loads(jobs):
        r = study.methods[m].train(ctx, setting, seed)
        if split is not None:
            evals.get(ctx.bank, r.name, split, val_n if split == "val" else n)


def _entry(study, state, r, setting, val_n) -> dict:
    s = scores(state.val, r.name, val_n, domains=study.domains)
    return {**setting, "name": r.name, **{d: s[d]["normalised"] for d in study.domains},
            "mean": s["mean"], "se": s["mean_se"], "seconds": r.seconds}


def _val(study, ctx, evals, state, r, val_n):
    """The run's val accuracies: its last periodic evaluation IS the val evaluation, when it ran
    at val_n (`Study.val_from_run`); else an evaluation at val_n."""
    ran = final_accs(r.run, study.domains) if study.val_from_run else None
    state.val[r.name] = ran or evals.get(ctx.bank, r.name, "val", val_n)


def replay_choice(study: Study, m: str, val_of: Callable[[dict, int], dict | None]) -> tuple[list, list, dict | None]:
    """Method m's val choice (the module docstring's phase 1) replayed from the val entries made so
    far: `val_of(setting, seed)` is the grid entry of that run ({**setting, name, <domain>, mean, se,
    seconds}) or None when it has not run. Returns (missing, entries, best): the runs the choice
    needs next ([(setting, seed), ...], all independent: run them, in any order, then replay), the
    grid entries so far (as `State.grid[m]`), and the chosen entry once nothing is missing. The same
    entries always give the same answer, so a choice stopped anywhere resumes where it was."""
    meth, tb = study.methods[m], study.tie_break
    entries, missing = [], []
    for setting in meth.grid:                             # the grid, seed 0: independent runs
        e = val_of(setting, 0)
        (missing.append((setting, 0)) if e is None else entries.append(dict(e)))
    if missing:
        return missing, entries, None
    for _ in range(study.max_extend if meth.extend else 0):   # bracketing: past an edge the best sits on
        best = max(entries, key=lambda g: g["mean"])
        setting = meth.extend(_setting(meth, best), [_setting(meth, g) for g in entries])
        if setting is None:
            break
        e = val_of(setting, 0)
        if e is None:
            return [(setting, 0)], entries, None
        entries.append({**e, "extended": True})
    ranked = sorted(entries, key=lambda g: g["mean"], reverse=True)
    if tb is not None and len(ranked) >= 2 and ranked[0]["mean"] - ranked[1]["mean"] < ranked[0]["se"]:
        top = ranked[:2]                                  # within one SE: the two best again at the tie-break seed
        missing = [(_setting(meth, g), tb) for g in top if val_of(_setting(meth, g), tb) is None]
        if missing:
            return missing, entries, None
        for g in top:
            _second(study, g, val_of(_setting(meth, g), tb))
        for _ in range(study.rebracket if meth.extend else 0):   # the two-seed choice on an edge: again
            best = max((g for g in entries if "mean2" in g), key=lambda g: g["mean2"])
            setting = meth.extend(_setting(meth, best), [_setting(meth, g) for g in entries])
            if setting is None:
                break
            old = next((g for g in entries if _setting(meth, g) == setting), None)
            runs = {seed: val_of(setting, seed) for seed in ((tb,) if old is not None else (0, tb))}
            missing = [(setting, seed) for seed, e in runs.items() if e is None]
            if missing:
                return missing, entries, None
            if old is None:
                old = {**runs[0], "extended": True}
                entries.append(old)
            _second(study, old, runs[tb])
            old["after_tie_break"] = True
    two = any("mean2" in e for e in entries)
    return [], entries, max(entries, key=lambda g: g.get("mean2", -math.inf) if two else g["mean"])


def _second(study: Study, entry: dict, second: dict) -> None:
    """Add the tie-break seed's run to a grid entry: its two-seed mean (`mean2`) and the run (`seed2`)."""
    entry["mean2"] = fmean([entry["mean"], second["mean"]])
    entry["seed2"] = {k: second[k] for k in ("name", "mean", "se", *study.domains)}


def choose(study: Study, ctx, evals: Evals, state: State, workers: int, quiet: bool) -> dict:
    """Phase 1: every method's choice on val (`replay_choice`), its missing runs trained round by
    round (each round's runs in `workers` processes, then reloaded here). Returns the runs it trained,
    {(method, setting as JSON, seed): Result}: a chosen one is that seed's result."""
    val_n, trained, made = state.val_n, {}, {}
    split = None if study.val_from_run else "val"         # a separate val evaluation: the workers run it too
    key = lambda m, setting, seed: (m, json.dumps(setting, sort_keys=True), seed)  # noqa: E731
    bar = tqdm(desc="val choice", disable=quiet)
    while True:
        plans = {m: replay_choice(study, m, lambda s, seed, m=m: made.get(key(m, s, seed))) for m in study.methods}
        missing = [(m, s, seed) for m, (miss, _, _) in plans.items() for s, seed in miss]
        if not missing:
            break
        in_workers(study, [(m, s, seed, split) for m, s, seed in missing], workers, state.n, evals)
        for m, setting, seed in missing:
            r = study.methods[m].train(ctx, setting, seed)
            _val(study, ctx, evals, state, r, val_n)
            made[key(m, setting, seed)] = _entry(study, state, r, setting, val_n)
            trained[key(m, setting, seed)] = r
            bar.update()
    bar.close()
    score = {}                                              # each method's chosen val score
    for m, (_, entries, best) in plans.items():
        state.grid[m] = entries
        score[m] = best.get("mean2", best["mean"])
        setting = _setting(study.methods[m], best)
        state.chosen[m] = setting[study.methods[m].scalar] if study.methods[m].scalar else setting
    for name, pick in study.picks.items():
        best = max(pick.among, key=lambda m: score[m])
        state.chosen[name] = {"how": pick.among[best], **chosen_setting(study, state, best)}
    return trained


def _setting(meth: Method, entry: dict) -> dict:
    """The setting a grid entry was trained at (the entry's keys that the grid's settings have)."""
    keys = set().union(*meth.grid)
    return {k: entry[k] for k in entry if k in keys}


def chosen_setting(study: Study, state: State, m: str) -> dict:
    meth, c = study.methods[m], state.chosen[m]
    return {meth.scalar: c} if meth.scalar else dict(c)


def run(study: Study, *, seeds: list[int], n: int, val_n: int, workers: int = 1, quiet: bool = False,
        summarise: Callable[[Any, State], dict], write: Callable[[dict], None] | None = None) -> dict:
    """The whole protocol (module docstring); `summarise(ctx, state)` makes the study's report
    (usually `rows` plus the study's own fields), `write(report)` runs after every seed."""
    if 0 not in seeds:
        raise SystemExit("--seeds must include 0: the validation grid runs on seed 0 and is its result")
    seeds = [0] + [s for s in seeds if s != 0]
    torch.set_num_threads(1)
    started = time.time()
    ctx = study.setup(not quiet)
    evals = Evals(ctx.folder / "evals.json")
    state = State(n=n, val_n=val_n)
    state.val = {a: evals.get(ctx.bank, a, "val", val_n) for a in study.refs}
    state.test = {a: evals.get(ctx.bank, a, "test", n) for a in study.refs}
    trained_val = choose(study, ctx, evals, state, workers, quiet)
    in_workers(study, [(m, chosen_setting(study, state, m), seed, "test") for seed in seeds if seed != 0
                       for m in study.methods], workers, n, evals)
    report = None
    for seed in seeds:
        done = {}
        for m, meth in tqdm(study.methods.items(), desc=f"seed {seed}", disable=quiet):
            setting = chosen_setting(study, state, m)
            r = trained_val.get((m, json.dumps(setting, sort_keys=True), seed)) or meth.train(ctx, setting, seed)
            state.test[r.name] = evals.get(ctx.bank, r.name, "test", n)
            done[m] = r
        for name in study.picks:
            done[name] = done[next(m for m, label in study.picks[name].among.items()
                                   if label == state.chosen[name]["how"])]
        state.per_seed[seed] = done
        state.elapsed = time.time() - started
        report = summarise(ctx, state)
        if write is not None:
            write(report)
    return report


def needs_of(study: Study, m: str) -> tuple[str, ...]:
    if m in study.picks:
        m = next(iter(study.picks[m].among))
    return study.methods[m].needs


def stage_and_pipeline(ctx, needs: tuple[str, ...], r: Result) -> tuple[dict, dict]:
    """Cost totals (with seconds) of the method's own stage, and of its whole pipeline (the stage
    plus the teachers of `needs`, each counted once), each with its FLOPs (`cost.method_costs`)."""
    stage = {**r.stage, "seconds": r.seconds}
    teachers = {d: {**cost.totals(t.metrics), "seconds": t.seconds} for d, t in ctx.teachers.items()}
    return cost.method_costs(stage, [teachers[d] for d in needs], ctx.N, ctx.n_lora)


def rows(study: Study, ctx, state: State) -> dict:
    """{method: {seed: row}}: every part's scores, the lift, the accuracies, the two costs and the
    oldest version of the cost counting among the runs they add up (`Run.count_version`)."""
    out = {}
    for m in list(study.methods) + list(study.picks):
        per = {}
        for seed, done in state.per_seed.items():
            r = done[m]
            per[seed] = {"name": r.name,
                         **{part: scores(state.test, r.name, state.n, lengths, study.domains)
                            for part, lengths in study.parts.items()},
                         "acc": state.test[r.name], "lift": lift(state.test, r.name, study.domains)}
            needs = needs_of(study, m)
            counted = ([r.run] if r.run is not None else []) + [ctx.teachers[d] for d in needs]
            per[seed]["count_version"] = min((x.count_version for x in counted), default=cost.COUNT_VERSION)
            per[seed]["stage"], per[seed]["pipeline"] = stage_and_pipeline(ctx, needs, r)
        out[m] = per
    return out


# ---------------------------------------------------------------------------------------------
# the report's statistics
# ---------------------------------------------------------------------------------------------


def per_seed(rep_rows: dict, m: str, part: str = "all", key: str = "mean") -> dict:
    """{seed: value} of method m: the mean normalised score of `part` (key "mean"), or the
    mean lift (part "lift")."""
    return {seed: p[part][key] for seed, p in rep_rows[m].items()}


def paired_rows(rep_rows: dict, a: str, b: str, part: str = "all", key: str = "mean") -> dict:
    """a - b paired by seed (same teachers, test prompts and seed): stats.paired's mean
    difference, 95% t-interval and whether it excludes 0."""
    return stats.paired(per_seed(rep_rows, a, part, key), per_seed(rep_rows, b, part, key))


def family(comparisons: dict[str, dict], margins: dict[str, float] | None = None,
           nulls: dict[str, float] | None = None) -> dict[str, dict]:
    """A study's family of pre-registered comparisons ({name: stats.paired}): each with its Holm-
    adjusted p over the family (`p_holm`), whether it is resolved after the correction
    (`resolved_holm`), and the verb the page prints (`reading`: stats.reading with the margin
    registered for it before the run, if any; none registered: nothing is called equal). `nulls`:
    a comparison whose rule reads a threshold other than 0 is tested against it ({name: threshold};
    its `reading` is still the one against 0, so such a study prints `decide`'s verb instead).
    Each also carries `alpha_holm`, the level at which Holm's step-down tests it (stats.holm_levels),
    and `lo_holm`, `hi_holm`, its interval at that level: it excludes the comparison's null exactly
    when `resolved_holm`, and the reading prints it beside the verdict."""
    margins, nulls = margins or {}, nulls or {}
    names = list(comparisons)
    raw = [stats.p_value(comparisons[k], nulls[k]) if k in nulls else comparisons[k]["p"] for k in names]
    adj, levels = stats.holm(raw), stats.holm_levels(raw)
    out = {}
    for k, a, lv in zip(names, adj, levels):
        p = comparisons[k]
        lo, hi = stats.interval_at(p, lv) if not math.isnan(lv) else (float("nan"), float("nan"))
        out[k] = {**p, "p_holm": a, "resolved_holm": not math.isnan(a) and a < 0.05, "m": len(names),
                  "alpha_holm": lv, "lo_holm": lo, "hi_holm": hi,
                  "reading": stats.reading(p, a, margins.get(k), alpha=lv)}
    return out


def seeds_text(values: dict, digits: int = 3) -> str:
    """'s0 +0.010, s1 -0.020, ...': per-seed values, for a cell where a mean over seeds could hide one."""
    return ", ".join(f"s{s} {v:+.{digits}f}" for s, v in values.items())


def cell(vals, ses=None, digits: int = 2) -> str:
    """'mean ± sample std (mean binomial SE)' of per-seed values; the std is absent with one seed."""
    m, s = stats.mean_sd(vals)
    sd = f" ± {s:.{digits}f}" if not math.isnan(s) else ""
    return f"{m:.{digits}f}{sd}" + (f" ({fmean(ses):.2f})" if ses is not None else "")


def fmt_int(x: float) -> str:
    return f"{x:,.0f}"


def unfinished(command: str, seeds_done: list) -> list[str]:
    """A warning line when the command asked for seeds that did not finish (a run stopped early)."""
    words = command.split()
    asked = []
    if "--seeds" in words:
        for w in words[words.index("--seeds") + 1:]:
            if not w.lstrip("-").isdigit() or w.startswith("--"):
                break
            asked.append(int(w))
    missing = [x for x in asked if x not in seeds_done]
    if not missing:
        return []
    return [f"**The run was stopped before seed(s) {missing} finished** (the shared CPU's time ran out); every "
            f"number below is from seeds {seeds_done} only. The same command resumes it.", ""]


def add_worker_args(parser) -> None:
    """The internal options of a worker process (`in_workers` passes them)."""
    import argparse

    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--jobs", help=argparse.SUPPRESS)


# ---------------------------------------------------------------------------------------------
# record-keyed studies (studies.regimes): one JSON store under a lock, a job list the workers
# claim, a gate read on every seed, per-seed rows, the stuck shares, decisions against a rule
# ---------------------------------------------------------------------------------------------


Store = slices.Store   # the study's results file under one lock (studies/slices.py, torch-free)


def claim(lock: Path, claims: Path, job: list) -> bool:
    """True for the first worker that asks for `job` (under `lock`): workers take the next
    unclaimed job of one shared list, so the long ones do not pile up on one process."""
    with open(lock, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        taken = json.loads(claims.read_text()) if claims.exists() else []
        if job in taken:
            return False
        atomic_write(claims, json.dumps(taken + [job]).encode())
        return True


def in_claiming_workers(module: str, jobs: list, workers: int, claims: Path, argv: list[str]) -> None:
    """Run `jobs` in `workers` processes of `module` (`tools.provenance.in_processes`), each handed
    the whole list, `--claims` and `argv`: each worker runs the jobs it claims (`claimed`)."""
    claims.parent.mkdir(parents=True, exist_ok=True)
    in_processes(module, [[list(j) for j in jobs]] * workers, workers,
                 lambda w, mine: ["--worker", "--jobs", json.dumps(mine[0]), "--claims", str(claims), *argv])


def claimed(jobs: list, lock: Path, claims: Path | None):
    """The jobs of `jobs` this worker claims first (every one when `claims` is None)."""
    for job in jobs:
        if claims is None or claim(lock, claims, list(job)):
            yield job


@dataclass(frozen=True)
class Gate:
    """`method`'s val score on `domain` at `lengths` must reach `threshold`. `retries`: the
    registered changes tried in turn while seed 0 does not; `fallback`: what runs when every try
    failed (None: the last try, reported as failing the gate). A study may read one gate on seed 0
    (with its retries) or on every seed (`gate_by_seed`: a failing seed is excluded)."""

    name: str
    method: str
    domain: str
    lengths: tuple
    threshold: float
    retries: tuple = ()            # each {method key: field overrides (settings merged)}
    fallback: dict | None = None   # {method key: overrides, or a new method's fields}


def gate_by_seed(values: dict, threshold: float) -> dict:
    """{seed: passed} of {seed: {length: value}}: a seed passes when every length reaches the threshold."""
    return {s: all(v >= threshold for v in by.values()) for s, by in sorted(values.items())}


def gate_lines(gate: Gate, values: dict) -> list[str]:
    """One line per seed of {seed: {length: value}}: the gate's value at every length, passed or not."""
    ok = gate_by_seed(values, gate.threshold)
    return [f"gate {gate.name} seed {s}: " + ", ".join(f"L{L} {v:.2f}" for L, v in by.items())
            + (" passes" if ok[s] else " FAILS: excluded from the tests") for s, by in sorted(values.items())]


def seed_row(head: list[str], values: dict, seeds: list, digits: int = 3) -> str:
    """A table row of per-seed values: the `head` cells, then {seed: value} at each of `seeds`
    (blank where a seed has none or NaN)."""
    return "| " + " | ".join(head) + " | " + " | ".join(
        f"{values[x]:.{digits}f}" if x in values and values[x] == values[x] else "" for x in seeds) + " |"


def seed_header(head: list[str], seeds: list) -> list[str]:
    return ["| " + " | ".join(head) + " | " + " | ".join(f"seed {x}" for x in seeds) + " |",
            "|" + " --- |" * (len(head) + len(seeds))]


def stuck_rows(label: str, stuck: dict, steps: tuple, domain: str) -> list[str]:
    """Rows of the stuck detector per seed: {seed: record["stuck"]} -> at each step the share (its
    mean over the window ending there) and the off-support mass; '-' where the run has no such step."""
    out = []
    for seed, by in sorted(stuck.items()):
        at = (by or {}).get(domain, {})
        last = max((int(k) for k in at), default=None)
        cells = []
        for st in (*steps, last):
            r = at.get(str(st)) if st is not None else None
            if r is None or r.get("share") is None:
                cells.append("-")
                continue
            window = f" ({r['share_window']:.3f})" if r.get("share_window") is not None else ""
            off = f"; off {r['off_support']:.3f}" if r.get("off_support") is not None else ""
            cells.append(f"{r['share']:.3f}{window}{off}")
        out.append(f"| {label} | {seed} | " + " | ".join(cells) + f" | {last if last is not None else '-'} |")
    return out


def decide(p: dict, above: float | None = None, below: float | None = None, p_adj: float | None = None,
           alpha: float | None = None) -> str:
    """'supported' / 'refuted' / 'not resolved' by a registered rule: supported iff the interval
    lies above `above` (or below `below`). With `p_adj` (the Holm-adjusted p of the comparison
    against that threshold, over the study's family: `family`'s p_holm) the side is read only when
    p_adj is below 0.05; otherwise "not resolved", with the differences the interval still allows:
    the interval at Holm's level (`alpha`, the comparison's level in the step-down, by default p's
    `alpha_holm` from `family`), which excludes the threshold exactly when p_adj is below 0.05, and
    the uncorrected 95% one beside it, labelled so."""
    if p["n"] < 2 or math.isnan(p["half"]):
        return "not resolved (fewer than 2 seeds)"
    alpha = p.get("alpha_holm") if alpha is None else alpha
    allows = f"not resolved: the interval allows differences from {p['lo']:+.3f} to {p['hi']:+.3f}"
    if p_adj is not None and not math.isnan(p_adj) and alpha is not None and not math.isnan(alpha) \
            and abs(alpha - 0.05) > 1e-12:
        lo, hi = stats.interval_at(p, alpha)
        allows = (f"not resolved: the interval at Holm's level ({stats.level_text(alpha)}) allows differences from "
                  f"{lo:+.3f} to {hi:+.3f} (uncorrected 95% interval: {p['lo']:+.3f} to {p['hi']:+.3f})")
    if above is not None:
        v = "supported" if p["lo"] > above else "refuted" if p["hi"] < above else allows
    else:
        v = "supported" if p["hi"] < below else "refuted" if p["lo"] > below else allows
    if p_adj is not None and not p_adj < 0.05 and not v.startswith("not resolved"):
        return f"{allows} after Holm (p (Holm) {p_adj:.3f}; uncorrected: {v})"
    if p_adj is not None and not p_adj < 0.05:
        return allows
    if p_adj is not None and alpha is not None and not math.isnan(alpha):
        return f"{v} ({stats.holm_interval_text(p, alpha)})"
    return v


def interval(p: dict) -> str:
    """'+0.060 ± 0.240 [-0.180, +0.300] (n = 3)': a paired difference with its interval and seeds."""
    if p["n"] == 0:
        return "-"
    text = stats.interval_text(p)
    return text + (f" [{p['lo']:+.3f}, {p['hi']:+.3f}]" if not math.isnan(p["half"]) else "") + f" (n = {p['n']})"


class StoreEvals:
    """`Evals`' contract (get, refresh) on a section of a `Store`: each (name, split, n) scored once
    by `score(bank, name, split, n) -> {domain: {str(L): value}}` (a study's own measure) and kept
    under "<prefix>|<name>|<split>|<n>", so a resumed choice evaluates nothing twice. `refused`:
    {adapter: the trainer's message} of runs a study scores as it registered (e.g. 0 everywhere),
    which `score` reads; a refused run is never cached."""

    def __init__(self, store: Store, section: str, prefix: str):
        self.store, self.section, self.prefix, self.refused = store, section, prefix, {}

    def refresh(self) -> None:
        pass

    def score(self, bank, name: str, split: str, n: int) -> dict:
        raise NotImplementedError

    def get(self, bank, name: str, split: str, n: int) -> dict:
        key = f"{self.prefix}|{name}|{split}|{n}"
        cached = None if name in self.refused else self.store.read()[self.section].get(key)
        if cached is None:
            cached = self.score(bank, name, split, n)
            if name not in self.refused:
                with self.store.edit() as data:
                    data[self.section][key] = cached
        return {d: {int(L): v for L, v in by.items()} for d, by in cached.items()}


class DecisionRows(list):
    """A comparison table's rows: `add(name, paired, rule, verdict)` appends one (the difference as
    `interval`) and returns the verdict; HEAD is the table's header."""

    HEAD = ("| comparison | difference | rule | decision |", "| --- | --- | --- | --- |")

    def add(self, name: str, p: dict, rule: str, verdict: str) -> str:
        self.append(f"| {name} | {interval(p)} | {rule} | {verdict} |")
        return verdict
