"""Node-local data: a CSV chosen on each SuperNode with ``--node-config data-path=...``.

The file never travels in the run config: each SuperNode names its own file, and only what the
algorithm's protocol sends leaves the node. Layout: a header row of variable names (required,
unique, non-empty), then one row per sample (time step for the time-series algorithms), every
cell a finite number, except the optional segment column (time series: replicate labels) and
the ID column (VFedCD: sample IDs), which may hold any non-empty text, and missing values
(an empty cell, or NaN/NA/null) where the algorithm handles them (``allow_missing``)::

    segment,G1,G2,G3
    a,0.12,1.30,-0.40
    a,0.15,1.10,-0.35
    b,0.90,0.20,0.05

Every problem is a ValueError that names the node (``client <partition-id>``), the file, the
row (1-based, the header is row 1) and the column (1-based, with its name), e.g.
``client 1: data-path /data/site1.csv: row 4, column 3 ('G2'): not a number``. An error
never carries a cell's content (it crosses the wire to the server); the node logs the detail.
The file must be a regular file within the node's limits (:mod:`fedcausal_flwr.data.nodefiles`:
node config ``max-file-mb``, ``max-columns``, ``max-rows``).

Node-config keys read here (all optional except ``data-path``):

``data-path``       the CSV of this node (must end in ``.csv``)
``segment-column``  time series: column whose value labels the replicate of each row; rows of
                    one replicate are consecutive and lags never cross two replicates
``id-column``       VFedCD: the column of sample IDs (default ``id``)
``id-key``          VFedCD: a key the parties already share, for keyed hashes of their IDs
                    (else the environment variable ``FEDCAUSAL_ID_KEY``); without one the
                    parties align by private set intersection (no shared secret)
``columns``         VFedCD: this party's global attribute indices, e.g. ``"3,4,5"`` (else
                    from the run config's ``parts``)
``input-columns``   FedGC/FedCF: the columns holding this client's known inputs u, e.g.
                    ``"valve,pump"`` (the others are measurements)
"""

from __future__ import annotations

import csv
import hashlib
import hmac
import inspect
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fedcausal_flwr.data.nodefiles import check_columns, check_rows, checked_file, limits, logged

DATA_PATH = "data-path"
SEGMENT_COLUMN = "segment-column"
ID_COLUMN = "id-column"
ID_KEY = "id-key"
ID_KEY_ENV = "FEDCAUSAL_ID_KEY"


@dataclass(frozen=True)
class Table:
    """A node's CSV: variable ``names``, ``values`` (rows x variables, float), and the labels of
    the segment column / the ID column when asked for (one string per row)."""

    path: Path
    names: list[str]
    values: np.ndarray
    segments: list[str] | None = None
    ids: list[str] | None = None

    def where(self, who: str) -> str:
        """``"client k: data-path <file>"``, the start of every message about this file."""
        return f"{who}: data-path {self.path}"


def node_data_path(node_config: Mapping[str, Any], who: str) -> Path | None:
    """This node's own CSV (node config ``data-path``), or None: the built-in data then."""
    raw = str(node_config.get(DATA_PATH, "") or "").strip()
    if not raw:
        return None
    path = Path(raw).expanduser()
    if path.suffix.lower() != ".csv":
        raise ValueError(f"{who}: node config data-path={raw!r} must name a .csv file (node-"
                         "local data; the run config's data-path names the built-in sets)")
    return path


MISSING = frozenset({"", "nan", "na", "n/a", "null"})
"""Cell texts (lower case, stripped) that mean a missing value where an algorithm allows them."""


def _cell(text: str, where: str, allow_missing: bool = False) -> float:
    """The number in a cell (NaN for a :data:`MISSING` one when ``allow_missing``); an error
    names ``where`` (row and column), never the cell's text (logged on the node only)."""
    s = text.strip()
    if allow_missing and s.lower() in MISSING:
        return math.nan
    if not s:
        raise ValueError(f"{where}: empty cell (missing value)")
    try:
        v = float(s)
    except ValueError:
        raise ValueError(logged(f"{where}: not a number", f"cell {text!r}")) from None
    if not math.isfinite(v):
        raise ValueError(f"{where}: not a finite number (NaN/inf)")
    return v


def csv_rows(path: str | Path, head: str, encoding: str | None = "utf-8-sig"
             ) -> list[tuple[int, list[str]]]:
    """The file's rows (1-based row number, fields), read after the checks of
    :mod:`fedcausal_flwr.data.nodefiles`: a regular file within ``max-file-mb``, a first row
    within ``max-columns`` (before any other row is read), at most ``max-rows`` rows. Errors
    start with ``head`` and never carry the file's content."""
    path = checked_file(path, head)
    out: list[tuple[int, list[str]]] = []
    max_rows = limits().max_rows
    try:
        with open(path, newline="", encoding=encoding) as f:
            for n, r in enumerate(csv.reader(f), start=1):
                if n == 1:
                    check_columns(len(r), f"{head}: row 1")
                elif n > max_rows + 1:
                    check_rows(n - 1, head)
                out.append((n, r))
    except FileNotFoundError:
        raise FileNotFoundError(f"{head}: no such file") from None
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        where = f"{head}: row {len(out) + 1}" if out else head
        raise ValueError(logged(f"{where}: not a readable CSV file ({type(e).__name__})",
                                str(e))) from None
    return out


def read_csv(path: str | Path, who: str, *, min_rows: int = 2,
             segment_column: str | None = None, id_column: str | None = None,
             allow_missing: bool = False) -> Table:
    """Read and check a node's CSV (see the module docstring); ``who`` names the node.

    ``segment_column`` / ``id_column``: a column of text labels taken out of the variables
    (must exist in the header). At least ``min_rows`` data rows and one variable.
    ``allow_missing``: an empty cell, or one reading NaN/NA/null, is NaN (a missing value)
    instead of an error, as is a short row's missing tail.
    """
    path = Path(path)
    head = f"{who}: data-path {path}"
    rows = csv_rows(path, head)
    rows = [(n, r) for n, r in rows if r and any(c.strip() for c in r)]
    if not rows:
        raise ValueError(f"{head}: empty file; expected a header row of variable names, then "
                         "one row per sample")
    hn, header = rows[0]
    if hn != 1:
        raise ValueError(f"{head}: row 1 is blank; the header of variable names must be row 1")
    header = [h.strip() for h in header]
    seen: dict[str, int] = {}
    for j, name in enumerate(header, start=1):
        if not name:
            raise ValueError(f"{head}: row 1, column {j}: missing variable name (every column "
                             "needs a name in the header)")
        if name in seen:
            raise ValueError(f"{head}: row 1, column {j} ({name!r}): duplicated variable "
                             f"name (also column {seen[name]})")
        seen[name] = j
    special = {}
    for key, col in (("segment-column", segment_column), ("id-column", id_column)):
        if col:
            if col not in seen:
                raise ValueError(f"{head}: row 1: no column named {col!r} (node config {key}); "
                                 f"the header has {len(header)} columns")
            special[key] = seen[col] - 1
    var_cols = [j for j in range(len(header)) if j not in special.values()]
    if not var_cols:
        raise ValueError(f"{head}: row 1: no variable columns in the header")
    body = rows[1:]
    if len(body) < min_rows:
        raise ValueError(f"{head}: too few rows: {len(body)} data rows after the header; "
                         f"need at least {min_rows}")
    X = np.empty((len(body), len(var_cols)))
    labels: dict[str, list[str]] = {k: [] for k in special}
    for i, (n, r) in enumerate(body):
        if len(r) > len(header):
            raise ValueError(f"{head}: row {n}, column {len(header) + 1}: a value without a "
                             f"variable name (row has {len(r)} fields, the header {len(header)})")
        if len(r) < len(header) and allow_missing:
            r = r + [""] * (len(header) - len(r))
        if len(r) < len(header):
            j = len(r)
            raise ValueError(f"{head}: row {n}, column {j + 1} ({header[j]!r}): missing value "
                             f"(row has {len(r)} fields, the header {len(header)})")
        for k, j in enumerate(var_cols):
            X[i, k] = _cell(r[j], f"{head}: row {n}, column {j + 1} ({header[j]!r})",
                            allow_missing)
        for key, j in special.items():
            label = r[j].strip()
            if not label:
                raise ValueError(f"{head}: row {n}, column {j + 1} ({header[j]!r}): empty "
                                 f"{key.split('-')[0]} label")
            labels[key].append(label)
    ids = labels.get("id-column")
    if ids is not None:
        first: dict[str, int] = {}
        for (n, _), v in zip(body, ids, strict=True):
            if v in first:
                raise ValueError(f"{head}: row {n}, column {special['id-column'] + 1} "
                                 f"({header[special['id-column']]!r}): duplicated ID "
                                 f"(also row {first[v]})")
            first[v] = n
    segs = labels.get("segment-column")
    if segs is not None:
        closed: set[str] = set()
        for i, ((n, _), v) in enumerate(zip(body, segs, strict=True)):
            if i and v != segs[i - 1]:
                closed.add(segs[i - 1])
                if v in closed:
                    raise ValueError(f"{head}: row {n}, column {special['segment-column'] + 1} "
                                     f"({header[special['segment-column']]!r}): its segment "
                                     "resumes after another one; rows of a segment must be "
                                     "consecutive")
    return Table(path, [header[j] for j in var_cols], X, segs, ids)


def segments(table: Table, min_rows: int, who: str) -> list[np.ndarray]:
    """The table's rows split at the segment labels (one block without a segment column);
    a segment shorter than ``min_rows`` is an error naming its first row."""
    if table.segments is None:
        blocks, starts, labels = [table.values], [0], [None]
    else:
        starts = [i for i, v in enumerate(table.segments) if i == 0 or v != table.segments[i - 1]]
        ends = starts[1:] + [len(table.segments)]
        blocks = [table.values[a:b] for a, b in zip(starts, ends, strict=True)]
        labels = [table.segments[a] for a in starts]
    for block, start, label in zip(blocks, starts, labels, strict=True):
        if len(block) < min_rows:
            what = "its segment" if label is not None else "the series"
            raise ValueError(f"{table.where(who)}: row {start + 2}: too few rows: {what} has "
                             f"{len(block)} rows; need at least {min_rows} (lags + 1)")
    return blocks


def constructor_kwargs(cls: type, names: list[str]) -> dict[str, Any]:
    """``{"names": names}`` when ``cls``'s constructor takes ``names``, else nothing."""
    try:
        params = inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):
        return {}
    return {"names": list(names)} if "names" in params else {}


def standardized(X: np.ndarray, names: list[str], where: str) -> np.ndarray:
    """``X`` with every column at mean 0, sd 1; a constant column is an error naming it."""
    sd = X.std(axis=0)
    for j in np.flatnonzero(sd == 0):
        raise ValueError(f"{where}: column {names[j]!r} is constant; it carries no "
                         "information (drop it)")
    return (X - X.mean(axis=0)) / sd


def zscored(table: Table, who: str) -> np.ndarray:
    """The table's values standardized (:func:`standardized`), errors naming its file."""
    return standardized(table.values, table.names, table.where(who))


def id_key(node_config: Mapping[str, Any]) -> bytes | None:
    """The parties' shared ID key: node config ``id-key``, else ``$FEDCAUSAL_ID_KEY``; None
    when neither is set (the party then aligns by private set intersection)."""
    key = str(node_config.get(ID_KEY, "") or os.environ.get(ID_KEY_ENV, ""))
    return key.encode() if key else None


def keyed_tokens(ids: list[str], key: bytes) -> np.ndarray:
    """HMAC-SHA256 of each ID under ``key``, its first 8 bytes as an int64 token."""
    out = [int.from_bytes(hmac.new(key, i.encode(), hashlib.sha256).digest()[:8], "big",
                          signed=True) for i in ids]
    return np.asarray(out, dtype=np.int64)


def aligned_by_ids(table: Table, key: bytes, who: str) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, tokens)``: the table's rows sorted by the keyed hash of their ID, and those
    tokens in that order. The server intersects the parties' tokens, never sees an ID (see
    :func:`fedcausal_flwr.vertical.app.own_data`)."""
    assert table.ids is not None
    tokens = keyed_tokens(table.ids, key)
    if len(np.unique(tokens)) != len(tokens):  # 2^-64 per pair: only a broken key/ID set
        raise ValueError(f"{table.where(who)}: two IDs share a keyed hash; use other IDs")
    order = np.argsort(tokens, kind="stable")
    return table.values[order], tokens[order]
