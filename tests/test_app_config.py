"""One truth: the App's declared run config, each algorithm's settings class and the run-config
path give the same defaults; bad values fail with the key named, before any node is asked."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from fedcausal_flwr.app import drift, foreign_keys, glue, owners, settings_class

APP_CONFIG = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml")
                          .read_text())["tool"]["flwr"]["app"]["config"]
ALGORITHMS = ["fdbnl", "pfdbnl", "fedgc", "fedcf", "fediv", "vfedcd"]


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_settings_defaults_are_the_app_defaults(algorithm):
    assert drift(algorithm, APP_CONFIG) == []
    cls = settings_class(algorithm)
    assert cls.from_run_config(APP_CONFIG) == cls()  # the run-config path adds no default
    strategy = glue(algorithm).strategy(algorithm, APP_CONFIG)  # the App's own path
    assert strategy.settings == cls()


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_the_declared_config_sets_no_key_of_another_algorithm(algorithm):
    assert foreign_keys(algorithm, APP_CONFIG) == []


@pytest.mark.parametrize(("algorithm", "key", "value", "words"), [
    ("fediv", "num-rounds", 7, "read by fdbnl, pfdbnl, not by fediv (did you mean 'iv-rounds'"),
    ("fdbnl", "hidden", 20, "read by vfedcd, not by fdbnl"),
    ("vfedcd", "iv-rounds", 7, "read by fediv, not by vfedcd"),
    ("fedgc", "lambda1", 0.5, "not by fedgc"),
])
def test_a_key_of_another_algorithm_is_refused_not_ignored(tmp_path, algorithm, key, value,
                                                           words):
    import json

    from fedcausal_flwr.server_app import run

    rc = {**APP_CONFIG, "algorithm": algorithm, key: value, "outputs": str(tmp_path),
          "run-name": "r"}
    with pytest.raises(ValueError, match=f"'{key}' = {value}"):
        run(None, rc)  # refused before any node is asked: no grid needed
    status = json.loads((tmp_path / "r" / "result.json").read_text())["status"]
    assert status.startswith("failed") and words in status


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_a_default_changed_in_one_place_is_caught(algorithm):
    cls = settings_class(algorithm)
    key, value = next(iter(cls().run_config().items()))
    changed = {**APP_CONFIG, key: value + 1 if isinstance(value, (int, float))
               and not isinstance(value, bool) else f"{value}x"}
    assert any(repr(key) in line for line in drift(algorithm, changed))
    missing = {k: v for k, v in APP_CONFIG.items() if k != key}
    assert any("not declared" in line for line in drift(algorithm, missing))


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_bad_values_name_the_key_and_what_is_allowed(algorithm):
    cls = settings_class(algorithm)
    fields = cls().run_config()
    for key, value in fields.items():
        if isinstance(value, bool):
            bad, words = "yes", "true or false"
        elif isinstance(value, (int, float)):
            bad, words = "many", "number" if isinstance(value, float) else "integer"
        else:
            bad, words = 3, "string"
        with pytest.raises(ValueError, match=f"'{key}' = .*{words}"):
            glue(algorithm).strategy(algorithm, {**APP_CONFIG, key: bad})


def test_ranges_and_choices_are_enforced():
    s = settings_class("fdbnl")
    with pytest.raises(ValueError, match=r"'lambda-w' = -0.5: must be >= 0"):
        s.from_run_config({"lambda-w": -0.5})
    with pytest.raises(ValueError, match="'lambda-scale' = 'pool'.*'pooled', 'paper'"):
        s.from_run_config({"lambda-scale": "pool"})
    with pytest.raises(ValueError, match="unknown algorithm 'fdbn'"):
        glue("fdbn")


def test_the_app_config_selects_an_existing_algorithm():
    assert APP_CONFIG["algorithm"] in ALGORITHMS


def test_every_declared_key_has_one_source_of_its_default():
    orphans = [key for key in APP_CONFIG if not owners(key)]
    assert orphans == [], f"keys declared in pyproject that no settings/data class owns: {orphans}"


def test_data_keys_fail_before_any_node_is_asked():
    with pytest.raises(ValueError, match="'samples-per-client' = 1: must be >= 2"):
        glue("fdbnl").strategy("fdbnl", {**APP_CONFIG, "samples-per-client": 1})
    with pytest.raises(ValueError, match="'ss-t' = 'long'"):
        glue("fedgc").strategy("fedgc", {**APP_CONFIG, "ss-t": "long"})
    with pytest.raises(ValueError, match="'data' = 'dream5'"):
        glue("fdbnl").strategy("fdbnl", {**APP_CONFIG, "data": "dream5"})
