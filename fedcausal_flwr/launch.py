"""Start the App under real Flower: ``flwr run`` simulation, or a loopback deployment.

Both stop everything they started, and only that (the simulation's detached local SuperLink,
matched by its port and ``FLWR_HOME``; the deployment's SuperLink and SuperNodes, by the PIDs
``Popen`` returned), also on failure. Ports are drawn free unless ``--port`` is given, so other
Flower work on the machine (a SuperLink on a default port) is left alone. ``FLWR_HOME`` is
respected; only when it is unset does ``./.flwr`` serve. The deployment uses TLS (a local CA
and SuperLink certificate, created once per deployment directory) and SuperNode
authentication (a registered key per SuperNode) unless ``--insecure`` is given. Run as
``python -m fedcausal_flwr.launch simulate --nodes 5 --run-config 'algorithm="pfdbnl"'``
(``--app DIR`` names the Flower App; default: the current directory if it is one, else this
package's source checkout).
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

from fedcausal_flwr.threads import limit_blas_threads

APP_DIR = Path(__file__).resolve().parents[1]  # the App's pyproject in a source checkout
PATH_KEYS = ("outputs", "data-path")
SIMULATE_PORTS = 3  # local SuperLink: HTTP API on port, control API address port + 2
BIND_KEY = "bind-partitions"  # the shared run-config key that binds partitions to node ids


class AppDirError(ValueError):
    """No Flower App directory (a folder whose pyproject.toml has ``[tool.flwr.app]``)."""


def is_app_dir(path: Path) -> bool:
    """Whether ``path`` holds a pyproject.toml with a ``[tool.flwr.app]`` table."""
    try:
        doc = tomllib.loads((Path(path) / "pyproject.toml").read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return False
    return isinstance(doc.get("tool", {}).get("flwr", {}).get("app"), dict)


def find_app_dir(app_dir: Path | str | None = None) -> Path:
    """The Flower App directory ``flwr run`` gets.

    ``app_dir`` if given (it must be an App); else the current directory if it is one; else
    this package's source checkout (:data:`APP_DIR`). An installed wheel has no App around it
    (``APP_DIR`` is then site-packages): that raises :class:`AppDirError` naming what to pass.
    """
    if app_dir is not None:
        path = Path(app_dir).expanduser().resolve()
        if not is_app_dir(path):
            raise AppDirError(f"{path} is not a Flower App directory: it needs a pyproject.toml "
                              "with a [tool.flwr.app] table")
        return path
    for path in (Path.cwd(), APP_DIR):
        if is_app_dir(path):
            return path.resolve()
    raise AppDirError(
        f"no Flower App found: neither the current directory ({Path.cwd()}) nor {APP_DIR} has "
        "a pyproject.toml with [tool.flwr.app]. Pass --app DIR (Python: app_dir=DIR), the "
        "folder of your App's pyproject.toml (e.g. a copy of one of the project's examples/), "
        "or run from that folder.")


def default_flwr_home() -> Path:
    """``$FLWR_HOME`` when set (never overridden), else ``./.flwr``."""
    home = os.environ.get("FLWR_HOME")
    return Path(home).expanduser().resolve() if home else (Path.cwd() / ".flwr").resolve()


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
    """``'k=v dbn.k2="s"'`` (the ``flwr run --run-config`` syntax) as a flat dict, dotted
    keys kept dotted as Flower flattens them (``dbn.lambda-w``)."""
    return _flat(tomllib.loads("\n".join(_split_pairs(text)))) if text.strip() else {}


def _flat(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, Mapping):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def declared_keys(app_dir: Path | str) -> set[str]:
    """The run-config keys the App's ``pyproject.toml`` declares, flattened as Flower does."""
    doc = tomllib.loads((Path(app_dir) / "pyproject.toml").read_text())
    return set(_flat(doc.get("tool", {}).get("flwr", {}).get("app", {}).get("config", {})))


def deploy_run_config(run_config: Mapping[str, Any], app_dir: Path | str,
                      secure: bool) -> dict[str, Any]:
    """The run config of a deployment: with SuperNode authentication, ``bind-partitions=true``
    (a partition stays with the node id of the registered key that held it) unless
    ``run_config`` sets it, where the App declares the key (``flwr run`` refuses a key its App
    does not declare; such an App decides in its own ServerApp)."""
    cfg = dict(run_config)
    if secure and BIND_KEY in declared_keys(app_dir):
        cfg.setdefault(BIND_KEY, True)
    return cfg


def renamed_keys(cfg: Mapping[str, Any]) -> list[str]:
    """The run-config problems of ``cfg`` (:func:`fedcausal_flwr.appconfig.problems`): a key
    without its section is refused here, naming its new name, before any Flower process."""
    from fedcausal_flwr.appconfig import problems

    return problems(str(cfg.get("algorithm", "fdbnl")), cfg)


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
    for key in list(cfg):
        if key.rpartition(".")[2] in PATH_KEYS and cfg.get(key):
            cfg[key] = str(Path(str(cfg[key])).expanduser().resolve())
    return " ".join(f"{k}={toml_value(v)}" for k, v in cfg.items())


def flwr_env(flwr_home: Path) -> dict[str, str]:
    """Environment for the Flower CLIs: own FLWR_HOME, no per-run dependency install.

    This interpreter's ``bin`` goes first on ``PATH``: the Flower CLIs start
    ``flower-superlink`` / ``flower-superexec`` by name, also from an unactivated virtualenv.
    The nodes it starts (simulation, loopback deployment) are the submitter's own, so they
    read the run config's data paths (``FEDCAUSAL_ALLOW_RUN_CONFIG_PATHS=1``, see
    :mod:`fedcausal_flwr.data.nodefiles`; already set in the environment: kept).
    """
    flwr_home.mkdir(parents=True, exist_ok=True)
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    return {**os.environ, "FLWR_HOME": str(flwr_home), "PATH": path,
            "FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION": "1",
            "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0", "PYTHONUNBUFFERED": "1",
            "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "1"),
            "FEDCAUSAL_ALLOW_RUN_CONFIG_PATHS": os.environ.get(
                "FEDCAUSAL_ALLOW_RUN_CONFIG_PATHS", "1")}


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


def simulate(num_supernodes: int, run_config: Mapping[str, Any], *,
             app_dir: Path | str | None = None, flwr_home: Path | None = None,
             timeout: float = 3600, cpus: int = 1, ray_cpus: int | None = None,
             port: int | None = None) -> subprocess.CompletedProcess:
    """``flwr run <app> local --stream`` with N SuperNodes; stops the SuperLink it started.

    The local simulation SuperLink listens on ``port`` (control API address ``port + 2``;
    :data:`SIMULATE_PORTS` in all; ``None``: a free block, not Flower's default 39091), so
    runs with different ports can go on side by side. The ports must be free: ``flwr run``
    would otherwise use whatever SuperLink answers there. Only that SuperLink (matched by port
    and ``flwr_home``) is stopped afterwards. ``flwr_home`` defaults to
    :func:`default_flwr_home`; ``app_dir`` to :func:`find_app_dir`. ``cpus`` are the CPUs
    of one virtual client and ``ray_cpus`` the CPUs Ray may use (None: this machine's), so
    ``ray_cpus // cpus`` ClientApps run at once (Ray actors).
    """
    app_dir = find_app_dir(app_dir)
    port = free_port_block(SIMULATE_PORTS) if not port else port
    home = Path(flwr_home or default_flwr_home()).resolve()
    env = {**flwr_env(home),
           "FLWR_LOCAL_SUPERLINK_HTTP_API_PORT": str(port),
           "FLWR_LOCAL_CONTROL_API_PORT": str(port + 2)}
    _check_free(range(port, port + SIMULATE_PORTS), "simulate")
    cmd = [_flwr(), "run", str(app_dir), "local", "--stream",
           "--run-config", run_config_arg(run_config),
           "--federation-config",
           f"num-supernodes={num_supernodes} client-resources-num-cpus={cpus}"
           + (f" init-args-num-cpus={int(ray_cpus)}" if ray_cpus else "")]
    try:
        return subprocess.run(cmd, env=env, timeout=timeout, check=True)
    finally:
        _kill(_local_superlink_pids(port, home))


@dataclass
class Deployment:
    """What :func:`deploy` started, handed to its ``on_start`` hook.

    ``supernodes[i]`` is partition i's latest SuperNode process (its own process group);
    ``start_supernode(i)`` starts another SuperNode for partition i (e.g. after stopping the
    first; with node authentication under a new, registered key, so it gets a new node id:
    another operator claiming the partition), which ``deploy`` stops at the end like the
    others. ``start_supernode(i, same_key=True)`` restarts partition i's node under the key
    ``deploy`` first started it with (the SuperLink gives it that key's node id again; only
    once the process holding that key has left: stopped by SIGTERM, or silent for Flower's
    heartbeat patience, 60 s). Restarts of partition i take its port: stop the previous one
    first.
    ``start_supernode(i, register=False)`` starts one whose key the SuperLink does not know (a
    secure SuperLink refuses it: the SuperNode exits with code 305). ``certs`` are the TLS
    files (``None`` when insecure).
    """

    port: int
    workdir: Path
    supernodes: dict[int, subprocess.Popen]
    start_supernode: Callable[..., subprocess.Popen]
    secure: bool = True
    certs: dict[str, Path] | None = None


def superlink_args(port: int, certs: Mapping[str, Path] | None) -> list[str]:
    """``flower-superlink`` flags: TLS + SuperNode authentication, or ``--insecure``."""
    sec = (["--insecure"] if certs is None else
           ["--ssl-ca-certfile", str(certs["ca"]), "--ssl-certfile", str(certs["cert"]),
            "--ssl-keyfile", str(certs["key"]), "--enable-supernode-auth"])
    return [*sec, "--port", str(port), "--disable-runtime-dependency-installation"]


def supernode_args(superlink: str, port: int, node_config: str, ca: Path | None,
                   key: Path | None) -> list[str]:
    """``flower-supernode`` flags: the CA and auth key, or ``--insecure`` when ``ca`` is None."""
    sec = (["--insecure"] if ca is None else
           ["--root-certificates", str(ca)]
           + (["--auth-supernode-private-key", str(key)] if key is not None else []))
    return [*sec, "--superlink", superlink, "--port", str(port), "--node-config", node_config]


def node_config_arg(i: int, num_supernodes: int, extra: Mapping[str, Any]) -> str:
    """The ``--node-config`` of SuperNode ``i``: its partition, then ``extra`` in TOML syntax."""
    cfg = {"partition-id": i, "num-partitions": num_supernodes, **dict(extra)}
    return " ".join(f"{k}={toml_value(v)}" for k, v in cfg.items())


def connection_toml(name: str, address: str, ca: Path | None) -> str:
    """A ``$FLWR_HOME/config.toml`` whose default connection ``name`` is the SuperLink."""
    sec = "insecure = true" if ca is None else f"root-certificates = {toml_value(str(ca))}"
    return (f'[superlink]\ndefault = "{name}"\n\n'
            f'[superlink.{name}]\naddress = "{address}"\n{sec}\n')


def deploy(num_supernodes: int, run_config: Mapping[str, Any], *,
           app_dir: Path | str | None = None, workdir: Path | None = None,
           port: int | None = None, timeout: float = 3600, insecure: bool = False,
           on_start: Callable[[Deployment], None] | None = None,
           node_configs: Mapping[int, Mapping[str, Any]] | None = None
           ) -> subprocess.CompletedProcess:
    """A real deployment on loopback: one SuperLink, one SuperNode per client, ``flwr run``.

    SuperLink on ``port``, SuperNodes on ``port + 1 + i`` with ``partition-id = i``
    (:func:`deploy_ports` in all, which must be free; ``None``: a free block). Logs, per-process
    ``FLWR_HOME`` folders, ``certs/`` and ``keys/`` go to ``workdir`` (default
    ``<FLWR_HOME or ./.flwr>/deployment``; certificates and keys are kept and reused). Unless
    ``insecure``, the SuperLink serves TLS with a certificate from a local CA and admits only
    SuperNodes whose public key was registered (``flwr supernode register``) before they
    start; the run config then gets ``bind-partitions=true`` unless it sets the key
    (:func:`deploy_run_config`). Everything started here (and only that: by PID) is stopped
    before returning.
    ``on_start``, if given, gets the :class:`Deployment` just before ``flwr run`` starts
    (fault tests stop and restart SuperNodes from a thread it starts). ``node_configs``: extra
    ``--node-config`` entries per SuperNode index (e.g. ``{0: {"data-path": "/d/site0.csv"}}``,
    each node's own data), after ``partition-id`` and ``num-partitions``.
    """
    from fedcausal_flwr import tls

    app_dir = find_app_dir(app_dir)
    port = free_port_block(deploy_ports(num_supernodes)) if not port else port
    workdir = Path(workdir or default_flwr_home() / "deployment").resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    bindir = Path(sys.executable).parent
    procs: list[subprocess.Popen] = []
    certs = None if insecure else tls.make_certificates(workdir / "certs")
    ca = None if certs is None else certs["ca"]
    cli_home = workdir / "cli"
    cli_env = flwr_env(cli_home)

    def spawn(name: str, cmd: list[str]) -> None:
        log = open(workdir / f"{name}.log", "w")  # noqa: SIM115 - closed with the process
        procs.append(subprocess.Popen(cmd, env=flwr_env(workdir / name), stdout=log,
                                      stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                      start_new_session=True))

    def registered_key(name: str) -> Path:
        key, pub = tls.make_node_key(workdir / "keys" / name)
        r = subprocess.run([_flwr(), "supernode", "register", str(pub), "loopback"],
                           env=cli_env, capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise RuntimeError(f"flwr supernode register {pub} failed ({r.returncode}): "
                               f"{r.stdout}{r.stderr}")
        return key

    supernodes: dict[int, subprocess.Popen] = {}
    keys: dict[int, Path] = {}  # partition -> the registered key it was first started with

    def node_key(i: int, name: str, register: bool, same_key: bool) -> Path | None:
        if certs is None:
            return None
        if same_key:
            return keys[i]
        if not register:
            return tls.make_node_key(workdir / "keys" / f"{name}-unregistered")[0]
        key = registered_key(name)
        keys.setdefault(i, key)
        return key

    def supernode(i: int, register: bool = True, same_key: bool = False) -> subprocess.Popen:
        name = f"supernode{i}" + (f"-{len(procs)}" if i in supernodes else "")  # a restart
        key = node_key(i, name, register, same_key)
        spawn(name, [str(bindir / "flower-supernode"),
                     *supernode_args(f"127.0.0.1:{port}", port + 1 + i,
                                     node_config_arg(i, num_supernodes,
                                                     (node_configs or {}).get(i, {})),
                                     ca, key)])
        supernodes[i] = procs[-1]
        return procs[-1]

    _check_free(range(port, port + deploy_ports(num_supernodes)), "deploy")
    try:
        spawn("superlink", [str(bindir / "flower-superlink"), *superlink_args(port, certs)])
        _wait_for_port(port, procs[0])
        (cli_home / "config.toml").write_text(
            connection_toml("loopback", f"127.0.0.1:{port}", ca))
        for i in range(num_supernodes):
            supernode(i)
        cmd = [_flwr(), "run", str(app_dir), "loopback", "--stream", "--run-config",
               run_config_arg(deploy_run_config(run_config, app_dir, certs is not None))]
        if on_start is not None:
            on_start(Deployment(port, workdir, supernodes, supernode, certs is not None, certs))
        return subprocess.run(cmd, env=cli_env, timeout=timeout, check=True)
    finally:
        _kill({p.pid for p in reversed(procs)})
        for p in procs:
            p.wait(timeout=10)


def run_output(cfg: Mapping[str, Any]) -> Path:
    """``<outputs>/<run-name>`` of a run config whose ``run-name`` is set (the ServerApp's
    :func:`~fedcausal_flwr.server_app.output_dir`); a ValueError names a ``run-name`` that is
    not a plain folder name under ``outputs`` (:func:`fedcausal_flwr.appconfig.run_dir`)."""
    from fedcausal_flwr.appconfig import check_run_name, run_dir

    check_run_name(cfg["run-name"])
    return run_dir(cfg)


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


def knowledge_config(path: Path, algorithm: str) -> dict[str, str]:
    """The run-config keys of the prior knowledge in the CSV at ``path``
    (:meth:`~fedcausal_flwr.knowledge.Knowledge.from_file`), in ``algorithm``'s section; read
    on the submitting machine, so neither the server nor a node opens a file for it."""
    from fedcausal_flwr import registry
    from fedcausal_flwr.knowledge import Knowledge

    alg = registry.get(algorithm)
    if "forbid" not in alg.settings_class().keys():
        raise ValueError(f"{algorithm} takes no edge knowledge (FDBNL, PFDBNL and VFedCD do; "
                         "FedGC/FedCF take statespace.ss-known-zero)")
    return {f"{alg.section}.{k}": v for k, v in Knowledge.from_file(path).config().items()
            if v}


def main(argv: list[str] | None = None) -> int:
    """CLI: ``simulate`` or ``deploy`` with ``--nodes`` and ``--run-config``.

    Exits 0 only when the run's result.json says ``"completed"``; a failed, stopped or
    interrupted run, or none written, exits 1 (``flwr run``'s own non-zero code is kept); no
    Flower App to run (see :func:`find_app_dir`) exits 2.
    """
    ap = argparse.ArgumentParser(prog="python -m fedcausal_flwr.launch", description=__doc__)
    ap.add_argument("mode", choices=["simulate", "deploy"])
    ap.add_argument("--nodes", type=int, default=5, help="number of SuperNodes (= clients)")
    ap.add_argument("--run-config", action="append", default=[],
                    help="overrides, flwr syntax: 'k=v k2=\"s\"'; repeat to add more (later "
                    "ones win)")
    ap.add_argument("--port", type=int, default=None,
                    help="first port of the block the run takes (simulation: 3 from it; "
                    "deployment: SuperLink, then one per SuperNode); default or 0: a free block")
    ap.add_argument("--app", type=Path, default=None,
                    help="the Flower App directory (its pyproject.toml has [tool.flwr.app]); "
                    "default: the current directory if it is one, else the source checkout")
    ap.add_argument("--workdir", type=Path, default=None,
                    help="deploy: logs, node homes, certs/ and keys/ (kept and reused); "
                    "default <FLWR_HOME or ./.flwr>/deployment")
    ap.add_argument("--insecure", action="store_true",
                    help="deploy without TLS and without SuperNode authentication")
    ap.add_argument("--node-data", type=Path, action="append", default=[], metavar="CSV",
                    help="deploy: the own CSV of SuperNode i (its node config data-path), "
                    "given once per node in partition order; sets --nodes")
    ap.add_argument("--node-config", action="append", default=[], metavar="'k=v ...'",
                    help="deploy: more node config of SuperNode i (flwr syntax, e.g. "
                    "'input-columns=\"valve\"'), given once per node in partition order")
    ap.add_argument("--knowledge", type=Path, default=None, metavar="CSV",
                    help="prior knowledge as CSV rows (forbid,cause,effect[,lag] | "
                    "require,cause,effect,lag | tier,name,level | exogenous,name), read here "
                    "and sent as the run config's <section>.forbid/require/tiers/exogenous")
    ap.add_argument("--timeout", type=float, default=3600)
    args = ap.parse_args(argv)
    limit_blas_threads()  # this process and, through OPENBLAS_NUM_THREADS, the Flower processes
    if (args.node_data or args.node_config) and args.mode != "deploy":
        ap.error("--node-data and --node-config need deploy: a simulation's nodes share one "
                 "node config")
    nodes: dict[int, dict[str, Any]] = {i: {"data-path": str(f.expanduser().resolve())}
                                        for i, f in enumerate(args.node_data)}
    if args.node_config and nodes and len(args.node_config) != len(nodes):
        ap.error(f"{len(args.node_config)} --node-config for {len(nodes)} --node-data: give "
                 "one per node")
    for i, text in enumerate(args.node_config):
        nodes.setdefault(i, {}).update(parse_run_config(text))
    if nodes:
        args.nodes = len(nodes)
    try:
        app_dir = find_app_dir(args.app)
    except AppDirError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    cfg: dict[str, Any] = {}
    for text in args.run_config:
        cfg.update(parse_run_config(text))
    if args.knowledge is not None:
        try:
            cfg = {**knowledge_config(args.knowledge, str(cfg.get("algorithm", "fdbnl"))),
                   **cfg}
        except (OSError, ValueError) as e:
            print(f"error: --knowledge: {e}", file=sys.stderr)
            return 2
    bad = renamed_keys(cfg)
    if bad:
        print("error: run config: " + "; ".join(bad), file=sys.stderr)
        return 2
    cfg.setdefault("outputs", "outputs")
    if not cfg.get("run-name"):  # named here, so the launcher knows where result.json lands
        from fedcausal_flwr.appconfig import default_run_name

        cfg["run-name"] = default_run_name(cfg.get("algorithm", "fdbnl"))
    try:
        run_output(cfg)  # a run-name that is no plain name under outputs: refused here
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    since = time.time() - 1.0
    code = 0
    try:
        if args.mode == "simulate":
            simulate(args.nodes, cfg, app_dir=app_dir, timeout=args.timeout, port=args.port)
        else:
            deploy(args.nodes, cfg, app_dir=app_dir, workdir=args.workdir, port=args.port,
                   timeout=args.timeout, insecure=args.insecure, node_configs=nodes)
    except subprocess.CalledProcessError as e:
        print(f"flwr run exited with code {e.returncode}", file=sys.stderr)
        code = e.returncode
    verdict = report(run_output(cfg), since)
    return code or verdict


if __name__ == "__main__":
    sys.exit(main())
