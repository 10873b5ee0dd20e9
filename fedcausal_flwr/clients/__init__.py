"""NumPyClients of every algorithm, and the adapter that serves them over the Message API.

Exports are lazy: ``from fedcausal_flwr.clients import FDBNLClient`` imports only that
algorithm's module, so a ClientApp process (one per message in a deployment) never loads
torch for a numpy algorithm. Add one line to ``_EXPORTS`` per new client class.
"""

from fedcausal_flwr.lazy import lazy_getattr

_EXPORTS = {
    "reply": "base", "register": "base", "CausalClient": "base",
    "FDBNLClient": "fdbnl",
    "PFDBNLClient": "pfdbnl",
    "FedIVClient": "fediv",
    "FedGCClient": "fedgc", "FedCFClient": "fedcf",
    "VFedCDClient": "vfedcd",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_getattr(__name__, _EXPORTS)
