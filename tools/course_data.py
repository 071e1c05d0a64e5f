"""The course's widget data: mopd_mini/data/evidence.json, trimmed from the committed study JSON.

    python -m tools.course_data            # write it (seconds; reads docs/*.json, trains nothing)
    python -m tools.course_data --check    # exit 1 if the committed file is not what it would write

Notebooks 05b, 06 and 07 draw their widgets from that file (mopd_mini.evidence), and 05b's section 1
its figures (docs/baselines.json trimmed), so an installed package, which has no docs/, has them too. The matched study's comparisons are taken from the
study's own code (studies.matched.family: paired 95% t-intervals, Holm-adjusted over the registered
family), so the widget shows the decisions the page prints; tests/tools/test_course_data.py runs --check.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from mopd_mini import evidence

from studies import matched
from studies.baselines import LABEL, in_use

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
KEPT = ("diff", "half", "lo", "hi", "n", "per_seed", "p", "p_holm", "resolved", "resolved_holm", "alpha_holm",
        "lo_holm", "hi_holm", "reading")


def _round(x):
    if isinstance(x, float):
        return round(x, 6)
    if isinstance(x, list):
        return [_round(v) for v in x]
    if isinstance(x, dict):
        return {k: _round(v) for k, v in x.items()}
    return x


def matched_view(rep: dict) -> dict:
    """Every comparison of the registered family, at every T, as the page reads it."""
    fam = matched.family(rep)
    by_T: dict = {}
    for (T, a, b), c in fam.items():
        by_T.setdefault(str(T), {})[f"{a}-{b}"] = {k: c[k] for k in KEPT}
    names = {x for a, b in matched.COMPARISONS for x in (a, b)}
    return {"by_T": by_T, "m": next(iter(fam.values()))["m"], "five": matched.FIVE,
            "labels": {k: LABEL[k] for k in sorted(names)}, "command": rep["command"], "date": rep["date"]}


def origin_view(rep: dict) -> dict:
    """The origin study's per-step KL to the binding teacher, per seed, loss and origin."""
    seeds = rep["summary"]["origin"]["seeds"]
    curves = {s: {} for s in seeds}
    for s in seeds:
        for run in rep["origin"][s]["runs"].values():
            curves[s].setdefault(run["loss"], {})[run["origin"]] = [r["kl/binding"] for r in run["curve"]]
    return {"seeds": seeds, "curves": curves, "command": rep["command"]}


def regimes_view(rep: dict, arm: str = "2", domain: str = "chain") -> dict:
    """Arm 2's test accuracy and prefix-trace accuracy (the whole trace right as a prefix) by depth, per method and seed (every seed
    run, the 5-seed check's included), with the registered seeds and the held-out depths."""
    v = rep["views"][arm]
    methods = {}
    for key, run in sorted(rep["runs"].items()):
        a, m, s = key.split("|")
        if a != arm or m not in v["methods"]:
            continue
        rows = [r for r in run["test"] if r["domain"] == domain]
        methods.setdefault(m, {"label": v["methods"][m]["label"], "seeds": {}})["seeds"][s] = {
            metric: {str(r["length"]): r[metric] for r in rows} for metric in ("acc", "trace")}
    for m in methods.values():
        m["seeds"] = dict(sorted(m["seeds"].items(), key=lambda kv: int(kv[0])))
    return {"depths": [str(L) for L in v["parts"][domain]["all"]], "held_out": v["parts"][domain]["held-out"],
            "registered": v["seeds"], "methods": {m: methods[m] for m in v["methods"] if m in methods}}


def baselines_for_05b(rep: dict) -> dict:
    """docs/baselines.json trimmed to what notebook 05b's section 1 reads (mopd_mini.views.baselines_view
    and its printout): per method and seed the test scores and the FLOPs, the val curves, the merge
    grid, the denominators and the command, so the section draws where docs/ is absent (a hosted copy).
    A complete re-check's moved rows stand in the page's place, as docs/baselines.md shows them (`in_use`),
    and `recheck_in_use` names them."""
    rep = in_use(rep)
    rows = {m: {s: {"all": {**{d: {"normalised": r["all"][d]["normalised"]} for d in ("binding", "recall")},
                            "mean": r["all"]["mean"]},
                    "stage": {"flops": r["stage"]["flops"]}, "pipeline": {"flops": r["pipeline"]["flops"]}}
                for s, r in per.items()} for m, per in rep["rows"].items()}
    grid = {k: v for k, v in rep.get("grid", {}).items() if k.startswith("merge_")}
    return {"command": rep["command"], "denominators": rep["denominators"], "rows": rows,
            "curves": rep.get("curves", {}), "grid": grid,
            "recheck_in_use": {m: rep["chosen"][m] for m in rep.get("recheck_in_use", ())}}


def make(docs: Path = DOCS) -> dict:
    read = lambda name: json.loads((docs / name).read_text())  # noqa: E731
    return _round({"matched": matched_view(read("matched.json")), "origin": origin_view(read("ablations.json")),
                   "regimes": regimes_view(read("regimes.json")), "baselines": baselines_for_05b(read("baselines.json")),
                   "made_by": evidence.MADE_BY})


def text(view: dict) -> str:
    return json.dumps(view, indent=0, sort_keys=True) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.course_data", description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="exit 1 if the committed file is stale")
    args = p.parse_args(argv)
    new = text(make())
    if args.check:
        old = evidence.VIEW_PATH.read_text() if evidence.VIEW_PATH.exists() else ""
        print("current" if old == new else f"stale: run `{evidence.MADE_BY}`")
        return 0 if old == new else 1
    evidence.VIEW_PATH.write_text(new)
    print(f"wrote {evidence.VIEW_PATH} ({len(new):,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
