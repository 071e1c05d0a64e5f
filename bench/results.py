"""Moved: a study, now studies/results.py (`python -m studies.results`).
This alias keeps `python -m bench.results` working, and `import bench.results` gives that module."""

from bench._moved import alias

alias(__name__, "studies.results")
