"""The regime study's domains on a model: where it starts (docs/regimes.md, "Starting points").

    python -m mopd_mini.starting_points --n 50      # the shipped tiny base, 50 test prompts per length

For every regime domain (domains.REGIME_DOMAINS) and evaluation length: the greedy accuracy under
the domain's own metric (chain: the final answer only), and what the answers say besides:
chain   trace: the whole worked trace right as a PREFIX (relaxed: a right trace that keeps going
        passes); strict: the completion is the gold trace through its end (factworld.strict_trace:
        over-running is wrong); steps: the trace's per-step accuracy
        (factworld.trace_steps, position by position); hops: each written hop follows the
        prompt's pointer from the node written before it (factworld.chain_steps); words: mean
        answer length in words (a one-word answer writes no trace).
conflict map: share answering the memorised map's value (the in-weights answer, always wrong).
memory  copy: share answering a value stated in the context (always wrong: the context never
        names the queried agent).
"""

from __future__ import annotations

import argparse
import re
from statistics import fmean

import factworld

from .domains import REGIME_DOMAINS
from .rollout import generate_answers

_VALUE = re.compile(r"'s a0 is (v\d+)\.")
_QUERIED = re.compile(r"what is a0 of g(\d+)\?$")


def _words(answer: str) -> list[str]:
    return answer.replace(".", " ").split()


def starting_points(model, tokenizer, n: int = 50, seed: int = 0, split: str = "test",
                    domains: dict | None = None) -> list[dict]:
    """One row per (domain, length): {"domain", "length", "acc", and the diagnostics above}."""
    if n < 1:
        raise ValueError(f"n (prompts per domain and length) must be >= 1, got {n}")
    rows = []
    for name, d in (domains or REGIME_DOMAINS).items():
        for L in d.eval_lengths:
            exs = d.examples(split, L, n, seed)
            answers = generate_answers(model, tokenizer, [e.prompt for e in exs], max_new_tokens=8)
            row = {"domain": name, "length": L, "n": n, "acc": fmean(factworld.grade(a, e) for a, e in zip(answers, exs))}
            if name == "chain":
                row["trace"] = fmean(factworld.score(a, e.answer) for a, e in zip(answers, exs))
                row["strict"] = fmean(factworld.strict_trace(a, e.answer) for a, e in zip(answers, exs))
                row["steps"] = fmean(fmean(factworld.trace_steps(a, e.answer)) for a, e in zip(answers, exs))
                row["hops"] = fmean(fmean(factworld.chain_steps(e.prompt, a)) for a, e in zip(answers, exs))
                row["words"] = fmean(len(_words(a)) for a in answers)
            elif name == "conflict":
                k = factworld.resolve_knobs(name, L, **d.knobs)
                memorised = factworld.param_map(k["map_agents"], k["map_values"], k["map_seed"])
                said = [f"v{memorised[int(_QUERIED.search(e.prompt).group(1))]}." for e in exs]
                row["map"] = fmean(factworld.score(a, s) for a, s in zip(answers, said))
            elif name == "memory":
                row["copy"] = fmean(any(factworld.score(a, v + ".") for v in _VALUE.findall(e.prompt))
                                    for a, e in zip(answers, exs))
            rows.append(row)
    return rows


def depth_view(rows: dict[str, list[dict]], key: str = "acc", title: str = "") -> dict:
    """Several models' `starting_points` rows ({label: rows}) as the view `views.regime_depth`
    draws (the same dict shape studies.regimes stores for the 3-seed study), for `key` by length."""
    domains = list(dict.fromkeys(r["domain"] for rs in rows.values() for r in rs))
    return {"arm": title, "domains": domains, "seeds": [],
            "parts": {d: {"held-out": list(REGIME_DOMAINS[d].held_out)} for d in domains},
            "methods": {m: {"label": m, "by_length": {d: {str(r["length"]): r[key] for r in rs if r["domain"] == d}
                                                      for d in domains}} for m, rs in rows.items()}}


HEADERS = {"trace": "prefix trace", "strict": "strict trace"}
"""format_rows' column names where the key alone would mislead: `trace` is the relaxed (prefix) match
of the whole trace, which a right trace that keeps going passes; `strict` also requires the stop"""


def format_rows(rows: list[dict]) -> str:
    keys = ["acc", "trace", "strict", "steps", "hops", "words", "map", "copy"]
    lines = ["| domain | length | n | " + " | ".join(HEADERS.get(k, k) for k in keys) + " |",
             "| --- | --- | --- |" + " --- |" * len(keys)]
    for r in rows:
        cells = [f"{r[k]:.2f}" if k in r else "" for k in keys]
        lines.append(f"| {r['domain']} | {r['length']} | {r['n']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)



# ---------------------------------------------------------------------------------------------
# 07 section 1: what each grade of a chain answer sees, and the chance line of section 3
# ---------------------------------------------------------------------------------------------


def chain_chance(example) -> float:
    """The chance level of a chain answer's final node: a guess among the prompt's nodes other than
    the start, 1 / (nodes - 1) (docs/regimes.md's chance column: 0.20 over the six nodes g0-g5)."""
    nodes = set(re.findall(r"g\d+", example.prompt))
    return 1 / (len(nodes) - 1)


def trace_answers(example) -> dict[str, str]:
    """Four answers to one chain example, built from its gold trace: "right" (the gold), "wrong
    middle" (the first hop replaced by g9, the end kept), "just the end" (the final node alone) and
    "over-running" (the right trace, then one more node: it never stops)."""
    gold = example.answer.rstrip(".").split()
    return {"right": example.answer, "wrong middle": " ".join([gold[0], "g9", *gold[2:]]) + ".",
            "just the end": gold[-1] + ".", "over-running": example.answer + " " + gold[0]}


def grade_answers(example, answers: dict | None = None, reward=None, prefix=None, strict=None) -> dict[str, dict]:
    """{name: {"answer", "reward", "prefix", "strict", "steps"}} for `answers` (default
    `trace_answers(example)`): the outcome reward (factworld.grade, the last node), the prefix trace
    (factworld.score on the gold trace: the relaxed match, which a right trace that keeps going
    passes), the strict trace (factworld.strict_trace: the gold and then the stop) and the per-step
    accuracy. `reward(answer, example)`, `prefix(answer, gold)` and `strict(answer, gold)` replace
    the graders (the tests pass wrong ones)."""
    reward, prefix, strict = reward or factworld.grade, prefix or factworld.score, strict or factworld.strict_trace
    answers = trace_answers(example) if answers is None else answers
    return {name: {"answer": a, "reward": reward(a, example), "prefix": prefix(a, example.answer),
                   "strict": strict(a, example.answer), "steps": factworld.trace_steps(a, example.answer)}
            for name, a in answers.items()}


def grading_checks(graded: dict[str, dict]) -> None:
    """Notebook 07 section 1's asserts on `grade_answers`' output: the right trace scores 1 on all
    three; the over-running one scores reward 0, prefix trace 1, strict trace 0 (the prefix trace
    passes a trace that never stops); the wrong middle gets the full reward and prefix 0 (the outcome
    reward cannot see it); the end alone gets the full reward. Raises an AssertionError naming the
    relation that fails."""
    def grades(name):
        return tuple(graded[name][k] for k in ("reward", "prefix", "strict"))
    assert grades("right") == (1, 1, 1), f"the gold trace scores 1 on every grade: {grades('right')}"
    assert grades("over-running") == (0, 1, 0), \
        f"the prefix trace passes a trace that never stops, the reward and the strict trace do not: {grades('over-running')}"
    assert graded["wrong middle"]["reward"] == 1 and graded["wrong middle"]["prefix"] == 0, \
        f"the outcome reward cannot see a wrong intermediate node: {grades('wrong middle')}"
    assert graded["just the end"]["reward"] == 1, "nor a missing trace: the reward pays for the end alone"


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=50, help="test prompts per domain and length [default: 50]")
    p.add_argument("--base", default="tiny", help="the base model: tiny (shipped) or tiny-other [default: tiny]")
    args = p.parse_args(argv)
    from .models import load_base

    model, tokenizer = load_base(args.base)
    print(format_rows(starting_points(model, tokenizer, args.n)))


# every public function (and class method) of this module: its annotated arguments checked at a call from outside
# the package (mopd_mini.validate.guard_public); the package's own calls, e.g. the training loop's, skip the checks
from .validate import guard_public  # noqa: E402

guard_public(globals())


if __name__ == "__main__":
    main()
