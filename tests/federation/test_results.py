"""The result contract: result.json round-trips, non-finite numbers become null, plots exist."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fedcausal_flwr.cli.launch import parse_run_config, run_config_arg
from fedcausal_flwr.results import RunResult, load_result
from fedcausal_flwr.server_app import save_with_plots


def test_result_json_round_trip_and_plots(tmp_path):
    W = np.array([[0.0, 0.5], [0.0, 0.0]])
    r = RunResult("fdbnl", {"lambda": np.float64(0.1)}, metrics={"shd": np.int64(1)},
                  history=[{"round": 1, "h": np.nan, "loss": 2.0},
                           {"round": 2, "h": 1e-3, "loss": 1.0}],
                  estimates={"W": W, "A": W.T}, truth={"W": W}, timing={"wall_s": 1.5})
    save_with_plots(r, tmp_path)
    doc = load_result(tmp_path)
    assert set(doc) >= {"algorithm", "config", "metrics", "history", "estimates", "timing"}
    assert doc["history"][0]["h"] is None  # NaN is not valid JSON; it becomes null
    assert doc["estimates"]["W"] == W.tolist() and doc["metrics"]["shd"] == 1
    json.loads((tmp_path / "result.json").read_text())  # strict JSON
    assert (tmp_path / "graphs.png").stat().st_size > 1000
    assert (tmp_path / "history.png").stat().st_size > 1000


def test_a_users_result_saves_the_apps_pictures_with_one_call(tmp_path):
    """``result.save(dir, plots=True)`` (a user's own ServerApp) writes what the App writes:
    result.json, graphs.png and history.png; without ``plots`` only result.json."""
    W = np.array([[0.0, 0.5], [0.3, 0.0]])
    r = RunResult("fdbnl", {}, history=[{"round": 1, "h": 0.1}, {"round": 2, "h": 0.01}],
                  estimates={"W": W, "A": W})
    assert r.save(tmp_path / "plain") == tmp_path / "plain" / "result.json"
    assert sorted(p.name for p in (tmp_path / "plain").iterdir()) == ["result.json"]
    path = r.save(tmp_path / "pics", plots=True)
    assert path == tmp_path / "pics" / "result.json" and load_result(path)["errors"] == []
    assert sorted(p.name for p in (tmp_path / "pics").iterdir()) == [
        "graphs.png", "history.png", "result.json"]


def test_a_failing_plot_never_loses_a_users_result(tmp_path, monkeypatch):
    import fedcausal_flwr.plots as plots

    seen = []

    def broken(*args, **kwargs):
        seen.append((tmp_path / "result.json").exists())  # result.json is written first
        raise RuntimeError("no display")

    monkeypatch.setattr(plots, "plot_history", broken)
    r = RunResult("fdbnl", {}, history=[{"round": 1, "h": 0.1}],
                  estimates={"W": np.eye(2), "A": np.eye(2)})
    r.save(tmp_path, plots=True)
    assert seen == [True] and (tmp_path / "graphs.png").exists()
    doc = load_result(tmp_path)
    assert doc["status"] == "completed" and doc["estimates"]["W"] == [[1.0, 0.0], [0.0, 1.0]]
    assert doc["errors"] == ["plot history.png: RuntimeError: no display"]


def test_run_config_argument_round_trips(tmp_path):
    cfg = {"algorithm": "pfdbnl", "num-rounds": 5, "lambda-w": 0.05, "heterogeneous": True,
           "run-name": 'a "quoted" name'}
    assert parse_run_config(run_config_arg(cfg)) == cfg
    out = parse_run_config(run_config_arg({"outputs": "rel/dir"}))["outputs"]
    assert out.startswith("/") and out.endswith("rel/dir")


@pytest.mark.integration
@pytest.mark.parametrize("algorithm", ["fdbnl", "fedgc", "fediv", "vfedcd"])
def test_a_run_counts_its_round_trips(algorithm):
    """``timing["exchanges"]``: every train exchange after discovery (one message per node
    each, in the in-process grid), and per round in the history: what a deployment pays for."""
    from fedcausal_flwr.appconfig import glue
    from fedcausal_flwr.client_app import app
    from fedcausal_flwr.testing import InProcessGrid
    from tests.helpers.faults import SMALL

    rc, k = SMALL[algorithm]
    grid = InProcessGrid(app, k, rc)
    result = glue(algorithm).strategy(algorithm, rc).start(grid=grid)
    train = [m for m in grid.sent if m.metadata.message_type.startswith("train.")]
    assert result.status == "completed"
    assert result.timing["exchanges"] == len(train) // k > 0
    assert sum(h["exchanges"] for h in result.history) <= result.timing["exchanges"]
    assert all(h["exchanges"] >= 1 for h in result.history)
