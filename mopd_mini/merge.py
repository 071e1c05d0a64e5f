"""Param-Merge: one adapter made from the teachers' weights, with no training (peft's
`add_weighted_adapter` under a thin wrapper).

    merge(bank, "merge_cat", {"teacher_binding": 1.0, "teacher_recall": 1.0}, how="cat")
    evaluate(bank, ["merge_cat"])          # the merged adapter is an ordinary adapter of the bank

Each teacher i is a LoRA update  delta W_i = s_i B_i A_i  (s_i = alpha / r) on every wrapped layer,
and w_i is its merge weight. What each `how` makes, layer by layer (peft 0.21's definitions):

    cat        A = [w_1 s_1 A_1; w_2 s_2 A_2],  B = [B_1, B_2]   (rank r_1 + r_2, scaling 1)
               so  delta W = sum_i w_i delta W_i  exactly: task arithmetic.
    linear     A = sum_i sign(w_i) sqrt(|w_i| s_i) A_i,  B = sum_i sqrt(|w_i| s_i) B_i   (rank r, scaling 1)
               so  delta W = sum_{i,j} (...) B_i A_j : the factors are averaged SEPARATELY and the
               product carries cross terms B_i A_j, which is NOT the weighted sum of the delta W_i.
    ties       the same per-factor weights, on each factor (A and B apart) of every layer: keep each
               teacher's top `density` fraction of entries by magnitude, elect a sign per entry (the
               sign of the sum of the kept, unweighted entries), then average the weighted entries
               that agree with it (divided by how many agree, at least 1).
    dare_ties  as ties, but each teacher keeps a random `density` fraction of entries (Bernoulli),
               rescaled by 1 / density (DARE); random, so `seed` fixes the draw.

linear, ties and dare_ties need the adapters to share one rank; cat does not. The SVD variants of
peft (which merge delta W and factor it again) are out of the course's scope.
"""

from __future__ import annotations

import math
import numbers

import torch
from peft.tuners.lora import LoraLayer

from .adapters import BASE, AdapterBank, check_adapter_name
from .config import HOWS  # noqa: F401  (in the torch-free config module, for the command line's --help)

NEEDS_DENSITY = ("ties", "dare_ties")


def merge(bank: AdapterBank, name: str, weights: dict[str, float], how: str = "cat",
          density: float | None = None, majority_sign_method: str = "total", seed: int = 0) -> str:
    """Add adapter `name` to the bank: the adapters in `weights` (name -> weight) merged by `how`
    (see the module docstring). An adapter called `name` is replaced. Returns `name`."""
    if how not in HOWS:
        raise ValueError(f"unknown merge how={how!r}; valid: {HOWS} (peft's svd variants are out of scope)")
    if len(weights) < 2:
        raise ValueError(f"merge needs at least two adapters in weights, got {list(weights)}")
    for adapter, w in weights.items():
        bank.check(adapter)
        if adapter == BASE:
            raise ValueError(f"{BASE!r} has no adapter weights to merge; give trained adapters")
        if isinstance(w, bool) or not isinstance(w, numbers.Real) or not math.isfinite(w):
            raise ValueError(f"the merge weight of {adapter!r} must be a finite number, got {w!r}")
    if not any(weights.values()):
        raise ValueError(f"every merge weight is 0 ({weights}): the merge would be the base itself; give "
                         "at least one adapter a non-zero weight (or use the base, 'base')")
    check_adapter_name(name)
    if name in weights:
        raise ValueError(f"the merged adapter's name {name!r} is one of the adapters being merged; pick another")
    bank.claim(name, "merge")
    if how in NEEDS_DENSITY and not (density is not None and 0 < density <= 1):
        raise ValueError(f"how={how!r} needs density in (0, 1] (the fraction of entries each adapter keeps), "
                         f"got {density}")
    if how not in NEEDS_DENSITY and density is not None:
        raise ValueError(f"density is used by {NEEDS_DENSITY} only; how={how!r} takes density=None")
    if majority_sign_method not in ("total", "frequency"):
        raise ValueError(f"majority_sign_method must be 'total' or 'frequency', got {majority_sign_method!r}")
    bank._drop(name)  # peft silently keeps an existing adapter of that name: replace it instead
    with torch.random.fork_rng(devices=[]):  # dare's Bernoulli masks (and the new adapter's init)
        torch.manual_seed(seed)
        bank.model.add_weighted_adapter(list(weights), [float(w) for w in weights.values()], name,
                                        combination_type=how, density=density,
                                        majority_sign_method=majority_sign_method)
    bank.roles[name] = "merge"
    bank._settle()
    return name


def named_lora_layers(bank: AdapterBank) -> dict[str, LoraLayer]:
    """Every LoRA-wrapped layer of the bank's model, by module name (`routing.lora_layers`: the same
    layers as a cached list, for the routed pass)."""
    return {n: m for n, m in bank.model.named_modules() if isinstance(m, LoraLayer)}


@torch.no_grad()
def delta_w(bank: AdapterBank, adapter: str) -> dict[str, torch.Tensor]:
    """The adapter's weight update  delta W = s B A  on every layer it wraps: {layer: (out, in)}."""
    bank.check(adapter)
    return {n: layer.get_delta_weight(adapter).detach().clone()
            for n, layer in named_lora_layers(bank).items() if adapter in layer.lora_A}


def merge_sweep(bank: AdapterBank, weights: list[tuple[float, float]], teachers: tuple[str, str],
                how: str = "cat", density: float | None = None, prefix: str = "merge") -> list[str]:
    """One merged adapter per weight pair (w_first, w_second), named <prefix>_<how>_<w1>_<w2>
    with '.' written 'p' (module names take no dots): merge_cat_1_0p5."""
    def tag(w: float) -> str:
        return f"{w:g}".replace(".", "p").replace("-", "m")
    return [merge(bank, f"{prefix}_{how}_{tag(w1)}_{tag(w2)}", dict(zip(teachers, (w1, w2))), how, density)
            for w1, w2 in weights]


# every public function (and class method) of this module: its annotated arguments checked at a call from outside
# the package (mopd_mini.validate.guard_public); the package's own calls, e.g. the training loop's, skip the checks
from .validate import guard_public  # noqa: E402

guard_public(globals())
