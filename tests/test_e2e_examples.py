"""End to end: examples/fdbnl as a user's federation under a real secure deployment.

Issue 10's first acceptance bullet: 4 SuperNodes, each pointing at its own CSV with
``--node-config 'partition-id=i num-partitions=4 data-path="..."'``, TLS and SuperNode
authentication (the launcher's defaults: a local CA, registered node keys), the example's own
App folder given to ``flwr run``; the run completes and its result is a named networkx graph.
About 1.5 minutes on 2 shared cores (5 rounds; the example's 30 take 4).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fedcausal_flwr import launch
from fedcausal_flwr.results import RunResult

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "fdbnl"


def test_fdbnl_example_secure_deployment_on_four_csvs(tmp_path, monkeypatch):
    # the ServerApp/ClientApp processes import this checkout's package
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    monkeypatch.setenv("FLWR_HOME", str(tmp_path / "flwr-home"))
    files = sorted((EXAMPLE / "data").glob("site*.csv"))
    assert len(files) == 4
    names = files[0].read_text().splitlines()[0].split(",")
    seen = []

    def on_start(dep: launch.Deployment) -> None:
        seen.append((dep.secure, dep.certs))

    launch.deploy(4, {"outputs": str(tmp_path / "outputs"), "run-name": "sites", "num-rounds": 5},
                  app_dir=EXAMPLE, workdir=tmp_path / "deployment", timeout=300,
                  on_start=on_start,
                  node_configs={i: {"data-path": str(f)} for i, f in enumerate(files)})
    assert seen and seen[0][0] and seen[0][1] is not None  # TLS + node auth were on
    for i in range(4):
        assert (tmp_path / "deployment" / "keys" / f"supernode{i}.pub").is_file()
        log = (tmp_path / "deployment" / f"supernode{i}.log").read_text()
        assert "Exit Code: 305" not in log  # no node was refused
    result = RunResult.load(tmp_path / "outputs" / "sites")
    assert result.status == "completed" and result.metrics["clients"] == 4
    g = result.to_networkx(tau=0.2)
    assert sorted(g.nodes) == sorted(names)
    assert g.number_of_edges() > 0
    assert all(s in names and t in names for s, t in g.edges)
    assert all("lag" in d and "weight" in d for _, _, d in g.edges(data=True))


VFEDCD = ROOT / "examples" / "vfedcd"


def test_vfedcd_example_under_plain_flwr_run_deployment(tmp_path, monkeypatch):
    """examples/vfedcd through `flwr run` on a secure loopback deployment: each party reads its
    own CSV and aligns rows by keyed ID hashes; the parties consent to the mock backend in their
    node config (the example's real-key default takes minutes per epoch here)."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    monkeypatch.setenv("FLWR_HOME", str(tmp_path / "flwr-home"))
    files = sorted((VFEDCD / "data").glob("party*.csv"))
    names = [n for f in files for n in f.read_text().splitlines()[0].split(",") if n != "id"]
    launch.deploy(len(files), {"outputs": str(tmp_path / "outputs"), "run-name": "parties",
                               "num-epochs": 1, "he-backend": "mock"},
                  app_dir=VFEDCD, workdir=tmp_path / "deployment", timeout=420,
                  node_configs={i: {"data-path": str(f), "id-key": "examples-shared-secret",
                                    "accept-backends": "mock"} for i, f in enumerate(files)})
    result = RunResult.load(tmp_path / "outputs" / "parties")
    assert result.status == "completed" and result.metrics["clients"] == len(files)
    assert sorted(result.to_networkx(tau=0.0).nodes) == sorted(names)
