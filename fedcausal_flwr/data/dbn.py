"""Run-config dispatch of the FDBNL / PFDBNL data (keys as in the Flower run config).

A Flower client calls ``client_data(cfg, partition_id, num_partitions)`` and sees only its own
``(Xt, Xlag)``; the server calls ``ground_truth(cfg, num_partitions)`` for evaluation.

Keys (defaults): ``data`` ("synthetic" | "dream4" | "netsim"), ``data-path`` (""), ``seed`` (0),
``d`` (10), ``lags`` (1), ``samples-per-client`` (100), ``generator`` ("svar"), ``weights``
("paper"), ``degree-w`` (4.0), ``degree-a`` (1.0), ``heterogeneous`` (False),
``netsim-subject`` (1, 1-based).

- synthetic: ``data.synthetic.client_dbn`` / ``truths_dbn``.
- dream4: ``data-path`` is a time-series TSV whose replicates are split into K consecutive
  groups; truth ``[gold standard]`` (None without one). If ``data-path`` contains ``{client}``
  it is a template: client k reads network k + 1 whole (the paper's PFDBNL / FDBNL-d setting)
  and the truth is one gold standard per client.
- netsim: homogeneous runs split subject ``netsim-subject`` into K chunks; heterogeneous runs
  give client k the whole subject ``netsim-subject + 2k``. Truth: per client, its subject's
  0/1 net, diagonal included.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from fedcausal_flwr.data.dream4 import dream4_clients, load_dream4
from fedcausal_flwr.data.netsim import load_netsim, netsim_chunks, netsim_truth
from fedcausal_flwr.data.synthetic import client_dbn, truths_dbn
from fedcausal_flwr.data.timeseries import Pair, lagged, lagged_segments

DATASETS = ("synthetic", "dream4", "netsim")
CLIENT_FIELD = "{client}"


def _flag(value: Any) -> bool:
    if isinstance(value, str):
        if value.strip().lower() not in ("true", "false", "1", "0", "yes", "no", ""):
            raise ValueError(f"cannot read {value!r} as a boolean")
        return value.strip().lower() in ("true", "1", "yes")
    return bool(value)


def _dataset(cfg: Mapping) -> str:
    name = str(cfg.get("data", "synthetic"))
    if name not in DATASETS:
        raise ValueError(f"run-config 'data' must be one of {DATASETS}, got {name!r}")
    return name


def _lags(cfg: Mapping) -> int:
    return int(cfg.get("lags", 1))


def _existing(path: str) -> Path:
    if not path:
        raise FileNotFoundError("run-config key 'data-path' is empty; it must name the data file")
    p = Path(path).expanduser()
    if not p.exists():
        raise FileNotFoundError(f"data file {p} not found (run-config key 'data-path')")
    return p


def _data_path(cfg: Mapping, client: int | None = None) -> Path:
    path = str(cfg.get("data-path", ""))
    if client is not None:
        path = path.replace(CLIENT_FIELD, str(client + 1))
    return _existing(path)


def _per_client_files(cfg: Mapping) -> bool:
    return CLIENT_FIELD in str(cfg.get("data-path", ""))


def _synthetic_args(cfg: Mapping) -> dict[str, Any]:
    return dict(d=int(cfg.get("d", 10)), p=_lags(cfg),
                degree_w=float(cfg.get("degree-w", 4.0)),
                degree_a=float(cfg.get("degree-a", 1.0)),
                weights=str(cfg.get("weights", "paper")),
                generator=str(cfg.get("generator", "svar")),
                heterogeneous=_flag(cfg.get("heterogeneous", False)))


def _netsim_subjects(cfg: Mapping, K: int, n_subjects: int) -> list[int]:
    """0-based subject of each client."""
    first = int(cfg.get("netsim-subject", 1))
    step = 2 if _flag(cfg.get("heterogeneous", False)) else 0
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
    name = _dataset(cfg)
    k, K = int(partition_id), int(num_partitions)
    _check_partition(k, K)
    p = _lags(cfg)
    if name == "synthetic":
        return client_dbn(int(cfg.get("seed", 0)), k, K, int(cfg.get("samples-per-client", 100)),
                          **_synthetic_args(cfg))
    if name == "dream4":
        if _per_client_files(cfg):
            series, _, _ = load_dream4(_data_path(cfg, k))
            return lagged_segments(series, p, pad="drop")
        series, _, _ = load_dream4(_data_path(cfg))
        return dream4_clients(series, K, p)[k]
    ts, _ = load_netsim(_data_path(cfg))
    subject = _netsim_subjects(cfg, K, ts.shape[0])[k]
    if _flag(cfg.get("heterogeneous", False)):
        return lagged(ts[subject], p, pad="drop")
    return netsim_chunks(ts[subject], K, p)[k]


def ground_truth(cfg: Mapping, num_partitions: int
                 ) -> list[tuple[np.ndarray, np.ndarray]] | list[np.ndarray] | None:
    """Truth for evaluation.

    synthetic: K (W, A) pairs; dream4: ``[truth]`` (one per client with a ``{client}``
    template), None without a gold standard; netsim: per client its subject's 0/1 net.
    """
    name = _dataset(cfg)
    K = int(num_partitions)
    if name == "synthetic":
        return truths_dbn(int(cfg.get("seed", 0)), K, **_synthetic_args(cfg))
    if name == "dream4":
        paths = ([_data_path(cfg, k) for k in range(K)] if _per_client_files(cfg)
                 else [_data_path(cfg)])
        truths = [load_dream4(path)[2] for path in paths]
        return None if any(t is None for t in truths) else truths
    ts, net = load_netsim(_data_path(cfg))
    return [netsim_truth(net[s]) for s in _netsim_subjects(cfg, K, ts.shape[0])]
