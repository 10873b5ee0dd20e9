"""Sachs et al. (2005) flow-cytometry data as shipped in the ``cdt`` package: 11 proteins,
nine experiments stacked (7466 rows), and the 18-edge consensus graph."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fedcausal_flwr.data.nodefiles import (
    check_columns,
    check_rows,
    checked_dir,
    checked_file,
    limits,
    logged,
)

SACHS_OBSERVATIONAL = 853  # the first condition (anti-CD3/CD28) of cyto_full_data


def sachs(path: str | Path, observational: bool = True
          ) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Sachs data, the graph of ``cyto_full_target.csv`` (11 x 11, 18 edges), column names.

    ``cyto_full_data.csv`` stacks all 9 conditions (7466 rows); the usual observational set
    is its first 853 rows.
    """
    if not str(path):
        raise ValueError("data = 'sachs' needs data-path: the directory holding "
                         "cyto_full_data.csv and cyto_full_target.csv")
    path = checked_dir(path, f"{path} (run-config key 'data-path', the Sachs directory)")
    data = checked_file(path / "cyto_full_data.csv", str(path / "cyto_full_data.csv"))
    target = checked_file(path / "cyto_full_target.csv", str(path / "cyto_full_target.csv"))
    try:
        with open(data, encoding="utf-8") as f:
            names = f.readline().rstrip("\r\n").split(",")
        check_columns(len(names), f"{data}: row 1")
        X = np.loadtxt(data, delimiter=",", skiprows=1, ndmin=2,
                       max_rows=limits().max_rows + 1)
        check_rows(len(X), str(data))
        if X.shape[1] != len(names):
            raise ValueError(f"{data}: {X.shape[1]} columns of numbers, the header has "
                             f"{len(names)}")
        lines = target.read_text(encoding="utf-8").splitlines()[1:]
    except (OSError, UnicodeDecodeError, ValueError) as e:
        if str(e).startswith(str(path)):
            raise
        raise ValueError(logged(f"{path}: not readable Sachs CSV files ({type(e).__name__})",
                                str(e))) from None
    if observational:
        X = X[:SACHS_OBSERVATIONAL]
    A = np.zeros((len(names), len(names)))
    for n, line in enumerate(lines, start=2):
        fields = [s.strip().strip('"') for s in line.split(",")]
        if len(fields) != 2 or fields[0] not in names or fields[1] not in names:
            raise ValueError(f"{target}: line {n}: expected 'cause,effect' with known names")
        A[names.index(fields[0]), names.index(fields[1])] = 1.0
    return X, A, names
