"""Built-in data: each client draws n rows of a d-variate normal around 1, 2, ..., d."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from fedcausal_flwr.settings import Settings, setting


@dataclass(frozen=True)
class ToyData(Settings):
    """The data keys."""

    section: ClassVar[str] = "toymean"

    d: int = setting(3, "d", ge=1)
    n: int = setting(20, "n", ge=2)
    seed: int = setting(0, "seed", ge=0)


def client_data(rc: Mapping[str, Any], pid: int) -> np.ndarray:
    """Client ``pid``'s rows."""
    c = ToyData.from_run_config(rc)
    rng = np.random.default_rng([c.seed, pid])
    return rng.normal(np.arange(1, c.d + 1), 1.0, size=(c.n + 5 * pid, c.d))
