"""Moved: a study, now studies/matched.py (`python -m studies.matched`).
This alias keeps `python -m bench.matched` working, and `import bench.matched` gives that module."""

from bench._moved import alias

alias(__name__, "studies.matched")
