"""The matched-budget study's declarations (docs/matched.md's registration and its amendments): the
plan (`Plan`: the T's, the students' budget, each method's rates around its course-budget choice;
`FULL`, `QUICK`), the methods, the registered family of comparisons and its margins (`COMPARISONS`,
`MARGINS`, `FIVE`), and the re-check's T and reasons (`RECHECK_T`, `RECHECKED`). studies.matched
trains them; studies.matched_page writes the page.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from . import baselines
from .study import LADDER
from .baselines import MERGES

DOCS = Path("docs")
EXPERIMENT = "matched"
RL = ("mixrl", "cascade_br", "cascade_rb")              # trained T steps: the matched RL budget
STUDENTS = ("mopd_pg", "mopd_topk", "mopd_kl")          # trained student_steps from the teachers at T
OFFLINE = ("rft", "soft")                               # their own budget (steps, K) and lr


@dataclass
class Plan:
    """The sweep's budgets and grids (FULL: the pre-registered command; QUICK: the smoke test)."""

    Ts: tuple = (100, 200, 400)           # per-domain GRPO steps of the teachers, Mix-RL and each cascade stage
    per_domain: int = 8                   # prompts per domain per step (online); offline batch = 2x this
    group: int = 8                        # GRPO samples per prompt (the teachers', Mix-RL's, the cascades')
    student_steps: int = 300              # MOPD's budget (the course's)
    lrs: dict = field(default_factory=lambda: dict(LR_CENTRE))
    """each trained method's learning-rate grid: 3 points, x3 apart, around its val choice at the
    course budget (docs/baselines.json); extended by one x3 step past an edge the best sits on
    (at most `extend` times), so every chosen rate is interior or the page says it is not"""
    extend: int = 2
    offline: tuple = ((300, 4), (600, 4), (300, 1))  # RFT / soft labels: (steps, K) searched beside the lrs
    offline_prompts: int = 600            # prompts per domain the teachers sample for RFT / soft labels
    merge_grid: dict = field(default_factory=lambda: baselines.FULL.merge_grid)
    eval_every: int = 50                  # periodic val evaluations: the curves and the cost to reach 95%
    curve_n: int = 100                    # val prompts per domain and length of the periodic evaluations
    val_n: int = 300                      # val prompts per domain and length of the choice (a separate evaluation)
    test_n: int = 500                     # test prompts per domain and length
    target: float = 0.95                  # the fraction of the teachers' lift whose cost is reported
    tie_break: int = 1                    # the second seed for a val choice within one SE

    def protocol(self, T: int) -> baselines.Protocol:
        """studies.baselines' Protocol for the study at T (its Bench trains the teachers at T)."""
        return baselines.Protocol(steps=self.student_steps, per_domain=self.per_domain, lrs=(),
                                  offline_prompts=self.offline_prompts, offline_k=self.offline[0][1],
                                  merge_grid=self.merge_grid, eval_every=self.eval_every, val_n=self.val_n,
                                  teacher_steps=T, curve_n=self.curve_n)


# the course-budget val choices (docs/baselines.json, 300 steps, teachers at 200): each grid's centre
LR_CENTRE = {"mopd_pg": 1e-3, "mopd_topk": 3e-3, "mopd_kl": 3e-3, "mixrl": 1e-3, "cascade_br": 1e-3,
             "cascade_rb": 1e-3, "rft": 1e-3, "soft": 3e-3}


def around(lr: float) -> tuple:
    """The rate and its two neighbours on studies.study's LADDER (1e-3: 3e-4, 1e-3, 3e-3)."""
    i = LADDER.index(lr)
    return LADDER[max(0, i - 1):i + 2]


FULL = Plan(lrs={m: around(lr) for m, lr in LR_CENTRE.items()})
QUICK = Plan(Ts=(2,), per_domain=2, student_steps=2, lrs={m: (1e-3, 3e-3) if m == "rft" else (1e-2,) for m in LR_CENTRE},
             extend=1, offline=((2, 2), (3, 1)), offline_prompts=3, merge_grid=baselines.QUICK.merge_grid, eval_every=1,
             curve_n=4, val_n=4, test_n=6)


# ---------------------------------------------------------------------------------------------
# the registered family of comparisons, its margins, and the methods the page and figure show
# ---------------------------------------------------------------------------------------------


COMPARISONS = (("mopd_kl", "mixrl"), ("mopd_pg", "mixrl"), ("mopd_topk", "mixrl"), ("mopd_kl", "rft"),
               ("mopd_kl", "soft"))
"""the pre-listed comparisons of docs/matched.md's "Multiplicity", at every T: with 3 T, the family of 15
that Holm's correction runs over (on the mean lift, the primary metric)"""
MARGINS: dict = {}
"""equivalence margins registered before a run, {"<a>-<b>@T": delta}: none was, so no comparison here is
called equal (stats.reading: "not resolved", with the differences the interval still allows)"""
FIVE = 5
"""docs/matched.md's rule: a comparison is stated as a finding only from a T run with this many seeds"""

METHODS = STUDENTS + RL + OFFLINE + tuple(f"merge_{h}" for h in MERGES) + ("merge_best",)
FIGURE = STUDENTS + RL + OFFLINE + ("merge_best",)     # the figure's lines (each merge type is in the table)
CRITIQUE = 14.8                                         # the low end of the critique's 14.8-23.1x


# ---------------------------------------------------------------------------------------------
# the re-check of a registered comparison at one T (docs/matched.md, amendment of 2026-12-06): MOPD
# exact KL and the baseline trained again on fresh teachers (its training: studies.matched)
# ---------------------------------------------------------------------------------------------

RECHECK_T = 400                                         # the T the amendment names
RECHECK_EXPERIMENT = "matched-recheck"
"""the re-check's run folder (runs/matched-recheck/): its own, so its teachers are trained by it, never
reloaded from the sweep's folder"""
RECHECKED = {"rft": "in the sweep's run at T = 400 RFT's choice sat on its grid's edge at 3e-3, where the tie-break put "
                    "it before the runner re-bracketed such a choice, and that run kept no hash of its teachers"}
"""`--recheck B`: MOPD exact KL minus B trained again, and why the amendment registered it"""
RECHECK_ESTIMATE = (0.6, 1.3)
"""the re-check's CPU-hours on a quiet machine as registered (docs/matched.md, amendment of 2026-12-06)"""
RECHECK_HEADING = "### Re-check at T ="
