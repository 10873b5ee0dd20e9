"""The import graph of the package: no cycle, no import from a lower layer to a higher one,
no family importing another, equations without Flower, strategies and clients apart.

Every import counts (module level or inside a function), except those under
``if TYPE_CHECKING:``, which run for type checkers only.
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
             "evaluation")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def _type_checking_only(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return True
    return False


def imports(name: str) -> set[str]:
    """The package modules ``name`` imports (a ``from p import m`` of a module counts as m)."""
    tree = ast.parse(MODULES[name].read_text())
    parents = {c: p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}
    out = set()
    for node in ast.walk(tree):
        if _type_checking_only(node, parents):
            continue
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
    points and the test kit."""
    short = name.removeprefix("fedcausal_flwr").lstrip(".")
    top = short.split(".")[0]
    if top in FAMILIES:
        return 2
    if top == "federation" or short == "results":
        return 1
    if short in ("appconfig", "strategies", "clients", "data", "data.node"):
        return 3
    if short in ("server_app", "client_app", "launch", "testing"):
        return 4
    return 0


def test_there_is_no_import_cycle():
    seen: dict[str, int] = {}  # 1 on the stack, 2 done

    def visit(node: str, path: list[str]) -> None:
        seen[node] = 1
        for nxt in sorted(GRAPH[node]):
            if seen.get(nxt) == 1:
                cycle = path[path.index(nxt):] + [nxt] if nxt in path else [node, nxt]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if nxt not in seen:
                visit(nxt, path + [nxt])
        seen[node] = 2

    for name in sorted(GRAPH):
        if name not in seen:
            visit(name, [name])


def test_no_module_imports_a_higher_layer():
    bad = [f"{a} (layer {layer(a)}) imports {b} (layer {layer(b)})"
           for a, deps in GRAPH.items() for b in deps if layer(b) > layer(a)]
    assert bad == []


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
