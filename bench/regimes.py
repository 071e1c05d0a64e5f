"""Moved: a study, now studies/regimes.py (`python -m studies.regimes`).
This alias keeps `python -m bench.regimes` working, and `import bench.regimes` gives that module."""

from bench._moved import alias

alias(__name__, "studies.regimes")
