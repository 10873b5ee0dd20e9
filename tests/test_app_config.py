"""The App's declared run config (pyproject) agrees with each algorithm's code defaults.

`flwr run --run-config` only accepts declared keys, so every algorithm's keys are declared in
pyproject.toml; these tests keep the two sources of defaults from drifting apart.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

APP_CONFIG = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml")
                          .read_text())["tool"]["flwr"]["app"]["config"]


def declared_defaults(module: str, name: str) -> dict:
    return getattr(__import__(module, fromlist=[name]), name)


@pytest.mark.parametrize("module,name,all_declared", [
    ("fedcausal_flwr.strategies.fediv", "RUN_CONFIG_DEFAULTS", True),
    ("fedcausal_flwr.data.statespace", "DEFAULTS", False),
    ("fedcausal_flwr.strategies.vfedcd", "RUN_CONFIG_DEFAULTS", True),
])
def test_code_defaults_match_the_app_config(module, name, all_declared):
    defaults = declared_defaults(module, name)
    for key, value in defaults.items():
        if all_declared:
            assert key in APP_CONFIG, f"{key} is not declared in pyproject.toml"
        if key in APP_CONFIG:
            assert APP_CONFIG[key] == value, f"{key}: pyproject {APP_CONFIG[key]!r} != {value!r}"


def test_the_app_config_selects_an_existing_algorithm():
    from importlib import import_module

    algo = APP_CONFIG["algorithm"]
    assert hasattr(import_module(f"fedcausal_flwr.strategies.{algo}"), "from_run_config")
    assert hasattr(import_module(f"fedcausal_flwr.clients.{algo}"), "from_context")
