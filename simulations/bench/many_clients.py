"""Thousands of clients: FDBNL (and FedIV) at K = 5 to 1,000 under Flower's simulation (issue 23).

Three parts, on this machine's CPUs:

* ``inprocess``: the App's FDBNL strategy (``fedcausal_flwr.dbn.app.strategy``, checkpoint to
  a temporary folder as the ServerApp does) against the App's ClientApp through an in-process
  Grid (no Ray, no sockets; replies not kept). Each round's wall time is split into the
  clients' own computation (the ClientApp call: building the client, its step, its record
  (de)serialisation) and the server's parts: Flower's records (Messages and ArrayRecords
  built, the arrays serialised and read back), the Grid's own work (the in-process Grid hashes
  every message; a real SuperLink does its own), the exchange's validation and bookkeeping
  (ours: shapes, bytes, wire log, node health), the screens (magnitude and Byzantine), the
  algorithm's own server math (payloads, aggregation, record), evaluation against the
  truth, checkpoint, the recorder and the roster's refresh. The non-client cost per client
  and round is what must grow at most linearly in K; the strategy base's overhead (screens,
  checkpoint, bookkeeping) as a fraction of a round is issue 23's goal 5.
* ``scan``: Flower's own per-round cost that grows as K^2, without Ray: one pass of the
  Simulation Engine's message extractor over K registered nodes with K messages stored
  (:func:`flower_scan`).
* ``flwr``: ``launch.simulate`` (``flwr run``, Ray, one virtual SuperNode per client, App
  data): a whole default FDBNL run at each K, FedIV for a few rounds at the largest K,
  FDBNL with ``clients-per-round`` at the largest K, and short FDBNL runs there with 1, 2
  and 4 Ray actors, and the default FDBNL run at the largest K with ``--busy`` CPU-bound
  loops (``yes > /dev/null``) beside it (``--runs`` picks; rows of runs not made are kept,
  each with the date it was measured). Reported: ``flwr
  run`` wall time, the time before round 1 (discovery: every node builds its client once),
  seconds per round, and the peak RSS of the ``flwr-simulation`` process (the ServerApp's
  process: it also holds Flower's in-memory SuperLink state and the Ray driver) and of all
  its descendants (Ray).

    python simulations/bench/many_clients.py [--clients 5 10 100 1000] [--part inprocess scan flwr]
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import _sims  # noqa: F401 - simulations/ on sys.path
import numpy as np
from harness import (
    Clock,
    app_config,
    check,
    finish,
    log,
    markdown,
    parser,
    read_results,
    results_path,
    script_name,
    settings,
    table,
)

from fedcausal_flwr.cli import launch, supervisor
from fedcausal_flwr.client_app import app as client_app
from fedcausal_flwr.dbn import app as dbn_app
from fedcausal_flwr.results import load_result
from fedcausal_flwr.testing import InProcessGrid

SCRIPT = script_name(__file__)
#: the App's default FDBNL run (synthetic SVAR, d = 10, 100 rows per client, seed 0)
FDBNL_RC: dict[str, Any] = {"algorithm": "fdbnl", "seed": 0}
#: FedIV's App defaults, a few rounds (the paper's "abs" scenario, 20,000 pooled rows)
FEDIV_RC: dict[str, Any] = {"algorithm": "fediv", "seed": 0}
PARTS = ("inprocess", "scan", "flwr")
RUNS = ("default", "fediv", "sampled", "actors", "busy")
#: the server's parts of a round (in-process), the strategy base's among them (goal 5)
PARTS_OF_ROUND = ("clients", "flower_records", "grid", "exchange_bookkeeping", "screens",
                  "algorithm", "evaluation", "checkpoint", "recorder", "refresh", "other")
BASE_PARTS = ("exchange_bookkeeping", "screens", "checkpoint", "recorder", "refresh")


# ----------------------------------------------------------------------------- in process
class _Nothing(list):
    """A list that keeps nothing (the in-process Grid's audit trail, not wanted here)."""

    def append(self, item: Any) -> None:  # noqa: D102
        pass


def timed(owner: Any, name: str, spent: dict[str, float], key: str | None = None) -> None:
    """Replace ``owner.name`` by a wrapper that adds its wall time to ``spent[key]``."""
    fn: Callable[..., Any] = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[key or name] += time.perf_counter() - t0

    setattr(owner, name, wrapper)


def inprocess_run(k: int, rounds: int, work: Path) -> dict[str, Any]:
    """``rounds`` FDBNL rounds at ``k`` clients in process; the round time by part."""
    rc = app_config("fdbnl", {**FDBNL_RC, "num-rounds": rounds, "node-wait-s": 5.0})
    strategy = dbn_app.strategy("fdbnl", rc)
    grid = InProcessGrid(client_app, k, rc)
    grid.sent, grid.received = _Nothing(), _Nothing()
    spent: dict[str, float] = defaultdict(float)
    timed(grid, "_deliver", spent, "clients")
    for name in ("push_messages", "pull_messages"):
        timed(grid, name, spent, "grid")
    for name in ("payload", "aggregate", "record"):
        timed(strategy, name, spent)
    for i, f in enumerate(strategy.reply_filters):  # the magnitude and Byzantine screens
        key = "flag" if getattr(f, "flags", False) else "screen"

        def screened(phase: str, replies: Any, f: Any = f, key: str = key) -> Any:
            t0 = time.perf_counter()
            try:
                return f(phase, replies)
            finally:
                spent[key] += time.perf_counter() - t0

        screened.flags = key == "flag"  # type: ignore[attr-defined]
        strategy.reply_filters[i] = screened
    timed(strategy, "evaluate_fn", spent, "evaluation")
    strategy.checkpoint = lambda res: res.checkpoint(work)
    timed(strategy, "checkpoint", spent)
    marks: dict[str, Any] = {}
    reset = strategy._reset

    def reset_timed(*a: Any, **kw: Any) -> None:  # start() builds the run's pieces: time them
        reset(*a, **kw)
        if strategy.channel is None:
            return
        for name in ("send", "run"):
            timed(strategy.channel, name, spent, f"exchange_{name}")
        timed(strategy.recorder, "close_round", spent)
        timed(strategy.roster, "refresh", spent)
        open_round, close_round = strategy.recorder.open_round, strategy.recorder.close_round

        def first_open() -> dict[str, Any]:
            if "t1" not in marks:  # discovery is over: count from here
                marks.update(t1=time.perf_counter(), before=dict(spent))
            return open_round()

        def closed(*a: Any, **kw: Any) -> None:
            close_round(*a, **kw)
            marks.update(t_end=time.perf_counter(), after=dict(spent))  # the end: last round

        strategy.recorder.open_round = first_open  # type: ignore[method-assign]
        strategy.recorder.close_round = closed  # type: ignore[method-assign]

    strategy._reset = reset_timed  # type: ignore[method-assign]
    t0 = time.perf_counter()
    with flower_records(spent, grid):
        result = strategy.start(grid=grid)
    s = {key: marks["after"].get(key, 0.0) - marks["before"].get(key, 0.0)
         for key in marks["after"]}
    s = defaultdict(float, s)
    total = marks["t_end"] - marks["t1"]
    parts = {
        "clients": s["clients"],
        "flower_records": s["records"],
        "grid": s["grid"] - s["clients"],
        "exchange_bookkeeping": (s["exchange_run"] - s["grid"] - s["records"] - s["screen"]
                                 - s["flag"]),
        "screens": s["screen"] + s["flag"],
        "algorithm": s["payload"] + s["aggregate"] + s["record"],
        "evaluation": s["evaluation"],
        "checkpoint": s["checkpoint"],
        "recorder": s["close_round"] - s["evaluation"] - s["checkpoint"],
        "refresh": s["refresh"],
    }
    parts["other"] = total - sum(parts.values())
    n = len(result.history)
    per_round = {key: v / n for key, v in parts.items()}
    non_client = (total - parts["clients"]) / n
    base = sum(per_round[p] for p in BASE_PARTS)
    return {"K": k, "rounds": n, "status": result.status, "discovery_s": marks["t1"] - t0,
            "round_s": total / n, "per_round": per_round, "non_client_s": non_client,
            "non_client_per_client_ms": 1e3 * non_client / k, "base_s": base,
            "base_fraction": base / (total / n),
            "base_per_client_ms": 1e3 * base / k}


@contextmanager
def flower_records(spent: dict[str, float], grid: InProcessGrid) -> Iterator[None]:
    """Time, as ``spent["records"]``, what the exchange spends in Flower's records on the
    server: building Messages and their ArrayRecord/ConfigRecord/RecordDict (the arrays'
    serialisation) and a reply's arrays back to numpy (not the clients' own)."""
    from flwr.app import ArrayRecord

    from fedcausal_flwr.federation import exchange

    names = ("Message", "ArrayRecord", "ConfigRecord", "RecordDict")
    saved = {n: getattr(exchange, n) for n in names}
    to_numpy = ArrayRecord.to_numpy_ndarrays
    inside = {"client": 0}

    def clocked(fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if inside["client"]:
                return fn(*args, **kwargs)
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent["records"] += time.perf_counter() - t0
        return wrapper

    deliver = grid._deliver

    def in_client(m: Any) -> None:
        inside["client"] += 1
        try:
            deliver(m)
        finally:
            inside["client"] -= 1

    for n in names:
        setattr(exchange, n, clocked(saved[n]))
    ArrayRecord.to_numpy_ndarrays = clocked(to_numpy)  # type: ignore[method-assign]
    grid._deliver = in_client  # type: ignore[method-assign]
    try:
        yield
    finally:
        for n in names:
            setattr(exchange, n, saved[n])
        ArrayRecord.to_numpy_ndarrays = to_numpy  # type: ignore[method-assign]
        grid._deliver = deliver  # type: ignore[method-assign]


# ----------------------------------------------------------------------------- flwr run
def _children() -> dict[int, list[int]]:
    out: dict[int, list[int]] = defaultdict(list)
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            out[ppid].append(int(proc.name))
    return out


def _kb(pid: int, field: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class Memory(threading.Thread):
    """Samples, every ``every`` s, the processes under the run's local SuperLink (found by
    port and FLWR_HOME, as the launcher finds it): the ``flwr-simulation`` process's peak RSS
    (VmHWM) and the largest sum of RSS over all of them."""

    def __init__(self, port: int, home: Path, every: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.port, self.home, self.every = port, home, every
        self.stop = threading.Event()
        self.simulation_kb = 0
        self.tree_kb = 0
        self.names: set[str] = set()

    def run(self) -> None:  # noqa: D102
        while not self.stop.wait(self.every):
            roots = supervisor._local_superlink_pids(self.port, self.home)
            if not roots:
                continue
            kids, seen, todo = _children(), set(), list(roots)
            while todo:
                pid = todo.pop()
                if pid not in seen:
                    seen.add(pid)
                    todo += kids.get(pid, [])
            total = 0
            for pid in seen:
                try:
                    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                except OSError:
                    continue
                name = " ".join(Path(a.decode(errors="replace")).name for a in argv[:2])
                self.names.add(name[:60])
                total += _kb(pid, "VmRSS")
                if any(Path(a.decode(errors="replace")).name == "flwr-simulation"
                       for a in argv[:2]):
                    self.simulation_kb = max(self.simulation_kb, _kb(pid, "VmHWM"))
            self.tree_kb = max(self.tree_kb, total)


@contextmanager
def busy_loops(n: int) -> Iterator[None]:
    """``n`` CPU-bound processes (``yes > /dev/null``) for the block's length, stopped by the
    PIDs started here."""
    yes = shutil.which("yes")
    cmd = [yes] if yes else [sys.executable, "-c", "while True: pass"]
    procs = [subprocess.Popen(cmd, stdout=subprocess.DEVNULL) for _ in range(n)]
    try:
        yield
    finally:
        for q in procs:
            q.kill()
            q.wait()


def flwr_run(label: str, k: int, rc: dict[str, Any], work: Path, timeout: float,
             actors: int | None = None, busy: int = 0) -> dict[str, Any]:
    """One ``launch.simulate`` run of ``rc`` at ``k`` SuperNodes (``busy`` CPU-bound loops
    beside it): times, rounds, memory."""
    algorithm = rc["algorithm"]
    port = launch.free_port_block(launch.SIMULATE_PORTS)
    home = (work / f"flwr-{label}").resolve()
    mem = Memory(port, home)
    mem.start()
    t0 = time.perf_counter()
    error = None
    try:
        with busy_loops(busy):
            launch.simulate(k, app_config(algorithm, {**rc, "outputs": str(work),
                                                      "run-name": label}),
                            flwr_home=home, timeout=timeout, port=port, ray_cpus=actors)
    except Exception as e:  # noqa: BLE001 - reported in the row
        error = f"{type(e).__name__}: {e}"
    wall = time.perf_counter() - t0
    mem.stop.set()
    mem.join()
    res = load_result(work / label)
    hist = res.get("history", [])
    secs = [float(h.get("seconds", 0.0)) for h in hist]
    strategy_s = float(res.get("timing", {}).get("wall_s", float("nan")))
    return {"label": label, "algorithm": algorithm, "K": k, "run_config": rc,
            "actors": actors, "busy": busy, "date": time.strftime("%Y-%m-%d"),
            "status": res.get("status"),
            "error": error, "flwr_wall_s": wall, "strategy_s": strategy_s,
            "rounds": len(hist), "before_round1_s": strategy_s - sum(secs),
            "s_per_round": float(np.mean(secs)) if secs else float("nan"),
            "s_per_round_last": float(np.mean(secs[-5:])) if secs else float("nan"),
            "clients_per_round": sorted({int(h.get("n_clients", -1)) for h in hist}),
            "sent_per_round": sorted({int(h.get("n_clients", 0)) + int(h.get("dropped", 0))
                                      for h in hist}),
            "dropped_per_round": [int(h.get("dropped", 0)) for h in hist],
            "flagged_per_round": [len(h.get("flagged", [])) for h in hist],
            "simulation_rss_mb": mem.simulation_kb / 1024, "tree_rss_mb": mem.tree_kb / 1024,
            "processes": sorted(mem.names),
            "metrics": {key: v for key, v in res.get("metrics", {}).items()
                        if isinstance(v, (int, float))}}


# ----------------------------------------------------------------------------- Flower's scan
def flower_scan(k: int) -> dict[str, Any]:
    """One pass of the Simulation Engine's message extractor over ``k`` nodes with ``k``
    messages stored (one per node), as in a round: the first pass hands every message out,
    the next ones only look (flwr 1.41 ``vce_api.add_messages_to_queue`` asks
    ``InMemoryLinkState.get_message_ins(node, limit=1)`` for every node every 0.1 s, and each
    call checks every stored message: O(K x messages stored) per pass)."""
    from flwr.app import ArrayRecord, ConfigRecord, Message, RecordDict
    from flwr.common.constant import SUPERLINK_NODE_ID
    from flwr.proto.task_pb2 import Task  # type: ignore[attr-defined]
    from flwr.server.superlink.fleet.vce import vce_api
    from flwr.server.superlink.linkstate import LinkStateFactory
    from flwr.server.superlink.linkstate.in_memory_linkstate import RunRecord
    from flwr.supercore.constant import FLWR_IN_MEMORY_DB_NAME, NOOP_FEDERATION_ID
    from flwr.supercore.object_store import ObjectStoreFactory
    from flwr.supercore.run import Run
    from flwr.supercore.task_identity import TaskIdentity
    from flwr.superlink.federation import NoOpFederationManager
    from flwr.superlink.grid import InMemoryGrid

    factory = LinkStateFactory(FLWR_IN_MEMORY_DB_NAME, NoOpFederationManager(),
                               ObjectStoreFactory())
    state = factory.state()
    run = Run.create_empty(run_id=12345)
    run.primary_task_id, run.federation_id = 678, NOOP_FEDERATION_ID
    TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = \
        1, run.run_id, SUPERLINK_NODE_ID
    state.run_ids[run.run_id] = RunRecord(run=run)
    state.task_store[678] = Task(task_id=678, run_id=run.run_id)
    nodes = vce_api._register_nodes(k, factory)
    grid = InMemoryGrid(state_factory=factory)
    grid.set_run(run)
    grid.push_messages([Message(RecordDict({"arrays": ArrayRecord([np.zeros((10, 10))]),
                                            "config": ConfigRecord({"round": 1})}),
                                dst_node_id=n, message_type="train.local", group_id="1")
                        for n in nodes])
    passes = []
    for _ in range(2):
        t0 = time.perf_counter()
        handed = sum(len(state.get_message_ins(node_id=n, limit=1)) for n in nodes)
        passes.append({"seconds": time.perf_counter() - t0, "handed_out": handed})
    return {"K": k, "first_pass_s": passes[0]["seconds"], "next_pass_s": passes[1]["seconds"],
            "handed_out": passes[0]["handed_out"],
            "us_per_node_and_message": 1e6 * passes[1]["seconds"] / (k * k)}


# ----------------------------------------------------------------------------- main
def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--clients", type=int, nargs="+", default=[5, 10, 100, 1000])
    ap.add_argument("--part", nargs="+", choices=PARTS, default=list(PARTS))
    ap.add_argument("--inprocess-rounds", type=int, default=10,
                    help="rounds of the in-process runs (5 at K >= 1000)")
    ap.add_argument("--fediv-rounds", type=int, default=3)
    ap.add_argument("--per-round", type=int, default=100,
                    help="clients-per-round of the sampled FDBNL run at the largest K")
    ap.add_argument("--per-round-rounds", type=int, default=10)
    ap.add_argument("--runs", nargs="+", choices=RUNS, default=list(RUNS),
                    help="flwr part: the default FDBNL run at each K, FedIV and the sampled "
                    "FDBNL run at the largest K (rows of runs not made now are kept)")
    ap.add_argument("--actors", type=int, nargs="+", default=[2, 1, 4],
                    help="runs 'actors': Ray actors (ClientApps at once: Ray's CPUs, 1 per "
                    "client) of short FDBNL runs at the largest K")
    ap.add_argument("--actor-rounds", type=int, default=5)
    ap.add_argument("--busy", type=int, default=2,
                    help="runs 'busy': CPU-bound loops beside the default FDBNL run at the "
                    "largest K (the issue's 'both cores busy': 2)")
    ap.add_argument("--timeout", type=float, default=1800)
    args = ap.parse_args()
    if args.quick:
        args.clients, args.inprocess_rounds, args.fediv_rounds = [5, 20], 3, 2
        args.per_round, args.per_round_rounds = 5, 3
    clock = Clock()
    big = max(args.clients)
    inproc: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    scans: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if "inprocess" in args.part:
            for k in args.clients:
                rounds = args.inprocess_rounds if k < 1000 else min(args.inprocess_rounds, 5)
                inproc.append(inprocess_run(k, rounds, work / f"inprocess-{k}"))
                r = inproc[-1]
                log(f"in process K={k:5d}: {r['round_s']:.3f} s/round, non-client "
                    f"{r['non_client_per_client_ms']:.3f} ms per client, base "
                    f"{100 * r['base_fraction']:.1f} % of a round")
        if "scan" in args.part:
            for k in args.clients:
                scans.append(flower_scan(k))
                log(f"Flower's extractor at K={k}: a pass with {k} messages stored takes "
                    f"{scans[-1]['next_pass_s']:.3f} s")
        if "flwr" in args.part:
            for k in args.clients if "default" in args.runs else []:
                runs.append(flwr_run(f"fdbnl-{k}", k, FDBNL_RC, work, args.timeout))
                log(f"flwr run FDBNL K={k}: {fmt_run(runs[-1])}")
            if "fediv" in args.runs:
                runs.append(flwr_run(f"fediv-{big}", big,
                                     {**FEDIV_RC, "iv-rounds": args.fediv_rounds}, work,
                                     args.timeout))
                log(f"flwr run FedIV K={big}: {fmt_run(runs[-1])}")
            if "sampled" in args.runs:
                runs.append(flwr_run(f"fdbnl-{big}-sampled", big,
                                     {**FDBNL_RC, "clients-per-round": args.per_round,
                                      "num-rounds": args.per_round_rounds}, work, args.timeout))
                log(f"flwr run FDBNL K={big}, {args.per_round} per round: {fmt_run(runs[-1])}")
            for n in args.actors if "actors" in args.runs else []:
                runs.append(flwr_run(f"fdbnl-{big}-actors{n}", big,
                                     {**FDBNL_RC, "num-rounds": args.actor_rounds}, work,
                                     args.timeout, actors=n))
                log(f"flwr run FDBNL K={big}, {n} Ray actors: {fmt_run(runs[-1])}")
            if "busy" in args.runs and args.busy:
                runs.append(flwr_run(f"fdbnl-{big}-busy{args.busy}", big, FDBNL_RC, work,
                                     args.timeout, busy=args.busy))
                log(f"flwr run FDBNL K={big}, {args.busy} busy loops: {fmt_run(runs[-1])}")
    kept = earlier_parts(args.out, args.part)
    inproc = inproc or kept.get("inprocess", [])
    scans = scans or kept.get("flower_scan", [])
    made = {r["label"] for r in runs}
    runs = [r for r in kept.get("flwr", []) if r["label"] not in made] + runs
    by_part = {**kept.get("settings_by_part", {}),
               **{p: settings(args) for p in args.part}}
    if inproc:
        log("\n" + table(["K", "rounds", "s/round", *PARTS_OF_ROUND, "non-client ms/client",
                          "base %"],
                         [[r["K"], r["rounds"], f"{r['round_s']:.3f}",
                           *(f"{r['per_round'][p]:.4f}" for p in PARTS_OF_ROUND),
                           f"{r['non_client_per_client_ms']:.3f}",
                           f"{100 * r['base_fraction']:.1f}"] for r in inproc]))
    if runs:
        log("\n" + table(["run", "K", "status", "flwr s", "before round 1 s", "rounds",
                          "s/round", "sim RSS MB", "tree RSS MB"],
                         [[r["label"], r["K"], r["status"], f"{r['flwr_wall_s']:.0f}",
                           f"{r['before_round1_s']:.1f}", r["rounds"], f"{r['s_per_round']:.2f}",
                           f"{r['simulation_rss_mb']:.0f}", f"{r['tree_rss_mb']:.0f}"]
                          for r in runs]))
    finish(SCRIPT, args, clock, acceptance(inproc, runs, big, args.per_round),
           f"many clients (K = {args.clients})",
           {"inprocess": inproc, "flower_scan": scans, "flwr": runs,
            "settings_by_part": by_part})


def earlier_parts(out: Path | None, run: list[str]) -> dict[str, Any]:
    """The parts an earlier results file holds that this call does not run (kept, with the
    settings they ran under), so the parts can run one at a time."""
    path = results_path(SCRIPT, out)
    if not path.exists():
        return {}
    doc = json.loads(path.read_text())
    keys = {"inprocess": "inprocess", "scan": "flower_scan", "flwr": "flwr"}
    kept = {keys[p]: doc.get(keys[p], []) for p in PARTS if p not in run}
    made = doc.get("meta", {}).get("finished", "?")[:10]  # rows of the runs not made now stay
    kept["flwr"] = [{"date": made, **x} for x in doc.get("flwr", [])]
    kept["settings_by_part"] = {p: v for p, v in doc.get("settings_by_part", {}).items()
                                if p not in run}
    return kept


def fmt_run(r: dict[str, Any]) -> str:
    """One line of a ``flwr run`` row."""
    return (f"{r['status']}, {r['flwr_wall_s']:.0f} s in all, {r['before_round1_s']:.1f} s "
            f"before round 1, {r['rounds']} rounds at {r['s_per_round']:.2f} s, "
            f"flwr-simulation peak RSS {r['simulation_rss_mb']:.0f} MB")


def acceptance(inproc: list[dict[str, Any]], runs: list[dict[str, Any]], big: int,
               per_round: int) -> dict[str, str]:
    """Issue 23's goals as checks."""
    out: dict[str, str] = {}
    by_k = {r["K"]: r for r in inproc}
    small = [k for k in by_k if k >= 100 and k < big]
    if big in by_k and small:
        ref = by_k[max(small)]
        out[f"non-client cost per client at K={big} within 2x of K={max(small)}'s (linear)"] = \
            check(by_k[big]["non_client_per_client_ms"] <= 2 * ref["non_client_per_client_ms"])
    fd = {r["K"]: r for r in runs if r["label"] == f"fdbnl-{r['K']}"}
    if big in fd:
        out[f"default FDBNL run at K={big} completes within 15 minutes of flwr run"] = check(
            fd[big]["status"] == "completed" and fd[big]["flwr_wall_s"] <= 900)
    for r in runs:
        if r.get("busy"):
            out[f"default FDBNL run at K={r['K']} with {r['busy']} busy loops completes within "
                f"15 minutes of flwr run"] = check(r["status"] == "completed"
                                                   and r["flwr_wall_s"] <= 900)
        if r["label"].startswith("fediv"):
            out[f"FedIV at K={r['K']} completes"] = check(r["status"] == "completed")
        if r["label"].endswith("sampled"):
            out[f"clients-per-round {per_round} at K={r['K']}: every round sends {per_round}"] \
                = check(r["status"] == "completed"
                        and r.get("sent_per_round", r["clients_per_round"]) == [per_round])
    return out


# ----------------------------------------------------------------------------- tables
def table_many_clients_inprocess() -> str:
    """The round's parts in process, per K (seconds per round)."""
    r = read_results(SCRIPT)
    rows = [[x["K"], x["rounds"], f"{x['round_s']:.3f}",
             *(f"{x['per_round'][p]:.4f}" for p in PARTS_OF_ROUND),
             f"{x['non_client_per_client_ms']:.3f}", f"{x['base_per_client_ms']:.3f}",
             f"{100 * x['base_fraction']:.1f} %"] for x in r["inprocess"]]
    return markdown(["K", "rounds", "s/round", *(p.replace("_", " ") for p in PARTS_OF_ROUND),
                     "non-client ms per client", "base ms per client", "base / round"], rows)


def table_many_clients_flwr() -> str:
    """``flwr run`` (Ray) runs per K: wall, discovery, rounds, memory."""
    r = read_results(SCRIPT)
    rows = [[x["label"], x["K"], x["status"], f"{x['flwr_wall_s']:.0f}",
             f"{x['before_round1_s']:.1f}", x["rounds"], f"{x['s_per_round']:.2f}",
             f"{1e3 * x['s_per_round'] / (x.get('sent_per_round') or [x['K']])[0]:.1f}",
             f"{x['simulation_rss_mb']:.0f}", f"{x['tree_rss_mb']:.0f}",
             x.get("busy", 0), x.get("date", r["meta"]["finished"][:10])] for x in r["flwr"]]
    return markdown(["run", "K", "status", "`flwr run` s", "before round 1 s", "rounds",
                     "s/round", "ms/round per client sent", "flwr-simulation peak RSS MB",
                     "all processes RSS MB", "busy loops beside", "measured"], rows)


def table_many_clients_scan() -> str:
    """Flower's message extractor: one pass over K nodes with K messages stored."""
    r = read_results(SCRIPT)
    rows = [[x["K"], f"{x['first_pass_s']:.4f}", f"{x['next_pass_s']:.4f}",
             f"{x['us_per_node_and_message']:.1f}"] for x in r["flower_scan"]]
    return markdown(["K", "first pass s (hands out K)", "next pass s (hands out 0)",
                     "us per node and stored message"], rows)


#: this script's tables in RESULTS.md (``<!-- table:NAME -->``)
TABLES = {"many_clients_inprocess": table_many_clients_inprocess,
          "many_clients_flwr": table_many_clients_flwr,
          "many_clients_scan": table_many_clients_scan}


if __name__ == "__main__":
    main()
