"""Every config, and every public function's arguments, checked by their own type annotations,
before any work.

    validate(cfg)      # every config's check() calls it first; the CLI's configs pass through check()
    @guarded           # a public function: its annotated arguments, at each call from outside the package

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
                          where every field of it has a rule (a config, an option, a Domain)
    domains               a field named `domain`, `domains` or `*_domains` holds known domain
                          names (`domains.get_domains`), each at most once (a rule by the name,
                          `name_rule`, that mopd_mini.domains adds)

Each error is a ValueError naming the class, the field, the value and what the field accepts.
The ranges (steps >= 1, lr > 0, ...) stay in each config's check(), after this: a comparison
there then never meets a str.

The same rules guard the library's public functions (`guarded`, `guard_public`): a call from outside
the package has each annotated argument checked against its annotation before the function runs,
a ValueError naming the function, the argument, the value and what it accepts. Only annotations
made of the rules above (and list[X]: a list or a tuple of X; a bare tuple, list or dict; a Path:
a str or an os.PathLike) are checked; an argument annotated otherwise (a Tensor, a torch.device, a
bank) is the function's own business. A call from inside the package (`mopd_mini.*`, e.g. the training loop's `sample` every
step) skips the checks: its values come from a validated config or argument, so the loop pays one
frame lookup per call, not the validation. A value is checked, never changed: the function gets
the caller's object (a dict it fills stays that dict).

    guarded(fn)              # a decorator: the __all__ functions, AdapterBank's methods
    guard_public(globals())  # at a module's end: every public function and class method of it
                             # (lab, widgets, losses, cost)
    check_value(where, name, value, tp)   # one value, e.g. a command-line flag (mopd_mini.cli)

A rule by a field's name (the domains: `name_rule`) is registered by the module that knows the
names (mopd_mini.domains), so this module imports nothing of the package.

Our own module rather than pydantic's dataclasses: pydantic is no dependency of the course and
would be one more for ~100 lines; the configs stay plain dataclasses (asdict, replace, the CLI's
flags from the same annotations); and pydantic's lax mode coerces "10" to 10 and 2.0 to 2, which
is what we refuse.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import numbers
import os
import pathlib
import sys
import types
import typing

_NONE = type(None)
PACKAGE = __name__.rpartition(".")[0]
"""the package whose own calls skip the checks (mopd_mini)"""
INSIDE = PACKAGE + "."

NAME_RULES: list = []
"""(applies(name) -> bool, check(label, name, value)): rules by a field's or argument's name, added
by the module that knows the names (`name_rule`; mopd_mini.domains adds the domains')"""


def name_rule(applies, check) -> None:
    """Check every field or argument whose name `applies` with `check(label, name, value)` (after
    its type), where `label` names it ("MOPDConfig.domains", "evaluation.evaluate: domains")."""
    if (applies, check) not in NAME_RULES:
        NAME_RULES.append((applies, check))


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
    if origin is list:
        return f"a list whose items are each {accepts(args[0])} (a tuple is accepted)"
    if origin is dict:
        return f"a dict of {accepts(args[0])} to {accepts(args[1])}"
    if tp in BARE:
        return BARE[tp]
    if _is_path(tp):
        return "a path (a str or an os.PathLike)"
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


BARE = {tuple: "a tuple (a list is accepted)", list: "a list (a tuple is accepted)", dict: "a dict"}
"""containers annotated without their items' type"""


def has_rule(tp) -> bool:
    """Whether every part of annotation `tp` is one this module has a rule for (int, float, bool,
    str, None, a Literal, a dataclass, and tuples, lists and dicts of them): only such an argument
    of a guarded function is checked."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType, tuple, list, dict):
        return all(a is Ellipsis or has_rule(a) for a in args)
    if origin is typing.Literal:
        return True
    return tp in (int, float, bool, str, _NONE, *BARE) or _is_path(tp) or (isinstance(tp, type)
                                                                        and dataclasses.is_dataclass(tp))


def _is_path(tp) -> bool:
    return isinstance(tp, type) and (issubclass(tp, pathlib.PurePath) or tp is os.PathLike)


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
    if origin is list:
        if not isinstance(value, (tuple, list)):
            raise _Refused
        return [conform(v, args[0]) for v in value]
    if origin is dict:
        if not isinstance(value, dict):
            raise _Refused
        return {conform(k, args[0]): conform(v, args[1]) for k, v in value.items()}
    if tp in (tuple, list):
        if not isinstance(value, (tuple, list)):
            raise _Refused
        return value
    if _is_path(tp):  # a path argument: the str of one too (the function makes the Path)
        if not isinstance(value, (str, os.PathLike)):
            raise _Refused
        return value
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
        if dataclasses.is_dataclass(tp) and _all_rules(tp):  # a config or an option; not e.g. a Rollout of tensors
            validate(value)
        return value
    if isinstance(tp, type) and not isinstance(value, tp):
        raise _Refused
    return value  # an annotation this module has no rule for (none of the configs has one)


@functools.lru_cache(maxsize=None)
def _all_rules(cls) -> bool:
    """Whether every field of the dataclass `cls` has a rule (a config, an option, a Domain): only
    such a dataclass, as a value of a field or an argument, is validated field by field."""
    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # an annotation that does not resolve: no rule
        return False
    return all(has_rule(hints.get(f.name)) for f in dataclasses.fields(cls))


def _fix(cls_name: str, name: str, value, tp) -> str:
    """A hint for the common mistakes: one domain as a str, a nested config as a dict or a bool."""
    union = typing.get_origin(tp) in (typing.Union, types.UnionType)
    inner = [a for a in (typing.get_args(tp) if union else (tp,)) if a is not _NONE]
    if isinstance(value, str) and any(typing.get_origin(a) in (tuple, list) or a in (tuple, list) for a in inner):
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
        if stored is not None:
            _name_rules(f"{cls.__name__}.{f.name}", f.name, stored)
        if stored is not value:
            object.__setattr__(cfg, f.name, stored)  # frozen dataclasses too


def _name_rules(label: str, name: str, value) -> None:
    for applies, check in NAME_RULES:
        if applies(name):
            check(label, name, value)


# ---------------------------------------------------------------------------------------------
# the same rules at the public functions
# ---------------------------------------------------------------------------------------------


def _show(value) -> str:
    """repr(value), cut to a line: an argument may be a list of a thousand rows."""
    text = repr(value)
    return text if len(text) <= 120 else f"{text[:100]}... ({type(value).__name__} of {len(text)} characters)"


def check_value(where: str, name: str, value, tp, label: str | None = None):
    """`value` checked against annotation `tp` as a field's would be (its type, then the rules by
    `name`); the value as the rules store it, or a ValueError "<where>: <name>=<value> is not <what
    it accepts>". `where` names the function; `label` replaces "<where>: <name>" (a command-line
    flag: "--domains")."""
    label = label or f"{where}: {name}"
    try:
        stored = conform(value, tp)
    except _Refused:
        raise ValueError(f"{label}={_show(value)} is not {accepts(tp)}{_fix(where, name, value, tp)}") from None
    if stored is not None:
        _name_rules(label, name, stored)
    return stored


def _hints(fn) -> dict:
    """The parameters' annotations of `fn`, resolved; one that does not resolve is left out (no rule)."""
    try:
        hints = typing.get_type_hints(fn)
    except Exception:
        hints = {}
        for name, tp in getattr(fn, "__annotations__", {}).items():
            try:
                hints[name] = typing.get_type_hints(types.SimpleNamespace(__annotations__={name: tp}),
                                                    globalns=inspect.unwrap(fn).__globals__)[name]
            except Exception:
                pass
    hints.pop("return", None)
    return hints


def _rules_of(fn, sig: inspect.Signature) -> dict:
    """{parameter: (kind, annotation)} of the parameters that have a rule."""
    hints = _hints(fn)
    return {name: (p.kind, hints[name]) for name, p in sig.parameters.items()
            if name in hints and has_rule(hints[name])}


def check_call(fn, *args, **kwargs) -> None:
    """Check a call of `fn` (guarded or not) against its annotations without making it: for a caller
    that must refuse before its work, e.g. the command line before the base loads."""
    fn = inspect.unwrap(fn)
    sig = inspect.signature(fn)
    _check_bound(_where(fn), _rules_of(fn, sig), sig.bind_partial(*args, **kwargs).arguments)


def _where(fn) -> str:
    module = fn.__module__ or ""
    return f"{module.removeprefix(PACKAGE + '.') if module != PACKAGE else module}.{fn.__qualname__}"


def _check_bound(where: str, rules: dict, arguments: dict) -> None:
    for name, value in arguments.items():
        rule = rules.get(name)
        if rule is None:
            continue
        kind, tp = rule
        if kind is inspect.Parameter.VAR_POSITIONAL:
            for i, item in enumerate(value):
                check_value(where, f"{name}[{i}]", item, tp)
        elif kind is inspect.Parameter.VAR_KEYWORD:
            for key, item in value.items():
                check_value(where, key, item, tp)
        else:
            check_value(where, name, value, tp)


def guarded(fn):
    """`fn`, its annotated arguments checked by the configs' rules at each call from outside the
    package, before it runs (`check_value`: a ValueError naming the function, the argument, the value
    and what it accepts). A call from inside the package runs `fn` at once (see the module's
    docstring). The caller's objects are passed on unchanged; a call that does not bind (a
    missing or unknown argument) is left to Python's own TypeError."""
    if getattr(fn, "__guarded__", False):
        return fn
    sig = inspect.signature(fn)
    where, rules = _where(fn), None

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        nonlocal rules
        caller = sys._getframe(1).f_globals.get("__name__", "")  # inline: the loop's calls pay this alone
        if caller != PACKAGE and not caller.startswith(INSIDE):
            if rules is None:  # resolved at the first call: every name the annotations use exists by then
                rules = _rules_of(fn, sig)
            try:
                arguments = sig.bind(*args, **kwargs).arguments
            except TypeError:
                return fn(*args, **kwargs)
            _check_bound(where, rules, arguments)
        return fn(*args, **kwargs)

    wrapper.__guarded__ = True
    return wrapper


def guarded_methods(cls):
    """A class decorator: `guarded` on each public method defined in `cls`, and on its __init__
    (a dataclass's checks itself: `validate` in __post_init__); not properties, not other dunders.
    Returns `cls`."""
    for name, member in list(vars(cls).items()):
        if name.startswith("_") and (name != "__init__" or dataclasses.is_dataclass(cls)):
            continue
        if isinstance(member, (staticmethod, classmethod)):
            setattr(cls, name, type(member)(guarded(member.__func__)))
        elif inspect.isfunction(member):
            setattr(cls, name, guarded(member))
    return cls


def guard_public(namespace: dict) -> list[str]:
    """`guarded` on every public function of the module whose globals() `namespace` is (those
    defined there, not imported), and `guarded_methods` on its public classes; call it at the
    module's end. Returns the names guarded."""
    module, done = namespace["__name__"], []
    for name, obj in list(namespace.items()):
        if name.startswith("_") or getattr(obj, "__module__", None) != module:
            continue
        if inspect.isfunction(obj):
            namespace[name] = guarded(obj)
            done.append(name)
        elif inspect.isclass(obj) and not dataclasses.is_dataclass(obj):
            guarded_methods(obj)
            done.append(name)
    return done


def is_guarded(fn) -> bool:
    """Whether `fn` (a function or a method) is `guarded`."""
    return getattr(fn, "__guarded__", False)
