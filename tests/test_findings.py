"""bench.findings: the finding sentences of the committed pages (README, the guide, the notebooks'
markdown, the docs) agree with the decisions they cite, rendered from the committed JSON; a
changed JSON value, or a sentence written by hand, makes the check fail."""

import json
import shutil

from bench import findings

ROOT = findings.ROOT


def test_every_marked_finding_of_the_committed_pages_agrees_with_its_json():
    assert findings.check() == []


def test_the_headline_and_the_rewritten_summaries_are_marked():
    marked = findings.marked()
    assert "matched/headline" in marked["README.md"]
    for page in ("README.md", "docs/instructor.md", "notebooks/05_baselines.ipynb"):
        assert {"matched/T400/mopd_pg-mixrl", "matched/T400/mopd_kl-rft"} <= set(marked[page]), page
    assert {"regimes/2/H2.1@5", "regimes/2/H2.2@5", "regimes/2/H2.3@5"} <= set(marked["notebooks/07_regimes.ipynb"])


def test_the_rendered_verbs_follow_the_corrected_decisions():
    assert "resolved below 0" in findings.render("matched/T400/mopd_pg-mixrl")
    kl_rft = findings.render("matched/T400/mopd_kl-rft")      # resolved uncorrected only: labelled so
    assert "not resolved: the interval allows differences from" in kl_rft and "resolved only uncorrected" in kl_rft
    head = findings.render("matched/headline")
    assert "T = 100 ran 3 and is in no finding" in head and "RFT" in head and "ahead of RFT" not in head


def copy_docs(tmp_path):
    data = tmp_path / "docs"
    data.mkdir()
    for name in ("matched.json", "regimes.json"):
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


def test_a_hand_written_finding_sentence_is_caught(tmp_path):
    """The headline as it stood before the corrected decisions: 'ahead of RFT only at 400 steps'
    rests on a cell that does not survive Holm's correction over the 15 comparisons."""
    old = ("**Is MOPD worth it? <!-- finding: matched/headline -->MOPD exact KL cannot be told apart from "
           "Mix-RL at any of them; it is ahead of RFT only at 400 steps<!-- /finding -->**\n")
    (tmp_path / "README.md").write_text(old + "<!-- finding: matched/T9/nope-none -->x<!-- /finding -->\n")
    bad = findings.check(root=tmp_path)
    assert len(bad) == 2 and "page says: MOPD exact KL cannot be told apart" in bad[0] and "no such finding" in bad[1]
