"""Write data/plant0.csv, plant1.csv: two plants, 3 sensors each, same time steps (run once).

Each plant has 2 hidden states; plant 0's states drive plant 1's (not the other way round).
"""

from pathlib import Path

import numpy as np

rng = np.random.default_rng(0)
F = np.array([[0.8, 0.1, 0.0, 0.0],  # s_t = F s_{t-1} + noise; states 0,1 plant 0, 2,3 plant 1
              [-0.1, 0.7, 0.0, 0.0],
              [0.4, 0.0, 0.7, 0.1],
              [0.0, 0.3, -0.1, 0.6]])
T = 200
s = np.zeros((T, 4))
for t in range(1, T):
    s[t] = F @ s[t - 1] + rng.standard_normal(4)
out = Path(__file__).resolve().parent / "data"
out.mkdir(exist_ok=True)
for k, prefix in enumerate(["boiler", "turbine"]):
    C = rng.standard_normal((3, 2))
    y = s[:, 2 * k:2 * k + 2] @ C.T + 0.1 * rng.standard_normal((T, 3))
    names = [f"{prefix}_{m}" for m in ("temp", "flow", "vibration")]
    cells = [[f"{v:.4f}" for v in r] for r in y]
    if k == 1:  # a few empty cells: the Kalman filter updates from the observed ones
        for i, j in ((30, 0), (31, 0), (97, 2), (150, 1)):
            cells[i][j] = ""
    rows = [",".join(names)] + [",".join(r) for r in cells]
    (out / f"plant{k}.csv").write_text("\n".join(rows) + "\n")
