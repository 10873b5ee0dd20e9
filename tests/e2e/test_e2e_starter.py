"""End to end (issue 25): a starter App and an example's FAB under real ``flwr run``.

``python -m fedcausal_flwr new fdbnl DIR`` (its data/ removed), then
``python -m fedcausal_flwr.cli.launch simulate --app DIR --nodes 2``: each simulated node makes the
example's data for its partition and the run gives the estimates of the example's in-process
run on the same CSVs. Then examples/fedgc's FAB (``flwr build``, no CSV inside) installed with
``flwr install`` into a fresh ``FLWR_HOME`` and run from the installed folder. About 2 minutes
on 2 shared cores.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from flwr.app import Context, RecordDict

from fedcausal_flwr.cli import launch
from fedcausal_flwr.results import RunResult
from fedcausal_flwr.testing import InProcessGrid
from tests.helpers.examples import EXAMPLES, csvs, load, run_config

pytestmark = pytest.mark.e2e
ROOT = EXAMPLES.parent
FLWR = str(Path(sys.executable).with_name("flwr"))


def _env(home: Path) -> dict[str, str]:
    """The ServerApp/ClientApp processes import this checkout's package; a fresh FLWR_HOME."""
    return {**os.environ, "FLWR_HOME": str(home), "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}


def test_a_starter_app_runs_under_the_launcher_with_the_data_its_nodes_make(tmp_path):
    app = tmp_path / "my-fdbnl"
    env = _env(tmp_path / "flwr-home")
    subprocess.run([sys.executable, "-m", "fedcausal_flwr", "new", "fdbnl", str(app)],
                   env=env, check=True, timeout=60)
    for f in (app / "data").iterdir():  # the nodes make it: nothing to read
        f.unlink()
    (app / "data").rmdir()
    out = tmp_path / "outputs"
    proc = subprocess.run(
        [sys.executable, "-m", "fedcausal_flwr.cli.launch", "simulate", "--app", str(app),
         "--nodes", "2", "--run-config", f'outputs="{out}" run-name="starter" '
         "dbn.num-rounds=5"], env=env, cwd=tmp_path, capture_output=True, text=True,
        timeout=400)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    assert "no node config data-path: using the example's own data" in proc.stdout + proc.stderr
    result = RunResult.load(out / "starter")
    assert result.status == "completed" and result.metrics["clients"] == 2
    # the example's in-process run on its committed site0/site1.csv: the same numbers
    rc = {**run_config("fdbnl"), "outputs": str(tmp_path / "ref"), "run-name": "ref",
          "dbn.num-rounds": 5}
    nodes = {i: {"data-path": str(f)} for i, f in enumerate(csvs("fdbnl")[:2])}
    grid = InProcessGrid(load("fdbnl", "client_app").app, 2, rc, nodes)
    load("fdbnl", "server_app").app(grid, Context(1, 0, {}, RecordDict(), rc))
    reference = RunResult.load(tmp_path / "ref" / "ref")
    for key in ("W", "A"):
        np.testing.assert_allclose(result.estimates[key], reference.estimates[key], rtol=0,
                                   atol=1e-8)


def test_an_examples_fab_installs_and_runs_without_its_csvs(tmp_path, monkeypatch):
    home = tmp_path / "flwr-home"
    env = _env(home)
    build = tmp_path / "build"
    build.mkdir()
    subprocess.run([FLWR, "build", "--app", str(EXAMPLES / "fedgc")], cwd=build, env=env,
                   check=True, timeout=120, capture_output=True)
    (fab,) = build.glob("*.fab")
    assert fab.name.startswith("fedcausal-examples.fedgc-example.0-1-0.")
    assert not [n for n in zipfile.ZipFile(fab).namelist() if n.endswith(".csv")]
    subprocess.run([FLWR, "install", str(fab)], cwd=build, env=env, check=True, timeout=120,
                   capture_output=True)
    (installed,) = (home / "apps").iterdir()
    assert (installed / "LICENSE").is_file() and not (installed / "data").exists()
    for key in ("FLWR_HOME", "PYTHONPATH"):
        monkeypatch.setenv(key, env[key])
    rc = {"outputs": str(tmp_path / "outputs"), "run-name": "fab"}
    launch.simulate(2, rc, app_dir=installed, flwr_home=home, timeout=400)
    result = RunResult.load(tmp_path / "outputs" / "fab")
    assert result.status == "completed", (result.status, result.errors)
    assert result.metrics["clients"] == 2
    shares = {str(k): float(v) for k, v in result.metrics["missing"].items()}
    assert shares["0"] == 0 and 0 < shares["1"] < 0.02  # plant 1's few empty cells: its data
