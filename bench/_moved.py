"""The aliases of the modules that left bench/ (the studies to studies/, the tools to tools/): each
bench/<name>.py keeps `python -m bench.<name>`, the command the pages quote, running the module at
its new home, and `import bench.<name>` giving that same module object."""

from __future__ import annotations

import importlib
import runpy
import sys


def alias(name: str, home: str) -> None:
    """Make the alias module `name` stand for `home`: run as a program (`python -m bench.<x>`), run
    `home` as the program (its own `__main__` block, exactly as `python -m <home>`); imported, become
    `home` in sys.modules, so both names are one module (a monkeypatch on one is seen by the other)."""
    if name == "__main__":
        runpy.run_module(home, run_name="__main__", alter_sys=True)
    else:
        sys.modules[name] = importlib.import_module(home)
