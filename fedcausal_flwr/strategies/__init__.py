"""Message-API strategies of every algorithm: ``X(...).start(grid=grid)``.

Exports are lazy (see ``fedcausal_flwr.clients``). Add one line to ``_EXPORTS`` per new
strategy class.
"""

from fedcausal_flwr.lazy import lazy_getattr

_EXPORTS = {
    "CausalStrategy": "base",
    "TooFewReplies": "base",
    "FDBNL": "fdbnl",
    "PFDBNL": "pfdbnl",
    "FedIV": "fediv",
    "FedGC": "fedgc", "FedCF": "fedcf",
    "VFedCD": "vfedcd",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_getattr(__name__, _EXPORTS)
