"""studies.matched --cures, docs/regimes.md's course-setting check of the stuck student's cures: the
smoke path (--quick --no-write, seconds of training) trains exact KL and the four cures through the
study runner, the decision is Holm over the four cures by H2b.1's rule, and the section lands in
regimes.md's Results beside the matched sweep's JSON without touching either's other contents."""

import importlib
import json
import math

import pytest

from mopd_mini import stats


@pytest.fixture
def matched(monkeypatch, tmp_path):
    monkeypatch.delenv("MOPD_FAST", raising=False)
    runs = importlib.import_module("mopd_mini.runs")
    monkeypatch.setattr(runs, "RUNS_DIR", tmp_path / "runs")
    return importlib.import_module("studies.matched")


def test_cures_quick_trains_every_method_through_the_runner(matched, capsys):
    rep = matched.main(["--quick", "--quiet", "--seeds", "0", "1", "--cures", "--no-write"])
    block = rep["by_T"]["2"]["cures"]
    five = ("mopd_kl", "mopd_fkl", "mopd_jsd", "mopd_kl_lmbda", "mopd_topk_support")
    assert matched.CURES_METHODS == five
    assert set(block["rows"]) == set(five) and all(list(per) == ["0", "1"] for per in block["rows"].values())
    # each method's choice is the runner's: a setting of its grid with the best val mean at seed 0
    for m in five:
        grid = block["grid"][m]
        assert {json.dumps({k: g[k] for k in g if k in ("lr", "beta")}, sort_keys=True) for g in grid} >= {
            json.dumps(s, sort_keys=True) for s in matched.cure_grid(matched.QUICK, m)}
        assert block["chosen"][m] in [{k: g[k] for k in g if k in ("lr", "beta")} for g in grid]
    assert {g["beta"] for g in block["grid"]["mopd_jsd"]} == {0.1, 0.5, 0.9}      # jsd's beta chosen on val
    # the runs are what each cure names: forward KL, JSD at the chosen beta, lmbda 0.5 teacher prefixes, support
    names = {m: block["rows"][m]["0"]["name"] for m in five}
    assert names["mopd_jsd"].startswith("mopd_jsd_lr") and f"_b{block['chosen']['mopd_jsd']['beta']:g}".replace(
        ".", "p") in names["mopd_jsd"]
    folder = matched.runs.RUNS_DIR / "matched-quick"
    configs = {m: json.loads(next(folder.glob(f"*/{names[m]}/config.json")).read_text()) for m in five}
    assert configs["mopd_fkl"]["loss"] == "fkl" and configs["mopd_jsd"]["loss"] == "jsd"
    assert configs["mopd_kl_lmbda"]["lmbda"] == 0.5 and configs["mopd_kl_lmbda"]["lmbda_prefix"] == "teacher"
    assert configs["mopd_topk_support"]["topk_support"] is True and configs["mopd_kl"]["loss"] == "kl"
    # the teachers' generation on lmbda's off-policy steps is in its ledger (the sampler's keys): exact KL's
    # sampler reuses its prefill for the training forward (0 counted there), the teachers' sampling does not
    off = [json.loads(line) for s in "01" for line in
           next(folder.glob(f"*/mopd_kl_lmbda_lr*_s{s}/metrics.jsonl")).read_text().splitlines()]
    assert any(r["on_policy"] == 0.0 for r in off)                 # seed 1's second step: the teachers' prefixes
    prefill = lambda m: sum(p["stage"]["cost/sample_prefill_tokens"] for p in block["rows"][m].values())  # noqa: E731
    assert prefill("mopd_kl_lmbda") == sum(r["cost/sample_prefill_tokens"] for r in off) > prefill("mopd_kl")
    assert set(block["teacher_sha256"]) == {"binding", "recall"}
    assert all("stuck_share" in p and "off_support" in p for per in block["rows"].values() for p in per.values())
    # Holm over the four cures, and one decision row per cure on the page
    dec = matched.cures_decisions(block)
    assert list(dec) == list(five[1:]) and {d["m"] for d in dec.values()} == {4}
    page = capsys.readouterr().out
    for m in five[1:]:
        assert sum(line.startswith(f"| {matched.CURE_LABEL[m]} minus MOPD exact KL |") for line in page.splitlines()) == 1
    # a re-run retrains nothing: every run reloads with the same numbers
    again = matched.main(["--quick", "--quiet", "--seeds", "0", "1", "--cures", "--no-write"])
    assert again["by_T"]["2"]["cures"]["rows"] == block["rows"]


def made_up(diffs: dict[str, list[float]], n_seeds: int = 5) -> dict:
    """A cures block: exact KL at 0.80 + seed / 1000 on every seed, each cure that plus its diffs."""
    def row(v):
        return {"name": "x", "all": {"mean": v, "binding": {"normalised": v}, "recall": {"normalised": v}},
                "lift": {"mean": v / 2}, "stage": {"flops": 1e9}, "stuck_share": {"300": 0.01}}
    kl = [0.80 + s / 1000 for s in range(n_seeds)]
    rows = {"mopd_kl": {str(s): row(kl[s]) for s in range(n_seeds)},
            **{k: {str(s): row(kl[s] + d[s]) for s in range(n_seeds)} for k, d in diffs.items()}}
    return {"rows": rows, "seeds_done": list(range(n_seeds)), "grid": {m: [{"lr": 1e-3, "mean": 0.5}] for m in rows},
            "chosen": {m: {"lr": 1e-3} for m in rows}, "teacher_sha256": {"binding": "a" * 64, "recall": "b" * 64},
            "refs": {"test": {f"teacher_{d}": {d: {"16": 0.7}} for d in ("binding", "recall")}},
            "plan": {"student_steps": 300, "per_domain": 8, "val_n": 300, "test_n": 500},
            "command": "python -m studies.matched --T 200 --seeds 0 1 2 3 4 --cures", "date": "2026-12-04 00:00 UTC",
            "machine": {"cpu": "Some CPU", "cores": 2, "memory_gb": 8, "gpu": None, "torch": "t", "transformers": "x",
                        "peft": "p", "python": "3", "threads": 1}}


def test_cures_decisions_follow_h2b1_with_holm_over_four(matched):
    """Made-up rows: a clear gain is supported, a clear loss refuted, noise not resolved; a difference
    whose interval alone excludes 0 but whose Holm-adjusted p over the four is not below 0.05 is not
    resolved (the uncorrected side named), and nothing is called equal."""
    block = made_up({"mopd_fkl": [0.10, 0.11, 0.09, 0.10, 0.12], "mopd_jsd": [-0.10, -0.11, -0.09, -0.10, -0.12],
                     "mopd_kl_lmbda": [0.03, -0.05, 0.04, -0.02, 0.01], "mopd_topk_support": [0.02, 0.05, 0.01, 0.06, 0.01]})
    dec = matched.cures_decisions(block)
    assert dec["mopd_fkl"]["decision"].startswith("supported (the interval at Holm's level")
    assert dec["mopd_jsd"]["decision"].startswith("refuted (the interval at Holm's level")
    assert dec["mopd_kl_lmbda"]["decision"].startswith("not resolved: the interval at Holm's level")
    raw = sorted(d["p"] for d in dec.values())
    assert math.isclose(min(d["p_holm"] for d in dec.values()), min(1.0, 4 * raw[0]))     # Holm's first step: x4
    support = dec["mopd_topk_support"]
    assert support["resolved"] and support["p"] < 0.05 and not support["p_holm"] < 0.05
    assert "after Holm" in support["decision"] and "uncorrected: supported" in support["decision"]
    lo, hi = stats.interval_at(support, support["alpha_holm"])         # the verdict prints the interval it reads
    assert lo < 0 < hi and f"allows differences from {lo:+.3f} to {hi:+.3f}" in support["decision"]
    assert "(uncorrected 95% interval: " in support["decision"]
    assert not any("equal" in d["decision"] for d in dec.values())


def test_cures_section_splices_into_the_results_only(matched, tmp_path):
    """--render --cures writes the block's section into regimes.md's Results (before Arm 3, then in
    place on a re-render) and the block into matched.json, keeping everything else in both."""
    out = tmp_path / "docs"
    out.mkdir()
    sweep = {"by_T": {"200": {"rows": {"mopd_kl": {"0": {"all": {"mean": 0.9}}}},
                              "refs": {"test": {f"teacher_{d}": {d: {"16": 0.7}} for d in ("binding", "recall")}}},
                      "400": {"rows": {}}}, "command": "the sweep's"}
    (out / "matched.json").write_text(json.dumps(sweep))
    pre = "# Regimes\n\nRegistered text, with a `## Results` mention.\n\n"
    (out / "regimes.md").write_text(pre + "## Results\n\n### Arm 2\n\nrows\n\n### Arm 3: capacity\n\nNot run.\n")
    saved = tmp_path / "cures.json"
    block = made_up({k: [0.01 * (s + 1) for s in range(5)] for k in matched.CURE_FIELDS})
    saved.write_text(json.dumps({"by_T": {"200": {"cures": block}}}))
    matched.main(["--render", str(saved), "--cures", "--out", str(out)])
    page = (out / "regimes.md").read_text()
    assert page.startswith(pre + "## Results\n\n### Arm 2\n\nrows\n\n" + matched.CURES_HEADING + " at T = 200")
    assert page.endswith("### Arm 3: capacity\n\nNot run.\n")
    assert "the sweep's recorded run at T = 200 kept no hash of its teachers" in page
    assert "| MOPD exact KL, the sweep's recorded run | 0.900 |" in page
    disk = json.loads((out / "matched.json").read_text())
    assert disk["by_T"]["200"]["cures"] == block and disk["by_T"]["200"]["rows"] == sweep["by_T"]["200"]["rows"]
    assert disk["by_T"]["400"] == sweep["by_T"]["400"] and disk["command"] == "the sweep's"
    matched.main(["--render", str(saved), "--cures", "--out", str(out)])
    assert (out / "regimes.md").read_text() == page                  # in place: a function of the JSON
    assert page.count(matched.CURES_HEADING) == 1
    with pytest.raises(SystemExit, match="has none"):                # no sweep at that T: refused before training
        matched.main(["--quick", "--quiet", "--cures", "--out", str(out)])
