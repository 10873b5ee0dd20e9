"""Two plants, 3 sensors each, same time steps: ``csv_files()`` makes their CSVs, which the
ClientApp uses when a node names no CSV of its own; ``python make_data.py`` writes them to
data/ (for a deployment on files).

Each plant has 2 hidden states; plant 0's states drive plant 1's (not the other way round).
"""

from pathlib import Path

import numpy as np

SITES = 2  # the plants share one hidden process: always these two
F = np.array([[0.8, 0.1, 0.0, 0.0],  # s_t = F s_{t-1} + noise; states 0,1 plant 0, 2,3 plant 1
              [-0.1, 0.7, 0.0, 0.0],
              [0.4, 0.0, 0.7, 0.1],
              [0.0, 0.3, -0.1, 0.6]])


def csv_files(sites: int = SITES) -> dict[str, str]:
    """``{"plant<k>.csv": CSV text}`` for the two plants (``sites`` is ignored: the plants
    share one hidden process; seeded: always alike)."""
    rng = np.random.default_rng(0)
    T = 200
    s = np.zeros((T, 4))
    for t in range(1, T):
        s[t] = F @ s[t - 1] + rng.standard_normal(4)
    files = {}
    for k, prefix in enumerate(["boiler", "turbine"]):
        C = rng.standard_normal((3, 2))
        y = s[:, 2 * k:2 * k + 2] @ C.T + 0.1 * rng.standard_normal((T, 3))
        names = [f"{prefix}_{m}" for m in ("temp", "flow", "vibration")]
        cells = [[f"{v:.4f}" for v in r] for r in y]
        if k == 1:  # a few empty cells: the Kalman filter updates from the observed ones
            for i, j in ((30, 0), (31, 0), (97, 2), (150, 1)):
                cells[i][j] = ""
        rows = [",".join(names)] + [",".join(r) for r in cells]
        files[f"plant{k}.csv"] = "\n".join(rows) + "\n"
    return files


if __name__ == "__main__":
    out = Path(__file__).resolve().parent / "data"
    out.mkdir(exist_ok=True)
    for name, text in csv_files().items():
        (out / name).write_text(text)
