"""Impersonation in a real authenticated deployment (issue 20, "Trust no one").

The launcher's deployment: TLS, SuperNode authentication (a registered key per SuperNode), and
so ``bind-partitions=true``. FDBNL with 3 SuperNodes; after round 2 partition 1's SuperNode is
stopped (SIGTERM to the process group this test started, by PID) and a SuperNode under ANOTHER
registered key starts with ``partition-id=1``. Once it has answered ``query.info`` it is stopped
and partition 1's own key starts again: Flower gives it its node id again. The run refuses the
other key's node, naming it, client 1 and the node that holds client 1's partition
(result.json's ``dropped``, and a WARNING in the ServerApp's log that ``flwr run --stream``
prints), and client 1 takes part again under its own node id. The run completes and W, A
equal FDBNL in which client 1 sat out exactly the rounds it missed. About 2 minutes on 2
shared cores.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from fedcausal_flwr.appconfig import view
from fedcausal_flwr.cli import launch
from fedcausal_flwr.dbn import model as dbn
from fedcausal_flwr.dbn.data import client_data
from fedcausal_flwr.results import load_result
from fedcausal_flwr.strategies import FDBNLSettings
from tests.helpers.e2e import rounds_done

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
K, CLAIMED = 3, 1
RC = {"algorithm": "fdbnl", "seed": 7, "dbn.d": 5, "dbn.samples-per-client": 40,
      "dbn.lambda-w": 0.05, "dbn.lambda-a": 0.05, "node-wait-s": 60.0, "dbn.num-rounds": 7,
      "round-timeout-s": 20.0, "node-grace-s": 20.0}
REFUSED = re.compile(r"node (\d+) \(partition-id 1\): claims client 1, whose partition is bound "
                     r"to node (\d+) \(bind-partitions=true: only that node may rejoin\); refused")


def replay(rc: dict, history: list[dict]) -> dbn.ServerState:
    """FDBNL with the clients of each recorded round (all K, or all but client CLAIMED)."""
    rc = view("fdbnl", rc)  # the dbn section's keys, as the App reads them
    s = FDBNLSettings.from_run_config(rc)
    moms = [dbn.moments(*client_data(rc, i, K)) for i in range(K)]
    state = dbn.initial_state(rc["d"], 1, s.rho1, s.rho2)
    for h in history:
        ids = [i for i in range(K) if h["n_clients"] == K or i != CLAIMED]
        local = {i: dbn.admm_local_step(moms[i], *dbn.fdbnl_client_payload(state, i),
                                        rho2=state.rho2) for i in ids}
        state = dbn.fdbnl_server_round(state, local, **s.fdbnl_round_args())
    return state


def wait_for(test, seconds: float) -> bool:
    """Poll ``test()`` until it is true or ``seconds`` pass."""
    deadline = time.time() + seconds
    while not test() and time.time() < deadline:
        time.sleep(0.2)
    return bool(test())


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the process group this test's deployment started, by its PID (a SuperNode
    stopped so leaves the SuperLink at once)."""
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=30)


def answered_query_info(work: Path, name: str) -> bool:
    """Whether the log of a SuperNode that ``deploy`` restarted (``<name>-<n>.log``) shows its
    ``query.info`` reply sent in full (a SuperNode stopped mid-upload leaves the server's pull
    waiting for Flower's object-push session to expire: minutes)."""
    return any("Sent successfully" in log.read_text(errors="replace").partition(
        "Sending: query.info")[2] for log in work.glob(f"{name}-*.log"))


def test_another_registered_key_cannot_take_a_bound_partition(tmp_path, monkeypatch, capfd,
                                                              free_ports, flower_pids):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(  # the Flower processes import this checkout
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    monkeypatch.setenv("FLWR_HOME", str(tmp_path / "flwr-home"))
    rc = {**RC, "outputs": str(tmp_path), "run-name": "bound"}
    out, work = tmp_path / "bound" / "result.json", tmp_path / "deployment"
    port = free_ports(launch.deploy_ports(K))
    seen: dict[str, object] = {}

    def impersonate(dep: launch.Deployment) -> None:
        if not wait_for(lambda: rounds_done(out) >= 2, 240):
            return
        stop(dep.supernodes[CLAIMED])
        seen["stopped_after"] = rounds_done(out)
        impostor = dep.start_supernode(CLAIMED)  # another registered key, partition-id=1
        seen["asked"] = wait_for(lambda: answered_query_info(work, f"supernode{CLAIMED}"), 120)
        stop(impostor)  # it holds partition 1's port; partition 1's own key comes back
        seen["back_after"] = rounds_done(out)
        dep.start_supernode(CLAIMED, same_key=True)

    def on_start(dep: launch.Deployment) -> None:
        seen["secure"] = dep.secure
        seen["thread"] = threading.Thread(target=impersonate, args=(dep,), daemon=True)
        seen["thread"].start()

    t0 = time.time()
    launch.deploy(K, rc, workdir=work, port=port, timeout=420, on_start=on_start)
    seen["thread"].join(timeout=60)
    wall = time.time() - t0
    streamed = capfd.readouterr().out  # flwr run --stream: the ServerApp's log
    assert seen["secure"] and not flower_pids(port, launch.deploy_ports(K))
    assert seen.get("asked") and "back_after" in seen, seen  # the events happened mid-run

    result = load_result(tmp_path / "bound")
    n = [h["n_clients"] for h in result["history"]]
    dropped = result["metrics"]["dropped"]
    print(f"deployment {wall:.0f}s, node stopped after round {seen['stopped_after']}, its key "
          f"back after round {seen['back_after']}, n_clients {n}, dropped {dropped}")
    assert result["status"] == "completed", result["status"]
    assert result["config"]["strategy"]["bind_partitions"] is True  # the launcher set it
    # the other key's node: refused and named, with the node that holds client 1's partition
    refusals = [m for d in dropped if (m := REFUSED.search(d))]
    assert len(refusals) == 1, (dropped, streamed[-4000:])
    impostor, holder = (int(g) for g in refusals[0].groups())
    assert impostor != holder
    assert re.search(r"WARNING.*dropped " + REFUSED.pattern, streamed), streamed[-3000:]
    assert "rejoined as node" not in streamed  # nobody took client 1's place
    # partition 1's key came back under its node id (Flower keeps a registered key's id)
    log = (work / "superlink.log").read_text(errors="replace")
    assert log.count(f"Activated node_id={holder}") == 2, log[-3000:]
    assert log.count(f"Activated node_id={impostor}") == 1
    assert len(n) == RC["dbn.num-rounds"] and n[:2] == [K, K] and n[-1] == K
    assert set(n) <= {K - 1, K} and K - 1 in n
    assert all(d.startswith(("client 1", f"node {impostor}")) for d in dropped), dropped
    state = replay(result["config"]["run_config"], result["history"])
    np.testing.assert_allclose(result["estimates"]["W"], state.W, rtol=0, atol=1e-8)
    np.testing.assert_allclose(result["estimates"]["A"], state.A, rtol=0, atol=1e-8)
