"""What crosses the wire in FDBNL and PFDBNL: each phase's arrays by name, and their shapes.

The strategy's reply shapes and the client's shape checks both come from :data:`PHASES`;
the settings travel as :meth:`~fedcausal_flwr.settings.Settings.to_wire`, the round's
``alpha``, ``rho1``, ``rho2`` beside them. A replicated run (:mod:`fedcausal_flwr.dbn.
replicas`) uses the ``*_replicas`` phases: every array gains a leading axis of the R
replicas in the message, ``rows`` (R,) says which rows each learns from, ``scalars`` (R x 5)
holds each one's ``alpha, rho1, rho2, lambda_w, lambda_a``, and ``val`` (R x T) is the
client's held-out loss of each replica's consensus at each of T thresholds (T = 0 without a
penalty path), with ``replica-seed``, ``holdout`` and ``taus`` in the config.
"""

from __future__ import annotations

from collections.abc import Sequence

from fedcausal_flwr.federation.wire import Phase

PHASES: dict[str, Phase] = {
    "local": Phase(down=("W", "A", "beta", "gamma"), up=("B", "D")),
    "personal": Phase(down=("W", "A", "W_tilde", "A_tilde", "beta", "gamma", "W_k", "A_k"),
                      up=("W_tilde", "A_tilde", "W_k", "A_k", "h")),
    "local_replicas": Phase(down=("W", "A", "beta", "gamma", "rows", "scalars"),
                            up=("B", "D", "val")),
    "personal_replicas": Phase(
        down=("W", "A", "W_tilde", "A_tilde", "beta", "gamma", "W_k", "A_k", "rows",
              "scalars"),
        up=("W_tilde", "A_tilde", "W_k", "A_k", "h", "val")),
}

#: Which matrix each name is shaped like: ``"W"`` (d x d), ``"A"`` (pd x d), ``"h"`` (scalar).
LIKE: dict[str, str] = {"W": "W", "beta": "W", "B": "W", "W_tilde": "W", "W_k": "W",
                        "A": "A", "gamma": "A", "D": "A", "A_tilde": "A", "A_k": "A", "h": "h",
                        "rows": "rows", "scalars": "scalars", "val": "val"}
#: The per-replica numbers of ``scalars``, in column order.
SCALARS = ("alpha", "rho1", "rho2", "lambda_w", "lambda_a")


def shapes(names: Sequence[str], d: int, p: int, replicas: int | None = None, taus: int = 0
           ) -> list[tuple[int, ...]]:
    """Shapes of the named arrays for d variables and p lags (``replicas``: stacked for that
    many replicas, ``taus`` held-out thresholds)."""
    of = {"W": (d, d), "A": (p * d, d), "h": (), "rows": (), "scalars": (len(SCALARS),),
          "val": (taus,)}
    lead = () if replicas is None else (replicas,)
    return [lead + of[LIKE[n]] for n in names]
