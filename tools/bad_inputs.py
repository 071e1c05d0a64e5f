"""Feed the course every bad input we know of and record what each one says.

    python tools/bad_inputs.py            # prints the table and rewrites it in docs/reliability.md
    python tools/bad_inputs.py --print    # prints only

Each case is triggered for real on the tiny model (CPU, offline, a few seconds in all), its
exception caught, and its type and message written to the table between the markers
`<!-- begin:bad-inputs -->` and `<!-- end:bad-inputs -->` of docs/reliability.md. Temporary paths
are shown as `<tmp>`. A case whose exception type is not the one the table promises (or that
raises when it should only log, as a non-finite loss) fails the script: the page cannot drift from
the code.
"""

from __future__ import annotations

import argparse
import atexit
import copy
import json
import os
import re
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

TMP = Path(tempfile.mkdtemp(prefix="mopd-bad-inputs-"))
atexit.register(shutil.rmtree, TMP, ignore_errors=True)
os.environ["HF_HUB_OFFLINE"] = "1"  # as on a machine with no network (set before transformers loads),
os.environ["HF_HUB_CACHE"] = str(TMP / "hf-cache")  # and no downloaded weights
os.environ.setdefault("OMP_NUM_THREADS", "1")

import huggingface_hub.constants  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

import factworld  # noqa: E402
from mopd_mini import (AdapterBank, Domain, GRPOConfig, MOPDConfig, evaluate, load_base, losses, runs,  # noqa: E402
                       routing, train_grpo, train_student)
from mopd_mini.adapters import ORIGIN_FILE  # noqa: E402
from mopd_mini.merge import merge as merge_adapters  # noqa: E402
from mopd_mini.models import QWEN3_ID, TINY_DIR, _quantization_config, tiny_config  # noqa: E402
from mopd_mini.rollout import Prompt, generate_answers, sample  # noqa: E402
from mopd_mini.tokenizer import build_tiny_tokenizer  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "reliability.md"
BEGIN, END = "<!-- begin:bad-inputs -->", "<!-- end:bad-inputs -->"
BEGIN_22, END_22 = "<!-- begin:bad-inputs-22 -->", "<!-- end:bad-inputs-22 -->"  # the second batch of cases (library)

torch.set_num_threads(1)
transformers.logging.set_verbosity_error()
warnings.filterwarnings("ignore")
huggingface_hub.constants.HF_HUB_OFFLINE = True


# ---------------------------------------------------------------------------------------------
# the things the cases need: a tiny bank with two teachers, scratch folders
# ---------------------------------------------------------------------------------------------

TINY = load_base("tiny", device="cpu")
runs.RUNS_DIR = TMP / "runs"


def bank(teachers_too: bool = True) -> AdapterBank:
    """A fresh bank on a copy of the tiny base, with two distinct teachers unless told otherwise."""
    b = AdapterBank(copy.deepcopy(TINY[0]), TINY[1])
    for i, name in enumerate(("teacher_binding", "teacher_recall") if teachers_too else ()):
        b.create(name, seed=i + 1)
    return b


def teacher(**kw) -> GRPOConfig:
    return GRPOConfig(**{**dict(steps=2, prompts_per_step=2, group_size=4, eval_every=0, experiment="bad",
                                progress=False), **kw})


def student(**kw) -> MOPDConfig:
    return MOPDConfig(**{**dict(steps=2, prompts_per_domain=2, topk=8, eval_every=0, track_steps=(),
                                experiment="bad", progress=False), **kw})


def saved_adapter(name: str, b: AdapterBank | None = None, edit=None) -> Path:
    """A saved adapter folder (of bank `b`, default a fresh one), optionally edited after saving."""
    b = b or bank(False)
    b.create("a", seed=1)
    folder = b.save("a", TMP / name)
    if edit:
        edit(folder)
    return folder


def base_folder(name: str, edit=None) -> str:
    """A copy of the shipped tiny base, optionally broken by `edit(folder)`."""
    folder = TMP / name
    folder.mkdir()
    for f in TINY_DIR.iterdir():
        if f.is_file():
            (folder / f.name).write_bytes(f.read_bytes())
    if edit:
        edit(folder)
    return str(folder)


def write(path: str, data: bytes | str):
    return lambda folder: (folder / path).write_bytes(data if isinstance(data, bytes) else data.encode())


def checkpoint_folder(payload: bytes) -> None:
    folder = runs.RUNS_DIR / "bad" / "teacher_binding"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "checkpoint.pt").write_bytes(payload)


def other_config() -> None:
    """A finished one-step run, then the same experiment with another learning rate."""
    b = bank(False)
    train_grpo(b, teacher(steps=1, experiment="changed"))
    train_grpo(b, teacher(steps=1, lr=5e-3, experiment="changed"))


def no_bitsandbytes() -> None:
    sys.modules["bitsandbytes"] = None  # `import bitsandbytes` fails, as where it is not installed
    try:
        _quantization_config("4bit", torch.bfloat16, torch.device("cuda"))
    finally:
        del sys.modules["bitsandbytes"]


def nonfinite(kind: str) -> dict:
    """What guarded_step returns (and the trainers log) for a NaN loss or an inf gradient."""
    w = torch.nn.Parameter(torch.ones(2))
    before = w.detach().clone()
    loss = torch.tensor(float("nan")) if kind == "loss" else torch.sqrt((w * 0).sum())  # d sqrt(0) = inf
    row = runs.guarded_step(loss, [w], torch.optim.AdamW([w]), grad_clip=1.0)
    return {**row, "weights unchanged": bool(torch.equal(w.detach(), before))}


# ---------------------------------------------------------------------------------------------
# the cases: (group, bad input, where it is caught, expected exception, test, call)
# ---------------------------------------------------------------------------------------------

# the tests that cover each case, as "<file letter>:<test>" (expanded by `tests_cell`)
TEST_FILES = {"R": "test_reliability", "G": "test_grpo", "D": "test_distill", "A": "test_adapters",
              "L": "test_losses", "M": "test_models", "F": "test_factworld", "C": "test_rollout",
              "N": "test_routing", "O": "test_no_overwrite", "X": "test_export_safety", "E": "test_export"}
V = len(TINY[1])

CASES = [
    # names
    ("names", "GRPOConfig(domain='math')", "GRPOConfig.check", ValueError,
     "R:test_grpo_config_refuses_bad_values G:test_train_grpo_refuses_bad_configs",
     lambda: train_grpo(bank(False), teacher(domain="math"))),
    ("names", "MOPDConfig(domains=('math',))", "MOPDConfig.check", ValueError, "D:test_student_refuses_bad_configs",
     lambda: train_student(bank(), student(domains=("math",)))),
    ("names", "MOPDConfig(domains=())", "MOPDConfig.check", ValueError, "R:test_mopd_config_refuses_bad_values",
     lambda: train_student(bank(), student(domains=()))),
    ("names", "MOPDConfig(loss='foo')", "MOPDConfig.check", ValueError, "D:test_student_refuses_bad_configs",
     lambda: train_student(bank(), student(loss="foo"))),
    ("names", "MOPDConfig(scoring='average')", "MOPDConfig.check", ValueError, "D:test_student_refuses_bad_configs",
     lambda: train_student(bank(), student(scoring="average"))),
    ("names", "bank.use('nope') (any unknown adapter name)", "AdapterBank.check", ValueError,
     "A:test_unknown_adapter_name_lists_the_bank",
     lambda: bank().use("nope").__enter__()),
    ("names", "train_student on a bank without its teachers", "train_student", ValueError,
     "D:test_student_needs_the_teachers",
     lambda: train_student(bank(False), student())),
    ("names", "bank.create('base')", "AdapterBank.create", ValueError, "A:test_create_refuses_the_base_name",
     lambda: bank(False).create("base")),
    ("names", "load_base('tiny', quantize='3bit')", "load_base", ValueError,
     "M:test_unknown_quantize_is_a_value_error",
     lambda: load_base("tiny", quantize="3bit")),
    # numbers
    ("numbers", "MOPDConfig(clip=0)", "MOPDConfig.check", ValueError,
     "D:test_student_refuses_bad_configs R:test_mopd_config_refuses_bad_values",
     lambda: train_student(bank(), student(clip=0))),
    ("numbers", "losses.pg_loss(..., clip=-1)", "losses.pg_loss", ValueError, "L:test_validation_errors",
     lambda: losses.pg_loss(torch.zeros(1, 2), torch.zeros(1, 2), torch.ones(1, 2), clip=-1.0)),
    ("numbers", "MOPDConfig(topk=0)", "MOPDConfig.check", ValueError, "D:test_student_refuses_bad_configs",
     lambda: train_student(bank(), student(topk=0))),
    ("numbers", f"MOPDConfig(topk=10000) on the tiny model (V = {V})", "train_student", ValueError,
     "R:test_mopd_config_refuses_bad_values",
     lambda: train_student(bank(), student(topk=10_000))),
    ("numbers", "routing.teacher_outputs(..., k=10000)", "routing.summarise", ValueError,
     "N:test_k_outside_the_vocabulary_is_refused",
     lambda: routing.teacher_outputs(bank(), _rollout(), {"binding": "teacher_binding", "recall": "teacher_recall"},
                                     k=10_000)),
    ("numbers", "losses.topk_reverse_kl with k > V", "losses.topk_reverse_kl", ValueError, "L:test_validation_errors",
     lambda: losses.topk_reverse_kl(torch.zeros(1, 1, 4), torch.zeros(1, 1, 5, dtype=torch.long),
                                    torch.zeros(1, 1, 5), torch.ones(1, 1))),
    ("numbers", "MOPDConfig(temperature=0)", "runs.check_loop", ValueError, "D:test_student_refuses_bad_configs",
     lambda: train_student(bank(), student(temperature=0))),
    ("numbers", "GRPOConfig(temperature=-1)", "runs.check_loop", ValueError, "R:test_grpo_config_refuses_bad_values",
     lambda: train_grpo(bank(False), teacher(temperature=-1.0))),
    ("numbers", "sample(..., temperature=0)", "rollout.sample", ValueError,
     "C:test_non_positive_temperature_is_refused",
     lambda: sample(*TINY, [Prompt("who is the final holder of o1?")], temperature=0.0)),
    ("numbers", "GRPOConfig(lr=0)", "runs.check_loop", ValueError, "R:test_grpo_config_refuses_bad_values",
     lambda: train_grpo(bank(False), teacher(lr=0.0))),
    ("numbers", "GRPOConfig(grad_clip=0)", "runs.check_loop", ValueError, "R:test_grpo_config_refuses_bad_values",
     lambda: train_grpo(bank(False), teacher(grad_clip=0.0))),
    ("numbers", "GRPOConfig(steps=0)", "runs.check_loop", ValueError,
     "R:test_grpo_config_refuses_bad_values G:test_train_grpo_refuses_bad_configs",
     lambda: train_grpo(bank(False), teacher(steps=0))),
    ("numbers", "GRPOConfig(max_new_tokens=0)", "runs.check_loop", ValueError,
     "R:test_grpo_config_refuses_bad_values",
     lambda: train_grpo(bank(False), teacher(max_new_tokens=0))),
    ("numbers", "GRPOConfig(checkpoint_every=0)", "runs.check_loop", ValueError,
     "R:test_grpo_config_refuses_bad_values",
     lambda: train_grpo(bank(False), teacher(checkpoint_every=0))),
    ("numbers", "GRPOConfig(eval_every=-1)", "runs.check_loop", ValueError, "R:test_grpo_config_refuses_bad_values",
     lambda: train_grpo(bank(False), teacher(eval_every=-1))),
    # batch sizes
    ("batch size 0", "GRPOConfig(prompts_per_step=0)", "GRPOConfig.check", ValueError,
     "R:test_grpo_config_refuses_bad_values",
     lambda: train_grpo(bank(False), teacher(prompts_per_step=0))),
    ("batch size 0", "GRPOConfig(group_size=1)", "GRPOConfig.check", ValueError,
     "R:test_grpo_config_refuses_bad_values",
     lambda: train_grpo(bank(False), teacher(group_size=1))),
    ("batch size 0", "MOPDConfig(prompts_per_domain=0)", "MOPDConfig.check", ValueError,
     "D:test_student_refuses_bad_configs",
     lambda: train_student(bank(), student(prompts_per_domain=0))),
    ("batch size 0", "GRPOConfig(eval_n=0)", "runs.check_loop", ValueError, "R:test_grpo_config_refuses_bad_values",
     lambda: train_grpo(bank(False), teacher(eval_n=0))),
    ("batch size 0", "evaluate(bank, ['base'], n=0)", "evaluate.evaluate", ValueError,
     "R:test_batch_size_zero_in_evaluation_is_refused",
     lambda: evaluate(bank(), ["base"], n=0)),
    ("batch size 0", "generate_answers(..., batch_size=0)", "rollout.generate_answers", ValueError,
     "R:test_batch_size_zero_in_evaluation_is_refused",
     lambda: generate_answers(*TINY, ["who is the final holder of o1?"], batch_size=0)),
    ("batch size 0", "sample(model, tokenizer, [])", "rollout.encode_prompts", ValueError,
     "C:test_empty_example_list_is_refused",
     lambda: sample(*TINY, [])),
    # domains and prompts
    ("prompts", "Domain('binding', train_lengths=(), eval_lengths=(16,))", "Domain.__post_init__", ValueError,
     "R:test_a_domain_with_no_prompts_is_refused",
     lambda: Domain("binding", train_lengths=(), eval_lengths=(16,))),
    ("prompts", "Domain('recall', train_lengths=(12,), eval_lengths=())", "Domain.__post_init__", ValueError,
     "R:test_a_domain_with_no_prompts_is_refused",
     lambda: Domain("recall", train_lengths=(12,), eval_lengths=())),
    ("prompts", "GRPOConfig(max_new_tokens=512): prompt + budget beyond the 512-token context",
     "rollout.encode_prompts (step 1, before any save)", ValueError,
     "R:test_prompt_beyond_the_context_writes_nothing",
     lambda: train_grpo(bank(False), teacher(max_new_tokens=512))),
    ("prompts", "a prompt of 522 words", "rollout.encode_prompts", ValueError,
     "C:test_prompt_longer_than_the_context_is_refused",
     lambda: sample(*TINY, [Prompt(" ".join(["g1"] * 522))], greedy=True)),
    ("prompts", "recall at N = 100 (agent_pool=200): words the tiny vocabulary lacks", "rollout.encode_prompts",
     ValueError, "C:test_words_outside_the_vocabulary_are_named",
     lambda: sample(*TINY, factworld.generate("recall", "test", n=1, length=100, agent_pool=200, value_vocab=200),
                    greedy=True)),
    # FactWorld knobs
    ("knobs", "binding n_objects=3, n_active=4 (more active objects than objects)", "factworld.resolve_knobs",
     ValueError,
     "F:test_bad_input_raises_value_error_naming_the_problem R:test_a_domain_with_out_of_range_knobs_is_refused",
     lambda: factworld.generate("binding", length=8, n_objects=3, n_active=4)),
    ("knobs", "binding n_active=1", "factworld.resolve_knobs", ValueError,
     "F:test_bad_input_raises_value_error_naming_the_problem",
     lambda: factworld.generate("binding", length=8, n_active=1)),
    ("knobs", "recall N = 20 with agent_pool=16 (a pool larger than the agent set)", "factworld.resolve_knobs",
     ValueError,
     "F:test_bad_input_raises_value_error_naming_the_problem R:test_a_domain_with_out_of_range_knobs_is_refused",
     lambda: factworld.generate("recall", length=20, agent_pool=16)),
    ("knobs", "recall N = 20 with value_vocab=16", "factworld.resolve_knobs", ValueError,
     "F:test_bad_input_raises_value_error_naming_the_problem",
     lambda: factworld.generate("recall", length=20, value_vocab=16)),
    ("knobs", "length=1", "factworld.resolve_knobs", ValueError,
     "F:test_bad_input_raises_value_error_naming_the_problem",
     lambda: factworld.generate("binding", length=1)),
    ("knobs", "Domain('binding', train_lengths=(1, 8), ...)", "Domain.__post_init__ -> resolve_knobs", ValueError,
     "R:test_a_domain_with_out_of_range_knobs_is_refused",
     lambda: Domain("binding", train_lengths=(1, 8), eval_lengths=(16,))),
    ("knobs", "unknown knob n_agent=5", "factworld.resolve_knobs", ValueError,
     "F:test_bad_input_raises_value_error_naming_the_problem",
     lambda: factworld.generate("binding", length=8, n_agent=5)),
    ("knobs", "task 'sorting'", "factworld.resolve_knobs", ValueError,
     "F:test_bad_input_raises_value_error_naming_the_problem R:test_a_domain_with_out_of_range_knobs_is_refused",
     lambda: factworld.generate("sorting", length=8)),
    # non-finite numbers
    ("non-finite", "a NaN loss (NaN or inf in the logits)", "runs.guarded_step: the step is skipped", None,
     "R:test_nan_logits_skip_the_student_step R:test_inf_logits_skip_the_teacher_step",
     lambda: nonfinite("loss")),
    ("non-finite", "a finite loss with an inf gradient", "runs.guarded_step: the step is skipped", None,
     "R:test_guarded_step_skips_a_finite_loss_with_a_nonfinite_gradient",
     lambda: nonfinite("grad")),
    # adapters
    ("adapters", "bank.load of a folder that does not exist", "AdapterBank.load", FileNotFoundError,
     "A:test_load_without_adapter_config_is_file_not_found",
     lambda: bank(False).load("t", TMP / "nowhere")),
    ("adapters", "bank.load: adapter_model.safetensors is garbage", "AdapterBank.load", ValueError,
     "A:test_corrupt_weights_are_a_value_error A:test_failed_load_leaves_the_bank_unchanged",
     lambda: bank(False).load("t", saved_adapter("garbage", edit=write("adapter_model.safetensors", b"junk" * 9)))),
    ("adapters", "bank.load: adapter_config.json is garbage", "AdapterBank.load", ValueError,
     "R:test_corrupt_adapter_config_is_a_value_error",
     lambda: bank(False).load("t", saved_adapter("badcfg", edit=write("adapter_config.json", "{junk")))),
    ("adapters", f"bank.load: {ORIGIN_FILE} is garbage", "AdapterBank._check_origin", ValueError,
     "R:test_adapter_of_unknown_origin_is_refused",
     lambda: bank(False).load("t", saved_adapter("badorigin", edit=write(ORIGIN_FILE, "{junk")))),
    ("adapters", f"bank.load: a plain peft folder (no {ORIGIN_FILE})", "AdapterBank._check_origin", ValueError,
     "R:test_adapter_of_unknown_origin_is_refused",
     lambda: bank(False).load("t", saved_adapter("noorigin", edit=lambda f: (f / ORIGIN_FILE).unlink()))),
    ("adapters", "a teacher trained on another base (same shapes)", "AdapterBank._check_origin", ValueError,
     "A:test_foreign_adapter_is_refused_unless_allowed",
     lambda: bank(False).load("t", saved_adapter("otherbase", _foreign_bank(same_tokenizer=True)))),
    ("adapters", "a teacher trained with another tokenizer of the same size", "AdapterBank._check_origin",
     ValueError, "R:test_teacher_of_another_tokenizer_is_refused",
     lambda: bank(False).load("t", saved_adapter("othertok", _other_tokenizer_bank()))),
    ("adapters", "a teacher of another vocabulary (V = 250)", "AdapterBank._check_origin", ValueError,
     "R:test_teacher_of_another_vocabulary_is_refused",
     lambda: bank(False).load("t", saved_adapter("othervocab", _foreign_bank(same_tokenizer=False)))),
    # base checkpoints
    ("base", "load_base('/no/such/folder')", "models._load_pretrained", FileNotFoundError,
     "R:test_missing_base_folder_is_file_not_found",
     lambda: load_base(str(TMP / "no-such-folder"), device="cpu")),
    ("base", "load_base(<empty folder>)", "models._load_pretrained", ValueError,
     "R:test_corrupt_base_folder_is_a_clear_value_error",
     lambda: load_base(str(_mkdir(TMP / "empty")), device="cpu")),
    ("base", "load_base(<folder with a garbage config.json>)", "models._load_pretrained", ValueError,
     "R:test_corrupt_base_folder_is_a_clear_value_error",
     lambda: load_base(base_folder("badconfig", write("config.json", "{junk")), device="cpu")),
    ("base", "load_base(<folder with garbage model.safetensors>)", "models._load_pretrained", ValueError,
     "R:test_corrupt_base_folder_is_a_clear_value_error",
     lambda: load_base(base_folder("badweights", write("model.safetensors", b"junk" * 9)), device="cpu")),
    ("base", "load_base(<folder with model.safetensors cut in half>)", "models._load_pretrained", ValueError,
     "R:test_corrupt_base_folder_is_a_clear_value_error",
     lambda: load_base(base_folder("cut", lambda f: write("model.safetensors", (
         TINY_DIR / "model.safetensors").read_bytes()[:700_000])(f)), device="cpu")),
    ("base", "load_base(<folder without weights>)", "models._load_pretrained", ValueError,
     "R:test_corrupt_base_folder_is_a_clear_value_error",
     lambda: load_base(base_folder("noweights", lambda f: (f / "model.safetensors").unlink()), device="cpu")),
    ("base", f"load_base('{QWEN3_ID}') with no network and no cache", "models._load_pretrained", OSError,
     "M:test_missing_hub_id_offline_explains_how_to_pass_a_local_folder",
     lambda: load_base(QWEN3_ID, device="cpu")),
    ("base", f"load_base('{QWEN3_ID}', quantize='4bit') on a CPU", "models._quantization_config", RuntimeError,
     "M:test_quantize_on_cpu_says_it_needs_cuda",
     lambda: load_base(QWEN3_ID, quantize="4bit", device="cpu")),
    ("base", f"load_base('{QWEN3_ID}', quantize='8bit') on a CPU", "models._quantization_config", RuntimeError,
     "M:test_quantize_on_cpu_says_it_needs_cuda",
     lambda: load_base(QWEN3_ID, quantize="8bit", device="cpu")),
    ("base", "quantize='4bit' on a GPU without bitsandbytes", "models._quantization_config", RuntimeError,
     "R:test_quantize_without_bitsandbytes_says_how_to_install_it",
     no_bitsandbytes),
    ("base", "load_base('tiny', quantize='4bit')", "models._load_tiny", ValueError,
     "M:test_quantize_of_the_tiny_model_is_refused",
     lambda: load_base("tiny", quantize="4bit")),
    # checkpoints
    ("checkpoints", "checkpoint.pt is garbage", "Run.checkpoint (in Run.open, before any work)", ValueError,
     "R:test_unreadable_checkpoint_says_delete_it",
     lambda: (checkpoint_folder(b"junk"), train_grpo(bank(False), teacher()))),
    ("checkpoints", "the same experiment re-run with another lr", "Run.checkpoint (in Run.open, before any work)", ValueError,
     "R:test_resuming_with_another_config_is_refused", other_config),
]


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def _foreign_bank(same_tokenizer: bool) -> AdapterBank:
    """A bank on another randomly initialised tiny-architecture model."""
    tok = TINY[1] if same_tokenizer else build_tiny_tokenizer(agents=32)
    config = tiny_config(len(tok), pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(123)
        model = transformers.Qwen3ForCausalLM(config).eval()
    return AdapterBank(model, tok)


def _other_tokenizer_bank() -> AdapterBank:
    """The tiny base with another tokenizer of the same size (the same ids name other words)."""
    return AdapterBank(copy.deepcopy(TINY[0]), build_tiny_tokenizer(agents=32, values=160))


def _rollout():
    examples = [factworld.generate("binding", "test", n=1, length=8)[0], factworld.generate("recall", "test", n=1,
                                                                                            length=12)[0]]
    return sample(*TINY, examples, max_new_tokens=3, generator=torch.Generator().manual_seed(0))


# ---------------------------------------------------------------------------------------------
# the second batch: nothing lost, nothing silently wrong (trainers' roles, the record, merges, names, export)
# ---------------------------------------------------------------------------------------------


def finished(experiment: str, student_steps: int = 0) -> AdapterBank:
    """A bank whose two teachers (and, with student_steps, a student) are finished runs of `experiment`."""
    b = bank(False)
    for d in ("binding", "recall"):
        train_grpo(b, teacher(domain=d, steps=1, experiment=experiment))
    if student_steps:
        train_student(b, student(steps=student_steps, experiment=experiment))
    return b


def student_over_teacher_folder() -> None:
    """The issue's case: a fresh process, the teacher's folder without checkpoint.pt."""
    finished("roles")
    (runs.RUNS_DIR / "roles" / "teacher_binding" / "checkpoint.pt").unlink()
    b = bank(False)
    b.load("teacher_recall", runs.RUNS_DIR / "roles" / "teacher_recall")
    train_student(b, student(student="teacher_binding", teachers={"binding": "teacher_recall"}, experiment="roles"))


def retrain_without_checkpoint() -> None:
    finished("nockpt")
    (runs.RUNS_DIR / "nockpt" / "teacher_binding" / "checkpoint.pt").unlink()
    train_grpo(bank(False), teacher(steps=1, experiment="nockpt"))


def fewer_steps() -> None:
    b = finished("record", student_steps=3)
    train_student(b, student(steps=1, experiment="record"))


def other_teachers() -> None:
    b = finished("record2", student_steps=2)
    train_student(b, student(steps=2, teachers={"recall": "base"}, experiment="record2"))


def runs_dir_a_file() -> None:
    folder, runs.RUNS_DIR = runs.RUNS_DIR, TMP / "runs-file"
    runs.RUNS_DIR.write_text("a file")
    try:
        train_grpo(bank(False), teacher())
    finally:
        runs.RUNS_DIR = folder


def foreign_then_create() -> None:
    b, other = bank(False), bank()
    b.add_foreign("t_other", other, "teacher_binding")
    b.create("t_other")


def create_then_foreign() -> None:
    b = bank()
    b.add_foreign("teacher_binding", bank(), "teacher_binding")


_RUN = []


def export_run(**config) -> Path:
    """A copy of a few-step tiny course run (trained once), its student's config.json edited."""
    from mopd_mini.export import tiny_run

    if not _RUN:
        tiny_run(TMP / "verl")  # into runs.RUNS_DIR (absolute here), not <work>/runs/
        _RUN.append(runs.RUNS_DIR / "verl-tiny")
    n = len(list(TMP.glob("run-*")))
    copy_ = TMP / f"run-{n}"
    shutil.copytree(_RUN[0], copy_)
    path = copy_ / "student" / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **config}))
    return copy_


def export(*args, run: Path | None = None, out: Path | None = None) -> None:
    from mopd_mini.export import main

    main(["verl", "--run", str(run or export_run()), "--out", str(out or TMP / "out-never")] + list(args),
         prog="mopd-mini export")


def export_over(folder_setup) -> None:
    out = TMP / "out-full"
    out.mkdir(exist_ok=True)
    folder_setup(out)
    export(out=out)


def export_missing_teacher() -> None:
    run = export_run()
    shutil.rmtree(run / "teacher_recall")
    export(run=run)


def export_dropout() -> None:
    run = export_run()
    path = run / "student" / "adapter_config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "lora_dropout": 0.1}))
    export(run=run)


CASES_22 = [
    ("roles", "train_student(student='teacher_binding') where runs/<exp>/teacher_binding/ holds the teacher "
              "(no checkpoint.pt; a fresh process)", "Run.claim", ValueError,
     "O:test_a_student_never_overwrites_a_teacher_on_disk", student_over_teacher_folder),
    ("roles", "the same with the teacher loaded in the bank", "AdapterBank.claim", ValueError,
     "O:test_a_student_never_overwrites_a_teacher_on_disk",
     lambda: train_student(finished("roles2"), student(student="teacher_binding", teachers={"binding": "teacher_recall"},
                                                      experiment="roles2"))),
    ("roles", "train_student(student='teacher_binding') routed to itself (experiment=None)", "train_student", ValueError,
     "O:test_a_student_named_as_its_own_teacher_is_refused_in_memory",
     lambda: train_student(bank(), student(student="teacher_binding", experiment=None))),
    ("roles", "train_grpo(name='student') over an MOPD student", "AdapterBank.claim", ValueError,
     "O:test_no_trainer_trains_over_another_roles_adapter",
     lambda: train_grpo(finished("roles3", student_steps=1), teacher(name="student", experiment="roles3"))),
    ("roles", "merge(bank, 'teacher_binding', ...) over a teacher", "AdapterBank.claim", ValueError,
     "O:test_no_trainer_trains_over_another_roles_adapter",
     lambda: merge_adapters(finished("roles4", student_steps=1), "teacher_binding",
                                                       {"student": 1.0, "teacher_recall": 1.0})),
    ("roles", "train_grpo on its own finished folder whose checkpoint.pt is gone", "Run.claim", ValueError,
     "O:test_an_adapter_without_a_checkpoint_is_never_retrained", retrain_without_checkpoint),
    ("record", "a finished 3-step student re-run with steps=1", "Run.checkpoint", ValueError,
     "O:test_a_finished_run_re_run_with_fewer_steps_is_refused_and_keeps_its_record", fewer_steps),
    ("record", "a finished student re-run with teachers={'recall': 'base'}", "Run.checkpoint", ValueError,
     "O:test_a_finished_run_re_run_with_fewer_steps_is_refused_and_keeps_its_record", other_teachers),
    ("merge", "merge(bank, 'm', {'teacher_binding': nan, 'teacher_recall': 1})", "merge.merge", ValueError,
     "O:test_merge_weights_must_be_finite_numbers",
     lambda: merge_adapters(bank(), "m", {"teacher_binding": float("nan"),
                                                                     "teacher_recall": 1.0})),
    ("merge", "merge weights all 0", "merge.merge", ValueError, "O:test_merge_weights_must_be_finite_numbers",
     lambda: merge_adapters(bank(), "m", {"teacher_binding": 0, "teacher_recall": 0.0})),
    ("names", "GRPOConfig(experiment='')", "runs.check_experiment", ValueError,
     "O:test_run_folders_cannot_be_empty_or_escape_runs", lambda: train_grpo(bank(False), teacher(experiment=""))),
    ("names", "GRPOConfig(experiment='../escaped')", "runs.check_experiment", ValueError,
     "O:test_run_folders_cannot_be_empty_or_escape_runs",
     lambda: train_grpo(bank(False), teacher(experiment="../escaped"))),
    ("names", "GRPOConfig(name='../t')", "adapters.check_adapter_name", ValueError,
     "O:test_adapter_names_cannot_escape_their_folder", lambda: train_grpo(bank(False), teacher(name="../t"))),
    ("names", "runs/ is a file (a runs folder that cannot be made)", "runs.writable (before any compute)", ValueError,
     "O:test_a_runs_folder_that_cannot_be_made_fails_before_any_compute", runs_dir_a_file),
    ("foreign", "bank.add_foreign('t_other', ...), then bank.create('t_other')", "AdapterBank._add", ValueError,
     "O:test_a_foreign_teachers_name_and_an_adapters_cannot_collide", foreign_then_create),
    ("foreign", "bank.create('teacher_binding'), then bank.add_foreign('teacher_binding', ...)",
     "AdapterBank.add_foreign", ValueError, "O:test_a_foreign_teachers_name_and_an_adapters_cannot_collide",
     create_then_foreign),
    ("export", "export --out a non-empty folder (no --force)", "export.check_out", SystemExit,
     "X:test_a_non_empty_out_is_refused_and_force_replaces_it_whole",
     lambda: export_over(lambda out: (out / "export.json").write_text("{}"))),
    ("export", "export --out a file", "export.check_out", SystemExit, "X:test_out_that_is_a_file_is_refused",
     lambda: (TMP / "a-file").write_text("x") and export(out=TMP / "a-file")),
    ("export", "export --run of a run missing a teacher", "export.check_teachers", SystemExit,
     "X:test_a_run_missing_a_teacher_is_named", export_missing_teacher),
    ("export", "export --teacher binding=/nonexistent", "export.check_teachers", SystemExit,
     "X:test_export_mistakes_are_one_line_before_any_write", lambda: export("--teacher", "binding=/nonexistent")),
    ("export", "export --teacher binding (no =)", "export.main", SystemExit,
     "X:test_export_mistakes_are_one_line_before_any_write", lambda: export("--teacher", "binding")),
    ("export", "export --teacher-tp 0", "export.Layout.check", SystemExit,
     "X:test_export_mistakes_are_one_line_before_any_write", lambda: export("--teacher-tp", "0")),
    ("export", "export --base tiny-other (teachers of the tiny base)", "export.check_origins", SystemExit,
     "X:test_export_mistakes_are_one_line_before_any_write", lambda: export("--base", "tiny-other")),
    ("export", "export --run of a golden-gain run", "export.unexportable", SystemExit,
     "X:test_settings_verl_cannot_carry_are_refused_by_name",
     lambda: export(run=export_run(golden_gain={"samples": 3, "temperature": 1.5, "top_p": 0.9,
                                                "importance_cap": None}))),
    ("export", "export --run of an endorsement run", "export.unexportable", SystemExit,
     "X:test_settings_verl_cannot_carry_are_refused_by_name", lambda: export(run=export_run(endorsement={"seed": 0}))),
    ("export", "export --run of a student with init_from", "export.unexportable", SystemExit,
     "X:test_settings_verl_cannot_carry_are_refused_by_name", lambda: export(run=export_run(init_from="student_r1"))),
    ("export", "export --run whose teachers map names a foreign teacher", "export.check_teachers", SystemExit,
     "X:test_a_foreign_teacher_in_the_map_is_refused_by_name",
     lambda: export(run=export_run(teachers={"binding": "teacher_binding_other"}))),
    ("export", "export --run of a student with LoRA dropout 0.1", "export.unexportable", SystemExit,
     "X:test_a_student_lora_dropout_is_refused", export_dropout),
]


# ---------------------------------------------------------------------------------------------
# run them, write the table
# ---------------------------------------------------------------------------------------------


def md_cell(text: str) -> str:
    """One markdown table cell: temporary paths as <tmp>, no newlines, pipes escaped."""
    text = text.replace(str(TMP), "<tmp>").replace(str(ROOT), "<repo>")
    text = re.sub(r"\s*\n\s*", " ⏎ ", text.strip())
    return text.replace("|", "\\|")


def trigger(expected, call) -> tuple[str, str]:
    """(exception type, message) of call(); raises if the type is not the expected one."""
    try:
        result = call()
    except (Exception, SystemExit) as err:  # noqa: BLE001: recording every error is the point (the CLI's too)
        if expected is None or not isinstance(err, expected):
            raise AssertionError(f"expected {expected}, got {type(err).__name__}: {err}") from err
        return type(err).__name__, str(err)
    if expected is not None:
        raise AssertionError(f"expected {expected.__name__}, nothing was raised")
    return "none (logged)", json.dumps(result)


def tests_cell(spec: str) -> str:
    """"R:test_x D:test_y" -> `test_reliability::test_x`<br>`test_distill::test_y`."""
    return "<br>".join(f"`{TEST_FILES[f]}::{name}`" for f, name in (t.split(":") for t in spec.split()))


def table(cases=CASES) -> str:
    lines = ["| | bad input | caught in | exception | message | tests |", "| --- | --- | --- | --- | --- | --- |"]
    for i, (group, what, where, expected, tests, call) in enumerate(cases, 1):
        kind, message = trigger(expected, call)
        lines.append(f"| {i} | {md_cell(what)} | `{where}` | `{kind}` | {md_cell(message)} | {tests_cell(tests)} |")
        print(f"{i:3d} {group:13} {what[:60]:60} {kind}", file=sys.stderr)
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--print", action="store_true", help="print the table only; leave docs/ alone")
    args = p.parse_args(argv)
    for cases, begin, end in ((CASES, BEGIN, END), (CASES_22, BEGIN_22, END_22)):
        body = table(cases)
        print(body)
        if not args.print:
            text = DOC.read_text()
            if begin not in text or end not in text:
                raise SystemExit(f"{DOC} lacks the markers {begin} ... {end}")
            head, rest = text.split(begin, 1)
            DOC.write_text(f"{head}{begin}\n{body}\n{end}{rest.split(end, 1)[1]}")
            print(f"\nwrote the table ({len(cases)} bad inputs) into {DOC.relative_to(ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
