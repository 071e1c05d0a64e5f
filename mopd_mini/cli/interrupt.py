"""Ctrl-C at a command line: one line, what was kept and how to resume, exit 130, no traceback.

    interruptible(prog, run, kept)         # run(); Ctrl-C: "<prog>: interrupted (Ctrl-C): <kept()>", 130
    run_main(main, argv, prog, interrupted)   # a module's main(argv), as the command line runs it

The one answer to Ctrl-C of every command line of the package: the trainers' commands
(`mopd-mini teachers`, `distill`, ...: `commands.trainer_kept`), and the commands that hand their
flags to a module, `mopd-mini export` and `mopd-mini course` (and `results`), also when run as
`python -m mopd_mini.export` / `python -m mopd_mini.course`. Such a module says what it kept with its
own `interrupted(argv, prog)` (the export: `--out` as it was, or the whole new export; the course:
the notebooks executed, the command that runs the rest). It imports nothing of the package.
"""

from __future__ import annotations

import inspect
import shlex
import sys

EXIT_INTERRUPTED = 130
"""the exit status after Ctrl-C: 128 + SIGINT, as a shell reports a process stopped by it"""


def command_line(prog: str, argv) -> str:
    """`prog` and `argv` as a shell line (quoted where needed): the command that resumes."""
    return " ".join([prog, *(shlex.quote(str(a)) for a in argv)])


PRESSED: list[int] = []
"""every SIGINT this process took while a command ran (`note_ctrl_c`)"""


def note_ctrl_c() -> None:
    """Say that Ctrl-C came: for code that takes SIGINT over from Python while it runs (nbclient does,
    to shut its kernel down), so that the command still ends with `interruptible`'s one line."""
    PRESSED.append(1)


def by_ctrl_c(err: BaseException | None) -> bool:
    """Whether `err` is Ctrl-C, or was raised while Ctrl-C unwound (a library's clean-up failing on the
    way out: nbclient's `assert self.km is not None` when the interrupt comes while a kernel starts)."""
    seen = set()
    while err is not None and id(err) not in seen:
        if isinstance(err, KeyboardInterrupt):
            return True
        seen.add(id(err))
        err = err.__context__
    return False


def interruptible(prog: str, run, kept) -> int:
    """`run()`'s exit status; Ctrl-C inside it prints one line to stderr, "<prog>: interrupted
    (Ctrl-C): <kept()>" (what was kept, and the command that resumes), and gives EXIT_INTERRUPTED,
    without a traceback. Ctrl-C is a KeyboardInterrupt, an exception raised while one unwound
    (`by_ctrl_c`), or any exception after SIGINT came while `run` ran: a terminal sends Ctrl-C to the
    whole process group, so a notebook's kernel dies of it too, and nbclient reports a dead kernel,
    then fails in its clean-up, with the KeyboardInterrupt swallowed on the way. `kept()` reads what
    the command left on disk; should it fail, the line says so rather than raise."""
    import signal
    import threading

    before = len(PRESSED)

    def on_sigint(signum, frame):   # Python's own behaviour, remembered
        note_ctrl_c()
        raise KeyboardInterrupt

    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, on_sigint) if main_thread else None
    try:
        return run()
    except BaseException as err:
        if not (len(PRESSED) > before or by_ctrl_c(err)) or isinstance(err, SystemExit) and err.code in (0, None):
            raise
        try:
            said = kept()
        except Exception as err:  # the one line comes whatever the command left behind
            said = f"what was kept could not be read ({type(err).__name__}: {err})"
        print(f"{prog}: interrupted (Ctrl-C): {said}", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        if main_thread:
            signal.signal(signal.SIGINT, previous if previous is not None else signal.default_int_handler)


def _exit_code(value) -> int:
    return value if isinstance(value, int) else 0


def run_main(main, argv: list[str], prog: str, interrupted=None) -> int:
    """A command's `main(argv)` as the command line runs it: with prog=`prog` where main takes one (its
    --help and errors then name `prog`); its exit status (an int it returns, else 0); Ctrl-C answered by
    `interruptible`, the line's middle from `interrupted(argv, prog)` (the module's own account of
    what it kept), or, for a module without one, the command to run again."""
    try:
        takes_prog = "prog" in inspect.signature(main).parameters
    except (TypeError, ValueError):
        takes_prog = False

    def kept() -> str:
        if interrupted is not None:
            return interrupted(argv, prog)
        return f"run the same command to start it again: {command_line(prog, argv)}"

    return interruptible(prog, lambda: _exit_code(main(argv, prog=prog) if takes_prog else main(argv)), kept)
