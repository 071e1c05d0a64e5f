"""studies/study.py's pieces for studies whose jobs are records (studies.regimes): the locked store
writes back what it read byte for byte, a job is claimed once, a gate read on every seed, the
stuck-share rows, and Holm over a family whose rules read other thresholds than 0."""

import importlib
import json

from mopd_mini import stats

study = importlib.import_module("studies.study")


def test_the_store_round_trips_and_adds_no_empty_section(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"runs": {"a|b|0": {"x": 1}}, "merges": {}}, indent=0, sort_keys=True))
    before = path.read_bytes()
    store = study.Store(path, lambda: tmp_path / "lock", ("runs", "merges", "choices"))
    assert store.read()["choices"] == {}                 # a reader finds every section
    with store.edit():
        pass
    assert path.read_bytes() == before                   # "choices" not added, the empty "merges" kept
    with store.edit() as data:
        data["choices"]["2b"] = {"chosen": {}}
    assert json.loads(path.read_text())["choices"] == {"2b": {"chosen": {}}}


def test_a_job_is_claimed_once(tmp_path):
    claims, lock = tmp_path / "claims.json", tmp_path / "lock"
    assert study.claim(lock, claims, ["mopd_kl", 1]) and not study.claim(lock, claims, ["mopd_kl", 1])
    assert list(study.claimed([["mopd_kl", 1], ["rft", 0]], lock, claims)) == [["rft", 0]]
    assert list(study.claimed([["a", 0]], lock, None)) == [["a", 0]]


def test_a_gate_on_every_seed_and_the_stuck_rows():
    g = study.Gate("G", "teacher", "chain", (2, 3), 0.8)
    values = {1: {2: 0.9, 3: 0.7}, 0: {2: 1.0, 3: 0.85}}
    assert study.gate_by_seed(values, g.threshold) == {0: True, 1: False}
    assert study.gate_lines(g, values) == ["gate G seed 0: L2 1.00, L3 0.85 passes",
                                           "gate G seed 1: L2 0.90, L3 0.70 FAILS: excluded from the tests"]
    stuck = {0: {"chain": {"100": {"share": 0.5, "share_window": 0.4, "off_support": 0.01},
                           "400": {"share": 0.2, "share_window": None, "off_support": None}}}}
    assert study.stuck_rows("kl", stuck, (50, 100), "chain") == ["| kl | 0 | - | 0.500 (0.400); off 0.010 | 0.200 | 400 |"]


def test_holm_over_a_family_reads_each_rules_threshold():
    a = stats.paired({0: 0.1, 1: 0.2, 2: 0.15}, {0: 0.0, 1: 0.0, 2: 0.0})
    b = stats.paired({0: -0.02, 1: 0.01, 2: -0.04}, {0: 0.0, 1: 0.0, 2: 0.0})
    fam = study.family({"a": a, "b": b}, nulls={"b": -0.05})
    assert [fam[k]["p_holm"] for k in "ab"] == stats.holm([stats.p_value(a), stats.p_value(b, -0.05)])
    assert study.family({"a": a, "b": b})["b"]["p_holm"] == stats.holm([a["p"], b["p"]])[1]
    rows = study.DecisionRows()
    assert rows.add("a minus 0", a, "rule", study.decide(a, above=0.0)) == "supported"
    assert rows == [f"| a minus 0 | {study.interval(a)} | rule | supported |"]
