"""mopd-mini: the course's experiments from a shell.

    mopd-mini teachers                       # stage 2: a GRPO teacher per domain (or --domain binding)
    mopd-mini distill --loss kl --seed 1     # stage 3: the MOPD student (--teachers recall=base re-routes)
    mopd-mini mix-rl                         # baseline: one GRPO adapter on every domain at once
    mopd-mini cascade --init-from teacher_binding --domain recall   # baseline: Cascade RL
    mopd-mini rft / soft-labels              # baselines: a student on the teachers' samples (offline)
    mopd-mini merge --weights teacher_binding=1 teacher_recall=1 --how cat   # baseline: Param-Merge
    mopd-mini evaluate                       # accuracy table and normalised scores of a run folder (--domains chain ...)
    mopd-mini export verl --run runs/course --out build/verl   # the run for verl (mopd_mini.export)
    mopd-mini results                        # docs/results.md from the runs of python -m studies.results
    mopd-mini course --fast                  # python -m mopd_mini.course: execute every notebook
    python -m mopd_mini.cli ...              # the same without the console script

The flags of the trainers (teachers, mix-rl, cascade: `GRPOConfig`; distill: `MOPDConfig`; rft,
soft-labels: `OfflineConfig`) are the config's fields, built from the dataclasses themselves: a
field's type gives the flag's parser (bool: --flag / --no-flag; `X | None`: the word `none`; a tuple: several values; a dict: KEY=VALUE words; an option class
such as UCMOPD's: `on` or name=value,name=value) and the string literal under the field gives
its help. Nothing is written twice: a new config field is a new flag. Values not given keep the
preset of `--model` (`Config.for_model`, so MOPD_FAST=1 works as in the notebooks), and a value the
config refuses is reported with the config's own message (exit status 2, no traceback); so is a
command's own list flag (--domain, --domains, --adapters, --density: `parsers.FLAG_TYPES`, by the
same rules). Ctrl-C stops any command with one line (exit 130): what it kept, and the command that
resumes it (`interrupt`: a run's last checkpoint; the export's --out as it was; the course's
notebooks executed). Names,
the device, the model and the run folder are checked before the base loads; adapters a command
reads (teachers, --init-from, merge inputs) come from runs/<experiment>/ or --from-experiment.

Where runs go: runs/<experiment>/<adapter>/ under `--runs-dir` (default: runs/ in the current
folder), the layout the notebooks read. The notebooks run in notebooks/, so theirs are
notebooks/runs/: from a checkout, `--runs-dir notebooks/runs` shares them (the default experiment
is `course`, `course-fast` under MOPD_FAST=1).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from . import checks
from .interrupt import command_line, interruptible, run_main
from .checks import check_device, check_name  # noqa: F401  (mopd_mini.cli's names, as before the split)
from .commands import prepare  # noqa: F401  (docs/reliability.md names cli.prepare)
from .flags import add_config_flags, config_from_args, config_values, field_docs, flag_spec  # noqa: F401

# ---------------------------------------------------------------------------------------------
# what a command reaches through the package (`commands`: a replacement made here is the one that runs)
# ---------------------------------------------------------------------------------------------


def _bank(args, folder: Path | None = None, names=()):
    """The base of --model on --device, with the adapters `names` loaded from `folder`."""
    from .. import AdapterBank, load_base
    from ..adapters import BASE

    bank = AdapterBank(*load_base(args.model, device=args.device))
    for name in dict.fromkeys(n for n in names if n != BASE):
        bank.load(name, folder / name)
    return bank


_hub_reachable = checks.hub_reachable


def check_model(name: str) -> None:
    """`checks.check_model_reachable` with this package's `_hub_reachable`."""
    checks.check_model_reachable(name, reachable=_hub_reachable)


def _bench_results():
    """The module `mopd-mini results` hands its flags to: mopd_mini.results_page (the learning-results
    page from the finished runs of runs/results/), or None where it cannot be imported (then the
    table of evaluate). The name is the one it had when the page's code lived in bench/results.py."""
    try:
        from .. import results_page
    except ImportError:
        return None
    return results_page


def delegate(module: str, argv: list[str], what: str) -> int:
    """Hand the rest of the command line to `module.main(argv)` (with prog="mopd-mini <what>" where
    main takes a prog, so its --help and errors name this command); Ctrl-C gives one line, from the
    module's own `interrupted(argv, prog)` where it has one (`interrupt.run_main`)."""
    try:
        target = importlib.import_module(module)
    except ModuleNotFoundError as err:
        if err.name != module:
            raise
        print(f"mopd-mini {what}: this installation has no {module} (the {what} command needs it); "
              "update mopd_mini", file=sys.stderr)
        return 2
    return run_main(target.main, argv, f"mopd-mini {what}", getattr(target, "interrupted", None))


# ---------------------------------------------------------------------------------------------
# the parser: the top level names the commands only; a command's flags are built when it runs
# (or shows its --help), so `mopd-mini --help` imports no torch
# ---------------------------------------------------------------------------------------------

DELEGATED = {"course": ("mopd_mini.course", "execute every notebook and time it (python -m mopd_mini.course)"),
             "export": ("mopd_mini.export", "export a run for verl: folded teachers, data, config (mopd_mini.export)")}


COMMANDS = {  # name: (help, description); its flags: parsers.BUILDERS[name], what runs: commands.RUNS[name]
    "teachers": ("stage 2: a GRPO teacher per domain (GRPOConfig's fields)",
                 "Train (or resume, or reload when finished) one LoRA teacher per domain with GRPO, into "
                 "runs/<experiment>/teacher_<domain>/."),
    "mix-rl": ("baseline: ONE adapter trained by GRPO on several domains at once (Mix-RL)",
               "Mix-RL: the GRPO loop of `teachers` on the union of the domains (P prompts of each domain "
               "every step), into runs/<experiment>/mixrl/."),
    "cascade": ("baseline: Cascade RL, GRPO on a second domain started from a trained adapter",
                "Cascade RL: copy --init-from (e.g. teacher_binding) and train it by GRPO on --domain, "
                "keeping the first domain in the evaluation (the forgetting curve), into "
                "runs/<experiment>/cascade_<first>_<domain>/."),
    "distill": ("stage 3: the MOPD student from the teachers (MOPDConfig's fields)",
                "Distil the MOPD student from the teachers saved in runs/<experiment>/ (train them first with "
                "`mopd-mini teachers`), into runs/<experiment>/<student>/. --teachers re-routes domains: "
                "recall=base (the base as the teacher), binding=teacher_binding_r2 (another adapter of the "
                "folder)."),
    "rft": ("baseline: RFT, SFT on the teachers' correct samples (OfflineConfig's fields)",
            "Rejection-sampled fine-tuning: each teacher samples its domain once (cached in "
            "runs/<experiment>/collect/), the student is trained by cross-entropy on the correct samples, "
            "into runs/<experiment>/rft/."),
    "soft-labels": ("baseline: soft-label distillation on the teachers' samples (OfflineConfig's fields)",
                    "Soft labels: the forward KL from the routed teacher's full distribution, on the same "
                    "teacher samples as rft, into runs/<experiment>/soft/."),
    "merge": ("baseline: Param-Merge, one adapter from the teachers' weights, no training",
              "Merge adapters of runs/<from-experiment>/ with mopd_mini.merge.merge (cat, linear, ties, "
              "dare_ties) and save the result as runs/<experiment>/<name>/ (with merge.json)."),
    "evaluate": ("accuracy table and normalised scores of a run folder's adapters",
                 "Accuracy table and normalised scores of a run folder's adapters."),
    "results": ("the learning results page (docs/results.md) from the finished runs of runs/results/ "
                "(its own flags; python -m studies.results trains them)",
                "The table of evaluate (mopd_mini.results_page is not importable here)."),
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; only `command`'s flags are built (the others are names in the list), so the
    top-level --help needs no config class and no torch."""
    paragraphs = __doc__.strip().split("\n\n")
    p = argparse.ArgumentParser(prog="mopd-mini", description="\n\n".join(paragraphs[:2]),
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="Each command has its own --help.\n\n" + paragraphs[-1])
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (helptext, description) in COMMANDS.items():
        c = sub.add_parser(name, help=helptext, description=description, add_help=name == command)
        if name == command:
            from . import commands, parsers  # the configs' module, only for the command that runs

            parsers.BUILDERS[name](c)
            c.set_defaults(run=commands.RUNS[name])
    for name, (_, helptext) in DELEGATED.items():
        sub.add_parser(name, help=helptext, add_help=False)
    return p


def main(argv: list[str] | None = None) -> int:
    """The command line: the command's exit status. Ctrl-C gives one line and 130 (`interrupt`):
    the command's own account of what it kept, or, while it starts (its modules importing, torch
    among them), that nothing was written."""
    argv = list(sys.argv[1:] if argv is None else argv)
    prog = "mopd-mini" + (f" {argv[0]}" if argv and not argv[0].startswith("-") else "")
    return interruptible(prog, lambda: _main(argv), lambda: "it stopped while starting: nothing was written. Run "
                         f"the same command again: {command_line('mopd-mini', argv)}")


def _main(argv: list[str]) -> int:
    if argv and argv[0] in DELEGATED:
        return delegate(DELEGATED[argv[0]][0], argv[1:], argv[0])
    if argv and argv[0] == "results":
        results = _bench_results()
        if results is not None:  # the course's learning results page, with its own flags
            return run_main(results.main, argv[1:], "mopd-mini results", getattr(results, "interrupted", None))
        print("mopd_mini.results_page is not importable here: the table of the run folder instead",
              file=sys.stderr)
    args = build_parser(argv[0] if argv and argv[0] in COMMANDS else None).parse_args(argv)
    from .. import runs

    saved = runs.RUNS_DIR
    if getattr(args, "runs_dir", None):
        runs.RUNS_DIR = Path(args.runs_dir)
    def attempt() -> int:
        try:
            return args.run(args, sys.modules[__name__])
        except ValueError as err:  # a setting the config or the library refuses: its own message
            print(f"mopd-mini {args.command}: error: {err}", file=sys.stderr)
            return 2
        except OSError as err:  # a missing model, folder or file
            print(f"mopd-mini {args.command}: error: {err}", file=sys.stderr)
            return 1

    from .commands import trainer_kept

    try:  # Ctrl-C: one line, what was kept and the command that resumes (no traceback)
        return interruptible(f"mopd-mini {args.command}", attempt, lambda: trainer_kept(args, argv))
    finally:
        runs.RUNS_DIR = saved
