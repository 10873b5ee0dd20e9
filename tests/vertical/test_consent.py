"""VFedCD consent comes from the party (issue 20).

- A party with its own data (node config ``data-path``) takes consent only from its node config
  (or its own ``make()``), never from the run config: the run submitter cannot opt it in to
  ``mock``, the plain modes or small keys; the run stops naming every refusing party.
- Only the App's built-in simulated parties take the run config's ``vertical.vfedcd-accept-*``,
  logged as the run submitter's consent.
- A bad consent value names where it came from: the node config's bare key, the ClientApp's
  argument, or the run config's sectioned key.
- A decode reply without its loss metric stops the run naming the party (not a KeyError).
"""

from __future__ import annotations

import csv
import logging

import numpy as np
import pytest
from flwr.app import Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from fedcausal_flwr.appconfig import glue
from fedcausal_flwr.client_app import app as builtin_app
from fedcausal_flwr.clients import register
from fedcausal_flwr.data import node_data
from fedcausal_flwr.strategies import VFedCD
from fedcausal_flwr.testing import InProcessGrid
from fedcausal_flwr.vertical.client import VFedCDClient
from fedcausal_flwr.vertical.data import party_data
from fedcausal_flwr.vertical.model import PartyConsent
from tests.helpers.faults import SMALL

RC = {**SMALL["vfedcd"][0], "vertical.data": "node", "vertical.parts": "2,2",
      "vertical.num-epochs": 1, "min-nodes": 2, "node-wait-s": 5.0}
BUILTIN = SMALL["vfedcd"][0]  # the built-in synthetic data
# SMALL's run config asks for mock and 256-bit keys and carries the submitter's consent to them
assert RC["vertical.vfedcd-accept-backends"] == "mock"


def own_csvs(tmp_path, **extra) -> dict[int, dict]:
    """Two parties' own CSVs (id, a, b) of one 12 x 4 sample, and their node configs."""
    X = np.random.default_rng(4).standard_normal((12, 4))
    out = {}
    for pid in range(2):
        path = tmp_path / f"p{pid}.csv"
        with open(path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["id", f"a{pid}", f"b{pid}"])
            w.writerows([[str(r), *X[r, 2 * pid:2 * pid + 2]] for r in range(12)])
        out[pid] = {"data-path": str(path), "id-key": "k", **extra}
    return out


def users_node_data_app() -> ClientApp:
    """A user's ClientApp on its node's CSV (as examples/vfedcd does)."""
    return register(ClientApp(), "vfedcd", lambda context: node_data("vfedcd", context))


@pytest.mark.parametrize("app", ["the App's", "a user's"])
def test_own_data_parties_never_take_consent_from_the_run_config(tmp_path, caplog, app):
    client_app = builtin_app if app == "the App's" else users_node_data_app()
    grid = InProcessGrid(client_app, 2, RC, own_csvs(tmp_path))
    with caplog.at_level(logging.WARNING, logger="flwr"):
        result = glue("vfedcd").strategy("vfedcd", RC).start(grid=grid)
    assert result.status.startswith("stopped"), result.status
    for party in ("party 0 refuses", "party 1 refuses"):
        assert party in result.status, result.status
    assert "he-backend 'mock'" in result.status
    assert "never takes consent from the run config" in result.status
    assert {m.metadata.message_type for m in grid.sent} == {"query.info"}
    assert result.estimates == {}
    ignored = [r.getMessage() for r in caplog.records if "is ignored" in r.getMessage()]
    assert sorted(line.split(":")[0] for line in ignored) == ["party 0", "party 1"], ignored
    assert all("vertical.vfedcd-accept-backends='mock'" in line for line in ignored)


def test_own_data_parties_consent_in_their_node_config(tmp_path, caplog):
    grid = InProcessGrid(builtin_app, 2, RC, own_csvs(
        tmp_path, **{"vfedcd-accept-backends": "mock", "vfedcd-min-key-bits": 256}))
    with caplog.at_level(logging.WARNING, logger="flwr"):
        result = glue("vfedcd").strategy("vfedcd", RC).start(grid=grid)
    assert result.status == "completed", result.status
    party = [r.getMessage() for r in caplog.records
             if r.getMessage().startswith("party") and "encrypts nothing" in r.getMessage()]
    assert len(party) == 2 and all("from node config" in p for p in party), party


@pytest.mark.integration
def test_builtin_simulated_parties_take_the_run_config_consent_as_the_submitters(caplog):
    rc = {**SMALL["vfedcd"][0], "vertical.num-epochs": 1}
    with caplog.at_level(logging.WARNING, logger="flwr"):
        result = glue("vfedcd").strategy("vfedcd", rc).start(
            grid=InProcessGrid(builtin_app, 3, rc))
    assert result.status == "completed", result.status
    party = [r.getMessage() for r in caplog.records
             if r.getMessage().startswith("party") and "encrypts nothing" in r.getMessage()]
    assert len(party) == 3, party
    assert all("the run submitter's consent for the App's built-in simulated parties" in p
               for p in party), party
    assert not any("is ignored" in r.getMessage() for r in caplog.records)


# ---- where a bad value came from ---------------------------------------------------------
def _context(**node) -> Context:
    return Context(run_id=1, node_id=1, state=RecordDict(),
                   node_config={"partition-id": 1, "num-partitions": 2, **node}, run_config={})


@pytest.mark.parametrize("key,value,words", [
    ("vfedcd-accept-modes", "plain", "unknown 'plain'"),
    ("vfedcd-accept-backends", "rsa", "unknown 'rsa'"),
    ("vfedcd-min-key-bits", 100, "must be >= 256"),
])
def test_a_bad_node_config_consent_value_names_the_node_config_key(key, value, words):
    with pytest.raises(ValueError) as e:
        VFedCDClient(np.zeros((4, 2)), np.array([0, 1]), np.arange(4), partition_id=1,
                     context=_context(**{key: value}))
    msg = str(e.value)
    assert msg.startswith("party 1: bad consent setting"), msg
    assert f"node config {key!r} = {value!r}: {words}" in msg, msg
    assert "vertical." not in msg, msg


def test_a_bad_node_config_consent_value_stops_the_run_naming_it():
    def make(context: Context) -> dict:
        x, _, cols = party_data(BUILTIN, context.node_config["partition-id"], 2)
        return {"x": x, "columns": cols, "sample_ids": np.arange(len(x))}

    grid = InProcessGrid(register(ClientApp(), "vfedcd", make), 2,
                         node_configs={1: {"vfedcd-accept-modes": "plain"}})
    result = VFedCD(batch=8).start(grid=grid)
    assert "party 1: bad consent setting" in result.status, result.status
    assert "node config 'vfedcd-accept-modes' = 'plain'" in result.status, result.status
    assert "vertical.vfedcd-accept-modes" not in result.status


def test_bad_consent_arguments_and_run_config_keys_name_their_source():
    with pytest.raises(ValueError, match=r"accept_backends \(from the ClientApp's arguments\) "
                                         r"= 'rsa'"):
        VFedCDClient(np.zeros((4, 2)), np.array([0, 1]), np.arange(4), accept_backends="rsa")
    with pytest.raises(ValueError, match=r"'vertical.vfedcd-accept-backends' = 'rsa'"):
        PartyConsent.from_run_config({"vertical.vfedcd-accept-backends": "rsa"})
    with pytest.raises(ValueError, match=r"run config 'vertical.vfedcd-min-key-bits' = 100"):
        PartyConsent.from_run_config({"vertical.vfedcd-min-key-bits": 100})


# ---- a reply without its metrics --------------------------------------------------------
def _without_loss(app, how: str):
    """Party 1's decode replies lose their metrics record (or their loss, or carry a NaN)."""
    def call(msg: Message, context: Context) -> Message:
        reply = app(msg, context)
        if msg.metadata.message_type.endswith("decode") and not reply.has_error() \
                and context.node_config["partition-id"] == 1:
            content = RecordDict({"arrays": reply.content["arrays"]})
            if how != "no record":
                metrics = dict(reply.content["metrics"])
                if how == "no loss":
                    del metrics["loss"]
                else:
                    metrics["loss"] = float("nan")
                content["metrics"] = MetricRecord(metrics)
            reply = Message(content, reply_to=msg)
        return reply
    return call


@pytest.mark.parametrize("mode,how,words", [
    ("vfedcd", "no record", "reply without its metrics record"),
    ("vfedcd", "no loss", "reply without the metric 'loss'"),
    ("vfedcd", "nan", "metric 'loss' = nan is not a finite number"),
    ("framework", "no record", "reply without its metrics record"),
])
def test_a_decode_reply_without_its_loss_stops_the_run_naming_the_party(mode, how, words):
    def make(context: Context) -> dict:
        x, _, cols = party_data(BUILTIN, context.node_config["partition-id"], 2)
        return {"x": x, "columns": cols, "sample_ids": np.arange(len(x)),
                "accept_backends": "mock", "accept_modes": mode}

    grid = InProcessGrid(_without_loss(register(ClientApp(), "vfedcd", make), how), 2)
    result = VFedCD(batch=8, he_backend="mock", mode=mode).start(grid=grid, num_rounds=1)
    assert result.status.startswith("stopped"), result.status
    phase = "vfedcd_decode" if mode == "vfedcd" else "vfedcd_plain_decode"
    assert f"client 1 failed in phase {phase}: {words}" in result.status, result.status
    assert "KeyError" not in result.status and result.estimates == {}
