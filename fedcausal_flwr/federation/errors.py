"""Why a run stops early: the exceptions :meth:`CausalStrategy.start` turns into a status.

Each is a :class:`TooFewReplies`, so ``start()`` keeps every finished round and sets
``status = "stopped: <why>"`` instead of raising.
"""

from __future__ import annotations


class TooFewReplies(RuntimeError):
    """Fewer valid replies than ``min_nodes``: the run stops and keeps what it has."""


class ProtocolStopped(TooFewReplies):
    """A party the protocol cannot do without failed or misbehaved."""


class Diverged(TooFewReplies):
    """The model diverged (non-finite or exploding parameters): the run stops, keeps every
    finished round, and its status says which round and what happened."""
