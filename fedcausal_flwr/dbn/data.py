"""Run-config dispatch of the FDBNL / PFDBNL data (keys as in the Flower run config).

A Flower client calls ``client_data(cfg, partition_id, num_partitions)`` and sees only its own
``(Xt, Xlag)``; the server calls ``ground_truth(cfg, num_partitions)`` for evaluation.

Keys and defaults: :class:`DBNData` (validated; the App's pyproject declares the same).

- synthetic: ``data.synthetic.client_dbn`` / ``truths_dbn``.
- dream4: ``data-path`` is a time-series TSV whose replicates are split into K consecutive
  groups; truth ``[gold standard]`` (None without one). If ``data-path`` contains ``{client}``
  it is a template: client k reads network k + 1 whole (the paper's PFDBNL / FDBNL-d setting)
  and the truth is one gold standard per client.
- node: every SuperNode reads its own CSV (node config ``data-path``, see
  :mod:`fedcausal_flwr.data.csvdata`); no truth, the run config names no data.
- netsim: homogeneous runs split subject ``netsim-subject`` into K chunks; heterogeneous runs
  give client k the whole subject ``netsim-subject + 2k``. Truth: per client, its subject's
  0/1 net, diagonal included.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from fedcausal_flwr.data.dream4 import dream4_clients, load_dream4
from fedcausal_flwr.data.netsim import load_netsim, netsim_chunks, netsim_truth
from fedcausal_flwr.data.timeseries import Pair, lagged, lagged_segments
from fedcausal_flwr.dbn.synthetic import client_dbn, truths_dbn
from fedcausal_flwr.settings import MAX_LAGS, MAX_ROWS, Settings, section_view, setting

DATASETS = ("synthetic", "dream4", "netsim", "node")
MAX_D = 2000
"""Upper bound of the synthetic ``d``: a client's lagged moments are (d + p d)^2 floats, 128 MB
at d = 2000, p = 1 (d = 100000 would need 320 GB and only fail later with a MemoryError)."""
CLIENT_FIELD = "{client}"


@dataclass(frozen=True)
class DBNData(Settings):
    """The built-in DBN data a run config describes, with the App's defaults (the one source).

    ``data``: "synthetic", "dream4" (``data_path``: a time-series TSV) or "netsim"
    (``data_path``: a ``simN.mat``, subject ``netsim_subject``); synthetic: ``d`` variables,
    ``lags``, ``samples_per_client``, ``generator`` (true SVAR, or the official code's
    shortcut), ``weights`` (the paper's |w| in [0.3, 0.5] or the code's [0.5, 2]), expected
    degrees, ``heterogeneous`` clients; ``seed`` draws the data.
    """

    section: ClassVar[str] = "dbn"

    data: str = setting("synthetic", "data", choices=DATASETS)
    data_path: str = setting("", "data-path")
    netsim_subject: int = setting(1, "netsim-subject", ge=1, le=10_000)
    d: int = setting(10, "d", ge=1, le=MAX_D)
    lags: int = setting(1, "lags", ge=1, le=MAX_LAGS)
    samples_per_client: int = setting(100, "samples-per-client", ge=2, le=MAX_ROWS)
    generator: str = setting("svar", "generator", choices=("svar", "code"))
    weights: str = setting("paper", "weights", choices=("paper", "code"))
    degree_w: float = setting(4.0, "degree-w", ge=0)
    degree_a: float = setting(1.0, "degree-a", ge=0)
    heterogeneous: bool = setting(False, "heterogeneous")
    seed: int = setting(0, "seed", ge=0)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.data == "synthetic" and self.lags >= self.samples_per_client:
            raise ValueError(
                f"run config {self.app_key('lags')!r} = {self.lags}: must be below "
                f"{self.app_key('samples-per-client')!r} = {self.samples_per_client} (a client's "
                "rows; each row needs its lags inside the client's series)")


def data_config(cfg: Mapping[str, Any]) -> DBNData:
    """The data keys of a run config, validated (a ``DBNData`` passes through)."""
    if isinstance(cfg, DBNData):
        return cfg
    cfg = section_view(DBNData.section, cfg)
    if isinstance(cfg.get("heterogeneous"), str):  # node configs arrive as strings
        cfg = {**cfg, "heterogeneous": _flag(cfg["heterogeneous"], "heterogeneous")}
    return DBNData.from_run_config(cfg)


def _flag(value: Any, key: str) -> bool:
    """A boolean written as a string (node configs arrive as strings)."""
    if value.strip().lower() not in ("true", "false", "1", "0", "yes", "no", ""):
        raise ValueError(f"run config {DBNData.app_key(key)!r} = {value!r}: expected true or "
                         "false (allowed: "
                         "bool, or one of the strings true, false, yes, no, 1, 0)")
    return value.strip().lower() in ("true", "1", "yes")


def _existing(path: str) -> Path:
    if not path:
        raise FileNotFoundError("run-config key 'data-path' is empty; it must name the data file")
    p = Path(path).expanduser()
    if not p.exists():
        raise FileNotFoundError(f"data file {p} not found (run-config key 'data-path')")
    return p


def _data_path(c: DBNData, client: int | None = None) -> Path:
    path = c.data_path
    if client is not None:
        path = path.replace(CLIENT_FIELD, str(client + 1))
    return _existing(path)


def _per_client_files(c: DBNData) -> bool:
    return CLIENT_FIELD in c.data_path


def _synthetic_args(c: DBNData) -> dict[str, Any]:
    return dict(d=c.d, p=c.lags, degree_w=c.degree_w, degree_a=c.degree_a, weights=c.weights,
                generator=c.generator, heterogeneous=c.heterogeneous)


def _netsim_subjects(c: DBNData, K: int, n_subjects: int) -> list[int]:
    """0-based subject of each client."""
    first = c.netsim_subject
    step = 2 if c.heterogeneous else 0
    subjects = [first - 1 + step * k for k in range(K)]
    if min(subjects) < 0 or max(subjects) >= n_subjects:
        raise ValueError(f"netsim-subject={first} with K={K} needs subjects "
                         f"{subjects[0] + 1}..{subjects[-1] + 1}; the file has {n_subjects}")
    return subjects


def _check_partition(partition_id: int, num_partitions: int) -> None:
    if not 0 <= partition_id < num_partitions:
        raise ValueError(f"partition_id={partition_id} outside 0..{num_partitions - 1}")


def client_data(cfg: Mapping, partition_id: int, num_partitions: int) -> Pair:
    """Client ``partition_id``'s ``(Xt, Xlag)`` out of ``num_partitions`` clients."""
    c = data_config(cfg)
    name, k, K = c.data, int(partition_id), int(num_partitions)
    _check_partition(k, K)
    p = c.lags
    if name == "node":
        raise ValueError("run config data = 'node' but this SuperNode has no node config "
                         "data-path (its own CSV)")
    if name == "synthetic":
        return client_dbn(c.seed, k, K, c.samples_per_client, **_synthetic_args(c))
    if name == "dream4":
        if _per_client_files(c):
            series, _, _ = load_dream4(_data_path(c, k))
            return lagged_segments(series, p, pad="drop")
        series, _, _ = load_dream4(_data_path(c))
        return dream4_clients(series, K, p)[k]
    ts, _ = load_netsim(_data_path(c))
    subject = _netsim_subjects(c, K, ts.shape[0])[k]
    if c.heterogeneous:
        return lagged(ts[subject], p, pad="drop")
    return netsim_chunks(ts[subject], K, p)[k]


def variable_names(cfg: Mapping, partition_id: int, d: int) -> list[str] | None:
    """The names of the d variables of client ``partition_id``'s data, where the data set
    has them: DREAM4's gene names (its header line only is read), NetSim's regions
    ``R1``..``Rd``; None for synthetic data (the clients' default ``x0``..``x{d-1}``)."""
    from fedcausal_flwr.data.dream4 import _fields
    from fedcausal_flwr.data.nodefiles import checked_file

    c = data_config(cfg)
    if c.data == "dream4":
        path = _data_path(c, int(partition_id)) if _per_client_files(c) else _data_path(c)
        with open(checked_file(path, str(path)), encoding="utf-8", errors="replace") as f:
            header = next((ln for ln in f if ln.strip()), "")
        genes = [h for h in _fields(header) if h.lower() != "time"]
        return genes if len(genes) == d else None
    if c.data == "netsim":
        return [f"R{i + 1}" for i in range(int(d))]
    return None


def ground_truth(cfg: Mapping, num_partitions: int
                 ) -> list[tuple[np.ndarray, np.ndarray]] | list[np.ndarray] | None:
    """Truth for evaluation.

    synthetic: K (W, A) pairs; dream4: ``[truth]`` (one per client with a ``{client}``
    template), None without a gold standard; netsim: per client its subject's 0/1 net.
    """
    c = data_config(cfg)
    K = int(num_partitions)
    if c.data == "node":
        return None
    if c.data == "synthetic":
        return truths_dbn(c.seed, K, **_synthetic_args(c))
    if c.data == "dream4":
        paths = ([_data_path(c, k) for k in range(K)] if _per_client_files(c)
                 else [_data_path(c)])
        truths = [load_dream4(path)[2] for path in paths]
        return None if any(t is None for t in truths) else truths
    ts, net = load_netsim(_data_path(c))
    return [netsim_truth(net[s]) for s in _netsim_subjects(c, K, ts.shape[0])]
