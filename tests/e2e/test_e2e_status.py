"""End to end: kill the ServerApp of a real deployment mid-run (issue 11, item 5).

A loopback deployment (SuperLink + 2 SuperNodes, :func:`launch.deploy`) runs FDBNL for many
rounds; once two rounds are checkpointed, the ``flwr-serverapp`` process is SIGKILLed. It is
found only among this test's own descendants (SuperLink -> SuperExec -> ServerApp, via the
/proc parent chain), never by a name across the machine. Then ``load_result`` must say
``interrupted`` and keep the finished rounds, and the launcher's verdict must be non-zero.
``flwr run --stream`` exits 0 about a minute after its ServerApp died, so the test ends it
(its own child) instead of waiting. About 1 to 2 minutes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from fedcausal_flwr.cli import launch
from fedcausal_flwr.results import load_result

pytestmark = pytest.mark.e2e


def _ppid(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2:].split()[1])


def _argv(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def descendants(root: int) -> dict[int, list[str]]:
    """Every live process below ``root`` (by the /proc parent chain), with its argv."""
    parents = {int(p.name): _ppid(int(p.name)) for p in Path("/proc").iterdir()
               if p.name.isdigit()}
    out, frontier = {}, {root}
    while frontier:
        frontier = {pid for pid, pp in parents.items() if pp in frontier and pid not in out}
        out.update({pid: _argv(pid) for pid in frontier})
    return out


def runs(argv: list[str], exe: str) -> bool:
    return any(Path(a).name == exe for a in argv[:2])


def test_killed_serverapp_reads_interrupted_and_keeps_finished_rounds(tmp_path, free_ports,
                                                                      flower_pids):
    out = tmp_path / "killed"
    rc = {"algorithm": "fdbnl", "seed": 7, "dbn.d": 5, "dbn.samples-per-client": 40,
          "dbn.num-rounds": 60, "dbn.h-tol": 1e-30, "node-wait-s": 60.0,
          "outputs": str(tmp_path), "run-name": "killed"}
    port = free_ports(launch.deploy_ports(2))
    outcome: dict[str, BaseException | None] = {}

    def deploy() -> None:
        try:
            launch.deploy(2, rc, workdir=tmp_path / "deployment", port=port, timeout=300)
            outcome["error"] = None
        except BaseException as e:  # noqa: BLE001 - checked below
            outcome["error"] = e

    thread = threading.Thread(target=deploy, daemon=True)
    thread.start()
    deadline = time.time() + 150
    doc: dict = {}
    while time.time() < deadline and thread.is_alive():
        if (out / "result.json").exists():
            doc = load_result(out)
            if len(doc["history"]) >= 2:
                break
        time.sleep(0.5)
    assert len(doc.get("history", [])) >= 2, f"no 2 rounds in time: {outcome}, {doc}"
    assert doc["status"] == "running"

    # the ServerApp: below our SuperLink -> SuperExec, and the writer of result.json
    mine = descendants(os.getpid())
    link = [p for p, a in mine.items() if runs(a, "flower-superlink") and str(port) in a]
    assert len(link) == 1, mine
    below = descendants(link[0])
    servers = [p for p, a in below.items() if runs(a, "flwr-serverapp")]
    assert servers == [doc["process"]["pid"]], (servers, doc["process"], below)
    assert runs(below.get(_ppid(servers[0]), []), "flower-superexec")

    os.kill(servers[0], signal.SIGKILL)
    time.sleep(1.0)
    killed = load_result(out)
    assert killed["status"] == "interrupted", killed["status"]
    assert "running" in killed["status_detail"] and str(servers[0]) in killed["status_detail"]
    finished = killed["history"]
    assert len(finished) >= 2 and [h["round"] for h in finished] == \
        list(range(1, len(finished) + 1))
    assert killed["estimates"]["W"] and killed["metrics"] == {}  # a checkpoint, not an end
    assert launch.report(out) == 1  # the launcher's verdict

    # flwr run (our own child) would stream for another minute: end it; deploy cleans up
    flwr_run = [p for p, a in descendants(os.getpid()).items()
                if len(a) > 2 and runs(a, "flwr") and a[1 if Path(a[0]).name == "flwr"
                                                        else 2] == "run"]
    for pid in flwr_run:
        os.kill(pid, signal.SIGTERM)
    thread.join(timeout=60)
    assert not thread.is_alive()
    assert outcome["error"] is None or isinstance(outcome["error"],
                                                  subprocess.CalledProcessError)
    assert not flower_pids(port, launch.deploy_ports(2))
    after = load_result(out)  # the zombie is reaped now: still interrupted, rounds kept
    assert after["status"] == "interrupted" and after["history"] == finished
