"""FDBNL's and PFDBNL's settings composed of small frozen pieces by concern: each piece's keys
and defaults, the flat constructor and field order they compose to, PFDBNL's own penalty and
its refusal of FDBNL's keys, and the typed message that is all a client reads."""

from __future__ import annotations

from dataclasses import fields

import pytest

from fedcausal_flwr.dbn import settings as S
from fedcausal_flwr.dbn.settings import FDBNLSettings, PFDBNLSettings
from fedcausal_flwr.knowledge import KnowledgeSettings
from fedcausal_flwr.settings import ScreenedRunSettings

PIECES = {
    S.Penalty: {"lambda-w": 0.05, "lambda-a": 0.05, "lambda-scale": "pooled"},
    S.PFDBNLPenalty: {"pfdbnl-lambda-w": 0.1, "pfdbnl-lambda-a": 0.075,
                      "lambda-scale": "pooled"},
    S.ADMM: {"rho1": 1.0, "rho2": 1.0, "phi1": 2.5, "phi2": 1.1, "rho-max": 1e16},
    S.StopRule: {"h-tol": 1e-8, "primal-tol": 1e-2, "num-rounds": 200},
    S.Solver: {},
    S.Variant: {"dual-update": "paper", "code-compat": False},
    S.Sampling: {"clients-per-round": 0, "seed": 0},
    S.GraphReport: {"tau-w": 0.2, "tau-a": 0.2},
    S.ReplicaPlan: {"replicas": 0, "stability-threshold": 0.6, "lambda-select": "fixed",
                    "lambda-path": "0.2,0.1,0.05,0.025,0.0125", "tau-path": "0.1,0.2,0.3,0.4",
                    "holdout": 0.2},
    S.Sites: {"variables": "union", "max-missing": 0.5},
    S.LocalStep: {"mu": 0.1},
}
"""Every piece's run-config keys (bare) with their defaults."""

FDBNL_PIECES = (KnowledgeSettings, ScreenedRunSettings, S.Penalty, S.ADMM, S.StopRule,
                S.Solver, S.Variant, S.Sampling, S.GraphReport, S.ReplicaPlan, S.Sites)
PFDBNL_PIECES = tuple(S.PFDBNLPenalty if p is S.Penalty else p for p in FDBNL_PIECES) + (
    S.LocalStep,)


@pytest.mark.parametrize("piece", list(PIECES), ids=lambda p: p.__name__)
def test_each_piece_has_its_own_keys_and_defaults_in_the_dbn_section(piece):
    made = piece()
    assert made.run_config() == PIECES[piece]
    assert made.app_config() == {f"dbn.{k}" if k != "seed" else k: v
                                 for k, v in PIECES[piece].items()}
    assert piece.from_run_config({f"dbn.{k}": v for k, v in PIECES[piece].items()}) == made
    assert piece.__dataclass_params__.frozen


def test_a_piece_validates_its_own_keys():
    with pytest.raises(ValueError, match=r"run config 'dbn.rho1' = 0: must be > 0"):
        S.ADMM.from_run_config({"dbn.rho1": 0})
    with pytest.raises(ValueError, match="'dbn.replicas' = 3: must be even"):
        S.ReplicaPlan(replicas=3)
    assert S.ReplicaPlan(lambda_select="holdout").taus() == (0.1, 0.2, 0.3, 0.4)
    assert S.StopRule(max_rounds=7).stop_args() == {"h_tol": 1e-8, "primal_tol": 1e-2,
                                                    "max_rounds": 7}


@pytest.mark.parametrize("cls, pieces", [(FDBNLSettings, FDBNL_PIECES),
                                         (PFDBNLSettings, PFDBNL_PIECES)])
def test_the_settings_are_their_pieces_fields_in_order_under_one_flat_constructor(cls, pieces):
    own = [f.name for p in pieces for f in fields(p)]
    assert [f.name for f in fields(cls)] == list(dict.fromkeys(own))  # result.json's order
    assert all(issubclass(cls, p) for p in pieces)
    assert set(cls.keys()) == {k for p in pieces for k in p.keys()}
    s = cls(lambda_w=0.1, lambda_a=0.2, rho1=3.0, replicas=2)
    assert (s.lambda_w, s.lambda_a, s.rho1, s.replicas) == (0.1, 0.2, 3.0, 2)


def test_pfdbnl_composes_its_own_penalty_instead_of_fdbnls():
    assert not issubclass(PFDBNLSettings, FDBNLSettings)
    assert not issubclass(PFDBNLSettings, S.Penalty)
    pf, fd = PFDBNLSettings(), FDBNLSettings()
    assert (pf.lambda_w, pf.lambda_a) == (0.1, 0.075) and (fd.lambda_w, fd.lambda_a) == (
        0.05, 0.05)
    assert "pfdbnl-lambda-w" in PFDBNLSettings.keys() and "lambda-w" not in \
        PFDBNLSettings.keys()
    assert PFDBNLSettings.read_instead() == {"lambda-w": ("pfdbnl-lambda-w", 0.05),
                                             "lambda-a": ("pfdbnl-lambda-a", 0.05)}
    assert FDBNLSettings.read_instead() == {}


@pytest.mark.parametrize("key, own", [("lambda-w", "pfdbnl-lambda-w"),
                                      ("lambda-a", "pfdbnl-lambda-a")])
def test_pfdbnl_refuses_fdbnls_lambda_naming_its_own_key_unless_at_fdbnls_default(key, own):
    with pytest.raises(ValueError, match=f"'dbn.{key}' = 0.3 is not read by PFDBNLSettings: "
                                         f"set 'dbn.{own}' instead"):
        PFDBNLSettings.from_run_config({f"dbn.{key}": 0.3})
    assert PFDBNLSettings.from_run_config({f"dbn.{key}": 0.05}) == PFDBNLSettings()
    assert PFDBNLSettings.from_run_config({f"dbn.{own}": 0.3}) != PFDBNLSettings()


def test_a_pfdbnl_client_reads_a_small_typed_message_and_an_fdbnl_client_none():
    s = PFDBNLSettings(mu=0.3, local_maxiter=7)
    sent = s.to_wire()
    assert list(sent) == ["lambda_w", "lambda_a", "restarts", "code_compat", "mu",
                          "local_start", "local_maxiter", "local_ftol"]  # as they travelled
    got = PFDBNLSettings.from_wire({**sent, "phase": "personal", "taus": ""}, "client 2")
    assert isinstance(got, S.PersonalInputs) and got == s.client_inputs()
    assert (got.mu, got.local_maxiter) == (0.3, 7) and len(fields(got)) == 8
    with pytest.raises(ValueError, match=r"client 2: .* lacks the PFDBNLSettings wire "
                                         r"settings \['mu'\]"):
        PFDBNLSettings.from_wire({k: v for k, v in sent.items() if k != "mu"}, "client 2")
    with pytest.raises(ValueError, match="must be >= 0"):
        PFDBNLSettings.from_wire({**sent, "mu": -1.0})
    assert FDBNLSettings().to_wire() == {} and FDBNLSettings.wire_fields() == ()
    assert FDBNLSettings.from_wire({}) == S.LocalInputs()


def test_the_message_bounds_a_value_as_the_settings_field_does():
    meta = {f.name: f.metadata["fedcausal"] for f in fields(PFDBNLSettings)}
    for f in fields(S.PersonalInputs):
        mine = f.metadata["fedcausal"]
        assert {b: mine[b] for b in ("ge", "gt", "le", "lt", "choices")} == {
            b: meta[f.name][b] for b in ("ge", "gt", "le", "lt", "choices")}, f.name
        assert PFDBNLSettings.__dataclass_fields__[f.name].type == f.type
