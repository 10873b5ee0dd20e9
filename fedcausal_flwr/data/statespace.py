"""Data of the state-space family: the papers' synthetic systems and the plant-CSV loader.

Run-config keys (hyphenated, defaults in :data:`DEFAULTS`; a ``.json`` file named by
``data-path`` may set any of them, since ``flwr run`` only accepts keys the App declares):

``ss-model``        ``"fedgc"`` or ``"fedcf"`` (set by the strategy)
``ss-clients``      M, number of clients of the synthetic system
``ss-p``, ``ss-u``, ``ss-d``  state, input and measurement size per client
``ss-t``            time steps of the training series
``ss-coupling``     value of every entry of ``A_{m+1,m}`` (chain m -> m+1)
``ss-q``, ``ss-r``  process and measurement noise variances
``ss-shift-scale``  multiplies the FedGC mean-shift levels (0: no shifts)
``ss-shift-cycle`` shift one state of client 0 per window, cycling (else all states)
``ss-input-ar``     AR(1) coefficient of the inputs (0: i.i.d., the FedCF paper)
``ss-system-seed``  seed of the system matrices (``seed`` draws the noise)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from fedcausal_flwr.core import statespace as ss

# FedGC fork's shift windows (1000-2000 +5, ... of T = 30000, B = 0.1), as fractions of T.
SHIFTS = ((1 / 30, 2 / 30, 0.5), (3 / 30, 5 / 30, -0.3), (7 / 30, 9 / 30, 0.2),
          (12 / 30, 18 / 30, 0.1), (25 / 30, 26 / 30, -0.2))

DEFAULTS: dict[str, Any] = {
    "ss-clients": 2, "ss-p": 2, "ss-u": 0, "ss-d": 8, "ss-t": 3000, "ss-coupling": 0.25,
    "ss-q": 1e-3, "ss-r": 1e-3, "ss-shift-scale": 1.0, "ss-input-ar": 0.0,
    "ss-system-seed": -1, "ss-shift-cycle": True,
}
FEDCF_DEFAULTS: dict[str, Any] = {"ss-u": 2, "ss-d": 2, "ss-q": 1e-2, "ss-r": 1e-2,
                                  "ss-shift-scale": 0.0}


def merged_config(rc: Mapping[str, Any], model: str = "fedgc") -> dict[str, Any]:
    """Defaults < model defaults < run config < the JSON file at ``data-path`` (if any)."""
    out = {**DEFAULTS, **(FEDCF_DEFAULTS if model == "fedcf" else {}), **dict(rc)}
    path = str(rc.get("data-path", "") or "")
    if path.endswith(".json"):
        out.update(json.loads(Path(path).read_text()))
    out["ss-model"] = model
    return out


def synthetic_system(rc: Mapping[str, Any]) -> ss.LTISystem:
    """The paper's default system: chain couplings ``A_{m+1,m} = c * ones`` (A_12 = 0)."""
    M, p, u, d = (int(rc[k]) for k in ("ss-clients", "ss-p", "ss-u", "ss-d"))
    seed = int(rc["ss-system-seed"]) if int(rc["ss-system-seed"]) >= 0 else int(rc["seed"])
    rng = np.random.default_rng([seed, 1])
    c = float(rc["ss-coupling"])
    couplings = {(m + 1, m): c * np.ones((p, p)) for m in range(M - 1)}
    while True:  # C_mm well conditioned, A stable at the drawn coupling
        sys = ss.random_system([p] * M, [u] * M, [d] * M, couplings, rng,
                               q=float(rc["ss-q"]), r=float(rc["ss-r"]))
        if np.linalg.cond(sys.C) < 10 and ss.spectral_radius(sys.A) < 0.95:
            return sys


def synthetic_series(rc: Mapping[str, Any], sys: ss.LTISystem | None = None
                     ) -> tuple[ss.LTISystem, np.ndarray, np.ndarray, np.ndarray]:
    """``(system, h, y, u)`` of the run's synthetic data (noise seeded by ``seed``)."""
    sys = sys or synthetic_system(rc)
    T = int(rc["ss-t"])
    rng = np.random.default_rng([int(rc["seed"]), 2])
    u = ss.inputs(T, sum(sys.U), rng, float(rc["ss-input-ar"]))
    scale = float(rc["ss-shift-scale"])
    shifts = (ss.mean_shifts(T, sys.P, [(a, b, scale * v) for a, b, v in SHIFTS],
                             cycle=bool(rc["ss-shift-cycle"])) if scale else None)
    h, y, u = ss.simulate(sys, T, rng, u=u, shifts=shifts)
    return sys, h, y, u


def all_clients(rc: Mapping[str, Any]) -> tuple[ss.LTISystem, list[ss.ClientData]]:
    """The system and every client's data (for references and simulations)."""
    sys, _, y, u = synthetic_series(rc)
    return sys, ss.split_clients(sys, y, u)


@lru_cache(maxsize=8)
def _client_data(key: str, pid: int) -> ss.ClientData:
    rc = json.loads(key)
    sys, _, y, u = synthetic_series(rc)
    if not 0 <= pid < len(sys.P):
        raise ValueError(f"partition-id {pid} but the system has {len(sys.P)} clients "
                         "(set ss-clients to the number of SuperNodes)")
    return ss.split_clients(sys, y, u, only=pid)[0]


def client_data(rc: Mapping[str, Any], pid: int) -> ss.ClientData:
    """Client ``pid``'s data (cached per run config: a SuperNode rebuilds its client often)."""
    return _client_data(json.dumps(dict(rc), sort_keys=True, default=str), int(pid))
