"""What crosses the wire in FedGC and FedCF: each phase's arrays by name, and their shapes.

Client m has P states, U inputs and D measurements; a window sends W rows up, the gradients
of the previous window (``W_prev`` rows) down. ``ha_prev``/``hc_prev`` are
``hhat_a^{t-1}``/``hhat_c^{t-1}``, ``u_prev`` is ``u^{t-1}``; ``g``/``g_tilde`` the server's
gradients w.r.t. the target and ``hhat_a^{t-1}``; ``loss`` the local loss. The settings
travel with ``ss_window`` as :meth:`~fedcausal_flwr.settings.Settings.to_wire`. The strategy
and the client pack and unpack every phase by these names (:func:`layout`).
"""

from __future__ import annotations

from collections.abc import Sequence

from fedcausal_flwr.federation.arrays import Layout, one
from fedcausal_flwr.federation.wire import Phase

PHASES: dict[str, dict[str, Phase]] = {
    "fedgc": {"ss_setup": Phase(down=(), up=("A_mm",)),
              "ss_window": Phase(down=("g_tilde",), up=("ha_prev", "hc_prev", "loss"))},
    "fedcf": {"ss_setup": Phase(down=(), up=("A_mm", "B_mm")),
              "ss_window": Phase(down=("g", "g_tilde"),
                                 up=("target", "ha_prev", "hc_prev", "u_prev", "loss")),
              "ss_query": Phase(down=("delta_h",), up=("delta_y",))},
}


def shapes(names: Sequence[str], *, P: int, U: int = 0, D: int = 0, W: int = 0,
           W_prev: int = 0) -> list[tuple[int, ...]]:
    """Shapes of the named arrays for client sizes ``P, U, D`` and window lengths."""
    of = {"A_mm": (P, P), "B_mm": (P, U), "g": (W_prev, P), "g_tilde": (W_prev, P),
          "target": (W, P), "ha_prev": (W, P), "hc_prev": (W, P), "u_prev": (W, U),
          "loss": (), "delta_h": (P,), "delta_y": (D,)}
    return [of[n] for n in names]


def layout(algorithm: str, phase: str, direction: str) -> Layout:
    """``phase``'s arrays by name, ``direction`` ``"down"`` or ``"up"``
    (:class:`~fedcausal_flwr.federation.arrays.Layout`; shapes are the exchange's and the
    client's to check)."""
    names = getattr(PHASES[algorithm][phase], direction)
    return Layout(f"{phase} {'message' if direction == 'down' else 'reply'}", names,
                  [one(n) for n in names])
