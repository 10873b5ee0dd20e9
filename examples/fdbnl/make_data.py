"""Write data/site0..3.csv: 4 sites observing the same weather-like VAR(1) (run once).

Real sites are messy, and so are these: site 1 writes its columns in another order, site 2
has no wind sensor and a few empty cells. FDBNL matches columns by header, learns each
entry from the sites that observe both its variables, and uses the cells that are there.
"""

from pathlib import Path

import numpy as np

NAMES = ["temperature", "humidity", "pressure", "wind", "rain"]
W = np.zeros((5, 5))  # W[i, j]: x_i(t) -> x_j(t), same time step (acyclic)
W[0, 2], W[2, 4] = 0.8, -0.7
A = np.zeros((5, 5))  # A[i, j]: x_i(t-1) -> x_j(t)
A[0, 1], A[2, 3], A[3, 4], A[1, 4] = 0.7, -0.6, 0.6, 0.5
M = np.linalg.inv(np.eye(5) - W)  # x_t = x_t W + x_{t-1} A + e
rng = np.random.default_rng(0)
out = Path(__file__).resolve().parent / "data"
out.mkdir(exist_ok=True)
for site in range(4):
    x = np.zeros((100, 5))
    for t in range(1, len(x)):
        x[t] = (x[t - 1] @ A + rng.standard_normal(5)) @ M
    cols = {1: [4, 2, 0, 3, 1], 2: [0, 1, 2, 4]}.get(site, range(5))  # order; no wind
    cells = [[f"{r[j]:.4f}" for j in cols] for r in x]
    if site == 2:
        for i, j in ((17, 1), (42, 3), (43, 3), (80, 0)):
            cells[i][j] = ""  # empty cells: missing values
    rows = [",".join(NAMES[j] for j in cols)] + [",".join(r) for r in cells]
    (out / f"site{site}.csv").write_text("\n".join(rows) + "\n")
