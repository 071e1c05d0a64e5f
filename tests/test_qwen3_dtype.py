"""The Qwen3 path loads in a dtype the device supports: bf16 on a GPU with native bf16, fp16 on one
without (a T4: Colab's free GPU), fp32 on a CPU. The choice is a pure function of what the device
reports, so it is tested here on a CPU by handing it the facts a GPU would report."""

import contextlib

import pytest
import torch

from mopd_mini import load_base, models
from mopd_mini.models import QWEN3_RANDOM, qwen3_dtype

from tests.conftest import QWEN3_SMALL


@pytest.mark.parametrize("device_type, bf16, expected", [
    ("cuda", True, torch.bfloat16),    # A100 / L4 / H100 / H200
    ("cuda", False, torch.float16),    # T4, V100: no native bf16
    ("cpu", False, torch.float32),
    ("cpu", True, torch.float32),      # even a CPU with bf16 instructions: fp32 is the safe default
])
def test_qwen3_dtype_follows_what_the_device_reports(device_type, bf16, expected):
    assert qwen3_dtype(device_type, bf16) == expected


def test_emulated_bf16_does_not_count(monkeypatch):
    """torch reports bf16 on a T4 by default (emulated, slow): the check asks for native support."""
    asked = {}

    def is_bf16_supported(including_emulation=True):
        asked["including_emulation"] = including_emulation
        return including_emulation   # what a T4 answers: True only when emulation counts

    monkeypatch.setattr(torch.cuda, "is_bf16_supported", is_bf16_supported)
    monkeypatch.setattr(torch.cuda, "device", lambda d: contextlib.nullcontext())
    assert models.bf16_supported(torch.device("cuda")) is False
    assert asked == {"including_emulation": False}
    assert models.bf16_supported(torch.device("cpu")) is False


@pytest.mark.parametrize("native_bf16, expected", [(False, torch.float16), (True, torch.bfloat16)])
def test_load_base_on_a_gpu_takes_the_dtype_the_gpu_supports(monkeypatch, native_bf16, expected):
    """load_base's default dtype on "cuda" comes from the device's report (stopped before any CUDA call)."""
    chosen = {}

    class Stop(Exception):
        pass

    def fake_random_qwen3(dtype, quantize, shrink):
        chosen["dtype"] = dtype
        raise Stop

    monkeypatch.setattr(models, "bf16_supported", lambda device: native_bf16)
    monkeypatch.setattr(models, "_random_qwen3", fake_random_qwen3)
    with pytest.raises(Stop):
        load_base(QWEN3_RANDOM, shrink=QWEN3_SMALL, device="cuda")
    assert chosen["dtype"] == expected


def test_load_base_on_cpu_defaults_to_fp32_and_keeps_an_explicit_dtype():
    model, _ = load_base(QWEN3_RANDOM, shrink=QWEN3_SMALL, device="cpu")
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    model, _ = load_base(QWEN3_RANDOM, shrink=QWEN3_SMALL, device="cpu", dtype=torch.bfloat16)
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
