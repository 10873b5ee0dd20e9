"""Start any Flower App under real Flower: ``flwr run`` simulation, or a loopback deployment.

Run as ``python -m fedcausal_flwr.cli.launch simulate --nodes 5 --run-config 'algorithm="pfdbnl"'``
(``--app DIR`` names the Flower App; default: the current directory if it is one, else this
package's source checkout). What it does around ``flwr run``:

* **Any App.** Every run-config key must be one the App's pyproject declares: an undeclared
  key is refused (exit 2) naming each key and the pyproject, before Flower starts (Flower
  itself answers only "Invalid run configuration"). ``outputs`` and ``run-name`` are sent only
  to an App that declares them; a declared non-empty ``run-name`` is kept (an empty one gets
  ``<algorithm>-<timestamp>``). Such an App's ``<outputs>/<run-name>/result.json`` is the run's
  verdict (0 only if ``"completed"``: ``flwr run`` exits 0 even when the ServerApp failed); an
  App that declares neither writes no result.json the launcher knows of, so its verdict is
  ``flwr run``'s exit code and Flower's own run status (``flwr ls``: ``finished:completed``).
* **Own CSVs.** ``--node-data a.csv --node-data b.csv`` gives node i its own ``data-path``:
  a deployed SuperNode by ``--node-config``, a simulated one by the environment variable
  ``FEDCAUSAL_NODE_CONFIGS`` set on the processes started here (Flower gives virtual nodes only
  their partition; :func:`fedcausal_flwr.data.nodefiles.own_node_config` reads it on the node).
* **Secure by default.** The deployment uses TLS (a local CA and SuperLink certificate, created
  once per deployment directory) and SuperNode authentication (a registered key per
  SuperNode) unless ``--insecure`` is given; it prints where the CA, certificate, keys and logs
  are.
* **Stops what it started, and only that.** Ports are drawn free unless ``--port`` is given,
  so other Flower work on the machine is left alone; ``FLWR_HOME`` is respected (only when it
  is unset does ``./.flwr`` serve). At the end, on failure and on SIGINT/SIGTERM (exit 130 /
  143, naming what was stopped) it stops every process it started: ``flwr run``, the detached
  local SuperLink, the simulation process and Ray's processes (all descendants of this
  process: it is their Linux child subreaper while it runs), the deployment's SuperLink and
  SuperNodes.
* **A summary line.** Every run ends with ``clients: U used of S started`` and each dropped
  client with its reason (the result's ``metrics["dropped"]``); ``--no-drops`` makes any
  drop an error (exit 1).
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fedcausal_flwr.cli.deployment import (
    Deployment,
    connection_toml,
    deploy,
    deploy_ports,
    node_config_arg,
    security_lines,
    superlink_args,
    supernode_args,
)
from fedcausal_flwr.cli.report import (
    all_used,
    dropped_clients,
    exit_code_verdict,
    report,
    run_output,
    summary_line,
)
from fedcausal_flwr.cli.runconfig import (
    APP_DIR,
    BIND_KEY,
    AppDirError,
    app_algorithm,
    app_run_config,
    config_problems,
    declared_config,
    declared_keys,
    default_flwr_home,
    deploy_run_config,
    find_app_dir,
    flwr_env,
    knowledge_config,
    parse_run_config,
    run_config_arg,
    toml_value,
    writes_result,
)
from fedcausal_flwr.cli.simulation import (
    SIMULATE_PORTS,
    require_simulation,
    simulate,
    simulated_node_env,
)
from fedcausal_flwr.cli.supervisor import (
    Interrupted,
    Started,
    descendants,
    flower_runs,
    free_port_block,
    latest_run,
    port_free,
    port_open,
    stopping,
    with_descendants,
)
from fedcausal_flwr.threads import limit_blas_threads

__all__ = [  # the launcher's functions, wherever they live in fedcausal_flwr.cli
    "APP_DIR", "AppDirError", "BIND_KEY", "Deployment", "Interrupted", "SIMULATE_PORTS", "Started",
    "all_used", "app_algorithm", "app_run_config", "config_problems", "connection_toml",
    "declared_config",
    "declared_keys", "default_flwr_home", "deploy", "deploy_ports", "deploy_run_config",
    "descendants", "dropped_clients", "exit_code_verdict", "find_app_dir", "flower_runs",
    "flwr_env", "free_port_block", "knowledge_config", "latest_run", "main", "node_config_arg",
    "node_configs", "node_data_problems", "parse_run_config", "parser", "port_free", "port_open",
    "report",
    "require_simulation", "run_config", "run_config_arg", "run_output", "security_lines",
    "simulate", "simulated_node_env", "start", "stopping", "summary_line", "superlink_args",
    "supernode_args", "toml_value", "with_descendants", "writes_result",
]

def parser() -> argparse.ArgumentParser:
    """The command line of ``python -m fedcausal_flwr.cli.launch``."""
    ap = argparse.ArgumentParser(prog="python -m fedcausal_flwr.cli.launch", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["simulate", "deploy"])
    ap.add_argument("--nodes", type=int, default=5, help="number of SuperNodes (= clients)")
    ap.add_argument("--run-config", action="append", default=[],
                    help="overrides, flwr syntax: 'k=v k2=\"s\"'; repeat to add more (later "
                    "ones win); every key must be declared by the App's pyproject")
    ap.add_argument("--port", type=int, default=None,
                    help="first port of the block the run takes (simulation: 3 from it; "
                    "deployment: SuperLink, then one per SuperNode); default or 0: a free block")
    ap.add_argument("--app", type=Path, default=None,
                    help="the Flower App directory (its pyproject.toml has [tool.flwr.app]); "
                    "default: the current directory if it is one, else the source checkout")
    ap.add_argument("--workdir", type=Path, default=None,
                    help="deploy: logs, node homes, certs/ and keys/ (kept and reused; printed "
                    "at the start); default <FLWR_HOME or ./.flwr>/deployment")
    ap.add_argument("--insecure", action="store_true",
                    help="deploy without TLS and without SuperNode authentication")
    ap.add_argument("--node-data", type=Path, action="append", default=[], metavar="CSV",
                    help="the own CSV of node i (its node config data-path), given once per "
                    "node in partition order; sets --nodes. deploy: SuperNode i's "
                    "--node-config; simulate: virtual node i's, through FEDCAUSAL_NODE_CONFIGS")
    ap.add_argument("--node-config", action="append", default=[], metavar="'k=v ...'",
                    help="more node config of node i (flwr syntax, e.g. "
                    "'input-columns=\"valve\"'), given once per node in partition order")
    ap.add_argument("--knowledge", type=Path, default=None, metavar="CSV",
                    help="prior knowledge as CSV rows (forbid,cause,effect[,lag] | "
                    "require,cause,effect,lag | tier,name,level | exogenous,name | "
                    "known-zero,A|B,target,source), read here and sent as the run config's "
                    "<section>.forbid/require/tiers/exogenous (FedGC/FedCF: "
                    "statespace.ss-known-zero)")
    ap.add_argument("--no-drops", action="store_true",
                    help="exit 1 when any client was dropped or not used (the summary line "
                    "names each with its reason); needs an App that writes result.json")
    ap.add_argument("--timeout", type=float, default=3600)
    return ap


def node_configs(args: argparse.Namespace) -> dict[int, dict[str, Any]]:
    """Node i's extra node config from ``--node-data`` and ``--node-config``; a ValueError
    when their counts differ."""
    nodes: dict[int, dict[str, Any]] = {i: {"data-path": str(f.expanduser().resolve())}
                                        for i, f in enumerate(args.node_data)}
    if args.node_config and nodes and len(args.node_config) != len(nodes):
        raise ValueError(f"{len(args.node_config)} --node-config for {len(nodes)} --node-data: "
                         "give one per node")
    for i, text in enumerate(args.node_config):
        nodes.setdefault(i, {}).update(parse_run_config(text))
    return nodes


def node_data_problems(paths: list[Path]) -> list[str]:
    """Why a ``--node-data`` file cannot be node i's CSV, one line each (empty: none): it must
    exist, be a regular readable file and start with a header row of column names. Checked
    on this machine before anything starts (the nodes it starts read them here); only the
    header is read, and no cell value is printed."""
    out = []
    for i, path in enumerate(paths):
        p, where = Path(path).expanduser(), f"--node-data {path} (node {i})"
        if not p.exists():
            near = sorted(q.name for q in p.parent.glob("*.csv"))[:8] if p.parent.is_dir() \
                else []
            out.append(f"{where}: no such file" + (f" (in {p.parent}: {', '.join(near)})"
                                                    if near else ""))
        elif not p.is_file():
            out.append(f"{where}: not a regular file")
        elif not os.access(p, os.R_OK):
            out.append(f"{where}: not readable by this user")
        else:
            try:
                with p.open(newline="", encoding="utf-8-sig") as f:
                    header = next(csv.reader([f.readline()]), [])
            except (OSError, UnicodeDecodeError, csv.Error) as e:
                out.append(f"{where}: its header row cannot be read ({type(e).__name__})")
                continue
            names = [h.strip() for h in header]
            if not names or not any(names):
                out.append(f"{where}: no header row (the first line must name the columns)")
            elif "" in names:
                out.append(f"{where}: header column {names.index('') + 1} has no name")
    return out


def run_config(args: argparse.Namespace, app_dir: Path) -> dict[str, Any]:
    """The run config the launcher sends: ``--run-config`` (``--knowledge`` under it), then
    ``outputs``/``run-name`` where the App declares them (:func:`app_run_config`); a
    ValueError naming every key ``flwr run`` would refuse (:func:`config_problems`)."""
    cfg: dict[str, Any] = {}
    for text in args.run_config:
        cfg.update(parse_run_config(text))
    if args.knowledge is not None:
        try:
            cfg = {**knowledge_config(args.knowledge,
                                      app_algorithm(cfg, app_dir) or "fdbnl"), **cfg}
        except (OSError, ValueError) as e:
            raise ValueError(f"--knowledge: {e}") from None
    bad = config_problems(cfg, app_dir)
    if bad:
        raise ValueError("run config: " + "\nerror: run config: ".join(bad))
    return app_run_config(cfg, app_dir)


def start(args: argparse.Namespace, cfg: Mapping[str, Any], app_dir: Path,
          nodes: Mapping[int, Mapping[str, Any]], runs: list[dict[str, Any]] | None) -> int:
    """Run ``flwr run`` (simulation or deployment); its exit code (0 when it succeeded).
    ``runs``: see :func:`simulate`."""
    try:
        if args.mode == "simulate":
            simulate(args.nodes, cfg, app_dir=app_dir, timeout=args.timeout, port=args.port,
                     node_configs=nodes, runs=runs)
        else:
            deploy(args.nodes, cfg, app_dir=app_dir, workdir=args.workdir, port=args.port,
                   timeout=args.timeout, insecure=args.insecure, node_configs=nodes,
                   runs=runs)
    except subprocess.CalledProcessError as e:
        print(f"flwr run exited with code {e.returncode}", file=sys.stderr)
        return e.returncode
    except (RuntimeError, TimeoutError) as e:  # a port in use, a SuperLink that did not start
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    """CLI: ``simulate`` or ``deploy`` with ``--nodes`` and ``--run-config``.

    Exits 0 only when the run's result.json says ``"completed"`` (an App that writes none:
    when ``flwr run`` exits 0 and Flower's run status is ``finished:completed``), and with
    ``--no-drops`` every client was used; a failed, stopped or interrupted run, or none
    written, exits 1 (``flwr run``'s own non-zero code is kept); no Flower App, a run-config
    key the App does not declare, a bad flag or ``simulate`` without Ray exits 2; SIGINT /
    SIGTERM stop everything the run started and exit 130 / 143.
    """
    ap = parser()
    args = ap.parse_args(argv)
    limit_blas_threads()  # this process and, through OPENBLAS_NUM_THREADS, the Flower processes
    try:
        nodes = node_configs(args)
    except ValueError as e:
        ap.error(str(e))
    if nodes:
        args.nodes = len(nodes)
    if bad := node_data_problems(args.node_data):
        print("error: " + "\nerror: ".join(bad), file=sys.stderr)
        return 2
    try:
        if args.mode == "simulate":
            require_simulation()
        app_dir = find_app_dir(args.app)
        cfg = run_config(args, app_dir)
        out = run_output(cfg) if writes_result(app_dir) else None
        if args.no_drops and out is None:
            raise ValueError(f"--no-drops needs a result.json: {app_dir} declares no outputs "
                             "and run-name")
    except (AppDirError, ValueError, ImportError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    since = time.time() - 1.0
    runs: list[dict[str, Any]] | None = [] if out is None else None  # Flower's verdict
    try:
        with stopping() as started:
            code = start(args, cfg, app_dir, nodes, runs)
    except Interrupted as e:
        print(f"\ninterrupted by {e}: stopped {started.report()}", file=sys.stderr, flush=True)
        return 128 + e.signum
    if started.stopped:
        print(f"at the end, still running and stopped: {started.report()}", file=sys.stderr)
    verdict = (exit_code_verdict(code, args.nodes, latest_run(runs or [])) if out is None
               else report(out, since, args.nodes, args.no_drops))
    if started.signum is not None:  # arrived while the run's processes were being stopped
        return 128 + started.signum
    return code or verdict


if __name__ == "__main__":
    sys.exit(main())
