"""Adding an algorithm is one family package plus one registry line: ``tests/federation/toymean`` (a
federated mean) runs through the App's own ServerApp and ClientApp, with its own run-config
section, and the public exports find it; no other file is edited."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fedcausal_flwr import registry
from fedcausal_flwr.registry import Algorithm

TOY = Algorithm("toymean", "ToyMean", "toymean", "ToyMean", "ToyClient", "ToySettings",
                "ToyData", "")


@pytest.fixture
def toy():
    registry.add(TOY)
    yield TOY
    registry.remove(TOY.name)


def test_a_seventh_algorithm_runs_through_the_app(toy, tmp_path):
    from toymean.data import client_data
    from toymean.model import ToySettings, reference

    from fedcausal_flwr import server_app
    from fedcausal_flwr.client_app import app
    from fedcausal_flwr.testing import InProcessGrid

    rc = {"algorithm": "toymean", "seed": 2, "toymean.rounds": 4, "toymean.step": 0.5,
          "toymean.d": 2, "min-nodes": 3, "node-wait-s": 5.0, "outputs": str(tmp_path),
          "run-name": "toy"}
    grid = InProcessGrid(app, 3, rc)
    result = server_app.run(grid, rc)
    assert result.status == "completed" and len(result.history) == 4
    xs = [client_data({"seed": 2, "d": 2}, k) for k in range(3)]
    want = reference(xs, ToySettings(rounds=4, step=0.5))
    np.testing.assert_allclose(result.estimates["mu"], want, rtol=0, atol=1e-12)
    saved = json.loads((tmp_path / "toy" / "result.json").read_text())
    assert saved["status"] == "completed" and saved["algorithm"] == "toymean"


def test_its_section_is_checked_and_its_classes_are_exported(toy, tmp_path):
    from fedcausal_flwr import server_app
    from fedcausal_flwr.appconfig import problems
    from fedcausal_flwr.clients import ToyClient
    from fedcausal_flwr.strategies import ToyMean, ToySettings

    assert ToyMean.settings_class is ToySettings and ToyClient.phases == {"means": "means"}
    assert "toymean" in registry.sections()
    assert problems("toymean", {"algorithm": "toymean", "rounds": 2}) == [
        "'rounds' is now 'toymean.rounds' (keys sit in their family's section)"]
    assert any("'dbn.rho1' = 0.5 is read by fdbnl, pfdbnl" in p for p in problems(
        "toymean", {"algorithm": "toymean", "dbn.rho1": 0.5}))
    rc = {"algorithm": "toymean", "toymean.step": 2.0, "outputs": str(tmp_path),
          "run-name": "bad"}
    with pytest.raises(ValueError, match="'toymean.step' = 2.0: must be <= 1"):
        server_app.run(None, rc)


def test_without_its_registry_line_the_app_does_not_know_it(tmp_path):
    from fedcausal_flwr import server_app

    rc = {"algorithm": "toymean", "outputs": str(tmp_path), "run-name": "x"}
    with pytest.raises(ValueError, match="unknown algorithm 'toymean'"):
        server_app.run(None, rc)
