"""What crosses the wire in FDBNL and PFDBNL: each phase's arrays by name, and their shapes.

The strategy's reply shapes and the client's shape checks both come from :data:`PHASES`;
the settings travel as :meth:`~fedcausal_flwr.settings.Settings.to_wire`, the round's
``alpha``, ``rho1``, ``rho2`` beside them.
"""

from __future__ import annotations

from collections.abc import Sequence

from fedcausal_flwr.federation.wire import Phase

PHASES: dict[str, Phase] = {
    "local": Phase(down=("W", "A", "beta", "gamma"), up=("B", "D")),
    "personal": Phase(down=("W", "A", "W_tilde", "A_tilde", "beta", "gamma"),
                      up=("W_tilde", "A_tilde", "W_k", "A_k", "h")),
}

#: Which matrix each name is shaped like: ``"W"`` (d x d), ``"A"`` (pd x d), ``"h"`` (scalar).
LIKE: dict[str, str] = {"W": "W", "beta": "W", "B": "W", "W_tilde": "W", "W_k": "W",
                        "A": "A", "gamma": "A", "D": "A", "A_tilde": "A", "A_k": "A", "h": "h"}


def shapes(names: Sequence[str], d: int, p: int) -> list[tuple[int, ...]]:
    """Shapes of the named arrays for d variables and p lags."""
    of = {"W": (d, d), "A": (p * d, d), "h": ()}
    return [of[LIKE[n]] for n in names]
