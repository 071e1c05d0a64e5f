"""Stage 2: one teacher per domain, trained by GRPO with FactWorld's verifiable reward; and the
two RL baselines that are the same loop over other domains.

    bank = AdapterBank(*load_base("tiny"))
    train_teacher(bank, GRPOConfig(domain="binding"))                    # a teacher, ~1 CPU minute
    train_teacher(bank, GRPOConfig(domain=("binding", "recall")))        # Mix-RL: one adapter, both
    train_teacher(bank, GRPOConfig(domain="recall", init_from="teacher_binding",
                                   name="cascade_binding_recall", eval_domains=("binding",)))  # Cascade RL

Each step: P training prompts of each domain; G completions per prompt sampled from the adapter
at temperature 1; reward = relaxed match with the gold answer of the prompt's OWN domain (0 for
a completion that runs out of tokens without ending: see `Rollout.rewards`); advantage = the
reward normalised within its group; groups whose G rewards are all equal carry no signal and
are skipped; loss = token-mean policy gradient; AdamW with gradient clip 1.0.

With several domains this loop IS Mix-RL (the paper's baseline: one RL run on the union of the
domains' prompts and rewards, balanced: P prompts of every domain in every step). A cascade is
this loop on domain B started from the adapter trained on domain A (`init_from`), with A kept in
the evaluation (`eval_domains`) so the forgetting curve is logged.

We call it GRPO, as the FactWorld experiment does, but with one update per batch of fresh
samples it is on-policy REINFORCE with a group baseline: the policy ratio is always 1, so there
is no PPO clip and no reference-model KL term.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
from tqdm.auto import tqdm

from . import cost
from .adapters import AdapterBank
from .domains import get_domains
from .evaluation import TEACHER_OF, accuracy_by_length
from .losses import group_advantages, policy_gradient_loss
from .rollout import check_budget, completion_logits, prefill_reusable, sample, token_logprobs
from .runs import Run, adamw, check_loop, guarded_step, preset, train_mode
from .validate import validate


@dataclass
class GRPOConfig:
    """Settings for one teacher (defaults: the tiny model's, tuned; see `for_model`)."""

    domain: str | tuple[str, ...] = "binding"
    """the domain this adapter learns ("binding" or "recall"), or a tuple of domains (Mix-RL)"""
    steps: int = 200
    """optimizer steps"""
    prompts_per_step: int = 8
    """P: distinct prompts of each domain per step"""
    group_size: int = 8
    """G: completions sampled per prompt; the advantage is normalised within each group"""
    lr: float = 1e-3
    """AdamW learning rate (LoRA on the tiny model: 1e-3; Qwen3 in the original: 1e-4)"""
    temperature: float = 1.0
    """sampling temperature of the rollouts"""
    max_new_tokens: int = 4
    """completion budget: the answer, its period and the end of turn (tiny: 3 tokens; Qwen3's tokenizer: up to 6, e.g. `v127.`)"""
    grad_clip: float = 1.0
    """max global gradient norm"""
    eval_every: int = 25
    """greedy accuracy on held-out test prompts every this many steps (0: never)"""
    eval_n: int = 64
    """test prompts per evaluated length"""
    eval_split: str = "test"
    """which split the periodic evaluations use: "test", or "val" when choosing hyperparameters"""
    seed: int = 0
    """seeds the adapter's init, the prompts and the sampling"""
    experiment: str | None = "course"
    """runs/<experiment>/<adapter>/ holds the run; None keeps it in memory"""
    checkpoint_every: int = 50
    """steps between checkpoints (a killed run resumes from the last one)"""
    progress: bool = True
    """show a progress bar"""
    gradient_checkpointing: bool = False
    """recompute activations in the backward (on in the Qwen3 presets: fits a 24 GB GPU)"""
    name: str | None = None
    """the adapter's name (None: teacher_<domain> for one domain, mixrl for several)"""
    init_from: str | None = None
    """an adapter in the bank to start from (a copy of it; Cascade RL, multi-round); None: fresh, B = 0"""
    eval_domains: tuple[str, ...] = ()
    """domains evaluated besides the trained ones (a cascade keeps its first domain here)"""

    def __post_init__(self):
        if isinstance(self.eval_domains, list):  # a str stays one, for check() to refuse (validate)
            self.eval_domains = tuple(self.eval_domains)

    @classmethod
    def for_model(cls, model: str = "tiny", **overrides) -> "GRPOConfig":
        """Defaults for a model size: the tiny model's, or the FactWorld experiment's for Qwen3.
        Under MOPD_FAST=1 (the CI mode) steps halve and runs go to runs/<experiment>-fast/."""
        qwen3 = dict(lr=1e-4, max_new_tokens=8, eval_n=100, gradient_checkpointing=True)
        return preset(cls, model, qwen3, overrides)

    def check(self) -> None:
        """A ValueError naming the field and the fix for any setting the trainer cannot use."""
        validate(self)  # every field by its annotation first: the checks below compare numbers
        get_domains(self.domains)
        if self.eval_domains:
            get_domains(self.eval_domains)
        if self.init_from is not None and self.init_from == self.adapter:
            raise ValueError(f"init_from={self.init_from!r} is the adapter being trained; start from "
                             "another adapter, or give this run another name")
        if self.prompts_per_step < 1:
            raise ValueError(f"prompts_per_step must be >= 1, got {self.prompts_per_step}")
        if self.group_size < 2:
            raise ValueError(f"group_size must be >= 2: the advantage compares the completions of one "
                             f"prompt, and a group of one never learns; got {self.group_size}")
        check_loop(self)

    @property
    def domains(self) -> tuple[str, ...]:
        return (self.domain,) if isinstance(self.domain, str) else tuple(self.domain)

    @property
    def adapter(self) -> str:
        if self.name:
            return self.name
        return TEACHER_OF.format(self.domain) if len(self.domains) == 1 else "mixrl"


def train_teacher(bank: AdapterBank, cfg: GRPOConfig) -> Run:
    """Create (or copy from `cfg.init_from`, or resume) the adapter and train it with GRPO on
    `cfg.domain` (one domain: a teacher; several: Mix-RL)."""
    cfg.check()
    domains = get_domains(cfg.domains)
    evaluated = get_domains(dict.fromkeys(cfg.domains + cfg.eval_domains))
    check_budget(bank.tokenizer, domains, cfg.max_new_tokens)
    if cfg.init_from is not None:
        bank.check(cfg.init_from)
    bank.claim(cfg.adapter, "teacher")
    run = Run.open(cfg.experiment, cfg.adapter, cfg)  # names, the folder's role, the checkpoint's config
    bank.start(cfg.adapter, cfg.init_from, seed=cfg.seed, role="teacher")
    bank.set_checkpointing(cfg.gradient_checkpointing)
    params = list(bank.parameters(cfg.adapter).values())
    optimizer = adamw(params, cfg.lr)
    generator = torch.Generator().manual_seed(cfg.seed)
    start = run.resume(bank, cfg.adapter, optimizer, generator)
    P, G, D = cfg.prompts_per_step, cfg.group_size, len(domains)
    with bank.use(cfg.adapter, trainable=True) as model:
        # prefill once: ONE grad prefill per distinct prompt, shared by its G completions (the
        # sampler's; see rollout.completion_logits); where train mode differs from eval mode, a second pass
        reuse = prefill_reusable(model, cfg.gradient_checkpointing)
        for step in tqdm(range(start, cfg.steps + 1), desc=cfg.adapter, disable=not cfg.progress,
                         initial=start - 1, total=cfg.steps):
            # --- sample: G completions for each of P prompts of every domain, from the adapter -----
            started = time.perf_counter()
            prompts = [ex for d in domains.values() for ex in d.train_examples(step, P, cfg.seed)]  # D*P
            rollout = sample(model, bank.tokenizer, [ex for ex in prompts for _ in range(G)],
                             temperature=cfg.temperature, max_new_tokens=cfg.max_new_tokens, generator=generator,
                             grad_prefill=reuse)
            # --- reward (each prompt's own domain) and group-normalised advantage ----------------
            rewards = rollout.rewards(bank.tokenizer).view(D * P, G)      # (D*P, G) in {0, 1}
            advantages, keep = group_advantages(rewards)                  # (D*P, G), (D*P,)
            row = {"step": step, "reward": rewards.mean().item(), "groups_kept": keep.float().mean().item(),
                   **cost.sampled(rollout, trains=bool(keep.any()))}
            if D > 1:                                                     # Mix-RL: per domain too
                for i, d in enumerate(domains):
                    row[f"reward/{d}"] = rewards[i * P:(i + 1) * P].mean().item()
            # --- policy gradient on the kept groups only ------------------------------------
            if keep.any():
                mask = rollout.completion_mask * keep.repeat_interleave(G)[:, None]   # (D*P*G, C)
                with train_mode(model, enabled=not reuse):
                    logits = completion_logits(model, rollout, prefill=rollout.prefill)  # (D*P*G, C, V)
                logprobs = token_logprobs(logits, rollout.completion_ids)               # (D*P*G, C)
                loss, _ = policy_gradient_loss(logprobs, advantages.view(-1), mask)
                row.update(loss=loss.item(), **guarded_step(loss, params, optimizer, cfg.grad_clip))
                row.update({**cost.trained(rollout), "cost/loss_tokens": int(mask.sum())})  # forward over all rows
            run.seconds += time.perf_counter() - started  # wall time, kept out of the (deterministic) metrics
            # --- evaluate, log, checkpoint ------------------------------------------------------
            if cfg.eval_every and (step % cfg.eval_every == 0 or step == cfg.steps):
                row.update(accuracy_by_length(model, bank.tokenizer, evaluated, cfg.eval_n, cfg.eval_split))
            run.log(row)
            if step % cfg.checkpoint_every == 0 or step == cfg.steps:
                run.save(step, bank, cfg.adapter, optimizer, generator)
    run.finish(bank, cfg.adapter)
    return run
