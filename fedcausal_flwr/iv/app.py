"""App glue of FedIV: settings from the run config, the built-in IV data, the test-MSE
evaluator (the built-in process's true g is known) and the g-vs-g0 figure.

Algorithm settings come from :class:`~fedcausal_flwr.iv.model.FedIVSettings` (its rounds:
``iv.iv-rounds``; a ``dbn.num-rounds`` other than its default is refused, not silently ignored),
the data keys (``iv-scenario``, ``iv-dgp``, ``iv-n``, ``iv-n-test``, ``iv-alpha``) from
:class:`~fedcausal_flwr.iv.data.IVDataConfig`; both validate before any node is contacted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from flwr.app import Context

from fedcausal_flwr.federation.client import client_class, section_context
from fedcausal_flwr.iv.data import IVDataConfig
from fedcausal_flwr.iv.settings import FedIVSettings
from fedcausal_flwr.settings import section_view

SECTION = "iv"

__all__ = ["client", "evaluator", "plot_g", "save_plots", "strategy"]



def strategy(algorithm: str, rc: Mapping[str, Any]):  # noqa: ARG001
    """FedIV with the run config's settings, scored against the built-in data's true g."""
    rc = section_view(SECTION, rc)  # a sectioned run config or the section itself
    from fedcausal_flwr.iv.data import eval_grid
    from fedcausal_flwr.iv.strategy import FedIV

    s = FedIVSettings.from_run_config(rc)
    own = IVDataConfig.from_run_config(rc).outcome  # the nodes' own CSVs: no true g
    grid = None if own or not s.replicas else eval_grid(rc)
    return FedIV(s, evaluate_fn=None if own else evaluator(rc),
                 interval_x=None if grid is None else grid[0])


def client(algorithm: str, context: Context):
    """This node's client on the run config's built-in IV data, or on its own CSV when its
    node config has ``data-path`` (:func:`own_data`); on ``iv-device``."""
    context = section_context(context, SECTION)
    from fedcausal_flwr.data.csvdata import constructor_kwargs, node_data_path
    from fedcausal_flwr.iv.data import client_data

    pid = int(context.node_config.get("partition-id", 0))
    k = int(context.node_config.get("num-partitions", 1))
    device = FedIVSettings.from_run_config(context.run_config).device
    path = node_data_path(context.node_config, f"client {pid}")
    if path is not None:
        train, val, names = own_data(path, context.run_config, pid, f"client {pid}")
        cls = client_class(algorithm)
        return cls.from_context(context, {"train": train, "val": val, "device": device,
                                          **constructor_kwargs(cls, names)})
    if IVDataConfig.from_run_config(context.run_config).outcome:
        raise ValueError(f"client {pid}: the run config names CSV columns (iv-outcome ...) but "
                         "this SuperNode has no node config data-path (its own CSV)")
    try:
        d = client_data(context.run_config, pid, k)
    except ValueError as e:
        raise ValueError(f"client {pid}: {e}") from e
    return client_class(algorithm).from_context(context, {
        "train": (d["train"].x, d["train"].y, d["train"].z),
        "val": (d["val"].x, d["val"].y, d["val"].z), "device": device})


def own_data(path, rc: Mapping[str, Any], pid: int, who: str):
    """``(train, val, names)`` of a node's own CSV: ``(x, y, z)`` from the columns the run
    config names (``iv-treatment``, ``iv-outcome``, ``iv-instrument``; comma-separated, one
    outcome), rows split into train and validation by
    :func:`~fedcausal_flwr.iv.data.own_split` (``iv-val-fraction``, seeded by ``seed`` and the
    partition id). ``names``: treatment, outcome, instrument columns in that order. The
    values are used as they are (standardize them beforehand if their scales differ)."""
    from fedcausal_flwr.data.csvdata import read_csv
    from fedcausal_flwr.iv.data import IVDataConfig, own_split

    c = IVDataConfig.from_run_config(rc)
    roles = {}
    for key, value in (("iv-treatment", c.treatment), ("iv-outcome", c.outcome),
                       ("iv-instrument", c.instrument)):
        roles[key] = [v.strip() for v in value.split(",") if v.strip()]
        if not roles[key]:
            raise ValueError(f"{who}: node-local data for FedIV need the run config's "
                             f"{key} (comma-separated column names of the CSV)")
    if len(roles["iv-outcome"]) != 1:
        raise ValueError(f"{who}: run config iv-outcome = {c.outcome!r}: exactly one column")
    table = read_csv(path, who, min_rows=2)
    col = {n: j for j, n in enumerate(table.names)}
    for key, names in roles.items():
        for n in names:
            if n not in col:
                raise ValueError(f"{table.where(who)}: row 1: no column {n!r} (run config "
                                 f"{key}); the header has {table.names}")
    X = table.values
    x, y, z = (X[:, [col[n] for n in roles[k]]] for k in ("iv-treatment", "iv-outcome",
                                                           "iv-instrument"))
    tr, va = own_split(len(X), c, pid)
    names = roles["iv-treatment"] + roles["iv-outcome"] + roles["iv-instrument"]
    return (x[tr], y[tr, 0], z[tr]), (x[va], y[va, 0], z[va]), names


def evaluator(rc: Mapping[str, Any]
              ) -> Callable[[Mapping[str, Any], Sequence[int]], dict[str, Any]]:
    """``evaluate(estimates, client_ids)``: test MSE of g against the true g (pooled test set,
    as the authors' code), and the mean of the per-client test MSEs (the paper's wording)."""
    from fedcausal_flwr.iv import data as iv
    from fedcausal_flwr.iv import model as dg

    test = iv.test_set(rc)  # validates the data keys
    g, _ = dg.networks(test.x.shape[1:], test.z.shape[1:], 0)
    cache: dict[int, list[np.ndarray]] = {}

    def evaluate(est: Mapping[str, Any], cids: Sequence[int]) -> dict[str, Any]:
        k = max(cids) + 1
        if k not in cache:
            cache[k] = iv.split_indices(rc, k)["test"]
        out = {}
        for key, name in (("g_params", "test_mse"), ("g_params_selected", "test_mse_selected")):
            err = (dg.g_values(g, est[key], test.x) - test.g) ** 2
            out[name] = float(err.mean())
            if key == "g_params":
                out["test_mse_client_mean"] = float(np.mean([err[cache[k][c]].mean()
                                                              for c in cids]))
        return out

    return evaluate


def plot_g(rc: Mapping[str, Any], estimates: Mapping[str, Any], path: str | Path) -> Path:
    """The paper's Figure 1: learned g (last and selected round) against the true g."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from fedcausal_flwr.iv import data as iv
    from fedcausal_flwr.iv import model as dg

    test = iv.test_set(rc)
    g, _ = dg.networks(test.x.shape[1:], test.z.shape[1:], 0)
    fig, ax = plt.subplots(figsize=(5, 3.6))
    last = dg.g_values(g, estimates["g_params"], test.x)
    sel = dg.g_values(g, estimates["g_params_selected"], test.x)
    if test.x.ndim == 2 and test.x.shape[1] == 1:
        o = np.argsort(test.x[:, 0])
        xs = test.x[o, 0]
        ax.plot(xs, test.g[o], "k", lw=2, label="true g")
        ax.plot(xs, last[o], label="FedDeepGMM, last round")
        ax.plot(xs, sel[o], "--", label=f"selected round {estimates['selected_round']}")
        if "interval_lower" in estimates:
            gx = np.ravel(estimates["interval_x"])
            level = float(estimates["interval_level"])
            ax.fill_between(gx, estimates["interval_lower"], estimates["interval_upper"],
                            alpha=0.3, label=f"{level:.0%} bootstrap interval")
        ax.set_xlabel("input x")
    else:
        ax.scatter(test.g, last, s=3, alpha=0.3, label="last round")
        ax.scatter(test.g, sel, s=3, alpha=0.3, label="selected round")
        ax.plot([test.g.min(), test.g.max()], [test.g.min(), test.g.max()], "k", lw=1)
        ax.set_xlabel("true g")
    ax.set_ylabel("g (standardized)")
    ax.set_title(f"FedIV {iv.IVDataConfig.from_run_config(rc).scenario}")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)


def save_plots(algorithm: str, rc: Mapping[str, Any], result: Any, out: Path) -> None:  # noqa: ARG001
    """``g_vs_g0.png`` (the paper's Figure 1) beside result.json."""
    rc = section_view(SECTION, rc)  # a sectioned run config or the section itself
    if result.estimates.get("g_params") and not IVDataConfig.from_run_config(rc).outcome:
        plot_g(rc, result.estimates, out / "g_vs_g0.png")


def node_data(algorithm: str, context: Context, path, who: str) -> dict[str, Any]:  # noqa: ARG001
    """The client arguments of a node's own CSV at ``path`` (:func:`own_data`)."""
    pid = int(context.node_config.get("partition-id", 0))
    train, val, names = own_data(path, context.run_config, pid, who)
    return {"train": train, "val": val, "names": names,
            "device": FedIVSettings.from_run_config(context.run_config).device}
