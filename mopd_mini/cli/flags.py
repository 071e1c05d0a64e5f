"""Command-line flags from a config dataclass: one `--field-name` per field, parsed by the field's
type, with the string under the field as its help (`add_config_flags`), and the given values back
as the config's types (`config_values`, `config_from_args`).

A field's type gives the flag's parser: str, int, float, a Literal (its values); bool: --flag /
--no-flag; `X | None`: the word `none`; a tuple: several values (`str | tuple[str, ...]`: one value
stays a str); a dict: KEY=VALUE words; an option class such as UCMOPD's GoldenGain: `on` or
name=value,name=value. A flag not given is left out of the namespace, so the preset of --model
(`Config.for_model`) keeps its value; a word the type refuses is argparse's error naming the flag.

Our own small layer rather than tyro (the library considered for it): tyro builds a whole config,
where the presets need the flags given and nothing else; it reads `--teachers binding=x recall=base`
as the dict {"binding=x": "recall=base"} and refuses `none` for None (each would need a custom
constructor); and importing it and building distill's --help takes about twice as long as this layer.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import textwrap
import types
import typing


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
