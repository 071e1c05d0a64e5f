"""Moved: a study, now studies/teacher_headroom.py (`python -m studies.teacher_headroom`).
This alias keeps `python -m bench.teacher_headroom` working, and `import bench.teacher_headroom` gives that module."""

from bench._moved import alias

alias(__name__, "studies.teacher_headroom")
