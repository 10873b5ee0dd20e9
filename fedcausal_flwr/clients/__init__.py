"""NumPyClients of every algorithm, and the adapter that serves them over the Message API."""

from fedcausal_flwr.clients.base import reply
from fedcausal_flwr.clients.fdbnl import FDBNLClient
from fedcausal_flwr.clients.pfdbnl import PFDBNLClient

CLIENTS = (FDBNLClient, PFDBNLClient)
PHASES = tuple(sorted({p for c in CLIENTS for p in c.phases}))

__all__ = ["CLIENTS", "PHASES", "FDBNLClient", "PFDBNLClient", "reply"]
