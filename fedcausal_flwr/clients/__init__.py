"""NumPyClients of every algorithm, and the adapter that serves them over the Message API.

``PHASES`` is discovered from the modules of this package (every NumPyClient subclass with a
``phases`` tuple), so adding an algorithm's client module registers its message types in the
App without touching anything else.
"""

import importlib
import inspect
import pkgutil

from flwr.client import NumPyClient

from fedcausal_flwr.clients.base import reply
from fedcausal_flwr.clients.fdbnl import FDBNLClient
from fedcausal_flwr.clients.fediv import FedIVClient as FedIVClient
from fedcausal_flwr.clients.pfdbnl import PFDBNLClient


def _phases() -> tuple[str, ...]:
    found: set[str] = set()
    for mod in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{mod.name}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, NumPyClient) and cls.__module__ == module.__name__:
                found.update(getattr(cls, "phases", ()))
    return tuple(sorted(found))


PHASES = _phases()

__all__ = ["PHASES", "FDBNLClient", "PFDBNLClient", "reply"]
