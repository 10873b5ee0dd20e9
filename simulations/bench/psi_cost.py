"""What VFedCD's ID alignment costs (issue 24.1): private set intersection vs the keyed hash.

Three parties, n IDs each (``--sizes``), 80% of them held by all three (the rest each party's
own). Per method: CPU seconds of each step on one party and on the server (``process_time``,
one core, this loaded machine), the bytes that cross the wire, and the exchanges the method
adds. PSI (:mod:`fedcausal_flwr.secure.psi`): ``psi_blind`` (hash to the group, shuffle, blind),
K - 1 ``psi_hop`` (reblind another party's set), the server's intersection of the fully blinded
sets, the party's rows from its positions. Keyed hash (:func:`fedcausal_flwr.data.csvdata.
keyed_tokens`): HMAC-SHA256 pseudonyms, the server's ``intersect1d``. The parties work in
parallel, so a deployment's alignment takes one party's CPU plus the server's plus the added
exchanges at ``--exchange-s`` each (the loopback deployment's ~7 s, ``results/vfedcd.md``).

Since issue 35 each hop carries a proof (:func:`fedcausal_flwr.secure.psi.hop_proof`) that the
server verifies before it relays, and the server checks each party's own set for the group:
the party's ``proofs_s`` and the server's ``verify_s`` (in its CPU) are counted.

Sizes above ``--max-measured`` (default 10^5) are extrapolated: the party's steps and the
server's checks per ID from the largest measured size (the elliptic-curve work is linear in
n), the server's intersection and the keyed hash measured at every size (they take seconds).
The bytes are counted exactly (32-byte points, key commitments, 64-byte proofs, int64
pseudonyms and positions; Flower's framing is not counted) and checked
against one in-process VFedCD run's wire record (``--check-n`` IDs per party).

    python simulations/bench/psi_cost.py [--sizes 10000 100000 1000000] [--max-measured 100000]
"""

from __future__ import annotations

import csv
import tempfile
import time
from pathlib import Path
from typing import Any

import _sims  # noqa: F401 - simulations/ on sys.path
import numpy as np
from harness import Clock, finish, log, markdown, parser, read_results, table

from fedcausal_flwr.data.csvdata import keyed_tokens
from fedcausal_flwr.secure import psi

K = 3
SHARED = 0.8
POINT = psi.POINT_BYTES
INT = 8  # bytes of an int64 pseudonym or position
PARTY_STEPS = ("blind_s", "hops_s", "proofs_s", "rows_s")


def id_sets(n: int, seed: int) -> list[list[str]]:
    """K sets of n IDs, ``SHARED`` of them in every set, in a random order per party."""
    rng = np.random.default_rng(seed)
    common = [f"person-{i:09d}" for i in range(int(SHARED * n))]
    out = []
    for m in range(K):
        own = [f"party{m}-{i:09d}" for i in range(n - len(common))]
        ids = common + own
        out.append([ids[i] for i in rng.permutation(n)])
    return out


def cpu(fn, *args):
    """``(result, CPU seconds)`` of ``fn(*args)``."""
    t0 = time.process_time()
    out = fn(*args)
    return out, time.process_time() - t0


def psi_measured(sets: list[list[str]]) -> dict[str, Any]:
    """The PSI's steps on every party and the server, CPU seconds each; the intersection
    checked against the plaintext one. Since issue 35 a party also commits to its key and
    proves each hop (``proofs_s``), and the server checks every party's own set and every
    hop's proof before it relays (``verify_s``; ``server_s`` includes it)."""
    keys = [psi.new_key() for _ in range(K)]
    commits = [psi.commitment(k) for k in keys]
    perms = [psi.random_order(len(s)) for s in sets]
    blind, hops, proofs = [0.0] * K, [0.0] * K, [0.0] * K
    verify, proved = 0.0, True
    cur = {}
    for m in range(K):
        cur[m], blind[m] = cpu(lambda m=m: psi.blinded(psi.hashed_points(sets[m]), keys[m],
                                                       perms[m]))
        problem, t = cpu(psi.points_problem, cur[m])
        verify += t
        proved &= problem is None
    for h in range(1, K):
        nxt = {}
        for j in range(K):
            start = (j - h) % K
            label = psi.hop_label(h, start, j, K)
            nxt[start], t = cpu(psi.reblinded, cur[start], keys[j])
            hops[j] += t
            proof, t = cpu(psi.hop_proof, cur[start], nxt[start], keys[j], label)
            proofs[j] += t
            ok, t = cpu(psi.hop_proof_ok, cur[start], nxt[start], commits[j], proof, label)
            verify += t
            proved &= ok
        cur = nxt
    positions, server = cpu(psi.common_positions, [cur[m] for m in range(K)])
    rows, t_rows = [], [0.0] * K
    for m in range(K):
        r, t_rows[m] = cpu(psi.rows_of, perms[m], positions[m], len(sets[m]))
        rows.append(r)
    aligned = [[sets[m][i] for i in rows[m]] for m in range(K)]
    plain = set(sets[0]).intersection(*sets[1:])
    ok = all(a == aligned[0] for a in aligned) and set(aligned[0]) == plain \
        and len(aligned[0]) == len(plain)
    party = [blind[m] + hops[m] + proofs[m] + t_rows[m] for m in range(K)]
    return {"blind_s": blind, "hops_s": hops, "proofs_s": proofs, "rows_s": t_rows,
            "party_s": party, "verify_s": verify, "intersect_s": server,
            "server_s": server + verify, "shared": len(plain),
            "equals_plaintext": ok and proved}


def server_only(n: int, seed: int) -> float:
    """The server's intersection of K fully blinded sets of n random points (80% shared):
    CPU seconds (no elliptic-curve work: the points' values do not matter to it)."""
    rng = np.random.default_rng(seed)
    common = rng.integers(0, 256, (int(SHARED * n), POINT), dtype=np.uint8)
    sets = []
    for _ in range(K):
        own = rng.integers(0, 256, (n - len(common), POINT), dtype=np.uint8)
        sets.append(np.vstack([common, own])[rng.permutation(n)])
    return cpu(psi.common_positions, sets)[1]


def keyed_measured(sets: list[list[str]]) -> dict[str, Any]:
    """The keyed hash: each party's HMAC tokens (and its sort), the server's intersect1d."""
    key = b"a-key-the-parties-share"
    tokens, party = [], []
    for s in sets:
        t, sec = cpu(lambda s=s: np.sort(keyed_tokens(s, key)))
        tokens.append(t)
        party.append(sec)
    shared, server = cpu(lambda: np.intersect1d(np.intersect1d(tokens[0], tokens[1]),
                                                tokens[2]))
    return {"party_s": party, "server_s": server, "shared": len(shared)}


def psi_bytes(n: int, shared: int) -> dict[str, int]:
    """Bytes on the wire of the PSI, all parties together: the blinded sets up, every hop's
    set down and back with its proof up, each party's key commitment up, each party's
    positions down with the first phase."""
    blind = K * n * POINT + K * POINT
    hops = (K - 1) * K * 2 * n * POINT
    proofs = (K - 1) * K * psi.PROOF_BYTES
    return {"up": blind + hops // 2 + proofs, "down": hops // 2 + K * shared * INT,
            "total": blind + hops + proofs + K * shared * INT}


def keyed_bytes(n: int, shared: int) -> dict[str, int]:
    """Bytes of the keyed hash: the pseudonyms up at discovery, the shared ones down."""
    return {"up": K * n * INT, "down": K * shared * INT, "total": K * (n + shared) * INT}


def wire_check(n: int, seed: int) -> dict[str, Any]:
    """One in-process VFedCD run on K own CSVs aligned by PSI (mock backend, one epoch): the
    PSI phases' array bytes in its wire record against :func:`psi_bytes`."""
    from fedcausal_flwr.appconfig import glue
    from fedcausal_flwr.client_app import app as client_app
    from fedcausal_flwr.testing import InProcessGrid
    from tests.helpers.faults import SMALL

    sets = id_sets(n, seed)
    rng = np.random.default_rng(seed)
    rc = {**SMALL["vfedcd"][0], "vertical.data": "node", "vertical.parts": "1,1,1",
          "vertical.num-epochs": 1, "vertical.batch": 64, "min-nodes": K,
          "node-wait-s": 5.0}
    with tempfile.TemporaryDirectory() as tmp:
        cfgs = {}
        for m, ids in enumerate(sets):
            path = Path(tmp) / f"p{m}.csv"
            with open(path, "w", newline="") as f:
                w = csv.writer(f)
                w.writerow(["id", f"v{m}"])
                w.writerows([[i, float(rng.standard_normal())] for i in ids])
            cfgs[m] = {"data-path": str(path), "vfedcd-accept-backends": "mock",
                       "vfedcd-min-key-bits": 256}
        strategy = glue("vfedcd").strategy("vfedcd", rc)
        res = strategy.start(grid=InProcessGrid(client_app, K, rc, cfgs))
    wire = strategy.wire_summary()
    arrays = sum(v["bytes"] for k, v in wire.items() if "psi" in k)
    shared = res.metrics["samples"]["shared"]
    expect = psi_bytes(n, shared)
    return {"n": n, "status": res.status, "shared": shared, "psi_array_bytes": arrays,
            "formula_array_bytes": expect["total"] - K * shared * INT,
            "exchanges": sum(v["messages"] for k, v in wire.items()
                             if "psi" in k and k.endswith(" down")) // K}


def main() -> None:
    ap = parser(__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--max-measured", type=int, default=100_000,
                    help="largest n whose PSI party work is measured (above: extrapolated)")
    ap.add_argument("--exchange-s", type=float, default=7.0,
                    help="seconds per relayed exchange in a deployment")
    ap.add_argument("--check-n", type=int, default=200)
    ap.add_argument("--seed", type=int, default=100)
    args = ap.parse_args()
    if args.quick:
        args.sizes, args.max_measured, args.check_n = [1000, 10_000], 1000, 50
    clock = Clock()
    rows: dict[str, Any] = {}
    per_id = None
    for n in args.sizes:
        sets = id_sets(n, args.seed)
        keyed = keyed_measured(sets)
        if n <= args.max_measured:
            p = psi_measured(sets)
            per_id = {k: [v / n for v in p[k]] for k in PARTY_STEPS}
            verify_per_id = p["verify_s"] / n
            p["measured"] = True
        else:
            p = {k: [v * n for v in per_id[k]] for k in per_id}
            p["party_s"] = [sum(p[k][m] for k in per_id) for m in range(K)]
            intersect = server_only(n, args.seed)
            p.update(verify_s=verify_per_id * n, intersect_s=intersect,
                     server_s=intersect + verify_per_id * n, shared=keyed["shared"],
                     equals_plaintext=None, measured=False)
        p["bytes"] = psi_bytes(n, p["shared"])
        p["exchanges"] = K
        p["deployed_s"] = max(p["party_s"]) + p["server_s"] + K * args.exchange_s
        keyed["bytes"] = keyed_bytes(n, keyed["shared"])
        keyed["exchanges"] = 0
        keyed["deployed_s"] = max(keyed["party_s"]) + keyed["server_s"]
        rows[str(n)] = {"psi": p, "keyed": keyed}
        how = "measured" if p["measured"] else "extrapolated"
        log(f"n {n}: PSI party {max(p['party_s']):.1f} s ({how}), "
            f"server {p['server_s']:.2f} s, {p['bytes']['total'] / 1e6:.1f} MB; keyed party "
            f"{max(keyed['party_s']):.2f} s, {keyed['bytes']['total'] / 1e6:.1f} MB")
    check = wire_check(args.check_n, args.seed)
    checks = {
        "PSI intersection equals the plaintext one (every measured size)":
            "PASS" if all(r["psi"]["equals_plaintext"] for r in rows.values()
                          if r["psi"]["measured"]) else "FAIL",
        "in-process run's PSI array bytes equal the count":
            "PASS" if check["psi_array_bytes"] == check["formula_array_bytes"]
            and check["status"] == "completed" and check["exchanges"] == K else "FAIL",
    }
    log(table(["n per party", "method", "party CPU s", "server CPU s", "MB", "exchanges",
               "deployed s"],
              [[n, m, f"{max(r[m]['party_s']):.2f}", f"{r[m]['server_s']:.2f}",
                f"{r[m]['bytes']['total'] / 1e6:.1f}", r[m]["exchanges"],
                f"{r[m]['deployed_s']:.0f}"] for n, r in rows.items() for m in ("psi", "keyed")]))
    finish("psi_cost", args, clock, checks, "VFedCD ID alignment cost",
           {"parties": K, "shared_fraction": SHARED, "sizes": rows, "wire_check": check})


def table_psi_cost() -> str:
    """Issue 24.1's cost rows (psi_cost.json): per n, PSI beside the keyed hash."""
    r = read_results("psi_cost")
    s = r["settings"]
    out = []
    for n, x in r["sizes"].items():
        for m, name in (("psi", "PSI"), ("keyed", "keyed hash")):
            v = x[m]
            how = "" if m == "keyed" or v["measured"] else " (extrapolated)"
            out.append([f"{int(n):,}", name, f"{max(v['party_s']):.1f}{how}",
                        f"{v['server_s']:.2f}", f"{v['bytes']['up'] / 1e6:.1f}",
                        f"{v['bytes']['down'] / 1e6:.1f}", v["exchanges"],
                        f"{v['deployed_s']:.0f}"])
    c = r["wire_check"]
    return (f"**VFedCD ID alignment, 3 parties, {r['shared_fraction']:.0%} of the IDs shared** "
            f"(`{r['meta']['script']}`, {r['meta']['finished']}; one core of a loaded 2-core "
            f"machine, one measurement per size). Party CPU: the slowest party's whole share "
            f"of the alignment (they work in parallel); PSI above "
            f"{int(s['max_measured']):,} IDs extrapolated linearly from the largest measured "
            f"size, the server's intersection measured. Server CPU includes its checks of "
            f"every party's own set and every hop's proof (issue 35; extrapolated with the "
            f"party's steps). MB: arrays and ids on the wire, all "
            f"parties together. Deployed: party + server CPU + the added exchanges at "
            f"{s['exchange_s']:g} s. Checked: the intersection equals the plaintext one; an "
            f"in-process run's PSI bytes ({c['n']} IDs per party: {c['psi_array_bytes']:,}) "
            f"equal the count.\n\n"
            + markdown(["IDs per party", "method", "party CPU s", "server CPU s", "MB up",
                        "MB down", "added exchanges", "deployed s"], out))


TABLES = {"psi_cost": table_psi_cost}


if __name__ == "__main__":
    main()
