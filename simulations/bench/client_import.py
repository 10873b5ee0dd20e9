"""What a ClientApp process imports, and what that costs, per algorithm (issues 36, 37).

A SuperNode starts a new ``flwr-clientapp`` process for every message; each one imports the
App's ``fedcausal_flwr.client_app`` and what the client path pulls in before it computes
anything. This script measures that start-up, per algorithm, as CPU seconds (user + system,
``resource.getrusage`` of the child, median of ``--repeats`` runs) beyond Flower's own:

* ``flower``: ``import flwr.supernode.cli, flwr.clientapp, flwr.app`` (what the
  ``flwr-clientapp`` entry point loads before it loads an App), and ``flower_clientapp``:
  ``import flwr.clientapp`` alone (the smaller floor the issue names);
* ``static``: Flower's, then ``fedcausal_flwr.client_app`` and the algorithm's App glue and
  client module (``registry.get(a).app()``, ``.client_class()``);
* ``process``: Flower's, then every module a real client process loaded while it answered a
  whole run. Each node of an in-process run (the case of ``fingerprint.py``) is a child
  process that answers its messages through ``fedcausal_flwr.client_app.app``, messages and
  context crossing as Flower's protobuf, as a SuperNode's ``flwr-clientapp`` gets them; the
  child reports the modules it loaded beyond Flower's, and a fresh interpreter imports exactly
  those (in their order) under the clock. Modules a client imports only inside a computation
  (``scipy.special`` in a test, ``phe`` for the keys) are counted here.

It also lists the heavy packages each client process loaded (sklearn, pandas, matplotlib,
networkx, torch, phe, scipy.stats ...) and the largest imports by ``python -X importtime``.

    python simulations/bench/client_import.py [--repeats 5] [--algorithms fdbnl,fedgc]
    python simulations/bench/client_import.py --label before --out /tmp/before.json
    python simulations/bench/client_import.py --before /tmp/before.json   # both in the table
"""

from __future__ import annotations

import json
import os
import re
import resource
import statistics
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import _sims  # noqa: F401 - simulations/ on sys.path
from harness import Clock, check, finish, log, markdown, parser, read_results, script_name, table

SCRIPT = script_name(__file__)
ROOT = Path(__file__).resolve().parents[2]

#: what Flower's ``flwr-clientapp`` process has imported before it loads the App
FLOWER = "import flwr.supernode.cli, flwr.clientapp, flwr.app"
#: the floor the issue names: Flower's ClientApp module alone
FLOWER_CLIENTAPP = "import flwr.clientapp"
#: algorithm -> fingerprint.py's case its client processes answer (VFedCD: real Paillier keys,
#: 256 bits, so the client path loads phe as a deployment's does)
RUNS = {"fdbnl": "fdbnl", "pfdbnl": "pfdbnl", "fedgc": "fedgc", "fedcf": "fedcf",
        "fediv": "fediv", "vfedcd": "vfedcd-paillier", "fedpc": "fedpc",
        "fedtrees": "fedtrees"}
#: the packages no client process may load unless its family computes with them
HEAVY = ("sklearn", "pandas", "matplotlib", "networkx", "torch", "phe", "gmpy2",
         "scipy.stats", "scipy.io", "causallearn", "tigramite", "statsmodels", "PIL")
#: what each family's client computes with (the only heavy packages it may load); FedTrees'
#: scikit-learn itself imports scipy.stats and, where it is installed, pandas
ALLOWED = {"fediv": {"torch"}, "vfedcd": {"phe", "gmpy2", "scipy.stats"},
           "fedtrees": {"sklearn", "pandas", "scipy.stats"}}
TARGET_S = 0.5

CHILD = r"""
import os, struct, sys, traceback
OUT = os.fdopen(os.dup(1), "wb"); os.dup2(2, 1)  # frames on the saved stdout, logs to stderr
IN = sys.stdin.buffer
{flower}
before = set(sys.modules)
from flwr.app import Error, Message
from flwr.common.serde import context_from_proto, message_from_proto, message_to_proto
from flwr.proto.message_pb2 import Context as PC, Message as PM
from flwr.supercore.task_identity import TaskIdentity
flwr_loaded = set(sys.modules)  # the protocol's own imports are Flower's too
from fedcausal_flwr.client_app import app

def read():
    head = IN.read(5)
    kind, n = head[:1], struct.unpack("<I", head[1:])[0]
    return kind, IN.read(n)

def write(kind, data):
    OUT.write(kind + struct.pack("<I", len(data)) + data); OUT.flush()

context = None
while True:
    kind, data = read()
    if kind == b"C":
        p = PC(); p.ParseFromString(data); context = context_from_proto(p)
        TaskIdentity.task_id, TaskIdentity.run_id = 1, context.run_id
        TaskIdentity.node_id = context.node_id
    elif kind == b"M":
        p = PM(); p.ParseFromString(data); msg = message_from_proto(p)
        try:
            r = app(msg, context)
        except Exception:
            r = Message(Error(code=0, reason=traceback.format_exc()), reply_to=msg)
        write(b"R", message_to_proto(r).SerializeToString())
    else:
        mods = [m for m in sys.modules if m not in flwr_loaded]
        write(b"Q", "\n".join(mods).encode()); break
"""

TIMED = r"""
import importlib, sys
{flower}
for name in {modules!r}:
    if name in sys.modules:
        continue
    try:
        importlib.import_module(name)
    except Exception:  # a module registered under another name (an alias): its package
        pass           # imported it already
"""


class ChildNode:
    """One node's client process: answers its messages through the App's ClientApp."""

    def __init__(self) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(ROOT), os.environ.get("PYTHONPATH", "")])}
        self.proc = subprocess.Popen([sys.executable, "-c", CHILD.format(flower=FLOWER)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                                     cwd=ROOT)
        self.has_context = False

    def _send(self, kind: bytes, data: bytes) -> None:
        self.proc.stdin.write(kind + struct.pack("<I", len(data)) + data)
        self.proc.stdin.flush()

    def _read(self) -> tuple[bytes, bytes]:
        head = self.proc.stdout.read(5)
        if len(head) < 5:
            raise RuntimeError(f"client process died (rc {self.proc.wait()})")
        return head[:1], self.proc.stdout.read(struct.unpack("<I", head[1:])[0])

    def __call__(self, msg: Any, context: Any) -> Any:
        from flwr.common.serde import context_to_proto, message_from_proto, message_to_proto
        from flwr.proto.message_pb2 import Message as PM

        if not self.has_context:
            self._send(b"C", context_to_proto(context).SerializeToString())
            self.has_context = True
        self._send(b"M", message_to_proto(msg).SerializeToString())
        _, data = self._read()
        p = PM()
        p.ParseFromString(data)
        return message_from_proto(p)

    def modules(self) -> list[str]:
        """The modules the process loaded beyond Flower's (in load order); ends it."""
        self._send(b"Q", b"")
        _, data = self._read()
        self.proc.stdin.close()
        self.proc.wait(timeout=60)
        return data.decode().split("\n") if data else []


def client_processes(algorithm: str) -> tuple[str, list[str], list[list[str]]]:
    """Run ``algorithm``'s case with every node a client process; ``(status, union of the
    modules they loaded in order, each node's list)``."""
    import fingerprint

    from fedcausal_flwr import server_app
    from fedcausal_flwr.testing import InProcessGrid

    overrides, k = fingerprint.CASES[RUNS[algorithm]]
    nodes: dict[int, ChildNode] = {}

    def client_app(msg: Any, context: Any) -> Any:
        pid = int(context.node_config["partition-id"])
        if pid not in nodes:
            nodes[pid] = ChildNode()
        return nodes[pid](msg, context)

    from fedcausal_flwr.appconfig import OUTPUTS_ROOT_ENV

    os.environ.setdefault(OUTPUTS_ROOT_ENV, tempfile.gettempdir())  # the operator's root
    with tempfile.TemporaryDirectory() as tmp:
        rc = {**fingerprint.app_config(), **overrides, "outputs": tmp, "run-name": algorithm}
        server_app.run(InProcessGrid(client_app, k, rc), rc)
        status = json.loads((Path(tmp) / algorithm / "result.json").read_text())["status"]
    per_node = [nodes[p].modules() for p in sorted(nodes)]
    union: dict[str, None] = {}
    for mods in per_node:
        union.update(dict.fromkeys(mods))
    return status, list(union), per_node


def cpu_seconds(code: str, repeats: int) -> list[float]:
    """CPU seconds (user + system) of ``python -c code``, each of ``repeats`` fresh runs."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), os.environ.get("PYTHONPATH", "")])}
    out = []
    for _ in range(repeats):
        a = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=ROOT,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        b = resource.getrusage(resource.RUSAGE_CHILDREN)
        out.append(b.ru_utime + b.ru_stime - a.ru_utime - a.ru_stime)
    return out


def static_code(algorithm: str) -> str:
    """Flower's imports, then the App's ClientApp module and ``algorithm``'s client path."""
    return (f"{FLOWER}\nimport fedcausal_flwr.client_app\nfrom fedcausal_flwr import registry\n"
            f"a = registry.get({algorithm!r}); a.app(); a.client_class()")


def group(module: str) -> str:
    """The package an import is counted under: ``scipy.stats._stats_py`` -> ``scipy.stats``,
    ``sklearn.metrics`` -> ``sklearn``."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] in ("scipy", "fedcausal_flwr") else parts[0]


def importtime(code: str, top: int = 8) -> list[dict[str, Any]]:
    """The packages that cost most in ``code`` beyond Flower's imports: each module's own
    import time (``-X importtime``, self) summed per :func:`group`."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), os.environ.get("PYTHONPATH", "")])}
    err = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True,
                         text=True, env=env, cwd=ROOT, check=True).stderr
    lines = [re.match(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)", x)
             for x in err.splitlines()]
    flower = len(importtime_floor(env))
    sums: dict[str, float] = {}
    for m in [m for m in lines if m][flower:]:
        sums[group(m[4])] = sums.get(group(m[4]), 0.0) + int(m[1]) / 1e6
    return [{"package": k, "self_s": round(v, 4)}
            for k, v in sorted(sums.items(), key=lambda kv: -kv[1])[:top]]


def importtime_floor(env: dict[str, str]) -> list[str]:
    """The ``-X importtime`` lines of Flower's imports alone (the first lines of any code
    that starts with :data:`FLOWER`)."""
    err = subprocess.run([sys.executable, "-X", "importtime", "-c", FLOWER], capture_output=True,
                         text=True, env=env, cwd=ROOT, check=True).stderr
    return [x for x in err.splitlines() if x.startswith("import time:") and "|" in x
            and not x.rstrip().endswith("cumulative | imported package")]


def heavy(modules: list[str]) -> list[str]:
    """The :data:`HEAVY` packages among ``modules``."""
    loaded = set(modules)
    return [h for h in HEAVY if h in loaded]


def measure(algorithms: list[str], repeats: int) -> dict[str, Any]:
    """Every measurement of the docstring, per algorithm."""
    flower = cpu_seconds(FLOWER, repeats)
    flower_clientapp = cpu_seconds(FLOWER_CLIENTAPP, repeats)
    f, fc = statistics.median(flower), statistics.median(flower_clientapp)
    log(f"Flower's ClientApp process: {f:.3f} CPU s ({FLOWER}); flwr.clientapp alone "
        f"{fc:.3f} CPU s")
    rows = []
    for a in algorithms:
        status, modules, per_node = client_processes(a)
        static = cpu_seconds(static_code(a), repeats)
        process = cpu_seconds(TIMED.format(flower=FLOWER, modules=modules), repeats)
        s, p = statistics.median(static), statistics.median(process)
        row = {"algorithm": a, "case": RUNS[a], "run_status": status,
               "static_cpu_s": static, "process_cpu_s": process,
               "static_beyond_flower_s": s - f, "process_beyond_flower_s": p - f,
               "process_beyond_flwr_clientapp_s": p - fc,
               "modules": len(modules), "nodes": len(per_node),
               "heavy": heavy(modules),
               "forbidden": [h for h in heavy(modules) if h not in ALLOWED.get(a, set())
                             and not any(h.startswith(x) for x in ALLOWED.get(a, set()))],
               "largest_imports": importtime(TIMED.format(flower=FLOWER, modules=modules))}
        rows.append(row)
        log(f"{a:7s} static {s - f:6.3f} s, process {p - f:6.3f} s beyond Flower "
            f"({len(modules)} modules; heavy: {', '.join(row['heavy']) or 'none'}; run {status})")
    return {"flower_cpu_s": flower, "flower_clientapp_cpu_s": flower_clientapp, "rows": rows}


def table_rows(doc: dict[str, Any], before: dict[str, Any] | None) -> list[list[Any]]:
    """One row per algorithm: before / after CPU s beyond Flower, what it loads."""
    prev = {r["algorithm"]: r for r in (before or {}).get("rows", [])}
    out = []
    for r in doc["rows"]:
        b = prev.get(r["algorithm"])
        out.append([r["algorithm"],
                    f"{b['static_beyond_flower_s']:.2f}" if b else "-",
                    f"{r['static_beyond_flower_s']:.2f}",
                    f"{b['process_beyond_flower_s']:.2f}" if b else "-",
                    f"{r['process_beyond_flower_s']:.2f}",
                    ", ".join(b["heavy"]) if b else "-",
                    ", ".join(r["heavy"]) or "none"])
    return out


HEADERS = ["algorithm", "static before (CPU s)", "static after", "client process before",
           "client process after", "heavy packages before", "heavy packages after"]


def client_import_table() -> str:
    """RESULTS.md's table: each algorithm's ClientApp start-up beyond Flower's, before/after."""
    doc = read_results(SCRIPT)
    flower = statistics.median(doc["after"]["flower_cpu_s"])
    return (markdown(HEADERS, table_rows(doc["after"], doc.get("before")))
            + f"\nFlower's own ClientApp process (`{FLOWER}`): {flower:.2f} CPU s; medians of "
            f"{doc['settings']['repeats']} runs; \"static\": the App's ClientApp module and the "
            "algorithm's glue and client module; \"client process\": every module a node's "
            "client process loaded answering a whole run.\n")


TABLES = {"client_import": client_import_table}


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--algorithms", default=",".join(RUNS))
    ap.add_argument("--label", default="after", choices=("before", "after"),
                    help="which side of the change this run measures")
    ap.add_argument("--before", type=Path, help="a --label before run's JSON, kept beside")
    args = ap.parse_args()
    if args.quick:
        args.repeats = 1
    clock = Clock()
    doc = measure(args.algorithms.split(","), args.repeats)
    before = json.loads(args.before.read_text())["before"] if args.before else None
    log("\n" + table(HEADERS, table_rows(doc, before)))
    checks = {}
    if args.label == "after":
        checks = {
            f"every algorithm's client process within {TARGET_S} CPU s of Flower's":
                check(all(r["process_beyond_flower_s"] <= TARGET_S for r in doc["rows"])),
            "no client process loads another family's or the server's packages":
                check(not any(r["forbidden"] for r in doc["rows"])),
            "every run with client processes completed":
                check(all(r["run_status"] == "completed" for r in doc["rows"])),
        }
    payload = {args.label: doc, **({"before": before} if before else {}),
               "target_s": TARGET_S}
    finish(SCRIPT, args, clock, checks, "ClientApp process start-up beyond Flower's", payload)


if __name__ == "__main__":
    main()
