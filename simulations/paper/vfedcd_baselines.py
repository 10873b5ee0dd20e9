"""Centralized baselines on pooled data beside VFedCD: DAGMA (linear and MLP, ``pip install
dagma``; skipped when absent). Same data (data-seed = seed, E = 4d), split and metric as
vfedcd_table1.py (SHD reversal = 1); each column mapped by ``--transforms`` (the VFedCD parties'
``transform``), fitted on the training rows.

    nice -n 10 python simulations/paper/vfedcd_baselines.py --d sachs 15 --seeds 0 1 2 3 4
    python simulations/paper/vfedcd_baselines.py --d sachs --mlp --transforms zscore yeo-johnson
"""

from __future__ import annotations

import time

import _sims  # noqa: F401 - simulations/ on sys.path
import numpy as np
from harness import DEFAULT_DATA, parser, settings, write_results

from fedcausal_flwr.metrics import graph_metrics
from fedcausal_flwr.vertical.data import TRANSFORMS, pooled_data, sachs, split_standardised


def f1(m: dict) -> float:
    p, r = m["precision"], m["tpr"]
    return 2 * p * r / (p + r) if p + r else 0.0


def main() -> None:
    ap = parser(__doc__, seeds=[0])
    ap.add_argument("--d", nargs="+", default=["sachs", "15"])
    ap.add_argument("--mlp", action="store_true", help="also DAGMA-MLP (slow)")
    ap.add_argument("--transforms", nargs="+", default=["zscore"], choices=TRANSFORMS)
    a = ap.parse_args()
    try:
        from dagma.linear import DagmaLinear
    except ImportError:
        print("dagma is not installed: pip install dagma")
        return
    rows = []
    for key, seed, tf in ((k, s, t) for k in a.d for s in ([0] if k == "sachs" else a.seeds)
                          for t in a.transforms):
        if key == "sachs":
            X, A, _ = sachs(DEFAULT_DATA / "sachs")
        else:
            X, A = pooled_data({"d": int(key), "edges": 4 * int(key), "n": 1000,
                                "data-seed": seed})
        tr, _ = split_standardised(X, 0.2, tf)
        t0 = time.time()
        W = DagmaLinear(loss_type="l2").fit(tr, lambda1=0.02)
        m = graph_metrics((np.abs(W) > 0.3).astype(float), A)
        print(f"d={key} seed={seed} {tf} DAGMA-linear (pooled): SHD {m['shd_rev1']} "
              f"F1 {f1(m):.3f} nnz {m['nnz']} ({time.time() - t0:.0f}s)", flush=True)
        rows.append({"d": key, "seed": seed, "transform": tf, "method": "DAGMA-linear",
                     "shd": m["shd_rev1"], "f1": f1(m), "nnz": m["nnz"]})
        if a.mlp:
            import torch
            from dagma.nonlinear import DagmaMLP, DagmaNonlinear

            torch.manual_seed(0)
            model = DagmaMLP(dims=[tr.shape[1], 10, 1], bias=True, dtype=torch.double)
            W = DagmaNonlinear(model, dtype=torch.double).fit(tr, lambda1=0.02, lambda2=0.005)
            m = graph_metrics((np.abs(W) > 0.3).astype(float), A)
            print(f"d={key} seed={seed} {tf} DAGMA-MLP (pooled): SHD {m['shd_rev1']} "
                  f"F1 {f1(m):.3f} nnz {m['nnz']} ({time.time() - t0:.0f}s)", flush=True)
            rows.append({"d": key, "seed": seed, "transform": tf, "method": "DAGMA-MLP",
                         "shd": m["shd_rev1"], "f1": f1(m), "nnz": m["nnz"]})
    write_results("vfedcd_baselines", {"settings": settings(a), "rows": rows}, a.out)


if __name__ == "__main__":
    main()
