"""Checkpoints cost O(1) per round (issue 20): a running result.json is a summary, the rounds go
to ``history.jsonl`` one line each; readers still see every round; the end writes it whole.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from fedcausal_flwr import server_app
from fedcausal_flwr.client_app import app as client_app
from fedcausal_flwr.federation.recorder import Recorder
from fedcausal_flwr.results import HISTORY_FILE, RunResult, load_result
from fedcausal_flwr.testing import InProcessGrid

RC = {"algorithm": "fdbnl", "seed": 3, "dbn.d": 4, "dbn.lags": 1, "dbn.samples-per-client": 30,
      "dbn.num-rounds": 4, "dbn.lambda-w": 0.05, "dbn.lambda-a": 0.05, "min-nodes": 2,
      "node-wait-s": 5.0}


def row(i: int) -> dict:
    return {"round": i, "loss": 1.0 / i, "n_clients": 5, "dropped": 0, "bytes_up": 12345,
            "bytes_down": 23456, "exchanges": 1, "seconds": 0.01}


def written(out, before: int) -> tuple[int, int]:
    """Bytes of the last checkpoint (result.json whole, plus what history.jsonl grew by) and
    the side file's size now."""
    side = out / HISTORY_FILE
    size = side.stat().st_size if side.exists() else 0
    return (out / "result.json").stat().st_size + size - before, size


@pytest.mark.integration
def test_bytes_written_per_checkpoint_do_not_grow_with_the_rounds(tmp_path):
    out = tmp_path / "run"
    r = RunResult("fdbnl", {"run_config": {"x": 1}}, status="running",
                  estimates={"W": np.eye(5)})
    cost, side = {}, 0
    for i in range(1, 1001):
        r.history.append(row(i))
        r.checkpoint(out)
        cost[i], side = written(out, side)
    assert cost[1000] <= cost[10] + 64, (cost[10], cost[1000])  # digits of the round number
    doc = json.loads((out / "result.json").read_text())
    assert "history" not in doc and doc["history_rounds"] == 1000
    assert doc["last_round"] == row(1000) and doc["status"] == "running"
    back = load_result(out)  # a reader of the running file sees every round, in order
    assert back["history"] == [row(i) for i in range(1, 1001)]
    assert list(back) == list(RunResult("fdbnl", {}).to_dict())
    loaded = RunResult.load(out)
    assert len(loaded.history) == 1000 and np.array_equal(loaded.estimates["W"], np.eye(5))


def test_the_end_writes_the_whole_file_as_save_does_and_drops_the_side_file(tmp_path):
    out = tmp_path / "run"
    r = RunResult("fdbnl", {}, status="running")
    for i in range(1, 6):
        r.history.append(row(i))
        r.checkpoint(out)
    assert (out / HISTORY_FILE).exists()
    running = load_result(out)
    r.status = "completed"
    r.checkpoint(out)
    assert not (out / HISTORY_FILE).exists()
    doc = json.loads((out / "result.json").read_text())
    assert list(doc) == list(r.to_dict()) and doc["history"] == [row(i) for i in range(1, 6)]
    # the running reader's merged document has today's keys and rounds
    assert list(running) == list(doc) and running["history"] == doc["history"]
    assert running["process"]["stale_after_s"] == doc["process"]["stale_after_s"]


def test_a_new_run_in_the_same_directory_starts_a_new_side_file(tmp_path):
    out = tmp_path / "run"
    old = RunResult("fdbnl", {}, status="running", history=[row(i) for i in range(1, 4)])
    old.checkpoint(out)
    new = RunResult("fdbnl", {}, status="running", history=[row(1)])
    new.checkpoint(out)
    assert load_result(out)["history"] == [row(1)]


def test_a_killed_writer_reads_interrupted_with_its_finished_rounds(tmp_path):
    out = tmp_path / "run"
    r = RunResult("fdbnl", {}, status="running", history=[row(1), row(2)])
    r.checkpoint(out)
    with open(out / HISTORY_FILE, "a") as f:  # killed while appending round 3
        f.write('{"round": 3, "lo')
    doc = json.loads((out / "result.json").read_text())
    doc["process"].update(pid=2**22 + 12345, pid_start=None)  # no such process
    while True:
        try:
            os.kill(doc["process"]["pid"], 0)
            doc["process"]["pid"] += 1
        except ProcessLookupError:
            break
        except PermissionError:
            doc["process"]["pid"] += 1
    (out / "result.json").write_text(json.dumps(doc))
    back = load_result(out)
    assert back["status"] == "interrupted" and back["history"] == [row(1), row(2)]
    assert RunResult.load(out).history == [row(1), row(2)]


@pytest.mark.integration
def test_the_app_checkpoints_a_summary_and_its_readers_see_every_round(tmp_path, monkeypatch):
    rc = {**RC, "outputs": str(tmp_path), "run-name": "run"}
    out = tmp_path / "run"
    seen = []
    record = Recorder.record_round

    def spy(self, result, rec, **kw):
        record(self, result, rec, **kw)
        raw = json.loads((out / "result.json").read_text())
        seen.append((raw["status"], "history" in raw, len(load_result(out)["history"]),
                     len(result.history)))

    monkeypatch.setattr(Recorder, "record_round", spy)
    result = server_app.run(InProcessGrid(client_app, 3, rc), rc)
    assert result.status == "completed" and len(seen) == len(result.history) >= 4
    assert all(s == "running" and not full and n == m for s, full, n, m in seen), seen
    final = json.loads((out / "result.json").read_text())
    assert final["status"] == "completed" and len(final["history"]) == len(result.history)
    assert not (out / HISTORY_FILE).exists()


@pytest.mark.integration
def test_large_estimates_go_to_a_binary_side_file_while_running(tmp_path):
    """A d = 400 graph's estimates (over INLINE_NUMBERS numbers) are not rewritten as JSON
    every round: they go to arrays.npz; readers see the document save writes, the end writes
    it whole and drops the side file; small ones stay inline."""
    from fedcausal_flwr.results import ARRAYS_FILE, INLINE_NUMBERS

    out = tmp_path / "run"
    rng = np.random.default_rng(0)
    W, A = rng.normal(size=(400, 400)), rng.normal(size=(400, 400))
    assert W.size + A.size > INLINE_NUMBERS
    r = RunResult("fdbnl", {}, status="running", estimates={"W": W, "A": A, "h": 0.5},
                  truth={"W": (W > 1).astype(float)}, history=[row(1)])
    r.checkpoint(out)
    doc = json.loads((out / "result.json").read_text())
    assert (out / ARRAYS_FILE).exists() and doc["arrays_file"] == ARRAYS_FILE
    assert doc["estimates"] == {"h": 0.5} and doc["truth"] == {}
    assert (out / "result.json").stat().st_size < 10_000
    back = RunResult.load(out)
    assert np.array_equal(back.estimates["W"], W) and np.array_equal(back.estimates["A"], A)
    assert np.array_equal(back.truth["W"], r.truth["W"]) and back.estimates["h"] == 0.5
    assert list(load_result(out)) == list(r.to_dict())
    r.status = "completed"
    r.checkpoint(out)
    assert not (out / ARRAYS_FILE).exists() and not (out / HISTORY_FILE).exists()
    assert np.array_equal(RunResult.load(out).estimates["W"], W)
    small = RunResult("fdbnl", {}, status="running", estimates={"W": np.eye(5)})
    small.checkpoint(tmp_path / "small")
    assert not (tmp_path / "small" / ARRAYS_FILE).exists()
