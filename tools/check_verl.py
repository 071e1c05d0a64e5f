"""verl's own loader judges a verl export of mopd_mini (run in .venv-verl, never in the course's venv).

    .venv-verl/bin/python tools/check_verl.py build/verl_export           # what `make check-verl` runs
    .venv-verl/bin/python tools/check_verl.py EXPORT --no-broken          # only the export as it is

With the export's verl_config.yaml, verl 0.9.1 itself:
  1. composes its `ppo_trainer` Hydra config with the overrides (an unknown key is an error);
  2. runs `verl.utils.config.validate_config` as `verl.trainer.main_ppo` does before launching;
  3. builds the distillation dataclass (`omega_conf_to_dataclass(cfg.distillation)`: loss registry,
     teacher pool) and the actor's; loads the student checkpoint as its HFModelConfig;
  4. reads both parquet files with its RLHFDataset, renders each prompt with the exported tokenizer
     and routes every row's data_source through its teacher manager (`AsyncTeacherLLMServerManager`,
     the code that picks a teacher per sample during training);
  5. loads the reward file with its `get_custom_reward_fn` and scores a gold and a wrong answer;
  6. computes its distillation loss (`verl.trainer.distillation.losses.distillation_loss`, the one
     the actor calls) on random tensors and compares the gradient with mopd_mini.losses.pg_loss.
Then, unless --no-broken, two deliberately broken exports (a domain in the data that has no teacher;
a wrong loss name) must be REJECTED by verl with its own error, which is printed verbatim.
Exit status 0 only if the export passes every step and both broken exports are rejected.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
import time
import traceback
import types
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("VERL_LOGGING_LEVEL", "WARN")

import torch  # noqa: E402
import yaml  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def compose(overrides: list[str]):
    """verl's ppo_trainer config with the overrides, composed by Hydra from verl's own config folder."""
    import verl
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    config_dir = str(Path(verl.__file__).parent / "trainer" / "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        return hydra_compose(config_name="ppo_trainer", overrides=overrides)


def verl_error(err: BaseException) -> str:
    """`Type: message (raised in verl/...)` for an error that verl's code raised (the innermost
    verl frame of the exception or of the one it wraps); an AssertionError if verl raised none."""
    chain, e = [], err
    while e is not None and e not in chain:
        chain.append(e)
        e = e.__cause__ or e.__context__
    for e in reversed(chain):  # innermost first
        frames = [f for f in traceback.extract_tb(e.__traceback__) if f"{os.sep}verl{os.sep}" in f.filename]
        if frames:
            f = frames[-1]
            short = f.filename[f.filename.rfind(f"{os.sep}verl{os.sep}") + 1:]
            return f"{type(err).__name__}: {err}\n    (raised in {short}:{f.lineno}, {f.name})"
    frames = [f for f in traceback.extract_tb(err.__traceback__) if f"{os.sep}hydra{os.sep}" in f.filename]
    if frames:  # Hydra composing verl's config (e.g. an unknown key)
        f = frames[-1]
        return f"{type(err).__name__}: {err}\n    (raised by Hydra composing verl's config, {f.name})"
    raise AssertionError(f"the error did not come from verl: {err!r}") from err


def load_losses():
    """mopd_mini/losses.py without the package's __init__ (which imports the course's transformers;
    verl pins another): an empty stand-in package whose path is mopd_mini/, so the module's own
    relative import (validate.py, standard library only) resolves there and nothing else loads."""
    name = "mopd_losses_only"
    if name not in sys.modules:
        package = types.ModuleType(name)
        package.__path__ = [str(ROOT / "mopd_mini")]
        sys.modules[name] = package
    return importlib.import_module(f"{name}.losses")


# ---------------------------------------------------------------------------------------------
# the checks
# ---------------------------------------------------------------------------------------------


def check_config(overrides: list[str]):
    """Steps 1-3; returns (cfg, distillation dataclass)."""
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config

    cfg = compose(overrides)
    try:
        validate_config(cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
        note = "validate_config passed"
    except Exception as err:  # noqa: BLE001
        if not vllm_lora_check(err):
            raise
        note = ("validate_config passed every check up to its last one, vLLM's LoRA-rank check, which "
                "imports vllm (not installed here: a GPU package; it runs when the cluster launches)")
    distill = omega_conf_to_dataclass(cfg.distillation)
    return cfg, distill, note


def vllm_lora_check(err: BaseException) -> bool:
    """True if `err` is validate_config's final statement (the LoRA rank checked against vLLM's
    allowed ranks) failing only because vllm is not installed."""
    if importlib.util.find_spec("vllm") is not None:
        return False
    frames = traceback.extract_tb(err.__traceback__)
    return any(f.name == "validate_config" and "vllm_rollout.utils import get_vllm_max_lora_rank" in (f.line or "")
               for f in frames) and "vllm" in str(err)


def check_models(cfg, distill) -> list[str]:
    from verl.utils.config import omega_conf_to_dataclass
    from verl.workers.config import HFModelConfig

    student = omega_conf_to_dataclass(cfg.actor_rollout_ref.model, HFModelConfig)
    lines = [f"student {student.path}: {student.hf_config.model_type}, vocab {student.hf_config.vocab_size}, "
             f"LoRA rank {student.lora_rank} alpha {student.lora_alpha} on {student.target_modules}"]
    for key, teacher in distill.teacher_models.items():
        t = HFModelConfig(path=teacher.model_path)
        if t.hf_config.vocab_size != student.hf_config.vocab_size:
            raise ValueError(f"teacher {key} has another vocabulary than the student")
        lines.append(f"teacher {key!r}: {teacher.model_path} ({t.hf_config.model_type}), "
                     f"{teacher.num_replicas} replica(s) x TP {teacher.inference.tensor_model_parallel_size}")
    return lines


def route_data(cfg, files) -> dict[str, int]:
    """Read the parquet with verl's RLHFDataset and route every row with verl's teacher manager."""
    from verl.experimental.teacher_loop.teacher_manager import AsyncTeacherLLMServerManager
    from verl.utils import hf_tokenizer
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from verl.utils.config import omega_conf_to_dataclass

    tokenizer = hf_tokenizer(cfg.actor_rollout_ref.model.path)
    routed = omega_conf_to_dataclass(cfg.distillation).teacher_models  # keyed by each teacher's .key
    manager = AsyncTeacherLLMServerManager(config=cfg, teacher_client={k: None for k in routed})
    counts: dict[str, int] = {}
    for path in files:
        dataset = RLHFDataset(data_files=path, tokenizer=tokenizer, config=cfg.data)
        for i in range(len(dataset)):
            item = dataset[i]
            text = tokenizer.apply_chat_template(item["raw_prompt"], add_generation_prompt=True, tokenize=False,
                                                 **cfg.data.apply_chat_template_kwargs)
            if text != item["extra_info"]["chat_text"]:
                raise ValueError(f"verl renders row {i} of {path} as {text!r}, the course as "
                                 f"{item['extra_info']['chat_text']!r}")
            teacher = manager._resolve_teacher_key(item[cfg.distillation.teacher_key])
            route = f"{Path(path).name}: {item['data_source']} -> teacher {teacher!r}"
            counts[route] = counts.get(route, 0) + 1
    return counts


def check_reward(cfg, files) -> str:
    import pyarrow.parquet as pq
    from verl.trainer.ppo.reward import get_custom_reward_fn

    fn = get_custom_reward_fn(cfg)
    if fn is None:
        raise ValueError("the config names no custom reward function (reward.custom_reward_function.path)")
    row = pq.read_table(files[0]).slice(0, 1).to_pylist()[0]
    gold = row["reward_model"]["ground_truth"]
    wrong = "zz9." if gold != "zz9." else "zz8."
    right = fn(data_source=row["data_source"], solution_str=f"**{gold[:-1]}**.", ground_truth=gold,
               extra_info=row["extra_info"])
    bad = fn(data_source=row["data_source"], solution_str=wrong, ground_truth=gold, extra_info=row["extra_info"])
    if (right, bad) != (1.0, 0.0):
        raise ValueError(f"the reward scores the gold {right} and a wrong answer {bad} (want 1.0 and 0.0)")
    return f"gold {gold!r} (decorated) -> {right}, wrong {wrong!r} -> {bad}"


def check_loss(cfg, distill) -> str:
    """verl's distillation_loss (k1 as a policy-gradient reward, clamp, loss_agg_mode) against our
    pg_loss on the same random log-probs: the gradients wrt the student log-probs must agree."""
    from tensordict import TensorDict
    from verl.trainer.distillation.losses import distillation_loss
    from verl.utils.config import omega_conf_to_dataclass

    ours = load_losses()
    actor = omega_conf_to_dataclass(cfg.actor_rollout_ref.actor)
    g = torch.Generator().manual_seed(0)
    B, T = 6, 5
    lengths = torch.tensor([5, 3, 1, 4, 2, 5])
    mask = (torch.arange(T)[None] < lengths[:, None]).float()                         # prefix masks
    student = (torch.randn(B, T, generator=g) * 3 - 2).clamp(max=-0.01).double().requires_grad_(True)
    teacher = (torch.randn(B, T, generator=g) * 3 - 2).clamp(max=-0.01).double()
    # verl's layout: each row = 1 prompt token + its response, flattened; log-probs left-shifted by one
    flat_s, flat_t = [], []
    for b in range(B):
        n = int(lengths[b])
        flat_s += [student[b, :n], torch.zeros(1, dtype=student.dtype)]
        flat_t += [teacher[b, :n], torch.zeros(1, dtype=teacher.dtype)]
    data = TensorDict({
        "prompts": torch.ones(B, 1, dtype=torch.long), "responses": torch.ones(B, T, dtype=torch.long),
        "attention_mask": torch.cat([torch.ones(B, 1), mask], dim=1).long(), "response_mask": mask.bool(),
        "old_log_probs": student.detach(), "teacher_logprobs": torch.cat(flat_t)[:, None],
        "dp_size": 1, "batch_num_tokens": int(mask.sum()), "global_batch_size": B}, batch_size=[])
    value, _ = distillation_loss(actor, distill, {"log_probs": torch.cat(flat_s)}, data)
    (grad_verl,) = torch.autograd.grad(value, student)
    clip = distill.distillation_loss.loss_max_clamp
    mine, _ = ours.pg_loss(student, teacher, mask, clip=clip)
    (grad_ours,) = torch.autograd.grad(mine, student)
    diff = (grad_verl - grad_ours).abs().max().item()
    unclipped, _ = ours.pg_loss(student, teacher, mask, clip=None)
    (grad_unclipped,) = torch.autograd.grad(unclipped, student)
    if not (grad_unclipped - grad_ours).abs().max() > 1e-3:
        raise ValueError("the random log-probs never reach the clip: the comparison would not test it")
    if not diff < 1e-9:
        raise ValueError(f"verl's distillation loss has another gradient than mopd_mini.losses.pg_loss "
                         f"(max difference {diff:.2e})")
    return f"verl distillation_loss vs mopd_mini pg_loss (clip {clip}): max |grad difference| {diff:.1e}"


def check(export: Path, overrides: list[str] | None = None, data_files: list[str] | None = None) -> list[str]:
    """Every step on one export; returns the report lines, raises on the first failure."""
    doc = yaml.safe_load((export / "verl_config.yaml").read_text())
    overrides = overrides if overrides is not None else doc["overrides"]
    cfg, distill, note = check_config(overrides)
    lines = [f"composed ppo_trainer with {len(overrides)} overrides; {note}",
             f"distillation: loss_mode={distill.distillation_loss.loss_mode}, "
             f"use_policy_gradient={distill.distillation_loss.use_policy_gradient}, "
             f"loss_max_clamp={distill.distillation_loss.loss_max_clamp}, teacher_key={distill.teacher_key!r}, "
             f"teachers {sorted(distill.teacher_models)} on a pool of "
             f"{distill.n_gpus_per_node * distill.nnodes} GPU(s); actor on "
             f"{cfg.trainer.n_gpus_per_node * cfg.trainer.nnodes} GPU(s)"]
    lines += check_models(cfg, distill)
    files = data_files or [cfg.data.train_files, cfg.data.val_files]
    lines += [f"routed {n} rows: {k}" for k, n in route_data(cfg, files).items()]
    lines.append("reward: " + check_reward(cfg, files))
    lines.append(check_loss(cfg, distill))
    return lines


def broken_exports(export: Path, tmp: Path):
    """(name, overrides, data files) of the two deliberately broken exports."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    doc = yaml.safe_load((export / "verl_config.yaml").read_text())
    good = doc["overrides"]
    # 1. the data holds a domain that no teacher serves: rows of a third domain, "arithmetic"
    table = pq.read_table(export / "data" / "train.parquet")
    rows = table.slice(0, 4).to_pylist()
    for r in rows:
        r["data_source"] = "arithmetic"
    path = tmp / "train_with_arithmetic.parquet"
    pq.write_table(pa.concat_tables([table, pa.Table.from_pylist(rows, schema=table.schema)]), path)
    yield "a domain in the data with no teacher (data_source='arithmetic')", good, [str(path)]
    # 2. a wrong loss name
    wrong = [o if not o.startswith("distillation.distillation_loss.loss_mode=") else
             "distillation.distillation_loss.loss_mode=reverse_kl_topk" for o in good]
    yield "a wrong loss name (loss_mode=reverse_kl_topk)", wrong, None


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("export", type=Path, help="the folder `python -m mopd_mini.export verl` wrote")
    p.add_argument("--no-broken", action="store_true", help="skip the two deliberately broken exports")
    args = p.parse_args(argv)
    import verl

    start = time.time()
    print(f"verl {verl.__version__}, torch {torch.__version__}; export {args.export}")
    try:
        for line in check(args.export):
            print("  ok  " + line)
    except Exception as err:  # noqa: BLE001  (any failure fails the check, verbatim)
        print("FAIL: the export does not load in verl:\n  " + verl_error_or_repr(err))
        return 1
    print("PASS: verl loads the export")
    if args.no_broken:
        return 0
    rejected = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, overrides, files in broken_exports(args.export, Path(tmp)):
            try:
                check(args.export, overrides, files)
            except Exception as err:  # noqa: BLE001
                try:
                    print(f"REJECTED as it must be, {name}:\n  {verl_error(err)}")
                    rejected += 1
                except AssertionError as not_verl:
                    print(f"FAIL: {name} failed, but not in verl: {not_verl}")
            else:
                print(f"FAIL: verl accepted a broken export: {name}")
    ok = rejected == 2
    print(f"{'PASS' if ok else 'FAIL'}: {rejected} of 2 broken exports rejected by verl ({time.time() - start:.0f} s)")
    return 0 if ok else 1


def verl_error_or_repr(err: BaseException) -> str:
    try:
        return verl_error(err)
    except AssertionError:
        return "".join(traceback.format_exception(err))


if __name__ == "__main__":
    sys.exit(main())
