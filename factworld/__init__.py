"""FactWorld: two synthetic tasks with exact, verifiable answers (binding and recall).

    >>> import factworld
    >>> ex = factworld.generate("binding", "test", n=1, length=8)[0]
    >>> factworld.score(ex.answer, ex.answer)
    1
"""

from .score import FLOORS, METRICS, floor, floor_of, parse_binding, score
from .tasks import (ANSWER_STYLES, DEFAULT_KNOBS, FUNCTION_WORDS, SPLITS, TASKS, Example, generate,
                    make_example, resolve_knobs, split_of)

__all__ = ["generate", "score", "floor", "floor_of", "parse_binding", "Example", "make_example",
           "resolve_knobs", "split_of", "TASKS", "SPLITS", "METRICS", "FLOORS", "ANSWER_STYLES",
           "DEFAULT_KNOBS", "FUNCTION_WORDS"]
