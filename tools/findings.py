"""The findings' check: every marked sentence of the pages against its rendering from the JSON,
and every number of the result text against a source it names.

A page (README, docs/instructor.md, a notebook's markdown, a docs page's Reading) states a
comparison only inside a marker, and the sentence between the two comments is exactly what
studies.findings' `render(id)` makes from the study's committed JSON (the ids: its docstring).
Hand-written prose around a marker may explain a mechanism; the result itself is the rendered part.
tests/test_findings.py reads the committed pages and fails when a marked sentence and its JSON disagree.

    python -m tools.findings            # check every marked sentence of the pages against the JSON
    python -m tools.findings --write    # rewrite them from the JSON (after a re-run)
    python -m tools.findings --numbers  # the result text's numbers no source holds, and each page's counts
    python -m tools.findings --ratchet  # freeze those as unreviewed entries of the list (after a prose edit)

The number check (`unheld`, `scan`): every number of a page's result text (`result_text`: README's
results and figure caption, the guide's lectures, misconceptions and projects, every notebook's
markdown, every solutions page, a study page's hand-written Reading), integers and ratios ("3x")
included, is tied to a source it names, at the precision printed: a number of a rendered finding in
its paragraph, a cell of a table row its sentence names (on its page, or a docs page the paragraph
names), a ratio of two numbers its sentence states, a design constant of the configs (a number of
steps, seeds, prompts...; T =, K =, lr), or a phrase of the reviewed list tests/data/number_sources.json
whose source still holds it (another page's passage, a finding rendered from the JSON) or whose reason
says why it is not a result here (a cited paper's value, a registered threshold). A number that names
something (notebook 06, section 2, seed 4, step 300, depth 4) is not read. The same defect in words
(`overclaims`: "bounded by its teacher", "works here", "about as much"...) has its own reviewed list,
tests/data/overclaim_allow.json. The rest of a study page is its registered text, frozen, or rendered
from its JSON, re-rendered byte for byte (tests/studies/test_study_pages.py).

"""

from __future__ import annotations

import argparse
import functools
import json
import re
import sys
from pathlib import Path

from studies.findings import MARK, fill, render, shorten  # noqa: F401  (shorten: read as tools.findings.shorten by its test)

ROOT = Path(__file__).resolve().parents[1]
PAGES = ("README.md", "docs/findings.md", "docs/instructor.md", "docs/matched.md", "docs/regimes.md", "docs/ablations.md",
         "docs/baselines.md", "notebooks/*.ipynb", "notebooks/solutions/*.md")


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
    sub = lambda text: fill(text, data_dir)  # noqa: E731
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


# ---------------------------------------------------------------------------------------------
# the number check: every number of a sentence that states a result is tied to a source it names
# ---------------------------------------------------------------------------------------------

NUMBER = re.compile(r"(?<![\w.,/$])(?P<sign>[+\-−])?(?P<num>\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?(?:e[+-]?\d+)?)"
                    r"(?P<unit>%|x)?(?![\w]|\.\d|,\d{3})")
_STRIP = (re.compile(r"<!--.*?-->", re.S), re.compile(r"```.*?```", re.S), re.compile(r"`[^`]*`"),
          re.compile(r"\]\([^)]*\)"), re.compile(r"https?://\S+"), re.compile(r"^\s*#.*$", re.M),
          re.compile(r"^\s*\|.*$", re.M), re.compile(r"\b\d{4}-\d{2}-\d{2}\b"), re.compile(r"\b\d{1,2}:\d{2}\b"),
          re.compile(r"arXiv \d+\.\d+"), re.compile(r"^\s*\d+\.\s", re.M), re.compile(r"\[\^?\d+\]"),
          re.compile(r"\$\$.*?\$\$", re.S), re.compile(r"\$[^$\n]+\$"), re.compile(r"(?<![\w.])0\d(?:'s)?\b"),
          re.compile(r"(?<![\w.,+\-−])[01](?![\w.%x,]|-\w)"), re.compile(r"\b\d+-(?!step|seed|prompt)[a-z]+"))
IDS = re.compile(r"\b(?:notebooks?|lectures?|sections?|arms?|seeds?|step|depths?|lengths?|positions?|rounds?|"
                 r"stages?|tables?|issues?|tiers?|projects?|figures?|parts?|exercises?|cells?|questions?|chapters?|"
                 r"lines?|columns?|rows?|levels?|pairs?|phases?|items?|Python|torch|version|layers?|heads?|"
                 r"days?|weeks?|sessions?|the\s+\d\d|epochs? of)[\s-]*(?:[\[({]\s*)?\d+[a-z]?"
                 r"(?:(?:\s*(?:,|-|–|and|or|to|&)\s*)\d+[a-z]?)*", re.I)
"""an integer that names something (notebook 06, section 2, arm 1, seed 4, seeds 0-3, step 300, depth 4,
position 3, stage 3, Table 2): an identifier, not a quantity; not read"""
SETTING = re.compile(r"(?:\b(?:T|K|G|k|c|r|n|w)\s*(?:=|∈)|\b(?:rank|lr|alpha|learning rate|batch(?: size)?|"
                     r"temperature|density|lmbda|beta|budgets? of)\s*(?:=|∈|of)?)\s*[{(\[]?\s*"
                     r"(?P<list>[\d.e+\-]+(?:\s*(?:,|and|or)\s*[\d.e+\-]+)*)", re.I)
UNITS = re.compile(r"^\s*(?:(?:GRPO|RL|optimizer|distillation|training|MOPD)\s+)?(?:steps?|seeds?|prompts?|"
                   r"samples?|completions?|rollouts?|workers?|teachers?|domains?|methods?|cures?|"
                   r"learning rates?)\b", re.I)
"""a design constant (300 steps, 5 seeds, 8 prompts, T = 200, lr 1e-3): read from the configs it describes"""
SENTENCE = re.compile(r"(?<=[.!?;])\s+(?=[A-Z*(\[_`])|\n\s*[*-]\s+| ¶ ")


def numbers(text: str) -> list[str]:
    """Every number of a text as printed (sign, digits, % or x kept): decimals, percentages, integers and
    ratios ("3x", "100x"), outside code, link targets, HTML comments, headings, table rows, dates and
    times; an integer glued to a name (L16, Qwen3, H2.1) is not a number."""
    for p in _STRIP:
        text = p.sub(" ", text)
    return [m.group(0) for m in NUMBER.finditer(text)]


def _value(n: str) -> tuple[float, int, bool]:
    """(value, printed decimals, signed) of a printed number; a percentage as printed (17% -> 17)."""
    s = n.replace("−", "-").replace(",", "").rstrip("%x")
    signed = s[0] in "+-"
    body = s.lstrip("+-").split("e")[0]
    return float(s), (len(body.split(".")[1]) if "." in body else 0), signed


def _same(n: str, source: str) -> bool:
    """The printed number n is the source number rounded to n's printed precision (a percentage also
    as a fraction of 1, x100); without a printed sign the sign is not compared."""
    x, d, signed = _value(n)
    try:
        h = _value(source)[0]
    except (ValueError, IndexError):
        return False
    if "e" in n.lower():
        return abs(h - x) <= abs(x) * 1e-9 + 1e-12
    cands = [h] + ([h * 100] if n.endswith("%") and not source.endswith("%") else [])
    for c in cands:
        c, y = (c, x) if signed else (abs(c), abs(x))
        if abs(round(c, d) - y) < 1e-9 or (d == 0 and abs(c - y) < 1e-9):
            return True
    return False


@functools.lru_cache(maxsize=1)
def _config_constants() -> frozenset[float]:
    """The design constants the configs state (mopd_mini/config.py's dataclass defaults; the studies'
    plans, protocols and arms: a field's default, a keyword argument, a module-level constant), read
    from their source (no import, no torch), with the products of two and three of the integers
    (12,800 samples = 200 steps x 8 prompts x 8 samples)."""
    import ast
    vals: set[float] = set()
    for rel in ("mopd_mini/config.py", "studies/matched.py", "studies/matched_plan.py", "studies/matched_page.py",
                "studies/baselines.py", "studies/baselines_plan.py", "studies/baselines_page.py", "studies/cures.py",
                "studies/regimes.py", "studies/regimes_arms.py", "studies/regimes_report.py", "studies/regimes_page.py",
                "studies/regimes_train.py", "studies/ablations.py", "mopd_mini/results_page.py"):
        tree = ast.parse((ROOT / rel).read_text())
        for node in ast.walk(tree):
            found = []
            if isinstance(node, ast.AnnAssign) and node.value is not None:
                found = [node.value]
            elif isinstance(node, ast.keyword):
                found = [node.value]
            elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id.isupper() for t in node.targets):
                found = [node.value]
            elif isinstance(node, ast.FunctionDef):
                found = list(node.args.defaults)
            for f in found:
                for c in ast.walk(f):
                    if isinstance(c, ast.Constant) and type(c.value) in (int, float):
                        vals.add(float(c.value))
    ints = sorted(v for v in vals if v == int(v) and 1 < v <= 1000)
    prods = {a * b for a in ints for b in ints}
    prods |= {a * b * c for a in ints for b in ints for c in ints if a * b * c <= 10**6}
    return frozenset(vals | prods)


def _key(text: str) -> str:
    """A label or a sentence as the row tie compares them: lower case, '-' as a space (MOPD-PG, MOPD PG)."""
    return " ".join(text.lower().replace("-", " ").split())


def _tables(text: str) -> list[tuple[str, list[str]]]:
    """Every table row of a text as (its label: the first cell, markup and brackets dropped, lower case;
    the numbers of its other cells)."""
    out = []
    for line in text.splitlines():
        if line.lstrip().startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            label = _key(re.sub(r"\s*\(.*?\)|[*_`]", "", cells[0]).replace(" from the sft teacher", ""))
            if len(label) >= 4 and not re.fullmatch(r":?-+:?", cells[0]):
                out.append((label, [m.group(0) for c in cells[1:] for m in NUMBER.finditer(c)]))
    return out


def _cited_pages(para: str, root: Path) -> list[Path]:
    """The docs pages a paragraph names (docs/regimes.md, [ablations.md](ablations.md), results.md)."""
    names = dict.fromkeys(re.findall(r"\b([a-z_]+)\.md\b", para))
    return [root / "docs" / f"{n}.md" for n in names if (root / "docs" / f"{n}.md").exists()]


def result_text(path: Path, root: Path = ROOT) -> list[str]:
    """The paragraphs of a page that state results, which the number check reads: README's results section
    and its figure caption; the guide's lecture plan, misconceptions and projects; every markdown cell of a
    notebook (intro, sections, Summary, reading cells); every solutions page; a study page's hand-written
    Reading (the rest of a study page is its registered text, frozen by tests/studies/test_study_pages.py,
    or rendered from its JSON, which the same test re-renders byte for byte)."""
    rel = str(path.relative_to(root))
    if path.suffix == ".ipynb":
        blocks = texts(path)
    elif rel == "README.md":
        text = path.read_text()
        caption = re.findall(r"^!\[[^\n]*\n\n(.*?)(?:\n\n|\Z)", text, re.M | re.S)
        blocks = [_section(text, "## Results on the tiny default"), *caption]
    elif rel == "docs/instructor.md":
        text = path.read_text()
        blocks = [_section(text, h) for h in ("## Lecture plan", "## Misconceptions", "## Ideas for graded projects")]
    elif rel.startswith("notebooks/solutions/") or rel == "docs/findings.md":
        blocks = [path.read_text()]
    elif rel.startswith("docs/"):
        text = path.read_text()
        blocks = [_section(text, h) for h in re.findall(r"^#+ Reading[^\n]*", text, re.M)] + _reading_blocks(text)
    else:
        blocks = []
    return [p for b in blocks for p in re.split(r"\n\s*\n", b) if p.strip() and not p.startswith("**Time:**")]


def _section(text: str, heading: str) -> str:
    """From the heading line to the next heading of the same or a higher level."""
    level = heading.split(" ")[0]
    lines, out, on = text.splitlines(), [], False
    for line in lines:
        if line.startswith(heading):
            on = True
        elif on and line.startswith("#") and len(line.split(" ")[0]) <= len(level):
            break
        if on:
            out.append(line)
    return "\n".join(out)


def _reading_blocks(text: str) -> list[str]:
    """The hand-written Reading paragraphs of a rendered page: from a '**Reading**' paragraph, the
    bullet paragraphs that follow it."""
    out, paras, on = [], re.split(r"\n\s*\n", text), False
    for para in paras:
        if para.startswith("**Reading**"):
            on = True
            out.append(para)
        elif on and para.lstrip().startswith("* "):
            out.append(para)
        else:
            on = False
    return out


def load_sources(path: Path | None = None) -> list[dict]:
    """The reviewed list of numbers tied by hand (tests/data/number_sources.json): each entry a page, a
    phrase of it (the numbers inside it are covered while the phrase stands as written), and either a
    source to compare with (`quote`: a passage of `source`, another page, with the same numbers in the
    same order) or a `reason` it is not a result of this course (a cited paper's value, a threshold
    registered before a run, a figure's cell label)."""
    path = path or ROOT / "tests" / "data" / "number_sources.json"
    return json.loads(path.read_text())["entries"] if path.exists() else []


def _norm_ws(text: str) -> str:
    return " ".join(text.split())


def quantities(text: str) -> list[str]:
    """The numbers of a text that are quantities: `numbers` less those that name something (IDS)."""
    for p in _STRIP:
        text = p.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    ids = [(m.start(), m.end()) for m in IDS.finditer(text)]
    return [m.group(0) for m in NUMBER.finditer(text) if not any(a <= m.start() < b for a, b in ids)]


def check_sources(entries: list[dict], root: Path = ROOT, data_dir: Path | None = None) -> list[str]:
    """Each reviewed entry still holds: a `quote` (a sentence, or table rows) stands on its `source` page
    and holds each of the phrase's numbers at the phrase's precision; a `finding` (an id, or a list of ids) renders from the
    JSON numbers that hold each of the phrase's; an entry with neither names a `reason`."""
    bad = []
    for e in entries:
        mine = quantities(e["phrase"])
        if "quote" in e:
            src = root / e["source"]
            text = _norm_ws("\n".join(texts(src))) if src.exists() else ""
            if _norm_ws(e["quote"]) not in text:
                bad.append(f"{e['page']}: source {e['source']} no longer says {e['quote']!r}")
                continue
            theirs = [m.group(0) for m in NUMBER.finditer(e["quote"])]   # a table row's cells included
            if not mine or not all(any(_same(a, b) for b in theirs) for a in mine):
                bad.append(f"{e['page']}: {e['phrase']!r} does not hold {e['source']}'s {e['quote']!r}")
        elif "finding" in e:
            ids = e["finding"] if isinstance(e["finding"], list) else [e["finding"]]
            try:
                pool = [n for i in ids for n in numbers(render(i, data_dir))]
            except (KeyError, ValueError, IndexError) as err:
                bad.append(f"{e['page']}: {e['phrase']!r}: its finding does not render ({err})")
                continue
            if not mine or not all(any(_same(a, b) for b in pool) for a in mine):
                bad.append(f"{e['page']}: {e['phrase']!r} is not what {', '.join(ids)} renders: {pool}")
        elif not e.get("reason"):
            bad.append(f"{e['page']}: {e['phrase']!r} has neither a source nor a reason")
    return bad


class Scan:
    """What the number check read on one page: every number of its result text, each either tied (how)
    or not (the problem)."""

    def __init__(self, page: str):
        self.page, self.tied, self.listed, self.constants, self.bad = page, 0, 0, 0, []
        self.unreviewed = 0       # of `listed`: covered by a ratchet entry ('unreviewed: ...'), not a review
        self.where = []           # (the paragraph outside its findings, offset, number) of each problem

    @property
    def scanned(self) -> int:
        return self.tied + self.listed + self.constants + len(self.bad)


def scan_page(path: Path, root: Path = ROOT, entries: list[dict] | None = None,
              constants: set | None = None, used: set | None = None) -> Scan:
    """Every number of the page's result text (`result_text`), outside its marked findings (each rendered
    from its JSON and checked by `check`), is tied to a source: a number of a rendered finding in the same
    paragraph; a cell of a table row (on this page, or on a docs page the paragraph names) whose label the
    sentence names; a design constant of the configs (a number followed by steps, seeds, prompts... or after
    T =, K =, lr); or a phrase of the reviewed list (`load_sources`). `used` collects the list's entries that
    covered something."""
    rel = str(path.relative_to(root))
    constants = _config_constants() if constants is None else constants
    mine = [(i, e) for i, e in enumerate(entries or []) if e["page"] == rel]
    out = Scan(rel)
    own_rows = [r for t in texts(path) for r in _tables(t)]
    cited = {}                                            # a cited page's table rows, read once
    for para in result_text(path, root):
        found = [n for m in MARK.finditer(para) for n in numbers(m["text"])]
        outside = MARK.sub(" ¶ ", para)
        for p in _cited_pages(para, root):
            if p not in cited:
                cited[p] = [r for t in texts(p) for r in _tables(t)]
        rows = own_rows + [r for p in _cited_pages(para, root) for r in cited[p]]
        covered = []                                      # spans of the paragraph the reviewed list covers
        for idx, e in mine:
            for m in re.finditer(r"\s+".join(map(re.escape, e["phrase"].split())), outside):
                covered.append((m.start(), m.end(), e.get("reason", "").startswith("unreviewed")))
                if used is not None:
                    used.add(idx)
        stripped = outside
        for p in _STRIP:
            stripped = p.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), stripped)
        ids = [(m.start(), m.end()) for m in IDS.finditer(stripped)]
        settings = [(m.start("list"), m.end("list")) for m in SETTING.finditer(stripped)]
        cuts = [0] + [m.end() for m in SENTENCE.finditer(stripped)] + [len(stripped)]
        flat = outside
        for m in NUMBER.finditer(stripped):
            n, at = m.group(0), m.start()
            inside = lambda spans: any(a <= at < b for a, b, *_ in spans)  # noqa: E731
            if inside(ids):
                continue                                   # an identifier: not a quantity
            x = _value(n)[0]
            if inside(settings) or UNITS.match(stripped[m.end():]):
                if abs(x) in constants:
                    out.constants += 1
                elif inside(covered):
                    out.listed += 1
                    out.unreviewed += all(u for a, b, u in covered if a <= at < b)
                else:
                    out.bad.append(f"{rel}: {n}: a design constant no config states: "
                                   f"...{_norm_ws(flat[max(0, at - 60):at + 40])}...")
                    out.where.append((outside, at, n))
                continue
            kind = lambda c: (c.endswith("x"), "." in c or "e" in c or c.endswith("%"))  # noqa: E731
            # a ratio is held only by a ratio, an integer by an integer, a decimal by a decimal
            if any(kind(f) == kind(n) and _same(n, f) for f in found):
                out.tied += 1
                continue
            k = max(i for i, c in enumerate(cuts) if c <= at)
            sentence = _key(outside[cuts[k]:cuts[min(k + 1, len(cuts) - 1)]])
            if any(label in sentence and any(kind(c) == kind(n) and _same(n, c) for c in cells)
                   for label, cells in rows):
                out.tied += 1
                continue
            if n.endswith("x"):                            # a ratio of two numbers its sentence states
                end = cuts[min(k + 1, len(cuts) - 1)]
                others = [_value(o.group(0))[0] for o in NUMBER.finditer(stripped, cuts[k], end)
                          if o.start() != at and not o.group(0).endswith("x")]
                if any(b and _same(n, repr(a / b)) for a in others for b in others):
                    out.tied += 1
                    continue
            if inside(covered):
                out.listed += 1
                out.unreviewed += all(u for a, b, u in covered if a <= at < b)
                continue
            out.bad.append(f"{rel}: {n}: ...{_norm_ws(flat[max(0, at - 60):at + 40])}...")
            out.where.append((outside, at, n))
    return out


def scan(root: Path = ROOT, entries: list[dict] | None = None, used: set | None = None) -> list[Scan]:
    entries = load_sources() if entries is None else entries
    constants = _config_constants()
    return [scan_page(p, root, entries, constants, used) for p in pages(root)]


def unheld(root: Path = ROOT, entries: list[dict] | None = None) -> list[str]:
    """Every number of a page's result text that no source it names holds and the reviewed list does not
    cover, each as 'page: number: context'; and every reviewed entry whose source no longer holds it."""
    entries = load_sources() if entries is None else entries
    return [b for s in scan(root, entries) for b in s.bad] + check_sources(entries, root)


UNREVIEWED = ("unreviewed: frozen as committed; not yet tied to a source or given a reason. "
              "Any edit of it fails the check; tie it (a finding, a quote) or give its reason, and the list shrinks")


def ratchet(root: Path = ROOT, path: Path | None = None) -> int:
    """Rewrite tests/data/number_sources.json's unreviewed entries from the pages as they stand: the reviewed
    entries (a source, or a reason that is not 'unreviewed: ...') are kept, and every number no source holds
    gets an unreviewed phrase around it. For after a reviewed edit of the pages' prose (`git diff` of the file
    shows what it froze); it is not a review: a number it freezes is not tied to anything. Returns how many
    unreviewed phrases it wrote."""
    path = path or ROOT / "tests" / "data" / "number_sources.json"
    data = json.loads(path.read_text()) if path.exists() else {"entries": []}
    entries = [e for e in data["entries"] if not e.get("reason", "").startswith("unreviewed")]
    added = []
    for s in scan(root, entries):
        spans = {}
        for outside, at, n in s.where:
            a = outside.rfind(" ", 0, max(0, at - 30)) + 1 if at > 30 else 0
            gap = re.search(r"\s", outside[at + len(n) + 12:])
            b = len(outside) if gap is None else at + len(n) + 12 + gap.start()
            spans.setdefault(id(outside), [outside, []])[1].append([a, b])
        for outside, sp in spans.values():
            merged = []
            for a, b in sorted(sp):
                if merged and a <= merged[-1][1]:
                    merged[-1][1] = max(merged[-1][1], b)
                else:
                    merged.append([a, b])
            added += [{"page": s.page, "phrase": " ".join(outside[a:b].split()), "reason": UNREVIEWED} for a, b in merged]
    data["entries"] = entries + added
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    return len(added)


# ---------------------------------------------------------------------------------------------
# the same defect without a number: a result restated in words
# ---------------------------------------------------------------------------------------------

OVERCLAIM = re.compile(r"\b(?:bounded by (?:its|their|the|a) teachers?|capped by (?:its |their |the |a )?teachers?|"
                       r"works here|did not make a worse|(?:did|does|do) no worse|no worse than|about as much|"
                       r"ranking does not turn|(?:did|does|do) as well|as good as|outperform\w*|on par with|"
                       r"beats?|matches its teachers?|the same as (?:its|the) teachers?)\b", re.I)
"""words that state a comparison's outcome without its number or its interval: each needs the rendered
finding instead, or a reason on the reviewed list (tests/data/overclaim_allow.json)"""


def overclaims(root: Path = ROOT, allowed: list[dict] | None = None, used: set | None = None) -> list[str]:
    """Every match of OVERCLAIM in a page's result text (outside its marked findings) that no reviewed entry
    (page, a phrase of it around the words, reason) covers: 'page: words: context'."""
    if allowed is None:
        f = ROOT / "tests" / "data" / "overclaim_allow.json"
        allowed = json.loads(f.read_text())["entries"] if f.exists() else []
    bad = []
    for path in pages(root):
        rel = str(path.relative_to(root))
        mine = [(i, e) for i, e in enumerate(allowed) if e["page"] == rel]
        for para in result_text(path, root):
            outside = MARK.sub(" ¶ ", para)
            covered = []
            for i, e in mine:
                for m in re.finditer(r"\s+".join(map(re.escape, e["phrase"].split())), outside):
                    covered.append((m.start(), m.end()))
                    if used is not None:
                        used.add(i)
            for m in OVERCLAIM.finditer(outside):
                if not any(a <= m.start() < b for a, b in covered):
                    bad.append(f"{rel}: {m.group(0)}: ...{_norm_ws(outside[max(0, m.start() - 80):m.end() + 60])}...")
    return bad


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--write", action="store_true", help="rewrite every marked sentence from the JSON")
    p.add_argument("--numbers", action="store_true", help="list the result text's numbers no source holds and the "
                   "reviewed list (tests/data/number_sources.json) does not cover, then each page's counts")
    p.add_argument("--ratchet", action="store_true", help="freeze the numbers no source holds as unreviewed entries "
                   "of tests/data/number_sources.json (after a reviewed prose edit; not a review)")
    args = p.parse_args(argv)
    if args.ratchet:
        print(f"{ratchet()} unreviewed phrases written to tests/data/number_sources.json")
        return 0
    if args.numbers:
        scans = scan()
        bad = [b for s in scans for b in s.bad] + check_sources(load_sources())
        print("\n".join(bad) or "every number of the result text is tied to a source or on the reviewed list")
        for s in scans:
            print(f"{s.page}: {s.scanned} numbers read, {s.tied} tied to a finding, table or ratio, {s.constants} "
                  f"design constants of the configs, {s.listed - s.unreviewed} on the reviewed list, {s.unreviewed} "
                  f"on its unreviewed ratchet, {len(s.bad)} not held")
        return 1 if bad else 0
    if args.write:
        print("\n".join(write()) or "nothing to change")
        return 0
    bad = check()
    print("\n".join(bad) or f"every marked finding agrees with its JSON ({sum(map(len, marked().values()))} markers)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
