"""Issue 11, item 8: VFedCD's security defaults.

- Paillier keys below 2048 bits are refused unless ``insecure-test-keys`` (tests only).
- Each party accepts only what its consent covers (node config ``vfedcd-accept-backends``,
  ``vfedcd-accept-modes``, ``vfedcd-min-key-bits``; secure only by default) and refuses a server
  that asks for more, naming itself, what was asked and what it accepts; the run stops naming it.
- A WARNING on the server and on each party, once per run, wherever data would cross the wire
  unprotected (mock backend, plain modes, test keys).
"""

from __future__ import annotations

import logging
import tomllib
from pathlib import Path

import numpy as np
import pytest
from flwr.app import ConfigRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.common.config import flatten_dict

from fedcausal_flwr.appconfig import glue
from fedcausal_flwr.client_app import app as builtin_app
from fedcausal_flwr.client_app import handle
from fedcausal_flwr.clients import register
from fedcausal_flwr.strategies import VFedCD
from fedcausal_flwr.testing import InProcessGrid
from fedcausal_flwr.vertical.client import VFedCDClient
from fedcausal_flwr.vertical.data import party_data
from fedcausal_flwr.vertical.model import MIN_KEY_BITS, PartyConsent, VFedCDSettings

APP_CONFIG = flatten_dict(tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml")
                          .read_text())["tool"]["flwr"]["app"]["config"])
DATA = {"algorithm": "vfedcd", "vertical.d": 6, "vertical.edges": 8, "vertical.n": 20,
        "vertical.batch": 8, "node-wait-s": 5.0,
        "seed": 4}
EVERYTHING = {"vertical.vfedcd-accept-backends": "paillier,paillier-packed,mock",
              "vertical.vfedcd-accept-modes": "vfedcd,ctv,framework",
            "vertical.vfedcd-min-key-bits": 256}


def users_app(**consent) -> ClientApp:
    """A user's own ClientApp: one register call, the party's data and (optionally) its
    consent as constructor arguments."""
    def make(context: Context) -> dict:
        x, _, cols = party_data(DATA, context.node_config["partition-id"],
                                context.node_config["num-partitions"])
        return {"x": x, "columns": cols, "sample_ids": np.arange(len(x)), **consent}

    return register(ClientApp(), "vfedcd", make)


def phases_sent(grid: InProcessGrid) -> set[str]:
    return {m.metadata.message_type for m in grid.sent}


# ---- keys ------------------------------------------------------------------------------
@pytest.mark.parametrize("bits", [256, 512, 1024, 2047])
def test_keys_below_2048_bits_are_refused_without_the_test_only_setting(bits):
    with pytest.raises(ValueError) as e:
        glue("vfedcd").strategy("vfedcd", {**APP_CONFIG, "algorithm": "vfedcd",
                                           "vertical.key-bits": bits})
    msg = str(e.value)
    assert f"'vertical.key-bits' = {bits}" in msg and str(MIN_KEY_BITS) in msg
    assert "'vertical.insecure-test-keys'" in msg
    with pytest.raises(ValueError, match="'vertical.key-bits'"):
        VFedCD(key_bits=bits)
    s = glue("vfedcd").strategy("vfedcd", {**APP_CONFIG, "algorithm": "vfedcd",
                                           "vertical.key-bits": bits,
                                           "vertical.insecure-test-keys": True})
    assert s.settings.key_bits == bits
    assert VFedCDSettings(key_bits=MIN_KEY_BITS).key_bits == MIN_KEY_BITS
    assert VFedCDSettings().insecure_test_keys is False


def test_the_test_only_setting_travels_to_the_parties():
    s = VFedCDSettings(key_bits=256, insecure_test_keys=True)
    assert s.to_wire()["insecure_test_keys"] is True
    assert VFedCDSettings.from_wire(s.to_wire()) == VFedCDSettings(**s.to_wire())


# ---- consent ---------------------------------------------------------------------------
def test_consent_is_secure_only_by_default_and_validated():
    c = PartyConsent()
    assert c.accepted_backends == ("paillier", "paillier-packed")
    assert c.accepted_modes == ("vfedcd",) and c.min_key_bits == 2048
    assert c.refusals(VFedCDSettings()) == []
    assert c.refusals(VFedCDSettings(he_backend="paillier-packed")) == []
    assert c.refusals(VFedCDSettings(he_backend="mock"))
    assert c.refusals(VFedCDSettings(mode="ctv"))
    assert c.refusals(VFedCDSettings(key_bits=512, insecure_test_keys=True))
    # the plain modes use no encryption: only the mode needs consent
    assert PartyConsent(modes="framework").refusals(
        VFedCDSettings(mode="framework", he_backend="mock")) == []
    for key, bad in (("vfedcd-accept-backends", "rsa"), ("vfedcd-accept-modes", "plain"),
                     ("vfedcd-accept-backends", " , ")):
        with pytest.raises(ValueError, match=f"'vertical.{key}' = '{bad}'.*allowed"):
            PartyConsent.from_run_config({key: bad})
    with pytest.raises(ValueError, match="'vertical.vfedcd-min-key-bits' = 128"):
        glue("vfedcd").strategy("vfedcd", {**APP_CONFIG, "vertical.vfedcd-min-key-bits": 128})


@pytest.mark.parametrize("changes,words", [
    ({"he_backend": "mock"}, ["he-backend 'mock'", "'paillier,paillier-packed'",
                              "vfedcd-accept-backends"]),
    ({"mode": "framework"}, ["mode 'framework'", "'vfedcd'", "vfedcd-accept-modes"]),
    ({"mode": "ctv"}, ["mode 'ctv'", "'vfedcd'", "vfedcd-accept-modes"]),
    ({"key_bits": 256, "insecure_test_keys": True},
     ["key-bits 256", "minimum 2048", "vfedcd-min-key-bits"]),
])
def test_a_party_refuses_by_default_and_the_run_stops_naming_every_party(changes, words):
    grid = InProcessGrid(users_app(), 3)
    result = VFedCD(batch=8, **changes).start(grid=grid)
    assert result.status.startswith("stopped"), result.status
    for w in ["party 0 refuses", "party 1 refuses", "party 2 refuses", *words]:
        assert w in result.status, result.status
    # refused at discovery, before any key was made or any data-derived message sent
    assert phases_sent(grid) == {"query.info"}
    assert result.estimates == {}


def strip_consent(app):
    """A party that does not report its consent at discovery (an older or a custom client):
    the server cannot tell in advance, the party still refuses in its first phase."""
    def call(msg: Message, context: Context) -> Message:
        reply = app(msg, context)
        if msg.metadata.message_type == "query.info":
            props = {k: v for k, v in reply.content["properties"].items()
                     if not k.startswith(("accept-", "min-key-bits"))}
            reply = Message(RecordDict({"properties": ConfigRecord(props)}), reply_to=msg)
        return reply
    return call


@pytest.mark.parametrize("mode,phase", [("vfedcd", "vfedcd_keys"),
                                        ("framework", "vfedcd_plain_setup")])
def test_the_party_itself_refuses_in_its_first_phase(mode, phase):
    grid = InProcessGrid(strip_consent(users_app()), 3)
    result = VFedCD(batch=8, he_backend="mock", mode=mode).start(grid=grid)
    assert result.status.startswith("stopped"), result.status
    assert f"client 0 failed in phase {phase}" in result.status
    assert "party 0 refuses the server's settings" in result.status
    errors = [m for m in grid.received if m.has_error()]
    assert len(errors) == 3 and all("refuses the server's settings" in m.error.reason
                                    for m in errors)
    assert all(m.has_error() for m in grid.received  # no party sent anything
               if m.metadata.message_type == f"train.{phase}")


def test_a_party_refuses_directly_naming_what_was_asked_and_what_it_accepts():
    x = np.zeros((4, 2))
    client = VFedCDClient(x, np.array([0, 1]), np.arange(4), partition_id=1, num_partitions=2)
    cfg = {**VFedCDSettings(he_backend="mock").to_wire(), "sizes": "2,2", "index": 1,
           "phase": "vfedcd_keys"}
    with pytest.raises(ValueError) as e:
        client.fit([], cfg)
    assert str(e.value) == ("party 1 refuses the server's settings: he-backend 'mock' is not "
                            "among the accepted backends 'paillier,paillier-packed' "
                            "('vfedcd-accept-backends')")
    assert client.get_properties({})["accept-backends"] == "paillier,paillier-packed"


def test_consent_in_the_node_config_opts_in_and_wins_over_the_clientapps_arguments():
    # node config opts in (a user's ClientApp that says nothing itself)
    grid = InProcessGrid(users_app(), 3, node_configs={
        i: {"vfedcd-accept-backends": "mock"} for i in range(3)})
    assert VFedCD(batch=8, he_backend="mock").start(grid=grid, num_rounds=1).status == \
        "completed"
    # the ClientApp's code opts in; party 2's node config narrows it again and wins
    grid = InProcessGrid(users_app(accept_backends=("paillier", "mock")), 3, node_configs={
        2: {"vfedcd-accept-backends": "paillier"}})
    result = VFedCD(batch=8, he_backend="mock").start(grid=grid, num_rounds=1)
    assert result.status.startswith("stopped") and "party 2 refuses" in result.status
    assert "party 0" not in result.status and "party 1" not in result.status
    # a bad node-config value names the party and where it came from
    grid = InProcessGrid(users_app(), 2,
                         node_configs={1: {"vfedcd-accept-modes": "plain"}})
    result = VFedCD(batch=8).start(grid=grid)
    assert "party 1: bad consent setting" in result.status
    assert "vfedcd-accept-modes from node config" in result.status


def test_the_builtin_app_takes_missing_node_config_consent_from_the_run_config():
    rc = {**APP_CONFIG, **DATA, "vertical.num-epochs": 1, "vertical.he-backend": "mock"}
    # the declared defaults: secure only, so mock is refused
    result = glue("vfedcd").strategy("vfedcd", rc).start(grid=InProcessGrid(builtin_app, 3, rc))
    assert result.status.startswith("stopped") and "party 0 refuses" in result.status
    # the run submitter opts the simulated parties in; party 1's node config still refuses
    rc = {**rc, **EVERYTHING}
    grid = InProcessGrid(builtin_app, 3, rc, node_configs={
        1: {"vfedcd-accept-backends": "paillier"}})
    result = glue("vfedcd").strategy("vfedcd", rc).start(grid=grid)
    assert result.status.startswith("stopped") and "party 1 refuses" in result.status
    assert "party 0" not in result.status and "party 2" not in result.status
    result = glue("vfedcd").strategy("vfedcd", rc).start(grid=InProcessGrid(builtin_app, 3, rc))
    assert result.status == "completed"


# ---- warnings --------------------------------------------------------------------------
@pytest.mark.integration
@pytest.mark.parametrize("changes,words", [
    ({"vertical.he-backend": "mock"}, "encrypts nothing"),
    ({"vertical.mode": "framework"}, "in the clear"),
    ({"vertical.mode": "ctv"}, "in the clear"),
    ({"vertical.he-backend": "paillier", "vertical.key-bits": 256,
      "vertical.insecure-test-keys": True}, "test-only"),
])
def test_unprotected_data_is_logged_once_per_run_on_the_server_and_each_party(
        caplog, changes, words):
    rc = {**APP_CONFIG, **DATA, **EVERYTHING, "vertical.num-epochs": 2, **changes}
    with caplog.at_level(logging.WARNING, logger="flwr"):
        result = glue("vfedcd").strategy("vfedcd", rc).start(
            grid=InProcessGrid(builtin_app, 3, rc))
    assert result.status == "completed" and len(result.history) == 2
    lines = [r.getMessage() for r in caplog.records
             if r.levelno == logging.WARNING and words in r.getMessage()]
    assert sorted(line.split(":")[0] for line in lines) == \
        ["VFedCD", "party 0", "party 1", "party 2"], lines
    party = [line for line in lines if line.startswith("party")]
    assert all("the run submitter's consent" in line for line in party), party


def test_a_secure_run_logs_no_exposure():
    assert VFedCDSettings().exposure() == []
    assert VFedCDSettings(he_backend="paillier-packed").exposure() == []


def test_the_party_log_names_the_node_config_when_it_gave_consent(caplog):
    grid = InProcessGrid(users_app(), 2, node_configs={
        i: {"vfedcd-accept-modes": "framework"} for i in range(2)})
    with caplog.at_level(logging.WARNING, logger="flwr"):
        result = VFedCD(batch=8, mode="framework").start(grid=grid, num_rounds=1)
    assert result.status == "completed"
    party = [r.getMessage() for r in caplog.records if r.getMessage().startswith("party")]
    assert len(party) == 2 and all("'vfedcd-accept-modes' from node config" in p
                                   for p in party), party


def test_the_app_client_glue_reads_consent_only_for_missing_node_config_keys():
    ctx = Context(run_id=1, node_id=1, state=RecordDict(),
                  node_config={"partition-id": 0, "num-partitions": 2,
                               "vfedcd-min-key-bits": 4096},
                  run_config={**APP_CONFIG, **DATA, **EVERYTHING})
    client = glue("vfedcd").client("vfedcd", ctx)
    assert client.consent == PartyConsent(backends=EVERYTHING["vertical.vfedcd-accept-backends"],
                                          modes=EVERYTHING["vertical.vfedcd-accept-modes"],
                                          min_key_bits=4096)
    assert client.consent_from["vfedcd-min-key-bits"] == "node config"
    assert "run submitter" in client.consent_from["vfedcd-accept-backends"]
    assert handle  # the App's handler builds exactly this client per message
