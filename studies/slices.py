"""Time-boxed slices: a study of several CPU-hours finishes by repeating one command, each repeat
bounded in time and keeping what it did in files that git tracks. No torch here (`--status` answers
in well under a second).

    deadline = Deadline(hours=1.5)              # the hard end, less RESERVE_S to write and render
    done = run_boxed(jobs, argv_of, workers=2, deadline=deadline, estimate=seconds_of)
    inputs = Inputs(docs / "regimes_inputs", digest=folder_digest)
    digest = inputs.put("arm2b/s0/sft_teacher_lr1em03", lambda tmp: bank.save(name, tmp))
    folder = inputs.get("arm2b/s0/sft_teacher_lr1em03", digest, readers=["2b|mopd_kl|0"])

The contract every study keeps with it:
  * a job is one process (`run_boxed` starts `python -m <study> ... --job <json>`); it writes its
    record under the study's lock, atomically, when it has finished, and nothing before: a job
    stopped at the deadline (SIGTERM to its process group) leaves no record and no half file;
  * no job starts whose estimate says it cannot finish before the deadline;
  * every adapter a later job reads is an input: saved once, when first made, beside the study's
    JSON (a folder git tracks), its digest in the record of the job that made it. A job reads it
    from there and checks the digest; an input that a recorded job read and that is now missing
    stops the study, naming it (training it again on another CPU would make another teacher);
  * the command ends with what is done, what is left (jobs and estimated CPU-hours) and the
    command that continues (`slice_report`).
"""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

RESERVE_S = 600.0
"""what a slice keeps back before its hard end to write the JSON and render the page"""


class InputError(SystemExit):
    """An input of a study is missing or not the one its record names: the study stops, naming it."""


def files_digest(folder: Path) -> str:
    """sha256 over the names and bytes of every file in `folder` (sorted): a digest of any input."""
    import hashlib

    h = hashlib.sha256()
    for f in sorted(p for p in Path(folder).rglob("*") if p.is_file()):
        h.update(str(f.relative_to(folder)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


@dataclass
class Deadline:
    """The end of a slice: `hours` from now less `reserve_s` (None: no end)."""

    hours: float | None
    reserve_s: float = RESERVE_S
    started: float = field(default_factory=time.time)

    def __post_init__(self):
        if self.hours is not None and not self.hours > 0:
            raise SystemExit(f"--hours must be above 0, got {self.hours}")

    @property
    def at(self) -> float:
        return float("inf") if self.hours is None else self.started + self.hours * 3600 - self.reserve_s

    def left(self) -> float:
        return self.at - time.time()

    def fits(self, seconds: float) -> bool:
        return seconds <= self.left()


@dataclass
class Outcome:
    """What `run_boxed` did: jobs finished (exit 0), failed (another exit), stopped at the deadline,
    and not started (their estimate did not fit)."""

    finished: list = field(default_factory=list)
    failed: list = field(default_factory=list)
    stopped: list = field(default_factory=list)
    not_started: list = field(default_factory=list)
    phase_wall_s: dict = field(default_factory=dict)
    """{phase: wall seconds} of `run_phases`' phases (a phase of several levels: their sum)"""


def _stop(proc: subprocess.Popen, grace_s: float = 30.0) -> None:
    """SIGTERM to the job's process group, then SIGKILL if it has not ended after `grace_s`."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def run_boxed(jobs: list, argv_of: Callable[[object], list[str]], *, workers: int, deadline: Deadline,
              estimate: Callable[[object], float], poll_s: float = 0.2, log=print) -> Outcome:
    """Run each job as its own process (`argv_of(job)`: the full command line), at most `workers` at
    once, in the order given. A job starts only if `estimate(job)` seconds fit before the deadline;
    at the deadline the running ones are stopped (SIGTERM to the process group). Returns an Outcome."""
    out, queue, running = Outcome(), list(jobs), {}
    env = {**os.environ, "OMP_NUM_THREADS": "1"}

    def stopped(signum, frame):      # SIGTERM to the command: end its jobs too (below), then stop
        raise SystemExit(f"stopped by signal {signum}; the jobs it ran were stopped, nothing of them kept")

    before = signal.signal(signal.SIGTERM, stopped)
    try:
        while queue or running:
            while queue and len(running) < max(1, workers):
                job = queue.pop(0)
                if not deadline.fits(estimate(job)):
                    out.not_started.append(job)
                    continue
                proc = subprocess.Popen(argv_of(job), env=env, start_new_session=True)
                running[proc] = (job, time.time())
            for proc in [p for p in running if p.poll() is not None]:
                job, t0 = running.pop(proc)
                (out.finished if proc.returncode == 0 else out.failed).append(job)
                if proc.returncode != 0:
                    log(f"job {json.dumps(job)} exited {proc.returncode} after {time.time() - t0:.0f} s")
            if running and deadline.left() <= 0:
                for proc, (job, _) in list(running.items()):
                    _stop(proc)
                    out.stopped.append(job)
                    running.pop(proc)
                out.not_started += queue
                queue = []
            time.sleep(poll_s if running else 0)
    except BaseException:            # Ctrl-C, SIGTERM or a failure here: no job outlives the command
        for proc in running:
            _stop(proc, grace_s=5.0)
        raise
    finally:
        signal.signal(signal.SIGTERM, before)
    return out


def run_phases(read: Callable[[], dict], plan: Callable[[dict], tuple], argv_of: Callable[[object], list[str]], *,
               workers: int, deadline: Deadline, estimate: Callable[[dict, object], float], again: str, label: str,
               between: Callable[[], None] | None = None) -> Outcome:
    """A slice's jobs, phase after phase: `plan(read())` gives (phase, its jobs now, ...); each phase's
    jobs run in `run_boxed` (`estimate(data, job)` seconds each) until none is left, one is stopped or
    not started at the deadline, or one fails (SystemExit naming `again`, the command that continues).
    `between()` runs after every phase that finished (e.g. a study writing its choice). Returns the
    Outcome of every phase together."""
    total = Outcome()
    while True:
        data = read()
        phase, jobs = plan(data)[:2]
        if not jobs:
            break
        print(f"{label}, {phase}: {len(jobs)} jobs", flush=True)
        t0 = time.time()
        outcome = run_boxed(jobs, argv_of, workers=workers, deadline=deadline, estimate=lambda j: estimate(data, j))
        total.phase_wall_s[phase] = total.phase_wall_s.get(phase, 0.0) + time.time() - t0
        print(f"{label}, {phase}: {len(outcome.finished)} of {len(jobs)} jobs finished in "
              f"{time.time() - t0:.0f} s wall with {workers} worker(s)", flush=True)
        for part in ("finished", "failed", "stopped", "not_started"):
            getattr(total, part).extend(getattr(outcome, part))
        if outcome.failed:
            raise SystemExit(f"{len(outcome.failed)} job(s) failed (their output is above); nothing of them was "
                             f"recorded. Fix the cause and continue with: {again}")
        if outcome.stopped or outcome.not_started or not outcome.finished:
            break
        if between is not None:
            between()
    return total


def slice_report(outcome: Outcome, left: list, seconds_left: float, command: str, log=print) -> None:
    """The slice's closing lines: what it did, what is left (jobs, estimated CPU-hours), how to continue."""
    log(f"slice: {len(outcome.finished)} jobs finished, {len(outcome.failed)} failed, {len(outcome.stopped)} stopped "
        f"at the deadline (nothing of them kept), {len(outcome.not_started)} not started")
    if left:
        log(f"left: {len(left)} jobs known now (later phases follow from them), about "
            f"{seconds_left / 3600:.2f} CPU-hours estimated; continue with:\n  {command}")
    else:
        log("nothing left: the study is recorded in full")


def continuing(module: str, argv: list[str]) -> str:
    """The command that continues a slice: the same one (its --hours kept)."""
    return " ".join(["python -m", module, shlex.join(argv)])


# ---------------------------------------------------------------------------------------------
# the store: one JSON file per study, written under a lock by every process
# ---------------------------------------------------------------------------------------------


def write_atomically(path: Path, data: bytes) -> None:
    """Write to a temporary name, then rename: a kill mid-write leaves the old file intact."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.tmp-{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


class Store:
    """A study's results file, {section: {key: record}, ...}, read by every process and written
    under one lock (`lock()`: a file beside the runs, out of docs/), sorted and atomically.
    `sections`: the sections a reader always finds (empty when absent); a section the file did not
    have and that is still empty is not written, so reading and writing back changes no byte."""

    def __init__(self, path: Path, lock: Callable[[], Path], sections: tuple[str, ...] = ()):
        self.path, self.lock, self.sections = Path(path), lock, tuple(sections)

    def read(self) -> dict:
        data = json.loads(self.path.read_text()) if self.path.exists() else {}
        for k in self.sections:
            data.setdefault(k, {})
        return data

    @contextmanager
    def edit(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.lock(), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            had = set(json.loads(self.path.read_text())) if self.path.exists() else set()
            data = self.read()
            yield data
            for k in self.sections:
                if k not in had and data.get(k) == {}:
                    del data[k]
            write_atomically(self.path, json.dumps(data, indent=0, sort_keys=True).encode())


# ---------------------------------------------------------------------------------------------
# durable inputs: adapters a later job reads, tracked beside the study's JSON
# ---------------------------------------------------------------------------------------------


class Inputs:
    """Folders under `root` (tracked by git), one per input, each written once and atomically
    (`put`), read back only when its digest is the recorded one (`get`). `digest(folder) -> str`."""

    def __init__(self, root: Path, digest: Callable[[Path], str]):
        self.root, self.digest = Path(root), digest

    def folder(self, key: str) -> Path:
        return self.root / key

    def has(self, key: str) -> bool:
        return self.folder(key).is_dir()

    def put(self, key: str, write: Callable[[Path], object]) -> str:
        """Write the input with `write(tmp_folder)` into a temporary folder, then rename it into place;
        an input already there is kept (written once). Returns its digest."""
        dest = self.folder(key)
        if dest.is_dir():
            return self.digest(dest)
        tmp = dest.parent / f".{dest.name}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        write(tmp)
        os.replace(tmp, dest)
        return self.digest(dest)

    def get(self, key: str, digest: str, readers: list[str] = ()) -> Path:
        """The input's folder, after checking its digest. Missing: an InputError naming it (and the
        recorded jobs that read it); another digest: an InputError naming both."""
        folder = self.folder(key)
        if not folder.is_dir():
            read = f"; recorded jobs read it: {', '.join(readers)}" if readers else ""
            raise InputError(f"input {folder} is missing{read}. Restore it from git (git checkout -- {folder}); "
                             "training it again on another CPU would make another adapter than the one recorded")
        have = self.digest(folder)
        if have != digest:
            raise InputError(f"input {folder} is not the recorded one: its digest is {have[:16]}..., the record's "
                             f"{digest[:16]}... Restore it from git (git checkout -- {folder})")
        return folder

    def check(self, records: dict[str, dict]) -> list[str]:
        """Every input the records name, checked before a slice starts. `records`: {key: record}, a
        maker holding "input" and "digest", a reader "reads" {input: digest}. An input that another
        digest replaced: InputError. A missing one that a recorded job read: InputError naming it and
        its readers. A missing one that no record read yet: its maker's key is returned (the caller
        drops that record, so the job runs again; nothing recorded depends on it)."""
        readers = {}
        for k, r in records.items():
            for inp in (r.get("reads") or {}):
                readers.setdefault(inp, []).append(k)
        drop = []
        for k, r in records.items():
            inp = r.get("input")
            if not inp:
                continue
            if not self.has(inp) and not readers.get(inp):
                drop.append(k)
                continue
            self.get(inp, r["digest"], readers.get(inp, []))
        for inp, who in readers.items():     # read, but made by no record here (its maker's record lost)
            if not any(r.get("input") == inp for r in records.values()) and not self.has(inp):
                raise InputError(f"input {self.folder(inp)} is missing; recorded jobs read it: {', '.join(who)}")
        return drop

    def size(self) -> int:
        """Bytes of every input under the root."""
        return sum(f.stat().st_size for f in self.root.rglob("*") if f.is_file()) if self.root.exists() else 0


# ---------------------------------------------------------------------------------------------
# status, from the study's JSON alone
# ---------------------------------------------------------------------------------------------


def status_lines(phases: dict[str, list[dict]], plan: dict | None) -> list[str]:
    """One line per phase of {phase: [record, ...]} (each with wall_seconds and machine): jobs recorded,
    CPU-hours spent, machines; then the last slice's plan ({"left": [...], "seconds": ...}, or None)."""
    out = []
    for phase, recs in phases.items():
        spent = sum(r.get("wall_seconds") or 0.0 for r in recs) / 3600
        machines = sorted({(r.get("machine") or "?").split(";")[0] for r in recs})
        out.append(f"  {phase}: {len(recs)} jobs recorded, {spent:.2f} CPU-h spent"
                   + (f"; machines: {' | '.join(machines)}" if machines else ""))
    if plan is None and any(phases.values()):   # a slice stopped by a signal: its records stand, its list was not written
        out.append("  left: not listed (the last slice was stopped before it wrote its list; the same command continues)")
    elif plan is None:
        out.append("  left: no slice has run yet (the first one lists the jobs)")
    elif plan.get("done"):
        out.append(f"  done: every registered job is recorded ({plan.get('date', '?')})")
    else:
        out.append(f"  left (as of the slice of {plan.get('date', '?')}): {plan['total_left']} jobs, about "
                   f"{plan['seconds'] / 3600:.2f} CPU-h estimated, in the phase '{plan['phase']}'"
                   + ("; later phases follow from its choices" if plan.get("more") else ""))
        out.append(f"  continue: {plan['command']}")
    return out


def read_json(path: Path) -> dict:
    """A study's JSON, or a clear error naming it."""
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        return {}
    except json.JSONDecodeError as err:
        raise SystemExit(f"{path}: not valid JSON ({err}); restore it with git checkout -- {path}")


# ---------------------------------------------------------------------------------------------
# what a page is rendered from: a study's JSON read through one schema check, and a render that
# never shows fewer records than the page already does (unless told to, and then said on the page)
# ---------------------------------------------------------------------------------------------


class RecordError(SystemExit):
    """A study's JSON that no page is rendered from: the message names the file, the key and what
    it expected (a SystemExit: the command stops with it, before anything is written)."""


class ShrinkError(SystemExit):
    """A render that would show fewer table rows or records than the page or section it replaces."""


NEEDS: dict[str, dict[str, str]] = {
    "baselines": {"command": "text", "date": "text", "machine": "mapping", "elapsed_s": "number",
                  "protocol": "mapping", "protocol.seeds_done": "list", "protocol.N": "number",
                  "protocol.n_lora": "number", "refs.val": "records", "refs.test": "records",
                  "rows": "records", "rows.*": "records", "rows.*.*.all.mean": "number", "rows.*.*.acc": "records",
                  "rows.*.*.stage": "mapping", "rows.*.*.pipeline": "mapping",
                  "grid": "mapping", "chosen": "mapping", "curves": "mapping"},
    "matched": {"command": "text", "plan": "mapping", "by_T": "records", "by_T.*.rows": "records",
                "by_T.*.rows.*": "records", "by_T.*.rows.*.*.lift.mean": "number", "by_T.*.rows.*.*.acc": "records",
                "by_T.*.refs": "mapping", "by_T.*.grid": "mapping", "by_T.*.chosen": "mapping",
                "by_T.*.seeds_done": "list", "by_T.*.teacher_cost": "mapping"},
    "matched-cures": {"by_T": "records"},
    "ablations": {"command": "text", "machine": "text", "settings": "mapping", "seconds": "mapping",
                  "table.acc": "records"},
    "regimes": {"runs": "records", "runs.*.method": "text", "runs.*.seed": "number"},
    "results": {"table.acc": "records"},
}
"""the sections and keys each study's renderer reads ("*": every key of that mapping), by kind;
beyond them every number of the file must be finite, every accuracy in [0, 1] (a number under a key
"acc" or "acc/...", or a score's model, base and teacher), and a normalised score (and their mean)
the one its accuracies give (`check_record`)"""

DERIVED = {"regimes": ("views",)}
"""sections a render writes from the records (not read by it): their values are not checked"""

KINDS = {"mapping": "a mapping", "records": "a mapping with at least one record", "list": "a list",
         "text": "a string", "number": "a finite number"}


def _found(x) -> str:
    if isinstance(x, (dict, list)):
        return f"a {'mapping' if isinstance(x, dict) else 'list'} of {len(x)}"
    kind = type(x).__name__
    return f"{'an' if kind[0] in 'aeiou' else 'a'} {kind} ({json.dumps(x)[:40]})"


def _is_number(x) -> bool:
    import math

    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _fits(x, kind: str, undefined: bool = False) -> bool:
    nan = undefined and isinstance(x, float) and x != x   # NaN where a normalised score is undefined (`_degenerate`)
    return {"mapping": isinstance(x, dict), "records": isinstance(x, dict) and bool(x), "list": isinstance(x, list),
            "text": isinstance(x, str), "number": _is_number(x) or nan}[kind]


def _need(data, parts: list[str], at: list[str], kind: str, path: Path, undefined: bool = False) -> None:
    if not parts:
        if not _fits(data, kind, undefined):
            raise RecordError(f"{path}: key {'.'.join(at)!r}: expected {KINDS[kind]}, found {_found(data)}")
        return
    head, rest = parts[0], parts[1:]
    if not isinstance(data, dict):
        raise RecordError(f"{path}: key {'.'.join(at) or '(the top)'!r}: expected a mapping, found {_found(data)}")
    if head == "*":
        for k, v in data.items():
            _need(v, rest, at + [str(k)], kind, path, undefined)
    elif head not in data:
        raise RecordError(f"{path}: key {'.'.join(at + [head])!r} is missing: expected {KINDS[kind]} there "
                          "(the page is rendered from it)")
    else:
        _need(data[head], rest, at + [head], kind, path, undefined)


SCORE = {"model", "base", "teacher", "denominator", "normalised"}


def _degenerate(data) -> bool:
    """Whether a normalised score of the file is undefined: a denominator (teacher - base) of 0, as a
    smoke run's untrained teachers give; then its scores, and what is made of them, are NaN."""
    if isinstance(data, dict):
        if SCORE <= set(data) and _is_number(data["denominator"]) and abs(data["denominator"]) <= 1e-9:
            return True
        if any(_is_number(v) and abs(v) <= 1e-9 for v in (data.get("denominators") or {}).values()
               if isinstance(data.get("denominators"), dict)):
            return True
        return any(_degenerate(v) for v in data.values())
    return isinstance(data, list) and any(_degenerate(v) for v in data)


def _values(data, path: Path, at: tuple = (), acc: bool = False, undefined: bool = False) -> None:
    """Every number finite (NaN only where a normalised score is `undefined` in the file: a teacher no
    better than the base); every accuracy in [0, 1]; every normalised score its accuracies' one."""
    import math

    where = lambda: ".".join(at) or "(the top)"  # noqa: E731
    if isinstance(data, dict):
        if SCORE <= set(data) and _is_number(data["denominator"]) and abs(data["denominator"]) > 1e-9 \
                and not _is_number(data["normalised"]):
            raise RecordError(f"{path}: key {where() + '.normalised'!r}: expected a finite number (its denominator "
                              f"is {data['denominator']:.6g}), found {data['normalised']!r}")
        if SCORE <= set(data) and all(_is_number(data[k]) for k in SCORE):
            for k in ("model", "base", "teacher"):
                if not 0 <= data[k] <= 1:
                    raise RecordError(f"{path}: key {where() + '.' + k!r}: expected an accuracy in [0, 1], "
                                      f"found {data[k]!r}")
            want = (data["model"] - data["base"]) / data["denominator"] if abs(data["denominator"]) > 1e-12 else None
            if want is not None and not math.isclose(want, data["normalised"], rel_tol=1e-6, abs_tol=1e-9):
                raise RecordError(f"{path}: key {where() + '.normalised'!r}: expected (model - base) / denominator "
                                  f"= {want:.6g} from its accuracies, found {data['normalised']!r}")
        parts = [v["normalised"] for v in data.values() if isinstance(v, dict) and SCORE <= set(v)]
        if parts and all(map(_is_number, parts)) and _is_number(data.get("mean")) and not math.isclose(
                data["mean"], sum(parts) / len(parts), rel_tol=1e-6, abs_tol=1e-9):
            raise RecordError(f"{path}: key {where() + '.mean'!r}: expected the mean of its domains' normalised "
                              f"scores, {sum(parts) / len(parts):.6g}, found {data['mean']!r}")
        for k, v in data.items():
            _values(v, path, at + (str(k),), acc or k == "acc" or str(k).startswith("acc/"), undefined)
    elif isinstance(data, list):
        for i, v in enumerate(data):
            _values(v, path, at + (str(i),), acc, undefined)
    elif isinstance(data, (int, float)) and not isinstance(data, bool):
        if not math.isfinite(data) and not (undefined and math.isnan(data) and not acc):
            raise RecordError(f"{path}: key {where()!r}: expected a finite number, found {data!r}"
                              + ("" if undefined else " (NaN only where a normalised score is undefined: a "
                                 "denominator, teacher minus base, of 0)"))
        if acc and not 0 <= data <= 1:
            raise RecordError(f"{path}: key {where()!r}: expected an accuracy in [0, 1], found {data!r}")


_CHECKED: set = set()


def check_record(data, study: str, path: Path, extra: dict[str, str] | None = None) -> dict:
    """`data` (the JSON at `path`) against what `study`'s renderer reads (`NEEDS`, plus `extra`) and the
    rules on its values; a RecordError naming the file, the key and what it expected."""
    if not isinstance(data, dict):
        raise RecordError(f"{path}: expected a JSON object of {study}'s sections, found {_found(data)}")
    checked = {k: v for k, v in data.items() if k not in DERIVED.get(study, ()) and k != SHRINK}
    undefined = _degenerate(checked)
    for key, kind in {**NEEDS[study], **(extra or {})}.items():
        _need(data, key.split("."), [], kind, path, undefined)
    _values(checked, path, undefined=undefined)
    return data


def read_record(path: Path, study: str, extra: dict[str, str] | None = None) -> dict:
    """A study's JSON for a page: parsed and checked (`check_record`); a RecordError naming the file if
    it is missing, not JSON, or not what the renderer reads. A file checked once is not walked again
    while it is unchanged (a page's findings read it once each)."""
    path = Path(path)
    try:
        text = path.read_text()
        stat = path.stat()
    except OSError as err:
        raise RecordError(f"{path}: cannot be read ({err.strerror or err}); a page is rendered from it") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise RecordError(f"{path}: not valid JSON ({err}); a truncated or hand-edited file? Restore it with "
                          f"git checkout -- {path}") from None
    key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size, study, tuple(sorted((extra or {}).items())))
    if key not in _CHECKED:
        check_record(data, study, path, extra)
        _CHECKED.add(key)
    return data


@contextmanager
def rendering(path: Path):
    """A render from the JSON at `path`: a key or value its renderer cannot use (beyond `NEEDS`) stops it
    with a RecordError naming that file, not a traceback."""
    try:
        yield
    except (KeyError, TypeError, AttributeError, IndexError, ValueError, ZeroDivisionError) as err:
        what = f"no key {err}" if isinstance(err, KeyError) else f"{type(err).__name__}: {err}"
        raise RecordError(f"{path}: the page cannot be rendered from it ({what}); nothing was written. Compare it "
                          f"with the committed one (git diff -- {path})") from err


SHRINK = "shrink_allowed"
"""the key of a study's JSON that records each render told to show fewer rows (`--allow-shrink`)"""


def table_rows(text: str) -> int:
    """The table rows of a markdown page (its separator rows not counted)."""
    return sum(1 for line in text.splitlines() if line.startswith("|") and not set(line) <= set("|-: "))


def leaves(x) -> int:
    """How many values a section holds (its records' numbers and strings, at every depth)."""
    if isinstance(x, dict):
        return sum(leaves(v) for v in x.values())
    if isinstance(x, list):
        return sum(leaves(v) for v in x)
    return 1


def guard_render(page: Path, text: str, source: Path, data: dict, allow_shrink: bool = False,
                 sections: dict[str, tuple] | None = None) -> str:
    """The page text to write at `page`, rendered from `data` (read from `source`): refused (ShrinkError,
    nothing written) if it shows fewer table rows than the page there now, or a section of the store
    it rewrites ({name: (old, new)}) holds fewer values, unless `allow_shrink`; then the render is
    recorded in `data[SHRINK]` (the caller writes it with the JSON). Every recorded one is said at the
    end of the page."""
    page = Path(page)
    before = table_rows(page.read_text()) if page.exists() else 0
    after = table_rows(text)
    smaller = [f"{page} would show {after} table rows where it shows {before}"] if after < before else []
    said = []   # what the page says of it (file names, no machine's paths)
    for name, (old, new) in (sections or {}).items():
        if old is not None and leaves(new) < leaves(old):
            smaller.append(f"{source}'s section {name!r} would hold {leaves(new)} values where it holds {leaves(old)}")
            said.append(f"{Path(source).name}'s {name!r} {leaves(new)} values where it held {leaves(old)}")
    if smaller and not allow_shrink:
        raise ShrinkError(f"not rendered: {'; '.join(smaller)} ({source} holds fewer records than the page shows). "
                          f"Restore {source} (git diff -- {source}), or pass --allow-shrink to write the smaller "
                          "page on purpose (recorded in the JSON and said on the page)")
    if smaller:
        import time

        data.setdefault(SHRINK, []).append({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                                            "page": page.name, "source": Path(source).name, "rows": [before, after],
                                            "sections": "; ".join(said)})
    notes = [f"**Partial on purpose** ({r['date']}): rendered from {r.get('source')} with --allow-shrink, "
             f"{r['rows'][1]} table rows where the page showed {r['rows'][0]}"
             + (f" ({r['sections']})" if r.get("sections") else "") + "."
             for r in data.get(SHRINK, []) if r.get("page") == page.name]
    return text.rstrip() + "\n\n" + "\n\n".join(notes) + "\n" if notes else text


def python() -> str:
    return sys.executable


def quiet_flag(parser, help: str = "no progress bars (the study's own and transformers' weight loading)") -> None:
    """The studies' `--quiet`: besides the flag, it turns off transformers' progress bars (its
    "Loading weights" bar, printed by every worker at every load) when given, so nothing is imported
    before the flag is read (`--status` runs without torch)."""
    import argparse

    class Quiet(argparse.Action):
        def __call__(self, parser, namespace, values, option_string=None):
            setattr(namespace, self.dest, True)
            from transformers.utils import logging as hf_logging
            hf_logging.disable_progress_bar()

    parser.add_argument("--quiet", action=Quiet, nargs=0, default=False, help=help)


def status_main(name: str, argv: list[str]) -> int:
    """`python -m studies.<name> --status [--arm A ...] [--out DIR]`: every arm with records or a
    plan in <out>/<name>.json (default docs/), or the one named: `status_lines` per phase. The val
    choice's runs are the "choices" records keyed "<arm>|run|..."; the seeds' the "runs" records."""
    import argparse

    p = argparse.ArgumentParser(prog=f"python -m studies.{name} --status")
    p.add_argument("--status", action="store_true")
    p.add_argument("--arm", default=None)
    p.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "docs")
    args, _ = p.parse_known_args(argv)
    data = read_json(args.out / f"{name}.json")
    arms = [args.arm] if args.arm else sorted(set(data.get("plans", {})) | {
        k.split("|")[0] for k in data.get("choices", {}) if "|run|" in k})
    if not arms:
        print(f"{args.out / f'{name}.json'}: no slice has run yet")
    for a in arms:
        choice = [r for k, r in data.get("choices", {}).items() if k.startswith(f"{a}|run|")]
        seeds = [r for r in data.get("runs", {}).values() if str(r.get("arm")) == a]
        print(f"arm {a} ({args.out / f'{name}.json'}):")
        print("\n".join(status_lines({"val choice": choice, "seeds": seeds}, data.get("plans", {}).get(a))))
    return 0


def jobs_status(data: dict, key: str) -> list[str]:
    """`status_lines` of a studies.sliced study (`key`: its records' prefix in the "jobs" section):
    the set-up, the val choice's runs (a record with a val score), the seeds' (one with a test score)."""
    recs = {k: r for k, r in data.get("jobs", {}).items() if k.startswith(key + "|")}
    phases = {"set-up": [r for k, r in recs.items() if k == f"{key}|setup"],
              "val choice": [r for r in recs.values() if r.get("val") is not None],
              "seeds": [r for r in recs.values() if r.get("test") is not None]}
    return status_lines(phases, data.get("plans", {}).get(key))


def jobs_status_main(name: str, argv: list[str]) -> int:
    """`python -m studies.<name> --status [--out DIR]` for a studies.sliced study: every key with
    records or a plan in <out>/<name>_jobs.json (default docs/), `jobs_status` each."""
    import argparse

    p = argparse.ArgumentParser(prog=f"python -m studies.{name} --status")
    p.add_argument("--status", action="store_true")
    p.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "docs")
    args, _ = p.parse_known_args(argv)
    path = args.out / f"{name}_jobs.json"
    data = read_json(path)
    keys = sorted(set(data.get("plans", {})) | {k.split("|")[0] for k in data.get("jobs", {})})
    if not keys:
        print(f"{path}: no slice has run yet")
    for k in keys:
        print(f"{k} ({path}):")
        print("\n".join(jobs_status(data, k)))
    return 0
