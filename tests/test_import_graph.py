"""The library's import graph, read from the source: every `import`, `from ... import`, and every
module named by a string to `importlib.import_module("...")` or `__import__("...")`, at any depth
(a function's lazy import counts as an arrow too). The library has no import cycle, and no arrow up
into the checkout (bench/, studies/, tools/): an installed package has none of them. The library's
tests (tests/test_*.py) import none of them either: they run where the package is installed alone."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = "mopd_mini"
OUTSIDE_THE_LIBRARY = ("bench", "studies", "tools")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _absolute(module: str, level: int, here: str, is_package: bool) -> str:
    if not level:
        return module
    base = here.split(".") if is_package else here.split(".")[:-1]
    base = base[:len(base) - (level - 1)]
    return ".".join([*base, module] if module else base)


def imported(source: str, here: str, is_package: bool = False) -> set[str]:
    """The modules one file imports (the names as written, relative ones made absolute; for
    `from P import x` both P and P.x, since x may be a submodule: `library_graph` keeps P.x where
    it is a module, else P)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            package = _absolute(node.module or "", node.level, here, is_package)
            found.add(package)
            found.update(f"{package}.{alias.name}" for alias in node.names if alias.name != "*")
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name in ("import_module", "__import__"):
                target = node.args[0].value
                if target.startswith("."):  # import_module(".x", package): relative to the package given
                    level = len(target) - len(target.lstrip("."))
                    target = _absolute(target.lstrip("."), level, here, is_package)
                found.add(target)
    return found


def library_graph(folders: tuple = (LIBRARY,)) -> dict[str, set[str]]:
    """{module: the modules it imports} over the .py files of `folders` (the library by default)."""
    files = sorted(f for folder in folders for f in (ROOT / folder).rglob("*.py"))
    names = {module_name(f): f for f in files}
    graph = {}
    for name, f in names.items():
        targets = imported(f.read_text(), name, f.name == "__init__.py")
        # `from . import routing` names the submodule; the package itself only for a name it defines
        parents = {t.rsplit(".", 1)[0] for t in targets if t in names and "." in t}
        graph[name] = {t for t in targets if (t in names and (t not in parents or _names_from(f, t)))
                       or t.split(".")[0] in OUTSIDE_THE_LIBRARY}
    return graph


def _names_from(path: Path, package: str) -> bool:
    """Whether the file takes from `package` a name that is not one of its submodules."""
    subs = {module_name(f).rsplit(".", 1)[-1] for f in (ROOT / Path(*package.split("."))).glob("*.py")}
    here = module_name(path)
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and \
                _absolute(node.module or "", node.level, here, path.name == "__init__.py") == package:
            if any(alias.name not in subs for alias in node.names):
                return True
    return False


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan), or one importing itself."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1 or v in graph[v]:
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_reader_counts_import_strings():
    """`importlib.import_module("...")` and `__import__("...")` strings are arrows, as statements are."""
    source = ("import importlib\nfrom importlib import import_module\nfrom . import losses\n"
              "def f():\n    importlib.import_module('bench.results')\n    import_module('.cost', __name__)\n"
              "    __import__('studies.matched')\n    importlib.import_module(name)\n")
    assert imported(source, "mopd_mini.cli") == {"importlib", "importlib.import_module", "mopd_mini",
                                                 "mopd_mini.losses", "bench.results", "mopd_mini.cost",
                                                 "studies.matched"}


def test_the_library_has_no_import_cycle():
    graph = library_graph()
    assert "mopd_mini.routing" in graph["mopd_mini.distill"]  # the reader sees the library's arrows
    assert cycles(graph) == []


def test_the_studies_and_tools_have_no_import_cycle():
    """studies/ and tools/ import each other in one direction only: every import counts, a function's
    lazy one too (tools.findings reads the studies; a study's page renderer imports no tool that reads
    it back: the findings' sentences are studies.findings')."""
    graph = library_graph(("studies", "tools"))
    graph = {m: {t for t in targets if t.split(".")[0] in ("studies", "tools")} for m, targets in graph.items()}
    assert "studies.regimes_page" in graph and "studies.findings" in graph["tools.findings"]   # lazy arrows are read
    assert cycles(graph) == []


def test_the_cycle_finder_sees_an_arrow_inside_a_function():
    """A lazy import (inside a function) closes a cycle as a top-level one does."""
    a = imported("from . import b\n", "studies.a")
    b = imported("def f():\n    from studies.a import x\n", "studies.b")
    graph = {"studies.a": {t for t in a if t in ("studies.a", "studies.b")},
             "studies.b": {t for t in b if t in ("studies.a", "studies.b")}}
    assert cycles(graph) == [["studies.a", "studies.b"]]


def test_the_library_imports_nothing_from_bench_studies_or_tools():
    """Not by a statement, nor by an importlib or __import__ string (the reader sees those)."""
    graph = library_graph()
    assert "mopd_mini.cli" in graph and "mopd_mini.cli.commands" in graph  # the reader sees the packages' modules
    out = {(m, t) for m, targets in graph.items() for t in targets if t.split(".")[0] in OUTSIDE_THE_LIBRARY}
    assert out == set()


def test_the_library_tests_import_nothing_from_the_checkout():
    """tests/test_*.py test the library: bench/, studies/ and tools/ have their tests in tests/bench/,
    tests/studies/ and tests/tools/."""
    tests = sorted((ROOT / "tests").glob("test_*.py"))
    assert len(tests) > 30
    found = {(f.name, t) for f in tests for t in imported(f.read_text(), f"tests.{f.stem}")
             if t.split(".")[0] in OUTSIDE_THE_LIBRARY}
    assert found == set()
