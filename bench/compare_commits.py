"""A change, measured against an earlier commit: the same benchmark command, run on the library as
it is in this working tree and as it was at REV (checked out in a temporary `git worktree`),
alternated, with the figures you name pulled out of each run's output.

    python -m bench.compare_commits --base HEAD~1 \\
        --metric "MOPD step=\\| CPU time \\| ([0-9.]+) ms" -- python -m bench.step_vs_sft --no-write

What runs where: the command runs twice per repeat (base then head, then head then base, ...), each
time in a fresh process whose working directory and PYTHONPATH are one of the two trees. By default
the base tree gets THIS tree's bench/ and tools/ copied over its own (`--base-bench` keeps the base's), so the
measuring script is the same and only the library (mopd_mini/, factworld/) differs. The library's
logic therefore lives in one place, its history: nothing of the old code is copied into bench/.

Each `--metric NAME=REGEX` takes the first group of the first match in the command's stdout as a
number; the table gives each figure's median over the repeats at base and at head, and head / base.
`--section KEY` also writes the table into docs/benchmarks.md (section `change_KEY`), with the
machine, its load averages and the command. The worktree is removed at the end.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .common import ROOT, machine_line, median, print_and_write


def git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def run_in(tree: Path, command: list[str], timeout: float | None) -> tuple[str, float]:
    """stdout of `command` run in `tree` (cwd and PYTHONPATH), and its wall seconds."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    start = time.perf_counter()
    done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"`{shlex.join(command)}` failed in {tree} (exit {done.returncode}):\n"
                           f"{done.stderr[-3000:]}")
    return done.stdout, time.perf_counter() - start


def parse_metric(spec: str) -> tuple[str, re.Pattern]:
    name, sep, pattern = spec.partition("=")
    if not sep or not name or not pattern:
        raise ValueError(f"--metric takes NAME=REGEX (a regex with one group around a number), got {spec!r}")
    regex = re.compile(pattern)
    if regex.groups < 1:
        raise ValueError(f"--metric {name!r}: the regex needs a group around the number, e.g. '([0-9.]+)'")
    return name, regex


def extract(metrics: list[tuple[str, re.Pattern]], text: str, where: str) -> dict[str, float]:
    out = {}
    for name, regex in metrics:
        match = regex.search(text)
        if match is None:
            raise ValueError(f"--metric {name!r}: /{regex.pattern}/ matched nothing in the output at {where}; "
                             f"the output ends:\n{text[-1500:]}")
        out[name] = float(match.group(1))
    return out


def compare(base: str, command: list[str], metrics: list, repeats: int = 3, base_bench: bool = False,
            timeout: float | None = None, echo: bool = False, head: str | None = None) -> dict:
    """{"base": {name: [values]}, "head": {...}, "rev": sha, "load": [...]}: `command` alternated
    between a worktree at `base` and this working tree (or a worktree at `head`), `repeats` times each."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    sha = git("rev-parse", "--verify", f"{base}^{{commit}}")
    tmp = Path(tempfile.mkdtemp(prefix="mopd-compare-"))
    tree, head_tree = tmp / sha[:10], ROOT
    git("worktree", "add", "--detach", str(tree), sha)
    if head is not None:
        head_tree = tmp / "head"
        git("worktree", "add", "--detach", str(head_tree), git("rev-parse", "--verify", f"{head}^{{commit}}"))
    try:
        for t in {tree, head_tree} - {ROOT}:
            if not base_bench:  # the same measuring script on both sides (bench/ and the tools/ it imports)
                for folder in ("bench", "tools"):
                    shutil.rmtree(t / folder, ignore_errors=True)
                    shutil.copytree(ROOT / folder, t / folder, ignore=shutil.ignore_patterns("__pycache__"))
        values = {"base": {n: [] for n, _ in metrics}, "head": {n: [] for n, _ in metrics}}
        load = [os.getloadavg()]
        for rep in range(repeats):
            for side in (("base", "head") if rep % 2 == 0 else ("head", "base")):
                where = tree if side == "base" else head_tree
                text, wall = run_in(where, command, timeout)
                if echo:
                    print(f"--- {side} ({sha[:10] if side == 'base' else 'working tree'}), repeat {rep + 1}, "
                          f"{wall:.0f} s\n{text}", flush=True)
                for name, value in extract(metrics, text, side).items():
                    values[side][name].append(value)
                load.append(os.getloadavg())
        return {**values, "rev": sha, "load": load}
    finally:
        for t in {tree, head_tree} - {ROOT}:
            git("worktree", "remove", "--force", str(t))
        shutil.rmtree(tmp, ignore_errors=True)


def table(res: dict, head_label: str) -> list[str]:
    lines = [f"| figure | base `{res['rev'][:10]}` | {head_label} | head / base |", "| --- | --- | --- | --- |"]
    for name in res["base"]:
        b, h = median(res["base"][name]), median(res["head"][name])
        lines.append(f"| {name} | {b:.4g} | {h:.4g} | {h / b:.3f}x |" if b else f"| {name} | {b:.4g} | {h:.4g} | |")
    return lines


def main(argv=None) -> dict:
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--" not in argv:
        raise SystemExit("usage: python -m bench.compare_commits --base REV [--metric NAME=REGEX ...] -- COMMAND ...")
    split = argv.index("--")
    own, command = argv[:split], argv[split + 1:]
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--base", required=True, help="the commit to compare against (e.g. HEAD~1, a sha)")
    p.add_argument("--metric", action="append", default=[], help="NAME=REGEX; repeat for several figures")
    p.add_argument("--repeats", type=int, default=3, help="runs of the command on each side (alternated)")
    p.add_argument("--head", default=None, help="a commit to measure instead of this working tree")
    p.add_argument("--base-bench", action="store_true", help="run the base's own bench/ (default: this tree's)")
    p.add_argument("--timeout", type=float, default=None, help="seconds per run of the command")
    p.add_argument("--section", help="write the table into docs/benchmarks.md as section change_SECTION")
    p.add_argument("--title", default=None, help="the section's title (with --section)")
    p.add_argument("--echo", action="store_true", help="print every run's output")
    args = p.parse_args(own)
    if not command:
        raise SystemExit("give the benchmark command after `--`")
    metrics = [parse_metric(m) for m in args.metric]
    res = compare(args.base, command, metrics, args.repeats, args.base_bench, args.timeout, args.echo, args.head)
    if args.head:
        head_label = f"`{git('rev-parse', '--short=10', args.head)}`"
    else:
        dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
        head_label = f"`{git('rev-parse', '--short=10', 'HEAD')}`" + (" + uncommitted changes" if dirty else "")
    load = ", ".join(f"{a:.1f}" for a, _, _ in res["load"])
    full = shlex.join(["python", "-m", "bench.compare_commits", *own, "--", *command])
    lines = [f"## {args.title or 'Before / after: ' + (args.section or 'a change')}", "",
             f"*Machine:* {machine_line()}  \n*Command:* `{full}`  \n"
             f"*Date:* {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}  \n"
             f"*Load average (1 min) before and after each run:* {load} (a shared machine)", "",
             f"Base `{res['rev'][:10]}` against {head_label}, the same command {args.repeats} times on each "
             f"side, alternated; medians over the runs.", "", *table(res, head_label)]
    print_and_write(f"change_{args.section}", "\n".join(lines), None, bool(args.section))
    return res


if __name__ == "__main__":
    main()
