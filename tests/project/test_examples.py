"""Every examples/<algorithm> project runs through the in-process grid, as a user would run it.

Each example is imported by path (its own server_app.py / client_app.py, only the public API)
with its own pyproject's run config; each partition's node config names its CSV
(``data-path``), as ``--node-config`` does on a SuperNode.
"""

from __future__ import annotations

import json
import tomllib

import numpy as np
import pytest
from flwr.app import Context, RecordDict

from fedcausal_flwr.results import RunResult
from fedcausal_flwr.testing import InProcessGrid
from tests.helpers.examples import (
    ALGORITHMS,
    EXAMPLES,
    csvs,
    load,
    run_config,
    run_example,
)

#: in-process changes of an example's own run config (VFedCD: real Paillier takes minutes)
FAST = {"vfedcd": {"vertical.he-backend": "mock", "vertical.key-bits": 256,
                    "vertical.insecure-test-keys": True}}


def test_every_algorithm_has_an_example_project():
    for alg in ALGORITHMS:
        folder = EXAMPLES / alg
        doc = tomllib.loads((folder / "pyproject.toml").read_text())
        comps = doc["tool"]["flwr"]["app"]["components"]
        assert comps == {"serverapp": "server_app:app", "clientapp": "client_app:app"}, alg
        assert doc["tool"]["flwr"]["app"]["publisher"], alg
        assert (folder / "README.md").is_file() and (folder / "make_data.py").is_file(), alg
        assert len(csvs(alg)) >= 2 and all(f.stat().st_size < 16_000 for f in csvs(alg)), alg
        for module in ("server_app", "client_app"):  # the public API only
            text = (folder / f"{module}.py").read_text()
            for internal in ("fedcausal_flwr.app", "fedcausal_flwr.core", ".csvdata",
                             "fedcausal_flwr.data.", "fedcausal_flwr.strategies."):
                assert internal not in text, (alg, module, internal)


@pytest.mark.integration
def test_fdbnl_example_gives_a_named_graph(tmp_path):
    result = run_example("fdbnl", tmp_path)
    assert result.status == "completed" and result.metrics["clients"] == 4
    names = csvs("fdbnl")[0].read_text().splitlines()[0].split(",")
    # messy sites: site 1 in another column order, site 2 without wind and with empty cells
    assert csvs("fdbnl")[1].read_text().splitlines()[0].split(",") != names
    assert result.metrics["variables"]["absent"] == {"2": ["wind"]}
    shares = result.metrics["missing"]
    assert shares["0"] == shares["1"] == shares["3"] == 0 and 0 < shares["2"] < 0.02
    assert not result.metrics["dropped"] and result.estimates["W_sites"][0, 3] == 3
    g = result.to_networkx(tau=0.2)
    assert sorted(g.nodes) == sorted(names)
    # exactly the graph make_data.py planted: W (lag 0) and A (lag 1)
    assert {(s, t, lag) for s, t, _, lag in result.edges(tau=0.2)} == {
        ("temperature", "pressure", 0), ("pressure", "rain", 0),
        ("temperature", "humidity", 1), ("humidity", "rain", 1), ("pressure", "wind", 1),
        ("wind", "rain", 1)}
    assert all(s in names and t in names for s, t in g.edges)


PLANT = {("valve", "flow", 0), ("pump", "flow", 0), ("flow", "tank_temp", 0),
         ("outside_temp", "tank_temp", 0), ("outside_temp", "outside_temp", 1),
         ("valve", "valve", 1), ("flow", "level", 1), ("level", "level", 1)}


@pytest.mark.integration
def test_plant_example_uses_the_engineers_knowledge(tmp_path):
    """examples/plant: tiers, an exogenous variable and a required edge from the run config;
    the knowledge file says the same; with it the planted process comes back."""
    from fedcausal_flwr.knowledge import Knowledge

    rc = run_config("plant")
    known = Knowledge.from_file(EXAMPLES / "plant" / "knowledge.csv")
    assert known == Knowledge.from_config({k[4:]: v for k, v in rc.items()
                                           if k.startswith("dbn.")})
    result = run_example("plant", tmp_path / "with")
    assert result.status == "completed" and result.metrics["clients"] == 3
    edges = {(s, t, lag) for s, t, _, lag in result.edges()}
    assert edges == PLANT
    tiers = {n: i for i, group in enumerate(known.tiers) for n in group}
    assert all(tiers[s] <= tiers[t] for s, t, _ in edges)  # no effect runs backwards
    assert result.metrics["variables"]["absent"] == {"2": ["pump"]}
    without = run_example("plant", tmp_path / "without", **{
        "dbn.tiers": "", "dbn.exogenous": "", "dbn.require": ""})
    assert {(s, t, lag) for s, t, _, lag in without.edges()} != PLANT


@pytest.mark.integration
@pytest.mark.parametrize("example", ["pfdbnl", "fedgc", "fedcf", "fediv", "vfedcd"])
def test_example_runs(example, tmp_path):
    result = run_example(example, tmp_path, **FAST.get(example, {}))
    assert result.status == "completed", (result.status, result.errors)
    assert result.metrics["clients"] == len(csvs(example))
    if example in ("fedgc", "vfedcd"):  # one node's CSV has a few empty cells
        shares = {str(k): float(v) for k, v in result.metrics["missing"].items()}
        assert shares["0"] == 0 and 0 < shares["1"] < 0.02, shares
    if example == "pfdbnl":  # site 2 has no humidity: its own graph says nothing about it
        assert result.metrics["variables"]["absent"] == {"2": ["humidity"]}
        assert np.isnan(np.asarray(result.estimates["W_local"], dtype=float)[2][1]).all()
    if example == "vfedcd":  # 60 people per party, 54 shared (make_data.py)
        assert result.metrics["samples"] == {"shared": 54,
                                             "unused": {"party 0": 6, "party 1": 6},
                                             "aligned_by": "psi"}


def test_vfedcd_consent_is_spelled_as_the_app_reads_it(tmp_path):
    """One spelling of a party's consent keys: the App's (PartyConsent), in the README, the
    example's README and the example's parties; without them the example refuses mock."""
    from fedcausal_flwr.vertical.model import PartyConsent

    keys = list(PartyConsent.keys())
    assert keys == ["vfedcd-accept-backends", "vfedcd-accept-modes", "vfedcd-min-key-bits"]
    for doc in (EXAMPLES.parent / "README.md", EXAMPLES / "vfedcd" / "README.md"):
        text = doc.read_text()
        assert all(f"`{k}`" in text for k in keys), doc
        assert "`accept-backends`" not in text and "`min-key-bits`" not in text, doc
    rc = {**run_config("vfedcd"), "outputs": str(tmp_path), **FAST["vfedcd"]}
    files = csvs("vfedcd")
    nodes = {i: {"data-path": str(f), "id-key": "examples-shared-secret"}
             for i, f in enumerate(files)}  # no consent to the mock backend
    grid = InProcessGrid(load("vfedcd", "client_app").app, len(files), rc, nodes)
    load("vfedcd", "server_app").app(grid, Context(1, 0, {}, RecordDict(), rc))
    refused = RunResult.load(next((tmp_path / str(rc["run-name"])).glob("*/result.json")))
    assert refused.status.startswith("stopped") and keys[0] in refused.status, refused.status


def test_launcher_points_each_supernode_at_its_own_csv(monkeypatch, tmp_path):
    """``launch deploy --node-data CSV ...`` (the examples' README command): node i gets
    ``data-path`` of the i-th file in its ``--node-config``, and --nodes follows the files."""
    from fedcausal_flwr.cli import launch

    seen = {}
    monkeypatch.setattr(launch, "deploy", lambda n, cfg, **kw: seen.update(n=n, **kw))
    files = csvs("fdbnl")
    launch.main(["deploy", "--app", str(EXAMPLES / "fdbnl"), "--run-config",
                 f'outputs="{tmp_path}"', *[a for f in files for a in ("--node-data", str(f))]])
    assert seen["n"] == 4 and seen["insecure"] is False
    assert seen["node_configs"] == {i: {"data-path": str(f)} for i, f in enumerate(files)}
    arg = launch.node_config_arg(2, 4, seen["node_configs"][2])
    assert launch.parse_run_config(arg) == {"partition-id": 2, "num-partitions": 4,
                                            "data-path": str(files[2])}
    # --node-config: more keys per node, in the same order (FedCF's valve columns)
    launch.main(["deploy", "--app", str(EXAMPLES / "fedcf"), "--run-config",
                 f'outputs="{tmp_path}"',
                 *[a for f in csvs("fedcf") for a in ("--node-data", str(f))],
                 "--node-config", 'input-columns="boiler_valve"',
                 "--node-config", 'input-columns="turbine_valve"'])
    assert seen["n"] == 2 and seen["node_configs"] == {
        i: {"data-path": str(f), "input-columns": v}
        for i, (f, v) in enumerate(zip(csvs("fedcf"), ["boiler_valve", "turbine_valve"],
                                       strict=True))}
    with pytest.raises(SystemExit):  # one --node-config per --node-data
        launch.main(["deploy", "--app", str(EXAMPLES / "fedcf"), "--node-data",
                     str(csvs("fedcf")[0]), "--node-config", "a=1", "--node-config", "a=2"])


def test_public_readers_name_what_is_missing():
    from fedcausal_flwr.data import lagged, node_csv, node_data, read_csv

    ctx = Context(1, 0, {"partition-id": 2, "num-partitions": 4}, RecordDict(), {})
    with pytest.raises(ValueError, match="client 2: this SuperNode has no node config data-path"):
        node_csv(ctx)
    with pytest.raises(ValueError, match="client 2: this SuperNode has no node config data-path"):
        node_data("fdbnl", ctx)
    ctx.node_config["data-path"] = str(csvs("fdbnl")[0])
    with pytest.raises(ValueError, match="unknown algorithm 'nope'"):
        node_data("nope", ctx)
    table = read_csv(csvs("fdbnl")[0], "client 0")
    Xt, Xlag = lagged(table, lags=2)
    assert Xt.shape == (len(table.values) - 2, 5) and Xlag.shape == (len(Xt), 10)
    assert node_data("fdbnl", ctx)["names"] == table.names


@pytest.mark.integration
def test_fedcf_example_answers_the_valve_counterfactual(tmp_path):
    """The plants' valves are known inputs (node config ``input-columns``); FedCF's answer to
    "how would the turbine's sensors change had the boiler's valve risen by 1" points where
    the planted effect does (make_data.py's truth.json) with about its size. The paper's
    literal target (``ss-target="predicted"``) learns B_hat ~ 0 on i.i.d. inputs: no answer."""
    truth = np.asarray(json.loads((EXAMPLES / "fedcf" / "data" / "truth.json").read_text())
                       ["delta_y"])
    for target, works in (("innovation", True), ("predicted", False)):
        result = run_example("fedcf", tmp_path / target, **{"statespace.ss-target": target})
        assert result.status == "completed", (result.status, result.errors)
        answer = np.asarray(result.metrics["counterfactual"]["delta_y"], dtype=float)
        cosine = answer @ truth / np.linalg.norm(answer) / np.linalg.norm(truth)
        size = np.linalg.norm(answer) / np.linalg.norm(truth)
        assert (cosine > 0.9 and 0.75 < size < 1.33) == works, (target, answer, truth)
