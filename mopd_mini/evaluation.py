"""Evaluation: greedy accuracy by domain and length, the binding floor beside it, and the
paper's normalised score.

    table = evaluate(bank, ["base", "teacher_binding", "teacher_recall", "student"])
    print(format_table(table))
    print(format_scores(normalised_scores(table, student="student")))

Every model is evaluated by the same function on the same test examples: `base` is the bank
with adapters disabled, every other name is an adapter. Accuracy is FactWorld's relaxed match
of the greedy answer (at most 8 new tokens; a domain graded on its final answer, the regime
study's chain, uses factworld's final metric instead), on the test split (`split="val"`: the validation
split, for choosing hyperparameters without touching test).

Normalised score, per domain d (the paper's Table 2):
    s_d = (score(model, d) - score(base, d)) / (score(teacher_d, d) - score(base, d))
0 at the starting checkpoint, 1 at the domain's teacher. score(., d) is the mean accuracy over
d's evaluation lengths. The denominators are printed too: a domain whose teacher barely beats
the base makes the ratio meaningless.
"""

from __future__ import annotations

from statistics import fmean

import factworld

from .adapters import AdapterBank
from .domains import EVAL_SPLITS, Domain, get_domains
from .rollout import generate_answers
from .validate import guarded
from .config import TEACHER_OF  # noqa: F401  (the adapter name of domain d's teacher; kept importable from here)


def accuracy(model, tokenizer, examples, max_new_tokens: int = 8) -> float:
    """Share of examples whose greedy answer matches the gold (each example's metric: relaxed, or
    final for a domain graded on its final answer)."""
    answers = generate_answers(model, tokenizer, [e.prompt for e in examples], max_new_tokens)
    return fmean(factworld.grade(a, e) for a, e in zip(answers, examples))


def accuracy_by_length(model, tokenizer, domains: dict[str, Domain], n: int, split: str = "test") -> dict[str, float]:
    """{"acc/<domain>/L<length>": greedy accuracy} at every evaluation length: the trainers' log
    (on the test split; `split="val"` logs the validation split, keys unchanged)."""
    return {f"acc/{name}/L{L}": accuracy(model, tokenizer, d.examples(split, L, n))
            for name, d in domains.items() for L in d.eval_lengths}


@guarded
def evaluate(bank: AdapterBank, adapters: list[str], domains: dict[str, Domain] | None = None,
             n: int = 200, seed: int = 0, lengths: dict[str, tuple] | None = None,
             split: str = "test") -> dict:
    """{"acc": {adapter: {domain: {length: accuracy}}}, "floor": {length: E[1/w]}, "n": n, "split": split}.
    `split`: "test" (the reported numbers) or "val" (choosing hyperparameters)."""
    if n < 1:
        raise ValueError(f"n (test prompts per domain and length) must be >= 1, got {n}")
    if split not in EVAL_SPLITS:
        raise ValueError(f"unknown split {split!r}; evaluate on one of {EVAL_SPLITS}")
    domains = domains or get_domains()
    tests = {d: {L: dom.examples(split, L, n, seed) for L in (lengths or {}).get(d, dom.eval_lengths)}
             for d, dom in domains.items()}
    acc = {}
    for name in adapters:
        with bank.use(name) as model:
            acc[name] = {d: {L: accuracy(model, bank.tokenizer, exs) for L, exs in by_len.items()}
                         for d, by_len in tests.items()}
    floors = {L: factworld.floor(exs) for L, exs in tests.get("binding", {}).items()}
    return {"acc": acc, "floor": floors, "n": n, "split": split}


def domain_score(table: dict, adapter: str, domain: str, lengths=None) -> float:
    """Mean accuracy of `adapter` over the domain's evaluated lengths (or the given subset)."""
    by_len = table["acc"][adapter][domain]
    return fmean(by_len[L] for L in (lengths or by_len))


@guarded
def normalised_scores(table: dict, student: str = "student", base: str = "base",
                      teachers: dict[str, str] | None = None, lengths: dict | None = None) -> dict:
    """Per domain: the student's, base's and teacher's scores, the denominator and the ratio.
    `lengths` ({domain: (L, ...)}) restricts the scores to some lengths, e.g. the held-out ones."""
    domains = list(table["acc"][student])
    teachers = teachers or {d: TEACHER_OF.format(d) for d in domains}
    out = {}
    for d in domains:
        s, b, t = (domain_score(table, a, d, (lengths or {}).get(d)) for a in (student, base, teachers[d]))
        out[d] = {"model": s, "base": b, "teacher": t, "denominator": t - b,
                  "normalised": (s - b) / (t - b) if abs(t - b) > 1e-9 else float("nan")}
    out["mean"] = fmean(v["normalised"] for v in out.values())
    return out


@guarded
def format_table(table: dict) -> str:
    """Markdown: one row per adapter, one column per (domain, length); binding floor last."""
    adapters = list(table["acc"])
    cols = [(d, L) for d, by_len in table["acc"][adapters[0]].items() for L in by_len]
    lines = ["| model | " + " | ".join(f"{d} L{L}" for d, L in cols) + " |",
             "| --- |" + " --- |" * len(cols)]
    for a in adapters:
        lines.append(f"| {a} | " + " | ".join(f"{table['acc'][a][d][L]:.2f}" for d, L in cols) + " |")
    if table["floor"]:
        lines.append("| binding floor E[1/w] | " + " | ".join(
            f"{table['floor'][L]:.2f}" if d == "binding" else "" for d, L in cols) + " |")
    return "\n".join(lines)


@guarded
def format_scores(scores: dict) -> str:
    lines = ["| domain | base | teacher | denominator | model | normalised |", "| --- | --- | --- | --- | --- | --- |"]
    for d, v in scores.items():
        if d != "mean":
            lines.append(f"| {d} | {v['base']:.2f} | {v['teacher']:.2f} | {v['denominator']:+.2f} | "
                         f"{v['model']:.2f} | {v['normalised']:.2f} |")
    lines.append(f"| mean | | | | | {scores['mean']:.2f} |")
    return "\n".join(lines)


def normalised_curve(metrics: list[dict], table: dict, prompts_per_step: int, base: str = "base",
                     teachers: dict[str, str] | None = None) -> dict:
    """A run's logged accuracies (acc/<domain>/L<length>, every eval_every steps) as normalised
    scores against prompts seen per domain: {"prompts": [...], <domain>: [...], "mean": [...]}.
    `table` holds the base and the teachers, evaluated on the same prompts as the log (evaluate
    with n = the run's eval_n, the same split and seed 0)."""
    domains = [d for d in table["acc"][base] if any(k.startswith(f"acc/{d}/") for r in metrics for k in r)]
    teachers = teachers or {d: TEACHER_OF.format(d) for d in domains}
    out = {"prompts": [], **{d: [] for d in domains}, "mean": []}
    for row in metrics:
        if not all(f"acc/{d}/L{L}" in row for d in domains for L in table["acc"][base][d]):
            continue
        out["prompts"].append(row["step"] * prompts_per_step)
        for d in domains:
            s = fmean(row[f"acc/{d}/L{L}"] for L in table["acc"][base][d])
            b, t = domain_score(table, base, d), domain_score(table, teachers[d], d)
            out[d].append((s - b) / (t - b) if abs(t - b) > 1e-9 else float("nan"))
        out["mean"].append(fmean(out[d][-1] for d in domains))
    return out


def score_error(table: dict, adapter: str, domain: str, lengths=None) -> float:
    """The binomial standard error of `domain_score`: sqrt(sum_L p_L (1 - p_L) / n) / (number of L)."""
    by_len = table["acc"][adapter][domain]
    ps = [by_len[L] for L in (lengths or by_len)]
    return (sum(p * (1 - p) / table["n"] for p in ps)) ** 0.5 / len(ps)


def normalised_error(table: dict, domain: str, student: str = "student", base: str = "base",
                     teacher: str | None = None) -> float:
    """A standard error for the normalised score (s - b) / (t - b), by the delta method from the three
    scores' binomial errors (`score_error`), treated as independent. They are not (the same test
    prompts), so read it as a rough size of the sampling noise at this n, not an exact interval."""
    teacher = teacher or TEACHER_OF.format(domain)
    s, b, t = (domain_score(table, a, domain) for a in (student, base, teacher))
    es, eb, et = (score_error(table, a, domain) for a in (student, base, teacher))
    D = t - b
    return (es ** 2 + ((s - t) / D) ** 2 * eb ** 2 + ((s - b) / D) ** 2 * et ** 2) ** 0.5 / abs(D)


def held_out_lift(table: dict, adapter: str, domain: str, base: str = "base") -> float:
    """`adapter`'s score minus `base`'s on the domain's HELD-OUT lengths only (evaluated, never
    trained on: `Domain.held_out`), the lift that "generalises to lengths it never trained on" means."""
    held = get_domains([domain])[domain].held_out
    if not held:
        raise ValueError(f"domain {domain!r} has no held-out evaluation length")
    return domain_score(table, adapter, domain, held) - domain_score(table, base, domain, held)


def teacher_lift_check(table: dict, domains=("binding", "recall"), base: str = "base", min_lift: float = 0.15) -> dict:
    """Notebook 02's check on the cross table, PER DOMAIN d: d's teacher lifts d above the base by more
    than `min_lift` at the lengths it never trained on (`held_out_lift`), and it scores d higher than
    each other domain's teacher. The lift averaged over ALL evaluated lengths would pass for a teacher
    that lifts only the trained length (02's Summary claims lift "at lengths it never trained on").
    Returns {d: {"own": teacher, "score", "base", "lift" (all lengths), "held_out" (held-out lift),
    "others": {other teacher: its score on d}}}."""
    out = {}
    for d in domains:
        own = TEACHER_OF.format(d)
        others = {TEACHER_OF.format(e): domain_score(table, TEACHER_OF.format(e), d) for e in domains if e != d}
        score, b = domain_score(table, own, d), domain_score(table, base, d)
        out[d] = {"own": own, "score": score, "base": b, "lift": score - b,
                  "held_out": held_out_lift(table, own, d, base), "others": others}
    for d, r in out.items():
        held = ", ".join(f"L{L}" for L in get_domains([d])[d].held_out)
        assert r["held_out"] > min_lift, \
            f"the {d} teacher should beat the base by more than {min_lift:g} at {held}, never trained on: {r['held_out']:+.3f}"
        for other, s in r["others"].items():
            assert r["score"] > s, f"{r['own']} should be the best on {d}: {r['score']:.3f}, {other} {s:.3f}"
    return out


# every public function (and class method) of this module: its annotated arguments checked at a call from outside
# the package (mopd_mini.validate.guard_public); the package's own calls, e.g. the training loop's, skip the checks
from .validate import guard_public  # noqa: E402

guard_public(globals())
