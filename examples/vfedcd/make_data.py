"""Two parties holding different columns of 60 people each, 54 of them the same, rows in
different orders: party 0 (id, age, bmi, glucose), party 1 (id, insulin, risk).
``csv_files()`` makes their CSVs, which the ClientApp uses when a node names no CSV of its own;
``python make_data.py`` writes them to data/ (for a deployment on files). VFedCD trains on the
54 shared people."""

from pathlib import Path

import numpy as np

SITES = 2  # the two parties hold column blocks of the same people: always these two


def csv_files(sites: int = SITES) -> dict[str, str]:
    """``{"party<k>.csv": CSV text}`` for the two parties (``sites`` is ignored; seeded)."""
    rng = np.random.default_rng(0)
    n = 66  # p000-p065: party 0 holds p000-p059, party 1 p006-p065
    ids = [f"p{i:03d}" for i in range(n)]
    age = rng.standard_normal(n)
    bmi = 0.6 * age + 0.5 * rng.standard_normal(n)
    glucose = 0.7 * bmi + 0.5 * rng.standard_normal(n)
    insulin = 0.8 * glucose + 0.4 * rng.standard_normal(n)
    risk = 0.5 * insulin + 0.5 * age + 0.4 * rng.standard_normal(n)
    files = {}
    for k, cols in enumerate([{"age": age, "bmi": bmi, "glucose": glucose},
                              {"insulin": insulin, "risk": risk}]):
        held = np.arange(60) + 6 * k
        order = rng.permutation(held)  # each party's own row order
        cells = [[ids[i], *(f"{c[i]:.4f}" for c in cols.values())] for i in order]
        if k == 1:  # a few empty cells: no loss on them, the column's mean as an input
            for r, j in ((4, 1), (20, 2), (33, 1)):
                cells[r][j] = ""
        rows = [",".join(["id", *cols])] + [",".join(r) for r in cells]
        files[f"party{k}.csv"] = "\n".join(rows) + "\n"
    return files


if __name__ == "__main__":
    out = Path(__file__).resolve().parent / "data"
    out.mkdir(exist_ok=True)
    for name, text in csv_files().items():
        (out / name).write_text(text)
