"""The colours of the figures: one per model of the course (the base, each teacher, the student),
any other line the next of matplotlib's tab10 by its position. The course's plots (mopd_mini.plots)
and the figures of study results (mopd_mini.views) draw with the same ones."""

from __future__ import annotations

import matplotlib.pyplot as plt

COLORS = {"base": "#7f7f7f", "teacher_binding": "#1f77b4", "teacher_recall": "#ff7f0e", "student": "#2ca02c"}


def color(name: str, i: int) -> str:
    """The colour of model `name`, or the i-th of tab10 for a name without its own."""
    return COLORS.get(name, plt.get_cmap("tab10")(i % 10))
