"""mopd-mini: the course's experiments from a shell.

    mopd-mini teachers                       # stage 2: a GRPO teacher per domain (or --domain binding)
    mopd-mini distill --loss kl --seed 1     # stage 3: the MOPD student from those teachers
    mopd-mini evaluate                       # accuracy table and normalised scores of a run folder
    mopd-mini results                        # python -m bench.results (in a checkout), else the table
    mopd-mini course --fast                  # python -m mopd_mini.course: execute every notebook
    mopd-mini export verl ...                # python -m mopd_mini.export (when that module exists)
    python -m mopd_mini.cli ...              # the same without the console script

The flags of `teachers` and `distill` are the fields of `GRPOConfig` and `MOPDConfig`, built from
the dataclasses themselves: a field's type gives the flag's parser (bool: --flag / --no-flag;
`X | None`: the word `none`; a tuple: several values) and the string literal under the field gives
its help. Nothing is written twice: a new config field is a new flag. Values not given keep the
preset of `--model` (`Config.for_model`, so MOPD_FAST=1 works as in the notebooks), and a value the
config refuses is reported with the config's own message (exit status 2, no traceback).

Where runs go: runs/<experiment>/<adapter>/ under `--runs-dir` (default: runs/ in the current
folder), the layout the notebooks read. The notebooks run in notebooks/, so theirs are
notebooks/runs/: from a checkout, `--runs-dir notebooks/runs` shares them (the default experiment
is `course`, `course-fast` under MOPD_FAST=1).
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib
import inspect
import sys
import textwrap
import types
import typing
from pathlib import Path

# ---------------------------------------------------------------------------------------------
# flags from a config dataclass
# ---------------------------------------------------------------------------------------------


def field_docs(config_cls) -> dict[str, str]:
    """{field: its docstring}: the string literal right under each field in the class body (and
    its dataclass bases), read from the source with `ast`, so the docstring is the help text."""
    docs: dict[str, str] = {}
    for klass in reversed(config_cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError):  # no source (e.g. a class made at run time): no help text
            continue
        body = next(node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)).body
        for node, after in zip(body, body[1:]):
            if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                    and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                    and isinstance(after.value.value, str)):
                docs[node.target.id] = " ".join(after.value.value.split())
    return docs


def _is_union(tp) -> bool:
    return typing.get_origin(tp) in (typing.Union, types.UnionType)


def _parse_bool(text: str) -> bool:
    low = text.lower()
    if low in ("true", "yes", "1", "on"):
        return True
    if low in ("false", "no", "0", "off"):
        return False
    raise ValueError(text)


def _named(fn, name: str):
    """argparse names a parser's `__name__` in its error (`invalid int value: 'x'`)."""
    fn.__name__ = name
    return fn


def _scalar(tp):
    """A parser for one value of a scalar type (str, int, float, bool, a Literal, or a union of them)."""
    if tp is bool:
        return _named(_parse_bool, "bool")
    if tp in (str, int, float):
        return tp
    if typing.get_origin(tp) is typing.Literal:
        options = typing.get_args(tp)
        def literal(text):
            for option in options:
                if str(option) == text:
                    return option
            raise ValueError(text)
        return _named(literal, "choice among " + ", ".join(map(str, options)))
    if _is_union(tp):  # e.g. int | float: the first member that parses
        parsers = [_scalar(a) for a in typing.get_args(tp)]
        def first(text):
            for parse in parsers:
                try:
                    return parse(text)
                except ValueError:
                    pass
            raise ValueError(text)
        return _named(first, " or ".join(p.__name__ for p in parsers))
    raise TypeError(f"add_config_flags cannot make a flag for type {tp!r}: use str, int, float, bool, "
                    "a Literal, a tuple of those, or a union of them with None")


@dataclasses.dataclass(frozen=True)
class FlagSpec:
    """How one config field is read from the command line."""

    item: typing.Callable     # parses one word
    nargs: str | int | None   # None: one word; "*", "+" or a count: several
    optional: bool            # the word `none` gives None
    to_scalar: bool           # several-word field that also accepts a single value as itself (str | tuple)
    boolean: bool             # --flag / --no-flag
    to_dict: bool = False     # KEY=VALUE words that make a dict (dict[str, str])


def _pair(key_type, value_type):
    """A parser of one KEY=VALUE word (a dict field's item)."""
    key, value = _scalar(key_type), _scalar(value_type)
    def pair(text):
        k, sep, v = text.partition("=")
        if not sep or not k:
            raise ValueError(text)
        return key(k), value(v)
    return _named(pair, "KEY=VALUE")


def _nested(cls):
    """A parser for a dataclass-valued field (UCMOPD's options): `on` gives the class's defaults,
    `field=value,field=value` sets some of its fields."""
    hints = typing.get_type_hints(cls)
    def nested(text):
        if text.lower() == "on":
            return cls()
        values = {}
        for item in text.split(","):
            k, sep, v = item.partition("=")
            k = k.strip().replace("-", "_")
            if not sep or k not in hints:
                raise ValueError(text)
            values[k] = _scalar(hints[k])(v.strip())
        return cls(**values)
    return _named(nested, f"on or {cls.__name__} fields as name=value,...")


def flag_spec(tp) -> FlagSpec:
    """The FlagSpec of a field type: str, int, float, bool, Literal[...], tuple[X, ...] or
    tuple[X, Y], `X | None`, unions of a scalar and a tuple (`str | tuple[str, ...]`),
    dict[K, V] (KEY=VALUE words) and a dataclass (`on`, or name=value,... of its fields)."""
    optional = False
    if _is_union(tp):
        members = [a for a in typing.get_args(tp) if a is not type(None)]
        optional = len(members) < len(typing.get_args(tp))
        tuples = [a for a in members if typing.get_origin(a) is tuple]
        scalars = [a for a in members if typing.get_origin(a) is not tuple]
        if len(tuples) > 1:
            raise TypeError(f"add_config_flags: at most one tuple type in a union, got {tp!r}")
        if tuples:
            inner = flag_spec(tuples[0])
            return dataclasses.replace(inner, nargs="+" if inner.nargs == "*" else inner.nargs,
                                       optional=optional, to_scalar=bool(scalars))
        tp = members[0] if len(members) == 1 else typing.Union[tuple(members)]
        if typing.get_origin(tp) is dict or dataclasses.is_dataclass(tp):
            return dataclasses.replace(flag_spec(tp), optional=optional)
        if tp is bool and optional:
            return FlagSpec(_scalar(bool), None, True, False, False)
    if typing.get_origin(tp) is dict:
        return FlagSpec(_pair(*typing.get_args(tp)), "*", optional, False, False, to_dict=True)
    if dataclasses.is_dataclass(tp):
        return FlagSpec(_nested(tp), None, optional, False, False)
    if typing.get_origin(tp) is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return FlagSpec(_scalar(args[0]), "*", optional, False, False)
        if len(set(args)) != 1:
            raise TypeError(f"add_config_flags: a fixed tuple needs one item type, got {tp!r}")
        return FlagSpec(_scalar(args[0]), len(args), optional, False, False)
    return FlagSpec(_scalar(tp), None, optional, False, tp is bool and not optional)


METAVARS = {"str": "TEXT", "int": "INT", "float": "FLOAT", "bool": "BOOL"}


def _item_parser(spec: FlagSpec):
    if not spec.optional:
        return spec.item
    return _named(lambda text: None if text.lower() == "none" else spec.item(text), f"{spec.item.__name__} or none")


def _field_default(f: dataclasses.Field):
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def _show(value) -> str:
    if isinstance(value, tuple):
        return " ".join(map(str, value)) if value else "(empty)"
    return "none" if value is None else str(value)


def add_config_flags(parser: argparse.ArgumentParser, config_cls, *, title: str | None = None,
                     overrides: dict[str, dict] | None = None) -> argparse._ArgumentGroup:
    """One flag per field of the dataclass `config_cls`: `--field-name`, parsed by the field's type,
    with the field's docstring as help. Flags not given are left out of the namespace (their
    value is the preset's). `overrides` {field: add_argument keywords} adjusts single flags."""
    group = parser.add_argument_group(
        title or f"{config_cls.__name__} (one flag per field)",
        "A [default] is the class's (the tiny preset); --model other than tiny and MOPD_FAST=1 change "
        "some (for_model). `none` gives None; a tuple takes several values." if hasattr(config_cls, "for_model")
        else None)
    docs, hints = field_docs(config_cls), typing.get_type_hints(config_cls)
    for f in dataclasses.fields(config_cls):
        if not f.init:
            continue
        spec = flag_spec(hints[f.name])
        default = _field_default(f)
        help_text = docs.get(f.name, "")
        if default is not dataclasses.MISSING:
            help_text += f" [default: {_show(default)}]"
        kwargs = dict(dest=f.name, default=argparse.SUPPRESS, help=help_text.replace("%", "%%"))
        if spec.boolean:
            kwargs["action"] = argparse.BooleanOptionalAction
        else:
            kwargs.update(type=_item_parser(spec), metavar=METAVARS.get(spec.item.__name__, "VALUE")
                          + ("|none" if spec.optional else ""))
            if spec.nargs is not None:
                kwargs["nargs"] = spec.nargs
        kwargs.update((overrides or {}).get(f.name, {}))
        group.add_argument("--" + f.name.replace("_", "-"), **kwargs)
    return group


def config_values(config_cls, args: argparse.Namespace) -> dict:
    """The config fields given on the command line, as the field types want them (tuples, None,
    a single value for `str | tuple[str, ...]`)."""
    hints, given = typing.get_type_hints(config_cls), {}
    for f in dataclasses.fields(config_cls):
        if not hasattr(args, f.name):
            continue
        value, spec = getattr(args, f.name), flag_spec(hints[f.name])
        if isinstance(value, list):
            if spec.optional and value == [None]:
                value = None
            elif spec.to_dict:
                value = dict(value)
            elif spec.to_scalar and len(value) == 1:
                value = value[0]
            else:
                value = tuple(value)
        given[f.name] = value
    return given


def config_from_args(config_cls, args: argparse.Namespace, model: str = "tiny", **fixed):
    """The config: `config_cls.for_model(model, ...)` (or the class defaults) with the given flags
    and `fixed` on top, checked (`check()` raises the config's own ValueError)."""
    values = {**config_values(config_cls, args), **fixed}
    make = getattr(config_cls, "for_model", None)
    cfg = make(model, **values) if make is not None else config_cls(**values)
    if hasattr(cfg, "check"):
        cfg.check()
    return cfg


# ---------------------------------------------------------------------------------------------
# the subcommands
# ---------------------------------------------------------------------------------------------


def _bank(args):
    from . import AdapterBank, load_base

    return AdapterBank(*load_base(args.model, device=args.device))


def _accuracies(row: dict) -> str:
    return ", ".join(f"{k.removeprefix('acc/')} {v:.2f}" for k, v in row.items() if k.startswith("acc/")) or "-"


def _last_eval(run) -> dict:
    return next((row for row in reversed(run.metrics) if any(k.startswith("acc/") for k in row)), {})


def cmd_teachers(args) -> int:
    from . import DOMAINS, GRPOConfig, train_teacher

    domains = getattr(args, "domain", None) or list(DOMAINS)
    domains = [domains] if isinstance(domains, str) else list(domains)
    configs = [config_from_args(GRPOConfig, args, args.model, domain=d) for d in domains]  # all checked first
    bank = _bank(args)
    for cfg in configs:
        run = train_teacher(bank, cfg)
        print(f"{cfg.adapter}: {run.dir or '(in memory)'} | greedy accuracy: {_accuracies(_last_eval(run))}")
    return 0


def _run_folder(experiment: str) -> Path:
    from . import runs

    return runs.RUNS_DIR / experiment


def cmd_distill(args) -> int:
    from . import MOPDConfig, train_student

    cfg = config_from_args(MOPDConfig, args, args.model)
    if cfg.experiment is None:
        raise ValueError("distill loads its teachers from runs/<experiment>/: give --experiment a name")
    folder = _run_folder(cfg.experiment)
    missing = [t for t in cfg.route.values() if not (folder / t / "adapter_config.json").exists()]
    if missing:
        raise ValueError(f"no trained {', '.join(missing)} in {folder}/: train them first with "
                         f"`mopd-mini teachers --experiment {cfg.experiment}` (same --runs-dir), or check "
                         "--runs-dir and --experiment")
    bank = _bank(args)
    for teacher in cfg.route.values():
        bank.load(teacher, folder / teacher)
    run = train_student(bank, cfg)
    print(f"{cfg.student}: {run.dir or '(in memory)'} | greedy accuracy: {_accuracies(_last_eval(run))}")
    print(f"next: mopd-mini evaluate --experiment {cfg.experiment}" + (
        f" --runs-dir {args.runs_dir}" if args.runs_dir else ""))
    return 0


def _adapters_in(folder: Path) -> list[str]:
    names = [p.name for p in sorted(folder.iterdir()) if (p / "adapter_config.json").exists()] if folder.is_dir() else []
    return sorted(names, key=lambda n: (not n.startswith("teacher_"), n))


def evaluate_folder(args) -> str:
    """The accuracy table of base + every adapter of runs/<experiment>/, and the normalised score
    of every non-teacher adapter whose domains all have a teacher there."""
    from . import BASE, DOMAINS, evaluate, format_scores, format_table, normalised_scores
    from .evaluate import TEACHER_OF

    if args.n < 1:
        raise ValueError(f"--n (test prompts per domain and length) must be >= 1, got {args.n}")
    folder = _run_folder(args.experiment)
    found = _adapters_in(folder)
    names = args.adapters or found
    absent = sorted(set(names) - set(found))
    if absent or not names:
        raise ValueError(f"no trained adapter {absent or ''} in {folder}/ (found: {found or 'none'}); "
                         "check --runs-dir and --experiment, or train with `mopd-mini teachers` / `distill`")
    bank = _bank(args)
    for name in names:
        bank.load(name, folder / name)
    table = evaluate(bank, [BASE] + names, n=args.n, seed=args.seed)
    out = [f"{folder}: greedy accuracy on {args.n} test prompts per cell", "", format_table(table)]
    teachers = {d: TEACHER_OF.format(d) for d in DOMAINS}
    for name in names:
        if name not in teachers.values() and all(t in names for t in teachers.values()):
            out += ["", f"normalised score of {name}: (model - base) / (teacher - base)", "",
                    format_scores(normalised_scores(table, student=name, base=BASE))]
    return "\n".join(out)


def cmd_evaluate(args) -> int:
    print(evaluate_folder(args))
    return 0


def _bench_results():
    """bench.results from the checkout the command runs in, or None (an installed package has no bench/)."""
    here = str(Path.cwd())
    if (Path(here) / "bench" / "results.py").is_file() and here not in sys.path:
        sys.path.insert(0, here)  # a console script's sys.path starts at its bin/, not at the checkout
    try:
        return importlib.import_module("bench.results")
    except ImportError:
        return None


def _exit_code(value) -> int:
    return value if isinstance(value, int) else 0


def delegate(module: str, argv: list[str], what: str) -> int:
    """Hand the rest of the command line to `module.main(argv)`."""
    try:
        target = importlib.import_module(module)
    except ModuleNotFoundError as err:
        if err.name != module:
            raise
        print(f"mopd-mini {what}: this installation has no {module} (the {what} command needs it); "
              "update mopd_mini", file=sys.stderr)
        return 2
    return _exit_code(target.main(argv))


# ---------------------------------------------------------------------------------------------
# the parser
# ---------------------------------------------------------------------------------------------

DELEGATED = {"course": ("mopd_mini.course", "execute every notebook and time it (python -m mopd_mini.course)"),
             "export": ("mopd_mini.export", "export adapters and configs for other trainers (python -m mopd_mini.export)")}


def _common(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("model and run folder")
    g.add_argument("--model", default="tiny", help="the base: tiny (shipped), a Qwen3 hub id or folder, or "
                   "qwen3-1.7b-random; any other than tiny takes the Qwen3 preset [default: tiny]")
    g.add_argument("--device", default=None, help="cpu, cuda, cuda:1 ... [default: CUDA when available]")
    g.add_argument("--runs-dir", default=None, help="the folder holding runs/<experiment>/ [default: runs/ in "
                   "the current folder; the notebooks' runs are notebooks/runs/]")


def build_parser():
    from . import GRPOConfig, MOPDConfig
    from .runs import experiment_name

    paragraphs = __doc__.strip().split("\n\n")
    p = argparse.ArgumentParser(prog="mopd-mini", description="\n\n".join(paragraphs[:2]),
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="Each command has its own --help.\n\n" + paragraphs[-1])
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    t = sub.add_parser("teachers", help="stage 2: train a GRPO teacher per domain (GRPOConfig's fields)",
                       description="Train (or resume, or reload when finished) one LoRA teacher per domain with "
                       "GRPO, into runs/<experiment>/teacher_<domain>/.")
    _common(t)
    add_config_flags(t, GRPOConfig, overrides={"domain": dict(nargs="+", type=str, metavar="DOMAIN", help=(
        field_docs(GRPOConfig).get("domain", "") + "; teachers trains one teacher per domain given "
        "[default: every domain: binding recall]").replace("%", "%%"))})
    t.set_defaults(run=cmd_teachers)

    d = sub.add_parser("distill", help="stage 3: distil the MOPD student from the teachers (MOPDConfig's fields)",
                       description="Distil the MOPD student from the teachers saved in runs/<experiment>/ "
                       "(train them first with `mopd-mini teachers`), into runs/<experiment>/<student>/.")
    _common(d)
    add_config_flags(d, MOPDConfig)
    d.set_defaults(run=cmd_distill)

    for name, helptext in (("evaluate", "accuracy table and normalised scores of a run folder's adapters"),
                           ("results", "the learning results: python -m bench.results in a checkout (its own flags); "
                            "elsewhere the table of evaluate")):
        e = sub.add_parser(name, help=helptext, description=helptext[0].upper() + helptext[1:] + ".")
        _common(e)
        g = e.add_argument_group("evaluation")
        g.add_argument("--experiment", default=experiment_name("course"),
                       help=f"the run folder runs/<experiment>/ [default: {experiment_name('course')}]")
        g.add_argument("--adapters", nargs="+", default=None, help="adapters to evaluate [default: every "
                       "adapter in the folder]; the base is always the first row")
        g.add_argument("--n", type=int, default=200, help="test prompts per domain and length [default: 200]")
        g.add_argument("--seed", type=int, default=0, help="seed of the test prompts [default: 0]")
        e.set_defaults(run=cmd_evaluate)
    for name, (_, helptext) in DELEGATED.items():
        sub.add_parser(name, help=helptext, add_help=False)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in DELEGATED:
        return delegate(DELEGATED[argv[0]][0], argv[1:], argv[0])
    if argv and argv[0] == "results":
        results = _bench_results()
        if results is not None:  # the course's learning results: bench.results with its own flags
            return _exit_code(results.main(argv[1:]))
        print("bench.results is not importable here (it lives in a checkout of the project, not in the "
              "installed package): the table of the run folder instead", file=sys.stderr)
    args = build_parser().parse_args(argv)
    from . import runs

    saved = runs.RUNS_DIR
    if getattr(args, "runs_dir", None):
        runs.RUNS_DIR = Path(args.runs_dir)
    try:
        return args.run(args)
    except ValueError as err:  # a setting the config or the library refuses: its own message
        print(f"mopd-mini {args.command}: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # a missing model, folder or file
        print(f"mopd-mini {args.command}: error: {err}", file=sys.stderr)
        return 1
    finally:
        runs.RUNS_DIR = saved


if __name__ == "__main__":
    sys.exit(main())
