"""Message-API strategies of every algorithm: ``X(...).start(grid=grid)``."""

from fedcausal_flwr.strategies.base import CausalStrategy, TooFewReplies
from fedcausal_flwr.strategies.fdbnl import FDBNL
from fedcausal_flwr.strategies.fediv import FedIV as FedIV
from fedcausal_flwr.strategies.pfdbnl import PFDBNL

__all__ = ["FDBNL", "PFDBNL", "CausalStrategy", "TooFewReplies"]
