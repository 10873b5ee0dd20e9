"""Write data/clinic0.csv, clinic1.csv: dose (treatment), recovery (outcome), an instrument
(distance to a pharmacy) and a hidden confounder left out of the files (run once)."""

from pathlib import Path

import numpy as np

rng = np.random.default_rng(0)
out = Path(__file__).resolve().parent / "data"
out.mkdir(exist_ok=True)
for k in range(2):
    n = 150
    distance = rng.uniform(-2, 2, n)                     # instrument
    frailty = rng.standard_normal(n)                     # hidden confounder
    dose = 0.8 * distance + 0.5 * frailty + 0.2 * rng.standard_normal(n)
    recovery = np.abs(dose) - 0.5 * frailty + 0.1 * rng.standard_normal(n)   # g(x) = |x|
    rows = ["distance,dose,recovery"] + [f"{z:.4f},{x:.4f},{y:.4f}"
                                         for z, x, y in zip(distance, dose, recovery, strict=True)]
    (out / f"clinic{k}.csv").write_text("\n".join(rows) + "\n")
