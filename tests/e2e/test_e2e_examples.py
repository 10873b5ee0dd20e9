"""End to end: examples/fdbnl as a user's federation under a real secure deployment.

Issue 10's first acceptance bullet: 4 SuperNodes, each pointing at its own CSV with
``--node-config 'partition-id=i num-partitions=4 data-path="..."'``, TLS and SuperNode
authentication (the launcher's defaults: a local CA, registered node keys), the example's own
App folder given to ``flwr run``; the run completes with the estimates of the example's
in-process run and its result is a named networkx graph. A fifth SuperNode with an
unregistered key is refused (Flower logs "Exit Code: 305", the process exits with status 1 on
its own), and other Flower work on the machine (conftest's ``other_flower_work``) is left
alone. About 1.5 minutes on 2 shared cores (5 rounds; the example's 30 take 4). Then
examples/vfedcd under plain ``flwr run`` on a secure deployment (one mini-batch step).
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from flwr.app import Context, RecordDict

from fedcausal_flwr.cli import launch
from fedcausal_flwr.results import RunResult
from fedcausal_flwr.testing import InProcessGrid
from tests.helpers.examples import assert_same_as_in_process, load, run_config

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "fdbnl"


def test_fdbnl_example_secure_deployment_on_four_csvs(tmp_path, monkeypatch, other_flower_work,
                                                     default_ports, flower_pids):
    # the ServerApp/ClientApp processes import this checkout's package
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    monkeypatch.setenv("FLWR_HOME", str(tmp_path / "flwr-home"))
    files = sorted((EXAMPLE / "data").glob("site*.csv"))
    assert len(files) == 4
    names = files[0].read_text().splitlines()[0].split(",")
    seen: dict = {}

    def watch(node: subprocess.Popen) -> None:
        try:
            seen["bad_code"] = node.wait(timeout=90)
            seen["bad_exit_at"] = time.time()
        except subprocess.TimeoutExpired:
            seen["bad_code"] = None

    def on_start(dep: launch.Deployment) -> None:
        seen.update(port=dep.port, secure=dep.secure, certs=dep.certs)
        bad = dep.start_supernode(4, register=False)  # a key the SuperLink never saw
        seen["thread"] = threading.Thread(target=watch, args=(bad,), daemon=True)
        seen["thread"].start()

    rc = {"outputs": str(tmp_path / "outputs"), "run-name": "sites", "dbn.num-rounds": 5}
    launch.deploy(4, rc, app_dir=EXAMPLE, workdir=tmp_path / "deployment", timeout=300,
                  on_start=on_start,
                  node_configs={i: {"data-path": str(f)} for i, f in enumerate(files)})
    ended = time.time()
    seen["thread"].join(timeout=90)
    other_flower_work()  # the SuperLink on 39091 and the listeners on 9200, 8000: untouched
    port, work = seen["port"], tmp_path / "deployment"
    assert port not in default_ports.values() and not flower_pids(port, 6)
    assert seen["secure"] and seen["certs"]["ca"].exists()  # TLS + node auth were on
    assert f"https://127.0.0.1:{port}" in (work / "superlink.log").read_text()
    cli = (work / "cli" / "config.toml").read_text()
    assert "root-certificates" in cli and "insecure" not in cli
    for i in range(4):
        assert (work / "keys" / f"supernode{i}.pub").is_file()
        assert "Exit Code: 305" not in (work / f"supernode{i}.log").read_text()
    # the unregistered node: Flower logs exit code 305 (node auth) and the process ends with
    # status 1 by itself, before deploy stopped what it started
    bad_log = (work / "supernode4.log").read_text()
    assert seen["bad_code"] == 1 and seen["bad_exit_at"] < ended, (seen, bad_log[-2000:])
    assert "Exit Code: 305" in bad_log

    result = RunResult.load(tmp_path / "outputs" / "sites")
    assert result.status == "completed" and result.metrics["clients"] == 4
    # the same estimates as the example's in-process run on the same CSVs
    assert_same_as_in_process(result, "fdbnl", tmp_path, **{"dbn.num-rounds": 5})
    g = result.to_networkx(tau=0.2)
    assert sorted(g.nodes) == sorted(names)
    assert g.number_of_edges() > 0
    assert all(s in names and t in names for s, t in g.edges)
    assert all("lag" in d and "weight" in d for _, _, d in g.edges(data=True))


VFEDCD = ROOT / "examples" / "vfedcd"


def test_vfedcd_example_under_plain_flwr_run_deployment(tmp_path, monkeypatch):
    """examples/vfedcd through `flwr run` on a secure loopback deployment with real 2048-bit
    keys (``paillier-packed``, which the parties' default consent accepts): each party reads
    its own CSV and aligns rows by private set intersection (no shared secret: the default);
    one mini-batch step (batch 64 > the 54 shared rows): 9 exchanges. B equals the example's
    in-process run with the same settings up to the order of the full batch's rows (each run
    draws its own PSI keys, which order the shared rows; test_e2e_vfedcd.py checks the Flower
    path against the reference loop)."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    monkeypatch.setenv("FLWR_HOME", str(tmp_path / "flwr-home"))
    files = sorted((VFEDCD / "data").glob("party*.csv"))
    names = [n for f in files for n in f.read_text().splitlines()[0].split(",") if n != "id"]
    rc = {"outputs": str(tmp_path / "outputs"), "run-name": "parties", "vertical.num-epochs": 1,
          "vertical.batch": 64, "vertical.he-backend": "paillier-packed"}
    nodes = {i: {"data-path": str(f)} for i, f in enumerate(files)}
    launch.deploy(len(files), rc, app_dir=VFEDCD, workdir=tmp_path / "deployment", timeout=420,
                  node_configs=nodes)
    result = RunResult.load(tmp_path / "outputs" / "parties")
    assert result.status == "completed" and result.metrics["clients"] == len(files)
    assert result.metrics["samples"]["shared"] == 54  # 60 IDs each, 54 in common
    assert result.metrics["samples"]["aligned_by"] == "psi"
    assert sorted(result.to_networkx(tau=0.0).nodes) == sorted(names)
    local = {**run_config("vfedcd"), **rc, "outputs": str(tmp_path / "in-process")}
    grid = InProcessGrid(load("vfedcd", "client_app").app, len(files), local, nodes)
    load("vfedcd", "server_app").app(grid, Context(1, 0, {}, RecordDict(), local))
    reference = RunResult.load(tmp_path / "in-process" / "parties")
    np.testing.assert_allclose(result.estimates["B"], reference.estimates["B"], rtol=0,
                               atol=1e-9)
