"""What crosses the wire in FedIV: each phase's arrays by name, and their shapes.

``theta``/``tau`` (and the deltas ``dtheta``/``dtau``) stand for the parameter list of the
network g/f in network order; ``psi_sum`` (m) and ``C_sum`` (m x m) are the validation sums
over m = ``val_features + 1`` features; ``U`` is the local game's value (1,). The settings
travel as :meth:`~fedcausal_flwr.settings.Settings.to_wire`.
"""

from __future__ import annotations

from collections.abc import Sequence

from fedcausal_flwr.federation.wire import Phase

PHASES: dict[str, Phase] = {
    "local": Phase(down=("theta", "tau"), up=("dtheta", "dtau", "psi_sum", "C_sum", "U")),
    "validate": Phase(down=("theta",), up=("psi_sum", "C_sum")),
}

Shape = tuple[int, ...]


def layout(names: Sequence[str], theta: Sequence[Shape], tau: Sequence[Shape], m: int
           ) -> list[tuple[str, Shape]]:
    """``(label, shape)`` of every array of ``names``: a network's parameters one by one
    (``theta[0]``, ...), then the sums and ``U``."""
    nets = {"theta": theta, "dtheta": theta, "tau": tau, "dtau": tau}
    fixed = {"psi_sum": (m,), "C_sum": (m, m), "U": (1,)}
    return [item for n in names for item in
            ([(f"{n}[{i}]", tuple(sh)) for i, sh in enumerate(nets[n])] if n in nets
             else [(n, fixed[n])])]


def shapes(names: Sequence[str], theta: Sequence[Shape], tau: Sequence[Shape], m: int
           ) -> list[Shape]:
    """The shapes of :func:`layout`."""
    return [sh for _, sh in layout(names, theta, tau, m)]
