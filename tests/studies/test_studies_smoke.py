"""The studies still run: each at its smallest configuration (seconds to a minute), writing into
tmp_path (the committed pages are left alone); the pages' registrations survive a rewrite."""

import importlib
import json

import pytest
from pathlib import Path


def test_baselines_protocol_runs_and_writes_its_page(monkeypatch, tmp_path):
    """studies.baselines at its quick size (every method, the val grid, two seeds; seconds of
    training): the page, the JSON and the five figures land where asked; a re-run reloads."""
    monkeypatch.delenv("MOPD_FAST", raising=False)
    runs = importlib.import_module("mopd_mini.runs")
    monkeypatch.setattr(runs, "RUNS_DIR", tmp_path / "runs")
    baselines = importlib.import_module("studies.baselines")
    out = tmp_path / "docs"
    rep = baselines.main(["--quick", "--quiet", "--seeds", "0", "1", "--out", str(out)])
    assert set(rep["rows"]) == set(baselines.TRAINED) | {f"merge_{h}" for h in baselines.MERGES} | {"merge_best"}
    assert all(list(per) == [0, 1] for per in rep["rows"].values())
    assert all(len(rep["grid"][m]) == len(baselines.QUICK.lrs) for m in baselines.TRAINED)
    page = (out / "baselines.md").read_text()
    assert "| MOPD-PG |" in page and "0.937" in page and "MOPD-PG over RFT" in page
    assert "paired by seed" in page and "t = 12.71 with 2 seeds" in page   # the paired intervals
    assert {f.name for f in (out / "figures").iterdir()} == {f"baselines_{k}.png" for k in
                                                            ("scores", "cost", "forgetting", "efficiency", "merge_sweep")}
    for per in rep["rows"]["rft"].values():   # RFT's stage cost includes the teachers' sampling
        assert per["stage"]["cost/generated_tokens"] > 0 and per["stage"]["cost/teacher_prefill_tokens"] == 0
    baselines.main(["--render", str(out / "baselines.json"), "--out", str(tmp_path / "again")])
    assert (tmp_path / "again" / "baselines.md").read_text() == page   # the page is a function of the JSON
    again = baselines.main(["--quick", "--quiet", "--seeds", "0", "--no-write"])
    assert again["rows"]["mopd_pg"][0]["acc"] == rep["rows"]["mopd_pg"][0]["acc"]


def test_ablations_quick(monkeypatch, tmp_path):
    """studies.ablations --quick runs every study's code path (3 steps per run, in memory) and
    writes nothing; its summary has every study."""
    monkeypatch.delenv("MOPD_FAST", raising=False)
    ablations = importlib.import_module("studies.ablations")
    monkeypatch.setattr(ablations, "DOCS", tmp_path)
    results, summary = ablations.main(["--quick", "--no-write"])
    assert not any(tmp_path.iterdir())
    assert {"origin", "rounds", "ucmopd"} <= set(summary)
    assert summary["origin"]["initial_kl"]["ratio"][0] > 0
    assert set(summary["ucmopd"]["settings"]) == {"two", "preserve"}
    assert "round-1 student, twice the steps (control)" in summary["rounds"]["rows"]   # the multi-round control


def test_ablations_page_renders_from_the_saved_json(capsys):
    """studies.ablations --render: the committed docs/ablations.json gives its page again, with the
    paired per-seed intervals (nothing trained, nothing written)."""
    ablations = importlib.import_module("studies.ablations")
    root = Path(__file__).parents[2]
    _, summary = ablations.render(root / "docs" / "ablations.json", write=False)
    text = capsys.readouterr().out
    paired = summary["rounds"]["paired"]["round-2 student (from round-1 student)"]
    assert paired["n"] == 3 and len(paired["per_seed"]) == 3
    assert set(summary["ucmopd"]["paired"]) == {"two", "preserve"}
    assert "95% t-interval over 3 seeds" in text and "sample std (ddof = 1)" in text
    assert "Reading the numbers" in text                      # the hand-written reading is kept


def test_study_evals_merge_the_workers_files(tmp_path):
    """studies.study's workers (studies.baselines --workers): each worker writes evals-w<i>.json beside evals.json; the main
    process reads them all (its own file last), and writes only its own."""
    study = importlib.import_module("studies.study")
    (tmp_path / "evals-w0.json").write_text(json.dumps({"a|test|5": {"binding": {"16": 0.5}}}))
    (tmp_path / "evals-w1.json").write_text(json.dumps({"b|test|5": {"binding": {"16": 0.25}}}))
    (tmp_path / "evals.json").write_text(json.dumps({"b|test|5": {"binding": {"16": 0.75}}}))
    evals = study.Evals(tmp_path / "evals.json")
    assert evals.get(None, "a", "test", 5) == {"binding": {16: 0.5}}      # a worker's, no evaluation run
    assert evals.get(None, "b", "test", 5) == {"binding": {16: 0.75}}     # the main file wins
    assert json.loads((tmp_path / "evals-w0.json").read_text()) == {"a|test|5": {"binding": {"16": 0.5}}}
    (tmp_path / "evals-w1.json").write_text(json.dumps({"b|test|5": {"binding": {"16": 0.0}}, "c|val|5": {"recall": {"16": 1.0}}}))
    evals.refresh()                                  # a later phase's worker results, read without evaluating
    assert evals.get(None, "c", "val", 5) == {"recall": {16: 1.0}}
    assert evals.get(None, "b", "test", 5) == {"binding": {16: 0.75}}     # what this process holds wins


def test_matched_sweep_quick_writes_resumes_and_keeps_the_preregistration(monkeypatch, tmp_path):
    """studies.matched --quick (one teacher budget, two seeds; seconds): every method at that T, the
    lift and the normalised score, pipeline FLOPs with the teachers each method needs, a grid
    extended past its edge, the JSON and figure written, the pre-registration above the results
    kept; a re-run reloads every run (the same numbers); --render gives the same section again."""
    monkeypatch.delenv("MOPD_FAST", raising=False)
    runs = importlib.import_module("mopd_mini.runs")
    monkeypatch.setattr(runs, "RUNS_DIR", tmp_path / "runs")
    matched = importlib.import_module("studies.matched")
    out = tmp_path / "docs"
    out.mkdir()
    (out / "matched.md").write_text("# Matched\n\n## Pre-registration\n\nH1 stated before the run.\n")
    rep = matched.main(["--quick", "--quiet", "--seeds", "0", "1", "--out", str(out)])
    at = rep["by_T"]["2"]
    assert set(at["rows"]) == set(matched.METHODS) and all(list(per) == [0, 1] for per in at["rows"].values())
    row = at["rows"]["mopd_kl"][0]
    assert set(row["lift"]) == {"binding", "recall", "mean"} and "mean" in row["all"]
    teachers = sum(t["flops"] for t in at["teacher_cost"].values())
    assert abs(row["pipeline"]["flops"] - row["stage"]["flops"] - teachers) < 1e-6 * teachers   # both teachers
    mix = at["rows"]["mixrl"][0]
    assert mix["pipeline"]["flops"] == mix["stage"]["flops"]                                  # no teachers
    casc = at["rows"]["cascade_br"][0]
    assert abs(casc["pipeline"]["flops"] - casc["stage"]["flops"] - at["teacher_cost"]["binding"]["flops"]) < 1
    assert any(g.get("extended") for g in at["grid"]["rft"])                                  # bracketed past its edge
    assert {"steps", "k", "lr"} == set(at["chosen"]["rft"])
    page = (out / "matched.md").read_text()
    assert page.startswith("# Matched\n\n## Pre-registration\n\nH1 stated before the run.")
    assert "## Results" in page and "MOPD exact KL minus Mix-RL" in page
    assert (out / "figures" / "matched_cost.png").exists() and (out / "matched.json").exists()
    again = matched.main(["--quick", "--quiet", "--seeds", "0", "1", "--no-write"])
    assert again["by_T"]["2"]["rows"]["mopd_kl"][1]["acc"] == at["rows"]["mopd_kl"][1]["acc"]
    matched.main(["--render", str(out / "matched.json"), "--out", str(tmp_path / "again")])
    assert (tmp_path / "again" / "matched.md").read_text().split("## Results")[1] == page.split("## Results")[1]


def test_matched_decisions_apply_the_registered_rules_across_T():
    """docs/matched.md's rules on made-up rows: H2 needs both T = 100 and 400 resolved with
    opposite signs, H1' needs every MOPD form resolved behind Mix-RL at every T, and each T's
    section names the command that wrote it (an older section: the report's)."""
    matched = importlib.import_module("studies.matched")
    def by_T(gap, spread=0.001):
        lift = lambda x: {"lift": {"mean": x}, "reach": None}  # noqa: E731
        rows = {m: {s: lift(0.3 + (gap if m == "mopd_kl" else 0.0) + spread * s) for s in range(3)}
                for m in ("mopd_kl", "mopd_pg", "mopd_topk", "mixrl", "rft")}
        return {"rows": rows}
    rep = {"by_T": {"100": by_T(+0.1), "400": by_T(-0.1)}}
    d = matched.decisions(rep)
    assert d["H2"] == "supported" and d["H1"].startswith("contradicted at T = 100 (MOPD exact KL ahead)")
    assert d["H1'"] == "not supported"                 # PG and Top-k tie Mix-RL exactly: not behind it
    rep["by_T"]["400"] = by_T(+0.05)
    assert matched.decisions(rep)["H2"].startswith("not supported")
    rep["by_T"]["400"]["rows"]["mopd_kl"][1]["lift"]["mean"] = 0.0          # a noisy seed: not resolved
    assert matched.decisions(rep)["H2"].startswith("not resolved (signs differ")
    assert matched.decisions({"by_T": {"200": by_T(0.0)}})["H2"].startswith("not decided")
    assert matched.written_by({"command": "new"}, {"command": "old"}) == "old"
    assert matched.written_by({"command": "new"}, {}) == "new"


def test_matched_cost_ratio_and_edge_marks():
    """H3's ratio is the geometric mean of the per-seed cost ratios over the seeds where both arms
    reach the target, with the t-interval of the log ratio; a chosen rate at the end of the rates
    tried (the other keys held) is marked, one inside them is not."""
    import math
    matched = importlib.import_module("studies.matched")
    rows = {"a": {0: {"reach": {"flops": 2.0}}, 1: {"reach": {"flops": 8.0}}, 2: {"reach": None}},
            "b": {0: {"reach": {"flops": 1.0}}, 1: {"reach": {"flops": 2.0}}, 2: {"reach": {"flops": 1.0}}}}
    r = matched.cost_ratio(rows, "a", "b")
    assert r["n"] == 2 and math.isclose(r["ratio"], math.sqrt(2.0 * 4.0))
    assert r["below_critique"] is False              # t = 12.71 at 2 seeds: the upper end is far above 14.8
    rows["a"][2]["reach"] = {"flops": 3.0}
    assert matched.cost_ratio(rows, "a", "b")["below_critique"] is True      # ratios 2, 4, 3: well below 14.8
    grid = [{"steps": 300, "k": 4, "lr": lr} for lr in (1e-3, 3e-3)] + [{"steps": 600, "k": 4, "lr": 1e-2}]
    assert matched.on_edge({"chosen": {"rft": {"steps": 300, "k": 4, "lr": 3e-3}}, "grid": {"rft": grid}}, "rft")
    grid.append({"steps": 300, "k": 4, "lr": 1e-2})
    assert not matched.on_edge({"chosen": {"rft": {"steps": 300, "k": 4, "lr": 3e-3}}, "grid": {"rft": grid}}, "rft")
    study = importlib.import_module("studies.study")          # the bracketing every study shares
    assert study.extend_lr({"lr": 1e-2}, [{"lr": 1e-3}, {"lr": 3e-3}, {"lr": 1e-2}]) == {"lr": 3e-2}
    assert study.extend_lr({"lr": 3e-3}, [{"lr": 1e-3}, {"lr": 3e-3}, {"lr": 1e-2}]) is None


def test_regimes_quick_runs_resumes_and_renders(monkeypatch, tmp_path):
    """studies.regimes --quick (arm 2, two seeds; arm 1, one seed; a few steps of every method): the
    gate and its retries, every method, docs/regimes.json keyed by (arm, method, seed), the page's
    Results section and the figures; a re-run trains nothing; without runs/ a missing record
    whose teacher is gone schedules that teacher first."""
    monkeypatch.delenv("MOPD_FAST", raising=False)
    runs = importlib.import_module("mopd_mini.runs")
    monkeypatch.setattr(runs, "RUNS_DIR", tmp_path / "runs")
    regimes = importlib.import_module("studies.regimes")
    out = tmp_path / "docs"
    data = regimes.main(["--quick", "--quiet", "--arm", "2", "--seeds", "0", "1", "--out", str(out)])
    methods = regimes.methods_for(regimes.ARM2, len(data["gates"]["2"]["tries"]) - 1)
    assert {k for k in data["runs"] if k.startswith("2|")} == {f"2|{m}|{s}" for m in methods for s in (0, 1)}
    assert data["gates"]["2"]["name"] == "G2" and data["gates"]["2"]["tries"][0]["adapter"] == "sft_teacher"
    kl = data["runs"]["2|mopd_kl|0"]
    assert kl["kl_along"] and set(kl["kl_along"]) == {"1", "2"} and kl["cost"]["cost/teacher_prefill_tokens"] > 0
    assert {r["length"] for r in kl["test"]} == {2, 3, 4, 5} and "hops" in kl["test"][0]
    page = (out / "regimes.md").read_text()
    head = (Path(regimes.DOCS) / "regimes.md").read_text().split("## Results")[0]
    assert page.startswith(head.rstrip())                           # the pre-registration is untouched
    assert "### Arm 2" in page and "**H2.1**" in page and "**Gate G2**" in page and "paired per-seed" in page
    assert {f.name for f in (out / "figures").iterdir()} == {f"regimes_arm2_{k}.png" for k in ("lift", "cost", "depth", "kl")}
    view = json.loads((out / "regimes.json").read_text())["views"]["2"]   # what notebook 07 draws
    lift = {s: regimes.acc(data["runs"][f"2|mopd_kl|{s}"], "chain", (2, 3, 4, 5))
            - regimes.acc(data["runs"][f"2|base|{s}"], "chain", (2, 3, 4, 5)) for s in (0, 1)}
    cell = view["methods"]["mopd_kl"]["lift"]["chain"]["all"]
    assert cell["n"] == 2 and cell["mean"] == pytest.approx(sum(lift.values()) / 2)
    assert view["methods"]["mopd_kl"]["pipeline_flops"] > view["methods"]["sft_teacher"]["pipeline_flops"] > 0
    assert set(view["kl"]) == {"pg", "topk", "kl"} and set(view["kl"]["kl"]) == {"1", "2"}
    assert set(view["decisions"]) == {"H2.1", "H2.2", "H2.3"} and view["parts"]["chain"]["held-out"] == [4, 5]
    monkeypatch.setattr(regimes, "run_job", lambda *a: (_ for _ in ()).throw(AssertionError("re-trained")))
    again = regimes.main(["--quick", "--quiet", "--arm", "2", "--seeds", "0", "1", "--out", str(out)])
    assert again["runs"]["2|mopd_kl|0"] == kl
    monkeypatch.undo()
    monkeypatch.setattr(runs, "RUNS_DIR", tmp_path / "fresh-clone-runs")   # no adapters on disk
    ctx = regimes.Context(regimes.ARM2, methods, True, regimes.Store(out / "regimes.json"))
    with ctx.store.edit() as d:
        d["runs"].pop("2|mopd_kl|1")
    assert regimes.jobs_to_run(ctx, [0, 1]) == [[("sft_teacher", 1)], [("mopd_kl", 1)]]
    monkeypatch.setattr(runs, "RUNS_DIR", tmp_path / "runs")
    one = regimes.main(["--quick", "--quiet", "--arm", "1", "--seeds", "0", "--out", str(out)])
    assert "1|mopd_kl|0" in one["runs"] and "2|mopd_kl|0" in one["runs"]
    assert "### Arm 1" in (out / "regimes.md").read_text() and "**H1.1**" in (out / "regimes.md").read_text()


def test_regimes_table_applies_the_registered_gates():
    """The gates' retries and fall-back are the registered ones, and whatever reads a changed
    adapter becomes another run (another adapter name); the decision rules are the page's."""
    regimes = importlib.import_module("studies.regimes")
    m = regimes.methods_for(regimes.ARM2, 1)
    assert m["sft_teacher"].settings["steps"] == 400 and m["sft_teacher"].settings["prompts_per_domain"] == 3200
    assert m["mopd_kl"].name == "mopd_kl_g1" and m["grpo"].name == "grpo" and m["sft_gold"].name == "sft_gold"
    assert regimes.methods_for(regimes.ARM2, 0)["sft_teacher"].settings["steps"] == 200
    one = regimes.methods_for(regimes.ARM1, 1, fallback=True)
    assert one["teacher_memory"].trainer == "offline" and one["teacher_memory"].data == "gold"
    assert one["mixrl"].settings["steps"] == 400 and one["mixrl_300"].settings["steps"] == 300
    assert one["sft_both"].settings["batch_size"] == 16 and one["rft"].name.endswith("_g2")
    assert regimes.decide({"n": 3, "half": 0.1, "lo": 0.05, "hi": 0.25}, above=0.0) == "supported"
    assert regimes.decide({"n": 3, "half": 0.1, "lo": -0.3, "hi": -0.1}, above=-0.05) == "refuted"
    assert regimes.decide({"n": 3, "half": 0.1, "lo": -0.1, "hi": 0.1}, below=0.0) == \
        "not resolved: the interval allows differences from -0.100 to +0.100"
    # the family's correction: an interval that excludes the threshold alone is not resolved over the family
    held = regimes.decide({"n": 3, "half": 0.1, "lo": 0.05, "hi": 0.25}, above=0.0, p_adj=0.2)
    assert held.startswith("not resolved") and "uncorrected: supported" in held
    assert regimes.decide({"n": 3, "half": 0.1, "lo": 0.05, "hi": 0.25}, above=0.0, p_adj=0.01) == "supported"


def test_matched_each_T_names_the_machine_that_ran_it():
    """A resumed sweep on another machine must not relabel the sections it did not run."""
    from studies import matched
    rep = json.loads((Path(__file__).parents[2] / "docs" / "matched.json").read_text())
    for T, by_T in rep["by_T"].items():
        assert "machine" in by_T, f"T = {T} has no machine of its own"
        by_T["machine"] = {**by_T["machine"], "cpu": f"CPU of T{T}"}    # a different machine per T
    rep["machine"] = {**rep["machine"], "cpu": "Some Other CPU"}      # the latest command's machine
    page = matched.results_markdown(rep)
    sections = page.split("\n### T = ")[1:]
    assert len(sections) == len(rep["by_T"])
    for sec in sections:
        T = sec.split(" ", 1)[0]
        assert rep["by_T"][T]["machine"]["cpu"] in sec.split("\n\n")[1]
        assert "Some Other CPU" not in sec
    one = {**rep, "by_T": {k: {**v, "machine": rep["machine"]} for k, v in rep["by_T"].items()}}
    assert "Machine: Some Other CPU" in matched.results_markdown(one)


def test_regimes_arm2b_and_memory_cures_quick_choose_on_val_record_stuck_and_resume(monkeypatch, tmp_path):
    """studies.regimes --quick --arm 2b (one seed; the choice's tie-break trains seed 1) and
    --arm memory-cures: every gridded method's setting chosen on val by studies/study.py's runner
    and recorded, a record per (method, seed) at the chosen setting (its own adapter), the chain
    at arm 2b's depths 2-6 with the strict trace, the stuck share and the machine on every MOPD
    record, each seed's gate; a re-run chooses and trains nothing; `--arm 2` is untouched."""
    monkeypatch.delenv("MOPD_FAST", raising=False)
    runs = importlib.import_module("mopd_mini.runs")
    monkeypatch.setattr(runs, "RUNS_DIR", tmp_path / "runs")
    regimes = importlib.import_module("studies.regimes")
    out = tmp_path / "docs"
    data = regimes.main(["--quick", "--quiet", "--arm", "2b", "--seeds", "0", "--out", str(out)])
    choice = data["choices"]["2b"]
    assert set(choice["chosen"]) == set(regimes.ARM2B.grids) and "beta" in choice["chosen"]["mopd_jsd"]
    assert len(choice["grid"]["mopd_kl"]) >= 3          # the quick grid's two rates, then past the edge
    assert {k for k in data["runs"] if k.startswith("2b|")} == {f"2b|{m.key}|0" for m in regimes.ARM2B.methods}
    kl = data["runs"]["2b|mopd_kl|0"]
    assert kl["adapter"] == regimes.with_setting(regimes.ARM2B.methods[5], choice["chosen"]["mopd_kl"]).name
    assert {r["length"] for r in kl["test"]} == {2, 3, 4, 5, 6} and all("strict" in r for r in kl["test"])
    assert kl["machine"] and set(kl["stuck"]["chain"]) and "share_window" in next(iter(kl["stuck"]["chain"].values()))
    for cure, _, fields in regimes.CURES:
        rec = data["runs"][f"2b|{cure}|0"]
        assert rec["settings"]["loss"] == fields["loss"] and rec["stuck"] is not None
    assert regimes.get_domains(("chain",))["chain"].train_lengths == (2, 3)   # the variant does not leak
    lines = regimes.gate_every_seed_line(data, regimes.ARM2B)
    assert len(lines) == 1 and lines[0].startswith("gate G2b seed 0: L2")
    monkeypatch.setattr(regimes, "run_job", lambda *a: (_ for _ in ()).throw(AssertionError("re-trained")))
    monkeypatch.setattr(regimes.study, "choose", lambda *a: (_ for _ in ()).throw(AssertionError("re-chosen")))
    again = regimes.main(["--quick", "--quiet", "--arm", "2b", "--seeds", "0", "--out", str(out)])
    assert again["runs"]["2b|mopd_kl|0"] == kl
    monkeypatch.undo()
    monkeypatch.setattr(runs, "RUNS_DIR", tmp_path / "runs")
    mem = regimes.main(["--quick", "--quiet", "--arm", "memory-cures", "--seeds", "0", "--out", str(out)])
    assert {k for k in mem["runs"] if k.startswith("memory-cures|")} == \
        {f"memory-cures|{m.key}|0" for m in regimes.ARM_MEMORY.methods}
    assert mem["runs"]["memory-cures|teacher_memory|0"]["settings"]["steps"] == regimes.QUICK["steps"]
    assert "off_support" in next(iter(mem["runs"]["memory-cures|mopd_topk_support|0"]["stuck"]["memory"].values()))


def test_regimes_arm2b_declares_the_registered_protocol():
    """Arm 2b's table is the amendment's: the 7-cycle chain trained at depths 2-5 with 6 held out,
    every trained method on the one rate grid (jsd's with the stated betas), the students at 400
    steps, the four cures as valid MOPDConfig settings, the gate on every seed at every compared
    depth; memory-cures reads arm 1's memory teacher at its gate's 400 steps."""
    regimes = importlib.import_module("studies.regimes")
    import mopd_mini as mm
    assert regimes.CHAIN_DEEP.train_lengths == (2, 3, 4, 5) and regimes.CHAIN_DEEP.held_out == (6,)
    assert regimes.CHAIN_DEEP.knobs["cycle"] == 7
    trained = {m.key for m in regimes.ARM2B.methods if m.trainer != "base"}
    assert set(regimes.ARM2B.grids) == trained and len(trained) == 12
    assert all([g["lr"] for g in regimes.ARM2B.grids[k]] == list(regimes.LR_GRID) for k in trained - {"mopd_jsd"})
    assert {(g["lr"], g["beta"]) for g in regimes.ARM2B.grids["mopd_jsd"]} == \
        {(lr, b) for lr in regimes.LR_GRID for b in regimes.JSD_BETAS}
    ms = {m.key: m for m in regimes.ARM2B.methods}
    assert all(m.settings["steps"] == 400 for k, m in ms.items() if m.trainer == "mopd")
    assert ms["sft_teacher"].settings["prompts_per_domain"] == 3200 and ms["grpo"].settings["steps"] == 200
    for key, _, fields in regimes.CURES:
        assert ms[key].teachers == {"chain": "sft_teacher"}
        mm.MOPDConfig.for_model("tiny", domains=("chain",), teachers={"chain": "t"}, **fields).check()
    g = regimes.ARM2B.gate_every_seed
    assert (g.method, g.lengths, g.threshold) == ("sft_teacher", (2, 3, 4, 5), 0.80)
    mem = {m.key: m for m in regimes.ARM_MEMORY.methods}
    assert mem["teacher_memory"].settings["steps"] == 400 and set(regimes.ARM_MEMORY.grids) == set(mem) - {"base", "teacher_memory"}
