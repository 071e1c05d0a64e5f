"""Scoring FactWorld answers, and the binding task's shallow floor.

relaxed  the headline metric and the RL reward: normalise the decoration chat models add
         (markdown emphasis, backticks, punctuation glued to a token), strip one trailing period
         from prediction and gold, split on white space, and compare the prediction's first
         len(gold) tokens with the gold tokens. Trailing chatter after a right answer passes.
exact    a diagnostic: the prediction, split on white space, equals the gold token for token.

The shallow floor. A model that only filters the binding events by the queried object, then
guesses uniformly among those w events, scores E[mult(gold) / w] (mult = how many of those events
went to the gold agent). E[1/w] is the lower bound of that family. A binding score at or below
the floor says nothing about state tracking; report the floor beside every binding score.
"""

from __future__ import annotations

import re
from statistics import fmean

METRICS = ("relaxed", "exact")
FLOORS = ("inverse_writes", "filter_guess")
_DECORATION = "*`_\"'"  # markdown emphasis, code ticks and quotes wrapped around a token
_GLUED = ".,;:!?()[]{}"  # punctuation a chat model glues to a token
_EVENT = re.compile(r"s\d+ gives (o\d+) to (g\d+)\.")
_QUESTION = re.compile(r"who is the final holder of (o\d+)\?")


def _tokens(text: str, strip_period: bool) -> list[str]:
    text = text.strip()
    if strip_period and text.endswith("."):
        text = text[:-1]
    return text.split()


def _clean(token: str) -> str:
    """`**g3**,` -> `g3`; keeps inner characters (`g5's` stays `g5's`)."""
    return token.strip(_DECORATION + _GLUED).strip(_DECORATION)


def score(pred: str, gold: str, metric: str = "relaxed") -> int:
    """1 if `pred` answers `gold` under `metric`, else 0."""
    if metric == "exact":
        return int(pred.split() == gold.split())
    if metric != "relaxed":
        raise ValueError(f"unknown metric {metric!r}; valid metrics: {', '.join(METRICS)}")
    gold_tokens = _tokens(gold, strip_period=True)
    if not gold_tokens:
        raise ValueError(f"empty gold answer {gold!r}: every prediction would match it")
    pred_tokens = [t for t in (_clean(t) for t in _tokens(pred, strip_period=True)) if t]
    return int(pred_tokens[: len(gold_tokens)] == gold_tokens)


def parse_binding(prompt: str) -> tuple[list[tuple[str, str]], str]:
    """A binding prompt's events [(object, recipient), ...] and its queried object."""
    events = _EVENT.findall(prompt)
    question = _QUESTION.search(prompt)
    if not events or question is None:
        raise ValueError(f"not a FactWorld binding prompt: {prompt[:80]!r}")
    return events, question.group(1)


def floor_of(prompt: str, gold: str, kind: str = "inverse_writes") -> float:
    """One example's floor: 1/w (`inverse_writes`) or mult(gold)/w (`filter_guess`)."""
    events, queried = parse_binding(prompt)
    holders = [agent for obj, agent in events if obj == queried]  # the w candidate answers
    if kind == "inverse_writes":
        return 1 / len(holders)
    if kind == "filter_guess":
        return holders.count(gold.rstrip(".").split()[-1]) / len(holders)
    raise ValueError(f"unknown floor {kind!r}; valid floors: {', '.join(FLOORS)}")


def floor(examples, kind: str = "inverse_writes") -> float:
    """The binding shallow floor of a set of examples: E[1/w] by default, or E[mult/w]."""
    examples = [e for e in examples if e.task == "binding"]
    if not examples:
        raise ValueError("floor() needs at least one binding example (recall has no shallow floor)")
    return fmean(floor_of(e.prompt, e.answer, kind) for e in examples)
