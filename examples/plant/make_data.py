"""Three plants with the same process: ``csv_files()`` makes their CSVs, which the ClientApp
uses when a node names no CSV of its own; ``python make_data.py`` writes them to data/ and
knowledge.csv (for a deployment on files).

A tank process: the outside temperature drives the tank's temperature and nothing in the
plant drives it; the valve and the pump set the flow at once; the flow fills the tank
(its level) one step later and cools it at once. Site 1 writes its columns in another order,
site 2 has no pump sensor and a few empty cells.
"""

from pathlib import Path

import numpy as np

SITES = 3  # the sites data/ holds; csv_files(n) makes n of them, the first 3 always alike
NAMES = ["outside_temp", "valve", "pump", "flow", "level", "tank_temp"]
W = np.zeros((6, 6))  # W[i, j]: x_i(t) -> x_j(t), same time step (acyclic)
W[1, 3], W[2, 3], W[3, 5], W[0, 5] = 0.8, 0.6, -0.5, 0.5
A = np.zeros((6, 6))  # A[i, j]: x_i(t-1) -> x_j(t)
A[0, 0], A[1, 1], A[3, 4], A[4, 4] = 0.8, 0.5, 0.6, 0.5
KNOWLEDGE = ("# what the plant engineers know (Knowledge.from_file reads it)\n"
             "exogenous,outside_temp\n"
             "tier,outside_temp,0\ntier,valve,1\ntier,pump,1\ntier,flow,2\ntier,level,3\n"
             "tier,tank_temp,3\nrequire,valve,flow,0\n")


def csv_files(sites: int = SITES) -> dict[str, str]:
    """``{"site<i>.csv": CSV text}`` for ``max(sites, SITES)`` plants (seeded: always alike)."""
    M = np.linalg.inv(np.eye(6) - W)  # x_t = x_t W + x_{t-1} A + e
    rng = np.random.default_rng(7)
    files = {}
    for site in range(max(sites, SITES)):
        x = np.zeros((60, 6))
        for t in range(1, len(x)):
            x[t] = (x[t - 1] @ A + rng.standard_normal(6)) @ M
        cols = {1: [5, 3, 0, 4, 2, 1], 2: [0, 1, 3, 4, 5]}.get(site, range(6))  # order; no pump
        cells = [[f"{r[j]:.4f}" for j in cols] for r in x]
        if site == 2:
            for i, j in ((11, 1), (25, 3), (26, 3), (33, 0)):
                cells[i][j] = ""  # empty cells: missing values
        rows = [",".join(NAMES[j] for j in cols)] + [",".join(r) for r in cells]
        files[f"site{site}.csv"] = "\n".join(rows) + "\n"
    return files


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    (here / "data").mkdir(exist_ok=True)
    for name, text in csv_files().items():
        (here / "data" / name).write_text(text)
    (here / "knowledge.csv").write_text(KNOWLEDGE)
