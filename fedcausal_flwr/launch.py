"""Start any Flower App under real Flower: ``flwr run`` simulation, or a loopback deployment.

Run as ``python -m fedcausal_flwr.launch simulate --nodes 5 --run-config 'algorithm="pfdbnl"'``
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
import ctypes
import difflib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
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


def _app_table(app_dir: Path | str) -> dict[str, Any]:
    doc = tomllib.loads((Path(app_dir) / "pyproject.toml").read_text())
    return doc.get("tool", {}).get("flwr", {}).get("app", {})


def declared_config(app_dir: Path | str) -> dict[str, Any]:
    """The run config the App's ``pyproject.toml`` declares (its defaults), flattened as
    Flower does (``dbn.lambda-w``)."""
    return _flat(_app_table(app_dir).get("config", {}))


def declared_keys(app_dir: Path | str) -> set[str]:
    """The run-config keys the App's ``pyproject.toml`` declares, flattened as Flower does."""
    return set(declared_config(app_dir))


def is_package_app(app_dir: Path | str) -> bool:
    """Whether the App's ServerApp is this package's (whose keys
    :func:`fedcausal_flwr.appconfig.problems` knows)."""
    comps = _app_table(app_dir).get("components", {})
    return comps.get("serverapp") == "fedcausal_flwr.server_app:app"


def undeclared_keys(cfg: Mapping[str, Any], app_dir: Path | str) -> list[str]:
    """The keys of ``cfg`` the App does not declare: ``flwr run`` refuses them, naming none."""
    return sorted(set(cfg) - declared_keys(app_dir))


def undeclared_message(keys: list[str], app_dir: Path | str) -> str:
    """One line naming every undeclared key (with the nearest declared key) and the App's
    pyproject, where a user adds a key the App should take."""
    declared = sorted(declared_keys(app_dir))
    named = []
    for key in keys:
        near = difflib.get_close_matches(key, declared, n=1, cutoff=0.6)
        named.append(repr(key) + (f" (did you mean {near[0]!r}?)" if near else ""))
    where = Path(app_dir).resolve() / "pyproject.toml"
    return (f"{', '.join(named)} not declared by the App: {where} [tool.flwr.app.config] "
            + (f"declares {len(declared)} keys" if declared else "declares no key")
            + "; flwr run refuses a key its App does not declare (Flower says only "
            "'Invalid run configuration')")


def config_problems(cfg: Mapping[str, Any], app_dir: Path | str) -> list[str]:
    """Why ``flwr run`` would refuse ``cfg`` or this package's ServerApp misread it, one line
    each (empty: none). This package's App: :func:`renamed_keys`; any App: the keys it does not
    declare (:func:`undeclared_message`)."""
    out = renamed_keys(cfg) if is_package_app(app_dir) else []
    missing = undeclared_keys(cfg, app_dir)
    return out + ([undeclared_message(missing, app_dir)] if missing else [])


RESULT_KEYS = ("outputs", "run-name")  # an App declaring both writes <outputs>/<run-name>


def writes_result(app_dir: Path | str) -> bool:
    """Whether the App declares ``outputs`` and ``run-name``: it writes
    ``<outputs>/<run-name>/result.json`` (this package's App and its examples do)."""
    return set(RESULT_KEYS) <= declared_keys(app_dir)


def app_run_config(cfg: Mapping[str, Any], app_dir: Path | str) -> dict[str, Any]:
    """``cfg`` plus what the App declares of ``outputs`` and ``run-name`` (nothing for an App
    that declares neither): the user's values, else the declared ones; a ``run-name`` given
    or declared empty becomes ``<algorithm>-<timestamp>``, so the launcher knows where
    result.json lands."""
    from fedcausal_flwr.appconfig import default_run_name

    defaults, out = declared_config(app_dir), dict(cfg)
    if "outputs" in defaults:
        out.setdefault("outputs", defaults["outputs"])
    if "run-name" in defaults and not str(out.get("run-name", "") or ""):
        out["run-name"] = (str(defaults["run-name"] or "") or default_run_name(
            out.get("algorithm", defaults.get("algorithm", "run"))))
    return out


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


def _kill(pids: set[int], grace: float = 10.0) -> None:
    """SIGTERM ``pids`` (a group leader with its group), SIGKILL those alive after ``grace``."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.killpg(pid, sig) if os.getpgid(pid) == pid else os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.time() + grace
        while time.time() < deadline and any(_alive(p) for p in pids):
            time.sleep(0.2)


def _stat(pid: int) -> list[str] | None:
    """``/proc/<pid>/stat`` after the command name (state, parent, ...), None when gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, exited but not yet reaped, does not)."""
    st = _stat(pid)
    return st is not None and st[0] != "Z"


def _parents() -> dict[int, int]:
    """The parent PID of every process we can read, by PID."""
    out = {}
    for proc in Path("/proc").iterdir():
        st = _stat(int(proc.name)) if proc.name.isdigit() else None
        if st is not None:
            out[int(proc.name)] = int(st[1])
    return out


def descendants(roots: set[int], parents: Mapping[int, int] | None = None) -> set[int]:
    """Every process below ``roots`` by parent chain (the roots themselves not included)."""
    parents = _parents() if parents is None else parents
    kids: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        kids.setdefault(ppid, []).append(pid)
    out: set[int] = set()
    todo = list(roots)
    while todo:
        for child in kids.get(todo.pop(), []):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


def with_descendants(pids: set[int]) -> set[int]:
    """``pids`` and every process below them, found before any is stopped: a SuperLink's
    SuperExec and ServerApp run in groups of their own and may outlive it for a moment."""
    return set(pids) | descendants(set(pids))


def _name(argv: list[str]) -> str:
    """A process's short name: ``flower-superlink`` for ``python .../flower-superlink ...``."""
    names = [Path(a).name for a in argv[:2] if a]
    if len(names) == 2 and names[0].startswith("python") and not names[1].startswith("-"):
        return names[1]
    return names[0] if names else "?"


def _reap(pids: set[int]) -> None:
    """Collect the exit status of our exited children among ``pids`` (orphans we adopted as
    subreaper), so no zombie stays behind."""
    for pid in pids:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass


PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h
SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _subreaper(on: bool) -> bool:
    """Make this process the subreaper of its descendants (Linux): an orphan below it (the
    local SuperLink ``flwr run`` detaches, Ray's workers) becomes its child, not init's, so
    it stays findable by parent chain. False where that is not available."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, int(on),
                                                       0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


class Interrupted(Exception):  # noqa: N818 - it is a signal, not an error
    """SIGINT or SIGTERM arrived while the launcher ran Flower."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(signal.Signals(signum).name)


@dataclass
class Started:
    """The processes one launcher call started: descendants of this process that were not
    its children when the call began (so a caller's own processes are never touched)."""

    before: set[int]
    raising: bool = True
    signum: int | None = None
    seen: dict[int, str] = field(default_factory=dict)  # pid -> name, at the signal
    stopped: dict[int, str] = field(default_factory=dict)

    def pids(self, alive: bool = True) -> set[int]:
        """The started processes alive now (``alive=False``: also those exited, not reaped)."""
        parents = _parents()
        mine = {pid for pid, ppid in parents.items() if ppid == os.getpid()} - self.before
        return {p for p in mine | descendants(mine, parents) if not alive or _alive(p)}

    def names(self, pids: set[int]) -> dict[int, str]:
        """``pids`` with their short names."""
        argv = _cmdlines()
        return {pid: _name(argv.get(pid, [])) for pid in pids}

    def on_signal(self, signum: int, frame: Any) -> None:
        """Note the first signal and what runs then; raise :class:`Interrupted` while the run
        goes on (not during the cleanup that follows)."""
        if self.signum is None:
            self.signum = signum
            self.seen = self.names(self.pids())
        if self.raising:
            self.raising = False
            raise Interrupted(signum)

    def stop(self) -> None:
        """Stop every started process still alive (SIGTERM, SIGKILL after 5 s), then reap the
        exited ones this process adopted."""
        alive = self.pids()
        self.stopped = {**self.seen, **self.names(alive)}
        _kill(alive, grace=5.0)
        _reap(self.pids(alive=False) | set(self.stopped))

    def report(self) -> str:
        """``N processes (flwr x1, flower-superlink x1, ...)`` of what was stopped."""
        counts: dict[str, int] = {}
        for name in self.stopped.values():
            counts[name] = counts.get(name, 0) + 1
        left = sorted(p for p in self.stopped if _alive(p))
        return (f"{len(self.stopped)} processes it started ("
                + ", ".join(f"{n} x{c}" for n, c in sorted(counts.items())) + ")"
                + (f"; still alive: {left}" if left else ""))


@contextmanager
def stopping() -> Iterator[Started]:
    """Around a run: SIGINT/SIGTERM raise :class:`Interrupted` in it, and at its end (normal,
    failed or interrupted) every process it started is stopped (:meth:`Started.stop`)."""
    started = Started(before={p for p, pp in _parents().items() if pp == os.getpid()})
    subreaper = _subreaper(True)
    old = {}
    for sig in SIGNALS:
        try:
            old[sig] = signal.signal(sig, started.on_signal)
        except ValueError:  # not the main thread: no handlers, the cleanup at the end stays
            break
    try:
        yield started
    finally:
        started.raising = False  # a signal now only counts: the cleanup goes on
        try:
            started.stop()
        finally:
            if subreaper:
                _subreaper(False)
            for sig, handler in old.items():
                signal.signal(sig, handler)


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
             port: int | None = None,
             node_configs: Mapping[int, Mapping[str, Any]] | None = None,
             runs: list[dict[str, Any]] | None = None) -> subprocess.CompletedProcess:
    """``flwr run <app> local --stream`` with N SuperNodes; stops the SuperLink it started.

    The local simulation SuperLink listens on ``port`` (control API address ``port + 2``;
    :data:`SIMULATE_PORTS` in all; ``None``: a free block, not Flower's default 39091), so
    runs with different ports can go on side by side. The ports must be free: ``flwr run``
    would otherwise use whatever SuperLink answers there. Only that SuperLink (matched by port
    and ``flwr_home``) is stopped afterwards. ``flwr_home`` defaults to
    :func:`default_flwr_home`; ``app_dir`` to :func:`find_app_dir`. ``cpus`` are the CPUs
    of one virtual client and ``ray_cpus`` the CPUs Ray may use (None: this machine's), so
    ``ray_cpus // cpus`` ClientApps run at once (Ray actors). ``node_configs``: extra node
    config per partition id, as :func:`deploy` takes it (e.g. ``{0: {"data-path": ...}}``),
    handed to the virtual nodes by :func:`simulated_node_env`. ``runs``, if given, gets
    Flower's record of each run the SuperLink knows (:func:`flower_runs`) before it stops.
    """
    require_simulation()
    app_dir = find_app_dir(app_dir)
    port = free_port_block(SIMULATE_PORTS) if not port else port
    home = Path(flwr_home or default_flwr_home()).resolve()
    env = {**flwr_env(home),
           "FLWR_LOCAL_SUPERLINK_HTTP_API_PORT": str(port),
           "FLWR_LOCAL_CONTROL_API_PORT": str(port + 2), **simulated_node_env(node_configs)}
    _check_free(range(port, port + SIMULATE_PORTS), "simulate")
    cmd = [_flwr(), "run", str(app_dir), "local", "--stream",
           "--run-config", run_config_arg(run_config),
           "--federation-config",
           f"num-supernodes={num_supernodes} client-resources-num-cpus={cpus}"
           + (f" init-args-num-cpus={int(ray_cpus)}" if ray_cpus else "")]
    try:
        done = subprocess.run(cmd, env=env, timeout=timeout, check=True)
        if runs is not None:
            runs.extend(flower_runs("local", env))
        return done
    finally:
        _kill(with_descendants(_local_superlink_pids(port, home)))


def flower_runs(connection: str, env: Mapping[str, str]) -> list[dict[str, Any]]:
    """Flower's record of every run the SuperLink of ``connection`` knows (``flwr ls
    --format json``: ``run-id``, ``status`` such as ``finished:failed``, ``status-details``,
    ``pending-at`` ...); empty when it cannot say."""
    try:
        r = subprocess.run([_flwr(), "ls", connection, "--format", "json"], env=dict(env),
                           capture_output=True, text=True, timeout=120)
        doc = json.loads(r.stdout)
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return []
    runs = doc.get("runs") if isinstance(doc, dict) else None
    return [run for run in runs or [] if isinstance(run, dict)]


def latest_run(runs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The run submitted last (a persistent local SuperLink also lists earlier runs)."""
    return max(runs, key=lambda r: str(r.get("pending-at", "")), default=None)


def require_simulation() -> None:
    """An ImportError naming the ``simulation`` extra unless Ray is installed: Flower's
    simulation runtime needs it, a deployment does not (so the base install has none)."""
    from fedcausal_flwr.extras import require_extra

    require_extra("launch simulate (Flower's simulation runtime)", "simulation", "ray")


def simulated_node_env(node_configs: Mapping[int, Mapping[str, Any]] | None) -> dict[str, str]:
    """``{FEDCAUSAL_NODE_CONFIGS: JSON}`` for the simulation's processes (empty without
    ``node_configs``): Flower gives a virtual node only its partition, so each reads its own
    entry there (:func:`fedcausal_flwr.data.nodefiles.own_node_config`). An environment
    variable of the processes this machine's user starts, the operator of every simulated
    node; never the run config, which the submitter controls."""
    from fedcausal_flwr.data.nodefiles import NODE_CONFIGS_ENV

    if not node_configs:
        return {}
    return {NODE_CONFIGS_ENV: json.dumps({str(i): dict(c) for i, c in node_configs.items()})}


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


def security_lines(workdir: Path, certs: Mapping[str, Path] | None,
                   keys: Mapping[int, Path]) -> list[str]:
    """Where a deployment's TLS files, SuperNode keys and logs are (printed before the run)."""
    out = [f"deployment files in {workdir} (kept and reused; logs: superlink.log, "
           "supernode<i>.log)"]
    if certs is None:
        return [*out, "insecure: no TLS, no SuperNode authentication"]
    out += [f"  CA certificate: {certs['ca']} (its key: {certs['ca_key']})",
            f"  SuperLink certificate: {certs['cert']} (its key: {certs['key']})"]
    return out + [f"  SuperNode {i} key: {key} (public, registered: {key}.pub)"
                  for i, key in sorted(keys.items())]


def deploy(num_supernodes: int, run_config: Mapping[str, Any], *,
           app_dir: Path | str | None = None, workdir: Path | None = None,
           port: int | None = None, timeout: float = 3600, insecure: bool = False,
           on_start: Callable[[Deployment], None] | None = None,
           node_configs: Mapping[int, Mapping[str, Any]] | None = None,
           runs: list[dict[str, Any]] | None = None) -> subprocess.CompletedProcess:
    """A real deployment on loopback: one SuperLink, one SuperNode per client, ``flwr run``.

    SuperLink on ``port``, SuperNodes on ``port + 1 + i`` with ``partition-id = i``
    (:func:`deploy_ports` in all, which must be free; ``None``: a free block). Logs, per-process
    ``FLWR_HOME`` folders, ``certs/`` and ``keys/`` go to ``workdir`` (default
    ``<FLWR_HOME or ./.flwr>/deployment``; certificates and keys are kept and reused; where
    they are is printed before the run: :func:`security_lines`). Unless
    ``insecure``, the SuperLink serves TLS with a certificate from a local CA and admits only
    SuperNodes whose public key was registered (``flwr supernode register``) before they
    start; the run config then gets ``bind-partitions=true`` unless it sets the key
    (:func:`deploy_run_config`). Everything started here (and only that: by PID) is stopped
    before returning.
    ``on_start``, if given, gets the :class:`Deployment` just before ``flwr run`` starts
    (fault tests stop and restart SuperNodes from a thread it starts). ``node_configs``: extra
    ``--node-config`` entries per SuperNode index (e.g. ``{0: {"data-path": "/d/site0.csv"}}``,
    each node's own data), after ``partition-id`` and ``num-partitions``. ``runs``: as
    :func:`simulate`'s.
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
        print("\n".join(security_lines(workdir, certs, keys)), flush=True)
        cmd = [_flwr(), "run", str(app_dir), "loopback", "--stream", "--run-config",
               run_config_arg(deploy_run_config(run_config, app_dir, certs is not None))]
        if on_start is not None:
            on_start(Deployment(port, workdir, supernodes, supernode, certs is not None, certs))
        done = subprocess.run(cmd, env=cli_env, timeout=timeout, check=True)
        if runs is not None:
            runs.extend(flower_runs("loopback", cli_env))
        return done
    finally:
        _kill(with_descendants({p.pid for p in procs}))
        for p in procs:
            p.wait(timeout=10)


def run_output(cfg: Mapping[str, Any]) -> Path:
    """``<outputs>/<run-name>`` of a run config whose ``run-name`` is set (the ServerApp's
    :func:`~fedcausal_flwr.server_app.output_dir`); a ValueError names a ``run-name`` that is
    not a plain folder name under ``outputs`` (:func:`fedcausal_flwr.appconfig.run_dir`)."""
    from fedcausal_flwr.appconfig import check_run_name, run_dir

    check_run_name(cfg["run-name"])
    return run_dir(cfg)


def dropped_clients(metrics: Mapping[str, Any]) -> dict[str, tuple[str, int]]:
    """``metrics["dropped"]`` (``"<who>: <why>"`` per drop) by who was dropped: its first
    reason and how many drops (a client may be dropped in several rounds)."""
    out: dict[str, tuple[str, int]] = {}
    for entry in metrics.get("dropped") or []:
        who, _, why = str(entry).partition(": ")
        first, n = out.get(who, (why, 0))
        out[who] = (first, n + 1)
    return out


def summary_line(metrics: Mapping[str, Any] | None, started: int) -> str:
    """``clients: U used of S started`` and each dropped one with its reason (``metrics``:
    the result's; None: an App that writes no result.json, so U is unknown)."""
    used = "?" if not metrics or "clients" not in metrics else int(metrics["clients"])
    line = f"clients: {used} used of {started} started"
    drops = dropped_clients(metrics or {})
    if drops:
        line += "; dropped " + "; ".join(f"{who}: {why}" + (f" ({n} times)" if n > 1 else "")
                                         for who, (why, n) in drops.items())
    return line + ("" if metrics is not None else " (the App writes no result.json)")


def all_used(metrics: Mapping[str, Any], started: int) -> bool:
    """Every started client took part and nothing was dropped (``--no-drops``)."""
    return not metrics.get("dropped") and metrics.get("clients") == started


def report(out: Path, since: float = 0.0, started: int | None = None,
           no_drops: bool = False) -> int:
    """Print the outcome of the run whose result.json is in ``out``; 0 only if "completed"
    (and, with ``no_drops``, every one of the ``started`` clients used, none dropped).

    ``flwr run`` exits 0 even when the ServerApp failed, so this file is the run's verdict. A
    result.json older than ``since`` (a previous run's) counts as missing. With ``started``
    (the clients started), the last line is :func:`summary_line`.
    """
    from fedcausal_flwr.results import is_completed, load_result

    path = out / "result.json"
    if not path.exists() or path.stat().st_mtime < since:
        print(f"\nno result.json written by this run in {out}", file=sys.stderr)
        if started is not None:
            print(summary_line({}, started))
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
    code = 0
    if not is_completed(status):
        print(f"run not completed: {status}", file=sys.stderr)
        code = 1
    if started is not None:
        if no_drops and not all_used(m, started):
            print("error: --no-drops: not every started client was used", file=sys.stderr)
            code = 1
        sys.stderr.flush()
        print(summary_line(m, started), flush=True)
    return code


def exit_code_verdict(code: int, started: int, run: Mapping[str, Any] | None = None) -> int:
    """The verdict of a run of an App that writes no result.json: ``flwr run``'s exit
    ``code``, said so; as ``flwr run`` exits 0 also when the ServerApp failed, Flower's own
    status of the ``run`` (:func:`flower_runs`), when known, must be ``finished:completed``.
    Then the summary line."""
    status = str((run or {}).get("status", "") or "")
    print(f"\nflwr run exited with code {code}. This App declares no outputs and run-name, so "
          "no result.json tells how the run ended: the verdict is flwr run's exit code"
          + (f" and Flower's run status: {status}" if status else
             " (Flower's run status unknown: read the ServerApp's log above, flwr run can "
             "exit 0 when the ServerApp failed)") + ".")
    if status and status != "finished:completed":
        details = (run or {}).get("status-details")
        print(f"run not completed: {status}" + (f" ({details})" if details else ""),
              file=sys.stderr)
        code = code or 1
    sys.stderr.flush()
    print(summary_line(None, started), flush=True)
    return code


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


def parser() -> argparse.ArgumentParser:
    """The command line of ``python -m fedcausal_flwr.launch``."""
    ap = argparse.ArgumentParser(prog="python -m fedcausal_flwr.launch", description=__doc__,
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
                    "require,cause,effect,lag | tier,name,level | exogenous,name), read here "
                    "and sent as the run config's <section>.forbid/require/tiers/exogenous")
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


def run_config(args: argparse.Namespace, app_dir: Path) -> dict[str, Any]:
    """The run config the launcher sends: ``--run-config`` (``--knowledge`` under it), then
    ``outputs``/``run-name`` where the App declares them (:func:`app_run_config`); a
    ValueError naming every key ``flwr run`` would refuse (:func:`config_problems`)."""
    cfg: dict[str, Any] = {}
    for text in args.run_config:
        cfg.update(parse_run_config(text))
    if args.knowledge is not None:
        try:
            cfg = {**knowledge_config(args.knowledge, str(cfg.get("algorithm", "fdbnl"))),
                   **cfg}
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
        print(f"at the end, stopped {started.report()}, still running", file=sys.stderr)
    verdict = (exit_code_verdict(code, args.nodes, latest_run(runs or [])) if out is None
               else report(out, since, args.nodes, args.no_drops))
    if started.signum is not None:  # arrived while the run's processes were being stopped
        return 128 + started.signum
    return code or verdict


if __name__ == "__main__":
    sys.exit(main())
