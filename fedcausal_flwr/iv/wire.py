"""What crosses the wire in FedIV: each phase's arrays by name, and their shapes.

``theta``/``tau`` (and the deltas ``dtheta``/``dtau``) stand for the parameter list of the
network g/f in network order; ``psi_sum`` (m) and ``C_sum`` (m x m) are the validation sums
over m = ``val_features + 1`` features; ``U`` is the local game's value (1,). With R =
``replicas`` > 0 bootstrap replicas, ``theta_r``/``tau_r``/``dtheta_r``/``dtau_r`` are the
same parameter lists stacked over the replicas (each array ``(R, *shape)``) and ``ok_r`` (R,)
says which replicas' local games stayed finite; with R = 0 they are absent. The settings
travel as :meth:`~fedcausal_flwr.settings.Settings.to_wire`.

The strategy and the client name every array: :func:`pack` lays a phase's arrays out for the
wire from a mapping by name, :func:`unpack` reads them back; a stack of R = 0 replicas does
not travel (the wire of a run without replicas) and unpacks as empty stacks, so neither side
tells a run with replicas from one without.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from fedcausal_flwr.federation.arrays import Layout, Slot, group, one
from fedcausal_flwr.federation.wire import Phase

PHASES: dict[str, Phase] = {
    "local": Phase(down=("theta", "tau", "theta_r", "tau_r"),
                   up=("dtheta", "dtau", "psi_sum", "C_sum", "U", "dtheta_r", "dtau_r",
                       "ok_r")),
    "validate": Phase(down=("theta",), up=("psi_sum", "C_sum")),
}

Shape = tuple[int, ...]
_WHAT = {"down": "message", "up": "reply"}


def layout(names: Sequence[str], theta: Sequence[Shape], tau: Sequence[Shape], m: int,
           replicas: int = 0) -> list[tuple[str, Shape]]:
    """``(label, shape)`` of every array of ``names``: a network's parameters one by one
    (``theta[0]``, ...), then the sums and ``U``, then (``replicas`` R > 0) the stacked
    replicas' parameters and ``ok_r``."""
    nets = {"theta": theta, "dtheta": theta, "tau": tau, "dtau": tau}
    fixed = {"psi_sum": (m,), "C_sum": (m, m), "U": (1,), "ok_r": (replicas,)}
    out: list[tuple[str, Shape]] = []
    for n in names:
        base, r = (n[:-2], replicas) if n.endswith("_r") else (n, 0)
        if n.endswith("_r") and replicas == 0:
            continue
        if base in nets:
            out += [(f"{n}[{i}]", (r, *sh) if r else tuple(sh))
                    for i, sh in enumerate(nets[base])]
        else:
            out.append((n, fixed[n]))
    return out


def shapes(names: Sequence[str], theta: Sequence[Shape], tau: Sequence[Shape], m: int,
           replicas: int = 0) -> list[Shape]:
    """The shapes of :func:`layout`."""
    return [sh for _, sh in layout(names, theta, tau, m, replicas)]


#: The names that stand for a list of arrays (a network's parameters, one by one).
NETS = ("theta", "tau", "dtheta", "dtau")
Arrays = Mapping[str, "np.ndarray | Sequence[np.ndarray]"]


def replicas_in(arrays: Sequence[np.ndarray], k: int) -> int:
    """R of a ``train.local`` message whose first ``k`` arrays are the main players: the
    leading axis of the stacked replicas' first array (0 when there are none)."""
    if len(arrays) <= k or np.ndim(arrays[k]) == 0:
        return 0
    return int(np.shape(arrays[k])[0])


def _labels(n: str, count: int) -> list[str]:
    """A name's ``count`` arrays' labels: a network's parameters ``n[0]``, ...; else the
    name (none for a stack that does not travel)."""
    return [f"{n}[{i}]" for i in range(count)] if n.removesuffix("_r") in NETS else [n][:count]


def _slot(n: str, specs: Sequence[Shape | None]) -> Slot:
    """Name ``n`` with an array per spec: a group where it stands for a list (a network's
    parameters, a replica stack that may not travel), else one array."""
    if n.removesuffix("_r") in NETS or n.endswith("_r"):
        return group(n, zip(_labels(n, len(specs)), specs, strict=True))
    return one(n, specs[0])


def pack(phase: str, direction: str, arrays: Arrays) -> list[np.ndarray]:
    """The arrays of ``phase`` (``direction`` ``"down"`` or ``"up"``) in wire order, from
    ``arrays`` by name (:class:`~fedcausal_flwr.federation.arrays.Layout`): a network's (or
    a replica stack's) parameter list in network order; a replica stack with a leading axis
    of 0 is left out."""
    names = getattr(PHASES[phase], direction)
    slots, named = [], {}
    for n in names:
        a = arrays[n]
        parts = list(a) if n.removesuffix("_r") in NETS else [a]
        parts = [x for x in parts if not (n.endswith("_r") and np.shape(x)[0] == 0)]
        slots.append(_slot(n, [None] * len(parts)))
        named[n] = parts if slots[-1].many else parts[0]
    return Layout(f"{phase} {_WHAT[direction]}", names, slots).pack(named)


def unpack(phase: str, direction: str, arrays: Sequence[np.ndarray], theta: Sequence[Shape],
           tau: Sequence[Shape], m: int, replicas: int = 0
           ) -> dict[str, np.ndarray | list[np.ndarray]]:
    """``phase``'s arrays by name (the inverse of :func:`pack`, laid out by :func:`layout`,
    refused naming the array when their count or shapes differ; the replica stacks of R = 0
    replicas as empty ``(0, *shape)`` arrays)."""
    names = getattr(PHASES[phase], direction)
    lay = Layout(f"{phase} {_WHAT[direction]}", names, [
        _slot(n, [sh for _, sh in layout([n], theta, tau, m, replicas)]) for n in names])
    empty = {"theta": theta, "dtheta": theta, "tau": tau, "dtau": tau}
    out: dict[str, np.ndarray | list[np.ndarray]] = {}
    for n, got in lay.unpack(arrays).items():
        if n.endswith("_r") and not got:
            out[n] = ([np.zeros((0, *sh)) for sh in empty[n[:-2]]] if n[:-2] in empty
                      else np.zeros(0))
        elif n.removesuffix("_r") in NETS:
            out[n] = list(got.values())
        else:
            out[n] = next(iter(got.values())) if isinstance(got, dict) else got
    return out
