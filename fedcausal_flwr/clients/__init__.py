"""NumPyClients of every algorithm, and the adapter that serves them over the Message API.

Exports are lazy and come from the registry (:mod:`fedcausal_flwr.registry`):
``from fedcausal_flwr.clients import FDBNLClient`` imports only that algorithm's family, so a
ClientApp process (one per message in a deployment) never loads torch for a numpy algorithm.
"""

from fedcausal_flwr.registry import ALGORITHMS, lazy_exports

_BASE = "fedcausal_flwr.federation.client"
_FIXED = {"reply": _BASE, "register": _BASE, "CausalClient": _BASE}
__all__ = sorted([*_FIXED, *(a.client for a in ALGORITHMS.values())])
__getattr__ = lazy_exports(__name__, ("client",), _FIXED)
