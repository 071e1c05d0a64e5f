"""FactWorld: synthetic tasks with exact, verifiable answers: the course's binding and recall,
and the regime study's chain, conflict and memory (regime_tasks.py).

    >>> import factworld
    >>> ex = factworld.generate("binding", "test", n=1, length=8)[0]
    >>> factworld.score(ex.answer, ex.answer)
    1
"""

from .regime_tasks import REGIME_TASKS, REGIME_WORDS, param_map
from .score import (FLOORS, METRICS, chain_steps, floor, floor_of, grade, parse_binding, parse_chain, score,
                    strict_trace, trace_steps)
from .tasks import (ALL_TASKS, ANSWER_STYLES, DEFAULT_KNOBS, FUNCTION_WORDS, SPLITS, TASKS, Example,
                    conflict_train_mix, generate, make_example, reinforce, resolve_knobs, split_of)

__all__ = ["generate", "score", "floor", "floor_of", "parse_binding", "Example", "make_example",
           "resolve_knobs", "split_of", "TASKS", "SPLITS", "METRICS", "FLOORS", "ANSWER_STYLES",
           "DEFAULT_KNOBS", "FUNCTION_WORDS", "ALL_TASKS", "REGIME_TASKS", "REGIME_WORDS", "param_map",
           "grade", "trace_steps", "strict_trace", "parse_chain", "chain_steps", "reinforce", "conflict_train_mix"]
