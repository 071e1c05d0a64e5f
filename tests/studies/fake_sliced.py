"""A study in miniature on studies/slices.py (tests/studies/test_slices.py runs it): per seed a
"teacher" job that writes an input, then a "student" job that reads it; each job sleeps `--sleep`
seconds. It keeps the slices' contract as studies.regimes does: one process a job, a record written
when the job has finished, the inputs checked, `--hours` a deadline. No torch: a job starts in
a fraction of a second, so the test's timings are the sleeps'.

    python -m tests.studies.fake_sliced --out DIR [--hours H] [--workers 2] [--sleep 1] [--estimate 1.5]
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import time
from pathlib import Path

from studies import slices

SEEDS = (0, 1, 2)


def store_of(out: Path) -> slices.Store:
    return slices.Store(out / "fake.json", lambda: out / ".fake.lock", ("runs",))


def inputs_of(out: Path) -> slices.Inputs:
    return slices.Inputs(out / "fake_inputs", slices.files_digest)


def plan(data: dict) -> list[dict]:
    """Teachers first; a student once its teacher's record exists."""
    runs = data["runs"]
    jobs = [{"kind": "teacher", "seed": s} for s in SEEDS if f"teacher|{s}" not in runs]
    jobs += [{"kind": "student", "seed": s} for s in SEEDS if f"student|{s}" not in runs and f"teacher|{s}" in runs]
    return jobs


def job(args, kind: str, seed: int) -> None:
    started = time.time()
    store, inputs = store_of(args.out), inputs_of(args.out)
    data = store.read()
    time.sleep(args.sleep)
    rec = {"kind": kind, "seed": seed}
    if kind == "teacher":
        key = f"s{seed}/teacher"
        rec.update(input=key, digest=inputs.put(key, lambda tmp: (tmp / "weights.txt").write_text(f"{seed * 7 + 3}\n")))
    else:
        teacher = data["runs"][f"teacher|{seed}"]
        folder = inputs.get(teacher["input"], teacher["digest"])
        rec.update(reads={teacher["input"]: teacher["digest"]},
                   value=int((folder / "weights.txt").read_text()) * 10 + seed)
    rec.update(machine=socket.gethostname(), wall_seconds=time.time() - started, date=time.strftime("%Y-%m-%d %H:%M"))
    with store.edit() as d:
        d["runs"][f"{kind}|{seed}"] = rec


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--hours", type=float, default=None)
    p.add_argument("--reserve", type=float, default=0.0)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--sleep", type=float, default=1.0)
    p.add_argument("--estimate", type=float, default=1.5)
    p.add_argument("--job", default=None)
    args = p.parse_args(argv)
    argv = sys.argv[1:] if argv is None else argv
    if args.job:
        j = json.loads(args.job)
        return job(args, j["kind"], j["seed"])
    store, deadline = store_of(args.out), slices.Deadline(args.hours, reserve_s=args.reserve)
    with store.edit() as data:
        for k in inputs_of(args.out).check(data["runs"]):
            del data["runs"][k]
    again, total = slices.continuing("tests.studies.fake_sliced", argv), slices.Outcome()
    while jobs := plan(store.read()):
        o = slices.run_boxed(jobs, lambda j: [sys.executable, "-m", "tests.studies.fake_sliced", "--out", str(args.out),
                                              "--sleep", str(args.sleep), "--job", json.dumps(j)],
                             workers=args.workers, deadline=deadline, estimate=lambda j: args.estimate)
        total.finished += o.finished
        total.stopped += o.stopped
        total.not_started += o.not_started
        if o.failed:
            raise SystemExit(f"{len(o.failed)} job(s) failed; continue with: {again}")
        if o.stopped or o.not_started:
            break
    left = plan(store.read())
    slices.slice_report(total, left, len(left) * args.estimate, again)
    return 0


if __name__ == "__main__":
    sys.exit(main())
