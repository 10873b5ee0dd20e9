"""The server: averages the clients' means, weighted by their row counts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from fedcausal_flwr.federation.strategy import CausalStrategy, NodeInfo

from .model import ToySettings, moved, pooled_mean


class ToyMean(CausalStrategy):
    """One ``train.means`` exchange per round."""

    algorithm = "toymean"
    settings_class = ToySettings
    phase = "means"

    def setup(self, nodes: Mapping[int, NodeInfo]) -> None:
        self.d = int(next(iter(nodes.values())).props["d"])
        self.mu = np.zeros(self.d)

    def payload(self, cid: int) -> tuple[list[np.ndarray], dict[str, Any]]:
        return [self.mu], self.settings.to_wire()

    def reply_shapes(self) -> list[tuple[int, ...]]:
        return [(self.d,), ()]

    def aggregate(self, replies: Mapping[int, list[np.ndarray]]) -> None:
        target = pooled_mean({k: r[0] for k, r in replies.items()},
                             {k: int(r[1]) for k, r in replies.items()})
        self.mu = moved(self.mu, target, self.settings.step)

    def done(self) -> bool:
        return self.recorder.round >= self.settings.rounds

    def estimates(self) -> dict[str, Any]:
        return {"mu": self.mu}
