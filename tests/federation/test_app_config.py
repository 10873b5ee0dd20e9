"""One truth: the App's declared run config, each algorithm's settings class and the run-config
path give the same defaults; the run config is sectioned per family; bad values and misplaced
keys fail with the key named, before any node is asked."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from flwr.common.config import flatten_dict

from fedcausal_flwr import registry
from fedcausal_flwr.appconfig import declared, drift, glue, problems, settings_class, view

APP_CONFIG = flatten_dict(tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml")
                                        .read_text())["tool"]["flwr"]["app"]["config"])
ALGORITHMS = list(registry.ALGORITHMS)


def app_strategy(algorithm, rc):
    """The strategy the App's ServerApp builds from a (sectioned) run config."""
    return glue(algorithm).strategy(algorithm, view(algorithm, rc))


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_settings_defaults_are_the_app_defaults(algorithm):
    assert drift(algorithm, APP_CONFIG) == []
    cls = settings_class(algorithm)
    assert cls.from_run_config(APP_CONFIG) == cls()  # the run-config path adds no default
    assert app_strategy(algorithm, APP_CONFIG).settings == cls()  # the App's own path


def test_the_declared_config_is_every_class_default_and_nothing_else():
    extra = {"statespace.data-path"}  # a JSON file of the family's model-specific data keys
    assert set(APP_CONFIG) - set(declared()) == set()
    assert set(declared()) - set(APP_CONFIG) - extra <= {
        f"statespace.{k}" for k in ("ss-u", "ss-d", "ss-q", "ss-r", "ss-shift-scale")}


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_every_family_key_is_in_its_section(algorithm):
    section = registry.get(algorithm).section
    for cls in (settings_class(algorithm), registry.get(algorithm).data_class()):
        assert cls.section == section
        for key in cls().app_config():
            assert key.startswith(section + ".") or "." not in key


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_the_declared_config_has_no_problem_for_any_algorithm(algorithm):
    assert problems(algorithm, {**APP_CONFIG, "algorithm": algorithm}) == []


@pytest.mark.parametrize(("algorithm", "key", "value", "words"), [
    ("fediv", "dbn.num-rounds", 7, "read by fdbnl, pfdbnl, not by fediv"),
    ("fdbnl", "vertical.hidden", 20, "read by vfedcd, not by fdbnl"),
    ("vfedcd", "iv.iv-rounds", 7, "read by fediv, not by vfedcd"),
    ("fedgc", "statespace.ss-xi", 0.5, "read by fedcf, not by fedgc"),
    ("fdbnl", "dbn.lamda-w", 0.5, "not a key of section 'dbn' (did you mean 'dbn.lambda-w'"),
    ("fdbnl", "lambda-w", 0.5, "'lambda-w' is now 'dbn.lambda-w'"),
    ("fediv", "iv-rounds", 7, "'iv-rounds' is now 'iv.iv-rounds'"),
    ("vfedcd", "d", 7, "'d' is now 'vertical.d'"),
    ("fdbnl", "nope.x", 1, "no section 'nope'"),
])
def test_a_misplaced_key_is_refused_naming_it(tmp_path, algorithm, key, value, words):
    from fedcausal_flwr.server_app import run

    rc = {**APP_CONFIG, "algorithm": algorithm, key: value, "outputs": str(tmp_path),
          "run-name": "r"}
    with pytest.raises(ValueError, match=f"'{key}'"):
        run(None, rc)  # refused before any node is asked: no grid needed
    status = json.loads((tmp_path / "r" / "result.json").read_text())["status"]
    assert status.startswith("failed") and words in status


def test_an_old_flat_key_names_its_section_in_a_users_settings():
    cls = settings_class("pfdbnl")
    with pytest.raises(ValueError, match="'mu' is now 'dbn.mu'"):
        cls.from_run_config({"dbn.lambda-w": 0.1, "mu": 0.3})
    assert cls.from_run_config({"dbn.mu": 0.3, "seed": 2}).mu == 0.3


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_a_default_changed_in_one_place_is_caught(algorithm):
    cls = settings_class(algorithm)
    key, value = next((k, v) for k, v in cls().app_config().items() if "." in k)
    changed = {**APP_CONFIG, key: value + 1 if isinstance(value, (int, float))
               and not isinstance(value, bool) else f"{value}x"}
    assert any(repr(key) in line for line in drift(algorithm, changed))
    missing = {k: v for k, v in APP_CONFIG.items() if k != key}
    assert any("not declared" in line for line in drift(algorithm, missing))


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_bad_values_name_the_key_and_what_is_allowed(algorithm):
    cls = settings_class(algorithm)
    for key, value in cls().app_config().items():
        if isinstance(value, bool):
            bad, words = "yes", "true or false"
        elif isinstance(value, (int, float)):
            bad, words = "many", "number" if isinstance(value, float) else "integer"
        else:
            bad, words = 3, "string"
        with pytest.raises(ValueError, match=f"'{key}' = .*{words}"):
            app_strategy(algorithm, {**APP_CONFIG, key: bad})


def test_ranges_and_choices_are_enforced():
    s = settings_class("fdbnl")
    with pytest.raises(ValueError, match=r"'dbn.lambda-w' = -0.5: must be >= 0"):
        s.from_run_config({"dbn.lambda-w": -0.5})
    with pytest.raises(ValueError, match="'dbn.lambda-scale' = 'pool'.*'pooled', 'paper'"):
        s.from_run_config({"lambda-scale": "pool"})  # a section's own view reads alike
    with pytest.raises(ValueError, match="unknown algorithm 'fdbn'"):
        glue("fdbn")


def test_the_app_config_selects_an_existing_algorithm():
    assert APP_CONFIG["algorithm"] in ALGORITHMS


def test_data_keys_fail_before_any_node_is_asked():
    with pytest.raises(ValueError, match="'dbn.samples-per-client' = 1: must be >= 2"):
        app_strategy("fdbnl", {**APP_CONFIG, "dbn.samples-per-client": 1})
    with pytest.raises(ValueError, match="'statespace.ss-t' = 'long'"):
        app_strategy("fedgc", {**APP_CONFIG, "statespace.ss-t": "long"})
    with pytest.raises(ValueError, match="'dbn.data' = 'dream5'"):
        app_strategy("fdbnl", {**APP_CONFIG, "dbn.data": "dream5"})
