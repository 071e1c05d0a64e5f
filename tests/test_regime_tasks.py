"""Tests for the regime study's FactWorld tasks (factworld/regime_tasks.py): chain, conflict, memory.

Text compatibility is checked against examples the ORIGINAL generator printed: ianbarber/factworld
at commit b8fd246 (factworld/tasks.py), run as
    generate(CANONICAL["chain_v2"].scaled(worked_trace=True), "train", n=3)   # and "test", length=4 / 5
    generate(CANONICAL["conflict_v1"], "train", n=6); generate(..., "test", n=3, length=4)
    _param_map(CANONICAL["conflict_v1"], world)
and copied below verbatim (prompt, answer, and the meta fields named). The original draws with its
own RNG, so its examples are not ours; what must agree is the text: every sentence template, the
question, the answer and trace forms, and the memorised map itself.

The answer key of our own examples is re-derived here from the prompt text with this file's own
regexes and the original's printed map, never with factworld's parsers.

The last section checks what the course's side makes of these tasks: the tiny tokenizer covers
the registered regime domains, a chain completion earns its reward on the final answer, and the
GRPO trainer runs a step on each. The domains' registration is tested in tests/test_domains.py,
mopd_mini.starting_points' in tests/test_starting_points.py.
"""

from __future__ import annotations

import dataclasses
import math
import random
import re
from collections import Counter

import pytest

import factworld
from mopd_mini.domains import DOMAINS, REGIME_DOMAINS, get_domains

# --- what the original generator printed ---------------------------------------------------------

ORIGINAL_CHAIN = [  # (prompt, answer, meta["trace"]) of chain_v2 with worked_trace=True
    ("g4's a0 is g1. g2's a0 is g5. g1's a0 is g3. g0's a0 is g4. g3's a0 is g2. g5's a0 is g0. "
     "what is a0 of a0 of g5? (2 hops)", "g4.", "g5 g0"),
    ("g3's a0 is g5. g5's a0 is g0. g4's a0 is g2. g2's a0 is g1. g1's a0 is g3. g0's a0 is g4. "
     "what is a0 of a0 of a0 of g0? (3 hops)", "g1.", "g0 g4 g2"),
    ("g4's a0 is g2. g1's a0 is g0. g3's a0 is g1. g0's a0 is g4. g5's a0 is g3. g2's a0 is g5. "
     "what is a0 of a0 of a0 of a0 of g2? (4 hops)", "g0.", "g2 g5 g3 g1"),
    ("g1's a0 is g3. g3's a0 is g0. g4's a0 is g5. g5's a0 is g1. g2's a0 is g4. g0's a0 is g2. "
     "what is a0 of a0 of a0 of a0 of a0 of g2? (5 hops)", "g0.", "g2 g4 g5 g1 g3"),
]
ORIGINAL_CONFLICT = [  # (prompt, answer, meta["param_value"]) of conflict_v1's conflict examples
    ("g0's a0 is v62. g6's a0 is v54. what is a0 of g0?", "v62.", "v18"),
    ("g9's a0 is v15. g5's a0 is v44. g2's a0 is v36. what is a0 of g9?", "v15.", "v1"),
    ("g10's a0 is v7. g2's a0 is v55. what is a0 of g2?", "v55.", "v8"),
    ("g1's a0 is v46. g12's a0 is v59. g4's a0 is v14. g3's a0 is v47. what is a0 of g12?", "v59.", "v26"),
    ("g3's a0 is v20. g0's a0 is v0. g2's a0 is v39. g10's a0 is v62. what is a0 of g3?", "v20.", "v37"),
]
ORIGINAL_REINFORCE = ["g0 a0 v18.", "g1 a0 v43.", "g2 a0 v8."]  # conflict_v1's train split, prompt ""
ORIGINAL_MAP = {0: 18, 1: 43, 2: 8, 3: 37, 4: 34, 5: 54, 6: 9, 7: 55, 8: 6, 9: 1, 10: 22, 11: 32, 12: 26,
                13: 35, 14: 47, 15: 13}  # _param_map of conflict_v1 (seed 0): g0 -> v18, ...

# --- this file's own reader of the text ------------------------------------------------------------

NUM = r"(0|[1-9][0-9]*)"
POINTER = re.compile(rf"g{NUM}'s a0 is g{NUM}\.")
FACT = re.compile(rf"g{NUM}'s a0 is v{NUM}\.")
CHAIN_Q = re.compile(rf"what is ((?:a0 of )+)g{NUM}\?( \(([1-9][0-9]*) hops\))?")
RECALL_Q = re.compile(rf"what is a0 of g{NUM}\?")


def split_prompt(prompt: str) -> tuple[list[str], str]:
    """(statements, question): single spaces, statements end in `.`, the question starts at `what`."""
    assert "  " not in prompt and prompt == prompt.strip(), prompt
    body, _, question = prompt.partition("what is ")
    statements = re.findall(r"[^ .][^.]*\.", body)
    assert " ".join(statements) + (" " if statements else "") == body, prompt
    return statements, "what is " + question


def read_chain(prompt: str):
    """-> (pointer {agent: agent}, start, depth, annotated depth or None), asserting the templates."""
    statements, question = split_prompt(prompt)
    pointer = {}
    for s in statements:
        m = POINTER.fullmatch(s)
        assert m, f"not a chain fact: {s!r}"
        pointer[int(m.group(1))] = int(m.group(2))
    assert len(pointer) == len(statements), "an agent stated twice"
    m = CHAIN_Q.fullmatch(question)
    assert m, f"not a chain question: {question!r}"
    return pointer, int(m.group(2)), m.group(1).count("a0 of"), (int(m.group(4)) if m.group(4) else None)


def read_facts(prompt: str):
    """-> ([(agent, value)], queried agent) of a conflict or memory prompt."""
    statements, question = split_prompt(prompt)
    facts = []
    for s in statements:
        m = FACT.fullmatch(s)
        assert m, f"not a fact: {s!r}"
        facts.append((int(m.group(1)), int(m.group(2))))
    m = RECALL_Q.fullmatch(question)
    assert m, f"not a recall question: {question!r}"
    return facts, int(m.group(1))


def chain_path(prompt: str) -> list[int]:
    pointer, start, depth, _ = read_chain(prompt)
    path = [start]
    for _ in range(depth):
        path.append(pointer[path[-1]])
    return path


def template(prompt: str) -> str:
    """The text with every entity index blanked: what two generators must share."""
    return re.sub(r"\b([gv])\d+", r"\1#", prompt)


def chi2_ok(counts: Counter, support) -> bool:
    """Pearson's chi-square against uniform below the p ~ 5e-4 critical value (Wilson-Hilferty)."""
    support = list(support)
    total, df = sum(counts.values()), len(support) - 1
    stat = sum((counts.get(k, 0) - total / len(support)) ** 2 / (total / len(support)) for k in support)
    return stat < df * (1 - 2 / (9 * df) + 3.29 * math.sqrt(2 / (9 * df))) ** 3


# ---------------------------------------------------------------------------------------------
# 1. the original's own examples
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("prompt,answer,trace", ORIGINAL_CHAIN)
def test_original_chain_examples_read_as_ours(prompt, answer, trace):
    """The original's chain_v2 text: this file's reader finds its answer and its worked trace (the
    path before the answer); factworld's parser agrees; our generator writes the same template at
    that depth; our trace gold is the original's trace followed by its answer."""
    path = [f"g{a}" for a in chain_path(prompt)]
    assert path[-1] + "." == answer and " ".join(path[:-1]) == trace
    pointers, start, depth = factworld.parse_chain(prompt)
    assert (start, depth) == (path[0], len(path) - 1) and len(pointers) == 6
    ours = factworld.generate("chain", "train", n=1, length=depth, answer_style="trace")[0]
    assert template(ours.prompt) == template(prompt)
    assert template(ours.answer) == template(f"{trace} {answer}")
    gold = f"{trace} {answer}"
    assert factworld.score(gold, gold, "final") == factworld.score(answer, gold, "final") == 1


@pytest.mark.parametrize("prompt,answer,param", ORIGINAL_CONFLICT)
def test_original_conflict_examples_read_as_ours(prompt, answer, param):
    """The original's conflict_v1 text: the answer is the queried agent's stated value, the map's
    value it contradicts is our param_map's, and our generator writes the same template."""
    facts, queried = read_facts(prompt)
    (stated,) = [v for g, v in facts if g == queried]
    assert f"v{stated}." == answer
    assert f"v{factworld.param_map()[queried]}" == param != answer[:-1]
    ours = factworld.generate("conflict", "train", n=1, length=len(facts))[0]
    assert template(ours.prompt) == template(prompt) and template(ours.answer) == template(answer)
    memory = factworld.generate("memory", "train", n=1, length=len(facts))[0]
    assert template(memory.prompt) == template(prompt), "memory shares conflict's surface"


def test_the_memorised_map_and_the_reinforce_examples_are_the_originals():
    """param_map's default is the original's map, entry for entry; reinforce() writes the original's
    reinforce examples exactly (empty prompt, `g0 a0 v18.`); the original's train protocol (n // 2
    reinforce, then conflict examples at the train lengths cycled) is conflict_train_mix."""
    assert factworld.param_map() == ORIGINAL_MAP
    assert [(e.prompt, e.answer) for e in factworld.reinforce(3)] == [("", a) for a in ORIGINAL_REINFORCE]
    assert [e.answer for e in factworld.reinforce(18)][16:] == ORIGINAL_REINFORCE[:2]  # agents cycle
    mix = factworld.conflict_train_mix(6)
    assert [e.prompt for e in mix[:3]] == ["", "", ""] and [e.length for e in mix[3:]] == [2, 3, 2]
    assert all(e.task == "conflict" and e.split == "train" for e in mix[3:])
    assert factworld.param_map(map_seed=1) != ORIGINAL_MAP
    assert factworld.param_map(8, 64) == {a: ORIGINAL_MAP[a] for a in range(8)}


# ---------------------------------------------------------------------------------------------
# 2. our generator: answer keys, structure, distributions
# ---------------------------------------------------------------------------------------------

SPLITS_STYLES = [(s, st) for s in factworld.SPLITS for st in factworld.ANSWER_STYLES]


def corpus(task, lengths, n=40, **knobs):
    return [e for L in lengths for i, (split, style) in enumerate(SPLITS_STYLES)
            for e in factworld.generate(task, split, n=n, length=L, seed=i % 3, answer_style=style, **knobs)]


@pytest.mark.parametrize("knobs", [{}, {"hop_count": 0}, {"cycle": 9}])
def test_chain_answer_key_and_structure(knobs):
    """Gold = the node `depth` pointers on (trace: the whole path); the facts state ONE cycle over all
    `cycle` agents (no fixed point, no shorter cycle); the hop annotation is there iff hop_count=1."""
    cycle = knobs.get("cycle", 6)
    for e in corpus("chain", range(1, min(cycle, 8)), **knobs):
        pointer, start, depth, annotated = read_chain(e.prompt)
        assert depth == e.length and annotated == (None if knobs.get("hop_count") == 0 else depth)
        assert sorted(pointer) == sorted(pointer.values()) == list(range(cycle))
        a, seen = start, []
        while a not in seen:
            seen.append(a)
            a = pointer[a]
        assert len(seen) == cycle, "not a single cycle"
        path = [f"g{a}" for a in chain_path(e.prompt)]
        assert len(set(path)) == len(path), "the path revisits a node: depth >= cycle"
        assert e.answer == (" ".join(path) if e.answer_style == "trace" else path[-1]) + "."
        assert e.answer_token == path[-1]


def test_chain_is_scrambled_and_its_start_uniform():
    """The start is uniform over the agents, and the facts are not in cycle order (the fact that
    follows the start's fact is its pointer's no more than chance: 1/5 of the next positions)."""
    exs = factworld.generate("chain", "train", n=1500, length=3, seed=1)
    starts = Counter(read_chain(e.prompt)[1] for e in exs)
    assert chi2_ok(starts, range(6)), starts
    adjacent = 0
    for e in exs:
        statements, _ = split_prompt(e.prompt)
        subjects = [int(POINTER.fullmatch(s).group(1)) for s in statements]
        pointer = read_chain(e.prompt)[0]
        adjacent += sum(subjects[i + 1] == pointer[subjects[i]] for i in range(5))
    rate = adjacent / (5 * len(exs))
    assert abs(rate - 1 / 5) < 5 * math.sqrt(0.2 * 0.8 / (5 * len(exs))), rate


def test_conflict_answer_key_and_structure():
    """Gold = the queried agent's stated value, which is never the map's; `length` facts about
    distinct agents inside the map; the queried fact's position is uniform (no recency cue)."""
    positions = Counter()
    for e in corpus("conflict", (1, 2, 3, 5, 16)):
        facts, queried = read_facts(e.prompt)
        agents = [g for g, _ in facts]
        assert len(facts) == e.length and len(set(agents)) == len(agents) and max(agents) < 16
        assert all(v < 64 for _, v in facts)
        (stated,) = [v for g, v in facts if g == queried]
        assert stated != ORIGINAL_MAP[queried]
        gold = f"g{queried}'s a0 is v{stated}" if e.answer_style == "trace" else f"v{stated}"
        assert e.answer == gold + "."
        if e.length == 5:
            positions[agents.index(queried)] += 1
    assert chi2_ok(positions, range(5)), positions


def test_memory_answer_key_and_structure():
    """Gold = the map's value of an agent the context never names (trace: the original's reinforce
    form `g a0 v`); every agent is queried in every split; the facts' values are uniform."""
    queried_by_split = {s: set() for s in factworld.SPLITS}
    values = Counter()
    for e in corpus("memory", (1, 2, 3, 5, 15), n=60):
        facts, queried = read_facts(e.prompt)
        agents = [g for g, _ in facts]
        assert queried not in agents and len(set(agents)) == len(agents) == e.length and max(agents) < 16
        value = f"v{ORIGINAL_MAP[queried]}"
        assert e.answer == (f"g{queried} a0 {value}" if e.answer_style == "trace" else value) + "."
        queried_by_split[e.split].add(queried)
        values.update(v for _, v in facts)
    assert all(q == set(range(16)) for q in queried_by_split.values()), queried_by_split
    assert chi2_ok(values, range(64)), values


@pytest.mark.parametrize("task,lengths", [("chain", (1, 2, 3, 4, 5)), ("conflict", (1, 2, 3, 4, 5)),
                                          ("memory", (1, 2, 3, 4, 5))])
def test_every_word_is_an_entity_a_function_word_or_the_tasks_own(task, lengths):
    words = set(factworld.FUNCTION_WORDS) | set(factworld.REGIME_WORDS[task])
    for e in corpus(task, lengths, n=10):
        for raw in (e.prompt + " " + e.answer).replace("'s", " 's").split():
            word = raw.strip(".?()")
            assert re.fullmatch(rf"[gv]{NUM}|[1-9][0-9]*", word) or word in words, (word, e.prompt)


# ---------------------------------------------------------------------------------------------
# 3. keys, splits, determinism
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("task,length,knobs", [("chain", 2, {}), ("chain", 1, {"cycle": 3}),
                                               ("conflict", 2, {}), ("conflict", 2, {"map_agents": 3, "map_values": 4}),
                                               ("memory", 2, {}), ("memory", 2, {"map_agents": 3, "map_values": 3})])
def test_splits_are_disjoint(task, length, knobs):
    """No prompt in two splits (three seeds, 600 per split each); every example's split is its
    prompt's hash's. The tiny spaces (12 to 144 prompts in all) repeat within a split: the test bites."""
    prompts = {}
    for split in factworld.SPLITS:
        exs = [e for seed in range(3) for e in factworld.generate(task, split, n=600, length=length, seed=seed, **knobs)]
        assert all(e.split == split == factworld.split_of(e.prompt) for e in exs)
        prompts[split] = {e.prompt for e in exs}
    for a, b in (("train", "val"), ("train", "test"), ("val", "test")):
        assert not prompts[a] & prompts[b], (a, b)
    if knobs:
        assert all(len(p) < 150 for p in prompts.values())


@pytest.mark.parametrize("task", factworld.REGIME_TASKS)
def test_same_key_same_example_and_seeds_differ(task):
    """Examples are a pure function of the key (whatever the global random state, however reached);
    other seeds give other streams; styles and metrics share the prompt and change only the gold."""
    random.seed(1)
    first = factworld.generate(task, "test", n=30, length=3, seed=2)
    random.seed(99)
    assert first == factworld.generate(task, "test", n=30, length=3, seed=2)
    assert first[7] == factworld.make_example(task, "test", 3, 7, 2)
    assert first[5:] == factworld.generate(task, "test", n=25, length=3, seed=2, start=5)
    other = factworld.generate(task, "test", n=30, length=3, seed=3)
    assert len({e.prompt for e in first} & {e.prompt for e in other}) < 3
    trace = factworld.generate(task, "test", n=30, length=3, seed=2, answer_style="trace", metric="final")
    for s, t in zip(first, trace):
        assert s.prompt == t.prompt and s.answer == t.answer_token + "." and (s.metric, t.metric) == ("relaxed", "final")


def test_course_tasks_and_vocabulary_are_unchanged():
    """The course's tasks, knobs and function words (which the shipped base and its tokenizer
    were built from) are what they were; the new tasks are beside them, not in them."""
    assert factworld.TASKS == ("binding", "recall")
    assert factworld.FUNCTION_WORDS == ("gives", "to", "who", "is", "the", "final", "holder", "of", "what", "a0", "'s")
    assert factworld.ALL_TASKS == factworld.TASKS + ("chain", "conflict", "memory")
    assert list(get_domains()) == list(DOMAINS) == ["binding", "recall"]


# ---------------------------------------------------------------------------------------------
# 4. grading
# ---------------------------------------------------------------------------------------------


def test_final_metric_grades_the_last_token_only():
    gold = "g5 g0 g4."
    for pred in ("g5 g0 g4.", "g4.", "g1 g2 g4", "**g4**", "g5 g0 g4"):
        assert factworld.score(pred, gold, "final") == 1, pred
    for pred in ("g5 g0 g1.", "g4 g0.", "g5 g0 g4 g1.", "", "g5 g0"):
        assert factworld.score(pred, gold, "final") == 0, pred
    assert factworld.score("g4.", gold) == 0, "relaxed still grades the whole trace"
    ex = factworld.generate("chain", "test", n=1, length=2, answer_style="trace", metric="final")[0]
    assert factworld.grade(ex.answer_token, ex) == 1
    assert factworld.grade(ex.answer_token, dataclasses.replace(ex, metric="relaxed")) == 0


def test_trace_steps_and_chain_steps():
    """trace_steps: position by position against the gold; chain_steps: each hop from the model's
    own previous node, so one wrong node costs one hop, not all that follow."""
    prompt, answer, trace = ORIGINAL_CHAIN[2]   # path g2 g5 g3 g1 g0
    gold = f"{trace} {answer}"
    assert factworld.trace_steps(gold, gold) == [1, 1, 1, 1, 1]
    assert factworld.chain_steps(prompt, gold) == [1, 1, 1, 1]
    assert factworld.chain_steps(prompt, "g5 g3 g1 g0.") == [1, 1, 1, 1], "the start may be left out"
    wrong = "g2 g5 g4 g2 g5."    # hop 2 wrong (g5 -> g4); then g4 -> g2 and g2 -> g5 follow pointers
    assert factworld.trace_steps(wrong, gold) == [1, 1, 0, 0, 0]
    assert factworld.chain_steps(prompt, wrong) == [1, 0, 1, 1]
    assert factworld.chain_steps(prompt, "g0.") == [0, 0, 0, 0]
    assert factworld.trace_steps("", gold) == [0] * 5
    with pytest.raises(ValueError, match="chain"):
        factworld.parse_chain("g1's a0 is v3. what is a0 of g1?")
    with pytest.raises(ValueError, match="hops"):
        factworld.parse_chain(prompt.replace("(4 hops)", "(3 hops)"))


# ---------------------------------------------------------------------------------------------
# 5. bad input
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("call,pattern", [
    (lambda: factworld.generate("chain", length=6), r"cycle.*raise cycle to at least 7"),
    (lambda: factworld.generate("chain", length=0), r"length must be an integer >= 1"),
    (lambda: factworld.generate("chain", length=2, hop_count=2), r"hop_count"),
    (lambda: factworld.generate("chain", length=2, cycle=1), r"cycle"),
    (lambda: factworld.generate("chain", length=2, n_agents=6), r"n_agents.*cycle.*hop_count"),
    (lambda: factworld.generate("conflict", length=17), r"map_agents"),
    (lambda: factworld.generate("memory", length=16), r"15 agents available"),
    (lambda: factworld.generate("conflict", length=2, map_values=1), r"map_values"),
    (lambda: factworld.generate("memory", length=2, metric="fuzzy"), r"fuzzy.*relaxed.*strict.*final"),
    (lambda: factworld.reinforce(2, map_agent=3), r"map_agent.*map_agents"),
], ids=["depth>=cycle", "depth0", "hop_count", "cycle1", "knob", "conflict-pool", "memory-pool", "values",
        "metric", "reinforce-knob"])
def test_bad_input_raises_value_error_naming_the_problem(call, pattern):
    with pytest.raises(ValueError, match=pattern):
        call()


# ---------------------------------------------------------------------------------------------
# 6. the domains and the tiny tokenizer
# ---------------------------------------------------------------------------------------------


def test_the_tiny_tokenizer_covers_the_registered_domains_but_not_chain_v2s_hop_count(tok):
    """Every piece of the registered regime domains' prompts and golds (all splits, lengths and
    styles) is in the shipped tiny vocabulary. chain_v2's own text (hop_count=1) is not: the
    `(d hops)` annotation needs `(`, `)`, `hops` and the digits, which a second base would have to add."""
    from mopd_mini.tokenizer import pieces

    vocab = tok.get_vocab()

    def missing(examples):
        return {p for e in examples for text in (e.prompt, e.answer) for p in pieces(text)} - set(vocab)

    for d in REGIME_DOMAINS.values():
        for L in sorted(set(d.train_lengths + d.eval_lengths)):
            exs = d.train_examples(0, 40) + d.examples("test", L, 40) + d.examples("val", L, 40)
            assert not missing(exs), (d.name, L, missing(exs))
    v2 = [e for L in (2, 3, 4, 5) for e in factworld.generate("chain", "test", n=5, length=L)]
    assert missing(v2) == {"▁(", ")", "▁hops", "2", "3", "4", "5"}
    assert {p for e in factworld.reinforce(16) for p in pieces(e.answer)} <= set(vocab)


def test_the_strict_trace_is_the_gold_through_its_end_and_the_prefix_match_is_not():
    """strict_trace: a right trace that keeps going is wrong (0) where the prefix match (relaxed)
    passes it (1); the gold trace with its period passes both; a trace that stops early, or
    without its period, or with one wrong node fails strict."""
    gold = "g5 g0 g4."
    assert (factworld.strict_trace("g5 g0 g4.", gold), factworld.score("g5 g0 g4.", gold)) == (1, 1)
    assert (factworld.strict_trace("g5 g0 g4. g3 g2 g1.", gold), factworld.score("g5 g0 g4. g3 g2 g1.", gold)) == (0, 1)
    assert (factworld.strict_trace("g5 g0 g4 g3", gold), factworld.score("g5 g0 g4 g3", gold)) == (0, 1)
    assert factworld.strict_trace("**g5** g0 g4.", gold) == 1                       # relaxed's decoration cleaning
    for wrong in ("g5 g0.", "g5 g0 g4", "g5 g1 g4.", "", "g4."):
        assert factworld.strict_trace(wrong, gold) == 0, wrong
    with pytest.raises(ValueError, match="empty gold"):
        factworld.strict_trace("g1.", " ")
    ex = REGIME_DOMAINS["chain"].examples("test", 3, 1)[0]
    over = ex.answer + " " + ex.answer.split()[1]                                 # the trace, then one more node
    assert factworld.strict_trace(ex.answer, ex.answer) == 1 and factworld.strict_trace(over, ex.answer) == 0


def test_the_chain_reward_is_the_final_answer_only(tiny):
    """Rollout.rewards grades a chain completion on its final answer: the gold trace, a bare final
    answer and a trace with a wrong middle node all earn 1; a wrong final node, or no end of turn, 0."""
    from mopd_mini.rollout import pack

    model, tok = tiny
    ex = REGIME_DOMAINS["chain"].train_examples(0, 1)[0]          # depth 2: `start mid final.`
    start, mid, final = ex.answer[:-1].split()
    wrong_mid = next(f"g{a}" for a in range(6) if f"g{a}" not in (start, mid, final))
    texts = [ex.answer, f"{final}.", f"{start} {wrong_mid} {final}.", f"{start} {mid} {wrong_mid}.", ex.answer]
    ids = [tok(t, add_special_tokens=False)["input_ids"] + [tok.eos_token_id] for t in texts]
    ids[-1] = ids[-1][:-1]                                           # the last never ends
    rewards = pack(model, tok, [ex] * len(texts), ids).rewards(tok)
    assert rewards.tolist() == [1, 1, 1, 0, 0]


def test_a_grpo_step_runs_on_each_regime_domain(bank):
    """The existing trainer takes the new domains as they are (one step each; chain needs room for
    its trace: max_new_tokens=8, and the budget check says so when it is 4)."""
    from mopd_mini import GRPOConfig, train_grpo

    for name in REGIME_DOMAINS:
        run = train_grpo(bank, GRPOConfig(domain=name, steps=1, prompts_per_step=2, group_size=2, max_new_tokens=8,
                                          eval_every=1, eval_n=2, experiment=None, progress=False))
        assert {f"acc/{name}/L{L}" for L in REGIME_DOMAINS[name].eval_lengths} <= set(run.metrics[-1])
    with pytest.raises(ValueError, match="max_new_tokens >= 8"):
        train_grpo(bank, GRPOConfig(domain="chain", name="short", steps=1, max_new_tokens=4, experiment=None,
                                    progress=False))
