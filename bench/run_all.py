"""Moved: a tool, now tools/run_all.py (`python -m tools.run_all`).
This alias keeps `python -m bench.run_all` working, and `import bench.run_all` gives that module."""

from bench._moved import alias

alias(__name__, "tools.run_all")
