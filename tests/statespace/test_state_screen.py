"""FedGC/FedCF's state screen (issue 35): each client is the only source of its own states, so
no robust rule across clients applies; the server stops the run, naming the client, when a
window's states are degenerate (rank below P: zeros) or when what the client's data fix
differs from its first answer for the same window (a lie that changes). A lie told the same
way every time (a sign flip from the first window on) is another basis of the liar's own
subsystem: the run completes, says so under ``unscreened``, and the Granger test of every
block is that of the honest run."""

from __future__ import annotations

import numpy as np
import pytest

from fedcausal_flwr.client_app import app as client_app
from fedcausal_flwr.federation.replies import RepeatScreen, digest
from tests.helpers.faults import SMALL, lying_app, run_app

TWO_EPOCHS = {"statespace.ss-epochs": 2}


def _rc(alg: str, **extra) -> dict:
    return {**SMALL[alg][0], **TWO_EPOCHS, **extra}


def test_repeat_screen_flags_a_changed_answer_and_a_failed_check():
    seen = {"key": "w1"}
    screen = RepeatScreen(lambda phase, c, a: (seen["key"], a[:1]),
                          lambda phase, c, a: "degenerate" if not np.any(a[0]) else None)
    a, b = np.arange(4.0), np.ones(3)
    assert screen("p", {0: [a, b], 1: [a + 1, b]}) == {}
    assert screen("p", {0: [a, 2 * b], 1: [a + 1, b]}) == {}  # only the fixed part is kept
    got = screen("p", {0: [-a, b], 1: [0 * a, b]})
    assert "differ from its first answer" in got[0] and got[1] == "degenerate"
    seen["key"] = "w2"  # another request: a new first answer
    assert screen("p", {0: [-a, b]}) == {}
    assert digest([a]) != digest([a.astype(np.float32)])


@pytest.mark.parametrize("alg", ["fedgc", "fedcf"])
def test_honest_runs_pass_the_screen_and_name_it(alg):
    res = run_app(alg, client_app, 3, rc=_rc(alg))
    rob = res.metrics["robustness"]
    assert res.status == "completed" and rob["flagged"] == {}
    assert "state" in rob["screens"] and "relabeling" in rob["unscreened"]


@pytest.mark.parametrize("alg", ["fedgc", "fedcf"])
def test_zeros_stop_the_run_naming_the_client(alg):
    res = run_app(alg, lying_app(client_app, "zeros", [1]), 3, rc=_rc(alg))
    assert res.status.startswith("stopped") and "client 1" in res.status
    assert "rank 0" in res.status
    assert res.metrics["robustness"]["flagged"] == {"client 1": 1}
    off = run_app(alg, lying_app(client_app, "zeros", [1]), 3,
                  rc=_rc(alg, **{"statespace.ss-state-screen": False}))
    assert off.status == "completed"  # without the screen the lie goes through


def test_a_lie_that_changes_stops_the_run_naming_the_client():
    res = run_app("fedgc", lying_app(client_app, "sign-flip", [1], start=5), 3,
                  rc=_rc("fedgc"))
    assert res.status.startswith("stopped") and "client 1" in res.status
    assert "differ from its first answer" in res.status


def test_a_consistent_sign_flip_is_another_basis_the_granger_test_is_unchanged():
    rc = _rc("fedgc", **{"statespace.ss-clients": 2})
    honest = run_app("fedgc", client_app, 2, rc=rc)
    flip = run_app("fedgc", lying_app(client_app, "sign-flip", [1]), 2, rc=rc)
    assert honest.status == flip.status == "completed"
    assert flip.metrics["robustness"]["flagged"] == {}
    A, B = np.asarray(honest.estimates["A_hat"]), np.asarray(flip.estimates["A_hat"])
    P = A.shape[0] // 2
    np.testing.assert_allclose(B[P:, :P], -A[P:, :P], atol=1e-10)  # A21 in the new basis
    np.testing.assert_allclose(flip.estimates["A_offdiag_pvalue"],
                               honest.estimates["A_offdiag_pvalue"], atol=1e-10)
