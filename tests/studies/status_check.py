"""`python -m studies.<name> --status` run as a user runs it (the module as __main__), in a fresh
process: what it printed, and whether torch was loaded (the status must answer from the JSON alone)."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def status_without_torch(module: str, cwd: Path) -> tuple[str, bool]:
    """(stdout of `python -m <module> --status --out docs` in `cwd`, whether it imported torch)."""
    code = (f"import runpy, sys; sys.argv = ['m', '--status', '--out', 'docs']\n"
            f"try: runpy.run_module({module!r}, run_name='__main__')\n"
            "except SystemExit: pass\nprint('torch loaded:', 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=cwd, env={**os.environ, "PYTHONPATH": str(ROOT)},
                         capture_output=True, text=True).stdout
    return out, "torch loaded: True" in out or "torch loaded: False" not in out
