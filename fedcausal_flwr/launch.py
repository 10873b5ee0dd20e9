"""Start the App under real Flower: ``flwr run`` simulation, or a loopback deployment.

Both stop everything they started (the simulation's detached local SuperLink; the deployment's
SuperLink and SuperNodes), also on failure. Run as
``python -m fedcausal_flwr.launch simulate --nodes 5 --run-config 'algorithm="pfdbnl"'``.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

APP_DIR = Path(__file__).resolve().parents[1]
PATH_KEYS = ("outputs", "data-path")
SIMULATE_PORTS = 3  # local SuperLink: HTTP API on port, control API address port + 2


def deploy_ports(num_supernodes: int) -> int:
    """Ports a deployment takes from ``port``: the SuperLink's, then one per SuperNode."""
    return 1 + num_supernodes


def toml_value(v: Any) -> str:
    """One run-config value in TOML syntax."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'


def parse_run_config(text: str) -> dict[str, Any]:
    """``'k=v k2="s"'`` (the ``flwr run --run-config`` syntax) as a dict."""
    return tomllib.loads("\n".join(_split_pairs(text))) if text.strip() else {}


def _split_pairs(text: str) -> list[str]:
    out, cur, quote = [], "", False
    for ch in text.strip():
        if ch == '"':
            quote = not quote
        if ch.isspace() and not quote:
            if cur:
                out.append(cur)
            cur = ""
        else:
            cur += ch
    return out + ([cur] if cur else [])


def run_config_arg(cfg: Mapping[str, Any]) -> str:
    """A dict as the ``--run-config`` argument, relative paths made absolute."""
    cfg = dict(cfg)
    for key in PATH_KEYS:
        if cfg.get(key):
            cfg[key] = str(Path(str(cfg[key])).expanduser().resolve())
    return " ".join(f"{k}={toml_value(v)}" for k, v in cfg.items())


def flwr_env(flwr_home: Path) -> dict[str, str]:
    """Environment for the Flower CLIs: own FLWR_HOME, no per-run dependency install.

    This interpreter's ``bin`` goes first on ``PATH``: the Flower CLIs start
    ``flower-superlink`` / ``flower-superexec`` by name, also from an unactivated virtualenv.
    """
    flwr_home.mkdir(parents=True, exist_ok=True)
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    return {**os.environ, "FLWR_HOME": str(flwr_home), "PATH": path,
            "FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION": "1",
            "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0", "PYTHONUNBUFFERED": "1",
            "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "1")}


def _pids(pattern: str) -> set[int]:
    """PIDs whose command line matches ``pattern`` (for checks only; never to pick victims)."""
    out = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout
    return {int(p) for p in out.split()} - {os.getpid()}


def _cmdlines() -> dict[int, list[str]]:
    """argv of every process we can read, by PID."""
    out = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                raw = (proc / "cmdline").read_bytes()
            except OSError:
                continue
            out[int(proc.name)] = raw.decode(errors="replace").split("\0")
    return out


def _local_superlink_pids(port: int, flwr_home: Path) -> set[int]:
    """PIDs of the local simulation SuperLink that ``flwr run`` started with this home and port,
    and of the SuperExec it spawned.

    ``flwr run`` detaches it, so it is not our child; its command line names our port and a
    log file under our ``FLWR_HOME``, which no other run shares.
    """
    log = str(flwr_home / "local-superlink" / "superlink.log")
    procs = _cmdlines()

    def runs(argv: list[str], exe: str) -> bool:  # "flower-x ..." or "python .../flower-x ..."
        return any(Path(a).name == exe for a in argv[:2])

    def pairs(argv: list[str]) -> set[tuple[str, str]]:
        return set(zip(argv, argv[1:], strict=False))

    links = {pid for pid, argv in procs.items() if runs(argv, "flower-superlink")
             and {("--port", str(port)), ("--log-file", log)} <= pairs(argv)}
    execs = {pid for pid, argv in procs.items() if runs(argv, "flower-superexec")
             and any(("--parent-pid", str(p)) in pairs(argv) for p in links)}
    return (links | execs) - {os.getpid()}


def _kill(pids: set[int]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.killpg(pid, sig) if os.getpgid(pid) == pid else os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.time() + 10
        while time.time() < deadline and any(_alive(p) for p in pids):
            time.sleep(0.2)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something accepts TCP connections on ``host:port``."""
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether ``host:port`` can be bound now (nothing listens on it, nothing holds it)."""
    with socket.socket() as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port_block(n: int = 1, host: str = "127.0.0.1", low: int = 20000, high: int = 32000,
                    tries: int = 500) -> int:
    """The first of ``n`` contiguous free TCP ports on ``host``, drawn at random.

    Below Linux's ephemeral range (32768-60999), so outgoing connections do not take them
    meanwhile. Another process can still bind one before it is used.

    Parameters
    ----------
    n
        How many contiguous ports, e.g. :data:`SIMULATE_PORTS` or :func:`deploy_ports`.
    host, low, high, tries
        Interface; range of the first port; how many random blocks to try.

    Returns
    -------
    int
        The first port of the block.
    """
    rng = random.Random()
    for _ in range(tries):
        base = rng.randrange(low, high - n)
        if all(port_free(p, host) for p in range(base, base + n)):
            return base
    raise RuntimeError(f"no {n} contiguous free ports in [{low}, {high}) on {host}")


def _check_free(ports: range, what: str) -> None:
    busy = [p for p in ports if not port_free(p)]
    if busy:
        raise RuntimeError(f"{what}: port(s) {busy} in use (another SuperLink?); choose another "
                           "port, e.g. free_port_block()")


def _wait_for_port(port: int, proc: subprocess.Popen, timeout: float = 120.0) -> None:
    deadline = time.time() + timeout
    while not port_open(port):
        if proc.poll() is not None:
            raise RuntimeError(f"flower-superlink exited with code {proc.returncode}")
        if time.time() > deadline:
            raise TimeoutError(f"no SuperLink on 127.0.0.1:{port} after {timeout:.0f}s")
        time.sleep(0.2)


def _flwr() -> str:
    exe = Path(sys.executable).with_name("flwr")
    return str(exe) if exe.exists() else (shutil.which("flwr") or "flwr")


def simulate(num_supernodes: int, run_config: Mapping[str, Any], *, app_dir: Path = APP_DIR,
             flwr_home: Path | None = None, timeout: float = 3600, cpus: int = 1,
             port: int = 39091) -> subprocess.CompletedProcess:
    """``flwr run <app> local --stream`` with N SuperNodes; stops the SuperLink it started.

    The local simulation SuperLink listens on ``port`` (control API address ``port + 2``;
    :data:`SIMULATE_PORTS` in all), so runs with different ports can go on side by side. The
    ports must be free: ``flwr run`` would otherwise use whatever SuperLink answers there.
    Only that SuperLink (matched by port and ``flwr_home``) is stopped afterwards.
    """
    home = Path(flwr_home or app_dir / ".flwr").resolve()
    env = {**flwr_env(home),
           "FLWR_LOCAL_SUPERLINK_HTTP_API_PORT": str(port),
           "FLWR_LOCAL_CONTROL_API_PORT": str(port + 2)}
    _check_free(range(port, port + SIMULATE_PORTS), "simulate")
    cmd = [_flwr(), "run", str(app_dir), "local", "--stream",
           "--run-config", run_config_arg(run_config),
           "--federation-config",
           f"num-supernodes={num_supernodes} client-resources-num-cpus={cpus}"]
    try:
        return subprocess.run(cmd, env=env, timeout=timeout, check=True)
    finally:
        _kill(_local_superlink_pids(port, home))


@dataclass
class Deployment:
    """What :func:`deploy` started, handed to its ``on_start`` hook.

    ``supernodes[i]`` is partition i's latest SuperNode process (its own process group);
    ``start_supernode(i)`` starts another SuperNode for partition i on the same port (e.g.
    after stopping the first), which ``deploy`` stops at the end like the others.
    """

    port: int
    workdir: Path
    supernodes: dict[int, subprocess.Popen]
    start_supernode: Callable[[int], subprocess.Popen]


def deploy(num_supernodes: int, run_config: Mapping[str, Any], *, app_dir: Path = APP_DIR,
           workdir: Path | None = None, port: int = 9200, timeout: float = 3600,
           on_start: Callable[[Deployment], None] | None = None
           ) -> subprocess.CompletedProcess:
    """A real deployment on loopback: one SuperLink, one SuperNode per client, ``flwr run``.

    SuperLink on ``port``, SuperNodes on ``port + 1 + i`` with ``partition-id = i``
    (:func:`deploy_ports` in all, which must be free). Logs go to ``workdir``. Everything
    started here (and only that: by PID) is stopped before returning. ``on_start``, if given,
    gets the :class:`Deployment` just before ``flwr run`` starts (fault tests stop and restart
    SuperNodes from a thread it starts).
    """
    workdir = Path(workdir or app_dir / ".flwr" / "deployment").resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    bindir = Path(sys.executable).parent
    procs: list[subprocess.Popen] = []

    def spawn(name: str, cmd: list[str]) -> None:
        log = open(workdir / f"{name}.log", "w")  # noqa: SIM115 - closed with the process
        procs.append(subprocess.Popen(cmd, env=flwr_env(workdir / name), stdout=log,
                                      stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                      start_new_session=True))

    supernodes: dict[int, subprocess.Popen] = {}

    def supernode(i: int) -> subprocess.Popen:
        name = f"supernode{i}" + (f"-{len(procs)}" if i in supernodes else "")  # a restart
        spawn(name, [str(bindir / "flower-supernode"), "--insecure",
                     "--superlink", f"127.0.0.1:{port}", "--port", str(port + 1 + i),
                     "--node-config", f"partition-id={i} num-partitions={num_supernodes}"])
        supernodes[i] = procs[-1]
        return procs[-1]

    _check_free(range(port, port + deploy_ports(num_supernodes)), "deploy")
    try:
        spawn("superlink", [str(bindir / "flower-superlink"), "--insecure", "--port", str(port),
                            "--disable-runtime-dependency-installation"])
        _wait_for_port(port, procs[0])
        for i in range(num_supernodes):
            supernode(i)
        cli_home = workdir / "cli"
        env = flwr_env(cli_home)
        (cli_home / "config.toml").write_text(
            '[superlink]\ndefault = "loopback"\n\n'
            f'[superlink.loopback]\naddress = "127.0.0.1:{port}"\ninsecure = true\n')
        cmd = [_flwr(), "run", str(app_dir), "loopback", "--stream",
               "--run-config", run_config_arg(run_config)]
        if on_start is not None:
            on_start(Deployment(port, workdir, supernodes, supernode))
        return subprocess.run(cmd, env=env, timeout=timeout, check=True)
    finally:
        _kill({p.pid for p in reversed(procs)})
        for p in procs:
            p.wait(timeout=10)


def run_output(cfg: Mapping[str, Any]) -> Path:
    """``<outputs>/<run-name>`` of a run config whose ``run-name`` is set (the ServerApp's
    :func:`~fedcausal_flwr.server_app.output_dir`)."""
    return Path(str(cfg.get("outputs", "outputs"))).expanduser().resolve() / str(cfg["run-name"])


def report(out: Path, since: float = 0.0) -> int:
    """Print the outcome of the run whose result.json is in ``out``; 0 only if "completed".

    ``flwr run`` exits 0 even when the ServerApp failed, so this file is the run's verdict. A
    result.json older than ``since`` (a previous run's) counts as missing.
    """
    from fedcausal_flwr.results import is_completed, load_result

    path = out / "result.json"
    if not path.exists() or path.stat().st_mtime < since:
        print(f"\nno result.json written by this run in {out}", file=sys.stderr)
        return 1
    r = load_result(path)
    m, status = r.get("metrics", {}), str(r.get("status"))
    print(f"\n{r.get('algorithm')} {status}: {m.get('rounds', 0)} rounds, "
          f"{m.get('clients', 0)} clients, {r.get('timing', {}).get('wall_s', 0.0):.1f}s")
    nums = {k: v for k, v in m.items() if k not in ("rounds", "clients", "clients_discovered")
            and isinstance(v, (int, float)) and not isinstance(v, bool)}
    if nums:
        print("  ".join(f"{k}={v:.3g}" for k, v in nums.items()))
    for err in r.get("errors", []):
        print(f"error: {err}", file=sys.stderr)
    if r.get("status_detail"):
        print(r["status_detail"], file=sys.stderr)
    pngs = sorted(p.name for p in out.glob("*.png") if p.stat().st_mtime >= since)
    print(f"saved {path}" + (f" and {', '.join(pngs)}" if pngs else ""))
    if not is_completed(status):
        print(f"run not completed: {status}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    """CLI: ``simulate`` or ``deploy`` with ``--nodes`` and ``--run-config``.

    Exits 0 only when the run's result.json says ``"completed"``; a failed, stopped or
    interrupted run, or none written, exits 1 (``flwr run``'s own non-zero code is kept).
    """
    ap = argparse.ArgumentParser(prog="python -m fedcausal_flwr.launch", description=__doc__)
    ap.add_argument("mode", choices=["simulate", "deploy"])
    ap.add_argument("--nodes", type=int, default=5, help="number of SuperNodes (= clients)")
    ap.add_argument("--run-config", action="append", default=[],
                    help="overrides, flwr syntax: 'k=v k2=\"s\"'; repeat to add more (later "
                    "ones win)")
    ap.add_argument("--port", type=int, default=None,
                    help="SuperLink port (default 39091 simulation, 9200 deployment; "
                    "0 picks a free block)")
    ap.add_argument("--timeout", type=float, default=3600)
    args = ap.parse_args(argv)
    cfg: dict[str, Any] = {}
    for text in args.run_config:
        cfg.update(parse_run_config(text))
    cfg.setdefault("outputs", "outputs")
    if not cfg.get("run-name"):  # named here, so the launcher knows where result.json lands
        cfg["run-name"] = f"{cfg.get('algorithm', 'fdbnl')}-{time.strftime('%Y%m%d-%H%M%S')}"
    since = time.time() - 1.0
    code = 0
    try:
        if args.mode == "simulate":
            port = free_port_block(SIMULATE_PORTS) if args.port == 0 else args.port or 39091
            simulate(args.nodes, cfg, timeout=args.timeout, port=port)
        else:
            port = (free_port_block(deploy_ports(args.nodes)) if args.port == 0
                    else args.port or 9200)
            deploy(args.nodes, cfg, port=port, timeout=args.timeout)
    except subprocess.CalledProcessError as e:
        print(f"flwr run exited with code {e.returncode}", file=sys.stderr)
        code = e.returncode
    verdict = report(run_output(cfg), since)
    return code or verdict


if __name__ == "__main__":
    sys.exit(main())
