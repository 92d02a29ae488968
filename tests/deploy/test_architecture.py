"""The layering the project promises: ``dlperf_core`` is a plain library (importing every module of it never
imports Airflow), and no module imports another that imports it back (at module level)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

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
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree) if deferred else tree.body:
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                # `from pkg import sub` depends on the submodule (Python loads it even while pkg is half-way
                # through its own __init__), `from mod import name` on the module
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
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


def test_no_import_cycle_anywhere():
    graph = import_graph()
    assert len(graph) > 80 and "dlperf_core.model" in graph["dlperf_core.frameworks.base"]
    assert cycles(graph) == []


def test_no_cycle_dodged_by_an_import_inside_a_function():
    """An import inside a function that would close a cycle at module level is a cycle all the same."""
    graph = import_graph(deferred=True)
    assert "dlperf_core.frameworks" in graph["dlperf_core.plan"]
    assert cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
