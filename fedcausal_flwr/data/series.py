"""Built-in sets of the time-series families (FedPC, FedTrees): a synthetic linear
non-Gaussian model, NetSim, DREAM4 and Sachs cut into the clients' series, their truth, the
window rows, and the evaluator of a summary graph against that truth."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from fedcausal_flwr.settings import Settings, setting

KINDS = ("synthetic", "netsim", "dream4", "sachs", "node")


@dataclass(frozen=True)
class SeriesData(Settings):
    """The data keys a time-series family shares (FedPC's, FedTrees')."""

    section: ClassVar[str] = "series"

    data: str = setting("synthetic", "data", choices=KINDS,
                        doc="synthetic, netsim, dream4, sachs, or node (each node's own CSV)")
    data_path: str = setting("", "data-path",
                             doc="the .mat (netsim), time-series .tsv (dream4) or directory "
                                 "(sachs); read only where the node config allows it")
    subject: int = setting(1, "subject", ge=1, doc="NetSim subject (1-based) cut into chunks")
    d: int = setting(8, "d", ge=2, le=200, doc="synthetic: variables")
    n: int = setting(200, "n", ge=10, doc="synthetic: rows per client")
    edges: int = setting(8, "edges", ge=0, doc="synthetic: contemporaneous edges")
    seed: int = setting(0, "data-seed", ge=0, doc="synthetic: the draw of graph and data")


def synthetic(c: SeriesData, p: int, K: int) -> tuple[list[np.ndarray], np.ndarray,
                                                           np.ndarray]:
    """K clients' series (or rows, p = 0) of x_t = W^T x_t + A^T x_{t-1} + e with uniform
    noise; the true ``W`` (d x d DAG) and ``A`` (d x d, zero when p = 0)."""
    rng = np.random.default_rng(c.seed)
    d = c.d
    W = np.zeros((d, d))
    pairs = [(i, j) for i in range(d) for j in range(i + 1, d)]
    for k in rng.permutation(len(pairs))[:min(c.edges, len(pairs))]:
        W[pairs[k]] = rng.uniform(0.5, 1.0) * rng.choice([-1, 1])
    perm = rng.permutation(d)
    W = W[np.ix_(perm, perm)]
    A = np.zeros((d, d))
    if p:
        A[rng.random((d, d)) < 1.5 / d] = 0.4
        np.fill_diagonal(A, 0.5)
    inv = np.linalg.inv(np.eye(d) - W)
    out = []
    for k in range(K):
        r = np.random.default_rng([c.seed, k + 1])
        E = r.uniform(-1, 1, (c.n + 1, d)) * np.sqrt(3)
        X = np.zeros_like(E)
        X[0] = E[0] @ inv
        for t in range(1, len(E)):
            X[t] = (E[t] + X[t - 1] @ A) @ inv if p else E[t] @ inv
        out.append(X[1:] if p else X[1:])
    return out, W, A


#: Rows of each experiment of ``cyto_full_data.csv``, in file order (the first: observational).
SACHS_EXPERIMENTS = (853, 902, 911, 723, 810, 799, 848, 913, 707)


def experiments(X: np.ndarray) -> list[np.ndarray]:
    """Each Sachs experiment's rows with the indicator columns of experiments 2..9 (the
    observational one is the baseline): context variables of joint causal inference."""
    if len(X) != sum(SACHS_EXPERIMENTS):
        raise ValueError(f"Sachs data has {len(X)} rows; the nine experiments have "
                         f"{sum(SACHS_EXPERIMENTS)}")
    out, start = [], 0
    for e, size in enumerate(SACHS_EXPERIMENTS):
        C = np.zeros((size, len(SACHS_EXPERIMENTS) - 1))
        if e:
            C[:, e - 1] = 1.0
        out.append(np.hstack([X[start:start + size], C]))
        start += size
    return out


def windows(series: list[np.ndarray], p: int) -> list[np.ndarray]:
    """Each series's window rows ``[x_t, x_{t-1}, ..., x_{t-p}]`` (its first p rows dropped);
    rows as they are when p = 0."""
    from fedcausal_flwr.data.timeseries import lagged

    if p == 0:
        return [np.asarray(s, float) for s in series]
    return [np.hstack(lagged(np.asarray(s, float), p, pad="drop", missing=True))
            for s in series]


def client_series(rc: Mapping[str, Any], p: int, K: int,
                  keys: type[SeriesData]
                  ) -> tuple[list[list[np.ndarray]], list[str], np.ndarray | None]:
    """``(series per client, names, truth)`` of a built-in set: each client's list of
    series (lags never cross them), the variable names and the 0/1 summary truth; ``keys``:
    the family's class of these data keys."""
    c = keys.from_run_config(rc)
    if c.data == "synthetic":
        xs, W, A = synthetic(c, p, K)
        return [[x] for x in xs], [f"x{i}" for i in range(c.d)], ((W != 0) | (A != 0) & (
            ~np.eye(c.d, dtype=bool))).astype(int)
    if c.data == "netsim":
        from fedcausal_flwr.data.netsim import load_netsim, netsim_truth

        ts, net = load_netsim(c.data_path)
        if c.subject > len(ts):
            raise ValueError(f"{c.section}.subject = {c.subject}; the file has {len(ts)}")
        T = netsim_truth(net[c.subject - 1])
        np.fill_diagonal(T, 0)
        chunks = np.array_split(ts[c.subject - 1], K)
        return [[x] for x in chunks], [f"n{i + 1}" for i in range(ts.shape[2])], T
    if c.data == "dream4":
        from fedcausal_flwr.data.dream4 import load_dream4

        series, genes, truth = load_dream4(c.data_path)
        if not 1 <= K <= len(series):
            raise ValueError(f"{K} clients need 1 <= K <= {len(series)} DREAM4 replicates")
        groups = np.array_split(np.arange(len(series)), K)
        return [[series[i] for i in g] for g in groups], genes, truth
    if c.data == "sachs":
        from fedcausal_flwr.data.sachs import sachs

        if getattr(c, "sachs_rows", "observational") == "observational":
            X, A, names = sachs(c.data_path)
            return [[x] for x in np.array_split(X, K)], names, (A != 0).astype(int)
        X, A, names = sachs(c.data_path, observational=False)
        truth = (A != 0).astype(int)
        blocks = experiments(X)
        if not 1 <= K <= len(blocks):
            raise ValueError(f"{K} clients need 1 <= K <= {len(blocks)} Sachs experiments")
        groups = np.array_split(np.arange(len(blocks)), K)
        return [[np.vstack([blocks[e] for e in g])] for g in groups], \
            [*names, *(f"exp{e + 1}" for e in range(1, len(blocks)))], truth
    raise ValueError(f"{c.section}.data = '{c.data}': each node reads its own CSV (node "
                     "config data-path)")


def evaluator(rc: Mapping[str, Any], p: int, keys: type[SeriesData]):
    """``evaluate(estimates, client_ids) -> metrics`` against the built-in truth of the data
    keys ``keys`` (:func:`~fedcausal_flwr.metrics.summary_scores`); None without one."""
    if str(rc.get("data", "synthetic")) == "node":
        return None
    cache: dict[int, np.ndarray | None] = {}

    def evaluate(est: Mapping[str, Any], cids: Sequence[int]) -> dict[str, Any]:
        if "score" not in est:
            return {}
        k = max(cids) + 1
        if k not in cache:
            try:
                cache[k] = client_series(rc, p, k, keys)[2]
            except (ValueError, OSError):
                cache[k] = None
        T = cache[k]
        from fedcausal_flwr.metrics import summary_scores

        return {} if T is None else summary_scores(est, T)

    return evaluate


def node_window(context: Any, path: Any, who: str, p: int) -> dict[str, Any]:
    """The client arguments ``{"Z", "d", "names"}`` of a node's own CSV: one column per
    variable (header names them), rows in time order when ``p`` >= 1 (split at the node
    config's ``segment-column``); empty or NaN cells are missing values; columns are put in
    the order of their names, so sites agree whatever their files' order."""
    from fedcausal_flwr.data.csvdata import SEGMENT_COLUMN, read_csv, segments

    seg = str(context.node_config.get(SEGMENT_COLUMN, "") or "") or None
    table = read_csv(path, who, min_rows=p + 2, segment_column=seg, allow_missing=True)
    order = sorted(range(len(table.names)), key=lambda j: table.names[j])  # match by name
    Z = np.vstack(windows([s[:, order] for s in segments(table, p + 2, who)], p))
    return {"Z": Z, "d": len(order), "names": [table.names[j] for j in order]}


def window_arguments(context: Any, section: str, keys: type[SeriesData], p: int
                     ) -> dict[str, Any]:
    """The client arguments of this node (``context`` already of the family's ``section``):
    its own CSV (node config ``data-path``, :func:`node_window`) or its share of the run
    config's built-in set."""
    from fedcausal_flwr.data.csvdata import node_data_path
    from fedcausal_flwr.data.nodefiles import allow_run_config_paths

    pid = int(context.node_config.get("partition-id", 0))
    k = int(context.node_config.get("num-partitions", 1))
    path = node_data_path(context.node_config, f"client {pid}")
    if path is not None:
        return node_window(context, path, f"client {pid}", p)
    rc = context.run_config
    if str(rc.get("data", "synthetic")) != "synthetic":
        allow_run_config_paths(rc, context.node_config, {"data-path": f"{section}.data-path"},
                               f"client {pid}", pid)
    try:
        series, names, _ = client_series(rc, p, max(k, pid + 1), keys)
        Z = np.vstack(windows(series[pid], p))
    except ValueError as e:
        raise ValueError(f"client {pid}: {e}") from e
    return {"Z": Z, "d": len(names), "names": names}
