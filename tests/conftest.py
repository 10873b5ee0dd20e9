"""Shared fixtures: the shared data sets beside the checkout, free ports for real Flower.

Three tiers, all run by plain ``pytest`` (``bash scripts/test.sh``): the unit tests; those
marked ``integration`` (whole runs: a strategy through InProcessGrid for its rounds, replicas,
fault and security matrices, the examples, fresh interpreters, the docs build); those marked
``e2e`` (real ``flwr run`` simulations and loopback deployments), each named on its own line
as it starts (:class:`SlowTestNames`), so a quiet run's minutes without dots say which test
they belong to. ``pytest -m "not integration and not e2e"`` is the inner loop (under a
minute on 2 cores). Helpers the test modules share are in ``tests/helpers/``.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from fedcausal_flwr.cli import launch, supervisor
from fedcausal_flwr.threads import limit_blas_threads

limit_blas_threads()  # the suite computes as the App's processes do: one BLAS thread
# The suite is the operator of every ServerApp it starts (in process, or through the Flower
# processes that inherit this environment): their outputs root is the temporary folder, where
# each test's tmp_path lies. Tests of the root itself set or remove it with monkeypatch.
os.environ.setdefault("FEDCAUSAL_OUTPUTS_ROOT", tempfile.gettempdir())



class SlowTestNames:
    """Names each slow (``e2e``) test and its start time as it starts, in a quiet run too
    (``pytest_runtest_logstart`` runs outside output capture)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config, self.slow = config, set()

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        self.slow.update(item.nodeid for item in items if item.get_closest_marker("e2e"))

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if nodeid in self.slow and reporter and self.config.get_verbosity() <= 0:
            reporter.write_line(f"[slow test {time.strftime('%H:%M:%S')}] {nodeid}")


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(SlowTestNames(config), "slow-test-names")


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
    return {pid for pid, argv in supervisor._cmdlines().items()  # /proc, no pgrep
            if pid != os.getpid() and pattern.search(" ".join(argv))}


@pytest.fixture
def flower_pids() -> Callable[..., set[int]]:
    """:func:`flower_pids_on` as a fixture: ``assert not flower_pids(port, n)``."""
    return flower_pids_on


DEFAULT_PORTS = {"flwr local SuperLink": 39091, "old launcher deploy": 9200,
                 "flower-superlink default": 8000}


@pytest.fixture
def default_ports() -> dict[str, int]:
    """The default ports of other Flower work (``other_flower_work``), by what they are."""
    return DEFAULT_PORTS


@pytest.fixture(scope="session")
def other_flower_work(tmp_path_factory):
    """Other Flower work on the machine: a real flower-superlink on 39091 (Flower's default local
    port) and listeners on 9200 (the launcher's old fixed port) and 8000 (flower-superlink's
    default), started here for the e2e tests that must leave them alone.

    A port someone else already holds stays theirs; it is then only checked to still answer.
    Yields ``check()``, which asserts that everything is untouched.
    """
    home = tmp_path_factory.mktemp("other-flower")
    proc = None
    socks = []
    if launch.port_free(39091):
        log = open(home / "superlink.log", "w")  # noqa: SIM115 - closed below
        proc = subprocess.Popen(
            [str(Path(sys.executable).with_name("flower-superlink")), "--insecure",
             "--port", "39091", "--disable-runtime-dependency-installation"],
            env=launch.flwr_env(home), stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True)
        supervisor._wait_for_port(39091, proc)
    for port in (9200, 8000):
        if launch.port_free(port):
            s = socket.socket()
            s.bind(("127.0.0.1", port))
            s.listen()
            socks.append(s)

    def check() -> None:
        if proc is not None:
            assert proc.poll() is None, "the other SuperLink was stopped"
        for what, port in DEFAULT_PORTS.items():
            assert launch.port_open(port), f"{what} on {port} no longer answers"
        for s in socks:
            s.getsockname()  # still ours, still open

    yield check
    check()
    for s in socks:
        s.close()
    if proc is not None:  # only the process this fixture started, by PID
        os.killpg(proc.pid, 15)
        proc.wait(timeout=30)
        log.close()
