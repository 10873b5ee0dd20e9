"""Issue 11's fault suite: every algorithm x every fault, through the App's ClientApp in process.

A faulty node never passes silently: the averaging protocols (FDBNL, PFDBNL, FedIV) drop it,
name it, and end with exactly the result of the run in which it simply went silent at the same
round; the protocols that need every party (FedGC, FedCF, VFedCD) stop naming it, keeping
exactly what the silent run keeps. The faults, the small configs and the oracle live in
:mod:`tests.helpers.faults` (``simulations/bench/reliability.py`` runs the same matrix).
"""

from __future__ import annotations

import numpy as np
import pytest

from fedcausal_flwr.client_app import app as client_app
from fedcausal_flwr.federation.replies import MAX_ABS, outliers, reply_problem
from fedcausal_flwr.strategies import FDBNL
from fedcausal_flwr.testing import InProcessGrid
from tests.helpers.faults import (
    ALGORITHMS,
    DISCOVERY_FAULTS,
    EVERY_PARTY,
    FAULTS,
    FAULTY,
    SMALL,
    check_fault,
    faulty_app,
    honest_margin,
    run_app,
    silent_app,
)


@pytest.mark.integration
@pytest.mark.parametrize("algorithm,fault", [
    pytest.param(a, f, id=f"{a}-{f}") for a in ALGORITHMS for f in FAULTS])
def test_fault_is_dropped_or_stops_naming_the_right_node(algorithm, fault):
    o = check_fault(algorithm, fault)
    assert not o.silent_wrong, o
    assert o.equal, f"differs from the silent run: {o.status} vs {o.oracle_status}"
    assert o.handled, o.outcome
    if fault in DISCOVERY_FAULTS:
        return  # dropped at discovery: completes without the node, or stops (VFedCD)
    if algorithm in EVERY_PARTY:
        assert o.status.startswith("stopped"), o.status
        assert any(f"{w} failed" in o.status for w in o.named), o.status
    else:
        assert o.status == "completed", o.status
        assert o.named and all(any(w + ":" in d for d in o.dropped) for w in o.named)


@pytest.mark.integration
@pytest.mark.parametrize("algorithm", ["fdbnl", "pfdbnl", "fediv"])
def test_poisoned_client_gives_the_result_of_the_silent_client(algorithm):
    """1e300 in one entry from round 2 == the client raising from round 2, estimate for
    estimate; and the poisoned client mattered (the honest run differs)."""
    rc, k = SMALL[algorithm]
    poisoned = run_app(algorithm, faulty_app(client_app, "huge", k), k)
    silent = run_app(algorithm, silent_app(client_app, "huge", k), k)
    honest = run_app(algorithm, client_app, k)
    assert poisoned.status == silent.status == honest.status == "completed"
    assert any(d.startswith(f"client {FAULTY}:") and "1e+300" in d
               for d in poisoned.metrics["dropped"])
    assert set(poisoned.estimates) == set(silent.estimates)
    differs = False
    for key, value in poisoned.estimates.items():
        for a, b, c in zip(np.atleast_1d(np.asarray(value, dtype=object)),
                           np.atleast_1d(np.asarray(silent.estimates[key], dtype=object)),
                           np.atleast_1d(np.asarray(honest.estimates[key], dtype=object)),
                           strict=True):
            np.testing.assert_array_equal(np.asarray(a, dtype=float), np.asarray(b, dtype=float))
            assert np.all(np.abs(np.asarray(a, dtype=float)) < 1e6)
            differs |= not np.array_equal(np.asarray(a, dtype=float), np.asarray(c, dtype=float))
    assert differs
    assert [h["n_clients"] for h in poisoned.history] == [k] + [k - 1] * (len(
        poisoned.history) - 1)


@pytest.mark.integration
@pytest.mark.parametrize("algorithm", sorted(EVERY_PARTY))
def test_every_party_protocol_blames_the_poisoning_party_only(algorithm):
    """The poison is screened in the exchange it arrives in: no honest party is blamed for
    what it computed from it next round, and nothing poisoned reaches the estimates."""
    k = SMALL[algorithm][1]
    res = run_app(algorithm, faulty_app(client_app, "huge", k), k)
    assert res.status.startswith(f"stopped: client {FAULTY} failed"), res.status
    assert res.metrics["dropped"] == [d for d in res.metrics["dropped"]
                                      if d.startswith(f"client {FAULTY}:")]
    for value in res.estimates.values():
        assert np.all(np.abs(np.asarray(value, dtype=float)) < 1e6)


# ---- the screen itself ---------------------------------------------------------------------
@pytest.mark.integration
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_honest_runs_stay_far_below_the_screen(algorithm):
    """Nothing honest is screened, with three orders of magnitude to spare."""
    m = honest_margin(algorithm)
    assert m["status"] == "completed" and m["screened"] == []
    assert m["max_ratio"] < m["screen_factor"] / 1e3, m


def test_precision_below_float64_is_rejected_and_named():
    for dtype in (np.float16, np.float32):
        why = reply_problem([np.zeros((2, 2), dtype=dtype)], [(2, 2)])
        assert why is not None and str(np.dtype(dtype)) in why and "float64" in why
    assert "int64" in reply_problem([np.zeros((2, 2), dtype=np.int64)], [(2, 2)])
    assert reply_problem([np.zeros((2, 2))], [((2, None), "float")]) is None


def test_outliers_robust_rule():
    honest = {c: [np.full((3, 3), 0.1 * (c + 1)), np.array(5.0 + c)] for c in range(5)}
    assert outliers(honest) == {}
    poisoned = {**honest, 2: [honest[2][0].copy(), np.array(1e9)]}
    poisoned[2][0][1, 1] = 3.0  # big for array 0, but nowhere near 1e6 x the others
    assert set(outliers(poisoned)) == {2} and "array 1" in outliers(poisoned)[2]
    two = {0: [np.array([1.0, 2.0])], 1: [np.array([1.0, 3e7])]}
    assert set(outliers(two)) == {1}  # two replies: the larger one, by 1e6 x, is caught
    two_bad = {**honest, 1: [np.full((3, 3), 1e12), np.array(1.0)],
               3: [np.full((3, 3), -1e12), np.array(1.0)]}
    assert set(outliers(two_bad)) == {1, 3}  # 2 of 5: the others' median stays honest


def test_outliers_floor_bound_and_non_float_arrays():
    tiny = {0: [np.array([1e-12])], 1: [np.array([1e-12])], 2: [np.array([1e-3])]}
    assert outliers(tiny) == {}  # 1e9 x the others, but under the floor: near zero is fine
    assert set(outliers({0: [np.array([0.0])], 1: [np.array([2e6])]})) == {1}
    assert outliers({0: [np.array([0.0])], 1: [np.array([9e5])]}) == {}
    one = {0: [np.array([MAX_ABS * 2])]}
    assert "bound" in outliers(one)[0]  # a single reply: only the bound can say
    assert outliers({0: [np.array([5.0])]}, bound=1.0) == {
        0: "array 0 has |x| up to 5, over the bound 1"}
    ints = {0: [np.array([1], dtype=np.uint64)], 1: [np.array([2**63], dtype=np.uint64)]}
    assert outliers(ints) == {}  # ciphertexts and shares are not screened
    assert outliers({0: [np.zeros(0)], 1: [np.zeros(0)]}) == {}


def test_a_declared_reply_bound_drops_what_exceeds_it():
    class Bounded(FDBNL):
        def reply_bound(self, phase):
            return 1e-9 if phase == "local" else None

    rc, k = SMALL["fdbnl"]
    from fedcausal_flwr.dbn import app as app_dbn

    base = app_dbn.strategy("fdbnl", rc)
    res = Bounded(base.settings).start(grid=InProcessGrid(client_app, k, rc))
    assert res.status.startswith("stopped") and len(res.metrics["dropped"]) == k
    assert all("over the bound 1e-09" in d for d in res.metrics["dropped"])
