"""The import graph of the package: no cycle, no import from a lower layer to a higher one,
no family importing another, equations without Flower, strategies and clients apart.

Every import counts: at module level, inside a function, or under ``if TYPE_CHECKING:``
(an import for type checkers is still a dependency of the module).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from fedcausal_flwr import registry

PACKAGE = Path(__file__).resolve().parents[2] / "fedcausal_flwr"
FAMILIES = sorted({a.package.rpartition(".")[2] for a in registry.ALGORITHMS.values()})
EQUATIONS = ("model", "settings", "kalman", "loop", "decoder", "lti", "dream4", "synthetic",
             "evaluation", "objective", "blocks", "knownzero", "dp", "networks", "optim",
             "validation")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imports(name: str) -> set[str]:
    """The package modules ``name`` imports (a ``from p import m`` of a module counts as m)."""
    out = set()
    for node in ast.walk(ast.parse(MODULES[name].read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("fedcausal_flwr")}
        elif isinstance(node, ast.ImportFrom) and node.module and \
                node.module.startswith("fedcausal_flwr"):
            subs = {f"{node.module}.{a.name}" for a in node.names}
            out |= (subs & set(MODULES)) or {node.module}
    return {m for m in out if m in MODULES} - {name}


GRAPH = {name: imports(name) for name in MODULES}


def layer(name: str) -> int:
    """0 shared leaves, 1 the federation base and results, 2 a family, 3 what dispatches
    through the registry (public re-exports, node data, run config), 4 the App's entry
    points, the in-process grid and the tools beside the library (``cli``: launcher, starter
    Apps, TLS helpers)."""
    short = name.removeprefix("fedcausal_flwr").lstrip(".")
    top = short.split(".")[0]
    if top in FAMILIES:
        return 2
    if top == "federation" or short == "results":
        return 1
    if short in ("appconfig", "strategies", "clients", "data", "data.node"):
        return 3
    if top == "cli" or short in ("server_app", "client_app", "testing", "__main__"):
        return 4
    return 0


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of ``graph`` with more than one module (each a circle of
    imports, or several), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                out.append(sorted(part))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def test_there_is_no_import_circle():
    """No circle in the import graph, ``if TYPE_CHECKING:`` imports included (results <->
    plots and the federation/ pieces were ones). Lists every circle."""
    assert circles(GRAPH) == []


def test_no_module_imports_a_higher_layer():
    bad = [f"{a} (layer {layer(a)}) imports {b} (layer {layer(b)})"
           for a, deps in GRAPH.items() for b in deps if layer(b) > layer(a)]
    assert bad == []


def test_the_library_imports_none_of_its_tools():
    """``fedcausal_flwr.cli`` (launcher, starter Apps, TLS helpers) sits beside the library:
    only ``python -m fedcausal_flwr`` (the ``new`` command) and the tools themselves import
    it."""
    def tool(name: str) -> bool:
        return name == "fedcausal_flwr.cli" or name.startswith("fedcausal_flwr.cli.")

    bad = [f"{a} imports {b}" for a, deps in GRAPH.items() for b in deps
           if tool(b) and not tool(a) and a != "fedcausal_flwr.__main__"]
    assert bad == []
    assert "fedcausal_flwr.launch" not in MODULES and "fedcausal_flwr.tls" not in MODULES


MAX_LINES = 600


def test_no_module_is_over_600_lines():
    """No module of the package over :data:`MAX_LINES` lines. Lists every offender."""
    over = {name: n for name, path in MODULES.items()
            if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert over == {}, f"modules over {MAX_LINES} lines: {over}"


def test_a_family_imports_no_other_family():
    def family(name: str) -> str | None:
        top = name.split(".")[1] if name.count(".") else ""
        return top if top in FAMILIES else None

    bad = [f"{a} imports {b}" for a, deps in GRAPH.items() for b in deps
           if family(a) and family(b) and family(a) != family(b)]
    assert bad == []


@pytest.mark.parametrize("family", FAMILIES)
def test_equations_import_no_flower_and_strategies_no_clients(family):
    for name, path in MODULES.items():
        if not name.startswith(f"fedcausal_flwr.{family}."):
            continue
        part = name.rpartition(".")[2]
        if part in EQUATIONS:
            assert "flwr" not in path.read_text().replace("fedcausal_flwr", ""), name
        if part == "strategy":
            assert f"fedcausal_flwr.{family}.client" not in GRAPH[name], name
        if part == "client":
            assert f"fedcausal_flwr.{family}.strategy" not in GRAPH[name], name


@pytest.mark.integration
def test_naming_one_family_imports_no_other_stack():
    """``import fedcausal_flwr.dbn`` (and its strategy and client) loads no torch, no phe and
    no other family."""
    code = ("import sys, fedcausal_flwr.dbn, fedcausal_flwr.dbn.strategy, "
            "fedcausal_flwr.dbn.client, fedcausal_flwr.appconfig as a\n"
            "a.check('fdbnl', {'algorithm': 'fdbnl', 'dbn.lambda-w': 0.1})\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'phe', 'gmpy2')"
            " or m.startswith(('fedcausal_flwr.iv.model', 'fedcausal_flwr.vertical.strategy',"
            " 'fedcausal_flwr.statespace.strategy'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"
