"""Lagged design matrices for SVAR(p) / DBN fitting.

The model is ``x_t' = x_t' W + x_{t-1}' A_1 + ... + x_{t-p}' A_p + u_t'``; an algorithm fits it
to ``Xt`` (rows x_t') and ``Xlag = [X_{t-1} ... X_{t-p}]`` (block i holds the lag-i values).
"""

from __future__ import annotations

import numpy as np

Pair = tuple[np.ndarray, np.ndarray]

PADS = ("zero", "drop")


def finite_matrix(X: np.ndarray, name: str = "X", missing: bool = False) -> np.ndarray:
    """Return X as a float 2-D array, or raise ValueError naming the first NaN/inf cell
    (``missing``: NaN, a missing value, is allowed; inf never)."""
    X = np.asarray(X, dtype=float)
    if X.ndim != 2:
        raise ValueError(f"{name} must be 2-D (time x variables), got shape {X.shape}")
    bad = np.isinf(X) if missing else ~np.isfinite(X)
    if bad.any():
        r, c = np.argwhere(bad)[0]
        raise ValueError(f"{name} contains NaN/inf values; first at row {r}, column {c}")
    return X


def _segment_lags(X: np.ndarray, p: int, pad: str) -> Pair:
    T, d = X.shape
    Xlag = np.zeros((T, p * d))
    for i in range(1, p + 1):
        Xlag[i:, (i - 1) * d:i * d] = X[:-i]
    if pad == "drop":
        return X[p:].copy(), Xlag[p:]
    return X.copy(), Xlag


def lagged(X: np.ndarray, p: int, *, segment_length: int | None = None, pad: str = "zero",
           missing: bool = False) -> Pair:
    """Split a series into the current values and their p lags.

    Parameters
    ----------
    X : (T, d) array, rows ordered in time.
    p : lag order, >= 1.
    segment_length : if given, X is read as consecutive segments (replicates, chunks) of this
        many rows and lags never cross a segment boundary; T must be a multiple of it.
    pad : ``"zero"`` keeps every row and gives the first p rows of each segment zero lags
        (official FDBNL code); ``"drop"`` drops those rows.
    missing : allow NaN cells (missing values); they stay NaN in ``Xt`` and ``Xlag``.

    Returns
    -------
    Xt : (T', d) array and Xlag : (T', p d) array with ``Xlag[:, (i-1)d:i d]`` = X shifted by
    i; T' = T for ``"zero"`` and T - p * (number of segments) for ``"drop"``.
    """
    X = finite_matrix(X, missing=missing)
    if isinstance(p, bool) or not isinstance(p, int | np.integer) or p < 1:
        raise ValueError(f"lag order p must be an integer >= 1, got {p!r}")
    if pad not in PADS:
        raise ValueError(f"pad must be one of {PADS}, got {pad!r}")
    T = X.shape[0]
    L = T if segment_length is None else int(segment_length)
    if segment_length is not None and (L < 1 or T % L):
        raise ValueError(f"segment_length={segment_length} must be >= 1 and divide T={T}")
    if L < p + 1:
        raise ValueError(f"a segment has {L} rows: fewer rows than the lag p={p} plus one")
    parts = [_segment_lags(X[s:s + L], p, pad) for s in range(0, T, L)]
    return np.vstack([a for a, _ in parts]), np.vstack([b for _, b in parts])


def lagged_segments(segments: list[np.ndarray], p: int, pad: str = "drop",
                    missing: bool = False) -> Pair:
    """``lagged`` over a list of separate series (possibly of different lengths), stacked."""
    if not segments:
        raise ValueError("no segments given")
    parts = [lagged(S, p, pad=pad, missing=missing) for S in segments]
    return np.vstack([a for a, _ in parts]), np.vstack([b for _, b in parts])
