"""Four plant sites logging the same five signals over time: ``csv_files()`` makes their CSVs,
which the ClientApp uses when a node names no CSV of its own; ``python make_data.py`` writes
them to data/ (for a deployment on files).

The process is nonlinear with one-step delays: the valve opens when the feed of the last
step was high (a threshold), the flow follows the valve's square, the pressure and the
temperature follow the flow's last step (a saturation and a product with the feed). No linear
lag model sees valve -> flow (its correlation is near zero). Site 1 writes its columns in
another order; FedTrees matches columns by header.
"""

from pathlib import Path

import numpy as np

SITES = 4  # the sites data/ holds; csv_files(n) makes n of them, the first 4 always alike
NAMES = ["feed", "valve", "flow", "pressure", "temp"]
STEPS = 300


def series(rng: np.random.Generator) -> np.ndarray:
    """One site's (STEPS x 5) log."""
    x = np.zeros((STEPS, 5))
    for t in range(1, STEPS):
        e = rng.standard_normal(5) * 0.3
        f, v, q, _, _ = x[t - 1]
        x[t] = [0.5 * f + rng.standard_normal(),
                np.tanh(3 * f) + e[1],
                v ** 2 - 0.5 + e[2],
                np.tanh(2 * q) + 0.3 * x[t - 1, 3] + e[3],
                0.5 * q * f + e[4]]
    return x


def csv_files(sites: int = SITES) -> dict[str, str]:
    """``{"site<i>.csv": CSV text}`` for ``max(sites, SITES)`` sites (seeded: always alike)."""
    rng = np.random.default_rng(0)
    files = {}
    for site in range(max(sites, SITES)):
        x = series(rng)
        cols = [4, 2, 0, 3, 1] if site == 1 else list(range(5))
        rows = [",".join(NAMES[j] for j in cols)]
        rows += [",".join(f"{r[j]:.4f}" for j in cols) for r in x]
        files[f"site{site}.csv"] = "\n".join(rows) + "\n"
    return files


if __name__ == "__main__":
    out = Path(__file__).resolve().parent / "data"
    out.mkdir(exist_ok=True)
    for name, text in csv_files().items():
        (out / name).write_text(text)
