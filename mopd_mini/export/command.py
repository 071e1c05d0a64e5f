"""The export's command line, `python -m mopd_mini.export verl ...` (and `mopd-mini export`):
its flags, what a Ctrl-C kept (`interrupted`), and `main`."""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

from ..adapters import BASE, LoraSettings
from ..config import LOSSES, MOPDConfig
from ..models import TINY
from .folder import MARKER, _Terminated
from .for_verl import Layout
from .run import read_run
from .write import export_verl


# ---------------------------------------------------------------------------------------------
# the command line
# ---------------------------------------------------------------------------------------------


def parser(prog: str = "python -m mopd_mini.export") -> argparse.ArgumentParser:
    """The export's command line (`prog`: the name --help shows, e.g. "mopd-mini export")."""
    p = argparse.ArgumentParser(prog=prog, description=sys.modules[__package__].__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="engine", required=True)
    v = sub.add_parser("verl", help="export for verl 0.9.1 (multi-teacher on-policy distillation)")
    v.add_argument("--run", help="a finished course run, runs/<experiment> (its student/ and the teachers it "
                                 "was distilled from)")
    v.add_argument("--teacher", action="append", default=[], metavar="DOMAIN=ADAPTER",
                   help="a teacher adapter folder per domain (instead of, or on top of, --run); ADAPTER 'base': "
                        "the base itself is that domain's teacher")
    v.add_argument("--out", required=True, help="the export folder (built beside it, renamed into place at the end)")
    v.add_argument("--force", action="store_true", help="replace a previous export at --out whole (only a folder "
                                                        "an export wrote: never the working folder, the run, a "
                                                        "repository or a home folder)")
    v.add_argument("--allow-domain-mismatch", action="store_true",
                   help="export a routing where a domain's teacher does not name that domain in its own record "
                        "(the base, a foreign adapter, another domain's teacher); recorded in export.json")
    v.add_argument("--base", default=TINY, help="the base the adapters were trained on (default: tiny)")
    v.add_argument("--allow-foreign", action="store_true",
                   help="fold teacher adapters trained on another base than --base (same shapes)")
    v.add_argument("--loss", choices=LOSSES, help="override the run's loss (only pg exists in verl)")
    v.add_argument("--gpus", type=int, default=8, help="GPUs on the node (default 8)")
    v.add_argument("--teacher-gpus", type=int, help="GPUs of the teacher pool (default: half the node)")
    v.add_argument("--teacher-tp", type=int, default=1, help="tensor-parallel size of a teacher replica (>= 1)")
    v.add_argument("--root", help="where the export folder will be on the cluster (default: --out)")
    return p


_STARTED: list[float] = []
"""when this process's export command began (`main`): a marker written since is this export's"""


def interrupted(argv: list[str], prog: str = "python -m mopd_mini.export") -> str:
    """What an export stopped by Ctrl-C kept, in words (the line `cli.interrupt.interruptible` prints).
    The export is all or nothing: `--out` holds the whole new export (when the interrupt came after
    its last rename) or is as it was, and the staging folder is removed (named, if something kept it:
    the next export of that `--out` removes it). Then the command that exports again."""
    from ..cli.interrupt import command_line

    again = command_line(prog, argv)
    try:
        args, _ = parser(prog).parse_known_args(argv)
    except SystemExit:   # stopped before its flags were read
        return f"nothing was written. Run the same command to export again: {again}"
    out = Path(args.out).resolve()
    left = sorted(p.name for p in out.parent.glob(f".{out.name}.staging-{os.getpid()}-*"))
    staging = (f"its staging folder {left[0]} is left beside it (the next export of that --out removes it)" if left
               else "no staging folder is left")
    mark = out / MARKER
    if _STARTED and mark.is_file() and mark.stat().st_mtime >= _STARTED[0]:
        return f"the export had finished: {out} holds it whole; {staging}. Nothing to resume"
    held = out.is_dir() and any(out.iterdir())
    where = (f"--out {out} is as it was (nothing of this export is in it)" if held
             else f"nothing was written to --out {out}")
    return f"{where}; {staging}. Run the same command to export again: {again}"


def main(argv=None, prog: str = "python -m mopd_mini.export") -> dict:
    """The command line; every user mistake is a SystemExit("export refused: ...") before any write.
    Ctrl-C: one line (`interrupted`) where it runs as a command (`cli.interrupt.run_main`)."""
    _STARTED[:] = [time.time()]
    args = parser(prog).parse_args(argv)
    try:
        cfg, teachers, lora = read_run(args.run) if args.run else (MOPDConfig(), {}, LoraSettings())
        ran, flagged = dict(teachers), []   # the run's routing, before --teacher changes it
        for item in args.teacher:
            domain, sep, path = item.partition("=")
            if not sep or not domain or not path:
                raise ValueError(f"--teacher takes DOMAIN=ADAPTER (e.g. binding=runs/course/teacher_binding), "
                                 f"got {item!r}")
            teachers[domain] = BASE if path == BASE else Path(path)
            flagged.append(domain)
        if not args.run and teachers:
            cfg = MOPDConfig(domains=tuple(teachers))
        overridden = []   # every setting of the run a flag changed, recorded in export.json
        if args.loss:
            if args.run:
                overridden.append({"setting": "loss", "run": cfg.loss, "exported": args.loss, "flag": "--loss"})
            cfg = replace(cfg, loss=args.loss)
        for domain in dict.fromkeys(flagged):
            if args.run:
                overridden.append({"setting": f"teachers.{domain}", "run": str(ran.get(domain)),
                                   "exported": str(teachers[domain]), "flag": "--teacher"})
        for flag, on in (("--allow-domain-mismatch", args.allow_domain_mismatch), ("--allow-foreign", args.allow_foreign)):
            if on:
                overridden.append({"setting": flag.lstrip("-").replace("-", "_"), "run": None, "exported": True,
                                   "flag": flag})
        layout = Layout(gpus=args.gpus, teacher_gpus=args.teacher_gpus, teacher_tp=args.teacher_tp)
        info = export_verl(args.out, cfg, teachers, lora, args.base, layout, args.root,
                           allow_foreign=args.allow_foreign, force=args.force, run=args.run,
                           allow_mismatch=args.allow_domain_mismatch,
                           routed_by_flag=tuple(dict.fromkeys(flagged)) if args.run else (), overridden=overridden)
    except (ValueError, OSError) as err:  # FileNotFoundError, PermissionError: a path the user gave
        raise SystemExit(f"export refused: {err}") from err
    except _Terminated as err:
        raise SystemExit(f"export stopped: {err}; --out {args.out} is as it was, its staging folder removed") from None
    print(f"wrote {Path(args.out).resolve()}: student_base/, teachers/{{{','.join(teachers)}}}/, "
          f"data/train.parquet ({info['train_rows']} rows), data/val.parquet ({info['val_rows']} rows), "
          "reward/factworld_reward.py, verl_config.yaml, run_verl.sh, export.json")
    for d, x in info["fold_check"].items():
        if x.get("base"):
            print(f"teacher {d}: the base itself (served from student_base/)")
            continue
        print(f"folded teacher {d}: max |logit - adapter logit| {x['fold_exact']:.1e} (the fold, "
              f"{x['exact_dtype']}), {x['saved']:.1e} (the saved checkpoint, {x['saved_dtype']}; "
              f"max |logit| {x['max_logit']:.1f}; the adapter model itself, {x['saved_dtype']} vs "
              f"{x['exact_dtype']}: {x['adapter_rounding']:.1e})")
    return info
