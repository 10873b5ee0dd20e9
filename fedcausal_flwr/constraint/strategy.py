"""FedPC's server: one exchange of moments, then (when edges are left to orient) one of
likelihood-ratio sums; the search runs on the pooled sums."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from fedcausal_flwr.constraint import learn, model
from fedcausal_flwr.constraint.settings import FedPCSettings
from fedcausal_flwr.federation.sites import SiteVariables
from fedcausal_flwr.federation.strategy import CausalStrategy, NodeInfo, Shape


class FedPC(SiteVariables, CausalStrategy):
    """The PC algorithm on the clients' pooled moments (Spirtes et al. 2000; stable skeleton
    of Colombo & Maathuis 2014), time tiers for a lagged window, contemporaneous edges
    oriented by Hyvarinen & Smith's (2013) pairwise likelihood ratio on pooled sums.

    Round 1 (``train.moments``): each client's pairwise counts, means, co-moments and sums of
    squares of its window; the server pools them (they add up exactly) and runs the search.
    Round 2 (``train.ratio``, when an edge is left to orient): the server sends the
    regression of lag 0 on the lags; each client returns its row count and the sums
    ``sum e tanh(e)^T`` and ``sum e e^T`` of its standardised residuals.

    Sites may hold different variables (``variables``, :mod:`~fedcausal_flwr.federation.
    sites`): the moments are pairwise complete, so a pair's sums run over the sites that hold
    both (a test's sample size is its fewest pair's); a site lacking a variable adds nothing
    to a residual whose regression uses it.
    """

    algorithm = "fedpc"
    settings_class = FedPCSettings
    settings: FedPCSettings
    progress_keys = ("phase", "n_clients", "tests", "edges", "seconds")

    def expected_props(self, infos):
        """The same lags everywhere; with named variables and ``variables`` "union" or
        "shared", any variables (:func:`~fedcausal_flwr.federation.sites.site_props`)."""
        return self.site_props(infos, self.settings.lags)

    def setup(self, nodes: Mapping[int, NodeInfo]) -> None:
        info = next(iter(nodes.values())).props
        self.p = int(info["p"])
        if self.p != self.settings.lags:
            raise ValueError(f"the clients hold windows of {self.p} lags; the run config's "
                             f"constraint.lags is {self.settings.lags}")
        self.names = self.site_variables(nodes, int(info["d"]))
        self.d = len(self.names)
        k = self.settings.knowledge()
        self.masks = k.masks(self.names, self.p) if k else None
        self.stage, self.pooled, self.st, self.halves = "moments", None, None, []
        self.G, self.R = None, None

    def _m(self) -> int:
        return self.d * (self.p + 1)

    def run_rounds(self, grid, result) -> None:
        for rec in self.rounds(result):
            assert self.channel is not None
            phase = self.stage
            replies = self.channel.run(phase, {c: self.payload(c) for c in self.select()},
                                       self.reply_shapes())
            self.aggregate(replies)
            rec.update(self.record(phase))

    def payload(self, cid: int) -> tuple[list[np.ndarray], dict[str, Any]]:
        config = {**self.settings.to_wire(), **self.site_config(cid)}
        if self.stage == "moments":
            return [], config
        B, c, sd = learn.ratio_inputs(self.pooled, self.d, self.p)
        return [B, c, sd], config

    def reply_shapes(self) -> list[Shape]:
        m, d = self._m(), self.d
        if self.stage == "moments":
            R = self.settings.replicas
            return [(m, m)] * len(model.MOMENTS) + ([(R, m, m)] * len(model.MOMENTS) if R
                                                     else [])
        return [(d, d)] * 3

    def robust_view(self, phase: str, cid: int, arrays: list[np.ndarray]
                    ) -> list[np.ndarray] | None:
        """The Byzantine screen compares clients' correlation matrices (moments) or their
        per-row ratio sums, over the pairs each client holds."""
        if phase == "moments":
            m = model.Moments(*arrays[:len(model.MOMENTS)])
            R = model.correlation(m)
            return [np.where(m.n > 0, np.nan_to_num(R), np.nan)]  # NaN: a pair it lacks
        n = np.asarray(arrays[0], float)
        return [np.where(n > 0, np.asarray(arrays[1]) / np.maximum(n, 1.0), np.nan)]

    def aggregate(self, replies: Mapping[int, list[np.ndarray]]) -> None:
        if self.stage == "moments":
            k = len(model.MOMENTS)
            self.pooled = model.pooled([model.Moments(*r[:k]) for r in replies.values()])
            self.st = learn.structure(self.pooled, self.settings, self.d, self.masks)
            self.halves = [learn.structure(model.pooled(
                [model.Moments(*(a[j] for a in r[k:])) for r in replies.values()]),
                self.settings, self.d, self.masks) for j in range(self.settings.replicas)]
            self.G = self.st.graph
            self.stage = "ratio" if self.st.to_orient.any() else "done"
            return
        n = sum(np.asarray(r[0], float) for r in replies.values())
        self.R = model.likelihood_ratio(n, sum(r[1] for r in replies.values()),
                                        sum(r[2] for r in replies.values()))
        forbidden = None if self.masks is None else ~learn.allowed(self.d, self.p, self.masks)
        self.G = learn.oriented(self.st, self.R, forbidden)
        self.stage = "done"

    def record(self, phase: str = "") -> dict[str, Any]:
        out: dict[str, Any] = {"phase": phase}
        if self.st is not None:
            out["tests"] = self.st.skeleton.tests
            out["edges"] = int(self.estimates()["graph"].sum())
        return out

    def done(self) -> bool:
        return getattr(self, "stage", "moments") == "done"

    def estimates(self) -> dict[str, Any]:
        if self.st is None:
            return {}
        out = learn.summary(self.st, self.G, self.settings.reverse_weight, self.R)
        if self.halves:
            out["graph_frequency"] = np.mean(
                [learn.replica_selected(h, self.G, self.R) for h in self.halves], axis=0)
        return out

    def _finish(self, result, t0: float) -> None:
        super()._finish(result, t0)
        if getattr(self, "halves", None) and self.st is not None:
            from fedcausal_flwr.stability import edge_stability

            sel = np.stack([learn.replica_selected(h, self.G, self.R) for h in self.halves])
            result.metrics["stability"] = edge_stability(
                sel, self.settings.stability_threshold,
                ~np.eye(self.d, dtype=bool)).summary()

    def result_names(self) -> dict[str, Any]:
        if not hasattr(self, "names"):
            return {}
        names = self.names
        return {"graph": names, "score": names, "p_value": names, "contemporaneous": names,
                "graph_frequency": names, "variables": names}
