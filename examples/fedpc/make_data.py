"""Four plant sites logging the same five signals: ``csv_files()`` makes their CSVs, which the
ClientApp uses when a node names no CSV of its own; ``python make_data.py`` writes them to
data/ (for a deployment on files).

The process is a linear model with non-Gaussian (Laplace) disturbances, so the direction of
each link can be told from the data: feed -> valve -> flow -> pressure, flow -> temp and
feed -> temp. Site 1 writes its columns in another order and site 2 has empty cells; FedPC
matches columns by header and uses every pair of cells that is there.
"""

from pathlib import Path

import numpy as np

SITES = 4  # the sites data/ holds; csv_files(n) makes n of them, the first 4 always alike
NAMES = ["feed", "valve", "flow", "pressure", "temp"]
W = np.zeros((5, 5))  # W[i, j]: x_i -> x_j
W[0, 1], W[1, 2], W[2, 3], W[2, 4], W[0, 4] = 0.9, 0.8, -0.7, 0.6, 0.5


def csv_files(sites: int = SITES) -> dict[str, str]:
    """``{"site<i>.csv": CSV text}`` for ``max(sites, SITES)`` sites (seeded: always alike)."""
    M = np.linalg.inv(np.eye(5) - W)  # x = x W + e
    rng = np.random.default_rng(0)
    files = {}
    for site in range(max(sites, SITES)):
        x = rng.laplace(size=(300, 5)) @ M
        cols = [4, 2, 0, 3, 1] if site == 1 else list(range(5))
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
