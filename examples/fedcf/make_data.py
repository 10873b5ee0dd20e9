"""Two plants, 3 sensors and 1 valve each, same time steps: ``csv_files()`` makes their CSVs,
which the ClientApp uses when a node names no CSV of its own; ``python make_data.py`` writes
them and truth.json to data/ (for a deployment on files).

Each plant has 2 hidden states; plant 0's states drive plant 1's (not the other way round), and
plant 0's valve also acts on plant 1's states directly (B_10 below): the effect FedCF's
counterfactual query asks about. Valve settings are the operators' i.i.d. moves.
"""

import json
from pathlib import Path

import numpy as np

SITES = 2  # the plants share one hidden process: always these two
#: each plant's node config beside its CSV: its valve is its known input
NODE_CONFIGS = [{"input-columns": "boiler_valve"}, {"input-columns": "turbine_valve"}]
F = np.array([[0.8, 0.1, 0.0, 0.0],  # s_t = F s_{t-1} + G u_{t-1} + noise
              [-0.1, 0.7, 0.0, 0.0],  # states 0,1: plant 0; states 2,3: plant 1
              [0.4, 0.0, 0.7, 0.1],
              [0.0, 0.3, -0.1, 0.6]])
G = np.array([[1.0, 0.0],  # valve 0 -> plant 0's states
              [0.5, 0.0],
              [0.8, 0.6],  # valve 0 -> plant 1's states (B_10), valve 1 -> plant 1's
              [-0.6, 0.3]])


def plants() -> tuple[dict[str, str], dict]:
    """``({"plant<k>.csv": CSV text}, truth)``: truth is the turbine sensors' change (z-scored)
    one step after valve 0 rises by 1 (seeded: always alike)."""
    rng = np.random.default_rng(0)
    T = 400
    u = rng.standard_normal((T, 2))
    s = np.zeros((T, 4))
    for t in range(1, T):
        s[t] = F @ s[t - 1] + G @ u[t - 1] + 0.5 * rng.standard_normal(4)
    files, truth = {}, {}
    for k, prefix in enumerate(["boiler", "turbine"]):
        C = rng.standard_normal((3, 2))
        y = s[:, 2 * k:2 * k + 2] @ C.T + 0.1 * rng.standard_normal((T, 3))
        names = [f"{prefix}_{m}" for m in ("temp", "flow", "vibration")] + [f"{prefix}_valve"]
        table = np.column_stack([y, u[:, k]])
        rows = [",".join(names)] + [",".join(f"{v:.4f}" for v in r) for r in table]
        files[f"plant{k}.csv"] = "\n".join(rows) + "\n"
        if k == 1:
            truth = {"delta_u": 1.0,
                     "delta_y": (C @ G[2:4, 0] / y.std(axis=0)).round(6).tolist()}
    return files, truth


def csv_files(sites: int = SITES) -> dict[str, str]:
    """``{"plant<k>.csv": CSV text}`` for the two plants (``sites`` is ignored)."""
    return plants()[0]


if __name__ == "__main__":
    out = Path(__file__).resolve().parent / "data"
    out.mkdir(exist_ok=True)
    files, truth = plants()
    for name, text in files.items():
        (out / name).write_text(text)
    (out / "truth.json").write_text(json.dumps(truth) + "\n")
