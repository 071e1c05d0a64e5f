"""One meaning per name: a public name of the library (a top-level function or class of a
mopd_mini module, not starting with "_") is defined at the top level of one file of the repository
only, outside the tests. A second definition anywhere in the library, the benchmarks, the studies
or the tools fails here, unless the name is on the reviewed list below with the reason it may.

Test files are not read: their helpers live in one test file, which nothing imports."""

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("mopd_mini", "bench", "studies", "tools", "factworld")   # the folders that exist are read

REVIEWED = {
    "main": "each command-line module's entry point (`python -m X` runs X.main)",
    "accuracy_by_length": "plots.X draws what the library's X computes (the course's figures)",
    "initial_kl": "plots.X draws what the library's X computes (the course's figures)",
    "merge_sweep": "plots.X draws what the library's X computes (the course's figures)",
    "interrupted": "the hook `cli.interrupt.run_main` takes from a command's module (course, export): each module's "
                   "own account of what a Ctrl-C kept, one meaning",
}


def top_level_definitions(root: Path = ROOT) -> dict[str, set[str]]:
    """{name: the files (relative paths) that define it at the top level}."""
    defined = defaultdict(set)
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(), filename=str(path))
            for node in tree.body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    defined[node.name].add(path.relative_to(root).as_posix())
    return defined


def defined_twice(defined: dict[str, set[str]], reviewed=REVIEWED) -> dict[str, list[str]]:
    """The library's public names with more than one defining file, less the reviewed ones."""
    public = {n for n, files in defined.items() if not n.startswith("_") and any(f.startswith("mopd_mini/") for f in files)}
    return {n: sorted(defined[n]) for n in sorted(public) if len(defined[n]) > 1 and n not in reviewed}


def test_every_public_name_of_the_library_has_one_definition():
    twice = defined_twice(top_level_definitions())
    assert not twice, ("public names of the library defined in more than one file (give the new one a name that says "
                       f"what it is, or call the library's): {twice}")


def test_the_reviewed_list_holds_only_names_defined_twice():
    """A reviewed name that has one definition left comes off the list (it would hide a new second one)."""
    defined = top_level_definitions()
    stale = sorted(n for n in REVIEWED if len(defined.get(n, ())) < 2)
    assert not stale, f"on the reviewed list but defined once (or not at all): remove {stale}"


def test_a_second_definition_is_found(tmp_path):
    """A library name defined again at the top level of a study is found; a method, a nested
    function, a private name or a name only the studies define is not."""
    (tmp_path / "mopd_mini").mkdir()
    (tmp_path / "bench").mkdir()
    (tmp_path / "mopd_mini" / "a.py").write_text("def shared():\n    pass\n\ndef _private():\n    pass\n\n"
                                               "def inner_only():\n    def nested():\n        pass\n")
    (tmp_path / "bench" / "b.py").write_text("def shared():\n    pass\n\ndef _private():\n    pass\n\n"
                                           "class Thing:\n    def inner_only(self):\n        pass\n\n"
                                           "def nested():\n    pass\n\ndef bench_only():\n    pass\n")
    (tmp_path / "bench" / "c.py").write_text("def bench_only():\n    pass\n")
    defined = top_level_definitions(tmp_path)
    assert defined_twice(defined, reviewed={}) == {"shared": ["bench/b.py", "mopd_mini/a.py"]}
    assert defined_twice(defined, reviewed={"shared": "reviewed"}) == {}
