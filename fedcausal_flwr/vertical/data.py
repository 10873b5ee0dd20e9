"""Vertically partitioned data for VFedCD: parties hold disjoint columns of aligned samples.

Synthetic data follow the SDCD nonlinear additive-noise model of the paper's experiments: an ER
DAG with ``E`` edges, each mechanism an MLP([100], sigmoid, no bias) of the standardised
parents with weights +-U[0.5, 2], Gaussian noise of scale 1, roots N(0, 1). The data keys of
the run config and their defaults are :class:`VerticalData` (the App declares the same).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from fedcausal_flwr.data.sachs import SACHS_OBSERVATIONAL, sachs  # noqa: F401 - re-exported
from fedcausal_flwr.settings import MAX_ROWS, MAX_VARS, Settings, setting

TRANSFORMS = ("zscore", "yeo-johnson")


@dataclass(frozen=True)
class VerticalData(Settings):
    """The built-in data a run config describes, with the App's defaults (the one source).

    ``data``: "synthetic" (the ANM above) or "sachs" (``data-path``: its directory);
    "node": each party reads its own CSV (node config ``data-path``; no truth);
    ``d`` attributes, ``edges`` edges (0: the paper's E = 4d; at most d(d-1)/2), ``n`` samples
    and ``data_seed`` of the synthetic set; ``parts``: party sizes, e.g. "5,5,5" (default: K
    contiguous near-equal blocks); ``test_fraction``: the last rows held out for testing;
    ``transform``: what each party does to its own columns before training (:func:`fitted_scaler`):
    "zscore" or "yeo-johnson" (a power transform per column, then z-score).
    """

    section: ClassVar[str] = "vertical"

    data: str = setting("synthetic", "data", choices=("synthetic", "sachs", "node"))
    data_path: str = setting("", "data-path")
    d: int = setting(10, "d", ge=1, le=MAX_VARS)
    edges: int = setting(0, "edges", ge=0, le=MAX_VARS * MAX_VARS)
    n: int = setting(1000, "n", ge=2, le=MAX_ROWS)
    data_seed: int = setting(0, "data-seed", ge=0)
    parts: str = setting("", "parts")
    test_fraction: float = setting(0.2, "test-fraction", ge=0, lt=1)
    transform: str = setting("yeo-johnson", "transform", choices=TRANSFORMS)


def random_dag(d: int, edges: int, rng: np.random.Generator) -> np.ndarray:
    """Binary adjacency (i -> j) of a random DAG with ``edges`` edges (ER, random order)."""
    pairs = [(i, j) for i in range(d) for j in range(i + 1, d)]
    pick = rng.choice(len(pairs), size=min(edges, len(pairs)), replace=False)
    A = np.zeros((d, d))
    for p in pick:
        A[pairs[p]] = 1.0
    perm = rng.permutation(d)
    return A[np.ix_(perm, perm)]


def topological_order(A: np.ndarray) -> list[int]:
    """A topological order of the DAG ``A`` (i -> j means A[i, j] != 0)."""
    indeg = (A != 0).sum(axis=0).astype(int)
    order, ready = [], [j for j in range(len(A)) if indeg[j] == 0]
    while ready:
        i = ready.pop(0)
        order.append(i)
        for j in np.flatnonzero(A[i]):
            indeg[j] -= 1
            if indeg[j] == 0:
                ready.append(int(j))
    if len(order) != len(A):
        raise ValueError("graph has a cycle")
    return order


def simulate_anm(A: np.ndarray, n: int, rng: np.random.Generator, hidden: int = 100
                 ) -> np.ndarray:
    """Samples of the nonlinear ANM ``X_j = MLP_j(standardised PA_j) + N(0, 1)``."""
    d = len(A)
    X = np.zeros((n, d))
    for j in topological_order(A):
        pa = np.flatnonzero(A[:, j])
        noise = rng.standard_normal(n)
        if pa.size == 0:
            X[:, j] = noise
            continue
        P = X[:, pa]
        P = (P - P.mean(0)) / (P.std(0) + 1e-12)
        w1 = rng.uniform(0.5, 2.0, (pa.size, hidden)) * rng.choice([-1, 1], (pa.size, hidden))
        w2 = rng.uniform(0.5, 2.0, hidden) * rng.choice([-1, 1], hidden)
        X[:, j] = (1 / (1 + np.exp(-(P @ w1)))) @ w2 + noise
    return X


def blocks(d: int, parts: int | Sequence[int]) -> list[np.ndarray]:
    """Column index sets S_k: ``parts`` sizes, or K contiguous near-equal blocks."""
    sizes = ([d // parts + (i < d % parts) for i in range(parts)] if isinstance(parts, int)
             else [int(s) for s in parts])
    if sum(sizes) != d or min(sizes) < 1:
        raise ValueError(f"party sizes {sizes} must be positive and sum to d={d}")
    ends = np.cumsum(sizes)
    return [np.arange(e - s, e) for s, e in zip(sizes, ends, strict=True)]


def pooled_data(rc: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """The pooled data (n x d) and true graph (d x d) that the run config describes."""
    c = VerticalData.from_run_config(rc)
    if c.data == "node":
        raise ValueError("run config data = 'node' but this party has no node config "
                         "data-path (its own CSV)")
    if c.data == "sachs":
        X, A, _ = sachs(c.data_path)
        return X, A
    rng = np.random.default_rng(c.data_seed)
    A = random_dag(c.d, c.edges or 4 * c.d, rng)
    return simulate_anm(A, c.n, rng), A


def party_blocks(rc: Mapping[str, Any], d: int, k: int) -> list[np.ndarray]:
    """S_k of each party from run-config ``parts`` (e.g. "5,5,5") or K equal blocks."""
    parts = VerticalData.from_run_config(rc).parts
    return blocks(d, [int(s) for s in parts.split(",")] if parts else k)


_EXPONENTS: dict[bytes, list[float]] = {}


def _yeojohnson_exponents(tr: np.ndarray) -> list[float]:
    """Each column's Yeo-Johnson exponent, by maximum likelihood on its observed cells;
    remembered by the rows' digest (a party builds its client for every message, and the fit
    took 0.36 s of each: 80% of a profiled default in-process run)."""
    from scipy import stats

    tr = np.ascontiguousarray(tr, dtype=float)
    key = hashlib.sha256(tr.tobytes() + str(tr.shape).encode()).digest()
    if key not in _EXPONENTS:
        if len(_EXPONENTS) >= 64:
            _EXPONENTS.pop(next(iter(_EXPONENTS)))
        _EXPONENTS[key] = [float(stats.yeojohnson(c[~np.isnan(c)])[1]) for c in tr.T]
    return _EXPONENTS[key]


def fitted_scaler(tr: np.ndarray, transform: str = "zscore",
                  names: Sequence[str] | None = None) -> Callable[[np.ndarray], np.ndarray]:
    """The column-wise map fitted on the rows ``tr``: "zscore" (mean 0, sd 1 on ``tr``) or
    "yeo-johnson" (Yeo & Johnson 2000: each column's power transform, its exponent by maximum
    likelihood on ``tr``, then z-scored); near-Gaussian columns keep their shape, skewed
    positive ones (intensities, concentrations) come out near their logarithm. Missing cells
    (NaN) stay NaN: every column is fitted on its observed cells."""
    from scipy import stats

    if transform not in TRANSFORMS:
        raise ValueError(f"transform {transform!r}: expected one of {', '.join(TRANSFORMS)}")
    missing = bool(np.isnan(tr).any())
    lams = _yeojohnson_exponents(tr) if transform == "yeo-johnson" else None

    def power(x: np.ndarray) -> np.ndarray:
        if lams is None:
            return x
        y = np.column_stack([stats.yeojohnson(c, lam) for c, lam in zip(x.T, lams, strict=True)])
        for j in np.flatnonzero(~(np.isfinite(y) | np.isnan(x)).all(0)):
            raise ValueError(f"column {names[j] if names else j}: the Yeo-Johnson transform "
                             f"(exponent {lams[j]:.3g}) overflows; use transform = 'zscore'")
        return y

    p = power(tr)
    if missing:
        mu, sd = np.nanmean(p, 0), np.nanstd(p, 0) + 1e-12
    else:
        mu, sd = p.mean(0), p.std(0) + 1e-12
    return lambda x: (power(x) - mu) / sd


def split_standardised(X: np.ndarray, test_fraction: float = 0.2, transform: str = "zscore"
                       ) -> tuple[np.ndarray, np.ndarray]:
    """First (1 - f) rows for training, the rest for test, both mapped by the
    :func:`fitted_scaler` of the training rows (default: z-scored with train statistics)."""
    n_train = int(round(len(X) * (1 - test_fraction)))
    tr, te = X[:n_train], X[n_train:]
    scale = fitted_scaler(tr, transform)
    return scale(tr), scale(te)


def party_data(rc: Mapping[str, Any], pid: int, k: int
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Party ``pid``'s train and test columns (run config ``transform``, fitted on its training
    rows) and its global column indices."""
    X, _ = pooled_data(rc)
    S = party_blocks(rc, X.shape[1], k)
    if len(S) != k:
        raise ValueError(f"run config 'parts' names {len(S)} parties but there are {k}")
    c = VerticalData.from_run_config(rc)
    tr, te = split_standardised(X[:, S[pid]], c.test_fraction, c.transform)
    return tr, te, S[pid]


def checked_party(x: np.ndarray, who: str) -> np.ndarray:
    """``x`` as a 2-D float array (NaN: a missing cell), or a ValueError that names the
    party and the problem (an infinite value, too few rows)."""
    x = np.asarray(x, dtype=float)
    if x.ndim != 2 or x.shape[1] == 0:
        raise ValueError(f"{who}: data must be 2-D with at least one column, got {x.shape}")
    if len(x) < 2:
        raise ValueError(f"{who}: {len(x)} samples; need at least 2")
    bad = np.isinf(x)
    if bad.any():
        r, c = np.argwhere(bad)[0]
        raise ValueError(f"{who}: {int(bad.sum())} non-finite values (first at row {r}, "
                         f"column {c})")
    return x


def checked_observed(x: np.ndarray, names: Sequence[str], where: str) -> None:
    """A ValueError naming ``where`` and the column when a column of ``x`` has fewer than 2
    observed (non-NaN) cells or is constant over them: it carries no information."""
    for j, c in enumerate(x.T):
        seen = c[~np.isnan(c)]
        if len(seen) < 2 or seen.std() == 0:
            raise ValueError(f"{where}: column {names[j]!r} has "
                             f"{'fewer than 2 observed values' if len(seen) < 2 else 'one value'}"
                             " over its observed cells; it carries no information (drop it)")
