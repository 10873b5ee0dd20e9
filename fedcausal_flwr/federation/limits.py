"""How many replies a run needs and how long it waits for them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    """The waits and the quorum of one run (the settings' ``min-nodes``, ``round-timeout-s``,
    ``node-grace-s``, ``node-wait-s``; ``start(timeout=...)`` overrides the timeout).

    ``grace_s`` is what a node on probation (or a new SuperNode) is waited for; it is at most
    ``timeout_s`` (:meth:`of`).
    """

    min_nodes: int = 2
    timeout_s: float = 600.0
    grace_s: float = 30.0
    node_wait_s: float = 60.0

    @classmethod
    def of(cls, min_nodes: int, timeout_s: float, grace_s: float, node_wait_s: float
           ) -> Limits:
        """The limits with ``grace_s`` capped at ``timeout_s``."""
        return cls(int(min_nodes), float(timeout_s), min(grace_s, timeout_s), node_wait_s)
