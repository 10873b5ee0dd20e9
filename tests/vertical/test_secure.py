"""Secure dispatch: Paillier arithmetic, HE2SS shares, toy-case exactness, relay audit."""

from __future__ import annotations

import numpy as np
import pytest

from fedcausal_flwr.secure import paillier, shares
from fedcausal_flwr.vertical import dispatch, loop
from fedcausal_flwr.vertical import model as V

BITS = 256  # test keys only; the default is 2048


@pytest.fixture(scope="module")
def keys():
    return paillier.keypair(BITS)


def toy(seed: int = 1):
    """3 parties, 6 attributes, 8 samples."""
    X = np.random.default_rng(seed).standard_normal((8, 6))
    return [X[:, 0:2], X[:, 2:4], X[:, 4:6]]


def test_default_key_is_2048_bits_and_tiny_keys_are_refused():
    assert paillier.DEFAULT_BITS == 2048 and shares.Paillier().n_length == 2048
    with pytest.raises(ValueError, match="too small"):
        paillier.keypair(64)


def test_paillier_roundtrip_and_homomorphic_matmul(keys):
    pk, sk = keys
    rng = np.random.default_rng(0)
    a = rng.integers(-2**40, 2**40, (3, 4))
    x = rng.integers(-2**20, 2**20, (5, 3))
    c = paillier.encrypt(pk, a)
    assert np.array_equal(paillier.decrypt(sk, c).astype(np.int64), a)
    got = paillier.decrypt(sk, paillier.matmul_plain(pk, x, c))
    assert [int(v) for v in got.ravel()] == [int(v) for v in (x.astype(object) @ a.astype(
        object)).ravel()]
    w = paillier.to_wire(pk, c)
    assert w.dtype == np.uint8 and w.shape == (12, pk.width)
    assert np.array_equal(paillier.decrypt(sk, paillier.from_wire(pk, w, (3, 4))), a)
    with pytest.raises(ValueError, match="does not hold"):
        paillier.from_wire(pk, w[:, 1:], (3, 4))
    assert not np.array_equal(paillier.to_wire(pk, paillier.add_plain(pk, c, 0 * a)), w)
    assert paillier.PublicKey.from_array(pk.to_array()) == pk


def test_fixed_base_matmul_gives_the_same_ciphertexts(keys):
    """A batch of many rows takes the fixed-base tables: the same group elements as one
    exponentiation per entry, so the decrypted product is exact (signs and zeros included)."""
    pk, sk = keys
    rng = np.random.default_rng(3)
    a = rng.integers(-2**40, 2**40, (4, 2))
    x = rng.integers(-2**18, 2**18, (60, 4))
    x[0], x[1, 2], x[2] = 0, -1, 2**18  # a zero row, a -1, the largest digit pattern
    c = paillier.encrypt(pk, a)
    got = paillier.matmul_plain(pk, x, c)
    assert x.shape[0] * 19 > 2 * 5 * 2 ** paillier.WINDOW  # the table path ran
    assert [int(v) for v in got.ravel()] == [int(v) for v in paillier._matmul_powmod(
        pk.nsq, x, np.asarray(c, dtype=object)).ravel()]
    assert [int(v) for v in paillier.decrypt(sk, got).ravel()] == [
        int(v) for v in (x.astype(object) @ a.astype(object)).ravel()]


@pytest.mark.parametrize("kind", ["djn", "full"])
def test_both_noises_encrypt_and_rerandomize(kind, keys):
    pk, sk = keys
    a = np.array([[-5, 0, 2**60]])
    for owner in (None, sk):
        c = paillier.encrypt(pk, a, owner, kind)
        assert np.array_equal(paillier.decrypt(sk, c).astype(np.int64), a)
        d = paillier.add_plain(pk, c, np.array([[1, 2, 3]]), kind)
        assert np.array_equal(paillier.decrypt(sk, d).astype(np.int64), a + [1, 2, 3])
        assert len({int(v) for v in np.concatenate([c.ravel(), d.ravel()])}) == 6


def test_packed_slots_carry_signed_values_at_the_headroom_bound(keys):
    """Slots of +-(2^105 - 1) and mixed signs survive pack, x * Enc, add and unpack."""
    pk, sk = keys
    S, top = paillier.slots(pk), 2**105 - 1
    assert S * paillier.SLOT_BITS <= pk.n.bit_length() - 2 and S >= 2
    m = np.array([[top, -top, 0, -1, 1][:S + 1], [-top, top, 5, 1, -1][:S + 1]], dtype=object)
    c = paillier.encrypt(pk, paillier.pack(pk, m))
    assert c.shape == (2, paillier.blocks(pk, S + 1))
    got = paillier.unpack(pk, paillier.decrypt(sk, c), S + 1)
    assert [int(v) for v in got.ravel()] == [int(v) for v in m.ravel()]
    rng = np.random.default_rng(5)
    a = rng.integers(-2**40, 2**40, (3, 2 * S + 1))
    x = rng.integers(-2**20, 2**20, (4, 3))
    off = rng.integers(-2**50, 2**50, (4, 2 * S + 1))
    c = paillier.add_plain(pk, paillier.matmul_plain(pk, x, paillier.encrypt(
        pk, paillier.pack(pk, a))), paillier.pack(pk, off))
    got = paillier.unpack(pk, paillier.decrypt(sk, c), 2 * S + 1)
    want = x.astype(object) @ a.astype(object) + off.astype(object)
    assert [int(v) for v in got.ravel()] == [int(v) for v in want.ravel()]


def test_two_masked_values_at_the_bound_add_in_one_slot(keys):
    """Two HE2SS values of +-(2^105 - 1) added (the owner decrypts two holders at once) read
    back exactly, slot by slot, with mixed signs."""
    pk, sk = keys
    S, top = paillier.slots(pk), 2**105 - 1
    a = np.array([[top, -top, top, 3, -1][:S + 1]], dtype=object)
    b = np.array([[top, -top, -top, -5, -1][:S + 1]], dtype=object)
    c = paillier.add_cipher(pk, [paillier.encrypt(pk, paillier.pack(pk, a)),
                                 paillier.encrypt(pk, paillier.pack(pk, b))])
    got = paillier.unpack(pk, paillier.decrypt(sk, c), S + 1)
    assert [int(v) for v in got.ravel()] == [int(x) + int(y) for x, y in
                                             zip(a.ravel(), b.ravel(), strict=True)]


@pytest.mark.parametrize("name", shares.BACKENDS)
def test_owner_decrypts_several_holders_at_once(name, keys):
    """The owner's summed share equals the sum of its one-by-one shares (mod 2^64), with a
    decryption per two holders when packed (one for all when not)."""
    b = shares.backend(name, BITS)
    pk, sk = keys if name != "mock" else (None, None)
    rng = np.random.default_rng(2)
    cs = []
    for _ in range(3):  # three holders: two groups when packed
        m = rng.integers(-2**62, 2**62, (3, 4))
        lo, hi = shares.forward_masks(rng, m.shape)
        cs.append(b.mask_forward(pk, b.encrypt(pk, m), lo, hi))
    one = np.zeros((3, 4), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for c in cs:
            one = one + b.owner_forward(sk, c, (3, 4))
    before = dict(getattr(b, "ops", {}))
    assert np.array_equal(b.owner_forward_sum(sk, cs, (3, 4)), one)
    if name != "mock":
        per = np.size(cs[0])
        assert b.ops["decrypt"] - before["decrypt"] == per * (2 if b.pack else 1)


@pytest.mark.parametrize("name", shares.BACKENDS)
def test_he2ss_shares_sum_to_the_product(name, keys):
    b = shares.backend(name, BITS)
    pk, sk = keys if name != "mock" else (None, None)
    rng = np.random.default_rng(1)
    m = rng.integers(-2**62, 2**62, (4, 5))
    lo, hi = shares.forward_masks(rng, m.shape)
    c = b.mask_forward(pk, b.encrypt(pk, m), lo, hi)
    w = b.to_wire(pk, c)
    assert (w.shape, str(w.dtype)) == b.wire_spec(pk, m.shape)
    owner, holder = b.owner_forward(sk, b.from_wire(pk, w, m.shape), m.shape), \
        shares.holder_share(lo)
    with np.errstate(over="ignore"):
        assert np.array_equal(shares.signed(owner + holder), m)
    assert not np.array_equal(shares.signed(owner), m)
    phi = rng.integers(-2**20, 2**20, m.shape)
    rem = b.owner_backward(sk, b.mask_backward(pk, b.encrypt(pk, m), phi), m.shape)
    assert np.array_equal(rem + phi, m)


@pytest.mark.integration
@pytest.mark.parametrize("name", ["paillier", "paillier-packed"])
def test_toy_case_secure_features_and_gradients_equal_plaintext(name):
    """Acceptance 1: real Paillier, K=3, d=6, n=8: sum_k z_kt = sum_k x^k W_kt (1e-4)."""
    xs = toy()
    s = V.VFedCDSettings.paper(batch=8)
    parties, _ = dispatch.run_local(xs, s, shares.backend(name, BITS), 0)
    keys = {p.me: p.public_key() for p in parties}
    enc = dispatch.deliver({p.me: p.setup(keys)[0] for p in parties})
    idx = np.arange(8)
    fwd = dispatch.deliver({p.me: p.forward(0, idx, enc[p.me]) for p in parties})
    G = np.zeros((6, 6))
    zs = dispatch.deliver({p.me: p.share(fwd[p.me], G) for p in parties})
    F = dispatch.fragments_of(parties)
    for t, p in enumerate(parties):
        Z = p.tmp["z_own"].copy()
        for msg in zs[t].values():
            with np.errstate(over="ignore"):
                Z = Z + msg["z"]
        plain = sum(np.einsum("na,ath->nth", xs[k], V.encoder(F, k, t)) for k in range(3))
        np.testing.assert_allclose(V.dequantize(Z, 32).reshape(plain.shape), plain, atol=1e-4)
        for msg in zs[t].values():  # no single share is the plaintext feature
            assert np.abs(V.dequantize(msg["z"], 32).reshape(plain.shape)).max() > 1e3
    dz = dispatch.deliver({p.me: p.decode(zs.get(p.me, {}))[0] for p in parties})
    gq = {t: V.quantize(dispatch_dz(parties[t], dz, t), 16) for t in range(3)}
    gr = dispatch.deliver({p.me: p.gradient(0, dz[p.me]) for p in parties})
    for t, p in enumerate(parties):
        for k, msg in gr[t].items():
            shape = (2, 2 * s.hidden)
            rem = p.backend.owner_backward(p.sk, p.backend.from_wire(p.pk, msg["he2ss"], shape),
                                           shape)
            phi = parties[k].tmp["grads"][k, t].reshape(shape)
            true = np.einsum("na,nth->ath", xs[k], V.dequantize(gq[t], 16)).reshape(shape)
            np.testing.assert_allclose(phi + V.dequantize(rem, 32), true, atol=1e-4)
            assert np.abs(phi).max() > 0


def dispatch_dz(party, dz, t):
    """The plaintext feature gradient target t encrypted (decrypted by t for the check)."""
    msg = next(m for dst, box in dz.items() if dst != t for src, m in box.items() if src == t)
    c = party.backend.from_wire(party.pk, msg["dz"], (8, 2 * 10))
    return V.dequantize(party.backend.owner_backward(party.sk, c, (8, 20)), 0).reshape(
        8, 2, 10) / 2**16


@pytest.mark.integration
@pytest.mark.parametrize("extra", [{}, {"l2": 0.05, "loss": "nll", "lambda1": 5e-4},
                                   {"optimizer": "adam", "adam_eps": 1e-3, "l2": 0.05,
                                    "loss": "nll", "lr": 0.05},
                                   {"optimizer": "sgdm"}])
def test_paillier_mock_and_reference_give_the_same_trajectory(extra):
    xs = toy(2)
    s = V.VFedCDSettings.paper(batch=4, gamma=0.5, **extra)
    ref = loop.train_reference(xs, s, epochs=2)
    for b in (shares.backend(name, BITS) for name in shares.BACKENDS):
        parties, ctv = dispatch.run_local(xs, s, b, 2)
        F = dispatch.fragments_of(parties)
        for i, k, t in np.ndindex(3, 3, 3):
            np.testing.assert_allclose(F[i][k][t], ref.F[i][k][t], rtol=0, atol=1e-12)
        for t in range(3):
            for a, r in zip(parties[t].dec, ref.decoders[t], strict=True):
                np.testing.assert_allclose(a, r, rtol=0, atol=1e-12)
        assert ctv.lam2 == ref.lam2 > 0


@pytest.mark.integration
@pytest.mark.parametrize("name", ["paillier", "paillier-packed"])
def test_relay_sees_only_ciphertexts_masked_shares_and_graph_fragments(name):
    xs = toy(3)
    s = V.VFedCDSettings.paper(batch=4)
    log: list = []
    parties, _ = dispatch.run_local(xs, s, shares.backend(name, BITS), 1, log)
    width = parties[0].pk.width
    raw = np.hstack(xs)
    kinds = set()
    for phase, boxes in log:
        for box in boxes.values():
            for msg in box.values():
                for name, a in msg.items():
                    if a.dtype == np.uint8:
                        assert a.ndim == 2 and a.shape[1] == width, (phase, name)
                        kinds.add("ciphertext")
                    else:
                        assert phase == "share" and a.dtype == np.uint64, (phase, name)
                        assert np.abs(V.dequantize(a, 32)).max() > 1e3  # uniform masks
                        kinds.add("share")
                        vals = V.dequantize(a, 32).ravel()
                        assert not np.isin(np.round(raw, 6), np.round(vals, 6)).any()
    assert kinds == {"ciphertext", "share"}
    for p in parties:  # what the CTV receives: d x d_t graph fragments only
        assert {k: v.shape for k, v in p.graph_fragments().items()} == {
            f"B.t{t}": (6, 2) for t in range(3)}


def test_worker_processes_give_the_same_plaintexts(keys):
    pk, sk = keys
    a = np.arange(-6, 6).reshape(3, 4)
    paillier.set_workers(2)
    try:
        c = paillier.encrypt(pk, a)
        got = paillier.decrypt(sk, c)
    finally:
        paillier.set_workers(1)
    assert np.array_equal(got.astype(np.int64), a)
    assert np.array_equal(paillier.decrypt(sk, c).astype(np.int64), a)
