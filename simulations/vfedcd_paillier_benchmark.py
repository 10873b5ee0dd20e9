"""Paillier throughput on this machine (2048-bit keys) beside the paper's 12,500 HE mult/s.

Prints operations per second for encryption, ciphertext-times-plaintext and decryption, for
phe's high-level API and for our raw gmpy2 path, and the gain of each speed-up: gmpy2 powmod
over Python's pow, packing several fixed-point values per plaintext, parallel noise (r^n)
generation. Then the protocol's operation counts for one epoch at n=1000 (800 train rows),
d=15, K=3, h=10 (counted by the backend on one real step, times 50 steps) and the epoch wall
time they imply at the measured rates.

    nice -n 10 python simulations/vfedcd_paillier_benchmark.py [--bits 2048] [--seconds 2]
"""

from __future__ import annotations

import argparse
import secrets
import time
from multiprocessing import Pool

import gmpy2
import numpy as np
from phe import paillier as phe_paillier

from fedcausal_flwr.core import vfedcd as V
from fedcausal_flwr.secure import dispatch, paillier, shares

PAPER_MULS = 12_500


def rate(fn, seconds: float) -> float:
    """Calls of ``fn`` per second over about ``seconds``."""
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        fn()
        n += 1
    return n / (time.perf_counter() - t0)


def _noise(args: tuple[int, int]) -> int:
    n, count = args
    nsq = gmpy2.mpz(n) ** 2
    for _ in range(count):
        gmpy2.powmod(gmpy2.mpz(secrets.randbelow(n - 1) + 1), n, nsq)
    return count


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bits", type=int, default=2048)
    ap.add_argument("--seconds", type=float, default=2.0)
    a = ap.parse_args()
    sec = a.seconds
    pk, sk = paillier.keypair(a.bits)
    nsq = pk.nsq
    c = paillier.encrypt(pk, np.array([123456]))[0]
    x = 54321  # a 16-bit fixed-point scalar
    print(f"Paillier {a.bits}-bit keys, one core, ops/s (paper: {PAPER_MULS} HE mult/s)")
    ppk, psk = phe_paillier.generate_paillier_keypair(n_length=a.bits)
    pc = ppk.encrypt(1.5)
    rows = {
        "phe encrypt (float, obfuscated)": rate(lambda: ppk.encrypt(1.5), sec),
        "phe ciphertext * int": rate(lambda: pc * x, sec),
        "phe decrypt": rate(lambda: psk.decrypt(pc), sec),
        "ours encrypt (gmpy2, fresh r^n)": rate(lambda: paillier.encrypt(pk, np.array([7])), sec),
        "ours encrypt by the key owner (CRT)": rate(
            lambda: paillier.encrypt(pk, np.array([7]), sk), sec),
        "ours ciphertext ^ x (gmpy2 powmod)": rate(lambda: gmpy2.powmod(c, x, nsq), sec),
        "ours ciphertext ^ x (Python pow)": rate(lambda: pow(int(c), x, int(nsq)), sec),
        "decrypt without CRT (c^lambda mod n^2)": rate(
            lambda: gmpy2.powmod(c, (sk.p - 1) * (sk.q - 1), nsq), sec),
        "ours decrypt (CRT)": rate(lambda: paillier.decrypt(sk, np.array([c], dtype=object)), sec),
    }
    for k, v in rows.items():
        print(f"  {k:40s} {v:12.0f}")
    mul = rows["ours ciphertext ^ x (gmpy2 powmod)"]
    crt_enc = rows["ours encrypt by the key owner (CRT)"] / rows["ours encrypt (gmpy2, fresh r^n)"]
    crt_dec = rows["ours decrypt (CRT)"] / rows["decrypt without CRT (c^lambda mod n^2)"]
    print(f"  gain CRT decryption: {crt_dec:.1f}x (phe decrypts with CRT too); CRT owner "
          f"encryption over plain: {crt_enc:.1f}x")
    print(f"  gain gmpy2 over Python pow: {mul / rows['ours ciphertext ^ x (Python pow)']:.1f}x")
    slots = (a.bits - 2) // (64 + 40 + 2)  # 64-bit share + 40-bit mask slack + carry guard
    print(f"  packing {slots} fixed-point values per plaintext (scalar x packed row): "
          f"{mul * slots:.0f} value-mults/s, {slots}x (not yet used by the protocol)")
    t0 = time.perf_counter()
    _noise((pk.n, 40))
    one = 40 / (time.perf_counter() - t0)
    with Pool(2) as pool:
        t0 = time.perf_counter()
        pool.map(_noise, [(pk.n, 40)] * 2)
        two = 80 / (time.perf_counter() - t0)
    print(f"  r^n noise: 1 process {one:.0f}/s, 2 processes {two:.0f}/s ({two / one:.1f}x; "
          f"the encryption cost, precomputable off-line)")
    # op counts of one real protocol step at d=15, K=3, batch 16 (small key: counts only)
    xs = [np.random.default_rng(0).standard_normal((16, 5)) for _ in range(3)]
    be = shares.backend("paillier", 256)
    dispatch.run_local(xs, V.Settings(batch=16), be, 1)
    setup = shares.backend("paillier", 256)
    dispatch.run_local(xs, V.Settings(batch=16), setup, 0)
    per_step = {k: be.ops[k] - setup.ops[k] for k in be.ops}
    epoch = {k: 50 * v for k, v in per_step.items()}
    enc_rate = rows["ours encrypt (gmpy2, fresh r^n)"]
    dec_rate = rows["ours decrypt (CRT)"]
    est = epoch["mul"] / mul + epoch["encrypt"] / enc_rate + epoch["decrypt"] / dec_rate
    print(f"one epoch n=1000 (800 train), d=15, K=3, h=10: {epoch} -> {est:.0f} s on one core "
          f"(paper's 10 n d^2 = {10 * 1000 * 15 ** 2} mults, 180 s)")
    fast = epoch["mul"] / (mul * slots) + epoch["encrypt"] / two + epoch["decrypt"] / dec_rate
    print(f"  with {slots}-slot packing of the mults and 2-process noise: {fast:.0f} s "
          f"(projection)")


if __name__ == "__main__":
    main()
