"""The course's domains: which FactWorld task, at which lengths, for training and for evaluation.

A domain's name is its routing tag: a completion of a `binding` prompt is scored by the binding
teacher, never by an average of teachers. Both model sizes use the original FactWorld MOPD
experiment's settings (binding trains at L = 8 and 16 and is evaluated at 16, 24, 32; recall
trains at N = 12 and 16 and is evaluated at 16 and 24; the longest lengths are held out).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import factworld

EVAL_SPLITS = ("test", "val")


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

    def __post_init__(self):
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
                                       step * n + i, seed, **self.knobs) for i in range(n)]

    def test_examples(self, length: int, n: int, seed: int = 0) -> list:
        return factworld.generate(self.name, "test", n=n, length=length, seed=seed, **self.knobs)

    def val_examples(self, length: int, n: int, seed: int = 0) -> list:
        """Validation prompts: disjoint from train and test, for choosing hyperparameters."""
        return factworld.generate(self.name, "val", n=n, length=length, seed=seed, **self.knobs)

    def examples(self, split: str, length: int, n: int, seed: int = 0) -> list:
        """Evaluation prompts of one split ("test" or "val")."""
        if split not in EVAL_SPLITS:
            raise ValueError(f"unknown evaluation split {split!r}; valid: {EVAL_SPLITS} (train prompts "
                             "come from train_examples)")
        return factworld.generate(self.name, split, n=n, length=length, seed=seed, **self.knobs)


DOMAINS = {
    "binding": Domain("binding", train_lengths=(8, 16), eval_lengths=(16, 24, 32)),
    "recall": Domain("recall", train_lengths=(12, 16), eval_lengths=(16, 24)),
}


def get_domains(names=None) -> dict[str, Domain]:
    """The named domains (default: all), or a ValueError listing the valid names."""
    names = list(DOMAINS) if names is None else list(names)
    if not names:
        raise ValueError(f"no domains given; valid domains: {list(DOMAINS)}")
    unknown = [n for n in names if n not in DOMAINS]
    if unknown:
        raise ValueError(f"unknown domain(s) {unknown}; valid domains: {list(DOMAINS)}")
    return {n: DOMAINS[n] for n in names}
