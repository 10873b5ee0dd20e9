"""FedIV data: the paper's IV scenarios, split over clients by Dirichlet quantity skew.

Low-dim (eqs. 25-26): ``(Z1, Z2) ~ U[-3, 3]^2``, ``e ~ N(0, 1)``, ``gamma, delta ~ N(0, 0.1^2)``;
``dgp="paper"``: X = Z1 + Z2 + e + gamma, Y = g0(X) + e + delta, step = 1{x >= 0};
``dgp="code"`` (the authors' AGMMZoo): X = Z1 + e + gamma, Y = g0(X) + 2e + delta,
step = 1 + 1.5 1{x >= 0}. Y and g0 are standardized with the train Y's mean and sd.

Image scenarios (g0 = abs, one instrument Z1): ``image-x`` shows the network an 8x8 digit of
class round(clip(1.5 X + 5, 0, 9)) instead of X (true g = g0((digit - 5) / 1.5)),
``image-z`` does so for Z (g sees 1.5 X + 5), ``image-xz`` both. Digits: scikit-learn's
bundled 8x8 set (no download), pixels scaled to zero mean and unit sd.

The data keys of the run config and their defaults live in :class:`IVDataConfig`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, ClassVar

import numpy as np

from fedcausal_flwr.settings import MAX_ROWS, Settings, setting

LOW_DIM = ("abs", "step", "linear", "sin")
IMAGE = ("image-x", "image-z", "image-xz")
SPLITS = ("train", "val", "test")
DATA_TAG = 0x1F


@dataclass(frozen=True)
class IVData:
    """One split: inputs ``x`` and ``z`` as the networks see them, ``y``, and the true g."""

    x: np.ndarray
    y: np.ndarray
    z: np.ndarray
    g: np.ndarray

    def rows(self, idx: np.ndarray) -> IVData:
        """The rows ``idx``."""
        return IVData(self.x[idx], self.y[idx], self.z[idx], self.g[idx])

    def __len__(self) -> int:
        return len(self.y)


def g0(name: str, x: np.ndarray, dgp: str = "paper") -> np.ndarray:
    """The structural function of a low-dim scenario."""
    if name == "abs":
        return np.abs(x)
    if name == "linear":
        return np.asarray(x, dtype=float)
    if name == "sin":
        return np.sin(x)
    if name == "step":
        jump = (x >= 0).astype(float)
        return 1.0 + 1.5 * jump if dgp == "code" else jump
    raise ValueError(f"unknown scenario {name!r}; choose from {LOW_DIM + IMAGE}")


def raw_split(name: str, n: int, dgp: str, rng: np.random.Generator, instruments: int = 2
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(X, Y, Z, g0(X))`` of eqs. 25-26 (unstandardized), Z of shape (n, instruments)."""
    if dgp not in ("paper", "code"):
        raise ValueError(f"iv-dgp must be 'paper' or 'code', got {dgp!r}")
    z = rng.uniform(-3, 3, (n, 2))
    e = rng.standard_normal(n)
    gamma, delta = 0.1 * rng.standard_normal(n), 0.1 * rng.standard_normal(n)
    zsum = z[:, 0] + (z[:, 1] if dgp == "paper" and instruments == 2 else 0.0)
    x = zsum + e + gamma
    g = g0(name, x, dgp)
    y = g + (2.0 if dgp == "code" else 1.0) * e + delta
    return x, y, z[:, :instruments], g


def digit_class(v: np.ndarray) -> np.ndarray:
    """Image(v)'s class round(min(max(1.5 v + 5, 0), 9))."""
    return np.rint(np.clip(1.5 * np.asarray(v) + 5, 0, 9)).astype(int)


@lru_cache(maxsize=1)
def digits() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's 8x8 digits as ``(images (n, 1, 8, 8) standardized, labels)``."""
    from sklearn.datasets import load_digits

    d = load_digits()
    img = d.images.astype(float)
    img = (img - img.mean()) / img.std()
    return img[:, None, :, :], d.target.astype(int)


def images(v: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A random digit image of class digit_class(v) per entry, and those classes."""
    pool, labels = digits()
    cls = digit_class(v)
    idx = np.empty(len(cls), dtype=int)
    for c in range(10):
        rows = np.flatnonzero(cls == c)
        idx[rows] = rng.choice(np.flatnonzero(labels == c), size=len(rows))
    return pool[idx], cls


def dirichlet_sizes(n: int, k: int, alpha: float, rng: np.random.Generator,
                    min_size: int = 5) -> np.ndarray:
    """Quantity skew: p ~ Dir(alpha 1_k), size_i = floor(p_i (n - min k)) + min, last gets
    the remainder (the authors' split)."""
    if n < min_size * k:
        raise ValueError(f"{n} samples cannot give {k} clients at least {min_size} each")
    p = rng.dirichlet(alpha * np.ones(k))
    sizes = np.floor(p * (n - min_size * k)).astype(int) + min_size
    sizes[-1] = n - sizes[:-1].sum()
    return sizes


def partition(n: int, k: int, alpha: float, rng: np.random.Generator) -> list[np.ndarray]:
    """One random permutation cut into contiguous chunks of Dirichlet sizes."""
    perm = rng.permutation(n)
    return np.split(perm, np.cumsum(dirichlet_sizes(n, k, alpha, rng))[:-1])


@dataclass(frozen=True)
class IVDataConfig(Settings):
    """The built-in data's run-config keys and defaults (data config, not algorithm settings).

    ``scenario``: a low-dim g0 (eqs. 25-26) or an image scenario; ``dgp``: the paper's or the
    authors' code's process; ``n``: samples per split (train, val); ``n_test``: test samples
    (0: ``n``); ``alpha``: Dirichlet concentration of the quantity skew; ``seed``: data seed.
    Node-local CSVs (node config ``data-path``): ``instrument``, ``treatment``, ``outcome``
    name their columns (comma-separated), ``val_fraction`` of each node's rows validate.
    """

    section: ClassVar[str] = "iv"

    scenario: str = setting("abs", "iv-scenario", choices=LOW_DIM + IMAGE)
    dgp: str = setting("paper", "iv-dgp", choices=("paper", "code"))
    n: int = setting(20000, "iv-n", ge=1, le=MAX_ROWS)
    n_test: int = setting(0, "iv-n-test", ge=0, le=MAX_ROWS)
    alpha: float = setting(0.3, "iv-alpha", gt=0)
    seed: int = setting(0, "seed", ge=0)
    instrument: str = setting("", "iv-instrument")
    treatment: str = setting("", "iv-treatment")
    outcome: str = setting("", "iv-outcome")
    val_fraction: float = setting(0.5, "iv-val-fraction", gt=0, lt=1)
    grid_points: int = setting(
        41, ge=2, le=MAX_ROWS,
        doc="points of the evaluation grid of a low-dim scenario (eval_grid): test rows at "
            "evenly spaced quantiles of x from 5% to 95%")


def own_split(n: int, c: IVDataConfig, partition_id: int) -> tuple[np.ndarray, np.ndarray]:
    """Train and validation rows of a node's own ``n`` rows: one seeded permutation (``seed``,
    the partition id) cut at ``iv-val-fraction``, as the built-in data draw their splits;
    each part gets at least one row."""
    if n < 2:
        raise ValueError(f"{n} rows cannot give a train and a validation split")
    perm = np.random.default_rng([c.seed, DATA_TAG, int(partition_id)]).permutation(n)
    n_val = min(n - 1, max(1, int(round(c.val_fraction * n))))
    return np.sort(perm[n_val:]), np.sort(perm[:n_val])


def settings(rc: Mapping[str, Any]) -> dict[str, Any]:
    """The data keys of the run config (validated, defaults from :class:`IVDataConfig`)."""
    c = IVDataConfig.from_run_config(rc)
    return {"scenario": c.scenario, "dgp": c.dgp, "n": c.n, "n_test": c.n_test or c.n,
            "alpha": c.alpha, "seed": c.seed}


@lru_cache(maxsize=4)
def _dataset(scenario: str, dgp: str, n: int, n_test: int, seed: int) -> dict[str, IVData]:
    rng = np.random.default_rng([seed, DATA_TAG])
    raw = {s: raw_split("abs" if scenario in IMAGE else scenario, n_test if s == "test" else n,
                        dgp, rng, 1 if scenario in IMAGE else 2) for s in SPLITS}
    mu, sd = raw["train"][1].mean(), raw["train"][1].std()
    out = {}
    for s, (x, y, z, g) in raw.items():
        y, g = (y - mu) / sd, (g - mu) / sd
        xin, zin = x[:, None], z
        if scenario in ("image-x", "image-xz"):
            xin, cls = images(x, rng)
            g = (np.abs((cls - 5) / 1.5) - mu) / sd
        elif scenario == "image-z":
            xin = 1.5 * x[:, None] + 5
        if scenario in ("image-z", "image-xz"):
            zin = images(z[:, 0], rng)[0]
        out[s] = IVData(xin, y, zin, g)
    return out


def dataset(rc: Mapping[str, Any]) -> dict[str, IVData]:
    """Train, val and test splits of the run config's scenario (standardized, pooled)."""
    s = settings(rc)
    return _dataset(s["scenario"], s["dgp"], s["n"], s["n_test"], s["seed"])


def split_indices(rc: Mapping[str, Any], k: int) -> dict[str, list[np.ndarray]]:
    """Row indices of each client per split; every split has its own Dirichlet draw."""
    s = settings(rc)
    return _split_indices(s["n"], s["n_test"], s["alpha"], s["seed"], int(k))


@lru_cache(maxsize=4)
def _split_indices(n: int, n_test: int, alpha: float, seed: int, k: int
                   ) -> dict[str, list[np.ndarray]]:
    """:func:`split_indices`, drawn once per process (read-only): cutting the rows into k
    chunks is O(n + k), so drawing it at every client's call made an exchange O(k^2)."""
    rng = np.random.default_rng([seed, DATA_TAG, k])
    out = {sp: partition(n_test if sp == "test" else n, k, alpha, rng) for sp in SPLITS}
    for chunks in out.values():
        for c in chunks:
            c.setflags(write=False)
    return out


def client_data(rc: Mapping[str, Any], partition_id: int, num_partitions: int
                ) -> dict[str, IVData]:
    """Client ``partition_id``'s train/val/test rows."""
    if not 0 <= partition_id < num_partitions:
        raise ValueError(f"partition-id {partition_id} outside 0..{num_partitions - 1}")
    data, idx = dataset(rc), split_indices(rc, num_partitions)
    return {sp: data[sp].rows(idx[sp][partition_id]) for sp in SPLITS}


def test_set(rc: Mapping[str, Any]) -> IVData:
    """The pooled test split (the paper's metric: MSE of g against g0 on it)."""
    return dataset(rc)["test"]


def eval_grid(rc: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray] | None:
    """``(x, true g)`` on the low-dim scenario's evaluation grid: the test rows at
    ``grid_points`` evenly spaced quantiles of x from 5% to 95% (where the data are); None
    for the image scenarios."""
    c = IVDataConfig.from_run_config(rc)
    if c.scenario in IMAGE:
        return None
    test = test_set(rc)
    order = np.argsort(test.x[:, 0], kind="stable")
    q = np.linspace(0.05, 0.95, c.grid_points)
    idx = order[np.rint(q * (len(order) - 1)).astype(int)]
    return test.x[idx], test.g[idx]
