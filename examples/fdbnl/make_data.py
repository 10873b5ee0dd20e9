"""Four sites observing the same weather-like VAR(1): ``csv_files()`` makes their CSVs, which
the ClientApp uses when a node names no CSV of its own; ``python make_data.py`` writes them to
data/ (for a deployment on files).

Real sites are messy, and so are these: site 1 writes its columns in another order, site 2
has no wind sensor and a few empty cells. FDBNL matches columns by header, learns each
entry from the sites that observe both its variables, and uses the cells that are there.
"""

from pathlib import Path

import numpy as np

SITES = 4  # the sites data/ holds; csv_files(n) makes n of them, the first 4 always alike
NAMES = ["temperature", "humidity", "pressure", "wind", "rain"]
W = np.zeros((5, 5))  # W[i, j]: x_i(t) -> x_j(t), same time step (acyclic)
W[0, 2], W[2, 4] = 0.8, -0.7
A = np.zeros((5, 5))  # A[i, j]: x_i(t-1) -> x_j(t)
A[0, 1], A[2, 3], A[3, 4], A[1, 4] = 0.7, -0.6, 0.6, 0.5


def csv_files(sites: int = SITES) -> dict[str, str]:
    """``{"site<i>.csv": CSV text}`` for ``max(sites, SITES)`` sites (seeded: always alike)."""
    M = np.linalg.inv(np.eye(5) - W)  # x_t = x_t W + x_{t-1} A + e
    rng = np.random.default_rng(0)
    files = {}
    for site in range(max(sites, SITES)):
        x = np.zeros((100, 5))
        for t in range(1, len(x)):
            x[t] = (x[t - 1] @ A + rng.standard_normal(5)) @ M
        cols = {1: [4, 2, 0, 3, 1], 2: [0, 1, 2, 4]}.get(site, range(5))  # order; no wind
        cells = [[f"{r[j]:.4f}" for j in cols] for r in x]
        if site == 2:
            for i, j in ((17, 1), (42, 3), (43, 3), (80, 0)):
                cells[i][j] = ""  # empty cells: missing values
        rows = [",".join(NAMES[j] for j in cols)] + [",".join(r) for r in cells]
        files[f"site{site}.csv"] = "\n".join(rows) + "\n"
    return files


if __name__ == "__main__":
    out = Path(__file__).resolve().parent / "data"
    out.mkdir(exist_ok=True)
    for name, text in csv_files().items():
        (out / name).write_text(text)
