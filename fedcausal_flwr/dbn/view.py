"""How a FDBNL/PFDBNL result reads as a graph: ``W`` (lag 0), then ``A1``..``Ap``,
thresholded by default at the run's ``tau_w`` and ``tau_a`` (at its chosen ``tau_chosen``
with ``lambda_select="holdout"``); a replicated run's selection frequencies ride along
(:attr:`Layer.frequency`), and a run with prior knowledge keeps its required edges at any
threshold (:attr:`Layer.required`); an unidentified entry (no site informs it) is NaN."""

from __future__ import annotations

import numpy as np

from fedcausal_flwr.results import Layer, RunResult, labels_or_default, run_setting


def layers(r: RunResult, client: int | None = None) -> list[Layer]:
    """``W`` and the lag blocks of ``A``; ``client``: PFDBNL's personalized graph."""
    est = r.estimates
    if client is not None and r.algorithm != "pfdbnl":
        raise ValueError(f"client={client}: only PFDBNL learns a graph per client")
    if "W" not in est:
        return []
    W, A = np.asarray(est["W"], dtype=float), np.asarray(est["A"], dtype=float)
    if client is not None:
        ids = [int(c) for c in np.ravel(est.get("client_ids", []))]
        if client not in ids:
            raise ValueError(f"client {client} is not among this run's clients {ids}")
        i = ids.index(client)
        W = np.asarray(est["W_local"], dtype=float)[i]
        A = np.asarray(est["A_local"], dtype=float)[i]
    v, _ = labels_or_default(r, "W", W.shape)
    d = W.shape[0]
    suffix = "_local_frequency" if client is not None else "_frequency"
    W_f, A_f = (est.get(f"W{suffix}"), est.get(f"A{suffix}"))
    if client is not None and W_f is not None:
        W_f, A_f = W_f[i], A_f[i]
    W_f, A_f = (None, None) if W_f is None else (np.asarray(W_f), np.asarray(A_f))
    W_r, A_r = (np.asarray(est[k], dtype=bool) if k in est else None
                for k in ("W_required", "A_required"))
    out = [Layer("W", 0, W, v, v, W_f, W_r)]
    for k in range(1, A.shape[0] // d + 1 if d else 1):
        rows = slice((k - 1) * d, k * d)
        out.append(Layer(f"A{k}", k, A[rows], v, v, None if A_f is None else A_f[rows],
                         None if A_r is None else A_r[rows]))
    return out


def thresholds(r: RunResult) -> dict[str, float]:
    """``tau_w`` for ``W``, ``tau_a`` for each ``A<k>`` (the run's settings; with a penalty
    path the chosen ``tau_chosen`` for both)."""
    if "tau_chosen" in r.estimates:
        tau_w = tau_a = float(np.asarray(r.estimates["tau_chosen"]))
    else:
        tau_w, tau_a = float(run_setting(r, "tau_w")), float(run_setting(r, "tau_a"))
    return {layer.name: tau_w if layer.lag == 0 else tau_a for layer in layers(r)}
