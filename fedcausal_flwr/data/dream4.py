"""DREAM4 in-silico time-series track.

``insilico_size100_N_timeseries.tsv``: a header (``Time``, gene names, possibly quoted), then
replicates of 21 time points separated by blank lines. ``..._goldstandard.tsv``: one
``Gi<TAB>Gj<TAB>0/1`` line per ordered pair, 1 meaning Gi -> Gj.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fedcausal_flwr.data.nodefiles import check_columns, check_rows, checked_file, limits, logged
from fedcausal_flwr.data.timeseries import Pair, lagged_segments


def _fields(line: str) -> list[str]:
    return [f.strip().strip('"') for f in line.rstrip("\r\n").split("\t")]


def _lines(path: Path, what: str, header_columns: bool = False) -> list[str]:
    """The file's lines, read after the node's checks (:mod:`fedcausal_flwr.data.nodefiles`):
    a regular file within ``max-file-mb``, the first non-blank line within ``max-columns``
    fields (``header_columns``) before the rest is read, at most ``max-rows`` lines. Errors
    never carry the file's content."""
    checked_file(path, f"{path} ({what})")
    lim = limits()
    lines: list[str] = []
    try:
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, start=1):
                if header_columns and not any(s.strip() for s in lines):
                    check_columns(len(line.split("\t")), f"{path}: line {n}")
                if n > lim.max_rows + 1:
                    check_rows(n - 1, str(path))
                lines.append(line.rstrip("\r\n"))
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(logged(f"{path}: not a text TSV file ({type(e).__name__} at line "
                                f"{len(lines) + 1})", str(e))) from None
    return lines


def _blocks(lines: list[str]) -> list[list[tuple[int, str]]]:
    """Runs of non-blank lines, each line with its 1-based line number."""
    blocks: list[list[tuple[int, str]]] = [[]]
    for n, line in enumerate(lines, start=1):
        if line.strip():
            blocks[-1].append((n, line))
        elif blocks[-1]:
            blocks.append([])
    return [b for b in blocks if b]


def _replicate(block: list[tuple[int, str]], header: list[str], time_col: int | None,
               path: Path) -> np.ndarray:
    """One replicate's (time x columns) values; a ValueError names the line and column (by
    number: the header may be any line of a file that is no DREAM4 file), never a value."""
    M = np.empty((len(block), len(header)))
    for k, (n, line) in enumerate(block):
        row = _fields(line)
        if len(row) != len(header):
            raise ValueError(f"{path}: line {n} has {len(row)} fields, the header has "
                             f"{len(header)}")
        for j, v in enumerate(row):
            try:
                M[k, j] = float(v)
            except ValueError:
                raise ValueError(logged(f"{path}: line {n}, column {j + 1}: not a number",
                                        f"column {header[j]!r}, cell {v!r}")) from None
            if not np.isfinite(M[k, j]):
                raise ValueError(logged(f"{path}: line {n}, column {j + 1}: not finite",
                                        f"column {header[j]!r}"))
    return M if time_col is None else np.delete(M, time_col, axis=1)


def read_goldstandard(path: str | Path, genes: list[str]) -> np.ndarray:
    """(d x d) 0/1 adjacency, ``truth[i, j] = 1`` for ``genes[i] -> genes[j]``."""
    index = {g: i for i, g in enumerate(genes)}
    truth = np.zeros((len(genes), len(genes)), dtype=int)
    for n, line in enumerate(_lines(Path(path), "gold standard"), start=1):
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
    lines = _lines(path, "time series", header_columns=True)
    blocks = _blocks(lines)
    if not blocks or len(blocks) == 1 and len(blocks[0]) < 2:
        raise ValueError(f"{path}: expected a header and at least one replicate"
                         + (" (the file is empty)" if not blocks else ""))
    header = _fields(blocks[0][0][1])
    time_col = next((i for i, h in enumerate(header) if h.lower() == "time"), None)
    genes = [h for i, h in enumerate(header) if i != time_col]
    if not genes or len(set(genes)) != len(genes):
        raise ValueError(f"{path}: line {blocks[0][0][0]}: the header needs distinct gene "
                         f"names ({len(header)} fields, {len(set(genes))} distinct genes)")
    blocks[0] = blocks[0][1:]
    series = [_replicate(b, header, time_col, path) for b in blocks if b]
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
