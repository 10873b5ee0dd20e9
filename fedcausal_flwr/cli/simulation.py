"""``flwr run <app> local``: a Flower simulation on free ports, stopped when it ends.

The launcher starts the local simulation SuperLink itself (:func:`start_local_superlink`,
Flower's own command line, on the run's ports and ``FLWR_HOME``) and waits for it with a
patience that grows with the machine's load (:func:`startup_patience`): ``flwr run`` alone
gives it a fixed 15 s (``flwr.cli.constant.LOCAL_SUPERLINK_STARTUP_TIMEOUT``, no setting) and
kills it after, which on a busy machine can interrupt its database migration and leave
``local-superlink/state.db`` half-built (every later start then fails with ``table ...
already exists``). Such a database is moved aside, named, and the start retried once
(:func:`half_migrated`). ``flwr run`` then finds the SuperLink answering and uses it.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
import tomllib
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fedcausal_flwr.cli.runconfig import (
    default_flwr_home,
    find_app_dir,
    flwr_env,
    outputs_env,
    run_config_arg,
)
from fedcausal_flwr.cli.supervisor import (
    _check_free,
    _flwr,
    _kill,
    _local_superlink_pids,
    flower_runs,
    free_port_block,
    startup_patience,
    with_descendants,
)

SIMULATE_PORTS = 3  # local SuperLink: HTTP API on port, control API address port + 2


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
    env = {**flwr_env(home), **outputs_env(run_config),
           "FLWR_LOCAL_SUPERLINK_HTTP_API_PORT": str(port),
           "FLWR_LOCAL_CONTROL_API_PORT": str(port + 2), **simulated_node_env(node_configs)}
    _check_free(range(port, port + SIMULATE_PORTS), "simulate")
    check_local_connection(home)
    link = start_local_superlink(port, home, env)
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
        _kill(with_descendants(_local_superlink_pids(port, home) | {link.pid}))
        try:
            link.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


def check_local_connection(home: Path) -> None:
    """A RuntimeError saying what to do when ``home``'s ``config.toml`` exists without the
    ``local`` connection ``flwr run <app> local`` needs (Flower writes it only into a home that
    has no config.toml; a deployment's config written over it loses it)."""
    path = Path(home) / "config.toml"
    try:
        doc = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return  # none yet (Flower writes its default) or Flower's to judge
    if "local" not in doc.get("superlink", {}):
        raise RuntimeError(
            f"{path} has no 'local' connection, which a simulation needs (it names "
            f"{', '.join(sorted(k for k in doc.get('superlink', {}) if k != 'default')) or 'none'}"
            f"): use another FLWR_HOME for the simulation (unset FLWR_HOME: ./.flwr), or add "
            "[superlink.local] with address = \":local:\" to that file")


def local_superlink_files(home: Path) -> tuple[Path, Path, Path]:
    """``(state.db, superlink.log, superlink.stderr)`` of ``home``'s local SuperLink (the
    first two where ``flwr run`` puts them)."""
    folder = Path(home) / "local-superlink"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / "state.db", folder / "superlink.log", folder / "superlink.stderr"


def local_superlink_command(port: int, home: Path) -> list[str]:
    """Flower's own command line for the local simulation SuperLink
    (``flwr.cli.local_superlink``), on ``port`` (control API ``port + 2``) and ``home``."""
    db, log, _ = local_superlink_files(home)
    exe = Path(sys.executable).with_name("flower-superlink")
    return [str(exe) if exe.exists() else "flower-superlink", "--insecure", "--simulation",
            "--isolation", "subprocess", "--control-api-address", f"127.0.0.1:{port + 2}",
            "--host", "127.0.0.1", "--port", str(port), "--log-file", str(log),
            "--log-rotation-interval-hours", "24", "--log-rotation-backup-count", "7",
            "--database", str(db)]


def half_migrated(db: Path) -> bool:
    """Whether ``db`` (a SuperLink's state.db) holds tables but no Alembic version: a
    migration interrupted before it recorded itself, which Flower cannot resume (``table
    ... already exists``)."""
    if not Path(db).is_file() or Path(db).stat().st_size == 0:
        return False
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
            tables = {r[0] for r in con.execute(
                "SELECT name FROM sqlite_master WHERE type='table'")}
            if not tables - {"alembic_version"}:
                return False
            return "alembic_version" not in tables or not con.execute(
                "SELECT version_num FROM alembic_version").fetchall()
    except sqlite3.Error:
        return True


def set_aside(db: Path) -> Path:
    """Move ``db`` (and its ``-wal``/``-shm`` files) to ``<db>.broken-<timestamp>``; the new
    name. Nothing is deleted: it is the local simulation SuperLink's record of past runs."""
    aside = db.with_name(f"{db.name}.broken-{time.strftime('%Y%m%d-%H%M%S')}")
    for suffix in ("", "-wal", "-shm"):
        part = db.with_name(db.name + suffix)
        if part.exists():
            part.replace(aside.with_name(aside.name + suffix))
    return aside


def _answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=0.5) as r:
            return 200 <= r.status < 300
    except OSError:
        return False


def start_local_superlink(port: int, home: Path, env: dict[str, str],
                          patience: float | None = None) -> subprocess.Popen:
    """Start the local simulation SuperLink ``flwr run`` would start, and wait until it
    answers (up to ``patience`` s, default :func:`startup_patience`).

    A half-built ``state.db`` (:func:`half_migrated`), found before the start or named by the
    SuperLink's error when it exits, is set aside (:func:`set_aside`, said so) and the start
    retried once. Raises a RuntimeError saying what the SuperLink's log shows and what to do.
    """
    db, log, err = local_superlink_files(home)
    patience = startup_patience() if patience is None else patience
    for attempt in (1, 2):
        if half_migrated(db):
            print(f"local SuperLink: {db} is half-built (a start interrupted during its "
                  f"migration); moved it to {set_aside(db)} and starting afresh",
                  file=sys.stderr, flush=True)
        t0 = time.time()
        print(f"Starting the local SuperLink on 127.0.0.1:{port} (waiting up to "
              f"{patience:.0f} s on this machine's load) ...", flush=True)
        with err.open("w") as stderr:
            proc = subprocess.Popen(local_superlink_command(port, home),
                                    env={**env, "FLWR_DISABLE_UPDATE_CHECK": "1"},
                                    stdout=subprocess.DEVNULL, stderr=stderr,
                                    start_new_session=True)
        while time.time() - t0 < patience:
            if proc.poll() is not None:
                break
            if _answers(port):
                waited = time.time() - t0
                if waited > 15:
                    print(f"local SuperLink answered after {waited:.0f} s (flwr run alone "
                          "waits 15 s)", flush=True)
                return proc
            time.sleep(0.2)
        else:
            proc.kill()
            proc.wait()
            raise RuntimeError(
                f"the local SuperLink did not answer on 127.0.0.1:{port} within {patience:.0f} "
                f"s (load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores); its log: {log} "
                f"and {err}. Try again when the machine is less busy")
        said = err.read_text(errors="replace") if err.exists() else ""
        if attempt == 1 and "already exists" in said and db.exists():
            print(f"local SuperLink: {db} cannot be migrated ({last_error(said)}); moved it "
                  f"to {set_aside(db)} and starting afresh", file=sys.stderr, flush=True)
            continue
        break
    raise RuntimeError(
        f"the local SuperLink exited with code {proc.returncode}: {last_error(said)} "
        f"(full output: {err}; log: {log})" + (
            f". Its database {db} may be damaged: move it away (mv {db} {db}.old) and run "
            "again" if "sqlite" in said.lower() or "alembic" in said.lower() else ""))


def last_error(text: str) -> str:
    """The last line of a process's error output that says something (a traceback ends with
    the error)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else "no error output"


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
