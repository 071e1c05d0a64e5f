"""tools.house prints the figures the tests check, read from the working tree."""

from tools import house


def test_the_figures_count_the_tree_and_every_concept(capsys):
    f = house.figures()
    assert f["files per folder"]["mopd_mini"] >= 30 and "tests" in f["files per folder"]
    assert f["longest"] == sorted(f["longest"], reverse=True) and f["over 1000 lines"] == 0
    assert f["circles in studies/ and tools/"] == []
    assert set(f["look-ups"]) == set(house.CONCEPTS)
    house.main()
    assert f"for {len(house.CONCEPTS)} of {len(house.CONCEPTS)} concepts" in capsys.readouterr().out
