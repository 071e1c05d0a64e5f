"""mopd_mini.views holds the figures of study results; their old names on mopd_mini.plots still
work for one release, each warning and giving the views' own function (one definition, not two)."""

import warnings

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from mopd_mini import plots, views  # noqa: E402


@pytest.mark.parametrize("name", plots.MOVED_TO_VIEWS)
def test_an_old_plots_name_warns_and_gives_the_views_function(name):
    assert name not in vars(plots), "defined in plots again: one home for each figure"
    with pytest.warns(DeprecationWarning, match=f"importing {name} from mopd_mini.plots is deprecated.*import it from mopd_mini.views"):
        old = getattr(plots, name)
    assert old is getattr(views, name)


def test_the_course_plots_do_not_warn_and_unknown_names_still_fail():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert callable(plots.curves) and callable(plots.save)
    with pytest.raises(AttributeError, match="no attribute 'regime_nothing'"):
        plots.regime_nothing  # noqa: B018


def test_views_draws_with_the_course_palette():
    from mopd_mini import palette

    assert plots.COLORS is palette.COLORS
    assert palette.color("student", 3) == palette.COLORS["student"]
    assert palette.color("some method", 1) != palette.color("some method", 2)  # tab10 by position
