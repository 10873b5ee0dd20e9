"""The fault-injection kit, shared by the tests and ``simulations/bench/reliability.py``.

:data:`FAULTS` (what a faulty node does), :func:`faulty_app` (wraps any ClientApp callable and
tampers one partition's replies from a given round), :func:`silent_app` (the oracle: the same
node simply failing from the same round), :func:`lying_app` (well-formed Byzantine replies,
:data:`ATTACKS`) and :func:`check_fault`, which runs one algorithm with one fault next to its
oracle and says what happened (:class:`FaultOutcome`); :data:`SMALL` (small, fast run configs),
:func:`run_app` and :func:`same_result` for in-process runs on
:class:`fedcausal_flwr.testing.InProcessGrid`. Moved here from ``fedcausal_flwr.testing``
(issue 33): the library ships the grid, the tests keep their tools.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, RecordDict

from fedcausal_flwr import registry
from fedcausal_flwr.results import RunResult
from fedcausal_flwr.testing import ClientCallable, InProcessGrid

ALGORITHMS = tuple(registry.ALGORITHMS)
#: Protocols that need every party in every exchange: a faulty party stops the run.
EVERY_PARTY = frozenset(a.name for a in registry.ALGORITHMS.values() if a.every_party)
#: The faulty partition, and the round its faults start (its earlier replies are honest).
FAULTY, FROM_ROUND = 1, 2
#: Algorithms of one exchange: their faults start in round 1.
FIRST_ROUND = frozenset({"fedtrees"})


def start_round(algorithm: str) -> int:
    """The round the faulty partition's faults start in for ``algorithm``."""
    return 1 if algorithm in FIRST_ROUND else FROM_ROUND
#: Reply timeout of the fault runs (the no-reply fault waits for it).
TIMEOUT_S = 0.5

_COMMON = {"min-nodes": 2, "node-wait-s": 5.0, "round-timeout-s": TIMEOUT_S}
#: Small, fast run configs (those of tests/*/test_app_*.py, fewer rounds) and their node counts.
SMALL: dict[str, tuple[dict[str, Any], int]] = {
    "fdbnl": ({"algorithm": "fdbnl", "seed": 3, "dbn.d": 5, "dbn.lags": 1,
               "dbn.samples-per-client": 40, "dbn.generator": "svar", "dbn.num-rounds": 3,
               "dbn.lambda-w": 0.05, "dbn.lambda-a": 0.05, **_COMMON}, 4),
    "pfdbnl": ({"algorithm": "pfdbnl", "seed": 3, "dbn.d": 5, "dbn.lags": 1,
                "dbn.samples-per-client": 40, "dbn.generator": "svar", "dbn.num-rounds": 3,
                "dbn.pfdbnl-lambda-w": 0.05, "dbn.pfdbnl-lambda-a": 0.05,
                "dbn.heterogeneous": True,
                **_COMMON}, 4),
    "fedgc": ({"algorithm": "fedgc", "seed": 3, "statespace.ss-t": 80,
               "statespace.ss-window": 20, "statespace.ss-epochs": 1,
               "statespace.ss-clients": 3, **_COMMON}, 3),
    "fedcf": ({"algorithm": "fedcf", "seed": 3, "statespace.ss-t": 80,
               "statespace.ss-window": 20, "statespace.ss-epochs": 1,
               "statespace.ss-clients": 3, **_COMMON}, 3),
    "fediv": ({"algorithm": "fediv", "seed": 4, "iv.iv-scenario": "step", "iv.iv-n": 600,
               "iv.iv-rounds": 3, "iv.iv-lr-g": 0.05, "iv.iv-lr-f": 0.25,
               "iv.iv-val-features": 8, "iv.iv-device": "cpu", **_COMMON}, 4),
    "fedpc": ({"algorithm": "fedpc", "seed": 3, "constraint.d": 5, "constraint.edges": 5,
               "constraint.n": 60, "constraint.lags": 1, **_COMMON}, 4),
    "fedtrees": ({"algorithm": "fedtrees", "seed": 3, "trees.d": 5, "trees.n": 60,
                  "trees.trees": 20, **_COMMON}, 4),
    # the mock backend and small keys: test-only opt-ins of the server and the parties
    "vfedcd": ({"algorithm": "vfedcd", "seed": 4, "vertical.d": 6, "vertical.edges": 8,
                "vertical.n": 20, "vertical.num-epochs": 3, "vertical.batch": 8,
                "vertical.he-backend": "mock", "vertical.key-bits": 256, "vertical.gamma": 0.5,
                "vertical.insecure-test-keys": True, "vertical.vfedcd-accept-backends": "mock",
                "vertical.vfedcd-min-key-bits": 256, **_COMMON}, 3),
}
#: Nodes of the averaging protocols in the "30% of clients fail" case (3 of 10 fail).
FLAKY_NODES = 10

#: fault -> what the faulty node does (from round FROM_ROUND, in every train.* reply).
FAULTS: dict[str, str] = {
    "nan": "a NaN in one entry of its first float array",
    "inf": "an inf in one entry of its first float array",
    "huge": "1e300 in one entry (finite; over the float64 overflow bound)",
    "large": "1e12 in one entry (finite; under every bound, only the robust screen sees it)",
    "shape": "its first array with an extra axis",
    "float32": "its first float array as float32",
    "int": "its first float array as int64",
    "missing-array": "its last array left out",
    "missing-record": "a reply without its arrays record",
    "exception": "raises in the client (an error reply)",
    "no-reply": f"never answers (reply timeout {TIMEOUT_S} s)",
    "flaky-30%": "30% of the clients fail in every round from round 1 (a rotating set; "
                 "raising, NaN, 1e300 and 1e12 replies mixed)",
    "info": "a query.info reply without partition-id (malformed discovery reply)",
    "duplicate": "the last node claims partition id 0 (a duplicate partition id)",
}
DISCOVERY_FAULTS = frozenset({"info", "duplicate"})
_POISON = {"nan": np.nan, "inf": np.inf, "huge": 1e300, "large": 1e12}
_FLAKY_MIX = ("exception", "nan", "huge", "large")


def _round_of(msg: Message) -> int:
    cfg = msg.content.config_records.get("config")
    return int(cfg.get("server-round", 0)) if cfg is not None else 0


def _pid(context: Context) -> int:
    return int(context.node_config["partition-id"])


def tamper(reply: Message, fault: str, request: Message) -> Message:
    """``reply`` with ``fault`` applied to its arrays (a new Message replying to ``request``)."""
    content = RecordDict({k: v for k, v in reply.content.items() if k != "arrays"})
    if fault == "missing-record":
        return Message(content, reply_to=request)
    arrays = [np.array(a) for a in reply.content["arrays"].to_numpy_ndarrays()]
    floats = [i for i, a in enumerate(arrays) if a.dtype.kind == "f" and a.size]
    if fault in _POISON and floats:
        arrays[floats[0]].flat[0] = _POISON[fault]
    elif fault == "float32" and floats:
        arrays[floats[0]] = arrays[floats[0]].astype(np.float32)
    elif fault == "int" and floats:
        arrays[floats[0]] = np.rint(arrays[floats[0]]).astype(np.int64)
    elif fault == "shape" and arrays:
        arrays[0] = arrays[0][np.newaxis]
    elif fault == "missing-array" and arrays:
        arrays = arrays[:-1]
    content["arrays"] = ArrayRecord(arrays)
    return Message(content, reply_to=request)


def flaky_set(k: int, server_round: int) -> list[int]:
    """The 30% of ``k`` clients (at least one) failing in ``server_round`` (rotating)."""
    m = max(1, round(0.3 * k))
    return [(server_round + j) % k for j in range(m)]


def faulty_app(client_app: ClientCallable, fault: str, k: int, pid: int = FAULTY,
               start: int = FROM_ROUND) -> ClientCallable:
    """``client_app`` with partition ``pid`` doing ``fault`` (see :data:`FAULTS`) in its
    ``train.*`` replies from round ``start`` on (``flaky-30%``: :func:`flaky_set` from round
    1; ``info``: its ``query.info`` reply; ``duplicate`` needs :func:`fault_node_configs`)."""

    def app(msg: Message, context: Context) -> Message | None:
        me, kind = _pid(context), msg.metadata.message_type
        if fault == "info" and me == pid and kind == "query.info":
            r = client_app(msg, context)
            props = {k_: v for k_, v in r.content["properties"].items() if k_ != "partition-id"}
            return Message(RecordDict({"properties": ConfigRecord(props)}), reply_to=msg)
        if not kind.startswith("train."):
            return client_app(msg, context)
        rnd = _round_of(msg)
        what = None
        if fault == "flaky-30%":
            if rnd >= 1 and me in flaky_set(k, rnd):
                what = _FLAKY_MIX[flaky_set(k, rnd).index(me) % len(_FLAKY_MIX)]
        elif me == pid and rnd >= start and fault not in DISCOVERY_FAULTS:
            what = fault
        if what is None:
            return client_app(msg, context)
        if what == "exception":
            raise RuntimeError(f"injected fault: partition {me} crashed in round {rnd}")
        if what == "no-reply":
            return None
        return tamper(client_app(msg, context), what, msg)

    return app


def silent_app(client_app: ClientCallable, fault: str, k: int, pid: int = FAULTY,
               start: int = FROM_ROUND) -> ClientCallable:
    """The oracle of ``fault``: the same node(s) simply failing (raising) where the fault
    strikes: from round ``start`` (every ``train.*`` fault), on the flaky schedule
    (``flaky-30%``), or from discovery on (``info``: node ``pid``; ``duplicate``: the
    partition the duplicate leaves unserved, ``k - 1``)."""
    gone = {"info": pid, "duplicate": k - 1}.get(fault)

    def app(msg: Message, context: Context) -> Message | None:
        me, rnd = _pid(context), _round_of(msg)
        if gone is not None:
            fail = me == gone
        elif fault == "flaky-30%":
            fail = msg.metadata.message_type.startswith("train.") and rnd >= 1 \
                and me in flaky_set(k, rnd)
        else:
            fail = msg.metadata.message_type.startswith("train.") and me == pid \
                and rnd >= start
        if fail:
            raise RuntimeError(f"partition {me} went silent in round {rnd}")
        return client_app(msg, context)

    return app


#: attack -> the factor a lying client multiplies every float array of its ``train.*``
#: replies by (well-formed, finite replies that only the Byzantine screen can see).
ATTACKS: dict[str, float] = {"sign-flip": -1.0, "50x": 50.0, "zeros": 0.0, "2x": 2.0}


def lying_app(client_app: ClientCallable, attack: str, liars: Iterable[int],
              start: int = 1) -> ClientCallable:
    """``client_app`` with partitions ``liars`` applying ``attack`` (see :data:`ATTACKS`) to
    their ``train.*`` replies from round ``start`` on."""
    factor, liars = ATTACKS[attack], frozenset(liars)

    def app(msg: Message, context: Context) -> Message | None:
        r = client_app(msg, context)
        if _pid(context) not in liars or not msg.metadata.message_type.startswith("train.") \
                or _round_of(msg) < start or r is None or r.has_error():
            return r
        content = RecordDict({k: v for k, v in r.content.items() if k != "arrays"})
        arrays = r.content["arrays"].to_numpy_ndarrays()
        content["arrays"] = ArrayRecord([np.asarray(a * factor) if a.dtype.kind == "f" else a
                                         for a in arrays])
        return Message(content, reply_to=msg)

    return app


def fault_node_configs(fault: str, k: int) -> dict[int, dict[str, Any]]:
    """Node configs of ``fault`` (``duplicate``: node ``k - 1`` claims partition id 0)."""
    return {k - 1: {"partition-id": 0}} if fault == "duplicate" else {}


def fault_nodes(algorithm: str, fault: str) -> int:
    """How many nodes the case runs with (more for ``flaky-30%`` where the run can go on)."""
    k = SMALL[algorithm][1]
    return FLAKY_NODES if fault == "flaky-30%" and algorithm not in EVERY_PARTY else k


def blamed(algorithm: str, fault: str, k: int) -> list[str]:
    """Who a correct run names: ``client c`` (a partition) or ``node n`` (discovery)."""
    if fault == "info":
        return [f"node {1000 + FAULTY}"]
    if fault == "duplicate":
        return [f"node {1000 + k - 1}"]
    if fault == "flaky-30%":
        rc = registry.get(algorithm).settings_class().from_run_config(SMALL[algorithm][0])
        rounds = range(1, getattr(rc, "rounds", getattr(rc, "max_rounds", 1)) + 1)
        if algorithm in EVERY_PARTY:
            return [f"client {c}" for c in flaky_set(k, 1)]
        return sorted({f"client {c}" for r in rounds for c in flaky_set(k, r)})
    return [f"client {FAULTY}"]


@dataclass
class FaultOutcome:
    """What one algorithm did with one fault, next to its oracle (the silent run)."""

    algorithm: str
    fault: str
    outcome: str  # the table's words
    handled: bool  # dropped/stopped, named, and equal to the silent run
    silent_wrong: bool  # "completed" with a result that differs from the silent run
    status: str
    oracle_status: str
    named: list[str] = field(default_factory=list)
    equal: bool = False
    dropped: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def asdict(self) -> dict[str, Any]:  # noqa: D102
        return dict(self.__dict__)


def run_app(algorithm: str, app: ClientCallable, k: int,
            node_configs: Mapping[int, Mapping[str, Any]] | None = None,
            rc: Mapping[str, Any] | None = None) -> RunResult:
    """One in-process run of ``algorithm`` (its :data:`SMALL` config) against ``app``; a run
    that raises comes back as a RunResult with ``failed: ...`` status. The run config is
    checked as the App's ServerApp checks it (:func:`fedcausal_flwr.appconfig.check`: an
    unknown or misplaced key fails the run, named)."""
    from fedcausal_flwr.appconfig import check, glue, view

    rc = dict(rc or SMALL[algorithm][0])
    try:
        check(algorithm, rc)
    except ValueError as e:
        return RunResult(algorithm, {}, status=f"failed: {type(e).__name__}: {e}")
    strategy = glue(algorithm).strategy(algorithm, view(algorithm, rc))
    try:
        return strategy.start(grid=InProcessGrid(app, k, rc, node_configs))
    except Exception as e:  # noqa: BLE001 - the matrix reports it as not handled
        res = RunResult(algorithm, {}, status=f"failed: {type(e).__name__}: {e}")
        res.metrics["dropped"] = list(strategy.recorder.dropped)
        return res


def same_result(a: RunResult, b: RunResult) -> bool:
    """Bit-for-bit the same estimates, rounds and per-round participation; for runs that keep
    no estimate (a stopped VFedCD), the same per-round losses."""
    if a.status.split(":")[0] != b.status.split(":")[0] or len(a.history) != len(b.history):
        return False
    if [h.get("n_clients") for h in a.history] != [h.get("n_clients") for h in b.history]:
        return False
    if [h.get("loss") for h in a.history] != [h.get("loss") for h in b.history]:
        return False
    if set(a.estimates) != set(b.estimates):
        return False
    return all(_equal(a.estimates[key], b.estimates[key]) for key in a.estimates)


def _equal(x: Any, y: Any) -> bool:
    if isinstance(x, list | tuple) and isinstance(y, list | tuple):
        return len(x) == len(y) and all(_equal(u, v) for u, v in zip(x, y, strict=True))
    return np.array_equal(np.asarray(x), np.asarray(y))


_ORACLES: dict[tuple[str, str], RunResult] = {}


def oracle(algorithm: str, fault: str) -> RunResult:
    """The silent run of ``fault`` (cached: several faults share one oracle)."""
    key = (algorithm, {"info": "info", "duplicate": "duplicate",
                       "flaky-30%": "flaky-30%"}.get(fault, "silent"))
    if key not in _ORACLES:
        from fedcausal_flwr.client_app import app as client_app

        k = fault_nodes(algorithm, fault)
        _ORACLES[key] = run_app(algorithm, silent_app(client_app, key[1], k,
                                                      start=start_round(algorithm)), k)
    return _ORACLES[key]


def check_fault(algorithm: str, fault: str) -> FaultOutcome:
    """Run ``algorithm`` with ``fault`` (the App's ClientApp, :data:`SMALL` config) and its
    oracle; classify: dropped and named with the silent run's result, stopped naming the right
    party, or not handled (a SILENT WRONG RESULT when it says "completed" but differs)."""

    from fedcausal_flwr.client_app import app as client_app

    k = fault_nodes(algorithm, fault)
    t0 = time.perf_counter()
    res = run_app(algorithm, faulty_app(client_app, fault, k, start=start_round(algorithm)), k,
                  fault_node_configs(fault, k))
    seconds = time.perf_counter() - t0
    ref = oracle(algorithm, fault)
    dropped = list(res.metrics.get("dropped", []))
    who = blamed(algorithm, fault, k)
    text = res.status + " | " + " | ".join(dropped)
    stopped = res.status.startswith("stopped")
    if stopped and algorithm in EVERY_PARTY and fault not in DISCOVERY_FAULTS:
        named = [w for w in who if _names(res.status, w)]  # the stop names the party
        ok_named = len(named) >= 1
    else:
        named = [w for w in who if any(_names(d, w) for d in dropped + [res.status])]
        ok_named = len(named) == len(who)
    equal = same_result(res, ref)
    parties = ", ".join(w.split()[-1] for w in (named or who))
    wrong = False
    if res.status == "completed":
        if equal and ok_named:
            outcome = f"dropped {_kind(who)} {parties}, equal to silent run"
        elif equal:
            outcome = "completed, equal to silent run, but not named"
        else:
            wrong = True
            outcome = "SILENT WRONG RESULT"
    elif stopped:
        if not ok_named:
            outcome = f"stopped, blames the wrong party ({_short(text)})"
        elif not equal:
            outcome = f"stopped, names {_kind(who)} {parties}, but differs from silent run " \
                      f"({_short(ref.status)})"
        else:
            outcome = f"stopped, names {_kind(who, party=True)} {parties}"
    else:
        outcome = f"not handled: {_short(res.status)}"
    handled = (stopped or res.status == "completed") and ok_named and equal
    return FaultOutcome(algorithm, fault, outcome, handled, wrong, res.status, ref.status,
                        named, equal, dropped, seconds)


def _names(text: str, who: str) -> bool:
    """Whether ``text`` names ``who`` ("client 1" but not "client 12")."""
    import re

    return re.search(rf"(?<![\w]){re.escape(who)}(?!\d)", text) is not None


def _kind(who: list[str], party: bool = False) -> str:
    noun = who[0].split()[0]
    if party and noun == "client":
        noun = "party"
    return noun + ("s" if len(who) > 1 else "")


def _short(text: str, n: int = 90) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[:n - 3] + "..."


def honest_margin(algorithm: str, rc: Mapping[str, Any] | None = None,
                  k: int | None = None) -> dict[str, Any]:
    """How close an honest run of ``algorithm`` comes to the magnitude screen: the largest
    ``peak / max(floor, median peak of the other replies)`` over every float array of every
    exchange (the screen drops above ``screen_factor``), the largest peak, and whatever the
    screen dropped (must be nothing)."""
    from fedcausal_flwr.appconfig import glue, view
    from fedcausal_flwr.client_app import app as client_app
    from fedcausal_flwr.federation.replies import peak

    rc = dict(rc or SMALL[algorithm][0])
    k = k or SMALL[algorithm][1]
    strategy = glue(algorithm).strategy(algorithm, view(algorithm, rc))
    seen = {"max_ratio": 0.0, "max_peak": 0.0, "screened": []}
    screen = strategy.reply_filters[0]  # the magnitude screen

    def watched(phase: str, replies: Mapping[int, list[np.ndarray]]) -> dict[int, str]:
        peaks = {c: [peak(np.asarray(a)) for a in arrays] for c, arrays in replies.items()}
        for c, ps in peaks.items():
            for i, v in enumerate(ps):
                others = [q[i] for o, q in peaks.items()
                          if o != c and i < len(q) and q[i] is not None]
                if v is None:
                    continue
                seen["max_peak"] = max(seen["max_peak"], v)
                if others:
                    ref = max(strategy.screen_floor, float(np.median(others)))
                    seen["max_ratio"] = max(seen["max_ratio"], v / ref)
        out = screen(phase, replies)
        seen["screened"] += [f"client {c}: {why}" for c, why in out.items()]
        return out

    strategy.reply_filters[0] = watched
    result = strategy.start(grid=InProcessGrid(client_app, k, rc))
    return {**seen, "status": result.status, "rounds": len(result.history),
            "screen_factor": strategy.screen_factor, "screen_floor": strategy.screen_floor}
