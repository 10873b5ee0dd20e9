"""Base of the package's Message-API strategies.

Our protocols are iterative multi-party algorithms, not FedAvg rounds, so each strategy drives
the Grid from :meth:`CausalStrategy.start`: discover the nodes (phase ``query.info``), then one
validated :meth:`CausalStrategy.exchange` per protocol step. A subclass with one exchange per
round only fills in the round hooks (``setup``, ``payload``, ``reply_shapes``, ``aggregate``,
``record``, ``estimates``, ``done``); a multi-phase protocol overrides :meth:`run_rounds`.
"""

from __future__ import annotations

import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from logging import ERROR, INFO, WARNING
from typing import Any

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Message, RecordDict
from flwr.common.logger import log
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Strategy

from fedcausal_flwr.results import RunResult

Payload = tuple[list[np.ndarray], dict[str, Any]]
Shape = tuple[int, ...]


class TooFewReplies(RuntimeError):
    """Fewer valid replies than ``min_nodes``: the run stops and keeps what it has."""


@dataclass(frozen=True)
class NodeInfo:
    """What a node said of itself in the ``query.info`` phase."""

    node_id: int
    cid: int
    num_partitions: int
    props: dict[str, Any]


def array_bytes(arrays: Iterable[np.ndarray]) -> int:
    """Payload size of a list of arrays in bytes (headers not counted)."""
    return int(sum(np.asarray(a).nbytes for a in arrays))


def reply_problem(arrays: Sequence[np.ndarray], shapes: Sequence[Shape]) -> str | None:
    """Why a reply's arrays are unusable (count, shape, dtype, finiteness), or None."""
    if len(arrays) != len(shapes):
        return f"expected {len(shapes)} arrays, got {len(arrays)}"
    for i, (a, shape) in enumerate(zip(arrays, shapes, strict=True)):
        if tuple(a.shape) != tuple(shape):
            return f"array {i} has shape {tuple(a.shape)}, expected {tuple(shape)}"
        if not np.issubdtype(a.dtype, np.floating):
            return f"array {i} has dtype {a.dtype}, expected a float dtype"
        if not np.all(np.isfinite(a)):
            return f"array {i} has non-finite values"
    return None


class CausalStrategy(Strategy):
    """Discovery, validated exchanges, history, checkpoints and the result contract.

    Parameters
    ----------
    min_nodes : int
        Fewest valid replies an exchange needs; below it the run stops (results kept).
    node_wait_s : float
        How long to wait for SuperNodes to connect.
    timeout_s : float
        Reply timeout of one exchange.
    evaluate_fn : callable, optional
        ``evaluate_fn(estimates, client_ids) -> dict`` of metrics, called after each round
        (e.g. SHD against a known truth). It sees estimates only, never client data.
    checkpoint : callable, optional
        ``checkpoint(result)`` after each round, so a crash never loses finished rounds.
    """

    algorithm = "base"
    progress_keys: tuple[str, ...] = ("n_clients", "dropped", "seconds")

    def __init__(self, *, min_nodes: int = 2, node_wait_s: float = 60.0,
                 timeout_s: float = 600.0,
                 evaluate_fn: Callable[[dict[str, np.ndarray], list[int]], dict[str, Any]]
                 | None = None,
                 checkpoint: Callable[[RunResult], None] | None = None) -> None:
        self.min_nodes = int(min_nodes)
        self.node_wait_s = float(node_wait_s)
        self.timeout_s = float(timeout_s)
        self.evaluate_fn = evaluate_fn
        self.checkpoint = checkpoint
        self.nodes: dict[int, NodeInfo] = {}  # by client id (partition id)
        self.wire_log: list[dict[str, Any]] = []
        self._round = 0
        self._bytes = {"up": 0, "down": 0}
        self._dropped: list[str] = []

    # Flower's FedAvg-style hooks are not used: the protocol runs in start().
    def configure_train(self, server_round, arrays, config, grid):  # noqa: D102
        raise NotImplementedError(f"{type(self).__name__} drives the Grid from start()")

    aggregate_train = configure_evaluate = aggregate_evaluate = configure_train

    def summary(self) -> None:
        """Log the strategy's settings."""
        log(INFO, "%s: %s", type(self).__name__, self.config())

    def config(self) -> dict[str, Any]:
        """Settings that go into ``result.json``."""
        return {"min_nodes": self.min_nodes}

    # ---- round hooks (one exchange per round) ------------------------------------------
    phase = "local"

    def setup(self, nodes: Mapping[int, NodeInfo]) -> None:
        """Initialise server state once the nodes are known."""
        raise NotImplementedError

    def select(self) -> list[int]:
        """Client ids taking part in this round."""
        return sorted(self.nodes)

    def payload(self, cid: int) -> Payload:
        """Arrays and config sent to client ``cid`` this round."""
        raise NotImplementedError

    def reply_shapes(self) -> list[Shape]:
        """Shapes of the arrays every client must return."""
        raise NotImplementedError

    def aggregate(self, replies: Mapping[int, list[np.ndarray]]) -> None:
        """Update server state from the accepted replies {cid: arrays}."""
        raise NotImplementedError

    def record(self) -> dict[str, Any]:
        """Per-round numbers for the history (losses, residuals, penalties)."""
        return {}

    def estimates(self) -> dict[str, np.ndarray]:
        """Current learned matrices."""
        return {}

    def done(self) -> bool:
        """Stop rule."""
        return False

    def expected_props(self, infos: Sequence[NodeInfo]) -> dict[str, Any]:
        """Properties every node must agree on (default: majority of d and p)."""
        keys = [k for k in ("d", "p") if all(k in i.props for i in infos)]
        if not keys:
            return {}
        common = Counter(tuple(i.props[k] for k in keys) for i in infos).most_common(1)[0][0]
        return dict(zip(keys, common, strict=True))

    # ---- machinery ---------------------------------------------------------------------
    def _send(self, grid: Grid, node_cfg: Mapping[int, RecordDict], message_type: str
              ) -> dict[int, Message]:
        messages = []
        for node, content in node_cfg.items():
            messages.append(Message(content, dst_node_id=node, message_type=message_type,
                                    group_id=str(self._round)))
            arrays = content.array_records.get("arrays")
            self.wire_log.append({
                "round": self._round, "phase": message_type, "direction": "down", "node": node,
                "arrays": [(tuple(a.shape), str(a.dtype))
                           for a in (arrays.to_numpy_ndarrays() if arrays else [])],
                "config": sorted(content.config_records.get("config", {}).keys()),
            })
        return {r.metadata.src_node_id: r for r in self._send_and_receive(grid, messages)}

    def _send_and_receive(self, grid: Grid, messages: list[Message]) -> list[Message]:
        """Push, then pull with a short, growing interval (Flower's own loop sleeps 3 s)."""
        pending = {i for i in grid.push_messages(messages) if i}
        replies: list[Message] = []
        deadline, wait = time.time() + self.timeout_s, 0.002
        while pending and time.time() < deadline:
            got = list(grid.pull_messages(pending))
            replies += got
            pending -= {r.metadata.reply_to_message_id for r in got}
            if pending:
                time.sleep(wait)
                wait = min(1.5 * wait, 0.2)
        return replies

    def drop(self, who: str, why: str) -> None:
        """Log and count a dropped node or reply."""
        self._dropped.append(f"{who}: {why}")
        log(WARNING, "dropped %s: %s", who, why)

    def discover(self, grid: Grid) -> dict[int, NodeInfo]:
        """Wait for the SuperNodes, ask each who it is, keep the consistent ones."""
        t0 = time.time()
        infos: dict[int, NodeInfo] = {}
        asked: set[int] = set()
        expected = self.min_nodes
        while True:
            ids = sorted(set(grid.get_node_ids()) - asked)
            if ids:
                asked |= set(ids)
                replies = self._send(grid, {n: RecordDict({"config": ConfigRecord({})})
                                            for n in ids}, "query.info")
                for node in ids:
                    r = replies.get(node)
                    if r is None:
                        self.drop(f"node {node}", "no reply to query.info")
                    elif r.has_error():
                        self.drop(f"node {node}", _last_line(r.error.reason))
                    else:
                        props = dict(r.content["properties"])
                        info = NodeInfo(node, int(props["partition-id"]),
                                        int(props.get("num-partitions", 0)), props)
                        infos[node] = info
                        expected = max(expected, info.num_partitions)
            if len(asked) >= expected or time.time() - t0 > self.node_wait_s:
                break
            time.sleep(0.5)
        if len(infos) < self.min_nodes:
            raise TooFewReplies(f"{len(infos)} usable SuperNodes after {time.time() - t0:.0f}s,"
                                f" min-nodes={self.min_nodes}")
        want = self.expected_props(list(infos.values()))
        nodes: dict[int, NodeInfo] = {}
        for info in sorted(infos.values(), key=lambda i: (i.cid, i.node_id)):
            bad = {k: info.props.get(k) for k, v in want.items() if info.props.get(k) != v}
            if bad:
                self.drop(f"client {info.cid}", f"reports {bad}, the federation has {want}")
            elif info.cid in nodes:
                self.drop(f"node {info.node_id}", f"duplicate partition-id {info.cid}")
            else:
                nodes[info.cid] = info
        if len(nodes) < self.min_nodes:
            raise TooFewReplies(f"{len(nodes)} consistent clients, min-nodes={self.min_nodes}")
        log(INFO, "%s: %d clients %s", type(self).__name__, len(nodes), want)
        return nodes

    def exchange(self, grid: Grid, phase: str, payloads: Mapping[int, Payload],
                 shapes: Sequence[Shape] | Mapping[int, Sequence[Shape]],
                 min_nodes: int | None = None) -> dict[int, list[np.ndarray]]:
        """Send ``train.<phase>`` to each client id; return the valid replies by client id.

        Error replies, missing replies and replies with the wrong count, shapes or dtypes or
        with non-finite values are dropped and logged; fewer than ``min_nodes`` (default: the
        strategy's; e.g. 1 for a query to one client) valid replies raise
        :class:`TooFewReplies`.
        """
        need = self.min_nodes if min_nodes is None else int(min_nodes)
        contents = {}
        for cid, (arrays, cfg) in payloads.items():
            self._bytes["down"] += array_bytes(arrays)
            contents[self.nodes[cid].node_id] = RecordDict({
                "arrays": ArrayRecord([np.asarray(a) for a in arrays]),
                "config": ConfigRecord({**cfg, "server-round": self._round}),
            })
        replies = self._send(grid, contents, f"train.{phase}")
        ok: dict[int, list[np.ndarray]] = {}
        for cid in payloads:
            node = self.nodes[cid].node_id
            r = replies.get(node)
            want = shapes[cid] if isinstance(shapes, Mapping) else shapes
            if r is None:
                self.drop(f"client {cid}", f"no reply to train.{phase} in {self.timeout_s:.0f}s")
                continue
            if r.has_error():
                self.drop(f"client {cid}", _last_line(r.error.reason))
                continue
            if "arrays" not in r.content.array_records:
                self.drop(f"client {cid}", "reply without arrays")
                continue
            arrays = r.content["arrays"].to_numpy_ndarrays()
            self._bytes["up"] += array_bytes(arrays)
            self.wire_log.append({"round": self._round, "phase": f"train.{phase}",
                                  "direction": "up", "node": node,
                                  "arrays": [(tuple(a.shape), str(a.dtype)) for a in arrays]})
            problem = reply_problem(arrays, want)
            if problem:
                self.drop(f"client {cid}", problem)
                continue
            ok[cid] = arrays
        if len(ok) < need:
            raise TooFewReplies(f"round {self._round}: {len(ok)} valid replies to "
                                f"train.{phase}, min-nodes={need}")
        return ok

    def run_rounds(self, grid: Grid, result: RunResult) -> None:
        """The protocol loop: one exchange per round until :meth:`done`."""
        while not self.done():
            self._round += 1
            t0 = time.time()
            self._bytes = {"up": 0, "down": 0}
            n_dropped = len(self._dropped)
            cids = self.select()
            replies = self.exchange(grid, self.phase, {c: self.payload(c) for c in cids},
                                    self.reply_shapes())
            self.aggregate(replies)
            rec = {"round": self._round, **self.record(), "n_clients": len(replies),
                   "dropped": len(self._dropped) - n_dropped,
                   "bytes_up": self._bytes["up"], "bytes_down": self._bytes["down"]}
            if self.evaluate_fn is not None:
                rec.update(self.evaluate_fn(self.estimates(), sorted(self.nodes)))
            rec["seconds"] = time.time() - t0
            self.record_round(result, rec)

    def record_round(self, result: RunResult, rec: dict[str, Any], *, show: bool = True,
                     label: str = "round") -> None:
        """Append a finished round to the history, log its progress line, checkpoint."""
        result.history.append(rec)
        if show:
            log(INFO, "[%s %s %d] %s", self.algorithm, label, rec.get(label, self._round),
                _progress(rec, self.progress_keys))
        if self.checkpoint is not None:
            result.estimates = self.estimates()
            self.checkpoint(result)

    def start(self, grid: Grid, *args: Any, **kwargs: Any) -> RunResult:  # noqa: ARG002
        """Run the whole protocol on ``grid`` and return its :class:`RunResult`.

        A run that loses too many clients stops with ``status`` saying why and keeps every
        finished round; it never averages fewer than ``min_nodes`` valid replies.
        """
        t0 = time.time()
        self.summary()
        result = RunResult(self.algorithm, self.config())
        try:
            self.nodes = self.discover(grid)
            self.setup(self.nodes)
            self.run_rounds(grid, result)
        except TooFewReplies as e:
            result.status = f"stopped: {e}"
            log(ERROR, "%s stopped early: %s", self.algorithm, e)
        except Exception as e:  # noqa: BLE001 - keep finished rounds, then re-raise
            result.status = f"failed: {type(e).__name__}: {e}"
            log(ERROR, "%s", traceback.format_exc())
            self._finish(result, t0)
            if self.checkpoint is not None:
                self.checkpoint(result)
            raise
        self._finish(result, t0)
        return result

    def _finish(self, result: RunResult, t0: float) -> None:
        if self.nodes and self._round:
            result.estimates = self.estimates()
            if self.evaluate_fn is not None:
                result.metrics.update(self.evaluate_fn(result.estimates, sorted(self.nodes)))
        result.metrics.update({"rounds": self._round, "clients": len(self.nodes),
                               "dropped": list(self._dropped)})
        result.timing = {"wall_s": time.time() - t0, "rounds": self._round}


def _last_line(text: str) -> str:
    lines = [ln for ln in str(text).strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "error reply"


def _progress(rec: Mapping[str, Any], keys: Sequence[str]) -> str:
    return " ".join(f"{k}={rec[k]:.4g}" if isinstance(rec[k], float) else f"{k}={rec[k]}"
                    for k in keys if k in rec)
