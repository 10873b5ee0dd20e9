"""What crosses the wire in FedIV: each phase's arrays by name, and their shapes.

``theta``/``tau`` (and the deltas ``dtheta``/``dtau``) stand for the parameter list of the
network g/f in network order; ``psi_sum`` (m) and ``C_sum`` (m x m) are the validation sums
over m = ``val_features + 1`` features; ``U`` is the local game's value (1,). With R =
``replicas`` > 0 bootstrap replicas, ``theta_r``/``tau_r``/``dtheta_r``/``dtau_r`` are the
same parameter lists stacked over the replicas (each array ``(R, *shape)``) and ``ok_r`` (R,)
says which replicas' local games stayed finite; with R = 0 they are absent. The settings
travel as :meth:`~fedcausal_flwr.settings.Settings.to_wire`.
"""

from __future__ import annotations

from collections.abc import Sequence

from fedcausal_flwr.federation.wire import Phase

PHASES: dict[str, Phase] = {
    "local": Phase(down=("theta", "tau", "theta_r", "tau_r"),
                   up=("dtheta", "dtau", "psi_sum", "C_sum", "U", "dtheta_r", "dtau_r",
                       "ok_r")),
    "validate": Phase(down=("theta",), up=("psi_sum", "C_sum")),
}

Shape = tuple[int, ...]


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
