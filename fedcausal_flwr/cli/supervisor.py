"""The processes and ports a launch takes, and Flower's record of its runs.

A launcher call stops what it started and only that (:func:`stopping`, :class:`Started`: the
descendants of this process, found by parent chain while it is their Linux child subreaper),
the detached local SuperLink by its port and ``FLWR_HOME`` (:func:`_local_superlink_pids`);
ports are drawn free (:func:`free_port_block`); ``flwr ls`` tells a run's status
(:func:`flower_runs`).
"""

from __future__ import annotations

import ctypes
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


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
        """``pids`` with their short names (an exited process, whose command line is gone:
        its kernel name, else ``"exited process"``)."""
        argv = _cmdlines()
        out = {}
        for pid in pids:
            name = _name(argv.get(pid, []))
            if name in ("?", ""):
                try:
                    name = Path(f"/proc/{pid}/comm").read_text().strip() or "exited process"
                except OSError:
                    name = "exited process"
            out[pid] = name
        return out

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
        n = len(self.stopped)
        return (f"{n} process{'es' if n != 1 else ''} it started ("
                + ", ".join(f"{name} x{c}" for name, c in sorted(counts.items())) + ")"
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
        raise RuntimeError(f"{what}: port(s) {busy} in use (another SuperLink, or a run that "
                           "just ended: a port stays taken for about 60 s after); pass another "
                           "--port, or none and the launcher draws a free block")


def startup_patience(base: float = 60.0, cap: float = 600.0) -> float:
    """Seconds to wait for a local SuperLink: ``base`` times the load per core (the
    1-minute load average over the CPUs, at least 1), at most ``cap``. Its start-up is
    mostly imports and the database migration, which a busy machine slows in proportion."""
    try:
        load = os.getloadavg()[0] / (os.cpu_count() or 1)
    except OSError:
        load = 1.0
    return min(cap, base * max(1.0, load))


def _wait_for_port(port: int, proc: subprocess.Popen, timeout: float | None = None) -> None:
    timeout = startup_patience(120.0) if timeout is None else timeout
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
