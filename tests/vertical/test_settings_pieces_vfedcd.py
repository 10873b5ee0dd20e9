"""VFedCD's settings composed of small frozen pieces by concern: each piece's keys and
defaults, and the order (``result.json``'s) and wire fields they compose to."""

from __future__ import annotations

from dataclasses import fields

import pytest

from fedcausal_flwr.knowledge import KnowledgeSettings
from fedcausal_flwr.settings import RunSettings
from fedcausal_flwr.vertical import settings as S

PIECES = {
    S.Training: {"num-epochs": 30, "batch": 200, "lr": 0.1, "optimizer": "adam",
                 "adam-eps": 0.003},
    S.GraphPenalty: {"lambda1": 1e-3, "gamma": 0.01, "lambda-b": 0.0, "tau": 0.7,
                     "dag-tol": 0.01},
    S.Network: {"hidden": 10, "decoder-layers": 2, "power-iters": 15},
    S.Masking: {"sigma-phi": 1e-3, "split": "dirichlet", "frac-bits": 16, "dp-b": 0.0},
    S.Objective: {"l2": 0.0, "unfreeze": False, "loss": "nll"},
    S.Dispatch: {"mode": "vfedcd", "he-backend": "paillier-packed", "key-bits": 2048,
                 "insecure-test-keys": False},
    S.Seeds: {"seed": 0},
    S.ReplicaPlan: {"replicas": 0, "stability-threshold": 0.75},
    S.Sites: {"max-missing": 0.5},
}


@pytest.mark.parametrize("piece", list(PIECES), ids=lambda p: p.__name__)
def test_each_piece_has_its_own_keys_and_defaults_in_the_vertical_section(piece):
    made = piece()
    assert made.run_config() == PIECES[piece]
    assert piece.from_run_config({f"vertical.{k}": v for k, v in PIECES[piece].items()}) \
        == made


def test_the_settings_are_their_pieces_in_order_with_the_same_wire_fields():
    order = (RunSettings, KnowledgeSettings, *PIECES)
    assert [f.name for f in fields(S.VFedCDSettings)] == [f.name for p in order
                                                          for f in fields(p)]
    assert S.VFedCDSettings.wire_fields() == tuple(n for p in PIECES for n in p.wire_fields())
    assert S.Dispatch(mode="ctv").ctv and not S.Dispatch(mode="ctv").secure
    with pytest.raises(ValueError, match="'vertical.key-bits' = 1024"):
        S.VFedCDSettings(key_bits=1024)
