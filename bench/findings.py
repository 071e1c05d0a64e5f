"""Moved: a tool, now tools/findings.py (`python -m tools.findings`).
This alias keeps `python -m bench.findings` working, and `import bench.findings` gives that module."""

from bench._moved import alias

alias(__name__, "tools.findings")
