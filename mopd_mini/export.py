"""The same experiment on verl: merged teachers, parquet prompts, a reward file and the config.

    python -m mopd_mini.export verl --run runs/course --out build/verl_export
    python -m mopd_mini.export verl --teacher binding=runs/course/teacher_binding \\
                                    --teacher recall=runs/course/teacher_recall --out build/verl_export

When an experiment outgrows one GPU, it moves to verl (0.9.1, `pip install verl`), an existing
distributed engine with multi-teacher on-policy distillation, rather than to more home-made code.
The export writes everything verl needs, in verl's own formats:

    <out>/
      student_base/           the base as a full checkpoint (+ tokenizer): the student starts here
      teachers/<domain>/      each teacher adapter merged into a full checkpoint (+ tokenizer)
      data/train.parquet      the course's training prompts, in the course's batch order
      data/val.parquet        the test prompts the course evaluates on
      reward/factworld_reward.py   FactWorld's relaxed score as verl's `compute_score`
      verl_config.yaml        the Hydra overrides (and the command line) that map MOPDConfig on verl
      run_verl.sh             that command line, ready to launch on a cluster
      export.json             what was exported from where, and the merge checks

All or nothing: the run's settings, the teachers' folders and origins, the GPU layout and --out are
checked before anything is written; the export is built in a hidden staging folder beside --out
and renamed into place at the end (swapped with an existing one in one atomic step where Linux can),
so a failed, interrupted (SIGINT, SIGTERM, SIGHUP) or killed export leaves --out as it was, and the
next export removes a dead one's staging folder. A non-empty --out is refused unless --force, which
replaces a previous export (a folder holding the export's marker, which lists every file the export
wrote with its size and sha256, and nothing else anywhere in its tree: a file added or changed since
is refused by name) by removing exactly the files the marker lists; never the working folder or one
above it, a repository, a home or root folder, the run or a teacher; an empty --out is an error.
Files get the modes the umask gives (the group can read them).

Faithful to the run: every setting comes from the run's config.json (a missing key is an error naming
it); each teacher's domain comes from its own record and a mismatch with the routing is refused unless
--allow-domain-mismatch (recorded in export.json, as is every setting a flag overrides, in
"overridden"); a teacher under a name the student's record names (its checkpoint's copy of
teacher_manifest.json, which the file must match) must have the weights the student read. With
--run, each domain's teacher is the one the student was distilled from
(MOPDConfig.teachers: a round-2 teacher by its folder in the run, or "base", the base itself), and
every MOPDConfig field is carried into the config (CARRIED), has no effect on what is trained
(NO_EFFECT), or is refused by name when set (REFUSED: init_from, UCMOPD's golden_gain and
endorsement, GKD's lmbda), as are a LoRA dropout and the losses below.

verl's loader is the judge of the config, not this module: `make check-verl` loads the YAML into
verl 0.9.1's own Hydra config, `validate_config` and distillation dataclass, in its own venv
(tools/check_verl.py). The mapping, what carries over exactly and what does not, is in
docs/scale_out.md.

What does not carry over, and is refused rather than exported as another objective:
  * loss="topk": verl's only top-k mode, forward_kl_topk, is the FORWARD KL over the teacher's
    top-k, and its per-token top-k term is computed by a fixed function inside the actor's forward,
    so a loss registered in verl's registry cannot supply the bias-corrected reverse KL.
  * loss="kl": verl's teachers return the sampled token's log-prob or a top-k, never the full
    distribution, so the exact full-vocabulary reverse KL cannot be formed. (verl's loss_mode
    "kl" is the single-sample k1 estimator, the same as "k1": not our "kl".)
  * loss="fkl" and loss="jsd" (the stuck student's cures): both need the teacher's full
    distribution, which verl's teachers never return (its forward_kl_topk covers the top-k only).
"""

from __future__ import annotations

import argparse
import copy
import ctypes
import importlib
import inspect
import json
import os
import re
import shlex
import shutil
import signal
import sys
import tempfile
import time
import warnings
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

import torch

import factworld

from . import runs
from .adapters import BASE, AdapterBank, LoraSettings, atomic_write, role_of_config, share
from .distill import LOSSES, MOPDConfig
from .ucmopd import Endorsement, GoldenGain
from .domains import get_domains
from .models import TINY, load_base
from .rollout import chat_prompt
from .tokenizer import INSTRUCTION, is_tiny
from .validate import validate

VERL_VERSION = "0.9.1"
MERGE_TOLERANCE = 1e-5  # merged teacher vs its adapter model: fp64 absolute, fp32 relative to max |logit|
REWARD_NAME = "compute_score"

NOT_IN_VERL = {
    "topk": ("MOPDConfig.loss='topk' (the bias-corrected reverse KL over the teacher's top-k, "
             "sum_v p_S log(p_S/p_T) - p_S + p_T) has no equivalent in verl 0.9.1. Its nearest modes: "
             "loss_mode=forward_kl_topk is the FORWARD KL sum_v p_T log(p_T/p_S) over the teacher's top-k "
             "(another objective; its per-token term is computed by a fixed function in the actor's "
             "forward, so a loss registered in verl's distillation-loss registry cannot replace it); "
             "loss_mode=k1 with use_policy_gradient=True is MOPD-PG. Export with loss='pg', or train "
             "top-k in the course."),
    "kl": ("MOPDConfig.loss='kl' (the exact full-vocabulary reverse KL) has no equivalent in verl 0.9.1: "
           "its teachers return the sampled token's log-prob (or a top-k), never the full distribution. "
           "verl's loss_mode='kl' is NOT this loss: it is the single-sample k1 estimator log p_S - log p_T "
           "(the same as 'k1'); its nearest modes are k1 with use_policy_gradient=True (MOPD-PG, whose "
           "expected gradient is the reverse KL's) and k3/low_var_kl backpropagated directly. Export with "
           "loss='pg'."),
    "fkl": ("MOPDConfig.loss='fkl' (the on-policy forward KL over the full vocabulary) has no equivalent in verl "
            "0.9.1: its teachers return the sampled token's log-prob or a top-k, never the full distribution; "
            "loss_mode=forward_kl_topk is the forward KL over the teacher's top-k only (another objective). "
            "Export with loss='pg'."),
    "jsd": ("MOPDConfig.loss='jsd' (the generalised JSD over the full vocabulary) has no equivalent in verl 0.9.1: "
            "it needs the teacher's full distribution, which verl's teachers never return. Export with "
            "loss='pg'."),
}


# ---------------------------------------------------------------------------------------------
# the GPU layout
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    """GPUs of one node, split between the actor (student training + its vLLM rollout, colocated)
    and the teacher pool (each teacher served by its own vLLM replicas)."""

    gpus: int = 8
    """GPUs on the node (one node)"""
    teacher_gpus: int | None = None
    """GPUs of the teacher pool (default: half the node, a multiple of the number of teachers)"""
    teacher_tp: int = 1
    """tensor parallel size of one teacher replica (Qwen3-1.7B fits one GPU: 1)"""
    rollout_tp: int = 1
    """tensor parallel size of the student's vLLM rollout"""

    def check(self) -> None:
        """A ValueError naming the option for a count that cannot describe a node."""
        validate(self)
        for name, flag in (("gpus", "--gpus"), ("teacher_tp", "--teacher-tp"), ("rollout_tp", "rollout_tp")):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{flag} must be a whole number >= 1, got {value!r}")
        if self.teacher_gpus is not None and (not isinstance(self.teacher_gpus, int) or self.teacher_gpus < 1):
            raise ValueError(f"--teacher-gpus must be a whole number >= 1 (or left out: half the node), "
                             f"got {self.teacher_gpus!r}")

    def split(self, n_teachers: int) -> tuple[int, int, int]:
        """(actor GPUs, teacher-pool GPUs, replicas per teacher); a ValueError if it does not fit."""
        self.check()
        unit = n_teachers * self.teacher_tp
        teacher = self.teacher_gpus if self.teacher_gpus is not None else (self.gpus // 2) // unit * unit
        if teacher < unit or teacher % unit:
            raise ValueError(f"teacher_gpus={teacher} cannot hold {n_teachers} teachers of tensor-parallel size "
                             f"{self.teacher_tp}: give a positive multiple of {unit} (or a larger --gpus)")
        actor = self.gpus - teacher
        if actor < 1 or actor % self.rollout_tp:
            raise ValueError(f"{actor} GPUs left for the actor after {teacher} for the teachers: give more "
                             f"--gpus or fewer --teacher-gpus (a multiple of rollout_tp={self.rollout_tp} is needed)")
        return actor, teacher, teacher // unit


# ---------------------------------------------------------------------------------------------
# teachers: adapters merged into full checkpoints, checked against the adapter model
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


def merge_teacher(base_name: str, adapter: str | Path, out: str | Path, domains, base=None, tokenizer=None,
                  allow_foreign: bool = False) -> dict:
    """Merge one LoRA adapter into a fresh copy of the base (peft's merge_and_unload), save it as a
    full checkpoint with the tokenizer, and check it against the adapter model on probe prompts.

    Two checks, both against the adapter model (one model in memory at a time besides the base):
      merge  the merge itself, in fp64 (models up to 2e8 parameters; larger: the base's dtype):
             max |logit difference| <= MERGE_TOLERANCE;
      saved  the checkpoint as verl will load it (reloaded from disk, in the base's dtype) against
             the adapter model in that dtype: max |difference| <= MERGE_TOLERANCE x max |logit|.
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
    merged = PeftModel.from_pretrained(copy.deepcopy(base).to(exact), str(adapter)).merge_and_unload()
    merge = (_logits(merged, ids, mask) - exact_want)[real].abs().max().item()
    if not merge <= MERGE_TOLERANCE:
        raise ValueError(f"merging {adapter} changes the logits by {merge:.2e} in {exact} (tolerance "
                         f"{MERGE_TOLERANCE:.0e}); the merge is wrong, do not train on it")
    del merged
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
    if not saved <= MERGE_TOLERANCE * scale:
        raise ValueError(f"the merged checkpoint at {out} differs from its adapter {adapter} by {saved:.2e} in "
                         f"the logits (tolerance {MERGE_TOLERANCE:.0e} x {scale:.1f}); do not train on it")
    return {"merge_exact": merge, "exact_dtype": str(exact).replace("torch.", ""), "saved": saved,
            "saved_dtype": str(base.dtype).replace("torch.", ""), "max_logit": scale, "adapter_rounding": floor}


def save_base(base, tokenizer, out: str | Path) -> Path:
    """The student's starting point (the Stage-1 checkpoint: the base) as a full checkpoint."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    base.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    return out


# ---------------------------------------------------------------------------------------------
# data: verl's RL parquet
# ---------------------------------------------------------------------------------------------


def messages(tokenizer, prompt: str) -> list[dict]:
    """The chat message list verl renders with the model's own template (as `chat_prompt` does;
    verl gets `enable_thinking=False` through data.apply_chat_template_kwargs)."""
    content = prompt if is_tiny(tokenizer) else f"{INSTRUCTION}\n\n{prompt}"
    return [{"role": "user", "content": content}]


def row(tokenizer, example, split: str, position: int) -> dict:
    """One verl record: data_source routes it to its domain's teacher and picks the reward."""
    return {"data_source": example.task,
            "prompt": messages(tokenizer, example.prompt),
            "ability": f"factworld-{example.task}",
            "reward_model": {"style": "rule", "ground_truth": example.answer},
            "extra_info": {"split": split, "index": position, "factworld_index": example.index,
                           "length": example.length, "seed": example.seed, "raw_prompt": example.prompt,
                           "chat_text": chat_prompt(tokenizer, example.prompt)}}


def train_rows(tokenizer, cfg: MOPDConfig) -> list[dict]:
    """Every training prompt of the course run, in its batch order: step s's batch is rows
    [(s-1) B, s B) with B = prompts_per_domain x domains, so verl with shuffle=False and
    train_batch_size=B sees exactly the course's batches."""
    domains = get_domains(cfg.domains)
    examples = [ex for step in range(1, cfg.steps + 1) for d in domains.values()
                for ex in d.train_examples(step, cfg.prompts_per_domain, cfg.seed)]
    return [row(tokenizer, ex, "train", i) for i, ex in enumerate(examples)]


def val_rows(tokenizer, cfg: MOPDConfig) -> list[dict]:
    """The prompts the course run evaluates on (its eval_split, "test" or "val"): eval_n per domain
    and evaluated length."""
    examples = [ex for d in get_domains(cfg.domains).values() for L in d.eval_lengths
                for ex in d.examples(cfg.eval_split, L, cfg.eval_n)]
    return [row(tokenizer, ex, "val", i) for i, ex in enumerate(examples)]


def write_parquet(rows: list[dict], path: Path) -> Path:
    """Rows as a parquet file (pyarrow: `pip install mopd_mini[export]`), written atomically."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as err:
        raise ImportError("the verl export writes parquet with pyarrow: pip install 'mopd_mini[export]'") from err
    import io

    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), buffer)
    atomic_write(path, buffer.getvalue())
    return path


def max_prompt_tokens(tokenizer, rows: list[dict]) -> int:
    texts = [r["extra_info"]["chat_text"] for r in rows]
    return max(len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"])


# ---------------------------------------------------------------------------------------------
# the reward: FactWorld's relaxed score as a verl custom reward function
# ---------------------------------------------------------------------------------------------


def reward_source() -> str:
    """A self-contained reward file (verl's environment has no mopd_mini): factworld/score.py
    itself (minus its docstring), then verl's entry point over its `score`."""
    source = inspect.getsource(importlib.import_module("factworld.score"))  # the module, not the function
    body = source[source.index('"""', source.index('"""') + 3) + 3:].lstrip("\n")
    return (f'"""FactWorld\'s relaxed score as a verl custom reward function (written by mopd_mini.export).\n\n'
            f"verl calls {REWARD_NAME}(data_source, solution_str, ground_truth, extra_info) on the decoded\n"
            'completion; below is factworld/score.py verbatim, then that entry point."""\n\n'
            + body
            + f"\n\ndef {REWARD_NAME}(data_source, solution_str, ground_truth, extra_info=None, **kwargs):\n"
            f'    """1.0 if the completion answers the gold under FactWorld\'s relaxed metric, else 0.0."""\n'
            f"    if data_source not in {tuple(factworld.TASKS)!r}:\n"
            f"        raise ValueError(f'not a FactWorld data_source: {{data_source!r}}')\n"
            f'    return float(score(solution_str, ground_truth, "relaxed"))\n')


# ---------------------------------------------------------------------------------------------
# the config: MOPDConfig and the LoRA settings on verl's keys
# ---------------------------------------------------------------------------------------------


def hydra_value(value) -> str:
    """A Python value in Hydra's override grammar."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(hydra_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{hydra_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, str) and not re.fullmatch(r"[\w./:+~-]+", value):  # e.g. a path with a space
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return str(value)


def fit(cfg: MOPDConfig, layout: Layout, n_teachers: int) -> tuple[int, int, int]:
    """The layout's split, checked against the batch: each actor GPU gets a whole share."""
    actor, pool, replicas = layout.split(n_teachers)
    batch = cfg.prompts_per_domain * len(cfg.domains)
    if batch % actor:
        raise ValueError(f"a batch of {batch} prompts (prompts_per_domain x domains) does not split over {actor} "
                         f"actor GPUs; change prompts_per_domain or --gpus/--teacher-gpus so it divides")
    return actor, pool, replicas


def verl_overrides(cfg: MOPDConfig, lora: LoraSettings, paths: dict, layout: Layout, max_prompt: int,
                   teacher_key: str = "data_source") -> dict:
    """verl 0.9.1 Hydra overrides (key -> value) for the course's MOPD run. Every key exists in
    verl's composed ppo_trainer config (`make check-verl` proves it); '+' adds a new entry."""
    if cfg.loss in NOT_IN_VERL:
        raise ValueError(NOT_IN_VERL[cfg.loss])
    if cfg.loss not in LOSSES:
        raise ValueError(f"unknown loss {cfg.loss!r}; valid losses: {LOSSES}")
    teachers = paths["teachers"]
    actor, pool, replicas = fit(cfg, layout, len(teachers))
    batch = cfg.prompts_per_domain * len(cfg.domains)
    target = lora.target_modules if isinstance(lora.target_modules, str) else list(lora.target_modules)
    o = {
        # data: the course's prompts in its batch order, routed and rewarded by data_source
        "data.train_files": str(paths["train"]), "data.val_files": str(paths["val"]),
        "data.prompt_key": "prompt", "data.reward_fn_key": teacher_key,
        "data.max_prompt_length": max_prompt, "data.max_response_length": cfg.max_new_tokens,
        "data.train_batch_size": batch, "data.shuffle": False, "data.seed": cfg.seed,
        "data.truncation": "error", "+data.apply_chat_template_kwargs.enable_thinking": False,
        # the student: the base plus a fresh LoRA adapter
        "actor_rollout_ref.model.path": str(paths["student"]),
        "actor_rollout_ref.model.lora_rank": lora.r, "actor_rollout_ref.model.lora_alpha": lora.alpha,
        "actor_rollout_ref.model.target_modules": target,
        "actor_rollout_ref.model.enable_gradient_checkpointing": cfg.gradient_checkpointing,
        # one on-policy update per batch: mini-batch = batch, one epoch; AdamW, no weight decay
        "actor_rollout_ref.actor.strategy": "fsdp",
        "actor_rollout_ref.actor.ppo_mini_batch_size": batch, "actor_rollout_ref.actor.ppo_epochs": 1,
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": batch // actor,
        "actor_rollout_ref.actor.optim.lr": cfg.lr, "actor_rollout_ref.actor.optim.weight_decay": 0.0,
        "actor_rollout_ref.actor.grad_clip": cfg.grad_clip,
        "actor_rollout_ref.actor.loss_agg_mode": "seq-mean-token-mean",
        "actor_rollout_ref.actor.use_kl_loss": False, "actor_rollout_ref.actor.entropy_coeff": 0,
        "actor_rollout_ref.actor.data_loader_seed": cfg.seed,
        # sampling: one completion per prompt at temperature 1, untruncated; greedy evaluation
        "actor_rollout_ref.rollout.name": "vllm", "actor_rollout_ref.rollout.n": 1,
        "actor_rollout_ref.rollout.temperature": cfg.temperature, "actor_rollout_ref.rollout.top_k": -1,
        "actor_rollout_ref.rollout.top_p": cfg.top_p,
        "actor_rollout_ref.rollout.tensor_model_parallel_size": layout.rollout_tp,
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": batch // actor,
        "actor_rollout_ref.rollout.val_kwargs.do_sample": False,
        # no critic, no reference model: the teachers are the only signal
        "algorithm.adv_estimator": "grpo", "algorithm.use_kl_in_reward": False, "critic.enable": False,
        # MOPD-PG: advantage log pi_T(y_t) - log pi_S(y_t) (k1, as a reward), clipped to [-clip, clip]
        "distillation.enabled": True, "distillation.teacher_key": teacher_key,
        "distillation.distillation_loss.loss_mode": "k1",
        "distillation.distillation_loss.use_policy_gradient": True,
        "distillation.distillation_loss.loss_max_clamp": cfg.clip,
        "distillation.distillation_loss.log_prob_min_clamp": None,
        "distillation.distillation_loss.use_task_rewards": False,
        "distillation.distillation_loss.policy_loss_mode": "vanilla",
        "distillation.n_gpus_per_node": pool, "distillation.nnodes": 1,
    }
    for domain, path in teachers.items():  # one teacher per domain; each sample goes to exactly one
        t = f"+distillation.teacher_models.{domain}"
        o.update({f"{t}.key": domain, f"{t}.model_path": str(path), f"{t}.num_replicas": replicas,
                  f"{t}.inference.name": "vllm", f"{t}.inference.tensor_model_parallel_size": layout.teacher_tp})
    o.update({
        # FactWorld's relaxed score, for validation (and verl's task-reward mode)
        "reward.custom_reward_function.path": str(paths["reward"]),
        "reward.custom_reward_function.name": REWARD_NAME,
        "trainer.n_gpus_per_node": actor, "trainer.nnodes": 1,
        "trainer.total_epochs": 1, "trainer.total_training_steps": cfg.steps,
        "trainer.test_freq": cfg.eval_every if cfg.eval_every else -1,
        "trainer.save_freq": cfg.checkpoint_every, "trainer.val_before_train": True,
        "trainer.logger": ["console"], "trainer.project_name": "mopd_mini",
        "trainer.experiment_name": cfg.experiment or "mopd",
    })
    return o


def verl_command(overrides: dict) -> str:
    """The full verl command line for these overrides (one argument per line)."""
    args = [shlex.quote(f"{k}={hydra_value(v)}") for k, v in overrides.items()]
    return "python3 -m verl.trainer.main_ppo \\\n    " + " \\\n    ".join(args)


MAPPING = [  # (our field, verl key, note): the table of docs/scale_out.md, written beside the YAML
    ("MOPDConfig.loss='pg'", "distillation.distillation_loss.loss_mode=k1, use_policy_gradient=true, "
     "policy_loss_mode=vanilla, use_task_rewards=false", "advantage -(log p_S - log p_T), exact"),
    ("MOPDConfig.clip", "distillation.distillation_loss.loss_max_clamp", "two-sided clamp [-c, c], exact"),
    ("(no log-prob clamp)", "distillation.distillation_loss.log_prob_min_clamp=null", "exact"),
    ("MOPDConfig.domains + teacher_<d>", "distillation.teacher_key=data_source, "
     "+distillation.teacher_models.<d>.key/model_path", "one teacher per sample; unknown key is an error"),
    ("MOPDConfig.teachers (a domain's teacher by name; 'base')", "+distillation.teacher_models.<d>.model_path",
     "that adapter merged; 'base': student_base"),
    ("MOPDConfig.eval_split / eval_n", "data.val_files (the split's prompts, eval_n per length)", "exact"),
    ("MOPDConfig.prompts_per_domain x domains", "data.train_batch_size, actor.ppo_mini_batch_size",
     "one update per batch"),
    ("(one update per batch)", "actor_rollout_ref.actor.ppo_epochs=1", "on-policy: ratio 1"),
    ("MOPDConfig.lr", "actor_rollout_ref.actor.optim.lr (weight_decay=0)", "AdamW, constant"),
    ("MOPDConfig.grad_clip", "actor_rollout_ref.actor.grad_clip", "global norm"),
    ("MOPDConfig.temperature", "actor_rollout_ref.rollout.temperature (top_k=-1, n=1)", "exact"),
    ("MOPDConfig.top_p", "actor_rollout_ref.rollout.top_p", "the rollout's nucleus (1: untruncated)"),
    ("MOPDConfig.max_new_tokens", "data.max_response_length", "completion budget"),
    ("masked_mean (token mean, then sequence mean)", "actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-mean",
     "exact"),
    ("MOPDConfig.steps", "trainer.total_training_steps", "with data.shuffle=false: the course's batches"),
    ("MOPDConfig.eval_every / checkpoint_every", "trainer.test_freq / trainer.save_freq", ""),
    ("MOPDConfig.seed", "data.seed, actor.data_loader_seed", "sampling noise differs"),
    ("MOPDConfig.gradient_checkpointing", "actor_rollout_ref.model.enable_gradient_checkpointing", ""),
    ("LoraSettings.r / alpha / target_modules", "actor_rollout_ref.model.lora_rank / lora_alpha / target_modules",
     "dropout 0 (peft's default in verl)"),
    ("teacher adapters", "merged checkpoints served by vLLM", "logits equal to 1e-5 (fp32)"),
    ("FactWorld relaxed score", "reward.custom_reward_function.path/name", "validation and task reward"),
]


# ---------------------------------------------------------------------------------------------
# faithful to the run: every setting carried, or refused by name
# ---------------------------------------------------------------------------------------------

CARRIED = ("loss", "clip", "steps", "prompts_per_domain", "domains", "lr", "temperature", "max_new_tokens",
           "grad_clip", "eval_every", "eval_n", "eval_split", "seed", "experiment", "checkpoint_every",
           "gradient_checkpointing", "teachers", "top_p")
"""MOPDConfig fields the export carries into verl's config, data or teachers (MAPPING)"""
NO_EFFECT = {
    "topk": "the size of the logged top-k masses (MOPD-PG does not use it)",
    "topk_correction": "loss='topk' only, which is refused",
    "topk_support": "loss='topk' only, which is refused",
    "beta": "loss='jsd' only, which is refused",
    "lmbda_prefix": "read only when lmbda < 1, which is refused",
    "scoring": "how the course runs its teachers (one pass or one per teacher): the same scores",
    "track_steps": "what the course records for its plots", "track_prompts": "what the course records for its plots",
    "student": "the adapter's name in the course", "progress": "the progress bar",
    "compact_teachers": ("how the course holds its frozen teachers in memory (in a bf16 base's dtype, the scores "
                         "within its rounding); the export merges the teachers' saved adapters into checkpoints, "
                         "which verl serves in its own dtype"),
    **dict.fromkeys(("stuck_p", "stuck_teacher_logp", "stuck_warn_share", "stuck_window"),
                    "the course's stuck detector: what it logs and warns about, never trained on"),
}
"""MOPDConfig fields that do not change what is trained (so nothing of them needs carrying)"""
REFUSED = {
    "init_from": lambda v: (f"MOPDConfig.init_from={v!r}: the course's student starts from a copy of adapter "
                            f"{v!r}; the export's student starts from the base with a fresh LoRA adapter (verl "
                            "0.9.1 gets no adapter to start from), so it would train another run. Export a "
                            "student trained from the base (init_from=None)"),
    "golden_gain": lambda v: ("MOPDConfig.golden_gain (UCMOPD's Golden-Gain Enhancement: extra exploration "
                              "samples, kept by their positive-advantage density) has no equivalent in verl "
                              "0.9.1's distillation; exporting would train plain MOPD-PG. Export a run "
                              "without it (golden_gain=None)"),
    "endorsement": lambda v: ("MOPDConfig.endorsement (UCMOPD's Teacher-Endorsement Filtering: a Bernoulli mask "
                              "on the loss's tokens) has no equivalent in verl 0.9.1's distillation; exporting "
                              "would train plain MOPD-PG. Export a run without it (endorsement=None)"),
    "lmbda": lambda v: (f"MOPDConfig.lmbda={v}: GKD's on-policy fraction, a share {1 - v:g} of the steps trained on "
                        "the teachers' (or the gold) prefixes; verl 0.9.1's distillation trains on the student's "
                        "own rollouts only, so it would train another run. Export a run with lmbda=1"),
    "min_new_tokens": lambda v: (f"MOPDConfig.min_new_tokens={v}: every completion was forced to at least {v} "
                                 "tokens (bench.scaling's length curve); the export's rollout stops at the end of "
                                 "turn, so it would train another run. Export a run without it (min_new_tokens=0)"),
}
"""MOPDConfig fields verl cannot carry: refused unless at their default (off)"""


def unexportable(cfg: MOPDConfig, lora: LoraSettings) -> list[str]:
    """Why this run cannot be exported faithfully, one message per setting ([] if it can)."""
    why = [NOT_IN_VERL[cfg.loss]] if cfg.loss in NOT_IN_VERL else []
    defaults = MOPDConfig()
    why += [message(getattr(cfg, name)) for name, message in REFUSED.items()
            if getattr(cfg, name) != getattr(defaults, name)]
    if lora.dropout:
        why.append(f"the student's LoRA dropout is {lora.dropout}; verl 0.9.1's LoRA has no dropout (0), so it "
                   "would train another run. Export a student with dropout 0 (LoraSettings' default)")
    return why


def config_from_json(saved: dict) -> MOPDConfig:
    """An MOPDConfig from its config.json (lists back to tuples, the UCMOPD options back to theirs),
    checked. Every field must be there: a missing one is a ValueError naming it, never its default
    (only the fields newer than some saved runs, runs.ADDED_FIELDS, take the value they had before)."""
    if not isinstance(saved, dict):
        raise ValueError(f"it holds a {type(saved).__name__}, not a config")
    known = {f.name for f in fields(MOPDConfig)}
    missing = sorted(known - set(saved) - set(runs.ADDED_FIELDS))
    if missing:
        raise ValueError(f"it lacks {', '.join(missing)}: the export writes only what the run did, and will not "
                         "guess a default")
    saved = {**runs.ADDED_FIELDS, **saved}
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in saved.items() if k in known}
    for name, option in (("golden_gain", GoldenGain), ("endorsement", Endorsement)):
        if isinstance(values.get(name), dict):
            values[name] = option(**values[name])
    cfg = MOPDConfig(**values)
    cfg.check()
    return cfg


# ---------------------------------------------------------------------------------------------
# the whole export
# ---------------------------------------------------------------------------------------------


def read_run(run: str | Path) -> tuple[MOPDConfig, dict[str, Path | str], LoraSettings]:
    """The MOPD config, teachers and student LoRA settings of a finished course run. Each domain's
    teacher is the one the run was distilled from (its `teachers` map): an adapter folder of the
    run, or BASE (the stage-1 base)."""
    run = Path(run)
    config_file = run / "student" / "config.json"
    if not run.is_dir():
        raise FileNotFoundError(f"no run folder at {run}: give --run runs/<experiment> (the folder that holds "
                                "teacher_<domain>/ and student/)")
    if not config_file.exists():
        raise FileNotFoundError(f"no MOPD run at {run} ({config_file} is missing): train the student first "
                                "(notebook 03 or train_student), or give --teacher DOMAIN=ADAPTER instead")
    try:
        cfg = config_from_json(json.loads(config_file.read_text()))
    except (ValueError, TypeError) as err:
        raise ValueError(f"the student's config {config_file} is unreadable ({err}); re-run the training "
                         "that made it, or restore its config.json") from err
    teachers = {d: BASE if name == BASE else run / name for d, name in cfg.route.items()}
    return cfg, teachers, lora_of(run / "student")


def lora_of(adapter: Path) -> LoraSettings:
    """The LoRA settings of a saved adapter (peft's adapter_config.json), else the defaults."""
    path = Path(adapter) / "adapter_config.json"
    if not path.exists():
        return LoraSettings()
    c = json.loads(path.read_text())
    targets = c.get("target_modules", "all-linear")
    # peft saves "all-linear" expanded to module paths; their leaf names select the same layers
    targets = targets if isinstance(targets, str) else tuple(sorted({t.split(".")[-1] for t in targets}))
    return LoraSettings(r=c["r"], alpha=c["lora_alpha"], dropout=c.get("lora_dropout", 0.0), target_modules=targets)


def check_teachers(cfg: MOPDConfig, teachers: dict) -> None:
    """Every domain has exactly one teacher, and each is an adapter folder (or BASE): a clear error
    naming the domain, the path and the fix, before anything is loaded or written."""
    missing = [d for d in cfg.domains if d not in teachers]
    if missing:
        raise ValueError(f"no teacher adapter for domain(s) {missing}: every domain in the data needs one "
                         f"(--teacher DOMAIN=ADAPTER); given: {sorted(teachers)}")
    extra = [d for d in teachers if d not in cfg.domains]
    if extra:
        raise ValueError(f"teacher(s) for {extra} but the experiment's domains are {list(cfg.domains)}")
    for d, path in teachers.items():
        if path == BASE:
            continue
        if not (Path(path) / "adapter_config.json").is_file():
            routed = (cfg.teachers or {}).get(d)
            why = (f" (the run's teachers map routes {d} to {routed!r}; a foreign teacher, on another base, has "
                   "no folder in the run)" if routed else "")
            raise FileNotFoundError(f"no teacher adapter for {d} at {path}{why}: adapter_config.json is missing. "
                                    f"Train it, or give --teacher {d}=FOLDER (a folder saved by AdapterBank.save)")


MARKER = ".mopd_mini_export"
"""the file every export writes into its folder: every file it wrote, by path, with its size and sha256
(`marker`); --force replaces only a folder that holds it and nothing else (`check_out`)"""
EXPORT_NAMES = frozenset({"student_base", "teachers", "data", "reward", "verl_config.yaml", "run_verl.sh",
                          "export.json", MARKER})
"""everything an export writes at the top of its folder"""


def file_sha256(path: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def marker(folder: Path) -> dict:
    """The export's marker for the files in `folder` (the staging folder, every file written):
    {relative path: {"size", "sha256"}} of each (the marker itself aside)."""
    files = {}
    for f in sorted(folder.rglob("*")):
        if f.is_file() and not f.is_symlink() and f.relative_to(folder).as_posix() != MARKER:
            files[f.relative_to(folder).as_posix()] = {"size": f.stat().st_size, "sha256": file_sha256(f)}
    return {"written_by": "mopd_mini.export", "verl": VERL_VERSION, "files": files}


def foreign_files(out: Path) -> list[str]:
    """What in a previous export `out` is not a file its marker lists with that size and sha256 (a
    user's or verl's file anywhere in the tree, a listed file changed since, a link; an empty folder
    holds nothing to lose and is removed with the export); a ValueError if the marker is unreadable or from before exports listed their
    files (then nothing tells the export's files from others)."""
    try:
        held = json.loads((out / MARKER).read_text())
        if not isinstance(held, dict) or not all(isinstance(v, dict) for v in (
                held["files"].values() if isinstance(held.get("files"), dict) else ())):
            raise ValueError("not a JSON object of the export's files")
    except (OSError, ValueError) as err:
        raise ValueError(f"--out {out}: its {MARKER} is unreadable ({err}), so --force cannot tell the export's "
                         "files from others. Move what you keep out of it, delete it, and export again (the same "
                         "command without --force, or --out to a new folder)") from err
    listed = held.get("files")
    if not isinstance(listed, dict):  # an export made before the marker listed every file (a list of names, or none)
        raise ValueError(f"--out {out} was written by an older export whose {MARKER} lists no files, so --force "
                         "cannot tell its files from ones added since (by you or verl, in any subfolder). Move "
                         "what you keep out of it, delete it, and export again (the same command without --force, "
                         "or --out to a new folder): the new export's marker lists every file it writes")
    extra = []
    for f in sorted(out.rglob("*")):
        rel = f.relative_to(out).as_posix()
        if rel == MARKER or f.is_dir() and not f.is_symlink():   # a folder: what it holds is checked
            continue
        if f.is_symlink():
            extra.append(f"{rel} (a link)")
        elif rel not in listed:
            extra.append(rel)
        elif f.stat().st_size != listed[rel].get("size") or file_sha256(f) != listed[rel].get("sha256"):
            extra.append(f"{rel} (changed since the export wrote it)")
    return extra


def remove_export(folder: Path, listed: dict) -> list[str]:
    """Delete exactly the files `listed` (a marker's) in `folder`, the marker, then the folders left
    empty; returns what is left (nothing, unless a file appeared after `check_out`: then the folder is
    kept and named)."""
    for name in listed:
        (folder / name).unlink(missing_ok=True)
    (folder / MARKER).unlink(missing_ok=True)
    for d in sorted((p for p in folder.rglob("*") if p.is_dir() and not p.is_symlink()),
                    key=lambda p: len(p.parts), reverse=True):
        try:
            d.rmdir()
        except OSError:
            pass
    left = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if not p.is_dir())
    if not left:
        shutil.rmtree(folder, ignore_errors=True)
    return left


def _overlaps(a: Path, b: Path) -> bool:
    """`a` is `b`, or one holds the other."""
    return a == b or a in b.parents or b in a.parents


def protected(out: Path, inputs=()) -> str | None:
    """Why the export may never write or replace `out` (None if it may): the working folder or a
    folder above it, a repository (a folder with .git), a home or root folder, or a folder that is, or
    holds, or is inside, one of the export's `inputs` ((what, path) pairs: the run, each teacher)."""
    cwd = Path.cwd().resolve()
    if out == cwd or out in cwd.parents:
        return f"it is the working folder{'' if out == cwd else ' ' + str(cwd) + ' or a folder above it'}"
    if out == Path(out.anchor) or out == Path.home().resolve() or out in Path.home().resolve().parents:
        return "it is a home or root folder"
    if (out / ".git").exists():
        return "it is a repository (it holds .git)"
    for what, given in dict(inputs).items():
        given = Path(given).resolve()
        if _overlaps(out, given):
            where = "it is" if out == given else "it holds" if out in given.parents else "it is inside"
            return f"{where} {what}, {given}: an input of this export"
    return None


def check_out(out: Path, force: bool, inputs=()) -> None:
    """`out` can be replaced by the export: not a file, not `protected`; empty, or `force` and a
    folder a previous export wrote (its MARKER, and nothing beside what an export writes); its parent
    writable."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file; give a folder for the export")
    why = protected(out, inputs)
    if why:
        raise ValueError(f"--out {out}: the export never writes there ({why}); give a new folder, e.g. "
                         "--out build/verl_export")
    held = sorted(f.name for f in out.iterdir()) if out.is_dir() else []
    listed = f"{', '.join(held[:6])}{', ...' if len(held) > 6 else ''}"
    if held and not force:
        raise ValueError(f"--out {out} exists and is not empty ({listed}); pass --force (force=True) to replace a "
                         "previous export whole, or give another --out")
    if held:
        foreign = sorted(set(held) - EXPORT_NAMES)
        if MARKER not in held or foreign:
            what = (f"it holds {', '.join(foreign[:6])}{', ...' if len(foreign) > 6 else ''}, which no export writes"
                    if foreign else f"it has no {MARKER}, the file every export writes")
            raise ValueError(f"--out {out} is not a previous export ({what}), so --force does not replace it: "
                             "--force replaces only a folder an export wrote. Give another --out")
        foreign = foreign_files(out)   # the whole tree against the marker's list, not the top-level names
        if foreign:
            raise ValueError(f"--out {out} holds {len(foreign)} file(s) its export did not write: "
                             f"{', '.join(foreign[:6])}{', ...' if len(foreign) > 6 else ''}; --force removes only "
                             f"the files the export's {MARKER} lists. Move them out of {out} (or give another "
                             "--out), then export again")
    parent = out.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError(f"cannot write the export beside {out}: {parent} is not a writable folder")
    if out.exists() and not os.access(out.parent, os.W_OK | os.X_OK):
        raise ValueError(f"cannot replace {out}: its folder {out.parent} is not writable")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def clear_stale(out: Path) -> list[str]:
    """Remove the staging (and set-aside) folders that a dead export of `out` left beside it (a
    SIGKILL, a power cut): their names carry the process id. Returns what it removed; a warning
    names each one it cannot tell is dead (no process id: an older export's)."""
    import warnings

    removed = []
    if not out.parent.is_dir():
        return removed
    for p in sorted(out.parent.iterdir()):
        m = re.fullmatch(rf"\.{re.escape(out.name)}\.(staging|old)-(\d+)-.*", p.name)
        if m and not _alive(int(m.group(2))):
            shutil.rmtree(p, ignore_errors=True)
            removed.append(p.name)
        elif not m and re.fullmatch(rf"\.{re.escape(out.name)}\.(staging|old)-.*", p.name):
            warnings.warn(f"{p} looks like the staging folder of an interrupted export of {out} (an older export, "
                          "which did not name its process); delete it if no export is running", stacklevel=2)
    return removed


class _Terminated(BaseException):
    """SIGTERM or SIGHUP during an export: unwinds like Ctrl-C, so its staging folder is removed."""


@contextmanager
def cleaned_on_signal():
    """SIGTERM and SIGHUP raise inside the export (as SIGINT does) for as long as it runs, so the
    `except` that removes the staging folder runs; the previous handlers come back after. Outside the
    main thread (where Python cannot install handlers) nothing changes."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        raise _Terminated(f"export stopped by signal {signal.Signals(signum).name}")

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two folders in one atomic step (Linux renameat2 RENAME_EXCHANGE); False where the
    system or the file system cannot."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    return renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0


def swap_into_place(staging: Path, out: Path) -> None:
    """Rename the finished `staging` folder to `out`. An existing `out` is swapped with it in one
    atomic step where the system can, so `out` is always the old export whole or the new one whole;
    elsewhere the old one is renamed aside first (a kill between the two renames leaves it whole at
    .<name>.old-*/). Of the old export exactly the files its marker lists are then deleted
    (`remove_export`); anything else (a file that appeared after `check_out`) is kept, and named."""
    import warnings

    listed = {}
    if out.exists():
        try:
            listed = json.loads((out / MARKER).read_text()).get("files") or {}
        except (OSError, ValueError, AttributeError):
            listed = {}
    if not out.exists():
        os.replace(staging, out)
        return
    aside = None
    if _exchange(staging, out):
        old = staging  # it now holds the old export
    else:
        aside = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.old-{os.getpid()}-"))
        os.replace(out, aside / out.name)
        os.replace(staging, out)
        old = aside / out.name
    left = remove_export(old, listed if isinstance(listed, dict) else {})
    if left:
        keep = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.kept-"))
        os.replace(old, keep / out.name)
        warnings.warn(f"the previous export of {out} held files its marker does not list ({', '.join(left[:6])}); "
                      f"they are kept in {keep / out.name}", stacklevel=2)
    if aside is not None:
        shutil.rmtree(aside, ignore_errors=True)   # empty now: its export removed or moved to .kept-


def teacher_domains(path) -> tuple[str, ...]:
    """The domains a teacher's own record (its run's config.json) names: a GRPO teacher's `domain`,
    a Mix-RL adapter's several, a student's or an offline adapter's `domains`; none for the base, a
    merge or a foreign adapter (no config.json of a trainer)."""
    if path == BASE:
        return ()
    try:
        config = json.loads((Path(path) / "config.json").read_text())
    except (OSError, ValueError):
        return ()
    role = role_of_config(config)
    names = config.get("domain") if role == "teacher" else config.get("domains") if role else None
    names = (names,) if isinstance(names, str) else names
    return tuple(n for n in names if isinstance(n, str)) if isinstance(names, (list, tuple)) else ()


def check_routing(teachers: dict, allow_mismatch: bool) -> dict[str, list[str]]:
    """Each domain's teacher names that domain in its own record (`teacher_domains`); a ValueError
    naming every mismatch unless `allow_mismatch` (--allow-domain-mismatch, recorded in export.json).
    Returns domain -> the domains its teacher's record names."""
    named = {d: list(teacher_domains(p)) for d, p in teachers.items()}
    wrong = [f"{d} is routed to {p}, whose record names {named[d] or 'no domain'}"
             + ("" if p == BASE or named[d] else f" (no trainer's config.json in {p})")
             for d, p in teachers.items() if d not in named[d]]
    if wrong and not allow_mismatch:
        raise ValueError("the routing does not match the teachers' own records: " + "; ".join(wrong)
                         + ". Route each domain to its own teacher, or pass --allow-domain-mismatch "
                         "(allow_mismatch=True) to export this routing on purpose (export.json records it)")
    return named


def check_manifest(run: Path | None, teachers: dict) -> dict[str, str]:
    """A teacher given under a name the student's record names must have the weights the student read
    (sha256); a ValueError naming it otherwise. The record is its checkpoint's copy of the teacher
    manifest, which teacher_manifest.json must match (`runs.recorded_teachers`: a file missing or changed
    while the checkpoint records one is refused). A checkpoint from before checkpoints kept the copy is
    checked against teacher_manifest.json this once and, when the teachers match, upgraded with it
    (`runs.upgrade_checkpoint`, as a resume does; said in a warning); one with no manifest at all is
    exported with a warning that its teachers could not be checked. Returns domain -> sha256 of each
    exported adapter."""
    student = Path(run) / "student" if run else None
    state = (runs.load_checkpoint(student / "checkpoint.pt")
             if student is not None and (student / "checkpoint.pt").exists() else None)
    recorded = runs.recorded_teachers(student, state) if student is not None else None
    manifest = {t["name"]: t for t in recorded or []}
    digests = {}
    for d, path in teachers.items():
        if path == BASE:
            continue
        digests[d] = runs.folder_digest(path)
        read = manifest.get(Path(path).name)
        if read is not None and read.get("sha256") is not None and read["sha256"] != digests[d]:
            raise ValueError(f"the {d} teacher {path} is not the {Path(path).name!r} the student was trained "
                             f"with: its weights' sha256 is {digests[d][:16]}..., the student's "
                             f"{runs.MANIFEST} records {read['sha256'][:16]}... Give the teacher it read, or "
                             "retrain the student")
    if state is not None and "teachers" not in state:   # an old checkpoint: accepted once, upgraded
        if recorded is not None:
            runs.upgrade_checkpoint(student, state, recorded, stacklevel=4)
        else:
            warnings.warn(f"{student} records no teachers (no copy in its checkpoint.pt, no {runs.MANIFEST}: "
                          "written before runs recorded them), so the exported teachers could not be checked "
                          "against the ones it was trained with", stacklevel=3)
    return digests


def export_verl(out: str | Path, cfg: MOPDConfig, teachers: dict[str, str | Path], lora: LoraSettings | None = None,
                base_name: str = TINY, layout: Layout = Layout(), root: str | None = None,
                allow_foreign: bool = False, force: bool = False, run: str | Path | None = None,
                allow_mismatch: bool = False, routed_by_flag: tuple[str, ...] = (), overridden: list[dict] = ()) -> dict:
    """Write the verl export of one MOPD experiment into `out`; returns what export.json holds.
    `root`: the folder `out` will be at on the cluster (default: `out` itself, absolute).
    `teachers`: domain -> adapter folder, or BASE (the base itself is that domain's teacher).
    `run`: the course run exported (its student's teacher manifest is checked; never replaced).
    `overridden`: each setting of the run the command line changed ({"setting", "run", "exported",
    "flag"}: --loss, --teacher, --allow-domain-mismatch, --allow-foreign), kept in export.json's "overridden".

    All or nothing: everything is checked first (the config, each setting verl cannot carry, the
    layout, the teachers' folders, origins, records and weights, `out`), then built in a staging
    folder beside `out` and renamed into place at the end. An existing non-empty `out` is refused
    unless `force` and it is a previous export (`check_out`); a failed, interrupted (SIGINT, SIGTERM,
    SIGHUP) or killed export leaves `out` as it was, and a dead one's staging folder is removed by the
    next export."""
    if not str(out).strip():
        raise ValueError("--out is empty (an unset shell variable?); give the export folder, e.g. "
                         "--out build/verl_export")
    cfg.check()
    lora = lora or LoraSettings()
    why = unexportable(cfg, lora)  # refuse before any work: never a silently different run
    if why:
        raise ValueError("; and ".join(why))
    teachers = {d: BASE if p == BASE else Path(p) for d, p in teachers.items()}
    check_teachers(cfg, teachers)
    named = check_routing(teachers, allow_mismatch)
    digests = check_manifest(Path(run) if run else None, teachers)
    actor, pool, replicas = fit(cfg, layout, len(teachers))
    out = Path(out).resolve()
    inputs = ([("the run being exported", Path(run))] if run else []) + [
        (f"the {d} teacher", p) for d, p in teachers.items() if p != BASE]
    check_out(out, force, inputs)
    at = Path(root) if root else out
    base, tokenizer = load_base(base_name, dtype=torch.float32, device="cpu")
    check_origins(base, tokenizer, teachers, base_name, allow_foreign)
    clear_stale(out)
    with cleaned_on_signal():
        staging = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.staging-{os.getpid()}-"))
        try:
            info = build(staging, at, cfg, teachers, lora, base_name, base, tokenizer, layout,
                         (actor, pool, replicas), allow_foreign)
            info.update(teacher_domains=named, allow_domain_mismatch=allow_mismatch, teacher_sha256=digests,
                        run=str(Path(run).resolve()) if run else None, routed_by_flag=list(routed_by_flag),
                        overridden=list(overridden))
            if routed_by_flag:  # what the exported config runs, not the run's map
                info["mopd_config"]["teachers"] = {**(cfg.teachers or {}),
                                                   **{d: str(teachers[d]) for d in routed_by_flag}}
            atomic_write(staging / "export.json", json.dumps(info, indent=1, default=str).encode())
            atomic_write(staging / MARKER, json.dumps(marker(staging), indent=1).encode())
            share(staging)  # mkdtemp's 0o700 and safetensors' 0o600: as the umask says instead
            swap_into_place(staging, out)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    return info


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


def build(out: Path, at: Path, cfg: MOPDConfig, teachers: dict, lora: LoraSettings, base_name: str, base, tokenizer,
          layout: Layout, split: tuple[int, int, int], allow_foreign: bool) -> dict:
    """Every file of the export, written into `out` (the staging folder); paths in the config are under `at`."""
    actor, pool, replicas = split
    domains = get_domains(cfg.domains)
    save_base(base, tokenizer, out / "student_base")
    diffs = {}
    for d, adapter in teachers.items():
        if adapter == BASE:  # the stage-1 base is this domain's teacher: verl serves the student's checkpoint
            diffs[d] = {"base": True}
            continue
        diffs[d] = merge_teacher(base_name, adapter, out / "teachers" / d, domains, base=base,
                                 tokenizer=tokenizer, allow_foreign=allow_foreign)
    train, val = train_rows(tokenizer, cfg), val_rows(tokenizer, cfg)
    write_parquet(train, out / "data" / "train.parquet")
    write_parquet(val, out / "data" / "val.parquet")
    atomic_write(out / "reward" / "factworld_reward.py", reward_source().encode())
    paths = {"train": at / "data" / "train.parquet", "val": at / "data" / "val.parquet",
             "student": at / "student_base", "reward": at / "reward" / "factworld_reward.py",
             "teachers": {d: at / "student_base" if p == BASE else at / "teachers" / d for d, p in teachers.items()}}
    overrides = verl_overrides(cfg, lora, paths, layout, max_prompt_tokens(tokenizer, train + val))
    doc = {"verl_version": VERL_VERSION, "config_name": "ppo_trainer",
           "overrides": [f"{k}={hydra_value(v)}" for k, v in overrides.items()],
           "command": verl_command(overrides),
           "layout": {"gpus": layout.gpus, "actor_gpus": actor, "teacher_pool_gpus": pool,
                      "replicas_per_teacher": replicas, "teacher_tp": layout.teacher_tp},
           "mapping": [{"ours": a, "verl": b, "note": c} for a, b, c in MAPPING]}
    write_yaml(doc, out / "verl_config.yaml")
    atomic_write(out / "run_verl.sh", ("#!/usr/bin/env bash\n# written by mopd_mini.export; launch on the "
                                       "cluster's head node, in verl's environment\nset -euo pipefail\n"
                                       + doc["command"] + ' \\\n    "$@"\n').encode())
    (out / "run_verl.sh").chmod(0o755)
    info = {"base": base_name, "teachers": {d: str(p) for d, p in teachers.items()},
            "teacher_paths": {d: str(p) for d, p in paths["teachers"].items()}, "mopd_config": asdict(cfg),
            "lora": asdict(lora), "merge_check": diffs, "train_rows": len(train), "val_rows": len(val)}
    atomic_write(out / "export.json", json.dumps(info, indent=1, default=str).encode())
    return info


def write_yaml(doc: dict, path: Path) -> Path:
    try:
        import yaml
    except ImportError as err:
        raise ImportError("the verl export writes YAML with pyyaml: pip install 'mopd_mini[export]'") from err
    atomic_write(path, yaml.safe_dump(doc, sort_keys=False, width=120).encode())
    return path


def tiny_run(work: Path, experiment: str = "verl-tiny") -> Path:
    """A few-step tiny course run to export: teacher_binding, teacher_recall and the student trained
    for two steps each under <work>/runs/<experiment>/; returns the run folder. Its numbers mean
    nothing; its folders are a real course run's (what `make check-verl` and the export's tests use)."""
    from .distill import train_student
    from .grpo import GRPOConfig, train_teacher

    work.mkdir(parents=True, exist_ok=True)
    here = os.getcwd()
    os.chdir(work)  # runs/ is relative to the working folder
    try:
        bank = AdapterBank(*load_base("tiny", device="cpu"))
        small = dict(experiment=experiment, eval_every=0, progress=False, checkpoint_every=100)
        for domain in ("binding", "recall"):
            train_teacher(bank, GRPOConfig(domain=domain, steps=2, prompts_per_step=4, group_size=4, **small))
        train_student(bank, MOPDConfig(steps=2, prompts_per_domain=4, topk=8, track_steps=(), eval_n=8, **small))
    finally:
        os.chdir(here)
    return work / "runs" / experiment


def parser(prog: str = "python -m mopd_mini.export") -> argparse.ArgumentParser:
    """The export's command line (`prog`: the name --help shows, e.g. "mopd-mini export")."""
    p = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="engine", required=True)
    v = sub.add_parser("verl", help="export for verl 0.9.1 (multi-teacher on-policy distillation)")
    v.add_argument("--run", help="a finished course run, runs/<experiment> (its student/ and the teachers it "
                                 "was distilled from)")
    v.add_argument("--teacher", action="append", default=[], metavar="DOMAIN=ADAPTER",
                   help="a teacher adapter folder per domain (instead of, or on top of, --run); ADAPTER 'base': "
                        "the base itself is that domain's teacher")
    v.add_argument("--out", required=True, help="the export folder (built beside it, renamed into place at the end)")
    v.add_argument("--force", action="store_true", help="replace a previous export at --out whole (only a folder "
                                                        "an export wrote: never the working folder, the run, a "
                                                        "repository or a home folder)")
    v.add_argument("--allow-domain-mismatch", action="store_true",
                   help="export a routing where a domain's teacher does not name that domain in its own record "
                        "(the base, a foreign adapter, another domain's teacher); recorded in export.json")
    v.add_argument("--base", default=TINY, help="the base the adapters were trained on (default: tiny)")
    v.add_argument("--allow-foreign", action="store_true",
                   help="merge teacher adapters trained on another base than --base (same shapes)")
    v.add_argument("--loss", choices=LOSSES, help="override the run's loss (only pg exists in verl)")
    v.add_argument("--gpus", type=int, default=8, help="GPUs on the node (default 8)")
    v.add_argument("--teacher-gpus", type=int, help="GPUs of the teacher pool (default: half the node)")
    v.add_argument("--teacher-tp", type=int, default=1, help="tensor-parallel size of a teacher replica (>= 1)")
    v.add_argument("--root", help="where the export folder will be on the cluster (default: --out)")
    return p


_STARTED: list[float] = []
"""when this process's export command began (`main`): a marker written since is this export's"""


def interrupted(argv: list[str], prog: str = "python -m mopd_mini.export") -> str:
    """What an export stopped by Ctrl-C kept, in words (the line `cli.interrupt.interruptible` prints).
    The export is all or nothing: `--out` holds the whole new export (when the interrupt came after
    its last rename) or is as it was, and the staging folder is removed (named, if something kept it:
    the next export of that `--out` removes it). Then the command that exports again."""
    from .cli.interrupt import command_line

    again = command_line(prog, argv)
    try:
        args, _ = parser(prog).parse_known_args(argv)
    except SystemExit:   # stopped before its flags were read
        return f"nothing was written. Run the same command to export again: {again}"
    out = Path(args.out).resolve()
    left = sorted(p.name for p in out.parent.glob(f".{out.name}.staging-{os.getpid()}-*"))
    staging = (f"its staging folder {left[0]} is left beside it (the next export of that --out removes it)" if left
               else "no staging folder is left")
    mark = out / MARKER
    if _STARTED and mark.is_file() and mark.stat().st_mtime >= _STARTED[0]:
        return f"the export had finished: {out} holds it whole; {staging}. Nothing to resume"
    held = out.is_dir() and any(out.iterdir())
    where = (f"--out {out} is as it was (nothing of this export is in it)" if held
             else f"nothing was written to --out {out}")
    return f"{where}; {staging}. Run the same command to export again: {again}"


def main(argv=None, prog: str = "python -m mopd_mini.export") -> dict:
    """The command line; every user mistake is a SystemExit("export refused: ...") before any write.
    Ctrl-C: one line (`interrupted`) where it runs as a command (`cli.interrupt.run_main`)."""
    _STARTED[:] = [time.time()]
    args = parser(prog).parse_args(argv)
    try:
        cfg, teachers, lora = read_run(args.run) if args.run else (MOPDConfig(), {}, LoraSettings())
        ran, flagged = dict(teachers), []   # the run's routing, before --teacher changes it
        for item in args.teacher:
            domain, sep, path = item.partition("=")
            if not sep or not domain or not path:
                raise ValueError(f"--teacher takes DOMAIN=ADAPTER (e.g. binding=runs/course/teacher_binding), "
                                 f"got {item!r}")
            teachers[domain] = BASE if path == BASE else Path(path)
            flagged.append(domain)
        if not args.run and teachers:
            cfg = MOPDConfig(domains=tuple(teachers))
        overridden = []   # every setting of the run a flag changed, recorded in export.json
        if args.loss:
            if args.run:
                overridden.append({"setting": "loss", "run": cfg.loss, "exported": args.loss, "flag": "--loss"})
            cfg = replace(cfg, loss=args.loss)
        for domain in dict.fromkeys(flagged):
            if args.run:
                overridden.append({"setting": f"teachers.{domain}", "run": str(ran.get(domain)),
                                   "exported": str(teachers[domain]), "flag": "--teacher"})
        for flag, on in (("--allow-domain-mismatch", args.allow_domain_mismatch), ("--allow-foreign", args.allow_foreign)):
            if on:
                overridden.append({"setting": flag.lstrip("-").replace("-", "_"), "run": None, "exported": True,
                                   "flag": flag})
        layout = Layout(gpus=args.gpus, teacher_gpus=args.teacher_gpus, teacher_tp=args.teacher_tp)
        info = export_verl(args.out, cfg, teachers, lora, args.base, layout, args.root,
                           allow_foreign=args.allow_foreign, force=args.force, run=args.run,
                           allow_mismatch=args.allow_domain_mismatch,
                           routed_by_flag=tuple(dict.fromkeys(flagged)) if args.run else (), overridden=overridden)
    except (ValueError, OSError) as err:  # FileNotFoundError, PermissionError: a path the user gave
        raise SystemExit(f"export refused: {err}") from err
    except _Terminated as err:
        raise SystemExit(f"export stopped: {err}; --out {args.out} is as it was, its staging folder removed") from None
    print(f"wrote {Path(args.out).resolve()}: student_base/, teachers/{{{','.join(teachers)}}}/, "
          f"data/train.parquet ({info['train_rows']} rows), data/val.parquet ({info['val_rows']} rows), "
          "reward/factworld_reward.py, verl_config.yaml, run_verl.sh, export.json")
    for d, x in info["merge_check"].items():
        if x.get("base"):
            print(f"teacher {d}: the base itself (served from student_base/)")
            continue
        print(f"merged teacher {d}: max |logit - adapter logit| {x['merge_exact']:.1e} (the merge, "
              f"{x['exact_dtype']}), {x['saved']:.1e} (the saved checkpoint, {x['saved_dtype']}; "
              f"max |logit| {x['max_logit']:.1f}; the adapter model itself, {x['saved_dtype']} vs "
              f"{x['exact_dtype']}: {x['adapter_rounding']:.1e})")
    return info


if __name__ == "__main__":
    from .cli.interrupt import run_main

    sys.exit(run_main(main, sys.argv[1:], "python -m mopd_mini.export", interrupted))
