"""What FedTrees' sites regress on, and how the server weighs regulators, on DREAM4 size 100
(issue 34's AUROC gap: 0.734 against the pooled trees' 0.749).

Variants, each against the App's defaults (``base``: two lags, 300 trees, sqrt features, K = 5):

* ``contemporaneous``: each site's forest for x_j(t) also sees the other variables at time t
  (GENIE3's steady-state inputs beside dynGENIE3's lags); the score of i -> j sums i's
  importances over lag 0 and the lags;
* ``hubs``: the server's ranking of ``base`` with each regulator's row weighted by its share
  of all importance, ``S_ij * r_i / mean(r)`` with ``r_i = sum_k S_ik`` over k != i (in-silico
  networks have a few regulators of many genes; no extra exchange);
* ``both``: ``hubs`` applied to ``contemporaneous``.

The rule, written before any variant was scored: on the design networks 1-2 a variant
replaces ``base`` if its mean AUROC exceeds ``base``'s by at least 0.005 and its mean AUPR is
not lower by more than 0.005; the best such variant by AUROC wins. Networks 3-5 are run only
with ``--networks 3,4,5`` after the choice, to report.

Result (2026-12-04, networks 1-2, results/fedtrees_inputs.json): base 0.741/0.179,
contemporaneous 0.734/0.123, hubs 0.737/0.166, both 0.726/0.122 (mean AUROC/AUPR): no variant
passes the rule. Second round, rule unchanged, written before it ran: ``--trees 1000 --variants
base`` (more trees, less Monte Carlo noise in a 40-row site's importances) against the
300-tree base: 0.743/0.178 (results/fedtrees_inputs_trees1000.json), +0.002 AUROC, below the
rule's 0.005. The defaults stay; networks 3-5 were not run.

    python simulations/studies/fedtrees_inputs.py               # networks 1, 2
    python simulations/studies/fedtrees_inputs.py --networks 3,4,5
    python simulations/studies/fedtrees_inputs.py --trees 1000 --variants base \
        --out simulations/results/fedtrees_inputs_trees1000.json
"""

from __future__ import annotations

from collections.abc import Sequence

import _sims  # noqa: F401 - simulations/ on sys.path
import numpy as np
from harness import log, parser, write_results

from fedcausal_flwr.data.series import client_series, windows
from fedcausal_flwr.metrics import score_auc
from fedcausal_flwr.trees import model
from fedcausal_flwr.trees.data import TreesData
from fedcausal_flwr.trees.settings import FedTreesSettings

NAME = "fedtrees_inputs"
K = 5
VARIANTS = ("base", "contemporaneous", "hubs", "both")


def with_present(Y: np.ndarray, X: np.ndarray, s: FedTreesSettings) -> np.ndarray:
    """((p + 1) d x d) importances of forests of x_j(t) on the other x(t) and the lags."""
    d = Y.shape[1]
    out = np.zeros((d + X.shape[1], d))
    for j in range(d):
        others = np.delete(np.arange(d), j)
        inputs = np.hstack([Y[:, others], X])
        imp = model.forest_importance(inputs, Y[:, [j]], s.trees, s.max_features,
                                      s.forest_seed, s.min_leaf, ids=[j])[:, 0]
        out[others, j] = imp[:d - 1]
        out[d:, j] = imp[d - 1:]
    return out


def hubs(S: np.ndarray) -> np.ndarray:
    """``S`` with row i weighted by its off-diagonal sum over the mean row sum."""
    r = (S * (1 - np.eye(len(S)))).sum(axis=1)
    return S * (r / max(r.mean(), 1e-300))[:, None]


def network(i: int, data, s: FedTreesSettings, variants: Sequence[str] = VARIANTS) -> dict:
    """Every variant's ranking AUROC / AUPR on network ``i``."""
    path = data / "dream4" / f"insilico_size100_{i}_timeseries.tsv"
    series, names, T = client_series({"data": "dream4", "data-path": str(path)}, s.lags, K,
                                     TreesData)
    d = len(names)
    regs = [model.window_regression(np.vstack(windows(x, s.lags)), d) for x in series]
    rows = [len(X) for X, _ in regs]
    lagged = [model.forest_importance(X, Y, s.trees, s.max_features, s.forest_seed, s.min_leaf)
              for X, Y in regs]
    S = model.summary(model.pooled(lagged, rows), d)
    scores = {"base": S, "hubs": hubs(S)}
    if {"contemporaneous", "both"} & set(variants):
        P = model.summary(model.pooled([with_present(Y, X, s) for X, Y in regs], rows), d)
        scores |= {"contemporaneous": P, "both": hubs(P)}
    return {"network": i, **{v: score_auc(scores[v], T) for v in variants}}


def main() -> None:
    ap = parser(__doc__, data=True)
    ap.add_argument("--networks", default="1,2")
    ap.add_argument("--trees", type=int, default=FedTreesSettings().trees)
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    args = ap.parse_args()
    s = FedTreesSettings(trees=args.trees)
    rows = []
    for i in (int(x) for x in args.networks.split(",")):
        rows.append(network(i, args.data, s, args.variants))
        log(f"network {i}: " + ", ".join(f"{v} {rows[-1][v]['auroc']:.3f}/"
                                         f"{rows[-1][v]['aupr']:.3f}" for v in args.variants))
    for v in args.variants:
        a = [r[v]["auroc"] for r in rows]
        p = [r[v]["aupr"] for r in rows]
        log(f"{v:16s} mean AUROC {np.mean(a):.3f}, AUPR {np.mean(p):.3f}")
    write_results(NAME, {"settings": s.asdict(), "networks": rows}, args.out)


if __name__ == "__main__":
    main()
