"""App glue of FedGC / FedCF: settings from the run config (merged with a ``.json`` at
``data-path``), the built-in data, the synthetic truth and the counterfactual warning.

``flwr run`` accepts only the keys the App declares, so any other key (the data keys with
model-specific defaults, see :mod:`fedcausal_flwr.statespace.data`) travels in a JSON file
named by ``data-path``; :func:`~fedcausal_flwr.statespace.data.merged_config` merges it over
the run config. Settings keys and their defaults: ``FedGCSettings`` / ``FedCFSettings``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from logging import WARNING
from typing import Any

import numpy as np
from flwr.app import Context
from flwr.common.logger import log

from fedcausal_flwr.federation.client import client_class, section_context
from fedcausal_flwr.settings import section_view
from fedcausal_flwr.statespace import kalman
from fedcausal_flwr.statespace import model as ss

SECTION = "statespace"

__all__ = ["client", "evaluator", "settings", "strategy"]

INPUT_COLUMNS = "input-columns"  # node config: the CSV's known-input columns


def settings(algorithm: str, rc: Mapping[str, Any]) -> ss.StateSpaceSettings:
    """``FedGCSettings`` or ``FedCFSettings`` from the run config and its ``.json``."""
    rc = section_view(SECTION, rc)  # a sectioned run config or the section itself
    from fedcausal_flwr.statespace.data import merged_config

    cls = ss.FedCFSettings if algorithm == "fedcf" else ss.FedGCSettings
    return cls.from_run_config(merged_config(rc, algorithm))


def strategy(algorithm: str, rc: Mapping[str, Any]):
    """FedGC or FedCF with the run config's settings; scored only on synthetic data."""
    rc = section_view(SECTION, rc)  # a sectioned run config or the section itself
    from fedcausal_flwr.statespace.data import merged_config
    from fedcausal_flwr.statespace.strategy import FedCF, FedGC

    s = settings(algorithm, rc)  # validates before anything else
    if algorithm == "fedcf" and s.delta_u().size and s.target == "predicted":
        log(WARNING, "fedcf: a counterfactual query with the paper's literal server target: "
            "with i.i.d. inputs it learns B_hat ~ 0 (measured CF error 1.0), set "
            'ss-target="innovation" for an answer that recovers B_mn')
    cls = FedCF if algorithm == "fedcf" else FedGC
    return cls(s, evaluate_fn=evaluator(merged_config(rc, algorithm)))


def client(algorithm: str, context: Context):
    """This node's client on the run config's data (synthetic system, NetSim, plant CSV), or
    on its own CSV when its node config has ``data-path`` (:func:`own_data`)."""
    context = section_context(context, SECTION)
    from fedcausal_flwr.data.csvdata import constructor_kwargs, node_data_path
    from fedcausal_flwr.data.nodefiles import allow_run_config_paths
    from fedcausal_flwr.statespace.data import client_data, merged_config

    pid = int(context.node_config.get("partition-id", 0))
    rc = context.run_config
    if str(rc.get("data-path", "") or "").endswith(".json"):  # read by merged_config
        allow_run_config_paths(rc, context.node_config, {"data-path": f"{SECTION}.data-path"},
                               f"client {pid}", pid)
    path = node_data_path(context.node_config, f"client {pid}")
    if path is not None:
        cls = client_class(algorithm)
        args = node_data(algorithm, context, path, f"client {pid}")
        names = args.pop("names")
        return cls.from_context(context, {**args, **constructor_kwargs(cls, names)})
    merged = merged_config(rc, algorithm)
    if str(merged.get("ss-data", "synthetic")) in ("netsim", "plant-csv"):
        allow_run_config_paths(merged, context.node_config,
                               {"ss-data-path": f"{SECTION}.ss-data-path"}, f"client {pid}", pid)
    try:
        c = client_data(merged, pid)
    except ValueError as e:
        raise ValueError(f"client {pid}: {e}") from e
    return client_class(algorithm).from_context(
        context, {"A": c.A, "C": c.C, "K": c.K, "y": c.y, "B": c.B, "u": c.u, "Q": c.Q,
                  "R": c.R})


def own_data(path, algorithm: str, context: Context, who: str
             ) -> tuple[kalman.ClientData, list[str]]:
    """This client's ``(A_mm, B_mm, C_mm, K_m, y_m, u_m)`` from its own CSV (rows in time order,
    the same time steps at every client): measurement channels, and the known inputs named
    by the node config ``input-columns`` (comma-separated header names, e.g.
    ``"valve,pump"``; default none). Identified as for the built-in real data: channels
    z-scored, then SVD + least squares ``h^t = A h^{t-1} + B u^{t-1}`` with ``ss-p`` states
    (:func:`~fedcausal_flwr.statespace.data.svd_var_client`). Inputs stay in the CSV's units,
    those of a counterfactual query's ``cf-delta``. The names returned are the measurement
    channels'. The Kalman filter runs over one continuous series: a ``segment-column`` is
    refused. Empty or NaN/NA/null cells (and a short row's tail) are missing values: the
    channels are z-scored over their observed cells and the client's filter skips them
    (:class:`~fedcausal_flwr.statespace.kalman.ClientData`)."""
    from fedcausal_flwr.data.csvdata import SEGMENT_COLUMN, Table, read_csv
    from fedcausal_flwr.statespace.data import merged_config, observed_zscored, svd_var_client

    if str(context.node_config.get(SEGMENT_COLUMN, "") or ""):
        raise ValueError(f"{who}: node config {SEGMENT_COLUMN} is not supported by "
                         f"{algorithm}: its filter runs over one continuous series shared in "
                         "time by every client")
    P = int(merged_config(context.run_config, algorithm)["ss-p"])
    table = read_csv(path, who, min_rows=max(3, P + 2), allow_missing=True)
    given = str(context.node_config.get(INPUT_COLUMNS, "") or "")
    inputs = [c.strip() for c in given.split(",") if c.strip()]
    unknown = [c for c in inputs if c not in table.names]
    if unknown or len(set(inputs)) != len(inputs):
        raise ValueError(f"{table.where(who)}: node config {INPUT_COLUMNS}={given!r}: "
                         f"{'not in the header ' + str(unknown) if unknown else 'repeats a name'}"
                         f" (header: {table.names})")
    keep = [j for j, n in enumerate(table.names) if n not in inputs]
    y = Table(table.path, [table.names[j] for j in keep],
              np.ascontiguousarray(table.values[:, keep]))  # row-major, as read
    if len(y.names) < P:
        raise ValueError(f"{table.where(who)}: row 1: {len(y.names)} measurement columns, "
                         f"fewer than the ss-p = {P} states")
    u = table.values[:, [table.names.index(c) for c in inputs]]
    c, _ = svd_var_client(observed_zscored(y, who), P, who, u=u)
    return c, y.names


def evaluator(full: Mapping[str, Any]
              ) -> Callable[[Mapping[str, np.ndarray], Sequence[int]], dict[str, Any]] | None:
    """``evaluate_fn`` against the synthetic truth (the server regenerates the system);
    None on real data, whose truth is unknown. ``full``: a merged config."""
    from fedcausal_flwr.statespace.data import synthetic_system

    if str(full.get("ss-data", "synthetic")) != "synthetic":
        return None
    sys = synthetic_system(full)
    offA, offB = ss.off_diagonal(sys.A, sys.B, sys.P, sys.U)

    def evaluate(est: Mapping[str, np.ndarray], cids: Sequence[int]) -> dict[str, Any]:
        if len(cids) != len(sys.P) or "A_hat" not in est:
            return {}
        out = {"err_A": float(np.linalg.norm(est["A_hat"] - offA))}
        if len(sys.P) >= 2:
            out["err_A21"] = ss.block_error(est["A_hat"], sys.A, sys.P, sys.P, 1, 0)
            out["norm_A12"] = ss.block_error(est["A_hat"], 0 * sys.A, sys.P, sys.P, 0, 1)
        if "B_hat" in est and np.size(est["B_hat"]):
            out["err_B"] = float(np.linalg.norm(est["B_hat"] - offB))
            C21 = sys.block(sys.C, sys.D, sys.P, 1, 1)
            out["cf_error_21"] = ss.counterfactual_error(
                C21, sys.block(est["B_hat"], sys.P, sys.U, 1, 0),
                sys.block(sys.B, sys.P, sys.U, 1, 0))
        return out

    return evaluate


def node_data(algorithm: str, context: Context, path, who: str) -> dict[str, Any]:
    """The client arguments of a node's own CSV at ``path`` (:func:`own_data`)."""
    c, names = own_data(path, algorithm, context, who)
    y, u = c.given()  # NaN where a cell is missing: the client's own filter skips it
    return {"A": c.A, "C": c.C, "K": c.K, "y": y, "B": c.B, "u": u, "names": names,
            "Q": c.Q, "R": c.R}
