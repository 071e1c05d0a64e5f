"""studies.study's runner in time-boxed slices (the contract of studies/slices.py), for a study that
declares a `study.Study` (studies.matched, its cures' check, studies.baselines): every run is one job
in its own process, recorded when it has finished; what a later job reads is kept as an input beside
the study's JSON; the report is made from the records once every job is recorded.

    sliced = Sliced(declared, key="T200-cures", store=store, inputs=inputs, seeds=[0, 1, 2, 3, 4],
                    n=500, val_n=300, job_argv=lambda job: [..., "--job", json.dumps(job)])
    sliced.run(workers=2, deadline=slices.Deadline(1.5), again="python -m studies.matched ... --hours 1.5")
    sliced.job(job)                         # in a job's process (`--job`)
    sliced.report(summarise)                # the study's report from its records (None until complete)

The jobs, phase by phase (the protocol is `study.run`'s, replayed from the records):
  * set-up: the study's `setup` (its teachers trained, or reloaded from runs/ where a folder holds
    them), each teacher kept as an input (its adapter and its metrics), the references' val and test
    accuracies recorded;
  * the val choice: every run `study.replay_choice` asks for (the grid, its bracketing, the tie-break
    and the re-bracketing), each trained from the kept teachers in a fresh run folder, scored on val,
    its adapter and metrics kept as an input (a chosen one is that seed's result, not trained again);
  * the seeds: every (method, seed) at the chosen setting: a run the choice made is read from its
    input and scored on test; any other is trained and scored on test (its metrics kept).
A job reads each input after checking its digest; an input that a recorded job read and that is
missing stops the study naming it (`slices.Inputs.check`). A job's runs go to a temporary folder
(removed when it ends), so nothing of a stopped job is kept and nothing stale in runs/ is reloaded.
"""

from __future__ import annotations

import gzip
import json
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from . import slices, study

METRICS = "metrics.jsonl.gz"
"""a kept run's per-step metrics (what the reports read of a run: costs, curves, the stuck series)"""


@dataclass
class Recorded:
    """What a report reads of a finished Run, rebuilt from its record and its kept metrics."""

    metrics: list = field(default_factory=list)
    seconds: float = 0.0
    count_version: int = 0
    trace: list = field(default_factory=list)


def write_metrics(folder: Path, metrics: list) -> None:
    """The metrics as gzip'd JSON lines with no timestamp in the header: the same rows, the same bytes."""
    data = "".join(json.dumps(r, sort_keys=True) + "\n" for r in metrics).encode()
    (Path(folder) / METRICS).write_bytes(gzip.compress(data, mtime=0))


def kept_metrics(folder: Path) -> list:
    return [json.loads(line) for line in gzip.decompress((Path(folder) / METRICS).read_bytes()).decode().splitlines()]


def setting_json(setting: dict) -> str:
    return json.dumps(setting, sort_keys=True)


def accs_of(accs: dict) -> dict:
    """{domain: {int(L): acc}} of a record's {domain: {str(L): acc}}."""
    return {d: {int(L): a for L, a in by.items()} for d, by in accs.items()}


def scored(bank, name: str, split: str, n: int) -> dict:
    """{domain: {str(L): acc}}: the study's evaluation (mm.evaluate), as a record keeps it."""
    import mopd_mini as mm

    table = mm.evaluate(bank, [name], n=n, split=split)
    return {d: {str(L): a for L, a in by.items()} for d, by in table["acc"][name].items()}


class Sliced:
    """A declared study (`declared`: study.Study with `given`, how to set it up from kept teachers)
    in jobs. `key` names this study's records in the store and its folder of inputs (one store may
    hold several: studies.matched keeps each T, and its cures' check, apart)."""

    def __init__(self, declared: study.Study, *, key: str, store: slices.Store, inputs: slices.Inputs, seeds: list,
                 n: int, val_n: int, job_argv: Callable[[dict], list[str]], setup_s: float = 900.0,
                 progress: bool = False):
        if declared.given is None:
            raise ValueError(f"{declared.module}: a sliced study needs `given` (its set-up from kept teachers)")
        if 0 not in seeds:
            raise SystemExit("--seeds must include 0: the validation grid runs on seed 0 and is its result")
        # the lock's path fixed now: a job moves runs.RUNS_DIR (where studies keep their locks) to a fresh
        # folder before it records, and a lock taken there would guard nothing against the other jobs
        lock = Path(store.lock()).resolve()
        store = slices.Store(store.path, lambda: lock, store.sections)
        self.s, self.key, self.store, self.inputs = declared, key, store, inputs
        self.seeds = [0] + sorted(x for x in set(seeds) if x != 0)
        self.n, self.val_n, self.job_argv, self.setup_s, self.progress = n, val_n, job_argv, setup_s, progress

    # -- the records --------------------------------------------------------------------------

    def k(self, *parts) -> str:
        return "|".join([self.key, *map(str, parts)])

    def run_key(self, m: str, setting: dict, seed: int) -> str:
        return self.k("run", m, setting_json(setting), seed)

    def test_key(self, m: str, setting: dict, seed: int) -> str:
        return self.k("test", m, setting_json(setting), seed)

    def records(self, data: dict) -> dict:
        """This study's records, {key: record}."""
        return {k: r for k, r in data["jobs"].items() if k.startswith(self.key + "|")}

    def machines(self) -> list[str]:
        """The machines this study's recorded jobs ran on (a report's command names them)."""
        return sorted({r["machine"] for r in self.records(self.store.read()).values()})

    def val_entry(self, setup: dict, rec: dict, setting: dict) -> dict:
        """A run's grid entry (study.replay_choice's) from its record and the set-up's references."""
        accs = {**{a: accs_of(v) for a, v in setup["refs"]["val"].items()}, rec["name"]: accs_of(rec["val"])}
        s = study.scores(accs, rec["name"], self.val_n, domains=self.s.domains)
        return {**setting, "name": rec["name"], **{d: s[d]["normalised"] for d in self.s.domains}, "mean": s["mean"],
                "se": s["mean_se"], "seconds": rec["seconds"]}

    def choice(self, data: dict) -> tuple[list[dict], dict, dict, dict]:
        """(jobs, grid, chosen, best) of the val choice replayed from the records: the runs it needs next
        (independent of each other), each method's grid entries, its chosen setting and chosen entry."""
        setup = data["jobs"].get(self.k("setup"))
        jobs, grid, chosen, best = [], {}, {}, {}
        for m in self.s.methods:
            def val_of(setting, seed, m=m):
                rec = data["jobs"].get(self.run_key(m, setting, seed))
                return None if rec is None or rec.get("val") is None else self.val_entry(setup, rec, setting)
            missing, entries, top = study.replay_choice(self.s, m, val_of)
            jobs += [{"kind": "run", "method": m, "setting": s, "seed": seed, "split": "val"} for s, seed in missing]
            if top is not None:
                grid[m], chosen[m], best[m] = entries, study._setting(self.s.methods[m], top), top
        return jobs, grid, chosen, best

    def plan(self, data: dict) -> tuple[str, list[dict], dict]:
        """(phase, its jobs now, chosen so far): the set-up, then the val choice, then the seeds."""
        if self.k("setup") not in data["jobs"]:
            return "set-up", [{"kind": "setup"}], {}
        jobs, _, chosen, _ = self.choice(data)
        if jobs:
            return "val choice", jobs, chosen
        left = []
        for seed in self.seeds:
            for m, setting in chosen.items():
                made = data["jobs"].get(self.run_key(m, setting, seed))
                if made is not None and made.get("val") is not None:
                    if self.test_key(m, setting, seed) not in data["jobs"]:
                        left.append({"kind": "test", "method": m, "setting": setting, "seed": seed})
                elif made is None:
                    left.append({"kind": "run", "method": m, "setting": setting, "seed": seed, "split": "test"})
        return "seeds", left, chosen

    # -- one job, in its own process ----------------------------------------------------------

    def teachers(self, data: dict) -> tuple[dict, dict]:
        """({name: (folder, Recorded)}, reads {input: digest}) of the kept teachers, digests checked."""
        from mopd_mini import cost

        setup = data["jobs"][self.k("setup")]
        given, reads = {}, {}
        for name, t in setup["teachers"].items():
            folder = self.inputs.get(t["input"], t["digest"], self.readers(data, t["input"]))
            given[name] = (folder, Recorded(kept_metrics(folder), t["seconds"], cost.count_version_of(t)))
            reads[t["input"]] = t["digest"]
        return given, reads

    def readers(self, data: dict, inp: str) -> list[str]:
        return [k for k, r in self.records(data).items() if inp in (r.get("reads") or {})]

    def keep(self, bank, name: str, run, inp: str, adapter: bool = True) -> str:
        """Keep a run as an input (its adapter, when a later job reads it, and its metrics): its digest."""
        def write(tmp):
            if adapter:
                bank.save(name, tmp)
            write_metrics(tmp, run.metrics if run is not None else [])
        return self.inputs.put(inp, write)

    def job(self, job: dict) -> None:
        """Run one job and record it (under the store's lock, when it has finished)."""
        import torch

        from mopd_mini import runs

        torch.set_num_threads(1)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))   # stopped at the deadline: `finally` still runs
        started, data = time.perf_counter(), self.store.read()
        if job["kind"] == "setup":
            ctx = self.s.setup(self.progress)
            rec = {"teachers": {}, "refs": {"val": {}, "test": {}}}
            for d, run in ctx.teachers.items():
                name, inp = f"teacher_{d}", f"{self.key}/teacher_{d}"
                rec["teachers"][name] = {"input": inp, "digest": self.keep(ctx.bank, name, run, inp),
                                         "seconds": run.seconds, "count_version": run.count_version,
                                         "sha256": runs.adapter_digest(ctx.bank, name)}
            for a in self.s.refs:
                rec["refs"]["val"][a] = scored(ctx.bank, a, "val", self.val_n)
                rec["refs"]["test"][a] = scored(ctx.bank, a, "test", self.n)
            return self._record(self.k("setup"), rec, started)
        m, setting, seed = job["method"], job["setting"], job["seed"]
        given, reads = self.teachers(data)
        saved, tmp = runs.RUNS_DIR, Path(tempfile.mkdtemp(prefix="sliced-job-"))
        runs.RUNS_DIR = tmp                     # a fresh run folder: nothing stale reloads, nothing half is kept
        try:
            ctx = self.s.given(self.progress, given)
            base = {"method": m, "setting": setting, "seed": seed}
            if job["kind"] == "test":           # a run the val choice made: read from its input
                made = data["jobs"][self.run_key(m, setting, seed)]
                ctx.bank.load(made["name"], self.inputs.get(made["input"], made["digest"],
                                                            self.readers(data, made["input"])))
                rec = {**base, "name": made["name"], "reads": {**reads, made["input"]: made["digest"]},
                       "test": scored(ctx.bank, made["name"], "test", self.n)}
                return self._record(self.test_key(m, setting, seed), rec, started)
            r = self.s.methods[m].train(ctx, setting, seed)
            split = job["split"]
            ran = study.final_accs(r.run, self.s.domains) if split == "val" and self.s.val_from_run else None
            accs = ({d: {str(L): a for L, a in by.items()} for d, by in ran.items()} if ran else
                    scored(ctx.bank, r.name, split, self.val_n if split == "val" else self.n))
            inp = f"{self.key}/{m}/{r.name}"
            rec = {**base, "name": r.name, "reads": reads, "seconds": r.seconds,
                   "count_version": getattr(r.run, "count_version", None), "val": None, "test": None, split: accs,
                   "input": inp, "digest": self.keep(ctx.bank, r.name, r.run, inp, adapter=split == "val")}
            return self._record(self.run_key(m, setting, seed), rec, started)
        finally:
            runs.RUNS_DIR = saved
            shutil.rmtree(tmp, ignore_errors=True)

    def _record(self, key: str, rec: dict, started: float) -> None:
        from tools.provenance import machine, machine_line

        rec.update(machine=machine_line(machine()), wall_seconds=time.perf_counter() - started,
                   date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
        with self.store.edit() as data:
            data["jobs"][key] = rec

    # -- the slice, in the main process -------------------------------------------------------

    def estimate(self, data: dict, job: dict) -> float:
        """A job's seconds: the longest recorded wall time of the same kind and method (any setting or
        seed), else of any run of this study, else 15 minutes; the set-up's is the study's `setup_s`."""
        recs = self.records(data)
        if job["kind"] == "setup":
            return self.setup_s
        kind = "test" if job["kind"] == "test" else "run"
        same = [r["wall_seconds"] for k, r in recs.items() if k.split("|")[1:3] == [kind, job["method"]]]
        anyrun = [r["wall_seconds"] for k, r in recs.items() if k.split("|")[1] == kind]
        return max(same or anyrun or [900.0])

    def check_inputs(self) -> None:
        """Every input the records name, checked before a slice starts: a tampered one, or a missing one
        a recorded job read, stops the study naming it; a missing one no record read is made again."""
        with self.store.edit() as data:
            recs = self.records(data)
            makers = {f"{k}#{name}": {"input": t["input"], "digest": t["digest"]}     # the set-up's teachers
                      for k, r in recs.items() for name, t in (r.get("teachers") or {}).items()}
            for k in self.inputs.check({**recs, **makers}):
                k = k.split("#")[0]
                print(f"an input of {k} is missing and no recorded job read it: its job runs again", flush=True)
                data["jobs"].pop(k, None)

    def run(self, *, workers: int, deadline: slices.Deadline, again: str) -> bool:
        """Phase after phase, each phase's jobs in `workers` processes, inside the deadline. Returns
        whether every job is recorded. Ends with what is done, what is left and how to continue."""
        started = time.time()
        self.check_inputs()
        total = slices.run_phases(self.store.read, self.plan, self.job_argv, workers=workers, deadline=deadline,
                                  estimate=self.estimate, again=again, label=self.key)
        data = self.store.read()
        phase, jobs, _ = self.plan(data)
        left = sum(self.estimate(data, j) for j in jobs)
        now = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        with self.store.edit() as d:
            from tools.provenance import machine, machine_line

            d["slices"].setdefault(self.key, []).append(
                {"command": again, "date": now, "machine": machine_line(machine()), "wall_seconds": time.time() - started,
                 "workers": workers, "finished": len(total.finished), "stopped": len(total.stopped),
                 "phase_wall_seconds": {k: round(v, 1) for k, v in total.phase_wall_s.items()}})
            d["plans"][self.key] = {"done": not jobs, "phase": phase, "total_left": len(jobs), "seconds": left,
                                    "more": phase != "seeds", "command": again, "date": now}
        slices.slice_report(total, jobs, left, again)
        return not jobs

    # -- the report, from the records ---------------------------------------------------------

    def state(self, data: dict) -> tuple[object, study.State]:
        """(ctx, State) of `study.run` rebuilt from complete records: the set-up from the kept teachers,
        the choice replayed, each seed's runs as `Recorded` (metrics from their inputs)."""
        from mopd_mini import cost

        setup = data["jobs"][self.k("setup")]
        given, _ = self.teachers(data)
        ctx = self.s.given(False, given)
        _, grid, chosen, best = self.choice(data)
        state = study.State(n=self.n, val_n=self.val_n, grid=grid)
        state.val = {a: accs_of(v) for a, v in setup["refs"]["val"].items()}
        state.test = {a: accs_of(v) for a, v in setup["refs"]["test"].items()}
        for m, setting in chosen.items():
            meth = self.s.methods[m]
            state.chosen[m] = setting[meth.scalar] if meth.scalar else setting
        for seed in self.seeds:
            done = {}
            for m, setting in chosen.items():
                rec = data["jobs"][self.run_key(m, setting, seed)]
                test = rec["test"] if rec.get("test") is not None else data["jobs"][self.test_key(m, setting, seed)]["test"]
                folder = self.inputs.get(rec["input"], rec["digest"], self.readers(data, rec["input"]))
                metrics = kept_metrics(folder)
                version = cost.count_version_of(rec)   # "ledger" in a record written before the name
                run = Recorded(metrics, rec["seconds"], version) if version is not None else None
                done[m] = study.Result(rec["name"], run, cost.totals(metrics) if run is not None else {}, rec["seconds"])
                state.test[rec["name"]] = accs_of(test)
                if rec.get("val") is not None:
                    state.val[rec["name"]] = accs_of(rec["val"])
            score = {m: b.get("mean2", b["mean"]) for m, b in best.items()}
            for name, pick in self.s.picks.items():
                top = max(pick.among, key=lambda m: score[m])
                state.chosen[name] = {"how": pick.among[top], **study.chosen_setting(self.s, state, top)}
                done[name] = done[top]
            state.per_seed[seed] = done
        recs = self.records(data).values()
        state.elapsed = sum(r.get("wall_seconds") or 0.0 for r in recs)
        return ctx, state

    def report(self, summarise: Callable) -> dict | None:
        """The study's report (`summarise(ctx, state)`, as `study.run` makes it), or None while a job is left."""
        data = self.store.read()
        if self.plan(data)[1]:
            return None
        ctx, state = self.state(data)
        return summarise(ctx, state)
