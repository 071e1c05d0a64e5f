"""The baselines study's declarations (docs/baselines.md's registration and its amendment of
2026-12-06): the protocol (`Protocol`, `FULL`, `QUICK`), the methods and their labels, the paper's
Table 2 beside them, which teachers each method reads (`needs`), and the re-check of the three edge
choices (`RECHECK_*`, `AMENDMENT_EDGES`). studies.baselines trains them; studies.baselines_page
writes the page.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

DOCS = Path("docs")
FIGURES = DOCS / "figures"
EXPERIMENT = "baselines"
DOMAINS = ("binding", "recall")
TRAIN_L = {"binding": (16,), "recall": (16,)}      # evaluated lengths that are also train lengths
HELD_OUT = {"binding": (24, 32), "recall": (24,)}  # never trained on

# the paper's Table 2 (Qwen3-30B-A3B, three domains), where it has the method
PAPER = {"mopd_pg": 0.937, "mopd_topk": 0.909, "mixrl": 0.882, "rft": 0.824, "cascade_br": 0.775,
         "cascade_rb": 0.775, "merge_cat": 0.857, "merge_linear": 0.328}
PAPER_NAME = {"rft": "off-policy FT", "merge_cat": "task arithmetic", "merge_linear": "linear",
              "cascade_br": "Cascade RL", "cascade_rb": "Cascade RL"}
LABEL = {"mopd_pg": "MOPD-PG", "mopd_topk": "MOPD-Top-k", "mopd_kl": "MOPD exact KL", "mixrl": "Mix-RL",
         "cascade_br": "Cascade binding→recall", "cascade_rb": "Cascade recall→binding",
         "rft": "RFT (rejection-sampled SFT)", "soft": "soft-label KD (offline)",
         "merge_linear": "merge linear", "merge_cat": "merge cat (task arithmetic)", "merge_ties": "merge ties",
         "merge_dare_ties": "merge dare_ties", "merge_best": "best merge (chosen on val)"}
TRAINED = ("mopd_pg", "mopd_topk", "mopd_kl", "mixrl", "cascade_br", "cascade_rb", "rft", "soft")
MERGES = ("linear", "cat", "ties", "dare_ties")


@dataclass
class Protocol:
    """Budgets and grids (FULL for the report, QUICK for the smoke test)."""

    steps: int = 300                      # optimizer steps of every trained method (the course's MOPD preset)
    per_domain: int = 8                   # prompts per domain per step (online); offline batch = 2x this
    lrs: tuple = (3e-4, 1e-3, 3e-3)       # the learning-rate grid of every trained method
    offline_prompts: int = 600            # RFT / soft: prompts per domain the teachers sample (x K = MOPD's samples)
    offline_k: int = 4                    # RFT / soft: samples per prompt (K)
    merge_grid: dict = field(default_factory=lambda: {
        "linear": [dict(w=0.5), dict(w=1.0), dict(w=1.5)],
        "cat": [dict(w=0.5), dict(w=1.0), dict(w=1.5)],
        "ties": [dict(w=1.0, density=d) for d in (0.3, 0.6, 0.9)],
        "dare_ties": [dict(w=1.0, density=d) for d in (0.3, 0.6, 0.9)]})
    eval_every: int = 50                  # periodic val evaluations (the curves)
    val_n: int = 100                      # val prompts per domain and length (grid, curves)
    teacher_steps: int | None = None      # None: the chosen teacher config's
    curve_n: int | None = None            # val prompts of the periodic evaluations (None: val_n; studies.matched: fewer)


FULL = Protocol()
QUICK = Protocol(steps=2, per_domain=2, lrs=(1e-3, 3e-3), offline_prompts=3, offline_k=2, eval_every=1, val_n=4,
                 teacher_steps=3, merge_grid={"linear": [dict(w=1.0)], "cat": [dict(w=1.0)],
                                              "ties": [dict(w=1.0, density=0.5)], "dare_ties": [dict(w=1.0, density=0.5)]})


# ---------------------------------------------------------------------------------------------
# the re-check of the three edge choices (this page's amendment of 2026-12-06), registered before it ran
# ---------------------------------------------------------------------------------------------

RECHECK_METHODS = ("mopd_topk", "mopd_kl", "soft")
"""the methods whose val choice sat on the grid's edge (lr 3e-3, the top of FULL.lrs) in the page's run"""
RECHECK_EXPERIMENT = "baselines-recheck"
"""the re-check's run folder (runs/baselines-recheck/): its own, so its teachers are trained by it, never
reloaded from the page's folder"""
RECHECK_SEEDS = (0, 1, 2)
RECHECK_ESTIMATE = (0.5, 1.2)
"""the re-check's CPU-hours as registered (the amendment below, from recorded job wall times)"""
RECHECK_DATE = "2026-12-06"
RECHECK_EXTEND = 2
"""at most this many rates past an edge (`Study.max_extend`): from 3e-3, 1e-2 and 3e-2, the ladder's end"""
RECHECK_KEY = "recheck_edges"
"""the re-check's block in docs/baselines.json (and `--recheck edges`'s records' key in docs/baselines_jobs.json:
recheck-edges)"""
RECHECK_HEADING = "## Re-check of the three edge choices"

AMENDMENT_EDGES = [
    "**Amendment, 2026-12-06: the three edge choices re-checked** (committed before its run, beside the registered "
    "protocol above, which stands as written):", "",
    "* **Why.** The val search chose lr 0.003, the top of the grid, for MOPD-Top-k, MOPD exact KL and soft-label KD "
    "(offline); \"What this setting can and cannot show\" below says their optimum is not bracketed. The run predates "
    "the runner's bracketing (`studies.study.extend_lr`), which today extends a grid whose best sits on its edge.",
    "* **What runs.** `python -m studies.baselines --recheck edges --seeds 0 1 2 --workers 2 --hours H`, in time-boxed "
    "slices (`studies.sliced`): each run one job, recorded in docs/baselines_jobs.json under `recheck-edges`; the "
    "teachers and the val choice's adapters kept in docs/baselines_inputs/. The same command continues on any machine; "
    "`--status` says what is left. Only these three methods train; every other row of this page stands as recorded.",
    "* **Teachers.** Trained fresh by the re-check's set-up job with this page's teacher config (binding and recall "
    "200 GRPO steps at lr 0.001, seed 0, `teacher_headroom.BASELINE_TEACHER`) in its own run folder "
    "(runs/baselines-recheck/, never this page's), their sha256 recorded. This page's run kept no hash of its "
    "teachers, so the two sets are compared by their test accuracies at 500 prompts a length: *the same teachers* "
    "means equal at every length (as the re-count of 2026-12-02 found for this config and seed), anything else "
    "*other teachers*.",
    "* **Grid and bracketing.** Each of the three on this page's grid, lr in {3e-4, 1e-3, 3e-3}, budget fixed (300 "
    "steps of 8 prompts a domain; soft labels K = 4 of 600 prompts a domain), at seed 0, scored on val (100 prompts "
    "a domain and length), by the runner's bracketing: a best on the grid's edge gets the next rate of the ladder "
    "(`studies.study.LADDER`: 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2), again while the best stays on the edge, at most 2 "
    "extensions (`Study.max_extend`), which from 3e-3 is the ladder's end: the grid becomes {3e-4, 1e-3, 3e-3, 1e-2} "
    "and, where 1e-2 is best, 3e-2 too (from a best at 3e-4: 1e-4, the ladder's other end). No tie-break: this "
    "page's protocol chooses on seed 0 alone.",
    "* **Seeds**: 0, 1, 2 at each chosen rate (seed 0's run is the grid's), each tested once on 500 prompts a domain "
    "and length, as above.",
    "* **Metric and decision rule.** The choice is the best mean normalised val score, this page's rule. A method's "
    "choice **moves** when the re-check chooses another rate than this page's 0.003; it is **bracketed** when its "
    "chosen rate has a rate tried on each side; it is **on its hard limit** when its best is still at an end of the "
    "ladder (3e-2 or 1e-4), past which no rate is tried, and the page then says so.",
    "* **What it can change.** Its data is docs/baselines.json's `recheck_edges`; nothing else there changes. Its "
    "section goes on this page after the validation grids: the extended grids, the choices, the teachers against "
    "this page's. Only a complete re-check (seeds 0, 1, 2 recorded) decides; a partial one is shown labelled "
    "partial and changes nothing. Where a choice moves on the same teachers, that method's rows (the table, the "
    "paired differences and their Holm family, the ranking, the figures, the per-seed accuracies, the costs) and "
    "its validation grid are rendered from the re-check's seeds at the new rate, marked so, and the findings cited "
    "from this page (tools/findings.py) read them too; on other teachers its rows stay and the section shows the "
    "re-check's beside them, descriptive. A choice that does not move keeps this page's rows, with the re-check's "
    "at 0.003 beside them, descriptive. The edge sentence below then names each method as bracketed by the "
    "re-check or on its hard limit. Whatever it shows is reported.",
    "* **Compute**, estimated from recorded wall times, not timed afresh (this page's run was not in slices, so "
    "docs/baselines_jobs.json holds none). The sliced re-check at T = 400 (docs/matched_jobs.json, "
    "`T400-recheck-rft`, 2026-12-06, Intel Xeon, 2 cores shared with other jobs) recorded its MOPD exact KL jobs of "
    "the same 300 steps x 8 prompts a domain at 91 to 181 s wall each (process start, model load and every "
    "evaluation included), a test-only job at 17 to 19 s and its set-up (two teachers of 400 steps, twice these) at "
    "183 s. This page's stage seconds put Top-k and soft labels at or below exact KL's (142 and 148 s against 162 "
    "s); soft labels add their teachers' sampling, about 20 s a job (4,800 completions at the 3.8 ms a completion "
    "docs/matched.md's estimate timed). The re-check runs one set-up, 9 to 15 val-choice jobs (the 9 grid runs and "
    "0 to 2 extensions a method), 3 test-only jobs (seed 0's chosen runs) and 6 runs of seeds 1 and 2: 0.55 "
    "CPU-hours at 110 s a run job and no extension, 1.16 at 181 s and every extension, so **0.5 to 1.2 "
    "CPU-hours** on that shared machine (about 0.4 to 0.7 h wall with 2 workers: the set-up runs alone and the val "
    "choice's rounds leave a core idle). Process starts are included, as the recorded jobs include them.",
]
"""registered beside the Protocol (the page's frozen text may only grow by dated amendments)"""


# ---------------------------------------------------------------------------------------------
# which teachers a method reads (the report's numbers: studies.baselines)
# ---------------------------------------------------------------------------------------------


def needs(method: str) -> tuple[str, ...]:
    """The teachers (by domain) a method's pipeline needs before its own stage."""
    if method == "mixrl":
        return ()
    if method.startswith("cascade_"):
        return ("binding" if method == "cascade_br" else "recall",)
    return DOMAINS
