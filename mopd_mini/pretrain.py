"""Stage 1 for the tiny path: train the shipped base from scratch, with dense supervision.

    python -m mopd_mini.pretrain                  # ~3 CPU minutes; writes mopd_mini/tiny_base/
    python -m mopd_mini.pretrain --out /tmp/base --steps 500

What makes it learn (docs/tiny_base.md has the measurements): half of every batch is a
content-based INDUCTION task (a random token span, a gap of fresh random tokens, then the span
again, with loss on the repeat). It forces the "find the earlier occurrence of this token and
copy what followed it" circuit, which FactWorld recall and binding both need and which a small
transformer trained on FactWorld alone never found in our probes. The other half is FactWorld
binding and recall in the chat format, loss on the answer. Stage 1 sees SHORT lengths only, so
the base has partial skill at the course's longer lengths: the headroom stage 2 (per-domain
teachers) is there to close.

This replaces the paper's Stage-1 SFT checkpoint; the course itself never re-runs it.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from tqdm.auto import tqdm
from transformers import Qwen3ForCausalLM

import factworld

from .models import TINY_DIR, tiny_config
from .tokenizer import build_tiny_tokenizer

IGNORE = -100  # label value that the loss skips


@dataclass
class PretrainConfig:
    """Stage-1 settings for the tiny base (defaults: the shipped checkpoint's)."""

    max_steps: int = 8000
    """give up after this many optimizer steps"""
    target: float = 0.95
    """stop at the first evaluation where BOTH tasks reach this greedy accuracy at the longest
    stage-1 length (when the lookup circuit has formed: between ~1,000 and ~3,000 steps, by seed)"""
    batch_size: int = 32
    """sequences per step"""
    lr: float = 1e-3
    """AdamW learning rate (constant after warm-up)"""
    warmup: int = 50
    """linear warm-up steps"""
    induction_fraction: float = 0.5
    """share of each batch given to the induction task"""
    lengths: tuple[int, int] = (4, 6)
    """FactWorld lengths seen in stage 1, inclusive (binding: events; recall: facts)"""
    induction_span: tuple[int, int] = (6, 16)
    """length of the random span that is repeated"""
    induction_gap: tuple[int, int] = (0, 24)
    """fresh random tokens between the span and its repeat"""
    layers: int = 2
    d_model: int = 128
    heads: int = 4
    d_ff: int = 256
    seed: int = 3
    """seed 3 ships: seed 0 never formed the recall lookup within 7,250 steps (docs/tiny_base.md)"""
    eval_every: int = 250
    """evaluate greedy answer accuracy every this many steps"""
    eval_lengths: tuple[int, ...] = (6, 8, 12, 16, 24, 32)
    eval_n: int = 200
    """test examples per task and length at each evaluation"""
    knobs: dict = field(default_factory=dict)
    """FactWorld knobs per task, e.g. {"recall": {"agent_pool": 32}} (default: the original's)"""
    out: str = str(TINY_DIR)
    """where the checkpoint (save_pretrained format) and its metrics are written"""


# ---------------------------------------------------------------------------------------------
# data: (input_ids, labels) pairs, labels = IGNORE except where the model is graded
# ---------------------------------------------------------------------------------------------


def factworld_pair(tokenizer, example):
    """Chat-formatted prompt + answer; loss on the answer tokens and the end token."""
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": example.prompt}],
                                           add_generation_prompt=True, tokenize=False)
    p_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    a_ids = tokenizer(example.answer, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    return p_ids + a_ids, [IGNORE] * len(p_ids) + a_ids


def induction_pair(rng: random.Random, entity_ids: list[int], cfg: PretrainConfig):
    """span, gap, span again: the repeat is predictable only by looking the span up by content."""
    span = rng.choices(entity_ids, k=rng.randint(*cfg.induction_span))
    gap = rng.choices(entity_ids, k=rng.randint(*cfg.induction_gap))
    ids = span + gap + span
    return ids, [IGNORE] * (len(span) + len(gap) + 1) + span[1:]  # the first repeated token is a guess


def collate(pairs, pad_id):
    """Right-pad a list of (ids, labels) into (B, T) tensors."""
    width = max(len(ids) for ids, _ in pairs)
    ids = torch.full((len(pairs), width), pad_id)
    labels = torch.full((len(pairs), width), IGNORE)
    mask = torch.zeros((len(pairs), width), dtype=torch.long)
    for b, (x, y) in enumerate(pairs):
        ids[b, : len(x)], labels[b, : len(y)], mask[b, : len(x)] = torch.tensor(x), torch.tensor(y), 1
    return ids, labels, mask


def batch(step: int, tokenizer, entity_ids, cfg: PretrainConfig):
    """The batch of one step: a pure function of (step, seed), so a run is reproducible."""
    rng = random.Random(f"{cfg.seed}:{step}")
    pairs = []
    for i in range(cfg.batch_size):
        if rng.random() < cfg.induction_fraction:
            pairs.append(induction_pair(rng, entity_ids, cfg))
        else:
            task = rng.choice(factworld.TASKS)
            ex = factworld.make_example(task, "train", rng.randint(*cfg.lengths), step * cfg.batch_size + i,
                                        cfg.seed, **cfg.knobs.get(task, {}))
            pairs.append(factworld_pair(tokenizer, ex))
    return collate(pairs, tokenizer.pad_token_id)


# ---------------------------------------------------------------------------------------------
# evaluation: greedy accuracy of the answer token (the first answer token decides the score)
# ---------------------------------------------------------------------------------------------


@torch.no_grad()
def answer_accuracy(model, tokenizer, task: str, length: int, n: int, knobs: dict | None = None) -> float:
    """Share of test examples whose greedy first answer token is the gold answer token."""
    examples = factworld.generate(task, "test", n=n, length=length, **(knobs or {}))
    pairs = [factworld_pair(tokenizer, ex) for ex in examples]
    ids, labels, mask = collate(pairs, tokenizer.pad_token_id)
    logits = model(input_ids=ids, attention_mask=mask).logits  # (B, T, V)
    first = (labels != IGNORE).float().argmax(1)  # position of the first answer token
    pred = logits[torch.arange(len(pairs)), first - 1].argmax(-1)  # predicted from the step before
    gold = labels[torch.arange(len(pairs)), first]
    return (pred == gold).float().mean().item()


def evaluate_base(model, tokenizer, lengths, n, knobs=None) -> dict:
    model.eval()
    knobs = knobs or {}
    return {task: {L: answer_accuracy(model, tokenizer, task, L, n, knobs.get(task)) for L in lengths}
            for task in factworld.TASKS}


# ---------------------------------------------------------------------------------------------
# training
# ---------------------------------------------------------------------------------------------


def train(cfg: PretrainConfig):
    torch.set_num_threads(1)  # one thread: float sums in a fixed order, so the command reproduces the
    torch.manual_seed(cfg.seed)  # shipped checkpoint bit for bit (and a model this small gains little from more)
    tokenizer = build_tiny_tokenizer()
    entity_ids = sorted(i for t, i in tokenizer.get_vocab().items()  # sorted: vocab order is arbitrary
                        if t[:1] == "▁" and t[1:2] in "gosv" and t[2:].isdigit())
    ids = dict(pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
    model = Qwen3ForCausalLM(tiny_config(len(tokenizer), layers=cfg.layers, d_model=cfg.d_model,
                                         heads=cfg.heads, d_ff=cfg.d_ff, **ids))
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / cfg.warmup))
    curve, t0 = [], time.time()
    for step in (bar := tqdm(range(1, cfg.max_steps + 1), desc="stage 1", mininterval=5)):
        model.train()
        input_ids, labels, mask = batch(step, tokenizer, entity_ids, cfg)
        loss = model(input_ids=input_ids, attention_mask=mask, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        bar.set_postfix(loss=f"{loss.item():.3f}")
        if step % cfg.eval_every == 0 or step == cfg.max_steps:
            acc = evaluate_base(model, tokenizer, cfg.eval_lengths, cfg.eval_n, cfg.knobs)
            curve.append({"step": step, "seconds": round(time.time() - t0, 1), "loss": loss.item(), "acc": acc})
            bar.write(f"step {step:5d} {time.time() - t0:6.0f}s loss {loss.item():.3f}  " + "  ".join(
                f"{t[:4]} " + "/".join(f"{a:.2f}" for a in acc[t].values()) for t in acc))
            if all(acc[t][cfg.lengths[1]] >= cfg.target for t in acc):
                break
    else:
        print(f"warning: no evaluation reached {cfg.target} on both tasks at length {cfg.lengths[1]} "
              f"within {cfg.max_steps} steps; the checkpoint is under-trained")
    return model, tokenizer, curve


def save_checkpoint(model, tokenizer, curve, cfg: PretrainConfig):
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    model.generation_config.update(do_sample=False, top_k=None, top_p=None, temperature=None)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (out / "pretrain_metrics.json").write_text(json.dumps({"config": asdict(cfg), "curve": curve}, indent=1))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for f, v in asdict(PretrainConfig()).items():
        if isinstance(v, (int, float, str)):
            p.add_argument(f"--{f}", type=type(v), default=v)
    p.add_argument("--lengths", type=int, nargs=2, default=PretrainConfig.lengths)
    p.add_argument("--eval_lengths", type=int, nargs="+", default=PretrainConfig.eval_lengths)
    p.add_argument("--knobs", type=json.loads, default={}, help='JSON, e.g. {"recall": {"agent_pool": 32}}')
    args = p.parse_args(argv)
    if args.lengths[1] not in args.eval_lengths:  # the stopping rule reads the longest stage-1 length
        args.eval_lengths = tuple(sorted({*args.eval_lengths, args.lengths[1]}))
    cfg = PretrainConfig(**vars(args))
    model, tokenizer, curve = train(cfg)
    save_checkpoint(model, tokenizer, curve, cfg)
    print(f"wrote {cfg.out}")


if __name__ == "__main__":
    main()
