"""FedIV client: local simultaneous (S)GDA on the client's own (x, y, z) (FedDeepGMM).

Only network parameters and aggregate validation sums leave the client; the server sends the
hyper-parameters with every message, so the client holds data and nothing else.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from flwr.app import Context
from flwr.client import NumPyClient

from fedcausal_flwr.clients.base import check_shapes
from fedcausal_flwr.core import deepgmm as dg


def checked_iv(x: np.ndarray, y: np.ndarray, z: np.ndarray, who: str, split: str
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(x, y, z)`` as float arrays with x, z of ndim >= 2, or a ValueError naming the problem."""
    x, y, z = (np.asarray(a, dtype=float) for a in (x, y, z))
    x = x[:, None] if x.ndim == 1 else x
    z = z[:, None] if z.ndim == 1 else z
    y = y.reshape(-1)
    if not len(x) == len(y) == len(z):
        raise ValueError(f"{who}: {split} x, y, z have {len(x)}, {len(y)}, {len(z)} rows")
    if len(y) == 0:
        raise ValueError(f"{who}: no {split} samples")
    for name, a in (("X", x), ("Y", y), ("Z", z)):
        bad = ~np.isfinite(a)
        if bad.any():
            row = int(np.argwhere(bad)[0][0])
            raise ValueError(f"{who}: {split} {name} has {int(bad.sum())} NaN/inf values "
                             f"(first in row {row})")
    return x, y, z


def shape_tag(shape: tuple[int, ...]) -> str:
    """A per-sample shape as a wire-safe string, e.g. ``"1x8x8"``."""
    return "x".join(str(s) for s in shape)


def settings_from_config(config: dict[str, Any]) -> dg.GDASettings:
    """The GDASettings the server sent in a message's config."""
    return dg.GDASettings(lr_g=float(config["lr-g"]), lr_f=float(config["lr-f"]),
                          mode=str(config["mode"]), batch_size=int(config["batch-size"]),
                          local_epochs=int(config["local-epochs"]),
                          optimizer=str(config["optimizer"]),
                          momentum=float(config.get("momentum", 0.9)))


class FedIVClient(NumPyClient):
    """Holds train ``(x, y, z)`` and validation rows.

    ``train.local``: ``[theta..., tau...]`` -> ``[dtheta..., dtau..., psi_sum, C_sum, [U]]``,
    where ``psi_sum, C_sum`` are the validation sums of the incoming global theta.
    ``train.validate``: ``[theta...]`` -> ``[psi_sum, C_sum]``.
    """

    phases = ("local", "validate")

    def __init__(self, train: tuple[np.ndarray, np.ndarray, np.ndarray],
                 val: tuple[np.ndarray, np.ndarray, np.ndarray], partition_id: int = 0,
                 num_partitions: int = 1, device: str = "auto") -> None:
        self.who = f"client {partition_id}"
        self.partition_id, self.num_partitions = int(partition_id), int(num_partitions)
        self.device = dg.device_of(device)
        tr = checked_iv(*train, self.who, "train")
        va = checked_iv(*val, self.who, "validation")
        if tr[0].shape[1:] != va[0].shape[1:] or tr[2].shape[1:] != va[2].shape[1:]:
            raise ValueError(f"{self.who}: train and validation inputs differ in shape")
        self.x_shape, self.z_shape = tuple(tr[0].shape[1:]), tuple(tr[2].shape[1:])
        self.train, self.val = dg.batch(*tr, self.device), dg.batch(*va, self.device)
        self._z_val = va[2]

    @classmethod
    def from_context(cls, context: Context) -> FedIVClient:
        """This node's client from the run config (``iv-*`` keys, ``seed``)."""
        from fedcausal_flwr.data.iv import client_data

        pid = int(context.node_config.get("partition-id", 0))
        k = int(context.node_config.get("num-partitions", 1))
        try:
            d = client_data(context.run_config, pid, k)
        except ValueError as e:
            raise ValueError(f"client {pid}: {e}") from e
        return cls((d["train"].x, d["train"].y, d["train"].z),
                   (d["val"].x, d["val"].y, d["val"].z), pid, k,
                   str(context.run_config.get("iv-device", "auto")))

    def get_properties(self, config: dict[str, Any]) -> dict[str, Any]:
        """Who this client is, its sample counts and input shapes (no data)."""
        return {"partition-id": self.partition_id, "num-partitions": self.num_partitions,
                "n": self.train.n, "n-val": self.val.n, "x-shape": shape_tag(self.x_shape),
                "z-shape": shape_tag(self.z_shape)}

    def _nets(self) -> tuple[torch.nn.Module, torch.nn.Module]:
        return dg.networks(self.x_shape, self.z_shape, 0, self.device)

    def _val_sums(self, g: torch.nn.Module, config: dict[str, Any]) -> list[np.ndarray]:
        basis = dg.rff(int(np.prod(self.z_shape)), int(config["val-features"]),
                       int(config["seed"]))
        return list(dg.validation_sums(g, self.val, dg.features(self._z_val, basis)))

    def fit(self, parameters: list[np.ndarray], config: dict[str, Any]
            ) -> tuple[list[np.ndarray], int, dict[str, Any]]:
        """``train.local`` (FedGDA local epochs) or ``train.validate`` (validation sums)."""
        torch.set_num_threads(int(config.get("torch-threads", 1)))
        g, f = self._nets()
        n_th = len(dg.shapes(g))
        phase = config.get("phase")
        if phase == "validate":
            check_shapes(self.who, parameters, dg.shapes(g), [f"theta[{i}]"
                                                              for i in range(n_th)])
            return self._val_sums(dg.set_params(g, parameters), config), self.val.n, {}
        if phase != "local":
            raise ValueError(f"{self.who}: unknown FedIV phase {phase!r}")
        want = dg.shapes(g) + dg.shapes(f)
        check_shapes(self.who, parameters, want, [f"theta/tau[{i}]" for i in range(len(want))])
        s = settings_from_config(config)
        if s.mode == "sgda" and self.train.n < s.batch_size:
            raise ValueError(f"{self.who}: {self.train.n} train samples, fewer than one "
                             f"minibatch of {s.batch_size}")
        theta, tau = parameters[:n_th], parameters[n_th:]
        sums = self._val_sums(dg.set_params(g, theta), config)
        rnd = int(config.get("server-round", 0))
        dth, dta, u = dg.local_update(g, f, self.train, theta, tau, s,
                                      [int(config["seed"]), rnd, self.partition_id])
        if not np.isfinite(u) or not all(np.isfinite(a).all() for a in dth + dta):
            raise ValueError(f"{self.who}: local game diverged (non-finite loss U={u}) in "
                             f"round {rnd}")
        return [*dth, *dta, *sums, np.array([u])], self.train.n, {"loss": float(u)}


def from_context(context: Context) -> FedIVClient:
    """The App's entry point for ``algorithm = "fediv"``."""
    return FedIVClient.from_context(context)
