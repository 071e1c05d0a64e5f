"""Every config checked by its own type annotations, before any work.

    validate(cfg)      # every config's check() calls it first; the CLI's configs pass through check()

The rules, read from `dataclasses.fields()` and `typing.get_type_hints()` of the config's class, so
a field added later is covered by its annotation alone:

    int                   an int (numpy's too, stored as an int); a bool is not an int (True is
                          not a step count), nor is 64.0
    float                 a finite int or float (numpy's too; stored as a float); not a bool, not
                          nan or inf
    str, bool             exactly that type
    X | None              None, or an X (None only where the annotation says so)
    tuple[X, ...]         a tuple or a list of X (a list is stored as a tuple); never a bare str
    tuple[X, Y]           exactly that many items, each of its type
    dict[K, V]            a dict of K to V
    Literal[a, b]         one of the values
    a dataclass           an instance of that class (not a dict, not True), itself validated
    domains               a field named `domain`, `domains` or `*_domains` holds known domain
                          names (`domains.get_domains`), each at most once

Each error is a ValueError naming the class, the field, the value and what the field accepts.
The ranges (steps >= 1, lr > 0, ...) stay in each config's check(), after this: a comparison
there then never meets a str.

Our own module rather than pydantic's dataclasses: pydantic is no dependency of the course and
would be one more for ~100 lines; the configs stay plain dataclasses (asdict, replace, the CLI's
flags from the same annotations); and pydantic's lax mode coerces "10" to 10 and 2.0 to 2, which
is what we refuse.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import types
import typing

_NONE = type(None)


def _is_domain_field(name: str) -> bool:
    return name in ("domain", "domains") or name.endswith("_domains")


def accepts(tp) -> str:
    """What a value of annotation `tp` may be, in words."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        words = [accepts(a) for a in args if a is not _NONE]
        return " or ".join(words + (["None"] if _NONE in args else []))
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return f"a tuple whose items are each {accepts(args[0])} (a list is accepted)"
        return f"a tuple of {len(args)}: ({', '.join(accepts(a) for a in args)})"
    if origin is dict:
        return f"a dict of {accepts(args[0])} to {accepts(args[1])}"
    if origin is typing.Literal:
        return "one of " + ", ".join(map(repr, args))
    if tp is int:
        return "an int (not a bool, not a float)"
    if tp is float:
        return "a finite float (an int is accepted; not nan or inf, not a bool)"
    if tp is bool:
        return "a bool (True or False)"
    if tp is str:
        return "a str"
    if dataclasses.is_dataclass(tp):
        return f"an instance of {tp.__name__}"
    return getattr(tp, "__name__", str(tp))


class _Refused(Exception):
    """The value does not fit the annotation (the caller names the field)."""


def conform(value, tp):
    """`value` as annotation `tp` stores it (a list as a tuple, an int as a float), or _Refused."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and _NONE in args:
            return None
        for a in args:
            if a is _NONE:
                continue
            try:
                return conform(value, a)
            except _Refused:
                pass
        raise _Refused
    if origin is tuple:
        if not isinstance(value, (tuple, list)):  # a str is a sequence of letters, never a tuple here
            raise _Refused
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(conform(v, args[0]) for v in value)
        if len(value) != len(args):
            raise _Refused
        return tuple(conform(v, a) for v, a in zip(value, args))
    if origin is dict:
        if not isinstance(value, dict):
            raise _Refused
        return {conform(k, args[0]): conform(v, args[1]) for k, v in value.items()}
    if origin is typing.Literal:
        if value not in args:
            raise _Refused
        return value
    if tp is float:  # numbers.Real: numpy's floats and ints too
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
            raise _Refused
        return float(value)
    if tp is int:  # numbers.Integral: numpy's ints too, stored as a Python int
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise _Refused
        return value if type(value) is int else int(value)
    if tp in (str, bool) or dataclasses.is_dataclass(tp):
        if not isinstance(value, tp):
            raise _Refused
        if dataclasses.is_dataclass(tp):
            validate(value)
        return value
    if isinstance(tp, type) and not isinstance(value, tp):
        raise _Refused
    return value  # an annotation this module has no rule for (none of the configs has one)


def _fix(cls_name: str, name: str, value, tp) -> str:
    """A hint for the common mistakes: one domain as a str, a nested config as a dict or a bool."""
    union = typing.get_origin(tp) in (typing.Union, types.UnionType)
    inner = [a for a in (typing.get_args(tp) if union else (tp,)) if a is not _NONE]
    if isinstance(value, str) and any(typing.get_origin(a) is tuple for a in inner):
        return f"; for one item give a tuple: {name}=({value!r},)"
    option = next((a for a in inner if dataclasses.is_dataclass(a)), None)
    if option is not None:
        example = (f"{option.__name__}(**{value!r})" if isinstance(value, dict) else f"{option.__name__}()")
        return f"; e.g. {name}={example}" + (" or None (off)" if _NONE in typing.get_args(tp) else "")
    return ""


def validate(cfg) -> None:
    """Check every field of the dataclass `cfg` against its annotation, in place (lists become
    tuples, ints become floats where a float is asked); a ValueError naming the first field that
    does not fit, its value and what it accepts."""
    cls = type(cfg)
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cfg):
        value, tp = getattr(cfg, f.name), hints[f.name]
        try:
            stored = conform(value, tp)
        except _Refused:
            raise ValueError(f"{cls.__name__}.{f.name}={value!r} is not {accepts(tp)}"
                             f"{_fix(cls.__name__, f.name, value, tp)}") from None
        if _is_domain_field(f.name) and stored is not None:
            _check_domains(cls.__name__, f.name, stored)
        if stored is not value:
            object.__setattr__(cfg, f.name, stored)  # frozen dataclasses too


def _check_domains(cls_name: str, name: str, value) -> None:
    from .domains import get_domains

    names = (value,) if isinstance(value, str) else tuple(value)
    repeated = sorted({d for d in names if names.count(d) > 1})
    if repeated:
        raise ValueError(f"{cls_name}.{name}={value!r} names {repeated} more than once; each domain once "
                         f"(a repeat would train its prompts twice a step but export them once), e.g. "
                         f"{name}={tuple(dict.fromkeys(names))!r}")
    if names or name != "eval_domains":
        try:
            get_domains(names)
        except ValueError as err:
            raise ValueError(f"{cls_name}.{name}={value!r}: {err}") from None
