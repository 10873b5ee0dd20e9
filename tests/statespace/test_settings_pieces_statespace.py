"""FedGC's and FedCF's settings composed of small frozen pieces by concern, and the typed
message that is all a client reads with every window."""

from __future__ import annotations

from dataclasses import fields

import pytest

from fedcausal_flwr.settings import RunSettings
from fedcausal_flwr.statespace import settings as S

PIECES = {
    S.Schedule: {"ss-window": 10000, "ss-epochs": 20, "ss-lr-server": 1.0,
                 "ss-lr-client": 1.5},
    S.LossWeights: {"ss-eta1": 1.0, "ss-eta2": 1.0, "ss-lambda-g": 0.0, "ss-lambda-l": 0.0},
    S.Objective: {},
    S.Privacy: {"ss-dp": False, "ss-dp-epsilon": 8.0, "ss-dp-delta": 1e-5,
                "ss-dp-clip-msg": 0.2},
    S.Seeds: {"seed": 0},
    S.GrangerView: {"ss-granger-alpha": 0.05, "ss-granger-lags": -1},
    S.Sites: {"ss-known-zero": "", "ss-max-missing": 0.5, "ss-state-screen": True},
}
ORDER = (RunSettings, S.Schedule, S.LossWeights, S.Objective, S.Privacy, S.Seeds,
         S.GrangerView, S.Sites)


@pytest.mark.parametrize("piece", list(PIECES), ids=lambda p: p.__name__)
def test_each_piece_has_its_own_keys_and_defaults_in_the_statespace_section(piece):
    made = piece()
    assert made.run_config() == PIECES[piece]
    assert piece.from_run_config({f"statespace.{k}": v for k, v in PIECES[piece].items()}) \
        == made
    assert all(k == "seed" or k.startswith("statespace.") for k in made.app_config())


def test_a_piece_validates_its_own_keys():
    with pytest.raises(ValueError, match="'statespace.ss-known-zero'"):
        S.Sites(known_zero="A:1<-")
    with pytest.raises(ValueError, match="'statespace.ss-dp-delta' = 2"):
        S.Privacy.from_run_config({"statespace.ss-dp-delta": 2})


@pytest.mark.parametrize("cls", [S.FedGCSettings, S.FedCFSettings])
def test_the_settings_are_their_pieces_in_order_and_a_client_reads_window_inputs(cls):
    own = [f.name for p in ORDER for f in fields(p)]
    assert [f.name for f in fields(cls)][:len(own)] == own  # result.json's order
    s = cls(lr_client=0.5, dp=True, seed=3)
    sent = s.to_wire()
    assert list(sent) == [f.name for f in fields(S.WindowInputs)]
    got = cls.from_wire({**sent, "phase": "ss_window", "start": 1}, "client 1")
    assert isinstance(got, S.WindowInputs) and got == s.client_inputs()
    assert (got.lr_client, got.dp, got.seed, got.xi) == (0.5, True, 3, s.xi)
    with pytest.raises(ValueError, match=rf"client 1: .* lacks the {cls.__name__} wire settings "
                                         r"\['seed'\]"):
        cls.from_wire({k: v for k, v in sent.items() if k != "seed"}, "client 1")


def test_the_message_bounds_a_value_as_the_settings_field_does():
    meta = {f.name: f.metadata["fedcausal"] for f in fields(S.FedCFSettings)}
    for f in fields(S.WindowInputs):
        mine = f.metadata["fedcausal"]
        assert {b: mine[b] for b in ("ge", "gt", "le", "lt", "choices")} == {
            b: meta[f.name][b] for b in ("ge", "gt", "le", "lt", "choices")}, f.name
