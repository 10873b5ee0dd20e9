"""Every strategy is an honest Flower ``Strategy``: the four per-round hooks say why they do
not apply and point to ``start()``; ``start()``'s RunResult gives Flower's ``Result``; the
stop reasons stay importable from the base module and the public exports."""

from __future__ import annotations

import numpy as np
import pytest
from flwr.app import ArrayRecord, ConfigRecord
from flwr.serverapp.strategy import Result, Strategy

from fedcausal_flwr import strategies
from fedcausal_flwr.client_app import app
from fedcausal_flwr.federation import errors
from fedcausal_flwr.federation import strategy as base
from fedcausal_flwr.registry import ALGORITHMS
from tests.helpers.faults import SMALL, run_app

HOOKS = {"configure_train": (1, ArrayRecord(), ConfigRecord(), None),
         "aggregate_train": (1, []),
         "configure_evaluate": (1, ArrayRecord(), ConfigRecord(), None),
         "aggregate_evaluate": (1, [])}


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
@pytest.mark.parametrize("hook", sorted(HOOKS))
def test_flower_round_hooks_say_why_and_point_to_start(algorithm, hook):
    cls = getattr(strategies, ALGORITHMS[algorithm].strategy)
    assert issubclass(cls, Strategy) and not getattr(cls, "__abstractmethods__", None)
    strategy = cls.__new__(cls)  # the hooks need no state; VFedCD's backend stays unloaded
    with pytest.raises(NotImplementedError) as e:
        getattr(strategy, hook)(*HOOKS[hook])
    msg = str(e.value)
    assert f"{cls.__name__}.{hook} does not apply" in msg
    assert f"{cls.__name__}(...).start(grid=grid)" in msg


def test_start_result_gives_flowers_result():
    result = run_app("fdbnl", app, SMALL["fdbnl"][1])
    flower = result.flower_result()
    assert isinstance(flower, Result) and result.status == "completed"
    assert sorted(flower.arrays) == sorted(result.arrays)
    np.testing.assert_array_equal(flower.arrays["W"].numpy(), result.estimates["W"])
    assert sorted(flower.train_metrics_clientapp) == [h["round"] for h in result.history]
    assert flower.evaluate_metrics_clientapp == {}
    assert sorted(flower.evaluate_metrics_serverapp) == sorted(result.evaluations)


@pytest.mark.parametrize("name", ["TooFewReplies", "ProtocolStopped", "Diverged"])
def test_stop_reasons_stay_importable(name):
    assert getattr(base, name) is getattr(strategies, name) is getattr(errors, name)
    assert issubclass(getattr(base, name), base.TooFewReplies)
