"""End to end: the launcher's secure deployment, and the launcher beside other Flower work.

Issue 10, items 4 and 5. For the whole module a second, unrelated SuperLink that this module
starts runs on Flower's default local port 39091 (the port ``flwr run ... local`` would
otherwise attach to), and plain sockets listen on 9200 (the launcher's old fixed port) and
8000 (``flower-superlink``'s default). The launcher runs with its defaults (free ports, no
``--port``) and must leave all of them alone.

- A TLS + SuperNode-auth deployment of FDBNL with 2 registered SuperNodes completes with W, A
  equal to the reference loop to 1e-8 (the insecure deployment of test_e2e_flower.py equals
  the same reference); a third SuperNode with an unregistered key is refused: Flower logs
  "Exit Code: 305" and the process exits with status 1 on its own; the run counts 2 clients.
- ``launch main simulate`` with ``FLWR_HOME`` set uses that home and exits 0.

About 2 minutes on 2 shared cores.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from fedcausal_flwr import launch
from fedcausal_flwr.core import dbn
from fedcausal_flwr.data.dbn import client_data
from fedcausal_flwr.results import load_result
from fedcausal_flwr.strategies import PFDBNLSettings

pytestmark = pytest.mark.e2e

RC = {"algorithm": "fdbnl", "seed": 7, "d": 5, "samples-per-client": 40, "lambda-w": 0.05,
      "lambda-a": 0.05, "node-wait-s": 60.0, "num-rounds": 3}
DEFAULT_PORTS = {"flwr local SuperLink": 39091, "old launcher deploy": 9200,
                 "flower-superlink default": 8000}


def check_against_reference(result: dict, k: int) -> None:
    rc = result["config"]["run_config"]
    moms = [dbn.moments(*client_data(rc, i, k)) for i in range(k)]
    state = dbn.fdbnl_reference(moms, PFDBNLSettings.from_run_config(rc))[0]
    assert result["status"] == "completed"
    assert result["metrics"]["clients"] == k
    assert result["timing"]["rounds"] == state.round
    np.testing.assert_allclose(result["estimates"]["W"], state.W, rtol=0, atol=1e-8)
    np.testing.assert_allclose(result["estimates"]["A"], state.A, rtol=0, atol=1e-8)


@pytest.fixture(scope="module")
def other_flower_work(tmp_path_factory):
    """A real flower-superlink on 39091 and listeners on 9200 and 8000, started here.

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
            env={**os.environ, "FLWR_HOME": str(home)}, stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True)
        launch._wait_for_port(39091, proc)
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


def test_secure_deployment_equals_reference_and_refuses_an_unregistered_node(
        tmp_path, other_flower_work, flower_pids):
    rc = {**RC, "outputs": str(tmp_path), "run-name": "secure"}
    seen: dict = {}

    def watch(node: subprocess.Popen) -> None:
        try:
            seen["bad_code"] = node.wait(timeout=90)
            seen["bad_exit_at"] = time.time()
        except subprocess.TimeoutExpired:
            seen["bad_code"] = None

    def on_start(dep: launch.Deployment) -> None:
        seen["port"], seen["secure"], seen["certs"] = dep.port, dep.secure, dep.certs
        bad = dep.start_supernode(2, register=False)  # a key the SuperLink never saw
        seen["thread"] = threading.Thread(target=watch, args=(bad,), daemon=True)
        seen["thread"].start()

    t0 = time.time()
    launch.deploy(2, rc, workdir=tmp_path / "deployment", timeout=400, on_start=on_start)
    ended = time.time()
    seen["thread"].join(timeout=90)
    print(f"secure deployment {time.time() - t0:.0f}s on port {seen['port']}")
    other_flower_work()
    port = seen["port"]
    assert port not in DEFAULT_PORTS.values()
    assert not flower_pids(port, launch.deploy_ports(2))
    assert seen["secure"] and seen["certs"]["ca"].exists()

    check_against_reference(load_result(tmp_path / "secure"), 2)
    work = tmp_path / "deployment"
    assert f"https://127.0.0.1:{port}" in (work / "superlink.log").read_text()  # TLS on
    cli = (work / "cli" / "config.toml").read_text()
    assert "root-certificates" in cli and "insecure" not in cli
    # refused: Flower logs exit code 305 (node auth) and the process ends with status 1,
    # by itself, before deploy stopped what it started
    bad_log = (work / "supernode2.log").read_text()
    assert seen["bad_code"] == 1 and seen["bad_exit_at"] < ended, (seen, bad_log[-2000:])
    assert "Exit Code: 305" in bad_log


def test_launcher_simulate_with_defaults_keeps_flwr_home_and_other_superlink(
        tmp_path, monkeypatch, other_flower_work):
    home = tmp_path / "users-flwr-home"
    monkeypatch.setenv("FLWR_HOME", str(home))
    t0 = time.time()
    code = launch.main(["simulate", "--nodes", "2", "--run-config",
                        launch.run_config_arg({**RC, "outputs": str(tmp_path),
                                               "run-name": "sim"})])
    print(f"simulation {time.time() - t0:.0f}s")
    assert code == 0
    other_flower_work()
    assert (home / "local-superlink" / "superlink.log").exists()  # the user's FLWR_HOME used
    assert not [pid for pid, argv in launch._cmdlines().items()  # its SuperLink is stopped
                if any(str(home) in a for a in argv)]
    check_against_reference(load_result(tmp_path / "sim"), 2)
