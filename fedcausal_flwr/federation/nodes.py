"""What a node says of itself: its ``query.info`` reply, parsed, and the properties the
federation agrees on. Also how a node or an error reply is named in a drop."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from flwr.app import Message

from fedcausal_flwr.federation.limits import prefix, props_problem
from fedcausal_flwr.federation.wire import NODE_RECORD


@dataclass(frozen=True)
class NodeInfo:
    """What a node said of itself in the ``query.info`` phase."""

    node_id: int
    cid: int
    num_partitions: int
    props: dict[str, Any]
    #: which life of the node answered (``federation.client.incarnation``; None: not said)
    incarnation: int | None = None


def incarnation_of(reply: Message) -> int | None:
    """The incarnation a reply carries (its ``node`` record), or None."""
    rec = reply.content.config_records.get(NODE_RECORD) if reply.has_content() else None
    value = rec.get("incarnation") if rec is not None else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


PARTITION_HINT = ("give each SuperNode its own partition-id in its node config "
                  "(--node-config 'partition-id=<i> ...'); a node config without one claims 0")
"""How to fix a repeated partition id: a deployment's SuperNodes declare none by default."""


def parse_info(node: int, reply: Message | None, timeout: float) -> NodeInfo | str:
    """A node's ``query.info`` reply as :class:`NodeInfo`, or why it is unusable.

    The reply must carry a ``properties`` record with an integer ``partition-id`` >= 0 (and,
    if present, an integer ``num-partitions`` >= 0), and lists of names and sizes within the
    variable cap (:func:`~fedcausal_flwr.federation.limits.props_problem`): checked here,
    before the server builds anything from them.
    """
    if reply is None:
        return f"no reply to query.info in {timeout:g}s"
    if reply.has_error():
        return f"error reply to query.info: {last_line(reply.error.reason)}"
    if "properties" not in reply.content.config_records:
        return ("query.info reply without a 'properties' record (has "
                f"{sorted(reply.content.keys()) or 'nothing'})")
    props = dict(reply.content["properties"])
    for key, needed in (("partition-id", True), ("num-partitions", False)):
        v = props.get(key)
        if v is None and not needed:
            continue
        if v is None:
            return "query.info reply without 'partition-id'"
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            return f"query.info reply has {key} = {prefix(v)}, not an integer >= 0"
    if (why := props_problem(props)) is not None:
        return why
    return NodeInfo(node, int(props["partition-id"]), int(props.get("num-partitions", 0)),
                    props, incarnation_of(reply))


def majority_props(infos: Sequence[NodeInfo], keys: Sequence[str]) -> dict[str, Any]:
    """The most common value of each of ``keys`` among the nodes that report it (ties: the
    lowest partition id's), for optional properties such as the variable names."""
    out = {}
    for k in keys:
        have = sorted((i for i in infos if k in i.props), key=lambda i: (i.cid, i.node_id))
        if have:
            out[k] = Counter(i.props[k] for i in have).most_common(1)[0][0]
    return out


def agreed_props(infos: Sequence[NodeInfo]) -> dict[str, Any]:
    """The majority of d and p, then the majority of the variable names among the nodes with
    that d and p (the default of ``CausalStrategy.expected_props``)."""
    keys = [k for k in ("d", "p") if all(k in i.props for i in infos)]
    if not keys:
        return majority_props(infos, ("names",))
    common = Counter(tuple(i.props[k] for k in keys) for i in infos).most_common(1)[0][0]
    want = dict(zip(keys, common, strict=True))
    agree = [i for i in infos if all(i.props[k] == v for k, v in want.items())]
    return {**want, **majority_props(agree, ("names",))}


WRAPPED = re.compile(r"^<class '[^']*'>:<'(.*)'>$", re.S)
"""An error reason as Flower's simulation wraps a ClientApp's exception."""
RAISED = re.compile(r"Exception \w+ occurred\. Message: ")
"""The words Flower's ``ClientAppException`` puts before the ClientApp's own message."""


def last_line(text: str) -> str:
    """The last non-empty line of an error reason (a client's traceback ends with it),
    unwrapped from Flower's ``<class '...ClientAppException'>:<'Exception ... occurred.
    Message: ...'>``: the ClientApp's own words."""
    text = str(text).strip()
    if (wrapped := WRAPPED.match(text)) is not None:
        text = wrapped.group(1)
    lines = [RAISED.sub("", ln) for ln in text.splitlines() if RAISED.sub("", ln).strip()]
    return lines[-1] if lines else "error reply"


def node_named(node: int, reply: Message | None) -> str:
    """``node <id>``, with the partition id its reply claims when there is one."""
    try:
        pid = reply.content["properties"]["partition-id"]  # type: ignore[union-attr]
    except Exception:  # noqa: BLE001 - no reply, error reply, no properties, no partition-id
        return f"node {node}"
    return f"node {node} (partition-id {prefix(pid)})"
