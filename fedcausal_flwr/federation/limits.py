"""How many replies a run needs and how long it waits for them."""

from __future__ import annotations

from collections.abc import Mapping
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


# ---- what a node says of itself: bounded before the server allocates anything ---------------
MAX_NAME_CHARS = 200
"""Longest variable (column, attribute) name a node may report: longer names are refused at
discovery, naming the node (names of 10**5 characters stalled the plots)."""
NAME_PROPS = ("names", "unobserved", "columns", "y-name")
"""The ``query.info`` properties that are comma-joined lists of names: each holds at most
:data:`~fedcausal_flwr.settings.MAX_VARS` names of at most :data:`MAX_NAME_CHARS` characters."""
SIZE_PROPS = ("d", "p", "u")
"""The ``query.info`` properties that size the server's arrays: integers in
``[0, MAX_VARS]``."""
PREFIX_CHARS = 20
"""How much of an offending name an error shows (a node's names are its own)."""


def prefix(text: object, limit: int = PREFIX_CHARS) -> str:
    """``repr(text)``, or for a longer string its first ``limit`` characters, quoted, with
    its length."""
    if not isinstance(text, str):
        t = repr(text)
        return t if len(t) <= limit + 2 else f"{t[:limit]}... ({len(t)} characters)"
    return repr(text) if len(text) <= limit else f"{text[:limit]!r}... ({len(text)} characters)"


def props_problem(props: Mapping[str, object]) -> str | None:
    """Why a node's ``query.info`` properties are refused before anything is built from them
    (a list of names longer than the variable cap, a name longer than :data:`MAX_NAME_CHARS`,
    a size property out of ``[0, MAX_VARS]``), or None. Never echoes more of a name than
    :func:`prefix` shows."""
    from fedcausal_flwr.settings import MAX_VARS

    for key in SIZE_PROPS:
        v = props.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int)
                              or not 0 <= v <= MAX_VARS):
            return f"query.info reply has {key} = {prefix(v)}, not an integer in [0, {MAX_VARS}]"
    for key in NAME_PROPS:
        v = props.get(key)
        if v is None:
            continue
        if not isinstance(v, str):
            return f"query.info reply has {key} of type {type(v).__name__}, not a string"
        count = v.count(",") + 1 if v else 0
        if count > MAX_VARS:
            return (f"query.info reply lists {count} {key}, above the variable cap of "
                    f"{MAX_VARS} (settings.MAX_VARS)")
        long = next((n for n in v.split(",") if len(n) > MAX_NAME_CHARS), None)
        if long is not None:
            return (f"query.info reply has a name in {key} of {len(long)} characters, above "
                    f"{MAX_NAME_CHARS} (federation.limits.MAX_NAME_CHARS): {prefix(long)}")
    return None


def over_cap(total: int, what: str, shares: Mapping[str, int], unit: str) -> str | None:
    """Why ``total`` (the size of ``what``, e.g. "the union of the sites' variables") exceeds
    the variable cap, naming each contributor's share (``shares``: ``{who: how many}``, in
    ``unit``), largest first; None within the cap."""
    from fedcausal_flwr.settings import MAX_VARS

    if total <= MAX_VARS:
        return None
    parts = sorted(shares.items(), key=lambda kv: (-kv[1], kv[0]))
    return (f"{what} are {total}, above the variable cap of {MAX_VARS} (settings.MAX_VARS); "
            f"{unit}: " + ", ".join(f"{who} {n}" for who, n in parts))
