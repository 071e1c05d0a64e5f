"""mopd-mini: the course's experiments from a shell.

    mopd-mini teachers                       # stage 2: a GRPO teacher per domain (or --domain binding)
    mopd-mini distill --loss kl --seed 1     # stage 3: the MOPD student (--teachers recall=base re-routes)
    mopd-mini mix-rl                         # baseline: one GRPO adapter on every domain at once
    mopd-mini cascade --init-from teacher_binding --domain recall   # baseline: Cascade RL
    mopd-mini rft / soft-labels              # baselines: a student on the teachers' samples (offline)
    mopd-mini merge --weights teacher_binding=1 teacher_recall=1 --how cat   # baseline: Param-Merge
    mopd-mini evaluate                       # accuracy table and normalised scores of a run folder (--domains chain ...)
    mopd-mini export verl --run runs/course --out build/verl   # the run for verl (mopd_mini.export)
    mopd-mini results                        # python -m bench.results (in a checkout), else the table
    mopd-mini course --fast                  # python -m mopd_mini.course: execute every notebook
    python -m mopd_mini.cli ...              # the same without the console script

The flags of the trainers (teachers, mix-rl, cascade: `GRPOConfig`; distill: `MOPDConfig`; rft,
soft-labels: `OfflineConfig`) are the config's fields, built from the dataclasses themselves: a
field's type gives the flag's parser (bool: --flag / --no-flag; `X | None`: the word `none`; a tuple: several values; a dict: KEY=VALUE words; an option class
such as UCMOPD's: `on` or name=value,name=value) and the string literal under the field gives
its help. Nothing is written twice: a new config field is a new flag. Values not given keep the
preset of `--model` (`Config.for_model`, so MOPD_FAST=1 works as in the notebooks), and a value the
config refuses is reported with the config's own message (exit status 2, no traceback). Names,
the device, the model and the run folder are checked before the base loads; adapters a command
reads (teachers, --init-from, merge inputs) come from runs/<experiment>/ or --from-experiment.

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


def _pair(key_type, value_type, metavar: str = "KEY=VALUE"):
    """A parser of one KEY=VALUE word (a dict field's item); a malformed word names the field and the syntax."""
    key, value = _scalar(key_type), _scalar(value_type)
    def pair(text):
        k, sep, v = text.partition("=")
        if not sep or not k:
            raise argparse.ArgumentTypeError(f"{text!r} is not {metavar}: this flag takes words "
                                             f"{metavar} {metavar} ...")
        try:
            return key(k), value(v)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: this flag takes {metavar} words "
                                             f"({key.__name__}={value.__name__})") from None
    return _named(pair, metavar)


def nested_syntax(cls) -> str:
    """`on | none | name=TYPE,...` of a dataclass option: what --help shows and an error repeats."""
    hints = typing.get_type_hints(cls)
    items = ",".join(f"{f.name}={_metavar(flag_spec(hints[f.name]))}" for f in dataclasses.fields(cls) if f.init)
    return f"on | none | {items} (any of the fields, comma-separated, no spaces)"


def _nested(cls):
    """A parser for a dataclass-valued field (UCMOPD's options): `on` gives the class's defaults,
    `field=value,field=value` sets some of its fields (each parsed by its own type, `none` too)."""
    hints = typing.get_type_hints(cls)
    parsers = {f.name: _item_parser(flag_spec(hints[f.name])) for f in dataclasses.fields(cls) if f.init}
    def nested(text):
        if text.lower() == "on":
            return cls()
        values = {}
        for item in text.split(","):
            k, sep, v = item.partition("=")
            k = k.strip().replace("-", "_")
            if not sep or k not in parsers:
                what = f"unknown field {k!r}" if sep else f"{item!r} is not name=value"
                raise argparse.ArgumentTypeError(f"{what} in {cls.__name__} {text!r}; valid fields: "
                                                 f"{', '.join(parsers)}. Syntax: {nested_syntax(cls)}")
            try:
                values[k] = parsers[k](v.strip())
            except ValueError:
                raise argparse.ArgumentTypeError(
                    f"{cls.__name__} field {k}={v.strip()!r}: expected {parsers[k].__name__}. Syntax: "
                    f"{nested_syntax(cls)}") from None
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


METAVARS = {"str": "TEXT", "int": "INT", "float": "FLOAT", "bool": "BOOL", "KEY=VALUE": "KEY=VALUE"}


def _metavar(spec: FlagSpec) -> str:
    if spec.item.__name__.startswith("on or "):   # a dataclass option
        return "on|none|NAME=VALUE,..." if spec.optional else "on|NAME=VALUE,..."
    return METAVARS.get(spec.item.__name__, "VALUE") + ("|none" if spec.optional else "")


def _syntax(tp) -> str:
    """The syntax line --help adds under a structured field (a dict, a dataclass option), else ''."""
    members = [a for a in typing.get_args(tp) if a is not type(None)] if _is_union(tp) else [tp]
    if len(members) == 1 and dataclasses.is_dataclass(members[0]):
        cls = members[0]
        docs = field_docs(cls)
        fields = "; ".join(f"{f.name} [{_show(_field_default(f))}]: {docs.get(f.name, '')}"
                           for f in dataclasses.fields(cls) if f.init)
        return f" Syntax: {nested_syntax(cls)}, e.g. {_example(cls)}. Fields: {fields}"
    if len(members) == 1 and typing.get_origin(members[0]) is dict:
        return " Syntax: KEY=VALUE words, one per key, e.g. recall=base binding=teacher_binding"
    return ""


def _example(cls) -> str:
    hints = typing.get_type_hints(cls)
    f = next(f for f in dataclasses.fields(cls) if f.init)
    value = _field_default(f)
    return f"{f.name}={_show(value)}" if value is not dataclasses.MISSING else f"{f.name}={_metavar(flag_spec(hints[f.name]))}"


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
                     overrides: dict[str, dict] | None = None, skip: tuple[str, ...] = ()) -> argparse._ArgumentGroup:
    """One flag per field of the dataclass `config_cls`: `--field-name`, parsed by the field's type,
    with the field's docstring as help. Flags not given are left out of the namespace (their
    value is the preset's). `overrides` {field: add_argument keywords} adjusts single flags;
    the fields in `skip` get no flag (the command sets them)."""
    group = parser.add_argument_group(
        title or f"{config_cls.__name__} (one flag per field)",
        "A [default] is the class's (the tiny preset); --model other than tiny and MOPD_FAST=1 change "
        "some (for_model). `none` gives None; a tuple takes several values." if hasattr(config_cls, "for_model")
        else None)
    docs, hints = field_docs(config_cls), typing.get_type_hints(config_cls)
    for f in dataclasses.fields(config_cls):
        if not f.init or f.name in skip:
            continue
        spec = flag_spec(hints[f.name])
        default = _field_default(f)
        help_text = docs.get(f.name, "")
        if default is not dataclasses.MISSING:
            help_text += f" [default: {_show(default)}]"
        help_text += _syntax(hints[f.name])
        kwargs = dict(dest=f.name, default=argparse.SUPPRESS, help=help_text.replace("%", "%%"))
        if spec.boolean:
            kwargs["action"] = argparse.BooleanOptionalAction
        else:
            kwargs.update(type=_item_parser(spec), metavar=_metavar(spec))
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
# checks before any work: names, device, model, the run folder
# ---------------------------------------------------------------------------------------------


def check_name(flag: str, name: str, adapter: bool = False) -> str:
    """`name` if it can be one folder under runs/ (non-empty, no path separator, not . or ..; an
    adapter's name also no '.', a torch module name); else a ValueError naming the flag."""
    bad = (not name or name.strip() != name or name in (".", "..") or "/" in name or "\\" in name
           or "\0" in name or (adapter and "." in name))
    if bad:
        rule = "a non-empty name without '/', '\\' or '.' (adapter names are torch module names)" if adapter \
            else "one folder name: non-empty, no '/' or '\\', not '.' or '..'"
        raise ValueError(f"{flag} {name!r} is not a valid name: use {rule}")
    return name


def check_device(text: str | None) -> str | None:
    """The --device string if torch knows it and it is there; else a ValueError saying what is."""
    if text is None:
        return None
    import torch

    try:
        device = torch.device(text)
    except RuntimeError:
        raise ValueError(f"--device {text!r} is not a device name; use cpu, cuda, cuda:1, mps ...") from None
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise ValueError(f"--device {text}: no CUDA GPU is available here; use --device cpu")
        if device.index is not None and device.index >= count:
            raise ValueError(f"--device {text}: this machine has {count} CUDA GPU(s), cuda:0 to cuda:{count - 1}")
    elif device.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"--device {text}: MPS is not available here; use --device cpu")
    return text


def _hub_reachable(timeout: float = 3.0) -> str | None:
    """None if the hub's host answers a TCP connection within `timeout`; else why not. Behind a
    proxy (HTTPS_PROXY set) the answer is left to the hub client: None."""
    import os
    import socket
    import threading
    from urllib.parse import urlparse

    if any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return None
    from huggingface_hub import constants

    url = urlparse(constants.ENDPOINT)
    why: list[str] = [f"no answer from {url.hostname} within {timeout:g} s"]

    def probe():
        try:
            socket.create_connection((url.hostname, url.port or 443), timeout=timeout).close()
            why[0] = ""
        except OSError as err:
            why[0] = f"{url.hostname}: {err}"
    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(timeout + 0.5)
    return why[0] or None


def check_model(name: str) -> None:
    """A --model that is a hub id must be in the local cache, or the hub reachable: checked in a
    few seconds instead of the hub client's minute of retries (HF_HUB_OFFLINE=1: the cache only)."""
    import os

    from ..models import QWEN3_RANDOM, TINY, TINY_OTHER

    if name in (TINY, TINY_OTHER, QWEN3_RANDOM) or os.path.isdir(os.path.expanduser(name)):
        return
    if name.startswith(("/", ".", "~")):
        raise FileNotFoundError(f"--model {name!r}: no such folder; pass the folder that holds config.json, "
                                "the weights and the tokenizer files, or a hub id such as Qwen/Qwen3-1.7B")
    from huggingface_hub import constants, try_to_load_from_cache

    try:
        cached = try_to_load_from_cache(name, "config.json")
    except ValueError as err:   # HFValidationError: not a repo id at all
        raise ValueError(f"--model {name!r} is neither tiny, tiny-other, {QWEN3_RANDOM}, a folder nor a "
                         f"hub id ({err})") from None
    if isinstance(cached, str):
        return
    why = "HF_HUB_OFFLINE is set" if constants.HF_HUB_OFFLINE else _hub_reachable()
    if why:
        raise OSError(f"--model {name!r} is not a folder here, not in the hub cache ({constants.HF_HUB_CACHE}), "
                      f"and the hub cannot be reached ({why}). Download it on a machine with a network "
                      f"(`huggingface-cli download {name} --local-dir ./model`) and pass --model ./model; "
                      f"for the course without weights use --model {TINY}")


def check_writable(experiment: str | None) -> None:
    """runs/<experiment>/ can be created and written (a file made and removed), before any compute."""
    import tempfile

    from .. import runs

    if experiment is None:
        return
    folder = runs.RUNS_DIR / experiment
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as err:
        raise ValueError(f"the run folder {folder} cannot be written ({err.strerror or err}); pick a "
                         "writable --runs-dir (or another --experiment)") from None


ROLES = {"group_size": "a GRPO run (teachers, mix-rl, cascade)", "student": "a MOPD student (distill)",
         "samples_per_prompt": "an offline student (rft, soft-labels)"}
"""a key only that trainer's config.json has: the role of a run folder"""


def _role(there: Path) -> str | None:
    import json

    try:
        config = json.loads((there / "config.json").read_text())
    except (OSError, ValueError):
        return None
    return next((role for key, role in ROLES.items() if isinstance(config, dict) and key in config), None)


def check_output(folder: Path, name: str, inputs: tuple[str, ...] = (), force: bool = False,
                 role: str | None = None, teacher: bool = False) -> None:
    """The adapter a command writes may not be one it reads, a teacher's (teacher_<domain>, unless
    the command trains teachers), an adapter that no resumable run owns (a teacher copied in, a
    merge, ...; unless `force`, for merge), nor a run of another trainer than `role`."""
    from .. import DOMAINS
    from ..evaluation import TEACHER_OF

    if name in inputs:
        raise ValueError(f"{name!r} is both an input of this command and the adapter it writes; give "
                         "the output another name (--name, --student)")
    if not teacher and name in {TEACHER_OF.format(d) for d in DOMAINS}:
        raise ValueError(f"{name!r} is a teacher's name: only `mopd-mini teachers` trains teacher_<domain>; "
                         "give the output another name (--name, --student)")
    there = folder / name
    if not (there / "adapter_config.json").exists():
        return
    if not (there / "checkpoint.pt").exists() and not force:
        raise ValueError(f"{there} already holds an adapter that is not a training run of this command "
                         "(no checkpoint.pt: a teacher, a merge or a copied adapter); give the output "
                         "another name, or delete that folder if it is really not needed")
    found = _role(there)
    if role is not None and found is not None and found != role:
        raise ValueError(f"{there} holds {found}, and this command trains {role}; give the output another "
                         "name (--name, --student): the folder is kept as it is")


def prepare(args, experiment: str | None, writes: tuple[str, ...] = (), reads: tuple[str, ...] = (),
            role: str | None = None) -> Path:
    """Everything checked before the base loads: names, the adapters read (in the --from-experiment
    folder), the one written, the device, the model and the run folder. Returns the folder read from."""
    from ..adapters import BASE

    if experiment is not None:
        check_name("--experiment", experiment)
    source = getattr(args, "from_experiment", None) or experiment
    if reads and source is None:
        raise ValueError(f"this command loads {', '.join(reads)} from runs/<experiment>/: give --experiment "
                         "(or --from-experiment) a name")
    if source is not None:
        check_name("--from-experiment", source)
    for name in writes:
        check_name("the output adapter", name, adapter=True)
    folder = _run_folder(source) if source is not None else None
    reads = tuple(r for r in reads if r != BASE)
    missing = [r for r in reads if not (folder / r / "adapter_config.json").exists()]
    if missing:
        raise ValueError(f"no trained {', '.join(missing)} in {folder}/ (found: {_adapters_in(folder) or 'none'}): "
                         f"train them first (`mopd-mini teachers --experiment {source}`, same --runs-dir), or "
                         "check --runs-dir, --experiment and --from-experiment")
    if experiment is not None:
        for name in writes:
            check_output(_run_folder(experiment), name, reads, getattr(args, "force", False), role,
                         teacher=args.command == "teachers")
    check_device(args.device)
    check_model(args.model)
    check_writable(experiment if writes else None)
    return folder


# ---------------------------------------------------------------------------------------------
# the subcommands
# ---------------------------------------------------------------------------------------------


def _bank(args, folder: Path | None = None, names=()):
    """The base of --model on --device, with the adapters `names` loaded from `folder`."""
    from .. import AdapterBank, load_base
    from ..adapters import BASE

    bank = AdapterBank(*load_base(args.model, device=args.device))
    for name in dict.fromkeys(n for n in names if n != BASE):
        bank.load(name, folder / name)
    return bank


def _accuracies(row: dict) -> str:
    return ", ".join(f"{k.removeprefix('acc/')} {v:.2f}" for k, v in row.items() if k.startswith("acc/")) or "-"


def _last_eval(run) -> dict:
    return next((row for row in reversed(run.metrics) if any(k.startswith("acc/") for k in row)), {})


def _report(name: str, run) -> None:
    print(f"{name}: {run.dir or '(in memory)'} | greedy accuracy: {_accuracies(_last_eval(run))}")


def _run_folder(experiment: str) -> Path:
    from .. import runs

    return runs.RUNS_DIR / experiment


def _grpo(args, configs: list) -> int:
    """Train each GRPO config in turn (teachers, Mix-RL, a cascade), its init_from loaded first."""
    from .. import train_teacher

    experiment = configs[0].experiment
    inputs = tuple(c.init_from for c in configs if c.init_from)
    folder = prepare(args, experiment, writes=tuple(c.adapter for c in configs), reads=inputs,
                     role=ROLES["group_size"])
    bank = _bank(args, folder, inputs)
    for cfg in configs:
        _report(cfg.adapter, train_teacher(bank, cfg))
    return 0


def cmd_teachers(args) -> int:
    from .. import DOMAINS, GRPOConfig

    domains = getattr(args, "domain", None) or list(DOMAINS)
    domains = [domains] if isinstance(domains, str) else list(domains)
    if len(domains) > 1 and (getattr(args, "name", None) or getattr(args, "init_from", None)):
        raise ValueError("--name and --init-from name ONE adapter, and teachers trains one adapter per domain "
                         "(teacher_<domain>): give one --domain, or train one adapter on several domains "
                         "with `mopd-mini mix-rl`")
    return _grpo(args, [config_from_args(GRPOConfig, args, args.model, domain=d) for d in domains])


def cmd_mix_rl(args) -> int:
    from .. import DOMAINS, GRPOConfig

    domains = tuple(getattr(args, "domain", None) or DOMAINS)
    if len(domains) < 2:
        raise ValueError(f"Mix-RL trains one adapter on several domains; got --domain {' '.join(domains)}. "
                         "For one domain, train a teacher: `mopd-mini teachers --domain ...`")
    return _grpo(args, [config_from_args(GRPOConfig, args, args.model, domain=domains)])


def _trained_domains(folder: Path, adapter: str) -> tuple[str, ...]:
    """The domains a saved GRPO run trained on, from its config.json (() when unknown)."""
    import json

    try:
        domain = json.loads((folder / adapter / "config.json").read_text()).get("domain", ())
    except (OSError, ValueError, AttributeError):
        return ()
    return (domain,) if isinstance(domain, str) else tuple(domain)


def cmd_cascade(args) -> int:
    """Cascade RL as the course runs it: GRPO on --domain started from --init-from, named
    cascade_<first>_<domain>, with the first stage's domains kept in the evaluation."""
    from .. import GRPOConfig
    from ..evaluation import TEACHER_OF

    source = getattr(args, "from_experiment", None) or GRPOConfig.for_model(
        args.model, **config_values(GRPOConfig, args)).experiment
    first = _trained_domains(_run_folder(source), args.init_from) if source else ()
    domain = args.domain
    tag = "_".join(first) if first else args.init_from.removeprefix(TEACHER_OF.format(""))
    fixed = {"domain": domain}
    if not hasattr(args, "name"):
        fixed["name"] = f"cascade_{tag}_{domain}"
    if not hasattr(args, "eval_domains"):
        fixed["eval_domains"] = tuple(d for d in first if d != domain)
    return _grpo(args, [config_from_args(GRPOConfig, args, args.model, **fixed)])


def cmd_distill(args) -> int:
    from .. import MOPDConfig, train_student

    cfg = config_from_args(MOPDConfig, args, args.model)
    if cfg.experiment is None:
        raise ValueError("distill loads its teachers from runs/<experiment>/: give --experiment a name")
    inputs = (*cfg.route.values(), *([cfg.init_from] if cfg.init_from else []))
    folder = prepare(args, cfg.experiment, writes=(cfg.student,), reads=inputs, role=ROLES["student"])
    run = train_student(_bank(args, folder, inputs), cfg)
    _report(cfg.student, run)
    print(f"next: mopd-mini evaluate --experiment {cfg.experiment}" + (
        f" --runs-dir {args.runs_dir}" if args.runs_dir else ""))
    return 0


def cmd_offline(args) -> int:
    """RFT (loss sft) or soft labels (loss soft): the teachers sample once (cached), the student trains."""
    from .. import OfflineConfig, collect, train_offline

    cfg = config_from_args(OfflineConfig, args, args.model, loss=args.offline_loss)
    inputs = tuple(cfg.route.values())
    folder = prepare(args, cfg.experiment, writes=(cfg.adapter,), reads=inputs, role=ROLES["samples_per_prompt"])
    bank = _bank(args, folder, inputs)
    data = collect(bank, cfg)
    counts = ", ".join(f"{d} {c['correct']}/{c['sampled']}" for d, c in data.counts().items())
    print(f"teachers' samples (correct/sampled): {counts}; training on {len(data.kept(cfg.keep))} ({cfg.keep})")
    _report(cfg.adapter, train_offline(bank, cfg, data))
    return 0


def _weight(text: str) -> tuple[str, float]:
    import math

    name, sep, value = text.partition("=")
    try:
        weight = float(value)
    except ValueError:
        weight = None
    if not sep or not name or weight is None or not math.isfinite(weight):
        raise argparse.ArgumentTypeError(f"{text!r} is not ADAPTER=WEIGHT with a finite number, e.g. "
                                         "teacher_binding=1.0")
    return name, weight


def cmd_merge(args) -> int:
    """Param-Merge: merge.merge on the named adapters, saved as runs/<experiment>/<name>/."""
    import json

    from .. import runs
    from ..adapters import atomic_write

    weights = dict(args.weights)
    if len(weights) < len(args.weights):
        raise ValueError(f"--weights names an adapter twice: {[w for w, _ in args.weights]}")
    if len(weights) < 2:
        raise ValueError(f"merge needs at least two adapters in --weights, got {list(weights)}")
    name = args.name or f"merge_{args.how}"
    for adapter in weights:
        check_name("--weights", adapter, adapter=True)
    folder = prepare(args, args.experiment, writes=(name,), reads=tuple(weights))
    if (runs.RUNS_DIR / args.experiment / name / "checkpoint.pt").exists():
        raise ValueError(f"{runs.RUNS_DIR / args.experiment / name} holds a training run; a merge cannot "
                         "replace it: give the merge another --name")
    from ..merge import merge

    bank = _bank(args, folder, weights)
    merge(bank, name, weights, how=args.how, density=args.density,
          majority_sign_method=args.majority_sign_method, seed=args.seed)
    out = bank.save(name, runs.RUNS_DIR / args.experiment / name)
    record = {"weights": weights, "how": args.how, "density": args.density, "seed": args.seed,
              "majority_sign_method": args.majority_sign_method, "from": str(folder)}
    atomic_write(out / "merge.json", json.dumps(record, indent=1).encode())
    print(f"{name}: {out} | {args.how} of {', '.join(f'{a} x {w:g}' for a, w in weights.items())}")
    return 0


def _adapters_in(folder: Path | None) -> list[str]:
    names = [p.name for p in sorted(folder.iterdir()) if (p / "adapter_config.json").exists()] \
        if folder is not None and folder.is_dir() else []
    return sorted(names, key=lambda n: (not n.startswith("teacher_"), n))


def evaluate_folder(args) -> str:
    """The accuracy table of base + every adapter of runs/<experiment>/, and the normalised score
    of every non-teacher adapter whose domains all have a teacher there."""
    check_name("--experiment", args.experiment)
    if args.n < 1:
        raise ValueError(f"--n (test prompts per domain and length) must be >= 1, got {args.n}")
    folder = _run_folder(args.experiment)
    found = _adapters_in(folder)
    names = args.adapters or found
    absent = sorted(set(names) - set(found))
    if absent or not names:
        raise ValueError(f"no trained adapter {absent or ''} in {folder}/ (found: {found or 'none'}); "
                         "check --runs-dir and --experiment, or train with `mopd-mini teachers` / `distill`")
    check_device(args.device)
    check_model(args.model)
    from .. import BASE, evaluate, format_scores, format_table, normalised_scores
    from ..domains import get_domains
    from ..evaluation import TEACHER_OF

    domains = get_domains(args.domains)   # the course's by default; the regime study's by name
    bank = _bank(args, folder, names)
    table = evaluate(bank, [BASE] + names, domains, n=args.n, seed=args.seed)
    out = [f"{folder}: greedy accuracy on {args.n} test prompts per cell", "", format_table(table)]
    teachers = {d: TEACHER_OF.format(d) for d in domains}
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
    """Hand the rest of the command line to `module.main(argv)` (with prog="mopd-mini <what>" where
    main takes a prog, so its --help and errors name this command)."""
    try:
        target = importlib.import_module(module)
    except ModuleNotFoundError as err:
        if err.name != module:
            raise
        print(f"mopd-mini {what}: this installation has no {module} (the {what} command needs it); "
              "update mopd_mini", file=sys.stderr)
        return 2
    try:
        takes_prog = "prog" in inspect.signature(target.main).parameters
    except (TypeError, ValueError):
        takes_prog = False
    return _exit_code(target.main(argv, prog=f"mopd-mini {what}") if takes_prog else target.main(argv))


# ---------------------------------------------------------------------------------------------
# the parser: the top level names the commands only; a command's flags are built when it runs
# (or shows its --help), so `mopd-mini --help` imports no torch
# ---------------------------------------------------------------------------------------------

DELEGATED = {"course": ("mopd_mini.course", "execute every notebook and time it (python -m mopd_mini.course)"),
             "export": ("mopd_mini.export", "export a run for verl: merged teachers, data, config (mopd_mini.export)")}


def _common(p: argparse.ArgumentParser, reads: bool = False) -> None:
    g = p.add_argument_group("model and run folder")
    g.add_argument("--model", default="tiny", help="the base: tiny (shipped), a Qwen3 hub id or folder, or "
                   "qwen3-1.7b-random; any other than tiny takes the Qwen3 preset [default: tiny]")
    g.add_argument("--device", default=None, help="cpu, cuda, cuda:1 ... [default: CUDA when available]")
    g.add_argument("--runs-dir", default=None, help="the folder holding runs/<experiment>/ [default: runs/ in "
                   "the current folder; the notebooks' runs are notebooks/runs/]")
    if reads:
        g.add_argument("--from-experiment", default=None, metavar="NAME", help="the run folder runs/<NAME>/ "
                       "the input adapters (teachers, --init-from, merge inputs) are loaded from, by name "
                       "[default: --experiment]")


def _teachers_parser(t) -> None:
    from .. import GRPOConfig

    _common(t, reads=True)
    add_config_flags(t, GRPOConfig, overrides={"domain": dict(nargs="+", type=str, metavar="DOMAIN", help=(
        field_docs(GRPOConfig).get("domain", "") + "; teachers trains one teacher per domain given "
        "[default: every domain: binding recall]").replace("%", "%%"))})


def _mix_rl_parser(t) -> None:
    from .. import GRPOConfig

    _common(t, reads=True)
    add_config_flags(t, GRPOConfig, overrides={"domain": dict(nargs="+", type=str, metavar="DOMAIN", help=
        "the domains of the one adapter, P prompts of each in every step [default: every domain: "
        "binding recall]"), "name": dict(help="the adapter's name [default: mixrl]")})


def _cascade_parser(t) -> None:
    from .. import GRPOConfig

    _common(t, reads=True)
    add_config_flags(t, GRPOConfig, overrides={
        "domain": dict(nargs=None, type=str, metavar="DOMAIN", required=True, help="the second stage's domain"),
        "init_from": dict(type=str, metavar="ADAPTER", required=True, help="the first stage: an adapter in "
                          "runs/<from-experiment>/ (e.g. teacher_binding), copied, then trained on --domain"),
        "name": dict(help="the adapter's name [default: cascade_<first domain>_<domain>]"),
        "eval_domains": dict(nargs="*", type=str, metavar="DOMAIN", help="domains evaluated besides --domain "
                             "[default: the first stage's, read from its config.json: the forgetting curve]")})


def _distill_parser(d) -> None:
    from .. import MOPDConfig

    _common(d, reads=True)
    add_config_flags(d, MOPDConfig, overrides={"teachers": dict(metavar="DOMAIN=TEACHER")})


def _offline_parser(loss: str):
    def build(o) -> None:
        from .. import OfflineConfig

        _common(o, reads=True)
        add_config_flags(o, OfflineConfig, skip=("loss",), overrides={"name": dict(
            help=f"the student adapter's name [default: {'rft' if loss == 'sft' else 'soft'}]")})
        o.set_defaults(offline_loss=loss)
    return build


def _merge_parser(m) -> None:
    from ..merge import HOWS
    from ..runs import experiment_name

    _common(m, reads=True)
    g = m.add_argument_group("the merge (mopd_mini.merge.merge)")
    g.add_argument("--weights", nargs="+", type=_weight, required=True, metavar="ADAPTER=WEIGHT",
                   help="the adapters to merge and their weights, at least two, e.g. teacher_binding=1 "
                   "teacher_recall=1")
    g.add_argument("--how", choices=HOWS, default="cat", help="cat: exactly the weighted sum of the updates "
                   "(task arithmetic); linear, ties, dare_ties: peft's factor-wise merges [default: cat]")
    g.add_argument("--density", type=float, default=None, help="ties and dare_ties: the fraction of entries "
                   "each adapter keeps, in (0, 1]")
    g.add_argument("--majority-sign-method", choices=("total", "frequency"), default="total",
                   help="ties: how the sign of an entry is elected [default: total]")
    g.add_argument("--seed", type=int, default=0, help="dare_ties: seeds the random masks [default: 0]")
    g.add_argument("--name", default=None, help="the merged adapter [default: merge_<how>]")
    g.add_argument("--experiment", default=experiment_name("course"), help="the run folder the merge is "
                   f"saved in, runs/<experiment>/<name>/ [default: {experiment_name('course')}]")
    g.add_argument("--force", action="store_true", help="replace an existing merged adapter of that name")


def _evaluate_parser(e) -> None:
    from ..runs import experiment_name

    _common(e)
    g = e.add_argument_group("evaluation")
    g.add_argument("--experiment", default=experiment_name("course"),
                   help=f"the run folder runs/<experiment>/ [default: {experiment_name('course')}]")
    g.add_argument("--adapters", nargs="+", default=None, help="adapters to evaluate [default: every "
                   "adapter in the folder]; the base is always the first row")
    g.add_argument("--n", type=int, default=200, help="test prompts per domain and length [default: 200]")
    g.add_argument("--seed", type=int, default=0, help="seed of the test prompts [default: 0]")
    g.add_argument("--domains", nargs="+", default=None, metavar="DOMAIN", help="the domains evaluated "
                   "[default: the course's, binding and recall; the regime study's: chain, conflict, memory]")


COMMANDS = {  # name: (help, description, builder of its flags, what runs)
    "teachers": ("stage 2: a GRPO teacher per domain (GRPOConfig's fields)",
                 "Train (or resume, or reload when finished) one LoRA teacher per domain with GRPO, into "
                 "runs/<experiment>/teacher_<domain>/.", _teachers_parser, cmd_teachers),
    "mix-rl": ("baseline: ONE adapter trained by GRPO on several domains at once (Mix-RL)",
               "Mix-RL: the GRPO loop of `teachers` on the union of the domains (P prompts of each domain "
               "every step), into runs/<experiment>/mixrl/.", _mix_rl_parser, cmd_mix_rl),
    "cascade": ("baseline: Cascade RL, GRPO on a second domain started from a trained adapter",
                "Cascade RL: copy --init-from (e.g. teacher_binding) and train it by GRPO on --domain, "
                "keeping the first domain in the evaluation (the forgetting curve), into "
                "runs/<experiment>/cascade_<first>_<domain>/.", _cascade_parser, cmd_cascade),
    "distill": ("stage 3: the MOPD student from the teachers (MOPDConfig's fields)",
                "Distil the MOPD student from the teachers saved in runs/<experiment>/ (train them first with "
                "`mopd-mini teachers`), into runs/<experiment>/<student>/. --teachers re-routes domains: "
                "recall=base (the base as the teacher), binding=teacher_binding_r2 (another adapter of the "
                "folder).", _distill_parser, cmd_distill),
    "rft": ("baseline: RFT, SFT on the teachers' correct samples (OfflineConfig's fields)",
            "Rejection-sampled fine-tuning: each teacher samples its domain once (cached in "
            "runs/<experiment>/collect/), the student is trained by cross-entropy on the correct samples, "
            "into runs/<experiment>/rft/.", _offline_parser("sft"), cmd_offline),
    "soft-labels": ("baseline: soft-label distillation on the teachers' samples (OfflineConfig's fields)",
                    "Soft labels: the forward KL from the routed teacher's full distribution, on the same "
                    "teacher samples as rft, into runs/<experiment>/soft/.", _offline_parser("soft"), cmd_offline),
    "merge": ("baseline: Param-Merge, one adapter from the teachers' weights, no training",
              "Merge adapters of runs/<from-experiment>/ with mopd_mini.merge.merge (cat, linear, ties, "
              "dare_ties) and save the result as runs/<experiment>/<name>/ (with merge.json).",
              _merge_parser, cmd_merge),
    "evaluate": ("accuracy table and normalised scores of a run folder's adapters",
                 "Accuracy table and normalised scores of a run folder's adapters.", _evaluate_parser, cmd_evaluate),
    "results": ("the learning results: python -m bench.results in a checkout (its own flags); elsewhere "
                "the table of evaluate", "The table of evaluate (bench.results is not importable here).",
                _evaluate_parser, cmd_evaluate),
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; only `command`'s flags are built (the others are names in the list), so the
    top-level --help needs no config class and no torch."""
    paragraphs = __doc__.strip().split("\n\n")
    p = argparse.ArgumentParser(prog="mopd-mini", description="\n\n".join(paragraphs[:2]),
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="Each command has its own --help.\n\n" + paragraphs[-1])
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (helptext, description, build, run) in COMMANDS.items():
        c = sub.add_parser(name, help=helptext, description=description, add_help=name == command)
        if name == command:
            build(c)
            c.set_defaults(run=run)
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
    args = build_parser(argv[0] if argv and argv[0] in COMMANDS else None).parse_args(argv)
    from .. import runs

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
