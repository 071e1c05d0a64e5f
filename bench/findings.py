"""Finding sentences rendered from the decisions they cite.

A page (README, docs/instructor.md, a notebook's markdown, a docs page's Reading) states a
comparison only inside a marker:

    <!-- finding: matched/T400/mopd_pg-mixrl -->...the sentence...<!-- /finding -->

and the sentence between the two comments is exactly what `render(id)` makes from the study's
committed JSON: the verb from the registered rule's outcome after the study's correction
(resolved / not resolved with the differences the interval allows / equivalent within a
registered margin; supported / refuted for a hypothesis), the numbers from the JSON, the table's
name with them. Hand-written prose around a marker may explain a mechanism; the result itself is
the rendered part. tests/test_findings.py reads the committed pages and fails when a marked
sentence and its JSON disagree.

    python -m bench.findings            # check every marked sentence of the pages against the JSON
    python -m bench.findings --write    # rewrite them from the JSON (after a re-run)

Ids:
  matched/headline                   the matched study's corrected decisions at the T's run with 5 seeds
  matched/T<T>/<a>-<b>               one comparison of the matched family (a, b: bench.matched's keys)
  regimes/<arm>/<H>[@5]              a registered decision of docs/regimes.md (@5: its 5-seed check)
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from mopd_mini import stats

ROOT = Path(__file__).resolve().parents[1]
MARK = re.compile(r"<!-- finding: (?P<id>[^ ]+) -->(?P<text>.*?)<!-- /finding -->", re.S)
PAGES = ("README.md", "docs/instructor.md", "docs/matched.md", "docs/regimes.md", "docs/ablations.md",
         "docs/baselines.md", "notebooks/*.ipynb", "notebooks/solutions/*.md")


def _label(m: str) -> str:
    from .baselines import LABEL
    return LABEL[m].split(" (")[0]


def comparison_sentence(name: str, p: dict, table: str, m: int | None = None) -> str:
    """One comparison of a family as a sentence: its name, the difference with its 95% interval,
    the Holm-adjusted p over the family of m, the reading after the correction, and the table."""
    uncorrected = (f"; uncorrected p {p['p']:.3f}, resolved only uncorrected" if p.get("resolved")
                   and not p.get("resolved_holm", p.get("resolved")) else "")
    holm = f", p (Holm) {p['p_holm']:.3f} over the family of {m}" if m is not None else ""
    return f"{name}: {stats.interval_text(p)}{holm}, {p['reading']}{uncorrected} ({table})."


# ---------------------------------------------------------------------------------------------
# the matched study
# ---------------------------------------------------------------------------------------------


def _matched(data_dir: Path) -> dict:
    return json.loads((data_dir / "matched.json").read_text())


def matched_pair(rep: dict, T: int, a: str, b: str) -> str:
    from . import matched
    fam = matched.family(rep)
    p = fam[(T, a, b)]
    return comparison_sentence(f"{_label(a)} minus {_label(b)} at T = {T}, mean lift", p,
                               f"docs/matched.md, T = {T} paired table", p["m"])


def matched_headline(rep: dict) -> str:
    """Which of the matched family's comparisons survive Holm's correction, at the T's run with
    the five seeds a stated finding needs (T's with fewer are left out, and said to be)."""
    from . import matched
    fam = matched.family(rep)
    m = next(iter(fam.values()))["m"]
    five = sorted(int(T) for T, v in rep["by_T"].items() if len(v["seeds_done"]) >= matched.FIVE)
    fewer = sorted(int(T) for T, v in rep["by_T"].items() if len(v["seeds_done"]) < matched.FIVE)
    kl = [k for k in fam if k[0] in five and k[1] == "mopd_kl"]
    kl_res = [k for k in kl if fam[k]["resolved_holm"]]
    other = [k for k in fam if k[0] in five and k[1] != "mopd_kl" and fam[k]["resolved_holm"]]
    Ts = " and ".join(map(str, five))
    left = "".join(f"; T = {T} ran {len(rep['by_T'][str(T)]['seeds_done'])} and is in no finding" for T in fewer)
    out = f"at matched RL budgets of {Ts} GRPO steps per domain ({matched.FIVE} seeds each{left}), "
    if kl_res:
        out += "MOPD exact KL is resolved against " + "; ".join(
            f"{_label(b)} at {T} steps ({stats.interval_text(fam[(T, a, b)])}, p (Holm) {fam[(T, a, b)]['p_holm']:.3f})"
            for T, a, b in kl_res)
    else:
        out += ("no comparison of MOPD exact KL with Mix-RL, RFT or soft labels is resolved after Holm's "
                f"correction over the study's {m} registered comparisons")
    if other:
        out += "; the " + ("one comparison that is" if len(other) == 1 else "comparisons that are") + ": " + "; ".join(
            f"{_label(a)} minus {_label(b)} at {T} steps ({stats.interval_text(fam[(T, a, b)])}, p (Holm) "
            f"{fam[(T, a, b)]['p_holm']:.3f})" for T, a, b in other)
    return out


# ---------------------------------------------------------------------------------------------
# the regimes study
# ---------------------------------------------------------------------------------------------


def regimes_decision(data: dict, arm: str, h: str, every: bool) -> str:
    from . import regimes
    a = {str(k): v for k, v in regimes.ARMS.items()}[arm]
    rep = regimes.Report(data, a, seeds=None if every else regimes.REGISTERED)
    decided = regimes.decisions(rep)[1][h]
    fam = regimes.primary_arm2(rep) if a.number == 2 else None
    p = fam[h][0] if fam and h in fam else None
    table = f"docs/regimes.md, arm {arm}'s " + ("5-seed table" if every else "comparison table")
    diff = f"{stats.interval_text(p)} over {p['n']} seeds, " if p is not None else ""
    return f"{h}: {diff}{decided} ({table})."


# ---------------------------------------------------------------------------------------------


def render(fid: str, data_dir: Path | None = None) -> str:
    """The sentence of finding `fid`, from the committed JSON in `data_dir` (docs/ by default)."""
    data_dir = data_dir or ROOT / "docs"
    parts = fid.split("/")
    if parts[0] == "matched":
        rep = _matched(data_dir)
        if parts[1] == "headline":
            return matched_headline(rep)
        a, b = parts[2].split("-")
        return matched_pair(rep, int(parts[1].lstrip("T")), a, b)
    if parts[0] == "regimes":
        data = json.loads((data_dir / "regimes.json").read_text())
        h, _, five = parts[2].partition("@")
        return regimes_decision(data, parts[1], h, bool(five))
    raise KeyError(f"unknown finding id {fid!r}")


def pages(root: Path = ROOT) -> list[Path]:
    return sorted({p for pattern in PAGES for p in root.glob(pattern)})


def texts(path: Path) -> list[str]:
    """The page's text (a notebook: each markdown cell's source)."""
    if path.suffix == ".ipynb":
        return [c["source"] if isinstance(c["source"], str) else "".join(c["source"])
                for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "markdown"]
    return [path.read_text()]


def _norm(text: str) -> str:
    return " ".join(text.split())


def check(root: Path = ROOT, data_dir: Path | None = None) -> list[str]:
    """Every marked sentence of the committed pages against its rendering: the disagreements, as
    'page: id: page says ... / the JSON says ...'."""
    bad = []
    for path in pages(root):
        for text in texts(path):
            for m in MARK.finditer(text):
                try:
                    want = render(m["id"], data_dir)
                except (KeyError, ValueError, IndexError) as e:
                    bad.append(f"{path.relative_to(root)}: {m['id']}: no such finding ({e})")
                    continue
                if _norm(m["text"]) != _norm(want):
                    bad.append(f"{path.relative_to(root)}: {m['id']}:\n  page says: {_norm(m['text'])}\n"
                               f"  the JSON says: {want}")
    return bad


def marked(root: Path = ROOT) -> dict[str, list[str]]:
    """{page: [finding ids]} of every page with a marker."""
    out = {}
    for path in pages(root):
        ids = [m["id"] for text in texts(path) for m in MARK.finditer(text)]
        if ids:
            out[str(path.relative_to(root))] = ids
    return out


def write(root: Path = ROOT, data_dir: Path | None = None) -> list[str]:
    """Rewrite every marked sentence from the JSON; the pages changed."""
    changed = []
    sub = lambda text: MARK.sub(lambda m: f"<!-- finding: {m['id']} -->{render(m['id'], data_dir)}<!-- /finding -->",  # noqa: E731
                                text)
    for path in pages(root):
        if path.suffix == ".ipynb":
            nb = json.loads(path.read_text())
            before = json.dumps(nb)
            for c in nb["cells"]:
                if c["cell_type"] == "markdown" and isinstance(c["source"], str):
                    c["source"] = sub(c["source"])
            if json.dumps(nb) != before:
                path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
                changed.append(str(path))
        else:
            text = path.read_text()
            new = sub(text)
            if new != text:
                path.write_text(new)
                changed.append(str(path))
    return changed


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--write", action="store_true", help="rewrite every marked sentence from the JSON")
    args = p.parse_args(argv)
    if args.write:
        print("\n".join(write()) or "nothing to change")
        return 0
    bad = check()
    print("\n".join(bad) or f"every marked finding agrees with its JSON ({sum(map(len, marked().values()))} markers)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
