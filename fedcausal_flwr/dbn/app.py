"""App glue of FDBNL / PFDBNL: settings from the run config, built-in data, truth, evaluator."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from flwr.app import Context

from fedcausal_flwr.dbn.data import DBNData, data_config
from fedcausal_flwr.dbn.settings import PFDBNLSettings
from fedcausal_flwr.federation.client import client_class, section_context
from fedcausal_flwr.settings import section_view

SECTION = "dbn"

__all__ = ["client", "evaluator", "strategy", "truth"]



def strategy(algorithm: str, rc: Mapping[str, Any]):
    """FDBNL or PFDBNL with the run config's settings, scored against the built-in truth."""
    rc = section_view(SECTION, rc)  # a sectioned run config or the section itself
    from fedcausal_flwr.dbn.strategy import FDBNL, PFDBNL

    cls = PFDBNL if algorithm == "pfdbnl" else FDBNL
    s = cls.settings_class.from_run_config(rc)
    data_config(rc)  # the data keys fail here, before any node is asked
    return cls(s, evaluate_fn=evaluator(rc, s.tau_w, s.tau_a))


def client(algorithm: str, context: Context):
    """This node's client on the run config's data set (``data``, ``data-path`` ...), or on
    its own CSV when its node config has ``data-path`` (:func:`own_data`)."""
    context = section_context(context, SECTION)
    from fedcausal_flwr.data.csvdata import constructor_kwargs, node_data_path
    from fedcausal_flwr.data.nodefiles import allow_run_config_paths
    from fedcausal_flwr.dbn.data import client_data, variable_names

    pid = int(context.node_config.get("partition-id", 0))
    k = int(context.node_config.get("num-partitions", 1))
    path = node_data_path(context.node_config, f"client {pid}")
    if path is not None:
        Xt, Xlag, names = own_data(path, context, f"client {pid}")
        cls = client_class(algorithm)
        return cls.from_context(context, {"Xt": Xt, "Xlag": Xlag,
                                          **constructor_kwargs(cls, names)})
    if str(context.run_config.get("data", "synthetic")) in ("dream4", "netsim"):
        allow_run_config_paths(context.run_config, context.node_config,
                               {"data-path": f"{SECTION}.data-path"}, f"client {pid}", pid)
    try:
        Xt, Xlag = client_data(context.run_config, pid, k)
        names = variable_names(context.run_config, pid, Xt.shape[1])
    except ValueError as e:
        raise ValueError(f"client {pid}: {e}") from e
    return client_class(algorithm).from_context(context, {"Xt": Xt, "Xlag": Xlag,
                                                          "names": names})


def own_data(path, context: Context, who: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """``(Xt, Xlag, names)`` of a node's own CSV: rows in time order, one column per variable
    (its header names them: the columns are matched to the federation's variables by name, in
    any order, and a site may hold only some of them), lags (run config ``dbn.lags``, the
    model's order) within each segment of the node config's ``segment-column`` (none: one
    series); the rows of a segment's first lags are dropped. Empty or NaN cells are missing
    values (NaN), handled by the client (:class:`~fedcausal_flwr.dbn.client.FDBNLClient`)."""
    from fedcausal_flwr.data.csvdata import SEGMENT_COLUMN, read_csv, segments
    from fedcausal_flwr.data.timeseries import lagged_segments

    p = DBNData.from_run_config({"lags": context.run_config.get("lags", DBNData.lags)}).lags
    seg = str(context.node_config.get(SEGMENT_COLUMN, "") or "") or None
    table = read_csv(path, who, min_rows=p + 1, segment_column=seg, allow_missing=True)
    Xt, Xlag = lagged_segments(segments(table, p + 1, who), p, pad="drop", missing=True)
    return Xt, Xlag, table.names


def truth(algorithm: str, rc: Mapping[str, Any]) -> dict[str, np.ndarray]:  # noqa: ARG001
    """The true W and A of a homogeneous synthetic run (for the PNG), else nothing."""
    rc = section_view(SECTION, rc)  # a sectioned run config or the section itself
    if str(rc.get("data", "synthetic")) != "synthetic":
        return {}
    from fedcausal_flwr.dbn.data import ground_truth

    (W, A), (W1, _) = ground_truth(rc, 2)
    return {"W": W, "A": A} if np.array_equal(W, W1) else {}


def client_estimates(est: Mapping[str, np.ndarray], i: int) -> tuple[np.ndarray, np.ndarray]:
    """Client i's personalized (W, A) when the run has them, else the global ones."""
    if "W_local" in est:
        return np.asarray(est["W_local"])[i], np.asarray(est["A_local"])[i]
    return np.asarray(est["W"]), np.asarray(est["A"])


def evaluator(rc: Mapping[str, Any], tau_w: float = PFDBNLSettings.tau_w,
              tau_a: float = PFDBNLSettings.tau_a
              ) -> Callable[[Mapping[str, np.ndarray], Sequence[int]], dict[str, Any]] | None:
    """``evaluate(estimates, client_ids) -> metrics`` against the truth of the run config's
    built-in data set (synthetic, DREAM4 with a gold standard, NetSim); None when unknown."""
    from fedcausal_flwr.dbn.data import ground_truth
    from fedcausal_flwr.dbn.evaluation import lag_scores, netsim_auroc
    from fedcausal_flwr.metrics import mean_metrics, score_auc

    kind = str(rc.get("data", "synthetic"))
    if kind == "node":  # the nodes' own data: no truth to score against
        return None
    cache: dict[int, Any] = {}

    def evaluate(est: Mapping[str, np.ndarray], cids: Sequence[int]) -> dict[str, Any]:
        k = max(cids) + 1
        if k not in cache:
            cache[k] = ground_truth(rc, k)
        truths = cache[k]
        if truths is None:
            return {}
        if kind == "dream4":
            per = [score_auc(lag_scores(*client_estimates(est, i)),
                             truths[min(c, len(truths) - 1)]) for i, c in enumerate(cids)]
        elif kind == "netsim":
            per = [{"auroc": netsim_auroc(*client_estimates(est, i),
                                          truths[min(c, len(truths) - 1)], tau_w)}
                   for i, c in enumerate(cids)]
        else:
            per = synthetic_scores(est, cids, truths, tau_w, tau_a)
        if "W_local" not in est:
            per = per[:1] if kind != "synthetic" else per
        return mean_metrics(per)

    return evaluate


def synthetic_scores(est: Mapping[str, np.ndarray], cids: Sequence[int],
                     truths: Sequence[tuple[np.ndarray, np.ndarray]], tau_w: float,
                     tau_a: float) -> list[dict[str, float]]:
    """Each client's SHD/TPR/FDR against its truth. A global graph is scored once per
    distinct truth (a homogeneous federation shares one: once per round, not K times)."""
    from fedcausal_flwr.dbn.evaluation import dbn_graph_metrics

    if "W_local" in est:
        return [dbn_graph_metrics(*client_estimates(est, i), *truths[c], tau_w, tau_a)
                for i, c in enumerate(cids)]
    scored: dict[int, dict[str, float]] = {}
    for c in cids:
        if id(truths[c]) not in scored:
            scored[id(truths[c])] = dbn_graph_metrics(est["W"], est["A"], *truths[c], tau_w,
                                                      tau_a)
    return [scored[id(truths[c])] for c in cids]


def node_data(algorithm: str, context: Context, path, who: str) -> dict[str, Any]:  # noqa: ARG001
    """The client arguments of a node's own CSV at ``path`` (:func:`own_data`)."""
    Xt, Xlag, names = own_data(path, context, who)
    return {"Xt": Xt, "Xlag": Xlag, "names": names}
