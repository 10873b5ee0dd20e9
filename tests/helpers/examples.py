"""The examples/<algorithm> projects as a user runs them: each imported by path (its own
server_app.py / client_app.py), with its own pyproject's run config, each partition's node
config naming its CSV (``data-path``), as ``--node-config`` does on a SuperNode."""

from __future__ import annotations

import importlib.util
import sys
import tomllib
from pathlib import Path

import numpy as np
from flwr.app import Context, RecordDict
from flwr.common.config import flatten_dict

from fedcausal_flwr.results import RunResult
from fedcausal_flwr.testing import InProcessGrid

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ALGORITHMS = ["fdbnl", "pfdbnl", "fedgc", "fedcf", "fediv", "vfedcd", "fedpc", "fedtrees"]


def load(example: str, module: str):
    """``examples/<example>/<module>.py`` as a fresh module (examples share file names)."""
    return load_from(EXAMPLES / example, module, f"example_{example}_{module}")


def load_from(folder: Path, module: str, name: str):
    """``folder/<module>.py`` as module ``name``, importing its sibling modules
    (``make_data``) from ``folder``, as Flower does with the App's folder on ``sys.path``."""
    spec = importlib.util.spec_from_file_location(name, folder / f"{module}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    sys.modules.pop("make_data", None)  # each example has its own
    sys.path.insert(0, str(folder))
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop("make_data", None)
    return mod


def run_config(example: str) -> dict:
    """The run config of ``examples/<example>/pyproject.toml``, flattened as Flower reads it."""
    doc = tomllib.loads((EXAMPLES / example / "pyproject.toml").read_text())
    return flatten_dict(doc["tool"]["flwr"]["app"]["config"])


def csvs(example: str) -> list[Path]:
    """The example's CSVs, one a node, in node order."""
    return sorted((EXAMPLES / example / "data").glob("*.csv"))


def run_example(example: str, tmp_path: Path, **changes) -> RunResult:
    """The example's own ServerApp and ClientApp on an InProcessGrid, one node a CSV, with
    ``changes`` to its run config; the result it saved under ``tmp_path``."""
    rc = {**run_config(example), "outputs": str(tmp_path), **changes}
    files = csvs(example)
    nodes = {i: {"data-path": str(f), **node_extra(example, i)} for i, f in enumerate(files)}
    grid = InProcessGrid(load(example, "client_app").app, len(files), rc, nodes)
    load(example, "server_app").app(grid, Context(1, 0, {}, RecordDict(), rc))
    return RunResult.load(tmp_path / str(rc["run-name"]))


def assert_same_as_in_process(result: RunResult, example: str, tmp_path: Path,
                              **changes) -> None:
    """``result`` (a run under real Flower on the example's CSVs) has the rounds and, to 1e-8,
    the W and A of the example's in-process run on the same CSVs."""
    reference = run_example(example, tmp_path / "in-process", **changes)
    assert len(result.history) == len(reference.history)
    for key in ("W", "A"):
        np.testing.assert_allclose(result.estimates[key], reference.estimates[key], rtol=0,
                                   atol=1e-8)


def node_extra(example: str, i: int) -> dict:
    """Node config keys beside ``data-path`` that node ``i`` of the example needs."""
    if example == "fedcf":  # each plant names its own valve column (README)
        return {"input-columns": ["boiler_valve", "turbine_valve"][i]}
    if example != "vfedcd":
        return {}
    # no shared ID key (the parties align by PSI, as the README runs it); and their consent
    # to the test-only mock backend (the in-process runs)
    return {"vfedcd-accept-backends": "mock", "vfedcd-min-key-bits": 256}
