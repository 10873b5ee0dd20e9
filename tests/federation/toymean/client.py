"""The client: its mean and row count, never its rows."""

from __future__ import annotations

from typing import Any

import numpy as np

from fedcausal_flwr.federation.client import CausalClient


class ToyClient(CausalClient):
    """Answers ``train.means``."""

    phases = {"means": "means"}

    def __init__(self, x: np.ndarray, partition_id: int = 0, num_partitions: int = 1) -> None:
        self.x, self.partition_id, self.num_partitions = np.asarray(x, float), partition_id, \
            num_partitions

    def get_properties(self, config: dict[str, Any]) -> dict[str, Any]:
        return {"partition-id": self.partition_id, "num-partitions": self.num_partitions,
                "d": int(self.x.shape[1])}

    def means(self, parameters: list[np.ndarray], config: dict[str, Any]):
        return [self.x.mean(0), np.asarray(float(len(self.x)))], len(self.x), {}
