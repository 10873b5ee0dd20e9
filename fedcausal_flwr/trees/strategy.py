"""FedTrees' server: one exchange of importances, averaged (or robustly combined)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from fedcausal_flwr.federation.sites import SiteVariables
from fedcausal_flwr.federation.strategy import CausalStrategy, NodeInfo, Shape
from fedcausal_flwr.trees import model
from fedcausal_flwr.trees.settings import FedTreesSettings


class FedTrees(SiteVariables, CausalStrategy):
    """dynGENIE3 (Huynh-Thu & Geurts 2018) across sites: every site grows one extra-trees
    forest per target x_j(t) on its own lags x(t-1) ... x(t-p) and sends the (d p x d)
    importances; the server averages them with the sites' row counts as weights (or by the
    settings' robust rule) and ranks i -> j by the importance summed over lags.

    One exchange (``train.importance``); what leaves a site is its importance matrix: no row,
    split threshold or tree. Edge confidence: the share of sites whose own importances keep
    the edge (``graph_frequency``).

    Sites may hold different variables (``variables``, :mod:`~fedcausal_flwr.federation.
    sites`): a site grows forests for the targets it holds on the inputs it holds, and each
    importance is averaged over the sites that hold both its input and its target.
    """

    algorithm = "fedtrees"
    settings_class = FedTreesSettings
    settings: FedTreesSettings
    progress_keys = ("phase", "n_clients", "edges", "seconds")
    robust_aggregate = "the averaged importances"

    def expected_props(self, infos):
        """The same lags everywhere; with named variables and ``variables`` "union" or
        "shared", any variables (:func:`~fedcausal_flwr.federation.sites.site_props`)."""
        return self.site_props(infos, self.settings.lags)

    def setup(self, nodes: Mapping[int, NodeInfo]) -> None:
        info = next(iter(nodes.values())).props
        self.p = int(info["p"])
        if self.p != self.settings.lags:
            raise ValueError(f"the clients hold windows of {self.p} lags; the run config's "
                             f"trees.lags is {self.settings.lags}")
        self.names = self.site_variables(nodes, int(info["d"]))
        self.d = len(self.names)
        self.rows = {c: max(int(i.props.get("n", 1)), 1) for c, i in nodes.items()}
        self.est: dict[str, np.ndarray] = {}
        self.sites: np.ndarray | None = None

    def run_rounds(self, grid, result) -> None:
        for rec in self.rounds(result):
            assert self.channel is not None
            replies = self.channel.run("importance", {c: self.payload(c) for c in self.select()},
                                       self.reply_shapes())
            self.aggregate(replies)
            rec.update(self.record("importance"))

    def payload(self, cid: int) -> tuple[list[np.ndarray], dict[str, Any]]:
        return [], {**self.settings.to_wire(), **self.site_config(cid)}

    def mask(self, cid: int) -> np.ndarray | None:
        """The importances site ``cid`` informs (None: all, it holds every variable)."""
        holds = self.informs(cid)
        return None if holds.all() else model.informed(holds, self.p)

    def reply_shapes(self) -> list[Shape]:
        return [(self.d * self.p, self.d)]

    def robust_view(self, phase: str, cid: int, arrays: list[np.ndarray]
                    ) -> list[np.ndarray] | None:
        """The Byzantine screen compares the clients' importance matrices. A site that
        lacks a variable spreads that input's share over its others by design, so only the
        targets whose every input it holds are compared (NaN elsewhere; with ``variables``
        "union" and an input of every target missing: none, the site goes unscreened)."""
        m = self.mask(cid)
        imp = np.asarray(arrays[0], float)
        if m is None:
            return [imp]
        complete = m.all(axis=0)
        return [np.where(complete[None, :], imp, np.nan)]

    def aggregate(self, replies: Mapping[int, list[np.ndarray]]) -> None:
        cids = sorted(replies)
        masks = [self.mask(c) for c in cids]
        full = np.ones((self.d * self.p, self.d), bool)
        self.est, self.sites = model.estimates(
            [np.asarray(replies[c][0], float) for c in cids], [self.rows.get(c, 1) for c in cids],
            self.d, self.settings.edge_factor, self.combine(),
            None if all(m is None for m in masks) else [full if m is None else m
                                                         for m in masks])

    def record(self, phase: str = "") -> dict[str, Any]:
        out: dict[str, Any] = {"phase": phase}
        if self.est:
            out["edges"] = int(self.est["graph"].sum())
        return out

    def done(self) -> bool:
        return bool(getattr(self, "est", None))

    def estimates(self) -> dict[str, Any]:
        return dict(getattr(self, "est", None) or {})

    def _finish(self, result, t0: float) -> None:
        super()._finish(result, t0)
        if getattr(self, "sites", None) is not None:
            from fedcausal_flwr.stability import edge_stability

            result.metrics["stability"] = edge_stability(
                self.sites, self.settings.stability_threshold,
                ~np.eye(self.d, dtype=bool)).summary()

    def result_names(self) -> dict[str, Any]:
        if not hasattr(self, "names"):
            return {}
        n = self.names
        return {"graph": n, "score": n, "graph_frequency": n, "variables": n}
