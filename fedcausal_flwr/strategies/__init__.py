"""Message-API strategies of every algorithm and their settings classes:
``X(XSettings(...)).start(grid=grid, num_rounds=...)``.

Exports are lazy and come from the registry (:mod:`fedcausal_flwr.registry`):
``from fedcausal_flwr.strategies import FDBNL`` imports only the DBN family.
"""

from fedcausal_flwr.registry import ALGORITHMS, lazy_exports

_BASE = "fedcausal_flwr.federation.strategy"
_FIXED = {"CausalStrategy": _BASE, "TooFewReplies": _BASE, "ProtocolStopped": _BASE,
          "Diverged": _BASE}
__all__ = sorted([*_FIXED, *(a.strategy for a in ALGORITHMS.values()),
                  *(a.settings for a in ALGORITHMS.values())])
__getattr__ = lazy_exports(__name__, ("strategy", "settings"), _FIXED)
