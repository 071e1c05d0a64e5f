"""Tests for the verl export (mopd_mini.export): from a few-step tiny course run, the folded
teachers equal their adapters, the parquet reads back with the routing column and the gold answers,
the reward file scores right and wrong answers, the YAML round-trips onto verl's keys, objectives
verl does not have are refused, and verl 0.9.1 itself (in .venv-verl) loads the export and rejects
broken ones."""

import copy
import importlib.util
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from mopd_mini.export import tiny_run
from mopd_mini import AdapterBank, MOPDConfig, get_domains
from mopd_mini.export import (FOLD_TOLERANCE, Layout, export_verl, hydra_value, main, probe_ids, read_run)
from mopd_mini.rollout import chat_prompt

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[1]
VERL_PY = ROOT / ".venv-verl" / "bin" / "python"


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """(run folder, export folder, export info) of a fresh few-step tiny run."""
    work = tmp_path_factory.mktemp("verl")
    run = tiny_run(work / "work")
    out = work / "export"
    info = main(["verl", "--run", str(run), "--out", str(out)])
    return run, out, info


def overrides(out: Path) -> dict:
    doc = yaml.safe_load((out / "verl_config.yaml").read_text())
    return dict(o.split("=", 1) for o in doc["overrides"])


def test_export_writes_every_file(exported):
    _, out, _ = exported
    for f in ("student_base/model.safetensors", "student_base/tokenizer.json", "teachers/binding/model.safetensors",
              "teachers/recall/tokenizer.json", "data/train.parquet", "data/val.parquet",
              "reward/factworld_reward.py", "verl_config.yaml", "run_verl.sh", "export.json"):
        assert (out / f).is_file(), f


def test_folded_teachers_have_the_adapters_logits(exported, tiny):
    """The saved folded checkpoint, reloaded, gives the adapter model's logits; and the teacher
    is not the base (so the check could fail)."""
    from transformers import AutoModelForCausalLM

    run, out, info = exported
    base, tok = tiny
    ids, mask = probe_ids(tok, get_domains())
    real = mask.bool()
    for domain in ("binding", "recall"):
        check = info["fold_check"][domain]
        assert check["fold_exact"] <= FOLD_TOLERANCE and check["exact_dtype"] == "float64"
        assert check["saved"] <= FOLD_TOLERANCE * check["max_logit"]
        assert 0 < check["adapter_rounding"] < 1e-3  # fp32 rounding of the adapter model itself
        bank = AdapterBank(copy.deepcopy(base), tok)
        bank.load("t", run / f"teacher_{domain}")
        with torch.no_grad(), bank.use("t") as model:
            want = model(input_ids=ids, attention_mask=mask).logits
        with torch.no_grad():
            merged = AutoModelForCausalLM.from_pretrained(out / "teachers" / domain, dtype=torch.float32)
            got = merged.eval()(input_ids=ids, attention_mask=mask).logits
            plain = base(input_ids=ids, attention_mask=mask).logits
        assert (got - want)[real].abs().max() <= FOLD_TOLERANCE * want[real].abs().max()
        assert (plain - want)[real].abs().max() > 1e-3  # the teacher moved: the check has teeth


def test_parquet_has_routing_column_and_gold_answers_in_course_order(exported, tok):
    run, out, _ = exported
    cfg, _, _ = read_run(run)
    rows = pq.read_table(out / "data" / "train.parquet").to_pylist()
    domains = get_domains(cfg.domains)
    want = [ex for step in range(1, cfg.steps + 1) for d in domains.values()
            for ex in d.train_examples(step, cfg.prompts_per_domain, cfg.seed)]
    assert len(rows) == len(want) == cfg.steps * cfg.prompts_per_domain * len(domains)
    for r, ex in zip(rows, want):
        assert r["data_source"] == ex.task
        assert r["reward_model"]["ground_truth"] == ex.answer
        assert r["prompt"] == [{"role": "user", "content": ex.prompt}]  # the tiny model: no instruction
        assert r["extra_info"]["chat_text"] == chat_prompt(tok, ex.prompt)
        assert r["ability"] == f"factworld-{ex.task}"
    batch = cfg.prompts_per_domain * len(domains)  # each batch of verl's (shuffle=False) is a course step
    assert [r["data_source"] for r in rows[:batch]] == ["binding"] * 4 + ["recall"] * 4
    assert len({r["extra_info"]["index"] for r in rows}) == len(rows)
    val = pq.read_table(out / "data" / "val.parquet").to_pylist()
    n = {d: sum(r["data_source"] == d for r in val) for d in domains}
    assert n == {d: cfg.eval_n * len(domains[d].eval_lengths) for d in domains}


def test_reward_file_scores_right_and_wrong_answers(exported):
    _, out, _ = exported
    path = out / "reward" / "factworld_reward.py"
    assert "import mopd_mini" not in path.read_text() and "from factworld" not in path.read_text()
    spec = importlib.util.spec_from_file_location("factworld_reward", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    score = module.compute_score
    assert score("binding", "g3.", "g3.", {}) == 1.0
    assert score("recall", "**v17**. more words", "v17.", {}) == 1.0
    assert score("binding", "g4.", "g3.", {}) == 0.0
    assert score("recall", "", "v17.", {}) == 0.0
    with pytest.raises(ValueError, match="data_source"):
        score("arithmetic", "1", "1.", {})


def test_yaml_round_trips_onto_verls_keys(exported):
    run, out, _ = exported
    cfg, _, lora = read_run(run)
    text = (out / "verl_config.yaml").read_text()
    doc = yaml.safe_load(text)
    assert yaml.safe_load(yaml.safe_dump(doc, sort_keys=False)) == doc
    o = overrides(out)
    batch = cfg.prompts_per_domain * len(cfg.domains)
    assert o["distillation.distillation_loss.loss_mode"] == "k1"
    assert o["distillation.distillation_loss.use_policy_gradient"] == "true"
    assert o["distillation.distillation_loss.loss_max_clamp"] == str(cfg.clip)
    assert o["distillation.distillation_loss.use_task_rewards"] == "false"
    assert o["distillation.teacher_key"] == "data_source"
    for d in cfg.domains:
        assert o[f"+distillation.teacher_models.{d}.key"] == d
        assert o[f"+distillation.teacher_models.{d}.model_path"] == str(out / "teachers" / d)
    assert o["actor_rollout_ref.rollout.n"] == "1" and o["actor_rollout_ref.rollout.temperature"] == "1.0"
    assert o["data.train_batch_size"] == o["actor_rollout_ref.actor.ppo_mini_batch_size"] == str(batch)
    assert o["actor_rollout_ref.actor.ppo_epochs"] == "1" and o["data.shuffle"] == "false"
    assert o["actor_rollout_ref.actor.optim.lr"] == str(cfg.lr)
    assert o["data.max_response_length"] == str(cfg.max_new_tokens)
    assert o["actor_rollout_ref.model.lora_rank"] == str(lora.r) == "16"
    assert o["actor_rollout_ref.model.lora_alpha"] == str(lora.alpha) == "32"
    assert o["trainer.total_training_steps"] == str(cfg.steps)
    # the GPU layout: 8 GPUs, half for the two teachers (2 replicas each), half for the actor
    assert (o["trainer.n_gpus_per_node"], o["distillation.n_gpus_per_node"]) == ("4", "4")
    assert o["+distillation.teacher_models.binding.num_replicas"] == "2"
    script = (out / "run_verl.sh").read_text()
    assert all(k in script for k in o)


def test_hydra_values():
    assert [hydra_value(v) for v in (None, True, 1e-3, ["a", "b"], 5)] == ["null", "true", "0.001", "[a,b]", "5"]
    assert hydra_value("/data/my runs/it's") == "'/data/my runs/it\\'s'"
    assert hydra_value("/data/run-1/train.parquet") == "/data/run-1/train.parquet"


@pytest.mark.parametrize("loss, names", [("topk", ["forward_kl_topk", "FORWARD KL"]),
                                         ("kl", ["k1", "NOT this loss"]),
                                         ("fkl", ["forward KL", "full distribution"]),
                                         ("jsd", ["generalised JSD", "full distribution"])])
def test_objectives_verl_lacks_are_refused_before_any_work(exported, tmp_path, loss, names):
    run, _, _ = exported
    cfg, teachers, lora = read_run(run)
    with pytest.raises(ValueError) as err:
        export_verl(tmp_path / "out", replace(cfg, loss=loss), teachers, lora)
    assert all(n in str(err.value) for n in names)
    assert not (tmp_path / "out").exists()


def test_missing_teacher_and_bad_layout_are_refused(exported, tmp_path):
    run, _, _ = exported
    cfg, teachers, lora = read_run(run)
    with pytest.raises(ValueError, match="no teacher adapter for domain"):
        export_verl(tmp_path / "out", cfg, {"binding": teachers["binding"]}, lora)
    assert Layout(gpus=8).split(2) == (4, 4, 2)
    assert Layout(gpus=3, teacher_gpus=2).split(2) == (1, 2, 1)
    with pytest.raises(ValueError, match="teacher_gpus"):
        Layout(gpus=8, teacher_gpus=3).split(2)
    with pytest.raises(ValueError, match="left for the actor"):
        Layout(gpus=4, teacher_gpus=4).split(2)
    with pytest.raises(ValueError, match="does not split"):
        export_verl(tmp_path / "out2", replace(cfg, prompts_per_domain=3), teachers, lora, layout=Layout(gpus=8))
    assert not (tmp_path / "out").exists() and not (tmp_path / "out2").exists()  # refused before any work


def test_run_without_student_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="train the student first"):
        read_run(tmp_path)


def test_the_verl_check_loads_the_losses_without_the_package():
    """tools/check_verl.py runs in verl's venv, where mopd_mini's __init__ cannot import (verl pins
    another transformers): it loads losses.py, and the validate.py that losses.py imports, by path.
    Run here in a fresh process, so that it fails without .venv-verl too (as it once did in CI)."""
    code = ("import runpy, sys\n"
            "losses = runpy.run_path('tools/check_verl.py', run_name='check')['load_losses']()\n"
            "import torch\n"
            "x = torch.zeros(1, 3)\n"
            "loss, _ = losses.pg_loss(x, x, torch.ones(1, 3))\n"
            "print(losses.__name__, float(loss) + 0.0, sorted(m for m in ('mopd_mini', 'transformers') if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["mopd_losses_only.losses", "0.0", "[]"], done.stdout


@pytest.mark.slow
@pytest.mark.skipif(not VERL_PY.exists(), reason="needs .venv-verl (make check-verl creates it)")
def test_verl_loads_the_export_and_rejects_broken_ones(exported, tmp_path):
    """verl 0.9.1's own loader, in its own venv: the export passes; the check's two broken exports
    (a domain without a teacher, a wrong loss name) and a hand-broken YAML are rejected by verl."""
    _, out, _ = exported
    check = [str(VERL_PY), str(ROOT / "tools" / "check_verl.py")]
    done = subprocess.run(check + [str(out)], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS: verl loads the export" in done.stdout
    assert "No teacher configured for routing key 'arithmetic'" in done.stdout
    assert "Unsupported loss mode: reverse_kl_topk" in done.stdout
    assert "PASS: 2 of 2 broken exports rejected by verl" in done.stdout
    text = (out / "verl_config.yaml").read_text()
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "verl_config.yaml").write_text(text.replace("distillation.distillation_loss.loss_mode=k1",
                                                          "distillation.distillation_loss.loss_mode=topk"))
    done = subprocess.run(check + [str(broken), "--no-broken"], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Unsupported loss mode: topk" in done.stdout and "verl/trainer/distillation/losses.py" in done.stdout


def test_the_cures_settings_are_carried_refused_or_without_effect(exported, tmp_path):
    """top_p is carried into the rollout's nucleus; lmbda < 1 (teacher or gold prefixes) is refused by
    name before any work; beta, topk_support and lmbda_prefix only act through what is refused."""
    from mopd_mini.export import CARRIED, NO_EFFECT, REFUSED, unexportable
    run, _, _ = exported
    cfg, teachers, lora = read_run(run)
    assert "top_p" in CARRIED and "lmbda" in REFUSED
    assert {"beta", "topk_support", "lmbda_prefix"} <= set(NO_EFFECT)
    assert unexportable(replace(cfg, beta=0.2, topk_support=True, lmbda_prefix="gold"), lora) == []
    why = unexportable(replace(cfg, lmbda=0.5), lora)
    assert len(why) == 1 and "lmbda=0.5" in why[0] and "student's own rollouts" in why[0]
    with pytest.raises(ValueError, match="lmbda"):
        export_verl(tmp_path / "out", replace(cfg, lmbda=0.5), teachers, lora)
    assert not (tmp_path / "out").exists()
    out = tmp_path / "nucleus"
    export_verl(out, replace(cfg, top_p=0.9), teachers, lora)
    assert overrides(out)["actor_rollout_ref.rollout.top_p"] == "0.9"
