"""Three more FactWorld task families, for the regime study (docs/regimes.md): text-compatible
ports of the original registry's `chain_v2` and `conflict_v1` (github.com/ianbarber/factworld,
factworld/tasks.py), plus the in-weights recall that `conflict_v1` pits the context against.

chain     a pointer chase (the original's chain_v2): one random cycle over `cycle` agents is
          stated as facts `g4's a0 is g1.` in scrambled order, and the question nests `a0 of`
          `depth` times, with the hop count: `what is a0 of a0 of g5? (2 hops)`. The gold is
          the agent `depth` pointers on from the start (`g4.`); its trace is the whole path,
          start and intermediate nodes then the final one (`g5 g0 g4.`: the original's
          worked trace `g5 g0` followed by its answer). The length is the DEPTH, and depth <
          cycle always, so the cycle never wraps and every hop is needed. `hop_count=0` drops
          the `(d hops)` annotation: the original's chain_v1 text, the same task.
conflict  in-context against in-weights (the original's conflict_v1): a fixed agent->value map
          (`param_map`, from a seeded RNG, the same for every example) is what a model is meant
          to memorise; the prompt states `length` facts, among them one for the queried agent
          whose value DIFFERS from the map: `g0's a0 is v62. g6's a0 is v54. what is a0 of g0?`
          -> `v62.` A model that answers from its weights says the map's value, which is wrong.
memory    the map itself, recalled from the weights: `length` facts about OTHER agents, then the
          same question about an agent the prompt does not mention: `g3's a0 is v5. g7's a0 is
          v9. what is a0 of g0?` -> the map's value `v18.` Its trace gold is the original's
          reinforce text (`g0 a0 v18.`). conflict and memory share one surface; whether the
          queried agent is in the context decides which rule answers it.

Why memory carries distractor facts: the prompt-less question (`what is a0 of g0?`) has only
`map_agents` distinct texts (16), too few to split three ways by text hash without leaving
agents whose value is never trained (at 16 agents, only g5's question hashes to test). With
distractors the text space is large, every agent is queried in every split, and the splits stay
disjoint. The original's prompt-less reinforce examples are `reinforce` below, for SFT.

Each sampler maps (rng, length, **knobs) to (statements, question, answer token, trace tokens),
like tasks.py's binding and recall; tasks.make_example draws, splits by text hash and formats.
"""

from __future__ import annotations

import random
from functools import lru_cache

REGIME_TASKS = ("chain", "conflict", "memory")

# The original registry's settings: chain_v2 k=6; conflict_v1 k=16, value_vocab_size=64, seed 0.
REGIME_KNOBS = {
    "chain": {"cycle": 6, "hop_count": 1},
    "conflict": {"map_agents": 16, "map_values": 64, "map_seed": 0},
    "memory": {"map_agents": 16, "map_values": 64, "map_seed": 0},
}
REGIME_KNOB_HELP = {
    "cycle": "chain: agents g0..g{n-1}, all in one pointer cycle (depth must stay below it)",
    "hop_count": "chain: 1 appends '(d hops)' to the question (chain_v2's text), 0 leaves it off (chain_v1's)",
    "map_agents": "conflict/memory: agents g0..g{n-1} of the memorised map (and of the prompts)",
    "map_values": "conflict/memory: value vocabulary v0..v{n-1} of the map and of the facts",
    "map_seed": "conflict/memory: which memorised map (0: the original's)",
}
# Words the new templates write besides FactWorld's function words, entities and punctuation.
REGIME_WORDS = {"chain": ("hops",), "conflict": (), "memory": ()}
MIN_LENGTH = {"chain": 1, "conflict": 1, "memory": 1}


def check_knobs(task: str, length: int, k: dict) -> list[str]:
    """What is out of range for `task` at `length` with knobs `k` (an empty list when valid)."""
    problems = []
    if task == "chain":
        if k["cycle"] < 2:
            problems.append(f"cycle={k['cycle']} must be >= 2")
        if length >= k["cycle"]:
            problems.append(f"depth (length) {length} >= cycle={k['cycle']} wraps the cycle, so the gold "
                            f"would collapse to a shallower depth: raise cycle to at least {length + 1}")
        if k["hop_count"] not in (0, 1):
            problems.append(f"hop_count={k['hop_count']} must be 0 (chain_v1's text) or 1 (chain_v2's)")
        return problems
    if k["map_values"] < 2:
        problems.append(f"map_values={k['map_values']} must be >= 2 (the in-context value must differ from the map's)")
    room = k["map_agents"] - (1 if task == "memory" else 0)  # memory's facts are about the OTHER agents
    if length > room:
        problems.append(f"length {length} > {room} agents available for the facts (map_agents="
                        f"{k['map_agents']}): raise map_agents")
    return problems


@lru_cache(maxsize=None)
def param_map(map_agents: int = 16, map_values: int = 64, map_seed: int = 0) -> dict[int, int]:
    """The memorised agent -> value map: {agent index: value index}, one uniform draw per agent
    in order from an RNG seeded by the string the original seeds its map with, so the default
    (16 agents, 64 values, seed 0) is the original conflict_v1 map: g0 -> v18, g1 -> v43, ..."""
    rng = random.Random(f"factworld|parammap|conflict_v1|{map_seed}")
    return {a: rng.randrange(map_values) for a in range(map_agents)}


def _chain(rng: random.Random, length: int, cycle: int, hop_count: int):
    order = rng.sample(range(cycle), cycle)                 # the hidden cycle, one pass over all agents
    pointer = {a: order[(i + 1) % cycle] for i, a in enumerate(order)}
    shown = rng.sample(order, cycle)                        # facts in scrambled order
    start = rng.choice(order)
    path = [start]
    for _ in range(length):
        path.append(pointer[path[-1]])
    statements = [f"g{a}'s a0 is g{pointer[a]}." for a in shown]
    question = "what is " + "a0 of " * length + f"g{start}?" + (f" ({length} hops)" if hop_count else "")
    return statements, question, f"g{path[-1]}", [f"g{a}" for a in path]


def _conflict(rng: random.Random, length: int, map_agents: int, map_values: int, map_seed: int):
    memorised = param_map(map_agents, map_values, map_seed)
    pool = rng.sample(range(map_agents), length)
    queried = rng.choice(pool)
    stated = rng.choice([v for v in range(map_values) if v != memorised[queried]])  # never the map's value
    shown = rng.sample(pool, length)                         # the queried fact at no fixed position
    values = {a: stated if a == queried else rng.randrange(map_values) for a in shown}  # others: uniform
    statements = [f"g{a}'s a0 is v{values[a]}." for a in shown]
    return statements, f"what is a0 of g{queried}?", f"v{stated}", f"g{queried}'s a0 is v{stated}".split()


def _memory(rng: random.Random, length: int, map_agents: int, map_values: int, map_seed: int):
    memorised = param_map(map_agents, map_values, map_seed)
    queried = rng.randrange(map_agents)
    others = rng.sample([a for a in range(map_agents) if a != queried], length)  # the context never names it
    value = f"v{memorised[queried]}"
    statements = [f"g{a}'s a0 is v{rng.randrange(map_values)}." for a in others]  # uniform, as conflict's
    return statements, f"what is a0 of g{queried}?", value, [f"g{queried}", "a0", value]


REGIME_SAMPLERS = {"chain": _chain, "conflict": _conflict, "memory": _memory}

