"""dbn/wire.py: one stack of R >= 1 replicas, two wire forms; a plain run's wire has no
replica axis and no replica keys."""

from __future__ import annotations

import numpy as np
import pytest

from fedcausal_flwr.dbn import wire

D, P = 3, 2


def stack(step: str, R: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(R)
    out = {n: rng.normal(size=(R, *sh))
           for n, sh in zip(wire.PHASES[step].down,
                            wire.shapes(wire.PHASES[step].down, D, P), strict=True)}
    out["rows"] = np.arange(R, dtype=np.int64)
    out["scalars"] = rng.normal(size=(R, len(wire.SCALARS)))
    return out


@pytest.mark.parametrize("step", ["local", "personal"])
def test_a_plain_step_travels_unstacked_and_comes_back_as_a_stack_of_one(step):
    st = stack(step, 1)
    st["rows"][:] = 0
    config = {"replica-seed": 3, "holdout": 0.2, "taus": "", "lambda_w": 0.1,
              "lambda_a": 0.2, "mu": 1.0}
    arrays, cfg = wire.down(step, st, config)
    assert [a.shape for a in arrays] == wire.shapes(wire.PHASES[step].down, D, P)
    assert not set(wire.STACK_CONFIG) & set(cfg)
    assert [cfg[k] for k in wire.PLAIN_SCALARS[step]] == [
        st["scalars"][0][wire.SCALARS.index(k)] for k in wire.PLAIN_SCALARS[step]]
    back = wire.stacked(step, "down", arrays, cfg)
    assert list(back) == list(wire.names(step, "down"))
    for n, a in back.items():
        if n == "scalars":
            for k, x in zip(wire.SCALARS, a[0], strict=True):
                want = cfg.get(k, np.nan)
                assert x == want or (np.isnan(x) and np.isnan(want)), k
        else:
            np.testing.assert_array_equal(a, st[n])
    with pytest.raises(KeyError, match="rho2"):
        wire.stacked(step, "down", arrays, {k: v for k, v in cfg.items() if k != "rho2"})


@pytest.mark.parametrize("step", ["local", "personal"])
def test_a_replicated_step_travels_as_the_stack(step):
    st = stack(step, 3)
    phase = wire.wire_phase(step, True)
    arrays, cfg = wire.down(phase, st, {"replica-seed": 3})
    assert phase == f"{step}_replicas" and cfg == {"replica-seed": 3}
    assert wire.replicas_in(phase, arrays) == 3
    assert [a.shape for a in arrays] == wire.wire_shapes(phase, "down", D, P, 3)
    assert all(a is b for a, b in zip(wire.stacked(phase, "down", arrays).values(), arrays,
                                      strict=True))


def test_a_plain_reply_drops_the_replica_axis_and_val():
    B, Dm = np.ones((1, D, D)), np.ones((1, P * D, D))
    up = wire.up("local", {"B": B, "D": Dm, "val": np.zeros((1, 0))})
    assert [a.shape for a in up] == wire.wire_shapes("local", "up", D, P, 1)
    back = wire.stacked("local", "up", up)
    assert {n: a.shape for n, a in back.items()} == {"B": (1, D, D), "D": (1, P * D, D),
                                                     "val": (1, 0)}
    assert wire.wire_phase("local", False) == "local" and wire.replicas_in("local", up) == 1


def test_a_reply_of_the_wrong_count_or_without_a_name_is_refused_naming_it():
    with pytest.raises(ValueError, match=r"^local reply: 1 arrays, expected 2 \(B, D\)$"):
        wire.stacked("local", "up", [np.ones((D, D))])
    with pytest.raises(ValueError, match="local_replicas reply: array 'val' missing"):
        wire.up("local_replicas", {"B": np.ones((1, D, D)), "D": np.ones((1, P * D, D))})
