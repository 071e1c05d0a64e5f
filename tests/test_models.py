"""Tests for mopd_mini.models and mopd_mini.tokenizer: what load_base returns for each size, its
errors, and the tiny word-level tokenizer (exact round trip, closed vocabulary, save/load)."""

import huggingface_hub.constants
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen3ForCausalLM

import factworld
from mopd_mini import load_base
from mopd_mini.models import BNB_CPU_MIN, QWEN3_ID, QWEN3_RANDOM, TINY_DIR
from mopd_mini.rollout import chat_prompt
from mopd_mini.tokenizer import INSTRUCTION

from tests.conftest import QWEN3_SMALL

THINK_OFF = "<think>\n\n</think>"


# ---------------------------------------------------------------------------------------- models

def test_load_base_tiny_is_a_frozen_qwen3_in_eval_mode():
    """load_base() gives a Qwen3ForCausalLM in eval mode, fp32, with no base weight trainable."""
    model, tokenizer = load_base(device="cpu")
    assert isinstance(model, Qwen3ForCausalLM)
    assert not model.training
    assert all(not m.training for m in model.modules())
    params = list(model.parameters())
    assert params and not any(p.requires_grad for p in params)
    assert params[0].dtype == torch.float32
    assert model.config.vocab_size >= len(tokenizer)


def test_shipped_folder_loads_with_plain_transformers_and_is_small(tiny):
    """The shipped tiny_base/ is an ordinary HF checkpoint (< 20 MB) equal to what load_base gives."""
    size = sum(f.stat().st_size for f in TINY_DIR.iterdir() if f.is_file())
    assert size < 20 * 2**20
    plain = AutoModelForCausalLM.from_pretrained(TINY_DIR).eval()
    assert isinstance(plain, Qwen3ForCausalLM)
    ids = tiny[1]("s0 gives o1 to g2. who is the final holder of o1?", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        torch.testing.assert_close(plain(ids).logits, tiny[0](ids).logits)


def test_random_qwen3_has_full_vocab_and_qwen_chat_format(qwen_random, tok):
    """The shrunken random Qwen3 keeps V = 151,936 and the shrink; its chat prompt carries FactWorld's
    instruction with thinking off, while the tiny model's prompt carries neither."""
    model, qtok = qwen_random
    assert isinstance(model, Qwen3ForCausalLM) and not model.training
    assert model.config.vocab_size == 151_936
    assert model.get_output_embeddings().weight.shape[0] == 151_936
    assert model.config.num_hidden_layers == QWEN3_SMALL["num_hidden_layers"]
    assert not any(p.requires_grad for p in model.parameters())
    prompt = factworld.generate("binding", "test", n=1, length=8)[0].prompt
    qwen_text, tiny_text = chat_prompt(qtok, prompt), chat_prompt(tok, prompt)
    assert INSTRUCTION in qwen_text and THINK_OFF in qwen_text and prompt in qwen_text
    assert INSTRUCTION not in tiny_text and "<think>" not in tiny_text and prompt in tiny_text
    assert tiny_text.endswith("<|assistant|>")
    ids = qtok(qwen_text, add_special_tokens=False)["input_ids"]
    assert qtok.unk_token_id not in ids  # the real tokenizer has no <unk>; the stand-in covers these words


def test_random_qwen3_is_deterministic():
    """Two loads of the random Qwen3 have identical weights (it is seeded, not at the global RNG's mercy)."""
    torch.manual_seed(123)
    a, _ = load_base(QWEN3_RANDOM, shrink=QWEN3_SMALL, dtype=torch.float32, device="cpu")
    torch.manual_seed(456)
    b, _ = load_base(QWEN3_RANDOM, shrink=QWEN3_SMALL, dtype=torch.float32, device="cpu")
    for (n, p), (_, q) in zip(a.named_parameters(), b.named_parameters()):
        assert torch.equal(p, q), n


@pytest.mark.parametrize("quantize", ["4bit", "8bit"])
def test_quantize_on_cpu_with_an_old_bitsandbytes_says_which_version(quantize, monkeypatch):
    """quantize on a CPU with a bitsandbytes older than the CPU kernels raises RuntimeError naming the
    version needed and the one installed (the CPU path itself: tests/test_quant_cpu.py)."""
    import sys
    import types

    monkeypatch.setitem(sys.modules, "bitsandbytes", types.SimpleNamespace(__version__="0.45.5"))
    with pytest.raises(RuntimeError, match=rf"on a CPU needs bitsandbytes >= {BNB_CPU_MIN} .*0\.45\.5"):
        load_base(QWEN3_ID, quantize=quantize, device="cpu")


def test_quantize_without_bitsandbytes_says_how_to_install_it(monkeypatch):
    """No bitsandbytes at all: a RuntimeError with the pip command, before any download."""
    import sys

    monkeypatch.setitem(sys.modules, "bitsandbytes", None)   # import bitsandbytes -> ImportError
    with pytest.raises(RuntimeError, match=r"pip install 'mopd_mini\[quant\]'"):
        load_base(QWEN3_ID, quantize="4bit", device="cpu")


def test_unknown_quantize_is_a_value_error():
    """An unknown quantize value raises ValueError listing the valid ones."""
    with pytest.raises(ValueError, match="4bit"):
        load_base("tiny", quantize="3bit")


def test_quantize_of_the_tiny_model_is_refused():
    """The tiny model cannot be quantised: a ValueError, not a silent fp32 load."""
    with pytest.raises(ValueError, match="quantize"):
        load_base("tiny", quantize="4bit")


def test_missing_hub_id_offline_explains_how_to_pass_a_local_folder(monkeypatch):
    """A hub id that is not cached, offline, raises OSError naming the id and the local-folder fix."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # huggingface_hub reads the variable once, at import: set the constant it reads too
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    name = "no-such-org/no-such-model-mopd-mini-test"
    with pytest.raises(OSError) as err:
        load_base(name, device="cpu")
    message = str(err.value)
    assert name in message
    assert "local folder" in message and "load_base('./Qwen3-1.7B')" in message


@pytest.mark.parametrize("name", ["tiny", QWEN3_ID])
def test_shrink_applies_to_the_random_qwen3_only(name):
    """shrink with any other model raises ValueError before anything is loaded."""
    with pytest.raises(ValueError, match="shrink"):
        load_base(name, shrink={"num_hidden_layers": 1})


# ------------------------------------------------------------------------------------- tokenizer

@pytest.mark.parametrize("answer_style", ["short", "trace"])
@pytest.mark.parametrize("task", ["binding", "recall"])
def test_tiny_tokenizer_round_trips_factworld_text(tok, task, answer_style):
    """decode(encode(text)) == text, with no <unk>, for prompts and answers across lengths and seeds."""
    for length in (2, 8, 16, 32, 64):
        for ex in factworld.generate(task, "train", n=12, length=length, seed=length, answer_style=answer_style):
            for text in (ex.prompt, ex.answer, f"{ex.prompt} {ex.answer}"):
                ids = tok(text, add_special_tokens=False)["input_ids"]
                assert tok.unk_token_id not in ids, text
                assert tok.decode(ids) == text


def test_tiny_tokenizer_is_one_token_per_word(tok):
    """A FactWorld word is one token, `'s` splits off, and the vocabulary ends where the defaults do."""
    ids = tok("g5's a0 is v7.", add_special_tokens=False)["input_ids"]
    assert tok.convert_ids_to_tokens(ids) == ["▁g5", "'s", "▁a0", "▁is", "▁v7", "."]
    edges = tok("g63 o7 v127 s63", add_special_tokens=False)["input_ids"]
    assert tok.unk_token_id not in edges
    for outside in ("g64", "o8", "v128", "s64"):
        assert tok(outside, add_special_tokens=False)["input_ids"] == [tok.unk_token_id]


def test_tiny_tokenizer_has_no_unk_at_default_knob_extremes(tok):
    """Default knobs at the longest lengths the vocabulary allows never produce <unk>."""
    for task, length in (("binding", 64), ("recall", 64)):
        for ex in factworld.generate(task, "test", n=30, length=length, seed=7):
            assert tok.unk_token_id not in tok(ex.prompt, add_special_tokens=False)["input_ids"]


def test_tiny_tokenizer_save_and_reload(tok, tmp_path):
    """save_pretrained + AutoTokenizer.from_pretrained gives the same ids, specials and chat prompt."""
    tok.save_pretrained(tmp_path)
    again = AutoTokenizer.from_pretrained(tmp_path)
    assert again.get_vocab() == tok.get_vocab()
    assert (again.pad_token_id, again.eos_token_id, again.unk_token_id) == (
        tok.pad_token_id, tok.eos_token_id, tok.unk_token_id)
    assert again.padding_side == "left"
    examples = (factworld.generate("recall", "test", n=3, length=12)
                + factworld.generate("binding", "test", n=3, length=8))
    for ex in examples:
        text = chat_prompt(tok, ex.prompt)
        assert chat_prompt(again, ex.prompt) == text
        assert again(text, add_special_tokens=False)["input_ids"] == tok(text, add_special_tokens=False)["input_ids"]
        assert again.decode(tok(ex.prompt, add_special_tokens=False)["input_ids"]) == ex.prompt
