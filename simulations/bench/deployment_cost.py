"""What each algorithm's default App run costs in a real deployment (issue 12, "measure first").

In a loopback deployment every exchange costs seconds whatever its size (a SuperNode sleeps 3 s
after each pull that finds no message and starts a process per message), so the unit of cost
is the round trip. For every algorithm, with the App's defaults (``pyproject.toml``) and the
built-in data:

* in process (:class:`~fedcausal_flwr.testing.InProcessGrid`, the reference of every Flower
  path): the full default run's exchanges, bytes, wall time and accuracy (VFedCD with the mock
  backend: the same messages and estimates as its real keys, without the cryptography);
* a loopback deployment (TLS + SuperNode authentication, :func:`launch.deploy`) and ``flwr run``
  (Ray, :func:`launch.simulate`) of the same defaults bounded to ``--rounds`` rounds (VFedCD:
  one epoch of one mini-batch step, mock backend): seconds per exchange (the rounds' seconds
  over their exchanges), start-up (the rest of the wall time) and the largest difference of
  their estimates from the in-process run with the same bound (0 expected);
* Flower's own floor: a trivial App that sends one float64 array to each node per exchange;
* ``--full ALG ...``: the whole default run of those algorithms in the deployment and under
  ``flwr run`` (status, wall time, largest difference from the in-process run);
* ``--vfedcd-real-epochs N``: the VFedCD default with its real keys deployed for N epochs
  (cryptography included), projected to the default epochs.

The projected deployment time of the full default run is its exchanges times the deployment's
seconds per exchange, plus start-up.

    python simulations/bench/deployment_cost.py [--algorithms fdbnl fedgc ...] [--rounds 3]
        [--skip-full fediv] [--trivial 10] [--full fdbnl fedgc ...] [--vfedcd-real-epochs 1]
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import _sims  # noqa: F401 - simulations/ on sys.path
import numpy as np
from harness import Clock, app_config, finish, log, parser, table, write_results

from fedcausal_flwr.appconfig import glue, view
from fedcausal_flwr.cli import launch
from fedcausal_flwr.client_app import app as client_app
from fedcausal_flwr.results import RunResult, load_result
from fedcausal_flwr.testing import InProcessGrid

NODES = {"fdbnl": 5, "pfdbnl": 5, "fedgc": 2, "fedcf": 2, "fediv": 2, "vfedcd": 3}
#: the deployment's bound per algorithm (VFedCD: one mini-batch step of one epoch, mock keys)
VFEDCD_BOUND = {"vertical.num-epochs": 1, "vertical.batch": 100_000,
                "vertical.he-backend": "mock", "vertical.insecure-test-keys": True,
                "vertical.vfedcd-accept-backends": "mock"}
#: VFedCD's mock backend and the parties' consent to it (the App's sectioned keys)
VFEDCD_MOCK = {"vertical.he-backend": "mock", "vertical.insecure-test-keys": True,
               "vertical.vfedcd-accept-backends": "mock"}

TRIVIAL_SERVER = '''
import time
import numpy as np
from flwr.app import ArrayRecord, Context, Message, RecordDict
from flwr.serverapp import Grid, ServerApp

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    n = int(context.run_config["exchanges"])
    while len(nodes := list(grid.get_node_ids())) < int(context.run_config["nodes"]):
        time.sleep(0.2)
    t0, times = time.time(), []
    for _ in range(n):
        t = time.time()
        msgs = [Message(RecordDict({"a": ArrayRecord([np.zeros(10)])}), dst_node_id=i,
                        message_type="train") for i in nodes]
        list(grid.send_and_receive(msgs))
        times.append(time.time() - t)
    with open(context.run_config["out"], "w") as f:
        f.write(" ".join(f"{x:.4f}" for x in times))
'''
TRIVIAL_CLIENT = '''
from flwr.app import Context, Message
from flwr.clientapp import ClientApp

app = ClientApp()


@app.train()
def train(msg: Message, context: Context) -> Message:
    return Message(msg.content, reply_to=msg)
'''
TRIVIAL_TOML = '''
[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "trivial"
version = "0.1.0"
dependencies = []

[tool.hatch.build.targets.wheel]
packages = ["."]

[tool.flwr.app]
publisher = "fedcausal-bench"

[tool.flwr.app.components]
serverapp = "server_app:app"
clientapp = "client_app:app"

[tool.flwr.app.config]
exchanges = 10
nodes = 2
out = "times.txt"
'''


def bounded(algorithm: str, rounds: int) -> dict[str, Any]:
    """The App's default run config of ``algorithm`` bounded for a deployment (FedGC/FedCF:
    one epoch; their App run has no round bound)."""
    rc: dict[str, Any] = {"algorithm": algorithm, "node-wait-s": 120.0}
    if algorithm == "vfedcd":
        return {**rc, **VFEDCD_BOUND}
    if algorithm in ("fedgc", "fedcf"):
        return {**rc, **app_config(algorithm, {"ss-epochs": 1})}
    return {**rc, **app_config(algorithm, {"iv-rounds" if algorithm == "fediv" else
                                           "num-rounds": rounds})}


def in_process(algorithm: str, rc: dict[str, Any], k: int) -> RunResult:
    """One run of the App's strategy and ClientApp on the in-process grid."""
    full = {**launch_defaults(), **rc}
    strategy = glue(algorithm).strategy(algorithm, view(algorithm, full))
    return strategy.start(grid=InProcessGrid(client_app, k, full))


def launch_defaults() -> dict[str, Any]:
    """The App's [tool.flwr.app.config] (what flwr run merges under a run config)."""
    import tomllib

    from flwr.common.config import flatten_dict

    doc = tomllib.loads((Path(launch.find_app_dir(None)) / "pyproject.toml").read_text())
    return flatten_dict(doc["tool"]["flwr"]["app"]["config"])


def per_exchange(result: dict[str, Any]) -> tuple[float, int]:
    """(seconds per exchange over the recorded rounds, their exchanges)."""
    ex = sum(int(h.get("exchanges", 0)) for h in result["history"])
    secs = sum(float(h.get("seconds", 0.0)) for h in result["history"])
    return (secs / ex if ex else float("nan")), ex


def flat(x: Any) -> np.ndarray:
    """An estimate (an array, or a list of arrays such as FedIV's parameters) as one vector."""
    if isinstance(x, (list, tuple)) and x and not np.isscalar(x[0]):
        return np.concatenate([flat(v) for v in x]) if x else np.zeros(0)
    return np.asarray(x, dtype=float).ravel()


def largest_difference(a: dict[str, Any], b: RunResult) -> float:
    """max |a - b| over the estimates both hold (nan when none)."""
    keys = set(a["estimates"]) & set(b.estimates)
    diffs = [np.max(np.abs(flat(a["estimates"][k]) - flat(b.estimates[k])))
             for k in keys if flat(b.estimates[k]).size]
    return float(max(diffs)) if diffs else float("nan")


def on_flower(algorithm: str, path: str, rc: dict[str, Any], ref: RunResult, work: Path,
              tag: str) -> dict[str, Any]:
    """One run of ``rc`` in a loopback deployment (``path="deploy"``) or under flwr run, its
    status, wall time, seconds per exchange, start-up and largest difference from ``ref``."""
    k, name = NODES[algorithm], f"{algorithm}-{tag}{path}"
    cfg = {**rc, "outputs": str(work), "run-name": name}
    t0 = time.perf_counter()
    if path == "deploy":
        launch.deploy(k, cfg, workdir=work / f"{name}-deployment", timeout=3600)
    else:
        launch.simulate(k, cfg, flwr_home=work / f"{name}-flwr", timeout=3600)
    wall = time.perf_counter() - t0
    res = load_result(work / name)
    sec, ex = per_exchange(res)
    out = {"status": res["status"], "wall_s": wall, "s_per_exchange": sec, "exchanges": ex,
           "startup_s": wall - sec * ex, "max_diff": largest_difference(res, ref)}
    log(f"{algorithm} {tag}{path}: {res['status']}, {wall:.0f}s wall, {ex} exchanges, "
        f"{sec:.2f}s each, max diff {out['max_diff']:.2e}")
    return out


def flower_paths(algorithm: str, rounds: int, work: Path) -> dict[str, Any]:
    """Bounded run in a loopback deployment and under flwr run, beside the in-process one."""
    rc = bounded(algorithm, rounds)
    ref = in_process(algorithm, rc, NODES[algorithm])
    return {"bounded_exchanges": ref.timing.get("exchanges"),
            **{p: on_flower(algorithm, p, rc, ref, work, "") for p in ("deploy", "simulate")}}


def full_flower(algorithm: str, ref: RunResult, work: Path) -> dict[str, Any]:
    """The full default run in a loopback deployment and under flwr run, beside ``ref``."""
    rc = {"algorithm": algorithm, "node-wait-s": 120.0}
    return {p: on_flower(algorithm, p, rc, ref, work, "full-") for p in ("deploy", "simulate")}


def full_default(algorithm: str) -> tuple[dict[str, Any], RunResult]:
    """The full default run in process (VFedCD: with the mock backend, the same messages and
    estimates as its real keys without the cryptography)."""
    rc: dict[str, Any] = {"algorithm": algorithm}
    if algorithm == "vfedcd":
        rc = {**rc, **VFEDCD_MOCK}
    t0 = time.perf_counter()
    res = in_process(algorithm, rc, NODES[algorithm])
    wall = time.perf_counter() - t0
    up = sum(int(h.get("bytes_up", 0)) for h in res.history)
    down = sum(int(h.get("bytes_down", 0)) for h in res.history)
    acc = {m: res.metrics[m] for m in ("shd_w", "shd_a", "tpr_w", "err_A21", "norm_A12",
                                       "cf_error_21", "test_mse", "shd", "f1")
           if m in res.metrics}
    return {"status": res.status, "rounds": len(res.history),
            "exchanges": int(res.timing.get("exchanges", 0)), "bytes": up + down,
            "wall_s": wall, "accuracy": acc}, res


def vfedcd_real_keys(epochs: int, work: Path) -> dict[str, Any]:
    """The VFedCD default (real 2048-bit keys) deployed for ``epochs`` epochs, beside the same
    run in process with the mock backend (the same share arithmetic, so the same estimates)."""
    rc: dict[str, Any] = {"algorithm": "vfedcd", "vertical.num-epochs": epochs,
                          "node-wait-s": 120.0}
    ref = in_process("vfedcd", {**rc, **VFEDCD_MOCK}, NODES["vfedcd"])
    cfg = {**rc, "outputs": str(work), "run-name": "vfedcd-real-deploy"}
    t0 = time.perf_counter()
    launch.deploy(NODES["vfedcd"], cfg, workdir=work / "vfedcd-real-deployment", timeout=7200)
    wall = time.perf_counter() - t0
    res = load_result(work / "vfedcd-real-deploy")
    epoch_s = [float(h.get("seconds", 0.0)) for h in res["history"]]
    default_epochs = int(launch_defaults()["vertical.num-epochs"])
    out = {"status": res["status"], "epochs": epochs, "wall_s": wall,
           "exchanges": per_exchange(res)[1], "s_per_epoch": float(np.mean(epoch_s)),
           "startup_s": wall - sum(epoch_s), "default_epochs": default_epochs,
           "projected_default_h": (wall - sum(epoch_s)
                                   + float(np.mean(epoch_s)) * default_epochs) / 3600,
           "max_diff": largest_difference(res, ref)}
    log(f"vfedcd real keys deployed: {out}")
    return out


def trivial_floor(exchanges: int, work: Path) -> dict[str, Any]:
    """Flower's own per-exchange cost: one float64[10] to each of 2 nodes and back."""
    app = work / "trivial"
    app.mkdir(parents=True, exist_ok=True)
    (app / "pyproject.toml").write_text(TRIVIAL_TOML)
    (app / "server_app.py").write_text(TRIVIAL_SERVER)
    (app / "client_app.py").write_text(TRIVIAL_CLIENT)
    out = {}
    for path in ("deploy", "simulate"):
        times = work / f"trivial-{path}.txt"
        cfg = {"exchanges": exchanges, "nodes": 2, "out": str(times)}
        t0 = time.perf_counter()
        if path == "deploy":
            launch.deploy(2, cfg, app_dir=app, workdir=work / "trivial-deployment",
                          timeout=1800)
        else:
            launch.simulate(2, cfg, app_dir=app, flwr_home=work / "trivial-flwr",
                            timeout=1800)
        wall = time.perf_counter() - t0
        t = [float(x) for x in times.read_text().split()]
        out[path] = {"wall_s": wall, "s_per_exchange": float(np.median(t)),
                     "startup_s": wall - sum(t)}
        log(f"trivial {path}: {np.median(t):.2f}s per exchange (median of {len(t)}), "
            f"{wall - sum(t):.0f}s start-up")
    return out


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--algorithms", nargs="+", default=list(NODES))
    ap.add_argument("--rounds", type=int, default=3, help="rounds of the bounded runs")
    ap.add_argument("--skip-full", nargs="*", default=[],
                    help="algorithms whose full default run is not run in process")
    ap.add_argument("--trivial", type=int, default=10, help="exchanges of the trivial App")
    ap.add_argument("--full", nargs="*", default=[],
                    help="algorithms whose full default run also runs in a loopback "
                         "deployment and under flwr run (not vfedcd)")
    ap.add_argument("--vfedcd-real-epochs", type=int, default=0,
                    help="deploy the VFedCD default with its real keys for this many epochs")
    args = ap.parse_args()
    clock = Clock()
    rows, out = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        floor = trivial_floor(args.trivial, work) if args.trivial else {}
        for alg in args.algorithms:
            rec = {"nodes": NODES[alg], **flower_paths(alg, args.rounds, work)}
            if alg not in args.skip_full:
                rec["full"], ref = full_default(alg)
                log(f"{alg} full default in process: {rec['full']}")
                if alg in args.full and alg != "vfedcd":
                    rec["full_flower"] = full_flower(alg, ref, work)
            out[alg] = rec
            if alg == "vfedcd" and args.vfedcd_real_epochs:
                rec["real_keys"] = vfedcd_real_keys(args.vfedcd_real_epochs, work)
            write_results("deployment_cost", {"partial": True, "floor": floor,
                                              "algorithms": out}, args.out)
            full = rec.get("full", {})
            dep = rec["deploy"]
            proj = (full["exchanges"] * dep["s_per_exchange"] + dep["startup_s"]) if full \
                else float("nan")
            rows.append([alg, rec["nodes"], full.get("exchanges", "-"),
                         f"{full['wall_s']:.0f}" if full else "-",
                         f"{dep['s_per_exchange']:.2f}", f"{dep['startup_s']:.0f}",
                         f"{rec['simulate']['s_per_exchange']:.2f}",
                         f"{rec['simulate']['startup_s']:.0f}", f"{proj / 60:.1f}",
                         f"{max(dep['max_diff'], rec['simulate']['max_diff']):.1e}"])
    headers = ["algorithm", "nodes", "default exchanges", "in-process s", "deploy s/exch",
               "deploy start-up s", "flwr run s/exch", "flwr run start-up s",
               "projected deploy min", "max |est - in-process|"]
    print(table(headers, rows))
    if floor:
        print(f"Flower floor (trivial App, 2 nodes): deployment "
              f"{floor['deploy']['s_per_exchange']:.2f} s per exchange, flwr run "
              f"{floor['simulate']['s_per_exchange']:.2f} s")
    checks = {f"{alg}: Flower paths equal the in-process run": "ok" if max(
        rec["deploy"]["max_diff"], rec["simulate"]["max_diff"]) <= 1e-8 else "DIFFERS"
        for alg, rec in out.items()}
    for alg, rec in out.items():
        if "full_flower" in rec:
            ff = rec["full_flower"]
            checks[f"{alg}: full default run completed and equal in both Flower paths"] = (
                "ok" if all(ff[p]["status"] == "completed" and ff[p]["max_diff"] <= 1e-8
                            for p in ff) else "FAILED")
            checks[f"{alg}: full deployment <= 10 min, flwr run <= 3 min"] = (
                "ok" if ff["deploy"]["wall_s"] <= 600 and ff["simulate"]["wall_s"] <= 180
                else "MISSED")
    finish("deployment_cost", args, clock, checks, "deployment cost",
           {"floor": floor, "algorithms": out, "rows": rows, "headers": headers})


if __name__ == "__main__":
    main()
