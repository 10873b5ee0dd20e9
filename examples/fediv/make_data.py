"""Clinics with dose (treatment), recovery (outcome), an instrument (distance to a pharmacy)
and a hidden confounder left out of the files: ``csv_files()`` makes their CSVs, which the
ClientApp uses when a node names no CSV of its own; ``python make_data.py`` writes them to
data/ (for a deployment on files)."""

from pathlib import Path

import numpy as np

SITES = 2  # the clinics data/ holds; csv_files(n) makes n of them, the first 2 always alike


def csv_files(sites: int = SITES) -> dict[str, str]:
    """``{"clinic<k>.csv": CSV text}`` for ``max(sites, SITES)`` clinics (seeded)."""
    rng = np.random.default_rng(0)
    files = {}
    for k in range(max(sites, SITES)):
        n = 150
        distance = rng.uniform(-2, 2, n)                     # instrument
        frailty = rng.standard_normal(n)                     # hidden confounder
        dose = 0.8 * distance + 0.5 * frailty + 0.2 * rng.standard_normal(n)
        recovery = np.abs(dose) - 0.5 * frailty + 0.1 * rng.standard_normal(n)   # g(x) = |x|
        rows = ["distance,dose,recovery"] + [
            f"{z:.4f},{x:.4f},{y:.4f}" for z, x, y in zip(distance, dose, recovery, strict=True)]
        files[f"clinic{k}.csv"] = "\n".join(rows) + "\n"
    return files


if __name__ == "__main__":
    out = Path(__file__).resolve().parent / "data"
    out.mkdir(exist_ok=True)
    for name, text in csv_files().items():
        (out / name).write_text(text)
