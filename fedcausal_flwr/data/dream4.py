"""DREAM4 in-silico time-series track (spec section 4.6).

``insilico_size100_N_timeseries.tsv``: a header (``Time``, gene names, possibly quoted), then
replicates of 21 time points separated by blank lines. ``..._goldstandard.tsv``: one
``Gi<TAB>Gj<TAB>0/1`` line per ordered pair, 1 meaning Gi -> Gj.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fedcausal_flwr.data.timeseries import Pair, finite_matrix, lagged_segments


def _fields(line: str) -> list[str]:
    return [f.strip().strip('"') for f in line.rstrip("\r\n").split("\t")]


def _blocks(lines: list[str]) -> list[list[str]]:
    blocks: list[list[str]] = [[]]
    for line in lines:
        if line.strip():
            blocks[-1].append(line)
        elif blocks[-1]:
            blocks.append([])
    return [b for b in blocks if b]


def _replicate(block: list[str], ncol: int, time_col: int | None, path: Path) -> np.ndarray:
    rows = [_fields(line) for line in block]
    bad = [r for r in rows if len(r) != ncol]
    if bad:
        raise ValueError(f"{path}: a row has {len(bad[0])} fields, the header has {ncol}")
    M = finite_matrix(np.array(rows, dtype=float), name=str(path))
    return M if time_col is None else np.delete(M, time_col, axis=1)


def read_goldstandard(path: str | Path, genes: list[str]) -> np.ndarray:
    """(d x d) 0/1 adjacency, ``truth[i, j] = 1`` for ``genes[i] -> genes[j]``."""
    index = {g: i for i, g in enumerate(genes)}
    truth = np.zeros((len(genes), len(genes)), dtype=int)
    for n, line in enumerate(Path(path).read_text().splitlines(), start=1):
        if not line.strip():
            continue
        f = _fields(line)
        if len(f) != 3 or f[0] not in index or f[1] not in index:
            raise ValueError(f"{path}:{n}: expected 'Gi<TAB>Gj<TAB>0/1' with known genes")
        truth[index[f[0]], index[f[1]]] = int(float(f[2]) != 0)
    return truth


def derived_goldstandard(timeseries_path: str | Path) -> Path | None:
    """The gold standard beside a time-series file ('timeseries' -> 'goldstandard'), if any."""
    p = Path(timeseries_path)
    if "timeseries" not in p.name:
        return None
    gold = p.with_name(p.name.replace("timeseries", "goldstandard"))
    return gold if gold.exists() else None


def load_dream4(timeseries_path: str | Path, goldstandard_path: str | Path | None = None
                ) -> tuple[list[np.ndarray], list[str], np.ndarray | None]:
    """Read one DREAM4 network.

    Returns
    -------
    series : one (time x genes) array per replicate, the Time column dropped.
    genes : gene names in column order.
    truth : (genes x genes) 0/1 adjacency or None when no gold standard is found (given
        explicitly or derived with ``derived_goldstandard``).
    """
    path = Path(timeseries_path)
    lines = path.read_text().splitlines()
    blocks = _blocks(lines)
    if len(blocks) < 2:
        raise ValueError(f"{path}: expected a header and at least one replicate")
    header = _fields(blocks[0][0])
    time_col = next((i for i, h in enumerate(header) if h.lower() == "time"), None)
    genes = [h for i, h in enumerate(header) if i != time_col]
    blocks[0] = blocks[0][1:]
    series = [_replicate(b, len(header), time_col, path) for b in blocks if b]
    gold = (derived_goldstandard(path) if goldstandard_path is None
            else Path(goldstandard_path))
    truth = None if gold is None else read_goldstandard(gold, genes)
    return series, genes, truth


def dream4_clients(series: list[np.ndarray], K: int, p: int = 1) -> list[Pair]:
    """K clients of consecutive replicate groups (10 replicates, K = 5: 2 each).

    Lags are taken within each replicate and its first p rows dropped, so a client with
    replicates of 21 steps has ``2 * 20`` rows at p = 1. Groups differ by at most one replicate
    when K does not divide the number of replicates.
    """
    if not 1 <= K <= len(series):
        raise ValueError(f"K={K} clients need 1 <= K <= {len(series)} replicates")
    groups = np.array_split(np.arange(len(series)), K)
    return [lagged_segments([series[i] for i in g], p, pad="drop") for g in groups]
