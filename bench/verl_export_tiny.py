"""Moved: a tool, now tools/verl_export_tiny.py (`python -m tools.verl_export_tiny`).
This alias keeps `python -m bench.verl_export_tiny` working, and `import bench.verl_export_tiny` gives that module."""

from bench._moved import alias

alias(__name__, "tools.verl_export_tiny")
