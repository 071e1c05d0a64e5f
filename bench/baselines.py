"""Moved: a study, now studies/baselines.py (`python -m studies.baselines`).
This alias keeps `python -m bench.baselines` working, and `import bench.baselines` gives that module."""

from bench._moved import alias

alias(__name__, "studies.baselines")
