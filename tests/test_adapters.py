"""Tests for mopd_mini.adapters.AdapterBank: zero-init adapters sit exactly at the base, the bank's
names and replacement, save/load in peft's own format, origin checks, and which weights train."""

import copy

import pytest
import torch
from peft import PeftModel
from transformers import Qwen3ForCausalLM

import factworld
from mopd_mini import BASE, AdapterBank
from mopd_mini.adapters import ORIGIN_FILE
from mopd_mini.models import tiny_config
from mopd_mini.rollout import chat_prompt


@pytest.fixture(scope="module")
def batch(tok):
    """A left-padded batch of two chat prompts of different lengths (input_ids, attention_mask)."""
    prompts = [factworld.generate("binding", "test", n=1, length=8)[0].prompt,
               factworld.generate("recall", "test", n=1, length=16)[0].prompt]
    return tok([chat_prompt(tok, p) for p in prompts], add_special_tokens=False, padding=True, return_tensors="pt")


@torch.no_grad()
def logits(model, batch):
    """The model's logits on the batch, (B, P, V)."""
    return model(**batch).logits


def trainable(bank):
    """Names of every parameter of the bank's model that requires grad."""
    return {n for n, p in bank.model.named_parameters() if p.requires_grad}


def test_fresh_adapter_is_exactly_the_base(bank, tiny, batch):
    """B = 0 at init, so a new adapter's logits equal the plain base's exactly."""
    bank.create("student", seed=3)
    lora_B = [p for n, p in bank.parameters("student").items() if "lora_B" in n]
    assert lora_B and all(torch.count_nonzero(p) == 0 for p in lora_B)
    with bank.use("student") as model:
        assert torch.equal(logits(model, batch), logits(tiny[0], batch))


def test_use_base_is_the_plain_base(bank, tiny, batch, perturb):
    """bank.use(BASE) disables a non-trivial active adapter: logits equal the plain base; on exit the
    adapter is back."""
    bank.create("one", seed=1)
    perturb(bank, "one", seed=5)
    with bank.use("one") as model:
        with_a = logits(model, batch)
    assert not torch.allclose(with_a, logits(tiny[0], batch), atol=1e-3)  # the adapter does something
    with bank.use("one"), bank.use(BASE) as model:
        torch.testing.assert_close(logits(model, batch), logits(tiny[0], batch), rtol=0, atol=1e-6)
    with bank.use("one") as model:
        torch.testing.assert_close(logits(model, batch), with_a, rtol=0, atol=0)


def test_use_base_on_an_empty_bank(bank, tiny, batch):
    """With no adapter yet, the bank's names are empty and use(BASE) runs the plain base."""
    assert bank.names == []
    with bank.use(BASE) as model:
        assert torch.equal(logits(model, batch), logits(tiny[0], batch))


def test_recreate_replaces_the_adapter(bank, tiny, batch, perturb):
    """Re-creating an adapter (a notebook cell run twice) keeps one copy of the name and resets its
    weights to the fresh init of that seed."""
    bank.create("other", seed=9)
    bank.create("one", seed=1)
    fresh = bank.state("one")
    perturb(bank, "one", seed=5)
    bank.create("one", seed=1)
    assert sorted(bank.names) == ["one", "other"]
    again = bank.state("one")
    assert again.keys() == fresh.keys()
    for n in fresh:
        assert torch.equal(again[n], fresh[n]), n
    with bank.use("one") as model:
        assert torch.equal(logits(model, batch), logits(tiny[0], batch))


def test_recreate_the_only_adapter_leaves_only_it(bank):
    """Re-creating the bank's only adapter leaves exactly that name in the bank (no helper adapters)."""
    bank.create("one", seed=1)
    bank.create("one", seed=1)
    assert bank.names == ["one"]


def test_recreate_keeps_every_adapter_frozen(bank):
    """Re-creating an adapter that was active leaves every adapter frozen."""
    bank.create("one", seed=1)
    bank.create("two", seed=2)
    assert trainable(bank) == set()
    bank.create("one", seed=1)  # "one" was the active adapter
    assert trainable(bank) == set()


def test_create_refuses_the_base_name(bank):
    """BASE is reserved for 'no adapter'."""
    with pytest.raises(ValueError, match="reserved"):
        bank.create(BASE)


def test_save_is_peft_format(bank, base_copy, tiny, batch, perturb, tmp_path):
    """A saved adapter is a peft folder: PeftModel.from_pretrained on a fresh base reproduces its logits."""
    bank.create("t", seed=2)
    perturb(bank, "t", seed=6)
    with bank.use("t") as model:
        expected = logits(model, batch)
    folder = bank.save("t", tmp_path / "t")
    assert {"adapter_config.json", "adapter_model.safetensors", ORIGIN_FILE} <= {f.name for f in folder.iterdir()}
    fresh = copy.deepcopy(tiny[0])
    peft_model = PeftModel.from_pretrained(fresh, str(folder)).eval()
    torch.testing.assert_close(logits(peft_model, batch), expected, rtol=0, atol=1e-6)


def test_bank_load_reproduces_and_freezes(bank, tiny, tok, batch, perturb, tmp_path):
    """bank.load of a saved adapter reproduces its logits, in a new bank and under a new name, and the
    loaded weights are frozen."""
    bank.create("t", seed=2)
    perturb(bank, "t", seed=6)
    with bank.use("t") as model:
        expected = logits(model, batch)
    bank.save("t", tmp_path / "t")

    other = AdapterBank(copy.deepcopy(tiny[0]), tok)
    other.load("teacher", tmp_path / "t")
    assert other.names == ["teacher"]
    with other.use("teacher") as model:
        torch.testing.assert_close(logits(model, batch), expected, rtol=0, atol=1e-6)
    assert trainable(other) == set()

    bank.load("copy", tmp_path / "t")
    assert sorted(bank.names) == ["copy", "t"]
    with bank.use("copy") as model:
        torch.testing.assert_close(logits(model, batch), expected, rtol=0, atol=1e-6)
    assert trainable(bank) == set()
    for (_, p), (_, q) in zip(sorted(bank.state("t").items()), sorted(bank.state("copy").items())):
        assert torch.equal(p, q)


def test_unknown_adapter_name_lists_the_bank(teacher_bank, tmp_path):
    """An unknown name raises ValueError naming what the bank holds, wherever a name is taken."""
    for call in (lambda: teacher_bank.use("nope").__enter__(), lambda: teacher_bank.parameters("nope"),
                 lambda: teacher_bank.state("nope"), lambda: teacher_bank.save("nope", tmp_path / "x")):
        with pytest.raises(ValueError, match="nope") as err:
            call()
        assert "teacher_binding" in str(err.value) and "teacher_recall" in str(err.value)


def test_load_without_adapter_config_is_file_not_found(bank, tmp_path):
    """A folder without adapter_config.json (never trained, wrong path) raises FileNotFoundError."""
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="adapter_config.json"):
        bank.load("t", tmp_path / "empty")
    with pytest.raises(FileNotFoundError):
        bank.load("t", tmp_path / "does_not_exist")


def corrupt_copy(bank, name, folder, payload=b"not a safetensors file" * 4):
    """Save `name` to `folder`, then overwrite its weights file with `payload`."""
    bank.save(name, folder)
    (folder / "adapter_model.safetensors").write_bytes(payload)
    return folder


def test_corrupt_weights_are_a_value_error(bank, tmp_path):
    """A corrupt or truncated adapter_model.safetensors raises ValueError, in an empty or a full bank."""
    bank.create("t", seed=2)
    bad = corrupt_copy(bank, "t", tmp_path / "bad")
    with pytest.raises(ValueError, match="could not load"):
        bank.load("x", bad)
    good = bank.save("t", tmp_path / "good").joinpath("adapter_model.safetensors").read_bytes()
    truncated = corrupt_copy(bank, "t", tmp_path / "truncated", payload=good[: len(good) // 2])
    with pytest.raises(ValueError, match="could not load"):
        bank.load("y", truncated)


def test_failed_load_leaves_the_bank_unchanged(bank, tmp_path):
    """After a corrupt adapter is refused, the bank holds exactly the adapters it held before."""
    bank.create("t", seed=2)
    bad = corrupt_copy(bank, "t", tmp_path / "bad")
    with pytest.raises(ValueError):
        bank.load("x", bad)
    assert bank.names == ["t"]


def foreign_bank(tok, seed=123):
    """A bank on another tiny-architecture model: same tokenizer and shapes, different random weights."""
    config = tiny_config(len(tok), pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen3ForCausalLM(config).eval()
    return AdapterBank(model, tok)


def test_foreign_adapter_is_refused_unless_allowed(bank, tok, perturb, tmp_path):
    """An adapter trained on another base is refused (ValueError naming allow_foreign); with
    allow_foreign=True it loads with its saved weights."""
    other = foreign_bank(tok)
    other.create("f", seed=4)
    perturb(other, "f", seed=8)
    other.save("f", tmp_path / "f")
    bank.create("mine", seed=0)
    with pytest.raises(ValueError, match="allow_foreign"):
        bank.load("f", tmp_path / "f")
    assert "f" not in bank.names
    bank.load("f", tmp_path / "f", allow_foreign=True)
    assert sorted(bank.names) == ["f", "mine"]
    for (_, p), (_, q) in zip(sorted(bank.state("f").items()), sorted(other.state("f").items())):
        assert torch.equal(p, q)


def test_same_origin_adapter_loads_without_allow_foreign(bank, tiny, tok, tmp_path):
    """An adapter from another bank on an identical copy of the base is of the same origin."""
    other = AdapterBank(copy.deepcopy(tiny[0]), tok)
    other.create("s", seed=1)
    other.save("s", tmp_path / "s")
    bank.load("s", tmp_path / "s")
    assert bank.names == ["s"]


def test_use_trainable_unfreezes_exactly_that_adapter(teacher_bank):
    """use(name, trainable=True) makes exactly that adapter's weights require grad (no base weight,
    no other adapter), and every flag is back to frozen on exit."""
    teacher_bank.create("student", seed=0)
    assert trainable(teacher_bank) == set()
    with teacher_bank.use("student", trainable=True):
        assert trainable(teacher_bank) == set(teacher_bank.parameters("student"))
    assert trainable(teacher_bank) == set()
    with teacher_bank.use("student"):
        assert trainable(teacher_bank) == set()


def test_nested_use_restores_the_student(teacher_bank, batch, perturb):
    """A teacher (or the base) used inside a trainable student context leaves the student active and
    trainable afterwards, and nothing trainable inside the teacher's context."""
    teacher_bank.create("student", seed=0)
    perturb(teacher_bank, "student", seed=11)
    student_params = set(teacher_bank.parameters("student"))
    with teacher_bank.use("student", trainable=True) as model:
        student_logits = logits(model, batch)
        for inner in ("teacher_binding", BASE):
            with teacher_bank.use(inner) as inner_model:
                inner_logits = logits(inner_model, batch)
                if inner != BASE:
                    assert trainable(teacher_bank) == set()
            assert not torch.allclose(inner_logits, student_logits, atol=1e-3)
            assert trainable(teacher_bank) == student_params
            assert torch.equal(logits(model, batch), student_logits)  # the student is active again
    assert trainable(teacher_bank) == set()


def test_use_restores_the_active_adapter(teacher_bank, batch):
    """Leaving use(b) inside use(a) runs a again."""
    with teacher_bank.use("teacher_binding") as model:
        first = logits(model, batch)
        with teacher_bank.use("teacher_recall"):
            pass
        assert torch.equal(logits(model, batch), first)


def test_use_base_leaves_adapters_frozen(teacher_bank):
    """Running the base (as evaluate() does first) leaves every adapter frozen."""
    assert trainable(teacher_bank) == set()
    with teacher_bank.use(BASE):
        pass
    assert trainable(teacher_bank) == set()


def test_state_and_load_state_round_trip(teacher_bank):
    """state() is a detached copy; load_state writes it back."""
    saved = teacher_bank.state("teacher_binding")
    with torch.no_grad():
        for p in teacher_bank.parameters("teacher_binding").values():
            p.add_(1.0)
    assert not all(torch.equal(saved[n], p) for n, p in teacher_bank.parameters("teacher_binding").items())
    teacher_bank.load_state("teacher_binding", saved)
    for n, p in teacher_bank.parameters("teacher_binding").items():
        assert torch.equal(saved[n], p)


def test_copy_is_identical_and_independent(teacher_bank, batch):
    """A copy gives the source's logits exactly, and training the copy never moves the source."""
    teacher_bank.copy("teacher_binding", "round2")
    with teacher_bank.use("teacher_binding") as m:
        want = logits(m, batch)
    with teacher_bank.use("round2") as m:
        assert torch.equal(logits(m, batch), want)
    source = teacher_bank.state("teacher_binding")
    with torch.no_grad():
        for p in teacher_bank.parameters("round2").values():
            p.add_(1.0)
    for n, t in teacher_bank.state("teacher_binding").items():
        assert torch.equal(t, source[n])
    assert not any(p.requires_grad for p in teacher_bank.parameters("round2").values())


def test_copy_refuses_base_self_and_unknown(teacher_bank):
    for src, dst in (("base", "x"), ("teacher_binding", "teacher_binding"), ("nope", "x")):
        with pytest.raises(ValueError):
            teacher_bank.copy(src, dst)
