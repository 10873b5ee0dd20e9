"""Equations of the constraint-based family: pooled moments, partial correlations, their
tests, and the pairwise likelihood-ratio orientation.

Every statistic is a function of sums over rows, so the clients' sums add up to the pooled
ones: the federated tests equal the pooled tests (causal-learn's Fisher z, tigramite's ParCorr
t-test) up to floating point. Moments are pairwise complete (a pair's sums run over the rows
where both values are observed), so sites with missing cells or missing variables contribute
what they hold (test-wise deletion, Tu et al. 2019). The orientation of contemporaneous edges
is the pairwise likelihood ratio of Hyvarinen & Smith (2013, eq. 13 with the tanh
approximation of eq. 25): ``R_ij = rho_ij E[z_i tanh(z_j) - tanh(z_i) z_j]``, > 0 for i -> j.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Moment arrays a client sends, by name: pairwise counts, means, co-moments, sums of squares.
MOMENTS = ("n", "mean", "comoment", "square")


@dataclass(frozen=True)
class Moments:
    """Pairwise-complete moments of columns ``0..m-1`` about their pairwise means.

    ``n[i, j]`` rows with both i and j observed; over them ``mean[i, j]`` is the mean of
    column i, ``comoment[i, j]`` the sum of (x_i - mean[i, j]) (x_j - mean[j, i]) and
    ``square[i, j]`` the sum of (x_i - mean[i, j])^2.
    """

    n: np.ndarray
    mean: np.ndarray
    comoment: np.ndarray
    square: np.ndarray

    def arrays(self) -> list[np.ndarray]:
        """The four arrays in :data:`MOMENTS` order."""
        return [self.n, self.mean, self.comoment, self.square]


def moments(Z: np.ndarray) -> Moments:
    """The pairwise-complete moments of the rows of ``Z`` (NaN: missing)."""
    Z = np.asarray(Z, dtype=float)
    obs = (~np.isnan(Z)).astype(float)
    X = np.where(obs > 0, Z, 0.0)
    n = obs.T @ obs
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(n > 0, (X.T @ obs) / n, 0.0)  # mean[i, j]: x_i over rows with i, j
    # sum (x_i - m_ij)(x_j - m_ji) = sum x_i x_j - n m_ij m_ji over the rows both observed;
    # computed about a per-column shift (the column's own mean) for accuracy
    shift = np.where(obs.sum(0) > 0, X.sum(0) / np.maximum(obs.sum(0), 1), 0.0)
    Xc = np.where(obs > 0, Z - shift, 0.0)
    mc = mean - shift[:, None]
    comoment = Xc.T @ Xc - n * mc * mc.T
    square = (Xc * Xc).T @ obs - n * mc * mc
    return Moments(n, mean, comoment, np.maximum(square, 0.0))


def pooled(parts: list[Moments]) -> Moments:
    """The moments of the union of the clients' rows (Chan et al. 1979, per entry)."""
    n = sum(p.n for p in parts)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(n > 0, sum(p.n * p.mean for p in parts) / np.where(n > 0, n, 1), 0.0)
    comoment = sum(p.comoment + p.n * (p.mean - mean) * (p.mean.T - mean.T) for p in parts)
    square = sum(p.square + p.n * (p.mean - mean) ** 2 for p in parts)
    return Moments(n, mean, comoment, square)


def correlation(m: Moments) -> np.ndarray:
    """Pairwise-complete correlation matrix (NaN where a pair has fewer than 2 rows or no
    spread); unit diagonal."""
    with np.errstate(invalid="ignore", divide="ignore"):
        R = m.comoment / np.sqrt(m.square * m.square.T)
    R[(m.n < 2) | ~np.isfinite(R)] = np.nan
    np.fill_diagonal(R, 1.0)
    return np.clip(R, -1.0, 1.0)


def covariance(m: Moments) -> np.ndarray:
    """Pairwise-complete covariance matrix (divisor n - 1)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return m.comoment / np.maximum(m.n - 1, 1)


def partial_correlation(R: np.ndarray, i: int, j: int, S: tuple[int, ...]) -> float:
    """The partial correlation of i and j given S, from the correlation matrix ``R``:
    ``-P_01 / sqrt(P_00 P_11)`` with ``P`` the inverse of ``R[(i, j, *S)]``."""
    idx = [i, j, *S]
    P = np.linalg.pinv(R[np.ix_(idx, idx)])
    r = -P[0, 1] / np.sqrt(abs(P[0, 0] * P[1, 1]))
    return float(np.clip(r, -1.0, 1.0))


def sample_size(n: np.ndarray, i: int, j: int, S: tuple[int, ...]) -> int:
    """Rows a test of i, j given S may use: the fewest of any pair it involves."""
    idx = [i, j, *S]
    return int(n[np.ix_(idx, idx)].min())


def fisher_z_p(r: float, n: int, k: int) -> float:
    """Two-sided p-value of Fisher's z for a partial correlation ``r`` given ``k`` variables
    on ``n`` rows: ``sqrt(n - k - 3) |atanh r|`` against N(0, 1) (causal-learn's fisherz)."""
    from scipy.special import ndtr

    if n - k - 3 <= 0:
        return 1.0
    if abs(r) >= 1:
        r = (1.0 - np.nextafter(1.0, 0)) * np.sign(r)
    x = np.sqrt(n - k - 3) * abs(0.5 * np.log((1 + r) / (1 - r)))
    return float(2 * (1 - ndtr(abs(x))))


def t_test_p(r: float, n: int, k: int) -> float:
    """Two-sided p-value of the t-test of a partial correlation ``r`` given ``k`` variables on
    ``n`` rows, ``n - k - 2`` degrees of freedom (tigramite's ParCorr)."""
    from scipy.special import stdtr

    df = n - k - 2
    if df < 1:
        return 1.0
    if abs(abs(r) - 1.0) <= np.finfo(float).eps:
        return 0.0
    t = r * np.sqrt(df / (1.0 - r * r))
    return float(2 * stdtr(df, -abs(t)))


TESTS = {"fisher-z": fisher_z_p, "t": t_test_p}


def ci_test(R: np.ndarray, n: np.ndarray, i: int, j: int, S: tuple[int, ...],
            test: str = "fisher-z") -> tuple[float, float]:
    """``(partial correlation, p-value)`` of i and j given S."""
    r = partial_correlation(R, i, j, S)
    return r, TESTS[test](r, sample_size(n, i, j, S), len(S))


def regression(m: Moments, targets: np.ndarray, inputs: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Least squares of ``targets`` on ``inputs`` (with intercept) from pooled moments:
    ``(B, intercept, residual sd)``, ``B`` of shape (len(inputs), len(targets)). With no
    inputs the residual is the centred target."""
    C = covariance(m)
    mu = np.diag(m.mean)
    t, x = np.asarray(targets, int), np.asarray(inputs, int)
    if x.size == 0:
        B = np.zeros((0, t.size))
    else:
        B = np.linalg.lstsq(C[np.ix_(x, x)], C[np.ix_(x, t)], rcond=None)[0]
    intercept = mu[t] - mu[x] @ B
    var = np.diag(C[np.ix_(t, t)]) - np.einsum("ij,ij->j", C[np.ix_(x, t)], B)
    return B, intercept, np.sqrt(np.maximum(var, 1e-300))


def residuals(Z: np.ndarray, B: np.ndarray, intercept: np.ndarray, sd: np.ndarray,
              targets: np.ndarray, inputs: np.ndarray) -> np.ndarray:
    """Standardised residuals of the rows of ``Z``, NaN where the target or an input its
    regression uses is missing (a site without a variable informs no residual that needs it)."""
    Z = np.asarray(Z, float)
    T, X = Z[:, np.asarray(targets, int)], Z[:, np.asarray(inputs, int)]
    lost = np.isnan(T) | ((np.isnan(X).astype(float) @ (B != 0).astype(float)) > 0)
    E = (T - intercept - np.where(np.isnan(X), 0.0, X) @ B) / sd
    E[lost] = np.nan
    return E


def tanh_moments(E: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A client's sums for the likelihood ratio over its standardised residuals ``E`` (NaN:
    missing): pairwise row counts, ``sum e_i tanh(e_j)`` and ``sum e_i e_j`` over the rows
    where both are observed."""
    E = np.asarray(E, float)
    obs = (~np.isnan(E)).astype(float)
    E = np.where(obs > 0, E, 0.0)
    return obs.T @ obs, E.T @ np.tanh(E), E.T @ E


def likelihood_ratio(n: np.ndarray | float, ET: np.ndarray, EE: np.ndarray) -> np.ndarray:
    """Hyvarinen & Smith's pairwise ratio ``R_ij = rho_ij E[e_i tanh(e_j) - tanh(e_i) e_j]``
    from pooled sums over ``n`` rows (per pair; ``R_ij > 0``: i -> j; antisymmetric; 0 for a
    pair with fewer than 2 rows)."""
    n = np.broadcast_to(np.asarray(n, float), np.shape(ET))
    if (n < 2).all():
        return np.zeros_like(ET)
    few = n < 2
    n = np.where(few, 1.0, n)
    M = EE / n
    sd = np.sqrt(np.maximum(np.diag(M), 1e-300))
    rho = M / np.outer(sd, sd)
    return np.where(few, 0.0, rho * (ET - ET.T) / n)
