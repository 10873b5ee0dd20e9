"""FedIV's settings composed of small frozen pieces by concern, and the typed message that is
all a client reads with every message (no torch needed)."""

from __future__ import annotations

from dataclasses import fields

import pytest

from fedcausal_flwr.iv import settings as S
from fedcausal_flwr.settings import ScreenedRunSettings

PIECES = {
    S.Game: {"iv-lr-g": 0.02, "iv-lr-f": 0.2, "iv-mode": "gda", "iv-batch-size": 256,
             "iv-local-epochs": 40, "iv-optimizer": "sgd", "iv-momentum": 0.9,
             "iv-grad-clip": 5.0},
    S.ServerRounds: {"iv-weighting": "uniform", "iv-rounds": 50, "iv-diverge-factor": 10.0},
    S.Validation: {"seed": 0, "iv-val-features": 32},
    S.Compute: {"iv-device": "auto"},
    S.Intervals: {"iv-replicas": 0, "iv-interval-level": 0.9,
                  "iv-interval-method": "percentile"},
}


@pytest.mark.parametrize("piece", list(PIECES), ids=lambda p: p.__name__)
def test_each_piece_has_its_own_keys_and_defaults_in_the_iv_section(piece):
    made = piece()
    assert made.run_config() == PIECES[piece]
    assert piece.from_run_config({f"iv.{k}": v for k, v in PIECES[piece].items()}) == made


def test_the_settings_are_their_pieces_in_order_with_fedivs_own_screen_factor():
    order = (ScreenedRunSettings, *PIECES)
    assert [f.name for f in fields(S.FedIVSettings)] == [f.name for p in order
                                                         for f in fields(p)]
    assert S.FedIVSettings().byzantine_factor == 25.0 != ScreenedRunSettings().byzantine_factor
    with pytest.raises(ValueError, match=r"Game.betas = \(0.5, 1.0\)"):
        S.Game(betas=(0.5, 1.0))


def test_a_client_reads_local_inputs_with_the_games_numbers():
    s = S.FedIVSettings(lr_g=0.5, optimizer="oadam", betas=(0.1, 0.2), seed=4, rounds=3)
    sent = s.to_wire()
    assert list(sent) == [f.name for f in fields(S.LocalInputs)] and "rounds" not in sent
    got = S.FedIVSettings.from_wire({**sent, "server-round": 2}, "client 0")
    assert isinstance(got, S.LocalInputs) and got == s.client_inputs()
    assert got.local_args() == s.local_args() and got.betas == (0.1, 0.2)
    with pytest.raises(ValueError, match=r"LocalInputs.betas = \(0.5, 1.0\)"):
        S.FedIVSettings.from_wire({**sent, "betas": [0.5, 1.0]})
    with pytest.raises(ValueError, match=r"client 0: .* lacks the FedIVSettings wire settings "
                                         r"\['seed'\]"):
        S.FedIVSettings.from_wire({k: v for k, v in sent.items() if k != "seed"}, "client 0")
