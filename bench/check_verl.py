"""Moved: a tool, now tools/check_verl.py. This alias keeps `python bench/check_verl.py EXPORT` and
`python -m bench.check_verl` working (with verl's own Python, where this checkout is not installed)."""

import runpy
from pathlib import Path

if __name__ == "__main__":
    runpy.run_path(str(Path(__file__).resolve().parents[1] / "tools" / "check_verl.py"), run_name="__main__")
