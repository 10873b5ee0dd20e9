"""Write data/site0..2.csv: 3 sites whose lagged effects differ a little (run once)."""

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
for site in range(3):
    As = A.copy()
    As[3, 4] = 0.6 - 0.25 * site  # wind -> rain weakens from site to site
    x = np.zeros((100, 5))
    for t in range(1, len(x)):
        x[t] = (x[t - 1] @ As + rng.standard_normal(5)) @ M
    rows = [",".join(NAMES)] + [",".join(f"{v:.4f}" for v in r) for r in x]
    (out / f"site{site}.csv").write_text("\n".join(rows) + "\n")
