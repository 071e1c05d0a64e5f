"""tools.provenance: what the benchmarks and the studies share (the machine, the command, the
worker processes, a page's pre-registered text)."""

import importlib
from pathlib import Path


def test_a_results_header_mentioned_in_a_sentence_does_not_cut_the_page():
    """The benches rewrite a page below its "## Results" line only: the pre-registration above may
    mention the header in a sentence (docs/matched.md does), and must come back whole."""
    provenance = importlib.import_module("tools.provenance")
    page = "# Study\n\nWhen it runs, it appends a `## Results` section.\n\n## Why\n\ntext\n\n## Results\n\nold\n"
    assert provenance.above_header(page, "## Results") == page.split("\n## Results\n")[0] + "\n"
    assert "## Why" in provenance.above_header(page, "## Results")
    assert provenance.above_header("no results yet\n", "## Results") == "no results yet\n"
    registered = (Path(__file__).parents[2] / "docs" / "matched.md").read_text()
    assert "## Tuning: the same effort for every method" in provenance.above_header(registered, "## Results")
