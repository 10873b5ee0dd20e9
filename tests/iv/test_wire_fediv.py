"""iv/wire.py: arrays by name; a stack of R = 0 replicas does not travel."""

from __future__ import annotations

import numpy as np
import pytest

from fedcausal_flwr.iv import wire

THETA, TAU, M = [(4, 1), (4,)], [(3, 2)], 5


def named(R: int) -> dict:
    rng = np.random.default_rng(R)
    return {"dtheta": [rng.normal(size=s) for s in THETA],
            "dtau": [rng.normal(size=s) for s in TAU],
            "psi_sum": rng.normal(size=M), "C_sum": rng.normal(size=(M, M)),
            "U": np.array([1.0]),
            "dtheta_r": [rng.normal(size=(R, *s)) for s in THETA],
            "dtau_r": [rng.normal(size=(R, *s)) for s in TAU], "ok_r": np.ones(R)}


@pytest.mark.parametrize("R", [0, 2])
def test_pack_unpack_round_trip_by_name(R):
    got = named(R)
    arrays = wire.pack("local", "up", got)
    assert [a.shape for a in arrays] == wire.shapes(wire.PHASES["local"].up, THETA, TAU, M, R)
    assert len(arrays) == 6 + (4 if R else 0)
    back = wire.unpack("local", "up", arrays, THETA, TAU, M, R)
    for n, v in got.items():
        for a, b in zip(v if isinstance(v, list) else [v],
                        back[n] if isinstance(back[n], list) else [back[n]], strict=True):
            np.testing.assert_array_equal(a, b)
    assert wire.replicas_in(wire.pack("local", "down", {
        "theta": got["dtheta"], "tau": got["dtau"], "theta_r": got["dtheta_r"],
        "tau_r": got["dtau_r"]}), len(THETA) + len(TAU)) == R


def test_unpack_refuses_a_wrong_shape_or_count_naming_the_array():
    arrays = wire.pack("local", "up", named(2))
    bad = [*arrays[:1], np.zeros(5), *arrays[2:]]
    with pytest.raises(ValueError, match=r"^local reply: array 'dtheta\[1\]' has shape "
                                         r"\(5,\), expected \(4,\)$"):
        wire.unpack("local", "up", bad, THETA, TAU, M, 2)
    with pytest.raises(ValueError, match=r"local reply: 9 arrays, expected 10"):
        wire.unpack("local", "up", arrays[:-1], THETA, TAU, M, 2)
    with pytest.raises(ValueError, match=r"array 'dtheta_r\[0\]' has shape \(2, 4, 1\), "
                                         r"expected \(3, 4, 1\)"):
        wire.unpack("local", "up", arrays, THETA, TAU, M, 3)  # the first that differs
