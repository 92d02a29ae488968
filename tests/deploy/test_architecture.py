"""The layering CONTRIBUTING.md promises ("## Layering"), as tests:

- ``dlperf_core`` is a plain library: no module of it imports Airflow, ``dlperf_airflow`` or ``dlperf_cli``, also
  not inside a function (every module's syntax tree is walked), and importing every module of it leaves Airflow out;
- no import cycles between modules (``dlperf_core``, ``dlperf_cli``, ``dlperf_airflow``), also not dodged by an
  import inside a function;
- ``tests/core/`` tests the core alone: it never imports ``dlperf_airflow`` (those tests live in
  ``tests/airflow_plugin/``);
- ``dags/`` and ``plugins/`` never import ``dlperf_cli`` (the CLI sits over them, not under).

No rule names a module of the core: every ``*.py`` under a folder is read, so the rules hold as modules move into
subpackages."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import REPO

PACKAGES = {  # import root -> folder under the repository
    "dlperf_core": REPO / "dlperf_core",
    "dlperf_cli": REPO / "dlperf_cli",
    "dlperf_airflow": REPO / "plugins" / "dlperf_airflow",
}


def test_importing_every_core_module_leaves_airflow_out():
    code = (
        "import importlib, pkgutil, sys\n"
        "import dlperf_core\n"
        "names = [m.name for m in pkgutil.walk_packages(dlperf_core.__path__, 'dlperf_core.')\n"
        "         if '.migrations.' not in m.name]\n"
        "for name in names:\n"
        "    importlib.import_module(name)\n"
        "print(len(names), sorted(m for m in sys.modules if m == 'airflow' or m.startswith('airflow.')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    count, airflow = done.stdout.split(" ", 1)
    assert int(count) > 50 and airflow.strip() == "[]", f"dlperf_core pulled in Airflow: {airflow}"


def _module_name(path: Path, root: str, folder: Path) -> str:
    parts = list(path.relative_to(folder).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join([root, *parts])


def _imports(tree: ast.Module, package: str, deferred: bool = True) -> Iterator[tuple[int, str, list[str]]]:
    """(line, module, names) of each import in ``tree`` (with ``deferred``: also those inside functions and
    classes), relative imports resolved against ``package``; ``import a.b`` is (line, "a.b", [])."""
    for node in ast.walk(tree) if deferred else tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, []
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            yield node.lineno, base, [a.name for a in node.names]


def import_graph(deferred: bool = False) -> dict[str, set[str]]:
    """Module -> the project's modules it imports at module level, and with ``deferred`` also those imported
    inside functions (the usual way to dodge a cycle). A package's ``__init__`` counts as the package."""
    modules: dict[str, Path] = {}
    for root, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            if "migrations" not in path.parts:
                modules[_module_name(path, root, folder)] = path
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()
        for _line, base, names in _imports(ast.parse(path.read_text()), package, deferred):
            # `from pkg import sub` depends on the submodule (Python loads it even while pkg is half-way
            # through its own __init__), `from mod import name` on the module
            targets = [f"{base}.{n}" if f"{base}.{n}" in modules else base for n in names] if names else [base]
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    found.add(target)
        graph[name] = found
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def _edges(graph: dict[str, set[str]]) -> int:
    return sum(len(targets) for targets in graph.values())


def test_no_import_cycle_anywhere():
    graph = import_graph()
    core = [name for name in graph if name.startswith("dlperf_core.")]
    assert len(graph) > 80 and len(core) > 50 and _edges(graph) > 200  # the graph was read, not empty
    assert cycles(graph) == []


def test_no_cycle_dodged_by_an_import_inside_a_function():
    """An import inside a function that would close a cycle at module level is a cycle all the same."""
    graph = import_graph(deferred=True)
    assert _edges(graph) > _edges(import_graph())  # imports inside functions are there, and counted
    assert cycles(graph) == []


def test_no_cycle_between_the_core_modules_alone():
    """The core's own modules, with the imports inside functions: no cycle among them (a cycle that runs through
    dlperf_cli or dlperf_airflow would also be one of the whole graph's above)."""
    graph = import_graph(deferred=True)
    core = {name: {t for t in targets if t.startswith("dlperf_core")} for name, targets in graph.items()}
    core = {name: targets for name, targets in core.items() if name.startswith("dlperf_core")}
    assert cycles(core) == []


# --------------------------------------------------------------------------- who may import whom


def _module_of(path: Path, base: Path = REPO) -> str:
    """The dotted name a file imports as (its package anchors its relative imports)."""
    for root, folder in PACKAGES.items():
        if path.is_relative_to(folder):
            return _module_name(path, root, folder)
    return ".".join(path.relative_to(base).with_suffix("").parts)


def forbidden_imports(folder: Path, forbidden: tuple[str, ...], base: Path = REPO) -> list[str]:
    """``file:line: module`` for each import, at module level or inside a function, of a module named in
    ``forbidden`` (or one of its submodules) by a ``*.py`` under ``folder`` (paths shown relative to ``base``)."""
    found: list[tuple[str, int, str]] = []
    for path in sorted(folder.rglob("*.py")):
        name = _module_of(path, base)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for line, module, names in _imports(ast.parse(path.read_text()), package):
            targets = [module, *(f"{module}.{n}" for n in names)]
            if any(t == f or t.startswith(f"{f}.") for t in targets for f in forbidden):
                found.append((str(path.relative_to(base)), line, module))
    return [f"{path}:{line}: {module}" for path, line, module in sorted(found)]


@pytest.mark.parametrize(
    ("folder", "forbidden"),
    [
        ("dlperf_core", ("airflow", "dlperf_airflow", "dlperf_cli", "plugins", "dags")),  # a plain library
        ("tests/core", ("dlperf_airflow", "plugins", "dags")),  # the core's tests test the core alone
        ("dags", ("dlperf_cli",)),  # the CLI is over the DAG, not under it
        ("plugins", ("dlperf_cli",)),
    ],
)
def test_layering(folder: str, forbidden: tuple[str, ...]):
    assert list((REPO / folder).rglob("*.py")), f"nothing to check under {folder}"
    assert forbidden_imports(REPO / folder, forbidden) == []


def test_the_layering_check_finds_imports_inside_functions_and_relative_ones(tmp_path):
    """The checker itself: an import inside a function, ``from x import y``, ``from . import y`` all count."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text(
        "import os\n\n\ndef f():\n    import dlperf_airflow.steps\n\n\n"
        "def g():\n    from dlperf_cli import main\n\n\nfrom . import dlperf_cli\n"
    )
    (package / "b.py").write_text("from airflow.sdk import dag\nfrom .a import f\n")
    assert forbidden_imports(tmp_path, ("dlperf_airflow", "dlperf_cli", "airflow"), base=tmp_path) == [
        "pkg/a.py:5: dlperf_airflow.steps",
        "pkg/a.py:9: dlperf_cli",
        "pkg/b.py:1: airflow.sdk",
    ]
    assert forbidden_imports(tmp_path, ("pkg.dlperf_cli",), base=tmp_path) == ["pkg/a.py:12: pkg"]
