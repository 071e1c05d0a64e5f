"""Tests for mopd_mini.starting_points: the starting-point table of the regime domains (`starting_points`,
from a stand-in model's answers), its markdown rows, and the depth view the regime plots draw."""

from mopd_mini.domains import REGIME_DOMAINS

from tests.test_regime_tasks import ORIGINAL_MAP, read_facts


def test_starting_points_diagnostics(monkeypatch):
    """mopd_mini.starting_points' table from a stand-in model that answers the gold (then the map's value):
    every accuracy and trace score 1 and nothing copied (then conflict's map rate 1, accuracy 0)."""
    from mopd_mini import starting_points as sp

    answers = {}
    monkeypatch.setattr(sp, "generate_answers", lambda m, t, prompts, **k: [answers[p] for p in prompts])
    for d in REGIME_DOMAINS.values():
        for L in d.eval_lengths:
            for e in d.examples("test", L, 3):
                answers[e.prompt] = e.answer
    rows = sp.starting_points(None, None, n=3)
    assert [(r["domain"], r["length"]) for r in rows] == [(d, L) for d, dom in REGIME_DOMAINS.items() for L in dom.eval_lengths]
    for r in rows:
        assert r["acc"] == 1 and r.get("trace", 1) == r.get("strict", 1) == r.get("steps", 1) == r.get("hops", 1) == 1
        assert r.get("map", 0) == r.get("copy", 0) == 0
    for e in [e for L in (2, 3, 4, 5) for e in REGIME_DOMAINS["conflict"].examples("test", L, 3)]:
        answers[e.prompt] = f"v{ORIGINAL_MAP[read_facts(e.prompt)[1]]}."
    for r in sp.starting_points(None, None, n=3, domains={"conflict": REGIME_DOMAINS["conflict"]}):
        assert (r["acc"], r["map"]) == (0, 1)
    assert "| chain | 2 | 3 | 1.00 | 1.00 |" in sp.format_rows(rows)


def test_starting_points_report_the_strict_trace_beside_the_prefix_match(monkeypatch):
    """mopd_mini.starting_points' chain rows: an over-running answer scores trace (the prefix match) 1 and
    strict 0; the final-answer accuracy is 0 too (its last token is the extra node)."""
    from mopd_mini import starting_points as sp

    chain = {"chain": REGIME_DOMAINS["chain"]}
    over = {e.prompt: e.answer + " " + e.answer.split()[0] for e in chain["chain"].examples("test", 2, 4)}
    monkeypatch.setattr(sp, "generate_answers", lambda m, t, prompts, **k: [over.get(p, "g0.") for p in prompts])
    row = next(r for r in sp.starting_points(None, None, n=4, domains=chain) if r["length"] == 2)
    assert (row["trace"], row["strict"], row["acc"]) == (1, 0, 0)


def test_depth_view_is_what_the_regime_plots_draw():
    """mopd_mini.starting_points.depth_view turns live starting-point rows into the 3-seed view's shape,
    and views.regime_depth draws one line per model, the held-out depths shaded."""
    import matplotlib
    matplotlib.use("Agg")
    from mopd_mini import views
    from mopd_mini.starting_points import depth_view

    rows = {m: [{"domain": "chain", "length": L, "acc": a + 0.1 * L} for L in (2, 3, 4, 5)]
            for m, a in (("base", 0.0), ("teacher", 0.5))}
    v = depth_view(rows)
    assert v["domains"] == ["chain"] and v["parts"]["chain"]["held-out"] == [4, 5]
    assert v["methods"]["teacher"]["by_length"]["chain"] == {"2": 0.7, "3": 0.8, "4": 0.9, "5": 1.0}
    fig = views.regime_depth(v, title="t")
    lines = fig.axes[0].get_lines()
    assert [ln.get_label() for ln in lines] == ["base", "teacher"]
    assert list(lines[1].get_ydata()) == [0.7, 0.8, 0.9, 1.0]
