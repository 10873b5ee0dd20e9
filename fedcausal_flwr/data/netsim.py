"""NetSim fMRI simulations (Smith et al. 2011).

``simN.mat`` (MATLAB v5) holds ``ts`` ((subjects * T) x d, subjects stacked in order), ``net``
(subjects x d x d, ``net[s, i, j] != 0`` for i -> j, diagonal -1) and usually the scalars
``Nnodes``, ``Nsubjects``, ``Ntimepoints``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fedcausal_flwr.data.nodefiles import check_columns, check_rows, checked_file, logged
from fedcausal_flwr.data.timeseries import Pair, finite_matrix, lagged


def _scalar(mat: dict, key: str) -> int | None:
    v = np.asarray(mat[key]).ravel() if key in mat else np.array([])
    return int(v[0]) if v.size and np.issubdtype(v.dtype, np.number) else None


def load_netsim(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """Read a NetSim ``.mat`` file.

    Returns
    -------
    ts : (subjects, T, d) array, one series per subject.
    net : (subjects, d, d) array of true connection weights.
    """
    if not Path(path).expanduser().exists():
        raise FileNotFoundError(f"{path}: no such NetSim .mat file")
    checked_file(path, f"{path} (NetSim .mat file)")
    import scipy.io  # only a NetSim run reads a .mat: lazy

    try:
        mat = scipy.io.loadmat(str(path))
    except Exception as e:  # noqa: BLE001 - scipy raises IndexError, ValueError, TypeError ...
        raise ValueError(logged(f"{path}: not a readable MATLAB .mat file "
                                f"({type(e).__name__})", str(e))) from None
    if "ts" not in mat or "net" not in mat:
        raise ValueError(f"{path}: expected variables 'ts' and 'net', found "
                         f"{sorted(k for k in mat if not k.startswith('__'))}")
    try:
        ts = finite_matrix(mat["ts"], name=f"{path}: ts")
        net = np.asarray(mat["net"], dtype=float)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{path}: {e}" if str(path) not in str(e) else str(e)) from e
    check_columns(ts.shape[1], f"{path}: ts")
    check_rows(ts.shape[0], f"{path}: ts")
    if net.ndim not in (2, 3):
        raise ValueError(f"{path}: net has shape {net.shape}; expected subjects x d x d")
    if net.ndim == 2:  # a single subject saved without its leading axis
        net = net[None]
    S = _scalar(mat, "Nsubjects") or net.shape[0]
    d = _scalar(mat, "Nnodes") or ts.shape[1]
    T = _scalar(mat, "Ntimepoints") or ts.shape[0] // S
    if ts.shape != (S * T, d) or net.shape != (S, d, d):
        raise ValueError(f"{path}: ts {ts.shape} / net {net.shape} do not match "
                         f"{S} subjects x {T} time points x {d} nodes")
    return ts.reshape(S, T, d), net


def netsim_truth(net_s: np.ndarray) -> np.ndarray:
    """0/1 adjacency of one subject, diagonal included (official scoring: binarize(net))."""
    return (np.asarray(net_s) != 0).astype(int)


def netsim_chunks(ts_s: np.ndarray, K: int, p: int = 1) -> list[Pair]:
    """One subject's (T x d) series split into K contiguous chunks, lags within each chunk.

    The first p rows of each chunk are dropped; chunk lengths differ by at most one row when K
    does not divide T (200 steps, K = 5: 40 rows, 39 transitions at p = 1).
    """
    ts_s = finite_matrix(ts_s, name="ts_s")
    if not 1 <= K <= ts_s.shape[0]:
        raise ValueError(f"K={K} chunks need 1 <= K <= T={ts_s.shape[0]}")
    return [lagged(chunk, p, pad="drop") for chunk in np.array_split(ts_s, K)]
