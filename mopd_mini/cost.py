"""What a training run cost: tokens by kind, a FLOPs estimate with its formula, wall time.

Every trainer (GRPO, MOPD, the offline trainer and its `collect`) logs, per step, the tokens
each kind of forward ran over (real tokens only: left padding and the pads after EOS are not
counted, although a padded batch computes them):

    cost/sample_prefill_tokens   prompt tokens the SAMPLER prefilled (once per distinct prompt:
                                 GRPO's G completions of one prompt share one prefill)
    cost/generated_tokens        tokens sampled one at a time (decode steps over the KV cache),
                                 up to and including EOS, by whoever samples (the student in
                                 GRPO and MOPD, the teachers in `collect` and in MOPD's
                                 off-policy steps, lmbda < 1)
    cost/teacher_prefill_tokens  prompt + completion tokens a TEACHER forward ran over
                                 (MOPD's routed scoring; soft-label distillation's soft labels)
    cost/trained_tokens          prompt + completion tokens of the student's training forward
                                 and backward (the loss itself sits on the completion tokens:
                                 `cost/loss_tokens`)

An off-policy MOPD step (GKD's lmbda < 1, `distill.off_policy_rollout`) counts the routed
teachers' sampling in the same two sampler keys: each teacher prefills its domain's distinct
prompts and generates their completions; the student then trains on prompt + completion of every
row (no sampler prefill of its own to reuse), and the teachers score them as on any step. Gold
prefixes (lmbda_prefix="gold") sample nothing: both sampler keys are 0 on such a step.

When the trainer trains on the sampler's own prefill (prefill once: `rollout.prefill` is set),
that prefill IS the training forward over the prompt: it is counted once, as trained tokens
(each distinct prompt once, plus every row's completion), and not again as a sampler prefill; in a
GRPO step that trains nothing (every group's rewards equal) it is counted as a sampler prefill.

The stuck student's cures add nothing these counters count, and the ledger says so rather than
leaving it unsaid: the forward KL (loss "fkl") and the generalised JSD ("jsd") read the same routed
teacher forward as the exact reverse KL (full-vocabulary logits of every row), so the same
teacher-prefill tokens; support matching (topk_support) reads the same top-k the plain Top-k
gathers; top_p samples the same number of tokens a step (a sort of each decode step's
distribution, not a matrix multiply, so outside the FLOPs estimate). Their extra work is per
position over the vocabulary (a mixture's log for jsd, a renormalisation over k for support
matching, the sort for top_p), O(V) per token against the 2 N per token of a forward:
below the attention scores this estimate already leaves out.

And the run's wall time of its training steps (no evaluations, no checkpoints) is `Run.seconds`
(kept in checkpoint.pt, out of metrics.jsonl, which stays byte-identical across runs of a seed).

`totals(metrics)` sums the counters over a run; `flops(totals, n_base, n_adapter)` estimates

    FLOPs = (2 N + 2 n) (sample_prefill + generated + teacher_prefill)  forwards through an adapter
          + (4 N + 6 n) trained                                        forward + LoRA backward

with N the base's parameters in matrix multiplies (the tied LM head counted once, the embedding
lookup not) and n the adapter's. A forward costs 2 per weight and token (a multiply and an add),
through the frozen base (2 N) and the adapter (2 n): every model here, sampler, student or
teacher, is an adapter on the base. A trained token adds the backward: activation gradients
through every frozen layer (dX = dY W^T: 2 N) and through the adapter (2 n), and weight gradients
for the adapter only (dA, dB: 2 n), so 2 N + 2 n forward and 2 N + 4 n backward. Full fine-tuning
would be 6 N. Conventions, stated: a teacher scored with folded weights (the tiny path's
`routing.folded_weights`) really costs 2 N a token, not 2 N + 2 n; the estimate counts every
teacher as an adapter, which is what it is at Qwen3-1.7B's size. Not counted: attention scores
(2 x layers x context x width per token; a few % at these lengths), the LM head over positions
that `logits_to_keep` skips, activation checkpointing's extra forward (+2 N + 2 n per trained
token when on), and the periodic evaluations (diagnostics, not training; they are excluded from
Run.seconds too).

A method's cost, as every study's page gives it, is two totals with their FLOPs
(`method_costs`): its own stage, and its pipeline, the stage plus what it needs (its teachers,
each counted once).
"""

from __future__ import annotations

from . import deprecation
from .rollout import Rollout

COUNT_VERSION = 2
"""the version of this counting, kept with every run (`Run.count_version`) and every study row, so that a
study that reloads runs can tell counters of older code from today's: 1 counted prefill once (the
sampler's prompt prefill as the training forward); 2 counts a GRPO step that trains nothing and
UCMOPD's second sampling. Raise it whenever what a counter counts changes. Records written before it
was named so call it "ledger" (`count_version_of` reads either)."""
KINDS = ("sample_prefill_tokens", "generated_tokens", "teacher_prefill_tokens", "trained_tokens", "loss_tokens")
FORMULA = ("FLOPs = (2N + 2n) x (sampler prefill + generated + teacher prefill) tokens + (4N + 6n) x trained "
           "tokens; N = base matmul parameters, n = adapter parameters")


def _distinct_prompt_tokens(rollout: Rollout) -> int:
    """Real prompt tokens of the rollout's distinct prompts (the sampler prefills each once)."""
    first = {}
    for i, ex in enumerate(rollout.examples):
        first.setdefault(ex.prompt, i)
    return int(rollout.attention_mask[:, :rollout.prompt_len][list(first.values())].sum())


def sampled(rollout: Rollout, trains: bool = True) -> dict[str, int]:
    """Sampler cost of one rollout: distinct prompts' prefill (0 when it is the training forward:
    prefill once, counted by `trained`), and the generated tokens. `trains=False`: this rollout is
    not trained on (a GRPO step whose every group has equal rewards), so a prefill run with grad
    for a training forward that never comes is still a forward, and is counted here."""
    prefill = 0 if rollout.prefill is not None and trains else _distinct_prompt_tokens(rollout)
    return {"cost/sample_prefill_tokens": prefill, "cost/generated_tokens": int(rollout.completion_mask.sum())}


def forward_tokens(rollout: Rollout, rows=None) -> int:
    """Real (prompt + completion) tokens a forward over the rollout's rows runs over."""
    mask = rollout.attention_mask if rows is None else rollout.attention_mask[rows]
    return int(mask.sum())


def trained(rollout: Rollout) -> dict[str, int]:
    """Cost of the student's training forward + backward: over the whole rollout, or, on the
    sampler's prefill (prefill once), over each distinct prompt once plus every completion."""
    tokens = forward_tokens(rollout) if rollout.prefill is None else \
        _distinct_prompt_tokens(rollout) + int(rollout.completion_mask.sum())
    return {"cost/trained_tokens": tokens, "cost/loss_tokens": int(rollout.completion_mask.sum())}


def totals(metrics: list[dict]) -> dict[str, float]:
    """Sum of every cost/* column over a run's metrics (missing kinds count 0)."""
    out = {f"cost/{k}": 0 for k in KINDS}
    for row in metrics:
        for k, v in row.items():
            if k.startswith("cost/"):
                out[k] = out.get(k, 0) + v
    return out


def add(*parts: dict) -> dict[str, float]:
    """The sum of several totals (e.g. teachers + distillation: the whole pipeline)."""
    out: dict[str, float] = {}
    for part in parts:
        for k, v in part.items():
            out[k] = out.get(k, 0) + v
    return out


def param_counts(bank, adapter: str | None = None) -> tuple[int, int]:
    """(N, n): the base's parameters in matrix multiplies (every Linear weight, plus the LM head
    even when tied to the embedding), and the adapter's LoRA parameters (0 if none given)."""
    import torch

    head = bank.base.get_output_embeddings()
    N = sum(m.weight.numel() for name, m in bank.base.named_modules()   # a wrapped layer's base_layer
            if isinstance(m, torch.nn.Linear) and "lora_" not in name and m is not head)  # counts once
    N += head.weight.numel()
    n = 0 if adapter is None else sum(p.numel() for p in bank.parameters(adapter).values())
    return N, n


def flops(total: dict, N: int, n: int) -> float:
    """The estimate written in the module docstring (and in FORMULA)."""
    forward = total.get("cost/sample_prefill_tokens", 0) + total.get("cost/generated_tokens", 0) \
        + total.get("cost/teacher_prefill_tokens", 0)
    return (2 * N + 2 * n) * forward + (4 * N + 6 * n) * total.get("cost/trained_tokens", 0)


def with_flops(total: dict, N: int, n: int) -> dict:
    """`total` with its "flops" (`flops`; a "flops" it holds already is priced again, in its place)."""
    return {**total, "flops": flops(total, N, n)}


def method_costs(stage: dict, needs: list[dict], N: int, n: int) -> tuple[dict, dict]:
    """A method's two costs, each `with_flops` at the method's N and n: its own stage (the totals
    of its own run) and its whole pipeline (the stage plus the totals of what it needs, e.g. its
    teachers, each counted once: `add`). Returns (stage, pipeline)."""
    return with_flops(stage, N, n), with_flops(add(stage, *needs), N, n)


def count_version_of(record: dict, default: int | None = None) -> int | None:
    """The COUNT_VERSION a record was counted by (a checkpoint, a study's row or job record): its
    "count_version", or, in a record written before that name, its "ledger" (history stays as it was
    written); `default` where it has neither (a record older than the version)."""
    for key in ("count_version", "ledger"):
        if key in record:
            return record[key]
    return default


# every public function above checks its annotated arguments when called from outside the package
# (mopd_mini.validate.guard_public); the package's own calls, e.g. the training loop's, skip the checks
from .validate import guard_public  # noqa: E402

guard_public(globals())

__getattr__ = deprecation.old_names(__name__, {"LEDGER": "mopd_mini.cost:COUNT_VERSION"})  # renamed: one release
