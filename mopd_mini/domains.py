"""The course's domains: which FactWorld task, at which lengths, for training and for evaluation.

A domain's name is its routing tag: a completion of a `binding` prompt is scored by the binding
teacher, never by an average of teachers. Both model sizes use the original FactWorld MOPD
experiment's settings (binding trains at L = 8 and 16 and is evaluated at 16, 24, 32; recall
trains at N = 12 and 16 and is evaluated at 16 and 24; the longest lengths are held out).

REGIME_DOMAINS are the regime study's (docs/regimes.md), named but never a default: chain (the
pointer chase, its gold the worked trace, its reward the final answer only; depths 2-3 trained,
4-5 held out), conflict (a context value against the memorised map) and memory (that map,
recalled from the weights), facts 2-3 trained, 4-5 held out. On the shipped tiny base chain uses
chain_v1's text (hop_count=0): the tiny vocabulary has no `(`, digits or `hops` for chain_v2's
`(d hops)` annotation (tests/test_regime_tasks.py measures that).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import factworld

from .validate import guarded, guarded_methods, name_rule, validate

EVAL_SPLITS = ("test", "val")


@guarded_methods
@dataclass(frozen=True)
class Domain:
    """One capability to compose: a FactWorld task and the lengths it is trained and tested at."""

    name: str
    """the FactWorld task ("binding" or "recall"), also the routing tag"""
    train_lengths: tuple[int, ...]
    """lengths that training prompts are drawn from (cycled)"""
    eval_lengths: tuple[int, ...]
    """lengths that evaluation reports; those not in train_lengths are held out"""
    knobs: dict = field(default_factory=dict)
    """FactWorld knobs (default: the original experiment's)"""
    answer_style: str = "short"
    """the gold's form: short (the answer token) or trace (factworld's chain of evidence ending in it)"""
    metric: str = "relaxed"
    """how an answer is graded, reward and evaluation alike: relaxed (the whole gold) or final (its last token)"""

    def __post_init__(self):
        validate(self)  # every field by its annotation first (a list of lengths is stored as a tuple)
        if self.answer_style not in factworld.ANSWER_STYLES:
            raise ValueError(f"domain {self.name!r}: unknown answer_style {self.answer_style!r}; "
                             f"valid: {factworld.ANSWER_STYLES}")
        if self.metric not in factworld.METRICS:
            raise ValueError(f"domain {self.name!r}: unknown metric {self.metric!r}; valid: {factworld.METRICS}")
        for field_name, use in (("train_lengths", "train"), ("eval_lengths", "evaluate")):
            if not getattr(self, field_name):
                raise ValueError(f"domain {self.name!r} has empty {field_name}: no prompts to {use} on; "
                                 f"give at least one length, e.g. {field_name}=(16,)")
        for length in sorted(set(self.train_lengths + self.eval_lengths)):
            factworld.resolve_knobs(self.name, length, **self.knobs)

    @property
    def held_out(self) -> tuple[int, ...]:
        return tuple(L for L in self.eval_lengths if L not in self.train_lengths)

    def train_examples(self, step: int, n: int, seed: int = 0) -> list:
        """The n training prompts of one step: a pure function of (step, seed), so runs replay."""
        return [factworld.make_example(self.name, "train", self.train_lengths[(step * n + i) % len(self.train_lengths)],
                                       step * n + i, seed, self.answer_style, self.metric, **self.knobs)
                for i in range(n)]

    def test_examples(self, length: int, n: int, seed: int = 0) -> list:
        return self._generate("test", length, n, seed)

    def val_examples(self, length: int, n: int, seed: int = 0) -> list:
        """Validation prompts: disjoint from train and test, for choosing hyperparameters."""
        return self._generate("val", length, n, seed)

    def _generate(self, split: str, length: int, n: int, seed: int) -> list:
        return factworld.generate(self.name, split, n=n, length=length, seed=seed, answer_style=self.answer_style,
                                  metric=self.metric, **self.knobs)

    def examples(self, split: str, length: int, n: int, seed: int = 0) -> list:
        """Evaluation prompts of one split ("test" or "val")."""
        if split not in EVAL_SPLITS:
            raise ValueError(f"unknown evaluation split {split!r}; valid: {EVAL_SPLITS} (train prompts "
                             "come from train_examples)")
        return self._generate(split, length, n, seed)


DOMAINS = {
    "binding": Domain("binding", train_lengths=(8, 16), eval_lengths=(16, 24, 32)),
    "recall": Domain("recall", train_lengths=(12, 16), eval_lengths=(16, 24)),
}
REGIME_DOMAINS = {
    "chain": Domain("chain", train_lengths=(2, 3), eval_lengths=(2, 3, 4, 5), knobs={"hop_count": 0},
                    answer_style="trace", metric="final"),
    "conflict": Domain("conflict", train_lengths=(2, 3), eval_lengths=(2, 3, 4, 5)),
    "memory": Domain("memory", train_lengths=(2, 3), eval_lengths=(2, 3, 4, 5)),
}


@guarded
def get_domains(names: str | tuple[str, ...] | None = None) -> dict[str, Domain]:
    """The named domains (default: the course's, DOMAINS; one name may be given as a plain string;
    the regime study's are found by name), or a ValueError listing the valid names."""
    names = list(DOMAINS) if names is None else [names] if isinstance(names, str) else list(names)
    known = {**DOMAINS, **REGIME_DOMAINS}
    valid = f"valid domains: {list(DOMAINS)}; the regime study's: {list(REGIME_DOMAINS)}"
    if not names:
        raise ValueError(f"no domains given; {valid}")
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown domain(s) {unknown}; {valid}")
    return {n: known[n] for n in names}


def is_domain_field(name: str) -> bool:
    """A config field or a function argument that holds domain names: domain, domains, *_domains."""
    return name in ("domain", "domains") or name.endswith("_domains")


def check_domain_names(label: str, name: str, value) -> None:
    """The names rule of `validate` for the domains (`is_domain_field`): known domain names, each at
    most once; a ValueError naming `label` (the field or argument), the value and the fix. A dict
    of Domain objects (evaluate's `domains`) is not names: left alone."""
    if isinstance(value, dict):
        return
    names = (value,) if isinstance(value, str) else tuple(value)
    if not all(isinstance(n, str) for n in names):
        return
    repeated = sorted({d for d in names if names.count(d) > 1})
    if repeated:
        raise ValueError(f"{label}={value!r} names {repeated} more than once; each domain once "
                         f"(a repeat would train its prompts twice a step but export them once), e.g. "
                         f"{name}={tuple(dict.fromkeys(names))!r}")
    if names or name != "eval_domains":
        try:
            get_domains(names)
        except ValueError as err:
            raise ValueError(f"{label}={value!r}: {err}") from None


name_rule(is_domain_field, check_domain_names)


# every public function (and class method) of this module: its annotated arguments checked at a call from outside
# the package (mopd_mini.validate.guard_public); the package's own calls, e.g. the training loop's, skip the checks
from .validate import guard_public  # noqa: E402

guard_public(globals())
