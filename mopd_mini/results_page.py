"""The course's learning-results page, from the finished runs of runs/results/.

docs/results.md, its JSON and its two figures: the teachers against the base, and the MOPD student
for each loss form and seed, on the tiny default.

    mopd-mini results                         # the page from the finished runs
    mopd-mini results --seeds 0 --losses pg   # one seed, one loss form
    python -m studies.results ...             # the same flags: trains the runs that are not there yet

Teachers are trained once (seed 0) and shared by every student, as in the FactWorld experiment; each
student is a fresh adapter trained by `train_student` with the tiny preset. `learning_runs` reloads
(or, for the study, trains) them and evaluates them; `write_page` renders the page. Nothing here
imports torch until a command runs, so `mopd-mini results --help` is quick.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path
from statistics import mean

from .config import LOSSES

DOCS = Path("docs")
FIGURES = DOCS / "figures"
EXPERIMENT = "results"
TRAIN_L = {"binding": (16,), "recall": (16,)}      # the evaluated length that is also a train length
HELD_OUT = {"binding": (24, 32), "recall": (24,)}  # never trained on
PAGE_COMMAND = "python -m studies.results"
"""the command the page says wrote it (the study that trains its runs)"""


def page_machine() -> str:
    import torch

    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() else ""
    return (f"{cpu}, {torch.get_num_threads()} torch threads, Python {platform.python_version()}, "
            f"torch {torch.__version__}")


def timed(fn, *args, **kwargs):
    start = time.time()
    out = fn(*args, **kwargs)
    return out, time.time() - start


def results_parser(prog: str | None = None) -> argparse.ArgumentParser:
    """The flags of the page's runs (`mopd-mini results` and `python -m studies.results` alike)."""
    p = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n")[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--losses", nargs="+", default=list(LOSSES))
    p.add_argument("--n", type=int, default=200, help="test prompts per domain and length")
    p.add_argument("--figure-only", action="store_true",
                   help="only the first loss's first seed (and the teachers): redraw figures/token_kl.png and its "
                        "data, token_kl.json (the README's caption); docs/results.md is left alone")
    return p


def page_configs(args) -> tuple[list, dict[str, list]]:
    """The page's runs: a GRPOConfig per domain (the teachers) and {loss: a MOPDConfig per seed}."""
    from .config import GRPOConfig, MOPDConfig

    teachers = [GRPOConfig.for_model("tiny", domain=d, experiment=EXPERIMENT, progress=False)
                for d in ("binding", "recall")]
    students = {loss: [MOPDConfig.for_model("tiny", loss=loss, seed=seed, student=f"student_{loss}_s{seed}",
                                            experiment=EXPERIMENT, progress=False) for seed in args.seeds]
                for loss in args.losses}
    return teachers, students


def missing_runs(args) -> list[Path]:
    """The run folders of the page that hold no finished run (no saved adapter)."""
    from . import runs

    teachers, students = page_configs(args)
    folders = [runs.RUNS_DIR / c.experiment / c.adapter for c in teachers]
    folders += [runs.RUNS_DIR / c.experiment / c.student for cs in students.values() for c in cs]
    return [f for f in folders if not (f / "adapter_config.json").exists()]


def learning_runs(bank, args):
    """The teachers and the students of `args` (seeds, losses), trained, or reloaded where finished
    (runs/results/), and the accuracy table of all of them: (table, students {loss: names},
    curves {name: metrics}, traces {name: trace}, seconds {stage: wall time})."""
    from .distill import train_student
    from .evaluation import evaluate
    from .grpo import train_grpo

    teachers, configs = page_configs(args)
    seconds = {}
    # --- stage 2: one teacher per domain -----------------------------------------------------
    for cfg in teachers:
        _, seconds[cfg.adapter] = timed(train_grpo, bank, cfg)
    table, seconds["evaluate base + teachers"] = timed(
        evaluate, bank, ["base", "teacher_binding", "teacher_recall"], n=args.n)

    # --- stage 3: a student per loss form and seed -------------------------------------------
    students, curves, traces = {}, {}, {}
    for loss, cfgs in configs.items():
        for cfg in cfgs:
            name = cfg.student
            run, seconds[name] = timed(train_student, bank, cfg)
            table["acc"].update(evaluate(bank, [name], n=args.n)["acc"])
            students.setdefault(loss, []).append(name)
            curves[name], traces[name] = run.metrics, run.trace
            print(f"{name}: {seconds[name]:.0f} s", flush=True)
    return table, students, curves, traces, seconds


# ---------------------------------------------------------------------------------------------
# the page
# ---------------------------------------------------------------------------------------------


def score_row(table, names, lengths=None):
    """mean +/- std over seeds of the normalised score per domain and their mean."""
    from .evaluation import normalised_scores
    from .stats import mean_sd

    per = [normalised_scores(table, student=n, lengths=lengths) for n in names]
    cell = lambda vals: "{:.2f} ± {:.2f}".format(*mean_sd(vals)) if len(vals) > 1 else f"{vals[0]:.2f}"  # noqa: E731
    return [cell([s[d]["normalised"] for s in per]) for d in ("binding", "recall")] + [cell([s["mean"] for s in per])]


def page_flags(args) -> str:
    """The flags of the page's runs (`--seeds ... --losses ... --n ...`)."""
    return " ".join(f"--{k} {' '.join(map(str, v)) if isinstance(v, list) else v}"
                    for k, v in vars(args).items() if k != "figure_only")


def page_command(args) -> str:
    """The command line of the page's runs, as the page prints it."""
    return f"{PAGE_COMMAND} {page_flags(args)}"


def write_token_kl(trace: list[dict], student: str, made_by: str, folder: Path = FIGURES) -> dict:
    """The figure token_kl (a student's tracked completions, their tokens coloured by the exact reverse KL,
    at its first and last recorded steps) and the data it draws, token_kl.json beside it, from which the
    README's caption is rendered (`token_kl_caption`, through tools/findings.py)."""
    from . import plots

    steps = sorted({r["step"] for r in trace})
    pick = (steps[0], steps[-1])
    fig = plots.token_heatmap(trace, "kl", steps=pick,
                              title=f"{student}: per-token reverse KL, step {pick[0]} vs step {pick[-1]}")
    folder.mkdir(parents=True, exist_ok=True)
    plots.save(fig, "token_kl", folder)
    rows = [{k: r[k] for k in ("step", "domain", "answer", "tokens", "kl")}
            for s in pick for d in ("binding", "recall") for r in trace if r["step"] == s and r["domain"] == d]
    data = {"student": student, "steps": list(pick), "made_by": made_by, "machine": page_machine(),
            "date": time.strftime("%Y-%m-%d"), "rows": rows}
    (folder / "token_kl.json").write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    return data


def token_kl_caption(data: dict) -> str:
    """The README's caption of token_kl.png, from the figure's own data (token_kl.json): the largest cell at
    the first and at the last step drawn, and the next largest at the last."""
    def cells(step):
        return sorted(((kl, tok.lstrip("▁Ġ"), r) for r in data["rows"] if r["step"] == step
                       for tok, kl in zip(r["tokens"], r["kl"])), key=lambda c: -c[0])
    first, last = data["steps"]
    (k0, t0, r0), = cells(first)[:1]
    (k1, t1, r1), (k2, *_) = cells(last)[:2]
    per = sum(r["step"] == first for r in data["rows"])
    return (f"Each row is a completion the student sampled for a fixed test prompt ({per} at each step drawn); each "
            f"cell a token, coloured by its exact reverse KL to the routed teacher. At step {first} the largest cell is "
            f"{k0:.2f}, the token `{t0}` of a {r0['domain']} sample whose gold answer is `{r0['answer']}`; at step "
            f"{last} the largest is {k1:.2f} (`{t1}`, a {r1['domain']} sample, gold `{r1['answer']}`), every other "
            f"cell at most {k2:.2f} (the figure's data, docs/figures/token_kl.json: `{data['student']}`, made by "
            f"`{data['made_by']}` on {data['machine'].split(',')[0]}, {data['date']}).")


def write_page(table, students, curves, traces, seconds, args):
    """docs/results.md, docs/results.json and the figures kl_curves and token_kl, from `learning_runs`."""
    import matplotlib.pyplot as plt

    from . import plots
    from .evaluation import domain_score, format_table, normalised_scores

    FIGURES.mkdir(parents=True, exist_ok=True)
    lines = [
        "# Results on the tiny default",
        "",
        "Every number on this page was written by one command, on the machine below:",
        "",
        "```bash",
        page_command(args),
        "```",
        "",
        f"Machine: {page_machine()}. Date: {time.strftime('%Y-%m-%d')}. Test prompts per domain and length: {args.n}.",
        "Teachers: `GRPOConfig.for_model(\"tiny\")` (seed 0). Students: `MOPDConfig.for_model(\"tiny\")` with the",
        "loss form and seed shown. Accuracy is the greedy answer's relaxed match on the test split.",
        "",
        "## Stage 2: teachers vs base",
        "",
        format_table({**table, "acc": {k: v for k, v in table["acc"].items() if not k.startswith("student_")}}),
        "",
        "| domain | base | own teacher | lift | the other teacher |",
        "| --- | --- | --- | --- | --- |",
    ]
    for d, other in (("binding", "recall"), ("recall", "binding")):
        b, t, o = (domain_score(table, a, d) for a in ("base", f"teacher_{d}", f"teacher_{other}"))
        lines.append(f"| {d} (mean over L {', '.join(map(str, table['acc']['base'][d]))}) | {b:.2f} | {t:.2f} | {t - b:+.2f} | {o:.2f} |")
    lines += ["", "## Stage 3: the MOPD student, normalised score (student - base) / (teacher - base)", "",
              f"Mean ± sample std (ddof = 1) over seeds {args.seeds}; 1.0 = the domain's own teacher, 0 = the base.", "",
              "| loss | lengths | binding | recall | mean |", "| --- | --- | --- | --- | --- |"]
    for loss, names in students.items():
        for label, lengths in (("all evaluated", None), ("train length 16", TRAIN_L), ("held out", HELD_OUT)):
            lines.append(f"| {loss} | {label} | " + " | ".join(score_row(table, names, lengths)) + " |")
    den = normalised_scores(table, student=next(iter(students.values()))[0])
    lines += ["", "Denominators (teacher - base, all evaluated lengths): " + ", ".join(
        f"{d} {den[d]['denominator']:+.2f}" for d in ("binding", "recall")) + ".", "",
        "FactWorld's Qwen3-1.7B run (3 seeds): PG 1.03 ± 0.03, exact reverse KL 1.04 ± 0.05. The paper (30B, three",
        "domains): MOPD-PG 0.937, MOPD-Top-k 0.909.", "",
        "Per-seed accuracies (all students):", "", format_table(table), ""]

    # KL curves: mean over seeds, per domain and loss
    fig, axes = plt.subplots(1, 2, figsize=(12, 3.8))
    for ax, d in zip(axes, ("binding", "recall")):
        for i, (loss, names) in enumerate(students.items()):
            steps = [r["step"] for r in curves[names[0]]]
            kl = [mean(curves[n][j][f"kl/{d}"] for n in names) for j in range(len(steps))]
            w = 10
            smooth = [mean(kl[max(0, j - w + 1): j + 1]) for j in range(len(kl))]
            ax.plot(steps, smooth, label=f"{loss}", color=plt.get_cmap("tab10")(i))
        ax.set(yscale="log", xlabel="step", ylabel="exact reverse KL per token (10-step mean)", title=f"{d}: KL to its teacher")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    plots.save(fig, "kl_curves", FIGURES)
    lines += ["## Per-token reverse KL during training", "", "![KL curves](figures/kl_curves.png)", "",
              "Mean over seeds of the exact per-token reverse KL between the student and the routed teacher, on the",
              "student's own samples, per domain, for each loss form (every form logs the exact KL).", ""]
    first = next(iter(students.values()))[0]
    write_token_kl(traces[first], first, page_command(args))
    lines += ["![per-token KL](figures/token_kl.png)", "",
              f"`{first}`: fixed test prompts, the student's sampled tokens coloured by their exact reverse KL to the",
              "routed teacher, at the first and last recorded steps.", ""]
    lines += ["## Wall time of each stage", "", "| stage | seconds |", "| --- | --- |"]
    lines += [f"| {k} | {v:.0f} |" for k, v in seconds.items()]
    lines += ["", "Runs that already existed in runs/results/ were reloaded, not retrained: their time is the reload.", ""]
    (DOCS / "results.md").write_text("\n".join(lines))
    (DOCS / "results.json").write_text(json.dumps({"table": table, "seconds": seconds}, indent=1, default=str))
    print("\n".join(lines))


def main(argv=None, prog: str = "mopd-mini results", train: bool = False) -> int:
    """Reload the page's runs (`train`: train the unfinished ones first), evaluate them, write the page."""
    args = results_parser(prog).parse_args(argv)
    if args.figure_only:
        args.seeds, args.losses = args.seeds[:1], args.losses[:1]
    missing = [] if train else missing_runs(args)
    if missing:  # before the base loads
        print(f"{prog}: error: no finished run in {', '.join(map(str, missing))}: train the page's runs first "
              "with `python -m studies.results` (a checkout of the project), with the same flags", file=sys.stderr)
        return 2
    from .adapters import AdapterBank
    from .models import load_base

    bank = AdapterBank(*load_base("tiny"))
    if args.figure_only:
        _, students, _, traces, _ = learning_runs(bank, args)
        name = students[args.losses[0]][0]
        made_by = f"{prog} {page_flags(args)} --figure-only"   # the command that ran
        print(token_kl_caption(write_token_kl(traces[name], name, made_by)))
        return 0
    write_page(*learning_runs(bank, args), args)
    return 0
