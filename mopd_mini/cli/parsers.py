"""Each command's flags: the config's fields (`flags.add_config_flags`) for the trainers, a few
of its own for merge and evaluate, and the model and run folder every command shares. Built only
for the command that runs or shows its --help; the configs come from the torch-free config module."""

from __future__ import annotations

import argparse

from ..config import HOWS, GRPOConfig, MOPDConfig, OfflineConfig, experiment_name
from .flags import add_config_flags, field_docs


def weight_word(text: str) -> tuple[str, float]:
    import math

    name, sep, value = text.partition("=")
    try:
        weight = float(value)
    except ValueError:
        weight = None
    if not sep or not name or weight is None or not math.isfinite(weight):
        raise argparse.ArgumentTypeError(f"{text!r} is not ADAPTER=WEIGHT with a finite number, e.g. "
                                         "teacher_binding=1.0")
    return name, weight


def _common(p: argparse.ArgumentParser, reads: bool = False) -> None:
    g = p.add_argument_group("model and run folder")
    g.add_argument("--model", default="tiny", help="the base: tiny (shipped), a Qwen3 hub id or folder, or "
                   "qwen3-1.7b-random; any other than tiny takes the Qwen3 preset [default: tiny]")
    g.add_argument("--device", default=None, help="cpu, cuda, cuda:1 ... [default: CUDA when available]")
    g.add_argument("--runs-dir", default=None, help="the folder holding runs/<experiment>/ [default: runs/ in "
                   "the current folder; the notebooks' runs are notebooks/runs/]")
    if reads:
        g.add_argument("--from-experiment", default=None, metavar="NAME", help="the run folder runs/<NAME>/ "
                       "the input adapters (teachers, --init-from, merge inputs) are loaded from, by name "
                       "[default: --experiment]")


def _teachers_parser(t) -> None:
    _common(t, reads=True)
    add_config_flags(t, GRPOConfig, overrides={"domain": dict(nargs="+", type=str, metavar="DOMAIN", help=(
        field_docs(GRPOConfig).get("domain", "") + "; teachers trains one teacher per domain given "
        "[default: every domain: binding recall]").replace("%", "%%"))})


def _mix_rl_parser(t) -> None:
    _common(t, reads=True)
    add_config_flags(t, GRPOConfig, overrides={"domain": dict(nargs="+", type=str, metavar="DOMAIN", help=
        "the domains of the one adapter, P prompts of each in every step [default: every domain: "
        "binding recall]"), "name": dict(help="the adapter's name [default: mixrl]")})


def _cascade_parser(t) -> None:
    _common(t, reads=True)
    add_config_flags(t, GRPOConfig, overrides={
        "domain": dict(nargs=None, type=str, metavar="DOMAIN", required=True, help="the second stage's domain"),
        "init_from": dict(type=str, metavar="ADAPTER", required=True, help="the first stage: an adapter in "
                          "runs/<from-experiment>/ (e.g. teacher_binding), copied, then trained on --domain"),
        "name": dict(help="the adapter's name [default: cascade_<first domain>_<domain>]"),
        "eval_domains": dict(nargs="*", type=str, metavar="DOMAIN", help="domains evaluated besides --domain "
                             "[default: the first stage's, read from its config.json: the forgetting curve]")})


def _distill_parser(d) -> None:
    _common(d, reads=True)
    add_config_flags(d, MOPDConfig, overrides={"teachers": dict(metavar="DOMAIN=TEACHER")})


def _offline_parser(loss: str):
    def build(o) -> None:
        _common(o, reads=True)
        add_config_flags(o, OfflineConfig, skip=("loss",), overrides={"name": dict(
            help=f"the student adapter's name [default: {'rft' if loss == 'ce' else 'soft'}]")})
        o.set_defaults(offline_loss=loss)
    return build


def _merge_parser(m) -> None:
    _common(m, reads=True)
    g = m.add_argument_group("the merge (mopd_mini.merge.merge)")
    g.add_argument("--weights", nargs="+", type=weight_word, required=True, metavar="ADAPTER=WEIGHT",
                   help="the adapters to merge and their weights, at least two, e.g. teacher_binding=1 "
                   "teacher_recall=1")
    g.add_argument("--how", choices=HOWS, default="cat", help="cat: exactly the weighted sum of the updates "
                   "(task arithmetic); linear, ties, dare_ties: peft's factor-wise merges [default: cat]")
    g.add_argument("--density", type=float, default=None, help="ties and dare_ties: the fraction of entries "
                   "each adapter keeps, in (0, 1]")
    g.add_argument("--majority-sign-method", choices=("total", "frequency"), default="total",
                   help="ties: how the sign of an entry is elected [default: total]")
    g.add_argument("--seed", type=int, default=0, help="dare_ties: seeds the random masks [default: 0]")
    g.add_argument("--name", default=None, help="the merged adapter [default: merge_<how>]")
    g.add_argument("--experiment", default=experiment_name("course"), help="the run folder the merge is "
                   f"saved in, runs/<experiment>/<name>/ [default: {experiment_name('course')}]")
    g.add_argument("--force", action="store_true", help="replace an existing merged adapter of that name")


def _evaluate_parser(e) -> None:
    _common(e)
    g = e.add_argument_group("evaluation")
    g.add_argument("--experiment", default=experiment_name("course"),
                   help=f"the run folder runs/<experiment>/ [default: {experiment_name('course')}]")
    g.add_argument("--adapters", nargs="+", default=None, help="adapters to evaluate [default: every "
                   "adapter in the folder]; the base is always the first row")
    g.add_argument("--n", type=int, default=200, help="test prompts per domain and length [default: 200]")
    g.add_argument("--seed", type=int, default=0, help="seed of the test prompts [default: 0]")
    g.add_argument("--domains", nargs="+", default=None, metavar="DOMAIN", help="the domains evaluated "
                   "[default: the course's, binding and recall; the regime study's: chain, conflict, memory]")


FLAG_TYPES = {
    "teachers": {"domain": ("domains", tuple[str, ...])},
    "evaluate": {"adapters": ("adapters", tuple[str, ...]), "domains": ("domains", tuple[str, ...]),
                 "n": ("n", int), "seed": ("seed", int)},
    "merge": {"density": ("density", float), "seed": ("seed", int)},
}
FLAG_TYPES["results"] = FLAG_TYPES["evaluate"]
"""each command's own list and number flags (not a config's fields, which its check() validates):
dest -> (the name the rules read, the annotation), checked by `validate.check_value` before any
work (`commands.check_flags`): teachers' --domain names each domain once (one teacher each),
evaluate's --domains known domains once, merge's --density a finite float"""

BUILDERS = {"teachers": _teachers_parser, "mix-rl": _mix_rl_parser, "cascade": _cascade_parser,
            "distill": _distill_parser, "rft": _offline_parser("ce"), "soft-labels": _offline_parser("soft"),
            "merge": _merge_parser, "evaluate": _evaluate_parser, "results": _evaluate_parser}
"""each command's flags (mopd_mini.cli.COMMANDS names the commands)"""
