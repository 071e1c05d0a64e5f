"""Moved: a study, now studies/ablations.py (`python -m studies.ablations`).
This alias keeps `python -m bench.ablations` working, and `import bench.ablations` gives that module."""

from bench._moved import alias

alias(__name__, "studies.ablations")
