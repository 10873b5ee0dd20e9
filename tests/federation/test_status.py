"""The status contract of result.json (issue 11, item 5), in process.

"running" with the writer's pid/host/heartbeat while rounds go on; "completed" only at the end;
"stopped: ..." / "failed: ..." with the reason, always written; readers see "interrupted" when
the writer of a running file is gone; the launcher's verdict; plots never lose a result;
metrics.clients counts clients that took part; wire_log stays bounded unless auditing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest
from flwr.clientapp import ClientApp

from fedcausal_flwr import server_app
from fedcausal_flwr.cli import launch
from fedcausal_flwr.client_app import app as client_app
from fedcausal_flwr.clients import FDBNLClient, reply
from fedcausal_flwr.dbn import app as app_dbn
from fedcausal_flwr.dbn.data import client_data
from fedcausal_flwr.results import (
    STALE_AFTER_S,
    RunResult,
    is_completed,
    load_result,
    process_info,
    run_status,
    writer_alive,
)
from fedcausal_flwr.strategies import FDBNL
from fedcausal_flwr.testing import InProcessGrid

RC = {"algorithm": "fdbnl", "seed": 3, "dbn.d": 4, "dbn.lags": 1, "dbn.samples-per-client": 30,
      "dbn.num-rounds": 4, "dbn.lambda-w": 0.05, "dbn.lambda-a": 0.05, "min-nodes": 2,
      "node-wait-s": 5.0}


def app_run(tmp_path, rc: dict, k: int = 3, app=client_app) -> tuple[RunResult, dict]:
    rc = {**rc, "outputs": str(tmp_path), "run-name": "run"}
    result = server_app.run(InProcessGrid(app, k, rc), rc)
    return result, load_result(tmp_path / "run")


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def running_doc(tmp_path, **process) -> dict:
    r = RunResult("fdbnl", {}, history=[{"round": 1, "seconds": 2.0}], status="running")
    r.process = {**r.process, **process}
    r.save(tmp_path)
    return json.loads((tmp_path / "result.json").read_text())


# ---- writing ----------------------------------------------------------------------------
def test_every_checkpoint_says_running_with_its_writer_and_the_end_says_completed(tmp_path):
    seen = []
    out = tmp_path / "run"
    strategy = app_dbn.strategy("fdbnl", RC)

    def checkpoint(res):
        res.save(out)
        seen.append((load_result(out)["status"], len(res.history),
                     json.loads((out / "result.json").read_text())["process"]))

    strategy.checkpoint = checkpoint
    result = strategy.start(grid=InProcessGrid(client_app, 3, RC))
    assert result.status == "completed"
    statuses = [s for s, _, _ in seen]
    assert statuses == ["running"] * (len(seen) - 1) + ["completed"]
    assert [n for _, n, _ in seen[:-1]] == list(range(0, 5))  # a file from the start
    proc = seen[0][2]
    assert proc["pid"] == os.getpid() and proc["host"] == process_info()["host"]
    assert proc["heartbeat"] <= seen[-1][2]["heartbeat"] <= time.time()
    assert proc["stale_after_s"] >= STALE_AFTER_S


@pytest.mark.integration
def test_the_app_writes_completed_config_and_plots(tmp_path):
    result, doc = app_run(tmp_path, RC)
    assert doc["status"] == "completed" == result.status and is_completed(doc["status"])
    assert doc["config"]["run_config"]["dbn.d"] == 4 and "lambda_w" in doc["config"]["strategy"]
    assert doc["errors"] == [] and len(doc["history"]) == 4
    assert (tmp_path / "run" / "graphs.png").exists()


@pytest.mark.parametrize("rc,message", [
    ({"dbn.lambda-w": "abc"}, "'dbn.lambda-w'"),
    ({"algorithm": "nope"}, "unknown algorithm 'nope'"),
    ({"dbn.d": 100000}, "'dbn.d' = 100000: must be <= 2000"),
])
def test_bad_settings_still_write_failed(tmp_path, rc, message):
    """Failures after the run config is read: result.json with "failed: <error>", raised."""
    with pytest.raises(ValueError):
        app_run(tmp_path, {**RC, **rc})
    doc = load_result(tmp_path / "run")
    assert doc["status"].startswith("failed: ") and message in doc["status"], doc["status"]
    assert doc["config"]["run_config"]["outputs"] == str(tmp_path)
    assert not is_completed(doc["status"])


def test_a_strategy_crash_writes_failed_and_keeps_finished_rounds(tmp_path, monkeypatch):
    calls = []
    real = FDBNL.aggregate

    def aggregate(self, replies):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("boom in round 3")
        return real(self, replies)

    monkeypatch.setattr(FDBNL, "aggregate", aggregate)
    with pytest.raises(RuntimeError, match="boom"):
        app_run(tmp_path, RC)
    doc = load_result(tmp_path / "run")
    assert doc["status"] == "failed: RuntimeError: boom in round 3"
    assert len(doc["history"]) == 2 and doc["metrics"]["rounds"] == 3
    assert doc["estimates"]["W"] and doc["config"]["run_config"]["dbn.d"] == 4


@pytest.mark.integration
def test_too_few_clients_is_stopped_with_the_reason(tmp_path):
    doc = app_run(tmp_path, {**RC, "min-nodes": 4})[1]
    assert doc["status"].startswith("stopped: ") and "min-nodes=4" in doc["status"]


@pytest.mark.integration
def test_a_plot_crash_never_loses_the_result(tmp_path, monkeypatch):
    import fedcausal_flwr.plots as plots

    def broken(*args, **kwargs):
        raise MemoryError("cannot draw 100000 x 100000")

    monkeypatch.setattr(plots, "plot_graphs", broken)
    monkeypatch.setattr(app_dbn, "truth", lambda *a: (_ for _ in ()).throw(OSError("disk")))
    result, doc = app_run(tmp_path, RC)
    assert doc["status"] == "completed" and len(doc["history"]) == 4
    assert any("plot graphs.png: MemoryError" in e for e in doc["errors"]), doc["errors"]
    assert any("truth for the plot: OSError" in e for e in doc["errors"]), doc["errors"]
    assert (tmp_path / "run" / "history.png").exists()


def test_clients_counts_those_that_took_part(tmp_path):
    """Client 2 answers query.info but every train message with an error."""
    app = ClientApp()

    @app.train("local")
    @app.query("info")
    def handle(msg, context):
        pid = int(context.node_config["partition-id"])
        if pid == 2 and msg.metadata.message_type.startswith("train"):
            raise RuntimeError("client 2 is broken")
        return reply(FDBNLClient(*client_data(RC, pid, 3), pid, 3), msg)

    result = app_dbn.strategy("fdbnl", RC).start(grid=InProcessGrid(app, 3, RC))
    assert result.status == "completed"
    assert result.metrics["clients"] == 2 and result.metrics["clients_discovered"] == 3


# ---- reading: interrupted ----------------------------------------------------------------
def test_running_file_of_a_live_writer_reads_running(tmp_path):
    doc = running_doc(tmp_path)
    assert run_status(doc) == "running" and load_result(tmp_path)["status"] == "running"


def test_running_file_of_a_dead_process_reads_interrupted(tmp_path):
    running_doc(tmp_path, pid=dead_pid(), pid_start=None)
    doc = load_result(tmp_path)
    assert doc["status"] == "interrupted" and "is gone" in doc["status_detail"]
    assert doc["history"] == [{"round": 1, "seconds": 2.0}]  # finished rounds kept


def test_zombie_and_reused_pid_read_interrupted(tmp_path):
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.time() + 10
    while open(f"/proc/{p.pid}/stat").read().split(") ")[1][0] != "Z":
        assert time.time() < deadline
        time.sleep(0.05)
    alive, why = writer_alive({"pid": p.pid, "host": process_info()["host"]})
    assert not alive and "exited" in why
    p.wait()
    me = process_info()
    alive, why = writer_alive({**me, "pid_start": me["pid_start"] + 1})
    assert not alive and "reused" in why


def test_other_host_uses_the_heartbeat_bound(tmp_path):
    doc = running_doc(tmp_path, host="elsewhere.example")
    assert run_status(doc) == "running"  # fresh heartbeat
    assert run_status(doc, stale_after_s=0.0) == "interrupted"
    proc = {**doc["process"], "heartbeat": time.time() - STALE_AFTER_S - 5}
    assert not writer_alive(proc)[0]
    proc = {**proc, "stale_after_s": 10 * STALE_AFTER_S}  # long rounds stretch the bound
    assert writer_alive(proc)[0]


def test_stale_bound_grows_with_the_longest_round():
    r = RunResult("x", {}, history=[{"round": 1, "seconds": 1000.0}], status="running")
    assert r.to_dict()["process"]["stale_after_s"] == 3000.0


# ---- the launcher's verdict -------------------------------------------------------------
@pytest.mark.parametrize("status,code", [("completed", 0), ("stopped: too few", 1),
                                         ("failed: ValueError: x", 1)])
def test_launcher_exits_zero_only_when_completed(tmp_path, capsys, status, code):
    RunResult("fdbnl", {}, status=status, metrics={"rounds": 3, "shd_w": 2}).save(tmp_path)
    assert launch.report(tmp_path) == code
    out = capsys.readouterr()
    assert status in out.out and "shd_w=2" in out.out


def test_launcher_fails_without_a_fresh_result(tmp_path):
    assert launch.report(tmp_path) == 1  # none
    RunResult("fdbnl", {}).save(tmp_path)
    assert launch.report(tmp_path, since=time.time() + 60) == 1  # a previous run's file
    running_doc(tmp_path, pid=dead_pid(), pid_start=None)
    assert launch.report(tmp_path) == 1  # interrupted


def test_launcher_run_configs_add_up_and_name_the_run(monkeypatch, tmp_path):
    seen = {}

    def fake_simulate(n, cfg, **kw):
        seen.update(cfg)
        RunResult("fdbnl", {}).save(launch.run_output(cfg))

    monkeypatch.setattr(launch, "simulate", fake_simulate)
    code = launch.main(["simulate", "--run-config", f'run-name="main" outputs="{tmp_path}"',
                        "--run-config", 'algorithm="pfdbnl"'])
    assert code == 0 and seen["run-name"] == "main" and seen["algorithm"] == "pfdbnl"
    monkeypatch.setattr(launch, "simulate", lambda n, cfg, **kw: None)  # writes nothing
    assert launch.main(["simulate", "--run-config", f'outputs="{tmp_path}"']) == 1


# ---- wire_log ---------------------------------------------------------------------------
def test_wire_log_is_bounded_unless_auditing():
    rc = {**RC, "dbn.num-rounds": 6}
    quiet = app_dbn.strategy("fdbnl", rc)
    quiet.start(grid=InProcessGrid(client_app, 3, rc))
    summary = quiet.wire_summary()
    assert summary["train.local down"]["messages"] == 18 == summary["train.local up"]["messages"]
    assert summary["train.local up"]["shapes"] == [[[[4, 4], "float64"], [[4, 4], "float64"]]]
    assert summary["train.local down"]["bytes"] > 0 and quiet.wire_log.entries == []
    with pytest.raises(RuntimeError, match="audit=True"):
        list(quiet.wire_log)
    audited = FDBNL(quiet.settings, audit=True)
    audited.start(grid=InProcessGrid(client_app, 3, rc))
    entries = list(audited.wire_log)
    assert len(entries) == len(audited.wire_log) == len(quiet.wire_log)
    assert {e["phase"] for e in entries} == {"query.info", "train.local"}
    assert all("config" in e for e in entries if e["direction"] == "down")
    np.testing.assert_equal(audited.wire_summary(), summary)
