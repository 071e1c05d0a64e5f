"""Scoring FactWorld answers, and the binding task's shallow floor.

relaxed  the headline metric and the RL reward: normalise the decoration chat models add
         (markdown emphasis, backticks, punctuation glued to a token), strip one trailing period
         from prediction and gold, split on white space, and compare the prediction's first
         len(gold) tokens with the gold tokens. Trailing chatter after a right answer passes.
strict   the whole answer and the stop: the prediction's tokens, cleaned as in relaxed, are the
         gold's tokens with nothing after them, and it ends with the gold's closing period where
         the gold has one. A right answer that keeps going (`g5 g0 g4. g3`) scores 0 here and 1
         under relaxed. On a chain's worked trace it is the regime study's strict trace
         (strict_trace).
final    the final answer only (a sparse reward on a trace answer): the prediction's LAST token,
         cleaned as in relaxed, equals the gold's last token. What the prediction wrote before
         it (a trace, right or wrong, or nothing) is not graded; trailing words after the answer
         are (they change the last token). trace_steps and chain_steps grade the trace itself.

An example records its own metric (Example.metric); grade(pred, example) applies it.

The shallow floor. A model that only filters the binding events by the queried object, then
guesses uniformly among those w events, scores E[mult(gold) / w] (mult = how many of those events
went to the gold agent). E[1/w] is the lower bound of that family. A binding score at or below
the floor says nothing about state tracking; report the floor beside every binding score.
"""

from __future__ import annotations

import re
from statistics import fmean

METRICS = ("relaxed", "strict", "final")
FLOORS = ("inverse_writes", "filter_guess")
_DECORATION = "*`_\"'"  # markdown emphasis, code ticks and quotes wrapped around a token
_GLUED = ".,;:!?()[]{}"  # punctuation a chat model glues to a token
_EVENT = re.compile(r"s\d+ gives (o\d+) to (g\d+)\.")
_QUESTION = re.compile(r"who is the final holder of (o\d+)\?")
_POINTER = re.compile(r"(g\d+)'s a0 is (g\d+)\.")
_CHAIN_QUESTION = re.compile(r"what is ((?:a0 of )+)(g\d+)\?(?: \((\d+) hops\))?$")


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
    if metric not in METRICS:
        removed = " ('exact', the raw-token match, is gone: 'strict' is the one strict rule)" if metric == "exact" else ""
        raise ValueError(f"unknown metric {metric!r}; valid metrics: {', '.join(METRICS)}{removed}")
    gold_tokens = _tokens(gold, strip_period=True)
    if not gold_tokens:
        raise ValueError(f"empty gold answer {gold!r}: every prediction would match it")
    pred_tokens = _pred_tokens(pred)
    if metric == "final":
        return int(pred_tokens[-1:] == gold_tokens[-1:])
    if metric == "strict":
        stops = pred.strip().endswith(".") or not gold.strip().endswith(".")
        return int(stops and pred_tokens == [t.strip(".") for t in gold_tokens])
    return int(pred_tokens[: len(gold_tokens)] == gold_tokens)


def strict_trace(pred: str, gold: str) -> int:
    """The strict metric on a worked trace (the regime study's primary measure on chain): 1 if the
    prediction is the gold trace through its end: the same tokens (cleaned as in relaxed), nothing
    after them, and the gold's closing period where the gold has one. A right trace that keeps going
    (`g5 g0 g4. g3`) scores 0 here and 1 under relaxed, the prefix match."""
    return score(pred, gold, "strict")


def _pred_tokens(pred: str) -> list[str]:
    return [t for t in (_clean(t) for t in _tokens(pred, strip_period=True)) if t]


def grade(pred: str, example) -> int:
    """1 if `pred` answers a FactWorld example under the example's own metric (Example.metric)."""
    return score(pred, example.answer, example.metric)


def trace_steps(pred: str, gold: str) -> list[int]:
    """Per gold token, 1 if the prediction (cleaned as in relaxed) has it at the same position:
    a trace's per-step accuracy is the mean. For a chain trace `g5 g0 g4.`, position 0 is the
    start (copied from the question) and position i the node after i hops."""
    gold_tokens = _tokens(gold, strip_period=True)
    if not gold_tokens:
        raise ValueError(f"empty gold answer {gold!r}: there are no steps to grade")
    pred_tokens = _pred_tokens(pred)
    return [int(i < len(pred_tokens) and pred_tokens[i] == g) for i, g in enumerate(gold_tokens)]


def parse_chain(prompt: str) -> tuple[dict[str, str], str, int]:
    """A chain prompt's pointers {agent: next agent}, its start agent and its depth (the number of
    `a0 of`; a `(d hops)` annotation, when present, must agree)."""
    body, _, question = prompt.rpartition(" what is ")
    pointers = dict(_POINTER.findall(body))
    match = _CHAIN_QUESTION.fullmatch("what is " + question)
    if not pointers or match is None:
        raise ValueError(f"not a FactWorld chain prompt: {prompt[:80]!r}")
    depth = match.group(1).count("a0 of")
    if match.group(3) is not None and int(match.group(3)) != depth:
        raise ValueError(f"chain prompt says {match.group(3)} hops but nests a0 {depth} times: {prompt[-60:]!r}")
    return pointers, match.group(2), depth


def chain_steps(prompt: str, pred: str) -> list[int]:
    """Per hop of a chain prompt (depth of them), 1 if the prediction's trace takes that hop
    correctly FROM ITS OWN previous node: token i follows the prompt's pointer from token i-1
    (token 0 must be the start). Unlike trace_steps, one wrong node does not fail every later
    hop, so this separates following a pointer from compounding an early error."""
    pointers, start, depth = parse_chain(prompt)
    tokens = _pred_tokens(pred)
    if not tokens or tokens[0] != start:
        tokens = [start] + tokens  # a trace without the start: its first token is hop 1
    return [int(i < len(tokens) and pointers.get(tokens[i - 1]) == tokens[i]) for i in range(1, depth + 1)]


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
