"""Moved: a tool, now tools/notebook_soak.py (`python -m tools.notebook_soak`).
This alias keeps `python -m bench.notebook_soak` working, and `import bench.notebook_soak` gives that module."""

from bench._moved import alias

alias(__name__, "tools.notebook_soak")
