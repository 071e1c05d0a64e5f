"""FactWorld's task families, as deterministic text generators.

binding  last-write-wins state tracking: a stream of `s{i} gives o{k} to g{j}.` events, then
         `who is the final holder of o{k}?`; the gold answer is the recipient of the LAST event
         that moved the queried object.
recall   in-context associative recall: N facts `g{i}'s a0 is v{k}.`, then
         `what is a0 of g{i}?`; the gold answer is that agent's value.
These two are the course's (TASKS). regime_tasks.py adds the regime study's three (REGIME_TASKS):
chain (a pointer chase), conflict (a context value against a memorised map) and memory (the
map itself); they are generated, split and scored by the same functions below.

The text is compatible with the original FactWorld (github.com/ianbarber/factworld): same
sentence, question and answer shapes, so a prompt or an answer from one reads the same in the
other. This file is our own implementation, written from the task description.

Two properties hold by construction:
- determinism: an example is a pure function of (task, knobs, split, length, index, seed);
- disjoint splits: every candidate example is assigned to train, val or test by a hash of its
  TEXT, and a generator keeps drawing candidates until one lands in the requested split, so no
  prompt can ever be in two splits (for any seeds, indices or call order). The hash h in [0, 1)
  decides: h < 0.1 test, 0.1 <= h < 0.2 val (for choosing hyperparameters), else train. Val was
  carved out of what used to be test (h < 0.2), so the train split is unchanged.

Pure standard library: this package knows nothing of models or tokenizers.
"""

from __future__ import annotations

import hashlib
import operator
import random
from dataclasses import dataclass, field

from . import regime_tasks
from .score import METRICS
from .regime_tasks import MIN_LENGTH, REGIME_KNOB_HELP, REGIME_KNOBS, REGIME_SAMPLERS, REGIME_TASKS, check_knobs

TASKS = ("binding", "recall")  # the course's two (the shipped base was pretrained on exactly these)
ALL_TASKS = TASKS + REGIME_TASKS
SPLITS = ("train", "val", "test")
ANSWER_STYLES = ("short", "trace")

# The original experiment's settings (FactWorld's MOPD run on Qwen3-1.7B).
DEFAULT_KNOBS = {
    "binding": {"n_agents": 5, "n_objects": 8, "n_active": 4},
    "recall": {"agent_pool": 64, "value_vocab": 128},
    **REGIME_KNOBS,
}
KNOB_HELP = {
    "n_agents": "binding: agents g0..g{n-1} that can receive an object",
    "n_objects": "binding: object vocabulary o0..o{n-1}",
    "n_active": "binding: objects that move in one stream (2 <= n_active <= n_objects)",
    "agent_pool": "recall: agent vocabulary g0..g{n-1}; the N facts use N distinct agents",
    "value_vocab": "recall: value vocabulary v0..v{n-1}; values are drawn without replacement",
    **REGIME_KNOB_HELP,
}
# Every word binding's and recall's templates write besides entities (g*, o*, v*, s*) and
# punctuation (the tiny tokenizer's vocabulary is built from it: do not extend it; regime_tasks.py's
# REGIME_WORDS lists what its tasks add).
FUNCTION_WORDS = ("gives", "to", "who", "is", "the", "final", "holder", "of", "what", "a0", "'s")
TEST_FRACTION = 0.1  # share of the text space that belongs to the test split (h < 0.1)
VAL_FRACTION = 0.1  # share that belongs to the validation split (0.1 <= h < 0.2)
MAX_DRAWS = 10_000  # candidates tried before a split is declared empty for these knobs


@dataclass(frozen=True)
class Example:
    """One FactWorld example. `prompt` is the raw task text; `answer` is the gold, e.g. `g3.`"""

    task: str
    split: str
    length: int
    index: int
    seed: int
    prompt: str
    answer: str
    answer_style: str = "short"
    knobs: dict = field(default_factory=dict, compare=False)
    metric: str = "relaxed"
    """how the answer is graded (score.grade): relaxed (the whole gold span) or final (its last token)"""

    @property
    def answer_token(self) -> str:
        """The final answer token without its period (the last token of a trace answer)."""
        return self.answer.rstrip(".").split()[-1]


# ---------------------------------------------------------------------------------------------
# the two samplers: rng -> (statements, question, short answer token, trace tokens)
# ---------------------------------------------------------------------------------------------


def _binding(rng: random.Random, length: int, n_agents: int, n_objects: int, n_active: int):
    """Uniform-last-write sampler ("v2"): the queried object's last write sits at a position p
    drawn uniformly from [floor(0.1 L), L - 2], so recency is no shortcut."""
    active = rng.sample(range(n_objects), n_active)
    queried = rng.choice(active)
    others = [o for o in active if o != queried]
    last = rng.randint(length // 10, length - 2)  # p: never the final event
    events = []  # (object, recipient) per step
    for step in range(length):
        if step == last:
            obj = queried
        elif step > last:
            obj = rng.choice(others)  # after p, only the OTHER objects move
        else:
            obj = rng.choice(active)
        events.append((obj, rng.randrange(n_agents)))
    statements = [f"s{i} gives o{o} to g{a}." for i, (o, a) in enumerate(events)]
    holders = [f"g{a}" for o, a in events if o == queried]  # the queried object's trail
    return statements, f"who is the final holder of o{queried}?", holders[-1], holders


def _recall(rng: random.Random, length: int, agent_pool: int, value_vocab: int):
    """N = length facts about N distinct agents, values without replacement (a fresh map)."""
    agents = rng.sample(range(agent_pool), length)
    values = rng.sample(range(value_vocab), length)
    statements = [f"g{g}'s a0 is v{v}." for g, v in zip(agents, values)]
    i = rng.randrange(length)
    fact = statements[i].rstrip(".").split()  # the trace is the matching fact itself
    return statements, f"what is a0 of g{agents[i]}?", f"v{values[i]}", fact


SAMPLERS = {"binding": _binding, "recall": _recall, **REGIME_SAMPLERS}


# ---------------------------------------------------------------------------------------------
# knobs, keys and splits
# ---------------------------------------------------------------------------------------------


def _integer(name: str, value) -> int:
    """value as a plain int (numpy integers too), or a ValueError naming the knob."""
    try:
        return operator.index(value)
    except TypeError:
        raise ValueError(f"{name} must be an integer, got {value!r}") from None


def resolve_knobs(task: str, length: int, **knobs) -> dict:
    """The task's default knobs updated by `knobs`, checked; raises ValueError naming the fix."""
    if task not in ALL_TASKS:
        raise ValueError(f"unknown FactWorld task {task!r}; valid tasks: {', '.join(ALL_TASKS)}")
    unknown = set(knobs) - set(DEFAULT_KNOBS[task])
    if unknown:
        valid = ", ".join(f"{k} ({KNOB_HELP[k]})" for k in DEFAULT_KNOBS[task])
        raise ValueError(f"unknown knob(s) {sorted(unknown)} for task {task!r}; valid: {valid}")
    k = {**DEFAULT_KNOBS[task], **{name: _integer(name, v) for name, v in knobs.items()}}
    length = _integer("length", length)
    least = MIN_LENGTH.get(task, 2)
    if length < least:
        raise ValueError(f"length must be an integer >= {least}, got {length!r}")
    problems = []
    if task in REGIME_TASKS:
        problems = check_knobs(task, length, k)
    elif task == "binding":
        if k["n_agents"] < 2:
            problems.append(f"n_agents={k['n_agents']} must be >= 2")
        if not 2 <= k["n_active"] <= k["n_objects"]:
            problems.append(
                f"n_active={k['n_active']} must be between 2 and n_objects={k['n_objects']} "
                "(more active objects than objects, or too few to keep the last write hidden)"
            )
    else:
        if length > k["agent_pool"]:
            problems.append(f"length (pool size) {length} > agent_pool={k['agent_pool']}: raise agent_pool")
        if length > k["value_vocab"]:
            problems.append(f"length (pool size) {length} > value_vocab={k['value_vocab']}: raise value_vocab")
    if problems:
        raise ValueError(f"FactWorld {task} knobs out of range: " + "; ".join(problems))
    return k


def split_of(prompt: str) -> str:
    """The split a prompt belongs to, from a hash of its text alone: with h = the first 8 bytes of
    its sha256 as a number in [0, 1), "test" if h < 0.1, "val" if 0.1 <= h < 0.2, else "train"."""
    h = int.from_bytes(hashlib.sha256(prompt.encode()).digest()[:8], "big") / 2**64
    if h < TEST_FRACTION:
        return "test"
    return "val" if h < TEST_FRACTION + VAL_FRACTION else "train"


def _rng(task, knobs, split, length, index, seed, draw) -> random.Random:
    key = f"{task}|{sorted(knobs.items())}|{split}|{length}|{index}|{seed}|{draw}"
    return random.Random(int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big"))


def make_example(task, split, length, index, seed=0, answer_style="short", metric="relaxed", **knobs) -> Example:
    """The example at one key: draw candidates until one falls in `split` (by its text hash).
    `metric` only records how the example is graded; the text is the same for every metric."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; valid splits: {', '.join(SPLITS)}")
    if answer_style not in ANSWER_STYLES:
        raise ValueError(f"unknown answer_style {answer_style!r}; valid: {', '.join(ANSWER_STYLES)}")
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; valid metrics: {', '.join(METRICS)}")
    k = resolve_knobs(task, length, **knobs)
    length, index, seed = _integer("length", length), _integer("index", index), _integer("seed", seed)
    for draw in range(MAX_DRAWS):
        rng = _rng(task, k, split, length, index, seed, draw)
        statements, question, answer, trace = SAMPLERS[task](rng, length, **k)
        prompt = " ".join(statements + [question])
        if split_of(prompt) == split:
            gold = " ".join(trace) if answer_style == "trace" else answer
            return Example(task, split, length, index, seed, prompt, gold + ".", answer_style, k, metric)
    raise ValueError(f"no {split} example found in {MAX_DRAWS} draws: the knobs {k} at length "
                     f"{length} leave too few distinct {task} prompts; enlarge the vocabularies")


def generate(task: str, split: str = "train", n: int = 1, length: int | None = None, seed: int = 0,
             *, start: int = 0, answer_style: str = "short", metric: str = "relaxed", **knobs) -> list[Example]:
    """`n` examples of `task` at `length`, with indices start .. start + n - 1.

    Knobs (defaults are the original experiment's): binding n_agents=5, n_objects=8, n_active=4;
    recall agent_pool=64, value_vocab=128. `answer_style="trace"` makes the gold a short chain of
    evidence ending in the answer (binding: every holder of the queried object, in order;
    recall: the matching fact; chain: the path, start to answer; conflict: the matching fact;
    memory: `g a0 v`, the original's reinforce text). Regime knobs: regime_tasks.REGIME_KNOBS."""
    if length is None:
        raise ValueError("generate() needs a length (binding: events in the stream; recall: facts; "
                         "chain: the depth; conflict and memory: facts in the prompt)")
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    return [make_example(task, split, length, start + i, seed, answer_style, metric, **knobs) for i in range(n)]


def reinforce(n: int, **knobs) -> list[Example]:
    """The original conflict_v1's reinforce examples: an empty prompt whose answer states the
    memorised map, `g0 a0 v18.`, agents in order and cycled (what SFT memorises the map from).
    They are the same in every split (a map is memorised, not generalised)."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    k = resolve_knobs("memory", 1, **knobs)
    memorised = regime_tasks.param_map(k["map_agents"], k["map_values"], k["map_seed"])
    return [Example("memory", "train", 0, j, 0, "", f"g{j % k['map_agents']} a0 v{memorised[j % k['map_agents']]}.",
                    "trace", k) for j in range(n)]


def conflict_train_mix(n: int, seed: int = 0, lengths=(2, 3), **knobs) -> list[Example]:
    """The original conflict_v1 train protocol: n // 2 reinforce examples, then n - n // 2 conflict
    examples with the lengths cycled (the conflict half from this generator's train split)."""
    out = reinforce(n // 2, **knobs)
    return out + [make_example("conflict", "train", lengths[i % len(lengths)], i, seed, **knobs)
                  for i in range(n - n // 2)]
