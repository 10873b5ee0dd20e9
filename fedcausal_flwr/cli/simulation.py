"""``flwr run <app> local``: a Flower simulation on free ports, stopped when it ends."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fedcausal_flwr.cli.runconfig import (
    default_flwr_home,
    find_app_dir,
    flwr_env,
    run_config_arg,
)
from fedcausal_flwr.cli.supervisor import (
    _check_free,
    _flwr,
    _kill,
    _local_superlink_pids,
    flower_runs,
    free_port_block,
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
