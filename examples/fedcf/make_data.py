"""Write data/plant0.csv, plant1.csv: two plants, 3 sensors and 1 valve each, same time steps
(run once).

Each plant has 2 hidden states; plant 0's states drive plant 1's (not the other way round), and
plant 0's valve also acts on plant 1's states directly (B_10 below): the effect FedCF's
counterfactual query asks about. Valve settings are the operators' i.i.d. moves.
"""

import json
from pathlib import Path

import numpy as np

rng = np.random.default_rng(0)
F = np.array([[0.8, 0.1, 0.0, 0.0],  # s_t = F s_{t-1} + G u_{t-1} + noise
              [-0.1, 0.7, 0.0, 0.0],  # states 0,1: plant 0; states 2,3: plant 1
              [0.4, 0.0, 0.7, 0.1],
              [0.0, 0.3, -0.1, 0.6]])
G = np.array([[1.0, 0.0],  # valve 0 -> plant 0's states
              [0.5, 0.0],
              [0.8, 0.6],  # valve 0 -> plant 1's states (B_10), valve 1 -> plant 1's
              [-0.6, 0.3]])
T = 400
u = rng.standard_normal((T, 2))
s = np.zeros((T, 4))
for t in range(1, T):
    s[t] = F @ s[t - 1] + G @ u[t - 1] + 0.5 * rng.standard_normal(4)
out = Path(__file__).resolve().parent / "data"
out.mkdir(exist_ok=True)
for k, prefix in enumerate(["boiler", "turbine"]):
    C = rng.standard_normal((3, 2))
    y = s[:, 2 * k:2 * k + 2] @ C.T + 0.1 * rng.standard_normal((T, 3))
    names = [f"{prefix}_{m}" for m in ("temp", "flow", "vibration")] + [f"{prefix}_valve"]
    table = np.column_stack([y, u[:, k]])
    rows = [",".join(names)] + [",".join(f"{v:.4f}" for v in r) for r in table]
    (out / f"plant{k}.csv").write_text("\n".join(rows) + "\n")
    if k == 1:  # the true answer: turbine sensors (z-scored) one step after valve 0 += 1
        truth = {"delta_u": 1.0, "delta_y": (C @ G[2:4, 0] / y.std(axis=0)).round(6).tolist()}
        (out / "truth.json").write_text(json.dumps(truth) + "\n")
