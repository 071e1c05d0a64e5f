"""Moved: a tool, now tools/bad_inputs.py (`python -m tools.bad_inputs`).
This alias keeps `python -m bench.bad_inputs` working, and `import bench.bad_inputs` gives that module."""

from bench._moved import alias

alias(__name__, "tools.bad_inputs")
