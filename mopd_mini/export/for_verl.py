"""What verl reads, from the course's settings: the GPU layout, the parquet prompts, the reward
file, the Hydra overrides that map MOPDConfig on verl's keys (MAPPING), and which MOPDConfig fields
are carried (CARRIED), have no effect (NO_EFFECT) or are refused by name (REFUSED, NOT_IN_VERL)."""

from __future__ import annotations

import importlib
import inspect
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import factworld

from ..adapters import LoraSettings, atomic_write
from ..config import LOSSES, MOPDConfig
from ..domains import get_domains
from ..rollout import chat_prompt
from ..tokenizer import INSTRUCTION, is_tiny
from ..validate import validate


VERL_VERSION = "0.9.1"
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
     "that adapter folded in; 'base': student_base"),
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
    ("teacher adapters", "folded checkpoints served by vLLM", "logits equal to 1e-5 (fp32)"),
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
                         "within its rounding); the export folds the teachers' saved adapters into checkpoints, "
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
