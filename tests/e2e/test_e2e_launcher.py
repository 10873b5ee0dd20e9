"""End to end: the launcher as a tool (issue 25) under real ``flwr run`` simulations.

A plain Flower App written here (a ServerApp and ClientApp of a few lines, no outputs or
run-name declared) runs, and its verdict is ``flwr run``'s exit code and Flower's run status
(``flwr ls``); examples/fdbnl simulated
on its own four CSVs (``--node-data``: each virtual node reads its own file) gives the
estimates of the example's in-process run, which test_e2e_examples.py's deployment also
equals, so simulation and deployment give one graph, named by the CSV headers; and SIGTERM
to the launcher mid-run stops every process it started (``flwr run``, the detached local
SuperLink, the simulation process, Ray's processes), collected from /proc by parent chain
before the signal. About 1.5 minutes on 2 shared cores.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from fedcausal_flwr.cli import launch, supervisor
from fedcausal_flwr.results import RunResult
from tests.helpers.examples import assert_same_as_in_process

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "fdbnl"

PYPROJECT = """[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "plainapp"
version = "1.0.0"
description = "a plain Flower App"
license = "Apache-2.0"
dependencies = ["flwr[simulation]>=1.41.0"]

[tool.hatch.build.targets.wheel]
packages = ["."]

[tool.flwr.app]
publisher = "someone"

[tool.flwr.app.components]
serverapp = "server_app:app"
clientapp = "client_app:app"

[tool.flwr.app.config]
greeting = "hello"
rounds = 1
"""

SERVER = """import time

from flwr.app import ConfigRecord, Context, Message, RecordDict
from flwr.serverapp import Grid, ServerApp

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    while len(nodes := list(grid.get_node_ids())) < 2:
        time.sleep(0.2)
    for r in range(1, int(context.run_config["rounds"]) + 1):
        msgs = [Message(RecordDict({"c": ConfigRecord({"say": context.run_config["greeting"]})}),
                        dst_node_id=n, message_type="query") for n in nodes]
        said = [str(m.content["c"]["said"]) for m in grid.send_and_receive(msgs, timeout=60)
                if m.has_content()]
        print(f"round {r}: {sorted(said)}", flush=True)
        time.sleep(0.5)
"""

CLIENT = """from flwr.app import ConfigRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp

app = ClientApp()


@app.query()
def query(msg: Message, context: Context) -> Message:
    said = f"{msg.content['c']['say']} from {context.node_config['partition-id']}"
    return Message(RecordDict({"c": ConfigRecord({"said": said})}), reply_to=msg)
"""


def plain_app(root: Path) -> Path:
    """The plain App's folder."""
    root.mkdir(parents=True)
    for name, text in (("pyproject.toml", PYPROJECT), ("server_app.py", SERVER),
                       ("client_app.py", CLIENT)):
        (root / name).write_text(text)
    return root


def test_a_plain_flower_app_runs_and_its_verdict_is_flwr_runs_exit_code(
        tmp_path, monkeypatch, capfd):
    home = tmp_path / "flwr-home"
    monkeypatch.setenv("FLWR_HOME", str(home))
    app = plain_app(tmp_path / "plainapp")
    code = launch.main(["simulate", "--nodes", "2", "--app", str(app),
                        "--run-config", 'greeting="hi"'])
    out = capfd.readouterr().out
    assert code == 0, out[-3000:]
    assert "round 1: ['hi from 0', 'hi from 1']" in out
    assert "the verdict is flwr run's exit code and Flower's run status: finished:completed" in out
    assert out.rstrip().splitlines()[-1] == (
        "clients: ? used of 2 started (the App writes no result.json)")
    assert not [pid for pid, argv in supervisor._cmdlines().items()  # nothing left running
                if any(str(home) in a for a in argv)]


def test_simulation_on_own_csvs_equals_the_in_process_run_and_names_the_graph(
        tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(  # the App's processes import this checkout
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    monkeypatch.setenv("FLWR_HOME", str(tmp_path / "flwr-home"))
    files = sorted((EXAMPLE / "data").glob("site*.csv"))
    argv = ["simulate", "--app", str(EXAMPLE), "--run-config",
            f'outputs="{tmp_path / "outputs"}" dbn.num-rounds=5']
    for f in files:
        argv += ["--node-data", str(f)]
    code = launch.main(argv)
    out = capfd.readouterr().out
    assert code == 0, out[-3000:]
    assert out.rstrip().splitlines()[-1] == "clients: 4 used of 4 started"
    result = RunResult.load(tmp_path / "outputs" / "fdbnl")  # the example's declared run-name
    assert result.status == "completed" and result.metrics["clients"] == 4
    assert_same_as_in_process(result, "fdbnl", tmp_path, **{"dbn.num-rounds": 5})
    names = files[0].read_text().splitlines()[0].split(",")
    g = result.to_networkx(tau=0.2)
    assert sorted(g.nodes) == sorted(names) and g.number_of_edges() > 0


def test_sigterm_mid_run_stops_every_process_the_launcher_started(tmp_path):
    env = {**os.environ, "FLWR_HOME": str(tmp_path / "flwr-home"),
           "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [
               os.environ.get("PYTHONPATH")])])}
    app = plain_app(tmp_path / "plainapp")
    proc = subprocess.Popen(
        [sys.executable, "-m", "fedcausal_flwr.cli.launch", "simulate", "--nodes", "2", "--app",
         str(app), "--run-config", "rounds=600"], env=env, cwd=tmp_path, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    reader.start()
    try:
        deadline = time.time() + 180
        while not any(line.startswith("round 2:") for line in lines):
            assert proc.poll() is None and time.time() < deadline, "".join(lines)[-3000:]
            time.sleep(0.5)
        tree = launch.descendants({proc.pid})
        names = {supervisor._name(a) for p, a in supervisor._cmdlines().items() if p in tree}
        assert {"flwr", "flower-superlink", "flower-superexec"} <= names, names
        assert any("ray" in n for n in names), names  # Ray's processes are in the run's tree
        t0 = time.time()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=90) == 128 + signal.SIGTERM
        print(f"{len(tree)} processes ({sorted(names)}) stopped in {time.time() - t0:.1f}s")
    finally:
        if proc.poll() is None:  # only the launcher this test started
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    reader.join(timeout=10)
    text = "".join(lines)
    assert "interrupted by SIGTERM: stopped" in text, text[-3000:]
    deadline = time.time() + 5
    while (alive := {p for p in tree if supervisor._alive(p)}) and time.time() < deadline:
        time.sleep(0.2)
    assert not alive, {p: supervisor._cmdlines().get(p) for p in alive}
