"""FedPC's test level and orientation on Sachs' observational rows, with one edge set held out
(issue 34: "Sachs with one edge set held out of any choice").

The 18 edges of ``cyto_full_target.csv`` are split at random (``--split-seed``, default 0)
into a development half A and a held-out half B. A choice sees only the pairs outside B: the
development F1 scores the graph with every pair (i, j) of an edge of B removed from both the
truth and the prediction; the held-out F1 scores only those pairs. The rule, written before
the grid was scored: the (alpha, orientation) with the highest development F1, ties to the
smaller alpha; the App's default (alpha 0.05, likelihood ratio) on ties. K = 5 clients of the
853 observational rows; the reference loop (equal to the Flower run).

    python simulations/studies/fedpc_sachs_alpha.py
"""

from __future__ import annotations

import _sims  # noqa: F401 - simulations/ on sys.path
import numpy as np
from harness import fmt, log, markdown, parser, write_results

from fedcausal_flwr.constraint.data import client_series, windows
from fedcausal_flwr.constraint.learn import reference
from fedcausal_flwr.constraint.settings import FedPCSettings

NAME = "fedpc_sachs_alpha"
ALPHAS = (0.01, 0.05, 0.1, 0.2, 0.3)
ORIENTATIONS = ("likelihood-ratio", "pc")


def f1(G: np.ndarray, T: np.ndarray, mask: np.ndarray) -> float:
    """F1 of the directed edges of ``G`` against ``T`` on the pairs where ``mask`` holds."""
    g, t = G & mask, T & mask
    n = g.sum() + t.sum()
    return float(2 * (g & t).sum() / n) if n else 0.0


def shd(G: np.ndarray, T: np.ndarray) -> int:
    """Structural Hamming distance, a reversed edge counted once."""
    und = lambda M: np.triu(M | M.T, 1)  # noqa: E731
    wrong_dir = (G & T.T & ~T).sum()
    return int((und(G) ^ und(T)).sum() + wrong_dir)


def main() -> None:
    ap = parser(__doc__, data=True)
    ap.add_argument("--split-seed", type=int, default=0)
    args = ap.parse_args()
    rc = {"data": "sachs", "data-path": str(args.data / "sachs")}
    series, names, T = client_series(rc, 0, 5)
    T = np.asarray(T) != 0
    np.fill_diagonal(T, False)
    d = len(names)
    E = np.argwhere(T)
    held = E[np.random.default_rng(args.split_seed).permutation(len(E))[len(E) // 2:]]
    hidden = np.zeros((d, d), bool)
    hidden[held[:, 0], held[:, 1]] = hidden[held[:, 1], held[:, 0]] = True
    Zs = [np.vstack(windows(list(x), 0)) for x in series]
    rows = []
    for orient in ORIENTATIONS:
        for alpha in ALPHAS:
            out = reference(Zs, FedPCSettings(lags=0, alpha=alpha, orientation=orient), d, None)
            G = np.asarray(out["graph"]) != 0
            np.fill_diagonal(G, False)
            rows.append({"orientation": orient, "alpha": alpha, "edges": int(G.sum()),
                         "dev_f1": f1(G, T, ~hidden), "heldout_f1": f1(G, T, hidden),
                         "f1": f1(G, T, np.ones_like(T)), "shd": shd(G, T)})
    default = next(r for r in rows if r["alpha"] == 0.05 and r["orientation"] == ORIENTATIONS[0])
    best = max(rows, key=lambda r: (r["dev_f1"], r is default, -r["alpha"]))
    print(markdown(["orientation", "alpha", "edges", "dev F1 (A)", "held-out F1 (B)",
                    "F1 (all 18)", "SHD"],
                   [[r["orientation"], r["alpha"], r["edges"], fmt(r["dev_f1"], None, 3),
                     fmt(r["heldout_f1"], None, 3), fmt(r["f1"], None, 3), r["shd"]]
                    for r in rows]))
    log(f"chosen on A: {best['orientation']}, alpha {best['alpha']}: held-out F1 "
        f"{best['heldout_f1']:.3f}, F1 {best['f1']:.3f}, SHD {best['shd']} (target F1 >= 0.40)")
    write_results(NAME, {"split_seed": args.split_seed, "held_out": held.tolist(),
                         "rows": rows, "chosen": best}, args.out)


if __name__ == "__main__":
    main()
