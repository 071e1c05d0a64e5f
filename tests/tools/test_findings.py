"""tools.findings: the finding sentences of the committed pages (README, the guide, the notebooks'
markdown, the docs) agree with the decisions they cite, rendered from the committed JSON; a
changed JSON value, or a sentence written by hand, makes the check fail."""

import json
import shutil

import pytest

from tools import findings

ROOT = findings.ROOT


def test_every_marked_finding_of_the_committed_pages_agrees_with_its_json():
    assert findings.check() == []


def test_the_headline_and_the_rewritten_summaries_are_marked():
    marked = findings.marked()
    assert "matched/headline" in marked["README.md"]
    for page in ("README.md", "docs/instructor.md", "notebooks/05b_evidence.ipynb"):
        assert {"matched/T400/mopd_pg-mixrl", "matched/T400/mopd_kl-rft", "matched/T200/mopd_kl-mixrl",
                "matched/T200/H3/rft", "matched/H4/mopd_kl"} <= set(marked[page]), page
    assert {"regimes/2/H2.1@5", "regimes/2/H2.2@5", "regimes/2/H2.3@5", "regimes/2/H2.1", "regimes/1b/H1.2",
            "regimes/2/kl/kl/300/3"} <= set(marked["notebooks/07_regimes.ipynb"])
    for page in ("notebooks/06_ablations.ipynb", "docs/ablations.md", "docs/instructor.md"):
        assert {"ablations/origin/pg", "ablations/rounds/control", "ablations/own/recall"} <= set(marked[page]), page
    assert {"baselines/ranking", "baselines/mixrl-mopd_kl"} <= set(marked["notebooks/05b_evidence.ipynb"])


# Numbers a summary may carry that are not this course's results, each with why. Everything else
# with a decimal point or a percent sign must sit in a rendered finding or a table of its page.
ALLOW = {
    "README.md": {
        "0.937": "the paper's reported MOPD-PG score (30B run), cited, not measured here",
        "0.909": "the paper's reported MOPD-Top-k score (30B run), cited, not measured here",
        "23.1": "the critique's claimed cost range (its upper end; H3's rendered row holds its 14.8)",
        "1.5": "a design ratio: Mix-RL's 300 RL steps per domain against the teachers' 200",
    },
    "docs/instructor.md": {
        "23.1": "the critique's claimed cost range (its upper end)",
        "1.5": "a design ratio: Mix-RL's 300 RL steps per domain against the teachers' 200",
    },
    "notebooks/03_mopd.ipynb": {
        "1.03": "FactWorld's Qwen3-1.7B run, reported by that experiment, cited",
        "0.94": "the paper's reported score, cited",
    },
    "notebooks/05b_evidence.ipynb": {
        "1.5": "a design ratio: Mix-RL's 300 RL steps per domain against the teachers' 200",
    },
    "notebooks/06_ablations.ipynb": {
        "0.002": "a learning rate (the foreign teacher's, chosen on val), a setting",
    },
    "notebooks/07_regimes.ipynb": {
        "0.30": "H2.1's registered threshold, written before the run",
    },
}


def test_no_summary_number_outside_a_rendered_finding_or_table():
    """README's results, the guide's lectures, the notebooks' summaries and reading cells, the
    docs' Reading sections: every decimal or percentage outside a marked finding is held by a
    finding or table of the same page, or is on the reviewed allow-list."""
    assert findings.unheld(allow=ALLOW) == []


def test_every_allow_list_entry_is_needed():
    """A stale entry would let a later result with the same digits through: each one, removed,
    makes the check fail on its page."""
    for page, entries in ALLOW.items():
        for n in entries:
            fewer = {p: {k: v for k, v in e.items() if (p, k) != (page, n)} for p, e in ALLOW.items()}
            assert any(b.startswith(f"{page}: {n}: ") for b in findings.unheld(allow=fewer)), (page, n)


# README's results paragraph as it stood before its numbers were rendered (hand-written H4 row
# and T = 200 pairs): the number check catches each restated result.
OLD_README = """## Results on the tiny default

| model | binding L16 |
| --- | --- |
| base (tiny, shipped) | 0.66 |

* *Matched RL budgets*: Its paired table, in mean accuracy lift over the base: MOPD exact KL minus
  Mix-RL +0.023 ± 0.025, minus RFT +0.010 ± 0.030, all *not resolved*. Across T (its H4 table,
  descriptive, no test), Mix-RL's mean lift is 0.36 and 0.42 at T = 200 and 400, against the
  teachers' 0.39 and 0.42. The base scores 0.66 (the table above).

## The library
"""


def test_a_doctored_copy_fails_the_number_check(tmp_path):
    (tmp_path / "README.md").write_text(OLD_README)
    bad = findings.unheld(root=tmp_path)
    caught = {b.split(": ")[1] for b in bad}
    assert caught == {"0.023", "0.025", "0.010", "0.030", "0.36", "0.42", "0.39"}, bad   # 0.66 is the table's
    marked = OLD_README.replace("Across T", "Across T: <!-- finding: matched/H4/mixrl -->x<!-- /finding -->")
    (tmp_path / "README.md").write_text(marked)
    findings.write(root=tmp_path)                   # the rendered H4 row now holds 0.36, 0.42 and 0.39
    caught = {b.split(": ")[1] for b in findings.unheld(root=tmp_path)}
    assert caught == {"0.023", "0.025", "0.010", "0.030"}


def test_the_number_check_reads_decimals_percentages_and_ratios_not_code_or_names():
    assert findings.numbers("1.03x [0.73, 1.44], 17% of `lr=1e-3` Qwen3-1.7B 0.36M params, 3 seeds") == \
        ["1.03", "0.73", "1.44", "17%"]


def test_the_rendered_verbs_follow_the_corrected_decisions():
    assert "resolved below 0" in findings.render("matched/T400/mopd_pg-mixrl")
    kl_rft = findings.render("matched/T400/mopd_kl-rft")      # resolved uncorrected only: labelled so
    assert "not resolved: the interval allows differences from" in kl_rft and "resolved only uncorrected" in kl_rft
    head = findings.render("matched/headline")
    assert "T = 100 ran 3 and is in no finding" in head and "RFT" in head and "ahead of RFT" not in head


def copy_docs(tmp_path):
    data = tmp_path / "docs"
    data.mkdir()
    for name in ("matched.json", "regimes.json", "ablations.json", "baselines.json", "results.json"):
        shutil.copy(ROOT / "docs" / name, data / name)
    return data


def test_one_changed_json_value_fails_the_check(tmp_path):
    data = copy_docs(tmp_path)
    rep = json.loads((data / "matched.json").read_text())
    rows = rep["by_T"]["400"]["rows"]
    rows["mopd_pg"]["2"]["lift"]["mean"] = rows["mixrl"]["2"]["lift"]["mean"] + 0.05   # one seed now ahead
    (data / "matched.json").write_text(json.dumps(rep))
    bad = findings.check(data_dir=data)
    assert any("README.md: matched/T400/mopd_pg-mixrl" in b for b in bad)
    assert any("README.md: matched/headline" in b for b in bad)       # PG minus Mix-RL no longer survives Holm
    regimes = json.loads((data / "regimes.json").read_text())
    for rec in regimes["runs"].values():                               # one seed's GRPO on chain, depth 2
        if rec["arm"] == 2 and rec["method"] == "grpo" and rec["seed"] == 3:
            for r in rec["test"]:
                if r["domain"] == "chain" and r["length"] == 2:
                    r["acc"] = 0.9
    (data / "regimes.json").write_text(json.dumps(regimes))
    assert any("regimes/2/H2.1@5" in b for b in findings.check(data_dir=data))


def test_a_changed_ablations_or_baselines_value_fails_the_check(tmp_path):
    data = copy_docs(tmp_path)
    ab = json.loads((data / "ablations.json").read_text())
    ab["summary"]["ucmopd_own"]["paired"]["ucmopd minus mopd_rollouts"]["recall"]["half"] = 0.01   # now resolved
    (data / "ablations.json").write_text(json.dumps(ab))
    base = json.loads((data / "baselines.json").read_text())
    for p in base["rows"]["mixrl"].values():
        p["all"]["mean"] += 0.1                                 # the mean alone: not what its accuracies give
    (data / "baselines.json").write_text(json.dumps(base))
    with pytest.raises(SystemExit, match=r"baselines.json: key 'rows.mixrl.0.all.mean': expected the mean of its "
                                         r"domains' normalised scores"):
        findings.check(data_dir=data)
    for p in base["rows"]["mixrl"].values():                    # Mix-RL's accuracies move, and its scores with them
        for d in ("binding", "recall"):
            p["all"][d]["model"] -= 0.1 * p["all"][d]["denominator"]
            p["all"][d]["normalised"] -= 0.1
        p["all"]["mean"] -= 0.2
    (data / "baselines.json").write_text(json.dumps(base))
    bad = findings.check(data_dir=data)
    for page in ("README.md", "docs/ablations.md", "notebooks/06_ablations.ipynb", "docs/instructor.md"):
        assert any(b.startswith(f"{page}: ablations/own/recall") for b in bad), page
    assert any(b.startswith("notebooks/05b_evidence.ipynb: baselines/ranking") for b in bad)
    assert any(b.startswith("notebooks/05b_evidence.ipynb: baselines/mixrl-mopd_kl") for b in bad)


def test_a_hand_written_finding_sentence_is_caught(tmp_path):
    """The headline as it stood before the corrected decisions: 'ahead of RFT only at 400 steps'
    rests on a cell that does not survive Holm's correction over the 15 comparisons."""
    old = ("**Is MOPD worth it? <!-- finding: matched/headline -->MOPD exact KL cannot be told apart from "
           "Mix-RL at any of them; it is ahead of RFT only at 400 steps<!-- /finding -->**\n")
    (tmp_path / "README.md").write_text(old + "<!-- finding: matched/T9/nope-none -->x<!-- /finding -->\n")
    bad = findings.check(root=tmp_path)
    assert len(bad) == 2 and "page says: MOPD exact KL cannot be told apart" in bad[0] and "no such finding" in bad[1]
