"""Message-API strategies of every algorithm and their settings classes:
``X(XSettings(...)).start(grid=grid, num_rounds=...)``.

Exports are lazy (see ``fedcausal_flwr.clients``). Add one line to ``_EXPORTS`` per new
strategy class.
"""

from fedcausal_flwr.lazy import lazy_getattr

_EXPORTS = {
    "CausalStrategy": "base",
    "TooFewReplies": "base", "ProtocolStopped": "base", "Diverged": "base",
    "FDBNL": "fdbnl", "FDBNLSettings": "fdbnl",
    "PFDBNL": "pfdbnl", "PFDBNLSettings": "pfdbnl",
    "FedIV": "fediv", "FedIVSettings": "fediv",
    "FedGC": "fedgc", "FedGCSettings": "fedgc",
    "FedCF": "fedcf", "FedCFSettings": "fedcf",
    "VFedCD": "vfedcd", "VFedCDSettings": "vfedcd",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_getattr(__name__, _EXPORTS)
