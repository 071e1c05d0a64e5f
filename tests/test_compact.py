"""`AdapterBank.compact`: a FROZEN teacher adapter held in the base's bf16 instead of peft's fp32.

On a small random Qwen3 (two layers of a tiny width, the real vocabulary of 151,936) in bf16, with
the same two teachers as fp32 adapters on an fp32 copy of the same weights (the exact reference):
the compacted teachers' routed scores are compared with the fp32 adapters' on the same bf16 base.

The bound, from the measured deviations (printed by the test; max |delta log-prob| over the 36
completion tokens): the bf16 base with fp32 adapters is already off the fp32 model by the bf16
rounding of every activation (the "floor", measured 3.9e-3); compacting the adapters adds the
rounding of their weights and of the rank-16 intermediate A x, roundings of the same kind, and
measured: compacted vs fp32 adapters 3.9e-3 (1.01x the floor), compacted vs the fp32 model 4.1e-3
(1.07x: the two roundings do not add up), compacted mixed (the fused addmm of
`routing._routed_lora_forward`) vs swap (peft's own forward) 2.8e-3 (0.72x). Each is bounded by
BOUND = 2x the floor: compacting costs what bf16 itself already does, with room for another CPU's
kernels. The bound is not loose against a real bug: the teachers move the log-probs off the base's
by far more (measured 0.38, about 97x the floor; asserted > 10x the bound), so a dropped or
mis-scaled update would fail it.
"""

import copy

import pytest
import safetensors.torch
import torch

import factworld
from mopd_mini import AdapterBank, MOPDConfig, load_base, routing, train_student
from mopd_mini.models import QWEN3_RANDOM
from mopd_mini.rollout import sample

from tests.conftest import TEACHERS

SHRINK = dict(num_hidden_layers=2, hidden_size=64, intermediate_size=128, num_attention_heads=2,
              num_key_value_heads=1, head_dim=32)
ADAPTERS = [*TEACHERS.values(), "student"]
BOUND = 2.0
"""compacted scores within BOUND x the bf16 floor of the fp32 adapters' (measured 1.01x; see above)"""


def _bank(model, tok, perturb) -> AdapterBank:
    bank = AdapterBank(model, tok)
    for i, name in enumerate(ADAPTERS):
        bank.create(name, seed=i + 1)
        perturb(bank, name, seed=70 + i)
    return bank


@pytest.fixture(scope="module")
def fp32_pair(perturb):
    """(model, tokenizer) of the random Qwen3 in fp32 and a bf16 copy of the same weights."""
    model, tok = load_base(QWEN3_RANDOM, shrink=SHRINK, dtype=torch.float32, device="cpu")
    return model, copy.deepcopy(model).to(torch.bfloat16), tok


@pytest.fixture
def banks(fp32_pair, perturb):
    """(bf16 bank, fp32 bank) with identical fp32 adapters: two teachers and a student."""
    fp32, bf16, tok = fp32_pair
    ref = _bank(copy.deepcopy(fp32), tok, perturb)
    bank = _bank(copy.deepcopy(bf16), tok, perturb)
    for name in ADAPTERS:   # the same fp32 adapter weights in both
        bank.load_state(name, ref.state(name))
    return bank, ref


@pytest.fixture(scope="module")
def rollout(fp32_pair):
    """A two-domain rollout of the fp32 base (real prompts, random-model completions)."""
    fp32, _, tok = fp32_pair
    examples = (factworld.generate("binding", "test", n=3, length=8)
                + factworld.generate("recall", "test", n=3, length=16))
    return sample(fp32, tok, examples, max_new_tokens=6, generator=torch.Generator().manual_seed(5))


def _bytes(bank, name) -> int:
    return sum(p.numel() * p.element_size() for p in bank.parameters(name).values())


def _fused(monkeypatch) -> list[bool]:
    """Record what `routing._fusable` answers in each routed LoRA layer."""
    seen, real = [], routing._fusable
    monkeypatch.setattr(routing, "_fusable", lambda *a: seen.append(real(*a)) or seen[-1])
    return seen


def test_compacted_scores_agree_with_fp32_adapters_within_the_bf16_floor(banks, rollout, monkeypatch):
    bank, ref = banks
    mask = rollout.completion_mask.bool()
    exact = routing.teacher_outputs(ref, rollout, TEACHERS, k=8).logprobs[mask]         # fp32 model, fp32 adapters
    fused = _fused(monkeypatch)
    fp32_adapters = routing.teacher_outputs(bank, rollout, TEACHERS, k=8).logprobs[mask]
    assert fused and not any(fused)          # fp32 adapters on a bf16 base: the cast-and-add path
    for name in TEACHERS.values():
        assert bank.compact(name) == torch.bfloat16
    fused.clear()
    mixed = routing.teacher_outputs(bank, rollout, TEACHERS, mode="mixed", k=8)
    assert fused and all(fused)              # compacted: every layer's update is one fused addmm
    swap = routing.teacher_outputs(bank, rollout, TEACHERS, mode="swap", k=8)           # peft's own forward
    base = routing.teacher_outputs(bank, rollout, {d: "base" for d in TEACHERS}, k=8).logprobs[mask]
    effect = (fp32_adapters - base).abs().max().item()       # what the teachers change at all
    floor = (fp32_adapters - exact).abs().max().item()
    compact = (mixed.logprobs[mask] - fp32_adapters).abs().max().item()
    to_exact = (mixed.logprobs[mask] - exact).abs().max().item()
    modes = (mixed.logprobs[mask] - swap.logprobs[mask]).abs().max().item()
    print(f"\nmax |delta log-prob| over {int(mask.sum())} tokens: bf16 base with fp32 adapters vs the fp32 model "
          f"(floor) {floor:.2e}; compacted vs fp32 adapters {compact:.2e}; compacted vs the fp32 model "
          f"{to_exact:.2e}; compacted mixed vs swap {modes:.2e}; the teachers vs the base {effect:.2e}")
    assert floor > 0                         # bf16 does round
    assert effect > 10 * BOUND * floor       # the bound could catch a dropped or mis-scaled update
    assert compact <= BOUND * floor
    assert to_exact <= BOUND * floor
    assert modes <= BOUND * floor


def test_compact_halves_the_bytes_and_keeps_the_others(banks):
    bank, _ = banks
    name = TEACHERS["binding"]
    before, other = _bytes(bank, name), bank.state(TEACHERS["recall"])
    rounded = {n: t.to(torch.bfloat16) for n, t in bank.state(name).items()}
    bank.compact(name)
    assert _bytes(bank, name) * 2 == before
    assert all(p.dtype == torch.bfloat16 and not p.requires_grad for p in bank.parameters(name).values())
    assert all(torch.equal(bank.state(name)[n], t) for n, t in rounded.items())    # cast once, nothing else
    assert bank.compacted == {name}
    bank.create("another")                   # peft casts a new adapter to fp32: only that one
    assert {p.dtype for p in bank.parameters(name).values()} == {torch.bfloat16}
    assert {p.dtype for p in bank.parameters("another").values()} == {torch.float32}
    assert all(torch.equal(bank.state(TEACHERS["recall"])[n], t) for n, t in other.items())


def test_a_compacted_adapter_is_never_trained(banks, tmp_path):
    bank, _ = banks
    name = TEACHERS["binding"]
    bank.save(name, tmp_path / "fp32")
    bank.compact(name)
    with pytest.raises(ValueError, match=r"compact.*bank\.load"):
        with bank.use(name, trainable=True):
            pass
    with bank.use(name) as _:               # frozen use is fine
        pass
    with pytest.raises(ValueError, match="compact"):
        bank.start(name, seed=0, role="teacher")
    cfg = MOPDConfig.for_model("qwen3", experiment=None, progress=False, steps=1, student=name,
                               teachers={"binding": TEACHERS["recall"], "recall": TEACHERS["recall"]})
    with pytest.raises(ValueError, match="compact"):
        train_student(bank, cfg)
    assert bank.compacted == {name} and {p.dtype for p in bank.parameters(name).values()} == {torch.bfloat16}
    bank.load(name, tmp_path / "fp32")     # the way back: fp32 again, trainable
    assert not bank.compacted and {p.dtype for p in bank.parameters(name).values()} == {torch.float32}
    with bank.use(name, trainable=True):
        assert all(p.requires_grad for p in bank.parameters(name).values())


def test_a_compacted_adapter_saves_in_bf16_and_loads(banks, tmp_path):
    bank, _ = banks
    name = TEACHERS["binding"]
    bank.compact(name)
    held = bank.state(name)
    folder = bank.save(name, tmp_path / "compact")
    saved = safetensors.torch.load_file(str(folder / "adapter_model.safetensors"))
    assert saved and {t.dtype for t in saved.values()} == {torch.bfloat16}     # what it holds, written as is
    bank.load("reloaded", folder)                                              # peft's loader: fp32 again
    again = bank.state("reloaded")
    assert {t.dtype for t in again.values()} == {torch.float32}
    assert all(torch.equal(again[n.replace(f".{name}.", ".reloaded.")].to(torch.bfloat16), t) for n, t in held.items())


def test_on_an_fp32_base_nothing_changes(banks):
    _, ref = banks
    name = TEACHERS["binding"]
    ptrs = {n: p.data_ptr() for n, p in ref.parameters(name).items()}
    assert ref.compact(name) == torch.float32
    assert {n: p.data_ptr() for n, p in ref.parameters(name).items()} == ptrs
    assert not ref.compacted
    with ref.use(name, trainable=True):     # still an ordinary, trainable adapter
        pass
    with pytest.raises(ValueError, match="no adapter weights"):
        ref.compact("base")


def test_train_student_compacts_the_routed_teachers_when_asked(banks):
    bank, _ = banks
    cfg = MOPDConfig.for_model("qwen3", experiment=None, progress=False, steps=1, prompts_per_domain=1,
                               eval_every=0, track_steps=(), max_new_tokens=6, compact_teachers=True)
    train_student(bank, cfg)
    assert bank.compacted == set(TEACHERS.values())
    student = bank.state("student")
    assert {t.dtype for t in student.values()} == {torch.float32}
    assert any(t.abs().sum() > 0 for n, t in student.items() if "lora_B" in n)   # fresh (B = 0), then trained
    assert MOPDConfig().compact_teachers is False
