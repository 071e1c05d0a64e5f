"""Moved: the studies' runner, now studies/study.py (`python -m studies.study`).
This alias keeps `python -m bench.study` working, and `import bench.study` gives that module."""

from bench._moved import alias

alias(__name__, "studies.study")
