"""Shared test helpers: the shared data sets beside the checkout, free ports for real Flower.

Two tiers: ``pytest -m "not e2e"`` is the fast tier; plain ``pytest`` also runs the tests
marked ``e2e`` (real ``flwr run`` simulations and loopback deployments).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from fedcausal_flwr import launch

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def shared_data_path(relpath: str = "") -> Path:
    """``../shared/data/<relpath>`` beside the checkout; skips the test when it is absent.

    Parameters
    ----------
    relpath
        Path below ``shared/data`` (a file or a folder); empty for the folder itself.

    Returns
    -------
    Path
        The existing path.
    """
    path = SHARED_DATA / relpath
    if not path.exists():
        pytest.skip(f"shared data {path} not available (../shared/data beside the checkout)")
    return path


@pytest.fixture
def shared_data() -> Callable[[str], Path]:
    """:func:`shared_data_path` as a fixture: ``shared_data("netsim/sim1.mat")``."""
    return shared_data_path


@pytest.fixture
def free_ports() -> Callable[[int], int]:
    """A function ``n -> port``: the first of ``n`` contiguous free TCP ports on 127.0.0.1.

    ``launch.simulate`` needs :data:`launch.SIMULATE_PORTS` ports from ``port``;
    ``launch.deploy`` needs ``launch.deploy_ports(num_supernodes)``.
    """
    return launch.free_port_block


def flower_pids_on(port: int, n: int = 1) -> set[int]:
    """PIDs of Flower processes (``flower-*``, ``flwr-*``) naming a port in ``port..port+n-1``.

    Only a check that a run left nothing behind; tests never stop processes by pattern.
    """
    ports = "|".join(str(p) for p in range(port, port + n))
    pattern = re.compile(rf"(flower|flwr)-\S+ .*(--port |127\.0\.0\.1:)({ports})( |$)")
    return {pid for pid, argv in launch._cmdlines().items()  # /proc, no pgrep
            if pid != os.getpid() and pattern.search(" ".join(argv))}


@pytest.fixture
def flower_pids() -> Callable[..., set[int]]:
    """:func:`flower_pids_on` as a fixture: ``assert not flower_pids(port, n)``."""
    return flower_pids_on
