"""FedIV client: local simultaneous (S)GDA on the client's own (x, y, z) (FedDeepGMM).

Only network parameters and aggregate validation sums leave the client; the server sends the
wire fields of :class:`FedIVSettings` with every message (read back by ``from_wire``), so the
client holds data (and the device it trains on) and nothing else. A user's own ClientApp:
``register(app, "fediv", lambda ctx: {"train": (x, y, z), "val": (xv, yv, zv)})``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from fedcausal_flwr.extras import missing_extra
from fedcausal_flwr.federation.client import CausalClient, Fit, check_shapes
from fedcausal_flwr.iv import model as dg
from fedcausal_flwr.iv.settings import FedIVSettings
from fedcausal_flwr.iv.wire import PHASES, layout, pack, replicas_in, unpack

try:
    import torch
except ModuleNotFoundError as e:
    raise missing_extra(e, "FedIV", "fediv", "torch") from e
from fedcausal_flwr.names import checked_names, joined


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


def iv_names(names: Sequence[str] | Mapping[str, Any] | None, dx: int, dz: int,
             who: str = "client") -> tuple[list[str], str, list[str]]:
    """``(x names, y name, z names)`` from a client's ``names``.

    ``names`` is ``{"x": [...], "y": "...", "z": [...]}`` (any part may be left out), or a
    flat sequence: the x columns then the z columns (``dx + dz`` names), or x, y, z
    (``dx + 1 + dz`` names, the order of a CSV with columns x..., y, z...). Defaults:
    ``x0..``, ``y``, ``z0..``.
    """
    if names is None:
        return checked_names(None, dx, who, "x"), "y", checked_names(None, dz, who, "z")
    if isinstance(names, Mapping):
        unknown = sorted(set(names) - {"x", "y", "z"})
        if unknown:
            raise ValueError(f"{who}: names has keys {unknown}; use 'x', 'y', 'z'")
        xs, y, zs = names.get("x"), names.get("y", "y"), names.get("z")
    else:
        flat = list(names) if not isinstance(names, str) else names
        if isinstance(flat, str) or len(flat) not in (dx + dz, dx + 1 + dz):
            raise ValueError(f"{who}: {len(flat)} names; need {dx} x and {dz} z names "
                             f"({dx + dz}), or x, y and z names ({dx + 1 + dz})")
        y = flat[dx] if len(flat) == dx + 1 + dz else "y"
        xs, zs = flat[:dx], flat[len(flat) - dz:]
    xs = checked_names(xs, dx, who, "x", "x columns")
    zs = checked_names(zs, dz, who, "z", "z columns")
    (y,) = checked_names([y], 1, who, "y", "outcome")
    both = sorted(set(xs) & set(zs))
    if both:
        raise ValueError(f"{who}: names {both} are both x and z columns")
    return xs, y, zs


def shape_tag(shape: tuple[int, ...]) -> str:
    """A per-sample shape as a wire-safe string, e.g. ``"1x8x8"``."""
    return "x".join(str(s) for s in shape)


class FedIVClient(CausalClient):
    """Holds train ``(x, y, z)`` and validation rows; the settings come with each message.

    ``train.local``: ``[theta..., tau...]`` -> ``[dtheta..., dtau..., psi_sum, C_sum, [U]]``,
    where ``psi_sum, C_sum`` are the validation sums of the incoming global theta; a message
    with R stacked replicas after them (``theta_r..., tau_r...``) gets their deltas and
    ``ok_r`` after ``U`` (:data:`~fedcausal_flwr.iv.wire.PHASES`).
    ``train.validate``: ``[theta...]`` -> ``[psi_sum, C_sum]``.

    Parameters
    ----------
    train, val : tuple of arrays
        ``(x, y, z)`` of the training and of the validation rows: treatment x (n x ...),
        outcome y (n), instruments z (n x ...).
    device : str
        Torch device of the local steps: "auto" (default: a GPU if there is one), "cpu" or
        "cuda".
    names : sequence of str or mapping, optional
        Labels of the columns of x (treatment), y (outcome) and z (instruments), see
        :func:`iv_names`; they are informational (g is a function of x) and every node must
        report the same ones.
    """

    phases = {"local": "local_step", "validate": "validate"}

    def __init__(self, train: tuple[np.ndarray, np.ndarray, np.ndarray],
                 val: tuple[np.ndarray, np.ndarray, np.ndarray], partition_id: int = 0,
                 num_partitions: int = 1, device: str = "auto",
                 names: Sequence[str] | Mapping[str, Any] | None = None) -> None:
        self.who = f"client {partition_id}"
        self.partition_id, self.num_partitions = int(partition_id), int(num_partitions)
        self.device = dg.device_of(device)
        tr = checked_iv(*train, self.who, "train")
        va = checked_iv(*val, self.who, "validation")
        if tr[0].shape[1:] != va[0].shape[1:] or tr[2].shape[1:] != va[2].shape[1:]:
            raise ValueError(f"{self.who}: train and validation inputs differ in shape")
        self.x_shape, self.z_shape = tuple(tr[0].shape[1:]), tuple(tr[2].shape[1:])
        self.x_names, self.y_name, self.z_names = iv_names(
            names, int(np.prod(self.x_shape)), int(np.prod(self.z_shape)), self.who)
        self.train, self.val = dg.batch(*tr, self.device), dg.batch(*va, self.device)
        self._z_val = va[2]

    def get_properties(self, config: dict[str, Any]) -> dict[str, Any]:
        """Who this client is, its sample counts, input shapes and column names (no data):
        ``"names"`` is the x names then the z names, ``"y-name"`` the outcome's."""
        return {"partition-id": self.partition_id, "num-partitions": self.num_partitions,
                "n": self.train.n, "n-val": self.val.n, "x-shape": shape_tag(self.x_shape),
                "z-shape": shape_tag(self.z_shape),
                "names": joined(self.x_names + self.z_names), "y-name": self.y_name}

    def _nets(self) -> tuple[torch.nn.Module, torch.nn.Module]:
        return dg.networks(self.x_shape, self.z_shape, 0, self.device)

    def _check(self, phase: str, parameters: list[np.ndarray], g: torch.nn.Module,
               f: torch.nn.Module, replicas: int = 0) -> None:
        """The server's arrays of ``phase`` fit the networks (:data:`PHASES`)."""
        want = layout(PHASES[phase].down, dg.shapes(g), dg.shapes(f), 0, replicas)
        check_shapes(self.who, parameters, [sh for _, sh in want], [n for n, _ in want])

    def _val_sums(self, g: torch.nn.Module, s: FedIVSettings) -> list[np.ndarray]:
        basis = dg.rff(int(np.prod(self.z_shape)), s.val_features, s.seed)
        return list(dg.validation_sums(g, self.val, dg.features(self._z_val, basis)))

    def fit(self, parameters: list[np.ndarray], config: dict[str, Any]) -> Fit:
        """Run the phase on ``torch-threads`` threads (1 unless the server says otherwise)."""
        torch.set_num_threads(int(config.get("torch-threads", 1)))
        return super().fit(parameters, config)

    def validate(self, parameters: list[np.ndarray], config: dict[str, Any]) -> Fit:
        """``train.validate``: ``[theta...]`` -> the validation sums of theta."""
        g, f = self._nets()
        self._check("validate", parameters, g, f)
        s = FedIVSettings.from_wire(config, self.who)
        return self._val_sums(dg.set_params(g, parameters), s), self.val.n, {}

    def local_step(self, parameters: list[np.ndarray], config: dict[str, Any]) -> Fit:
        """``train.local``: R local epochs of (S)GDA from the global (theta, tau)."""
        g, f = self._nets()
        replicas = replicas_in(parameters, len(dg.shapes(g)) + len(dg.shapes(f)))
        self._check("local", parameters, g, f, replicas)
        got = unpack("local", "down", parameters, dg.shapes(g), dg.shapes(f), 0, replicas)
        s = FedIVSettings.from_wire(config, self.who)
        if s.mode == "sgda" and self.train.n < s.batch_size:
            raise ValueError(f"{self.who}: {self.train.n} train samples, fewer than one "
                             f"minibatch of {s.batch_size}")
        theta, tau = got["theta"], got["tau"]
        sums = self._val_sums(dg.set_params(g, theta), s)
        rnd = int(config.get("server-round", 0))
        dth, dta, u = dg.local_update(g, f, self.train, theta, tau,
                                      [s.seed, rnd, self.partition_id], **s.local_args())
        if not np.isfinite(u) or not all(np.isfinite(a).all() for a in dth + dta):
            raise ValueError(f"{self.who}: local game diverged (non-finite loss U={u}) in "
                             f"round {rnd}")
        dth_r, dta_r, ok = self._replicas_step(g, f, got["theta_r"], got["tau_r"], s, rnd)
        return pack("local", "up", {
            "dtheta": dth, "dtau": dta, "psi_sum": sums[0], "C_sum": sums[1],
            "U": np.array([u]), "dtheta_r": dth_r, "dtau_r": dta_r, "ok_r": ok}
        ), self.train.n, {"loss": float(u)}

    def _replicas_step(self, g: torch.nn.Module, f: torch.nn.Module, theta: list[np.ndarray],
                       tau: list[np.ndarray], s: FedIVSettings, rnd: int
                       ) -> tuple[list[np.ndarray], list[np.ndarray], np.ndarray]:
        """The bootstrap replicas' local step on resamples of this client's own rows:
        ``(dtheta_r, dtau_r, ok_r)`` (a replica whose game went non-finite sends zero deltas
        and ok 0; the ordinary run is not touched; a stack of none trains nothing)."""
        R = len(theta[0])
        if R == 0:  # no torch call on an empty stack
            return theta, tau, np.zeros(0)
        rows = dg.replica_rows(self.train, s.seed, R, self.partition_id)
        with np.errstate(all="ignore"):
            dth, dta, u = dg.replicas_update(g, f, rows, theta, tau,
                                             [s.seed, rnd, self.partition_id],
                                             **s.local_args())
        ok = dg.replica_ok(dth, dta, u)
        keep = [np.where(ok.reshape(-1, *[1] * (a.ndim - 1)) > 0, a, 0.0) for a in dth + dta]
        return keep[:len(dth)], keep[len(dth):], ok
