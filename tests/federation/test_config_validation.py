"""Issue 11, item 6: every bad run-config value that the fault probe found is refused up front,
through the App's own path (``glue(algorithm).strategy(algorithm, run_config)``, before any node
is contacted), with a ValueError that names the key, the value and what is allowed.

The run config is the App's declared ``[tool.flwr.app.config]`` with one key changed, exactly
what ``flwr run --run-config 'key=value'`` hands the ServerApp.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from flwr.common.config import flatten_dict

from fedcausal_flwr import registry
from fedcausal_flwr.appconfig import glue
from fedcausal_flwr.settings import SHARED_KEYS

APP_CONFIG = flatten_dict(tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml")
                          .read_text())["tool"]["flwr"]["app"]["config"])
ALL = ("fdbnl", "pfdbnl", "fedgc", "fedcf", "fediv", "vfedcd")
DBN = ("fdbnl", "pfdbnl")
SS = ("fedgc", "fedcf")

# (algorithms that read the key, key, bad value, what the message must say is allowed)
CASES = [
    # tracebacks without the key name in the probe
    (("fdbnl",), "lambda-w", "abc", "float >= 0"),
    (("pfdbnl",), "pfdbnl-lambda-w", "abc", "float >= 0"),
    (("fediv",), "iv-lr-g", "x", "float > 0"),
    (DBN, "lags", 0, "int >= 1"),
    ((*DBN, "vfedcd"), "d", 0, "int >= 1"),
    (DBN, "heterogeneous", "maybe", "true, false"),
    (("vfedcd",), "batch", 0, "int >= 1"),
    (("fediv",), "iv-batch-size", 0, "int >= 1"),
    (SS, "ss-window", 0, "int >= 1"),
    (DBN, "lambda-scale", "bogus", "'pooled', 'paper'"),
    (DBN, "dual-update", "bogus", "'paper', 'code'"),
    # accepted silently in the probe
    (DBN, "num-rounds", 0, "int >= 1"),
    (DBN, "num-rounds", -5, "int >= 1"),
    (("fediv",), "iv-rounds", 0, "int >= 1"),
    (("fediv",), "iv-rounds", -5, "int >= 1"),
    (("vfedcd",), "num-epochs", -1, "int >= 1"),
    (("vfedcd",), "num-epochs", 0, "int >= 1"),
    (SS, "ss-epochs", 0, "int >= 1"),
    (("fediv",), "iv-local-epochs", -1, "int >= 1"),
    (DBN, "tau-w", -0.1, "float >= 0"),
    (DBN, "tau-a", -0.1, "float >= 0"),
    (("vfedcd",), "tau", -0.1, "float >= 0"),
    (("vfedcd",), "dag-tol", -0.1, "float >= 0"),
    (("fdbnl",), "lambda-w", -0.5, "float >= 0"),
    (("fdbnl",), "lambda-a", -0.5, "float >= 0"),
    (("pfdbnl",), "pfdbnl-lambda-w", -0.5, "float >= 0"),
    (("pfdbnl",), "pfdbnl-lambda-a", -0.5, "float >= 0"),
    (("pfdbnl",), "mu", -0.5, "float >= 0"),
    (SS, "ss-lambda-g", -1.0, "float >= 0"),
    (SS, "ss-lambda-l", -1.0, "float >= 0"),
    (("fedcf",), "ss-xi", -1.0, "float >= 0"),
    (("vfedcd",), "lambda1", -1e-3, "float >= 0"),
    (("vfedcd",), "lambda-b", -1e-3, "float >= 0"),
    (("vfedcd",), "l2", -1e-3, "float >= 0"),
    (DBN, "rho1", 0.0, "float > 0"),
    (DBN, "rho2", 0.0, "float > 0"),
    (ALL, "min-nodes", 0, "int >= 1"),
    (ALL, "round-timeout-s", 0.0, "float > 0"),
    (ALL, "round-timeout-s", -1.0, "float > 0"),
    (ALL, "node-wait-s", 0.0, "float > 0"),
    # item 8: VFedCD's security settings
    (("vfedcd",), "key-bits", 1024, "int >= 2048"),
    (("vfedcd",), "key-bits", 128, "int >= 256"),
    (("vfedcd",), "he-backend", "rsa", "'paillier', 'paillier-packed', 'mock'"),
    (("vfedcd",), "mode", "plain", "'framework', 'ctv', 'vfedcd'"),
    (("vfedcd",), "vfedcd-accept-backends", "rsa", "'paillier', 'paillier-packed', 'mock'"),
    (("vfedcd",), "vfedcd-accept-modes", "plain", "'framework', 'ctv', 'vfedcd'"),
    (("vfedcd",), "vfedcd-min-key-bits", 128, "int >= 256"),
]


@pytest.mark.parametrize("algorithm,key,value,allowed", [
    pytest.param(a, key, value, allowed, id=f"{a}-{key}={value}")
    for algorithms, key, value, allowed in CASES for a in algorithms])
def test_a_bad_value_is_refused_naming_key_value_and_allowed(algorithm, key, value, allowed):
    key = key if key in SHARED_KEYS else f"{registry.get(algorithm).section}.{key}"
    rc = {**APP_CONFIG, "algorithm": algorithm, key: value}
    with pytest.raises(ValueError) as e:
        glue(algorithm).strategy(algorithm, rc)
    msg = str(e.value)
    assert f"'{key}'" in msg, msg
    assert repr(value) in msg, msg
    assert allowed in msg, msg


@pytest.mark.parametrize("algorithm", ALL)
def test_the_declared_app_config_itself_is_accepted(algorithm):
    """The cases above fail because of their one key, not because the base is wrong."""
    glue(algorithm).strategy(algorithm, {**APP_CONFIG, "algorithm": algorithm})


def test_a_config_seen_again_gives_its_settings_again_and_a_bad_one_fails_every_time():
    """``from_run_config`` keeps the settings of a config it parsed (a client process reads the
    same run config per message); the value's type is part of the key, and a refused config
    is refused again."""
    from fedcausal_flwr.strategies import FDBNLSettings

    a = FDBNLSettings.from_run_config({"dbn.lambda-w": 0.05, "dbn.num-rounds": 7})
    assert FDBNLSettings.from_run_config({"dbn.num-rounds": 7, "dbn.lambda-w": 0.05}) is a
    assert FDBNLSettings.from_run_config({"dbn.lambda-w": 0.05, "dbn.num-rounds": 7},
                                         max_rounds=8).max_rounds == 8
    assert a.max_rounds == 7
    for _ in range(2):
        with pytest.raises(ValueError, match="num-rounds"):
            FDBNLSettings.from_run_config({"dbn.num-rounds": "seven"})
    with pytest.raises(ValueError, match="num-rounds"):  # True is not 1 for an integer key
        FDBNLSettings.from_run_config({"dbn.lambda-w": 0.05, "dbn.num-rounds": True})
