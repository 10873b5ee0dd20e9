"""A VFedCD party's state in context.state: typed records (ArrayRecord, ConfigRecord), no pickle,
and what comes back is what was saved, to the bit."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from flwr.app import ArrayRecord, ConfigRecord, RecordDict

from fedcausal_flwr.secure.shares import backend
from fedcausal_flwr.vertical import dispatch, state
from fedcausal_flwr.vertical import model as core


def _same(a: Any, b: Any, where: str = "state") -> None:
    """``a`` and ``b`` equal to the bit: arrays by dtype, shape, memory order and bytes."""
    if isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray), where
        assert a.dtype == b.dtype and a.shape == b.shape, where
        assert a.flags.f_contiguous == b.flags.f_contiguous, where
        assert a.dtype == object and np.array_equal(a, b) or a.tobytes() == b.tobytes(), where
    elif isinstance(a, dict):
        assert list(a) == list(b), where
        for k in a:
            _same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{where}[{i}]")
    elif hasattr(a, "__dict__") and not isinstance(a, type):
        assert type(a) is type(b), where
        _same(vars(a), vars(b), where)
    else:
        assert type(a) is type(b) and a == b, where


def _party_vars(p: Any) -> dict[str, Any]:
    return {k: v for k, v in vars(p).items() if k not in ("x", "backend")}


def _roundtrip(held: dict[str, Any]) -> tuple[RecordDict, dict[str, Any]]:
    records = RecordDict()
    state.save(records, held)
    return records, state.load(records)


def _parties(s: core.VFedCDSettings, steps: int, **kw: Any) -> list[dispatch.Replicas]:
    rng = np.random.default_rng(3)
    xs = [rng.normal(size=(40, 2)), rng.normal(size=(40, 3))]
    parties, _ = dispatch.run_replicas(xs, s, backend(s.he_backend, s.key_bits), 1,
                                       steps=steps, **kw)
    return parties


@pytest.mark.parametrize("replicas", [0, 2])
def test_a_replicated_partys_state_comes_back_bit_for_bit_in_typed_records(replicas):
    s = core.VFedCDSettings(he_backend="mock", replicas=replicas, batch=16, hidden=2)
    party = _parties(s, steps=2)[1]
    party.parties[0].tmp = {"idx": np.arange(4), "z": {0: np.arange(3, dtype=np.uint64)},
                            "grads": {(0, 1): np.asfortranarray(np.ones((2, 3)))}}
    rows = np.arange(40)
    records, back = _roundtrip({"settings": s, "party": party, "rows": rows})
    assert set(records) == {"vfedcd", "vfedcd.settings", "vfedcd.arrays"}
    assert isinstance(records["vfedcd.arrays"], ArrayRecord)
    assert isinstance(records["vfedcd"], ConfigRecord)
    assert not any(isinstance(v, bytes) and v[:1] == b"\x80"  # no pickle stream anywhere
                   for v in records["vfedcd"].values())
    assert back["settings"] == s
    _same(rows, back["rows"])
    got = back["party"]
    assert isinstance(got, dispatch.Replicas) and len(got.parties) == replicas + 1
    assert set(vars(got)) == set(vars(party))
    _same({k: v for k, v in vars(party).items() if k != "parties"},
          {k: v for k, v in vars(got).items() if k != "parties"})
    for p, q in zip(party.parties, got.parties, strict=True):
        assert set(vars(q)) == set(vars(p))
        _same(_party_vars(p), _party_vars(q))


def test_a_plain_partys_state_comes_back_bit_for_bit():
    s = core.VFedCDSettings(he_backend="mock", mode="framework", batch=16, hidden=2)
    rng = np.random.default_rng(1)
    party = dispatch.PlainParty(0, rng.normal(size=(30, 2)), [2, 3], s)
    H = party.forward(np.arange(8))
    party.decode({1: np.zeros_like(party.tmp["own"])})
    party.update({1: np.zeros((8, 3, 2), dtype=np.int64)}, np.zeros((5, 5)))
    party.forward(np.arange(8))
    assert H and party.tmp and party.memory
    party.x = None
    _, back = _roundtrip({"settings": s, "party": party, "rows": np.arange(30)})
    got = back["party"]
    assert isinstance(got, dispatch.PlainParty) and set(vars(got)) == set(vars(party))
    _same(_party_vars(party), _party_vars(got))


def test_psi_and_key_stages_come_back():
    perm = np.array([2, 0, 1])
    _, back = _roundtrip({"psi": {"key": b"\x01" * 32, "perm": perm, "hops": [1, 2]}})
    _same({"psi": {"key": b"\x01" * 32, "perm": perm, "hops": [1, 2]}}, back)
    _, back = _roundtrip({"psi": {"key": b"\x02", "perm": perm, "hops": []}})
    assert back["psi"]["hops"] == []
    s = core.VFedCDSettings(he_backend="mock")
    _, back = _roundtrip({"settings": s, "keys": (None, None), "rows": perm})
    assert back["keys"] == (None, None) and back["settings"] == s
    assert state.load(RecordDict()) == {}


def test_paillier_keys_and_held_ciphertexts_come_back():
    pytest.importorskip("gmpy2")
    s = core.VFedCDSettings(he_backend="paillier", key_bits=256, insecure_test_keys=True,
                            batch=20, hidden=2)
    party = _parties(s, steps=1)[0]
    p = party.parties[0]
    assert p.enc_in and p.sk is not None
    records, back = _roundtrip({"settings": s, "party": party, "rows": np.arange(40)})
    q = back["party"].parties[0]
    assert (q.pk, q.sk) == (p.pk, p.sk) and q.pks == p.pks
    assert list(q.enc_in) == list(p.enc_in)
    for k, c in p.enc_in.items():
        assert [int(v) for v in c.ravel()] == [int(v) for v in q.enc_in[k].ravel()]
        assert q.enc_in[k].shape == c.shape
    _same({k: v for k, v in _party_vars(p).items() if k not in ("enc_in", "pks", "pk", "sk")},
          {k: v for k, v in _party_vars(q).items() if k not in ("enc_in", "pks", "pk", "sk")})
    assert all(isinstance(records["vfedcd"][k], bytes)
               for k in ("state.party.keys.n", "state.party.keys.p", "state.party.keys.q"))


def test_what_cannot_be_stored_is_refused_by_name():
    with pytest.raises(TypeError, match="'state.rows'"):
        state.save(RecordDict(), {"rows": np.array([object()], dtype=object)})
    with pytest.raises(TypeError, match="np.float64|float64"):
        state.save(RecordDict(), {"rows": np.float64(1.0)})
