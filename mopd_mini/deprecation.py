"""Old names kept for one release: the module-level `__getattr__` that gives a renamed or moved name's
new object, with a DeprecationWarning that names the new home, and refuses any other name.

    __getattr__ = deprecation.old_names(__name__, {"train_teacher": "mopd_mini.grpo:train_grpo"})

Every name a release renames or moves is listed this way in the module it used to live in (the
config classes' old paths: `config.old_paths`), so an old notebook or script keeps working, and
says what to write instead, until the next release removes the entry.
"""

from __future__ import annotations

import importlib
import warnings


def old_names(module: str, old: dict[str, str]):
    """`old`: {old name in `module`: "new.module:new_name"}."""
    def __getattr__(name: str):
        if name not in old:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        home, _, new = old[name].partition(":")
        hint = f"import it from {home}" if new == name else f"use {home}.{new}"
        warnings.warn(f"importing {name} from {module} is deprecated and will be removed in the next release: {hint}",
                      DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(home), new)
    return __getattr__
