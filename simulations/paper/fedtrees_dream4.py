"""FedTrees on DREAM4 size 100 (issue 34): K = 5 sites of two replicates each, the App's
defaults (one lag, 300 trees, sqrt features), networks 1-2 for design and 3-5 for
evaluation; each run is the reference loop, which equals the Flower run
(``tests/trees/test_fedtrees.py``).

    python simulations/paper/fedtrees_dream4.py                 # all five networks (~2 min each)
    python simulations/paper/fedtrees_dream4.py --networks 1,2  # the design networks
"""

from __future__ import annotations

import _sims  # noqa: F401 - simulations/ on sys.path
import numpy as np
from harness import log, parser, write_results

from fedcausal_flwr.data.series import client_series, windows
from fedcausal_flwr.metrics import score_auc
from fedcausal_flwr.trees import model
from fedcausal_flwr.trees.data import TreesData
from fedcausal_flwr.trees.settings import FedTreesSettings

NAME = "fedtrees_dream4"
K = 5


def network(i: int, data, s: FedTreesSettings) -> dict:
    """One network's ranking AUROC / AUPR and bytes up."""
    path = data / "dream4" / f"insilico_size100_{i}_timeseries.tsv"
    rc = {"data": "dream4", "data-path": str(path)}
    series, names, T = client_series(rc, s.lags, K, TreesData)
    Zs = [np.vstack(windows(x, s.lags)) for x in series]
    est = model.reference(Zs, len(names), s.trees, s.max_features, s.forest_seed, s.min_leaf,
                          s.edge_factor)
    d = len(names)
    return {"network": i, **score_auc(est["score"], T), "exchanges": 1,
            "bytes_up": K * d * s.lags * d * 8}


def main() -> None:
    ap = parser(__doc__, data=True)
    ap.add_argument("--networks", default="1,2,3,4,5")
    args = ap.parse_args()
    s = FedTreesSettings()
    rows = []
    for i in (int(x) for x in args.networks.split(",")):
        rows.append(network(i, args.data, s))
        log(f"network {i}: AUROC {rows[-1]['auroc']:.3f}, AUPR {rows[-1]['aupr']:.3f}")
    for key in ("auroc", "aupr"):
        v = [r[key] for r in rows]
        log(f"mean {key} {np.mean(v):.3f} +- {np.std(v, ddof=1) if len(v) > 1 else 0:.3f}")
    write_results(NAME, {"settings": s.asdict(), "networks": rows}, args.out)


if __name__ == "__main__":
    main()
