"""In-process runs with nodes that fail, hang or come back: the App's client made to fail in
given rounds or to answer ``query.info`` badly, and the strategy run on an InProcessGrid with
events between rounds."""

from __future__ import annotations

import time

import numpy as np
from flwr.app import ConfigRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp

from fedcausal_flwr.client_app import handle
from fedcausal_flwr.dbn import app as app_dbn
from fedcausal_flwr.testing import InProcessGrid

RC = {"algorithm": "fdbnl", "seed": 3, "d": 5, "lags": 1, "samples-per-client": 40,
      "generator": "svar", "num-rounds": 8, "lambda-w": 0.05, "lambda-a": 0.05,
      "min-nodes": 2, "node-wait-s": 5.0}


def failing_app(fail: dict[int, set[int]] | None = None, info: dict[int, str] | None = None
                ) -> ClientApp:
    """The App's client, but partition p raises in the rounds ``fail[p]`` and answers
    ``query.info`` as ``info[p]`` says (a malformed reply)."""
    fail, info = fail or {}, info or {}

    class App(ClientApp):
        def __call__(self, msg: Message, context: Context) -> Message:
            pid = int(context.node_config["partition-id"])
            if msg.metadata.message_type == "query.info" and pid in info:
                mode = info[pid]
                if mode == "crash":
                    raise RuntimeError("info crashed")
                props = {"partition-id": pid, "num-partitions": 6, "n": 39, "d": 5, "p": 1}
                if mode == "no-properties":
                    return Message(RecordDict({"metrics": ConfigRecord({"x": 1})}),
                                   reply_to=msg)
                if mode == "no-partition-id":
                    del props["partition-id"]
                if mode == "string-partition-id":
                    props["partition-id"] = "two"
                return Message(RecordDict({"properties": ConfigRecord(props)}), reply_to=msg)
            rnd = int(dict(msg.content["config"]).get("server-round", 0))
            if rnd in fail.get(pid, set()):
                raise RuntimeError(f"client {pid} fails in round {rnd}")
            return handle(msg, context)

    return App()


def run(rc: dict, k: int, app=None, events=None, timeout=None, cls=None):
    """The strategy on an InProcessGrid; ``events[r](grid)`` runs after round r."""
    grid = InProcessGrid(app or failing_app(), k, rc)
    strategy = app_dbn.strategy(rc["algorithm"], rc)
    if cls is not None:
        strategy.__class__ = cls
    events = events or {}
    strategy.checkpoint = lambda res: events.get(len(res.history), lambda g: None)(grid)
    t0 = time.time()
    result = strategy.start(grid=grid, timeout=timeout)
    return result, grid, time.time() - t0


def same(a, b) -> None:
    assert a.status == b.status == "completed"
    assert len(a.history) == len(b.history)
    for key in ("W", "A"):
        np.testing.assert_allclose(a.estimates[key], b.estimates[key], rtol=0, atol=1e-12)
