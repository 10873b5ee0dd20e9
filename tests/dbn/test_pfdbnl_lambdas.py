"""PFDBNL's own L1 weights: their own run-config keys and defaults beside FDBNL's, and FDBNL's
keys refused in a PFDBNL run config (else a user's value would be silently ignored)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from flwr.common.config import flatten_dict

from fedcausal_flwr.appconfig import problems
from fedcausal_flwr.dbn.model import FDBNLSettings, PFDBNLSettings

APP_CONFIG = flatten_dict(tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml")
                                        .read_text())["tool"]["flwr"]["app"]["config"])
KEYS = {"lambda_w": ("dbn.lambda-w", "dbn.pfdbnl-lambda-w"),
        "lambda_a": ("dbn.lambda-a", "dbn.pfdbnl-lambda-a")}


def test_each_algorithm_declares_its_own_lambdas():
    fd, pf = FDBNLSettings(), PFDBNLSettings()
    for name, (fd_key, pf_key) in KEYS.items():
        assert APP_CONFIG[fd_key] == getattr(fd, name) and fd.app_config()[fd_key] == APP_CONFIG[
            fd_key]
        assert APP_CONFIG[pf_key] == getattr(pf, name) and pf_key in pf.app_config()
        assert fd_key not in pf.app_config() and pf_key not in fd.app_config()
    assert pf.lambda_a != fd.lambda_a  # chosen on PFDBNL's own data (pfdbnl_lambda.py)
    assert PFDBNLSettings.from_run_config(APP_CONFIG) == pf  # FDBNL's declared keys pass
    assert PFDBNLSettings.from_run_config({"dbn.pfdbnl-lambda-a": 0.3}).lambda_a == 0.3
    assert PFDBNLSettings.from_run_config({"dbn.pfdbnl-lambda-a": 0.3}).to_wire()[
        "lambda_a"] == 0.3  # the clients read it by field name, as before


@pytest.mark.parametrize("name", list(KEYS))
def test_fdbnl_key_in_a_pfdbnl_run_config_is_refused_naming_pfdbnls(name):
    fd_key, pf_key = KEYS[name]
    bare = fd_key.partition(".")[2]
    for config in ({fd_key: 0.3}, {bare: 0.3}, {**APP_CONFIG, fd_key: 0.3}):
        with pytest.raises(ValueError, match=f"'{fd_key}' = 0.3 .*set '{pf_key}' instead"):
            PFDBNLSettings.from_run_config(config)
    assert FDBNLSettings.from_run_config({fd_key: 0.3}).__getattribute__(name) == 0.3
    said = problems("pfdbnl", {**APP_CONFIG, "algorithm": "pfdbnl", fd_key: 0.3})
    assert said == [f"'{fd_key}' = 0.3 is read by fdbnl, not by pfdbnl (which reads "
                    f"'{pf_key}' instead)"]
    assert problems("fdbnl", {**APP_CONFIG, pf_key: 0.3}) == [
        f"'{pf_key}' = 0.3 is read by pfdbnl, not by fdbnl (whose keys are in section 'dbn')"]


def test_the_app_refuses_the_run_before_any_node_is_asked(tmp_path):
    from fedcausal_flwr.server_app import run

    rc = {**APP_CONFIG, "algorithm": "pfdbnl", "dbn.lambda-a": 0.3, "outputs": str(tmp_path),
          "run-name": "r"}
    with pytest.raises(ValueError, match="'dbn.pfdbnl-lambda-a'"):
        run(None, rc)
    status = json.loads((tmp_path / "r" / "result.json").read_text())["status"]
    assert status.startswith("failed") and "'dbn.pfdbnl-lambda-a'" in status
