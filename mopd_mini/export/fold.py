"""The teachers folded into the base: each adapter folded into a full checkpoint, checked against
the adapter model on probe prompts (FOLD_TOLERANCE); the base saved whole for the student."""

from __future__ import annotations

import copy
from pathlib import Path

import torch

from ..adapters import BASE, AdapterBank
from ..models import load_base
from ..rollout import chat_prompt
from .. import deprecation


FOLD_TOLERANCE = 1e-5  # folded teacher vs its adapter model: fp64 absolute, fp32 relative to max |logit|
# the old names, one release ("merge" is combining adapters, mopd_mini.merge; one adapter into the base: "fold")
__getattr__ = deprecation.old_names(__name__, {"merge_teacher": "mopd_mini.export.fold:fold_teacher",
                                               "MERGE_TOLERANCE": "mopd_mini.export.fold:FOLD_TOLERANCE"})

# ---------------------------------------------------------------------------------------------
# teachers: adapters folded into full checkpoints, checked against the adapter model
# ---------------------------------------------------------------------------------------------


def probe_ids(tokenizer, domains, n: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-padded ids and mask of a few chat-formatted test prompts of every domain."""
    texts = [chat_prompt(tokenizer, ex.prompt) for d in domains.values()
             for ex in d.test_examples(d.eval_lengths[0], n, seed=12345)]
    enc = tokenizer(texts, add_special_tokens=False, padding=True, return_tensors="pt")
    return enc["input_ids"], enc["attention_mask"]


@torch.no_grad()
def _logits(model, ids, mask) -> torch.Tensor:
    return model(input_ids=ids, attention_mask=mask).logits


def _adapter_logits(base, tokenizer, adapter, ids, mask, dtype, allow_foreign) -> torch.Tensor:
    """Logits of the adapter model as the course runs it (AdapterBank: refuses another base)."""
    bank = AdapterBank(copy.deepcopy(base).to(dtype), tokenizer)
    bank.load("teacher", adapter, allow_foreign=allow_foreign)
    with bank.use("teacher") as model:
        return _logits(model, ids, mask)


def fold_teacher(base_name: str, adapter: str | Path, out: str | Path, domains, base=None, tokenizer=None,
                 allow_foreign: bool = False) -> dict:
    """Fold one LoRA adapter into a fresh copy of the base (peft's merge_and_unload), save it as a
    full checkpoint with the tokenizer, and check it against the adapter model on probe prompts.

    Two checks, both against the adapter model (one model in memory at a time besides the base):
      fold   the fold itself, in fp64 (models up to 2e8 parameters; larger: the base's dtype):
             max |logit difference| <= FOLD_TOLERANCE;
      saved  the checkpoint as verl will load it (reloaded from disk, in the base's dtype) against
             the adapter model in that dtype: max |difference| <= FOLD_TOLERANCE x max |logit|.
             fp32 cannot do much better: the adapter model's own fp32-vs-fp64 difference is returned
             beside it (on the tiny base, a few 1e-5 with logits up to 17).
    Returns both differences; a ValueError if either is above its bound."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    if base is None:
        base, tokenizer = load_base(base_name, dtype=torch.float32, device="cpu")
    ids, mask = probe_ids(tokenizer, domains)
    real = mask.bool()
    exact = torch.float64 if sum(p.numel() for p in base.parameters()) <= 2e8 else base.dtype
    exact_want = _adapter_logits(base, tokenizer, adapter, ids, mask, exact, allow_foreign)
    folded = PeftModel.from_pretrained(copy.deepcopy(base).to(exact), str(adapter)).merge_and_unload()
    fold = (_logits(folded, ids, mask) - exact_want)[real].abs().max().item()
    if not fold <= FOLD_TOLERANCE:
        raise ValueError(f"folding {adapter} into the base changes the logits by {fold:.2e} in {exact} (tolerance "
                         f"{FOLD_TOLERANCE:.0e}); the fold is wrong, do not train on it")
    del folded
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    PeftModel.from_pretrained(copy.deepcopy(base), str(adapter)).merge_and_unload().save_pretrained(
        out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    want = _adapter_logits(base, tokenizer, adapter, ids, mask, base.dtype, allow_foreign).float()
    reloaded = AutoModelForCausalLM.from_pretrained(out, dtype=base.dtype).eval()
    saved = (_logits(reloaded, ids, mask).float() - want)[real].abs().max().item()
    scale = want[real].abs().max().item()
    floor = (want.double() - exact_want.double())[real].abs().max().item()  # the adapter model's own rounding
    if not saved <= FOLD_TOLERANCE * scale:
        raise ValueError(f"the folded checkpoint at {out} differs from its adapter {adapter} by {saved:.2e} in "
                         f"the logits (tolerance {FOLD_TOLERANCE:.0e} x {scale:.1f}); do not train on it")
    return {"fold_exact": fold, "exact_dtype": str(exact).replace("torch.", ""), "saved": saved,
            "saved_dtype": str(base.dtype).replace("torch.", ""), "max_logit": scale, "adapter_rounding": floor}


def save_base(base, tokenizer, out: str | Path) -> Path:
    """The student's starting point (the Stage-1 checkpoint: the base) as a full checkpoint."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    base.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    return out


def check_origins(base, tokenizer, teachers: dict, base_name: str, allow_foreign: bool) -> None:
    """Every teacher adapter was trained on this base and tokenizer (AdapterBank's check), before any write."""
    bank = AdapterBank(base, tokenizer)
    for d, path in teachers.items():
        if path == BASE:
            continue
        try:
            bank._check_origin(path, allow_foreign)
        except ValueError as err:
            raise ValueError(f"the {d} teacher does not fit --base {base_name}: {err} On the command line: "
                             "--allow-foreign; or give the --base it was trained on") from err
