"""bench.stuck_gradient: the stuck student on one categorical, each loss's gradient norm."""

import math

from bench.stuck_gradient import table


def test_the_stuck_gradient_table_shows_the_cure():
    """bench.stuck_gradient's categorical: from p_S(wrong) = 0.5 to 0.999 the reverse KL rises while
    its gradient collapses (the issue's measured 0.020-0.026 at 0.99-0.998); the forward KL's stays
    near sqrt(2); the JSD's shrinks too (its endpoint beta = 0 is the cure, not the middle)."""
    rows = table()
    first, last = rows[0], rows[-1]
    assert last["KL(p_S || p_T)"] > first["KL(p_S || p_T)"] + 5
    assert last["reverse KL"] < 0.05 < 1 < first["reverse KL"]
    assert all(r["forward KL"] > 1 for r in rows) and abs(last["forward KL"] - math.sqrt(2)) < 0.05
    assert last["JSD beta=0.5"] / first["JSD beta=0.5"] < 0.05
