"""README's tree against the files: every file and folder it names exists, it names every
top-level package folder and every module of the library (mopd_mini/, factworld/), and a newcomer
who looks for one of the paper's concepts in it is sent to the file that defines it (one look-up)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIBRARIES = ("mopd_mini", "factworld")


def tree() -> dict[str, set[str]]:
    """{top-level entry: {the names listed under it}} from the README's "## The tree" block: a
    top-level entry starts its line, a name under it is indented by two spaces (deeper lines
    continue a description)."""
    text = (ROOT / "README.md").read_text()
    block = re.search(r"^## The tree\n\n```\n(.*?)^```", text, re.S | re.M).group(1)
    entries, top = {}, None
    for line in block.splitlines():
        if line and not line[0].isspace():
            top = line.split()[0]
            entries[top] = set()
        elif line.startswith("  ") and not line.startswith("   "):
            entries[top].add(line.split()[0])
    return entries


def test_every_name_in_the_tree_exists():
    entries = tree()
    assert len(entries) >= 5
    missing = [top for top in entries if not (ROOT / top).exists()]
    missing += [f"{top}{name}" for top, names in entries.items() for name in names if not (ROOT / top / name).exists()]
    assert missing == []


def test_the_tree_names_every_package_folder_and_library_module():
    entries = tree()
    packages = {f"{d.name}/" for d in ROOT.iterdir() if (d / "__init__.py").is_file()}
    assert {"mopd_mini/", "bench/", "studies/", "tools/"} <= packages
    assert packages - set(entries) == set()
    for library in LIBRARIES:
        modules = {f.name for f in (ROOT / library).glob("*.py") if f.name != "__init__.py"}
        modules |= {f"{d.name}/" for d in (ROOT / library).iterdir() if d.is_dir() and d.name != "__pycache__"}
        assert modules - entries[f"{library}/"] == set(), library


def entries() -> list[tuple[str, str]]:
    """The tree's entries in order, as (path, its name and description in lower case, continuation
    lines joined): what a newcomer reads to find where a concept lives."""
    text = (ROOT / "README.md").read_text()
    block = re.search(r"^## The tree\n\n```\n(.*?)^```", text, re.S | re.M).group(1)
    out, top = [], None
    for line in block.splitlines():
        if line and not line[0].isspace():
            top = line.split()[0]
            out.append([top, line.lower()])
        elif line.startswith("  ") and not line.startswith("   "):
            out.append([top + line.split()[0], line.lower()])
        elif out:
            out[-1][1] += " " + line.strip().lower()
    return [tuple(e) for e in out]


CONCEPTS = {  # the paper's concepts a newcomer looks for: (the word they look for in the tree, what defines it)
    "the chunked exact reverse KL": ("chunked", "reverse_kl"),
    "the PG loss with clipped advantage": ("pg_loss", "pg_loss"),
    "Top-k with its correction": ("topk_reverse_kl", "topk_reverse_kl"),
    "routing in one pass": ("routed", "routed"),
    "adapters on the frozen base": ("adapterbank", "AdapterBank"),
    "the KV-cache sampler": ("kv cache", "sample"),
    "GRPO advantages": ("grpo advantages", "group_advantages"),
    "the MOPD loop": ("mopd trainer", "train_student"),
    "Mix-RL": ("mix-rl", "train_grpo"),
    "RFT": ("rft", "train_offline"),
    "task-arithmetic merge": ("task arithmetic", "merge"),
    "UCMOPD": ("ucmopd", "filters"),
    "the stuck share": ("stuck", "stuck_metrics"),
    "the fkl/jsd cures": ("jsd", "jsd_loss"),
    "the binding generator": ("binding", "_binding"),
    "the strict trace": ("strict trace", "strict_trace"),
    "Holm and paired intervals": ("holm", "holm"),
    "the val choice with bracketing": ("bracketing", "bracketing"),
    "the cost ledger": ("flops", "flops"),
    "the verl export": ("export", "export_verl"),
}


def defines(path: Path, symbol: str) -> bool:
    files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
    pattern = re.compile(rf"^(def|class) {symbol}\b|^{symbol}\s*[:=]", re.M)
    return any(f.suffix == ".py" and pattern.search(f.read_text()) for f in files)


def look_ups(word: str, symbol: str) -> int | None:
    """How many of the tree's entries a newcomer opens to find `symbol`: first those whose NAME has
    `word`, then those whose description has it, in the tree's order; None if none of them defines it."""
    found = [p for p, text in entries() if word in p.lower()]
    found += [p for p, text in entries() if word in text and p not in found]
    for i, path in enumerate(found, 1):
        if defines(ROOT / path, symbol):
            return i
    return None


def test_each_concept_of_the_paper_is_one_look_up_from_the_tree():
    counts = {concept: look_ups(word, symbol) for concept, (word, symbol) in CONCEPTS.items()}
    assert {c: n for c, n in counts.items() if n != 1} == {}
