"""The regime study's domains on a model: where it starts (docs/regimes.md, "Starting points").

    python -m mopd_mini.regimes --n 50        # the shipped tiny base, 50 test prompts per length

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
