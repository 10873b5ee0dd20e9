"""The node decides what it reads (issue 20): a run-config path is opened on a node only with
the node's opt-in (node config ``allow-run-config-paths`` or ``data-dir``); only regular files
within the node's limits (``max-file-mb``, ``max-columns``, ``max-rows``), checked before
parsing; errors that reach the server name file, row and column, never a cell's content."""

from __future__ import annotations

import os
import time

import pytest

from fedcausal_flwr import server_app
from fedcausal_flwr.appconfig import glue
from fedcausal_flwr.client_app import app as client_app
from fedcausal_flwr.data.csvdata import read_csv
from fedcausal_flwr.data.dream4 import load_dream4
from fedcausal_flwr.data.nodefiles import Limits, node_limits
from fedcausal_flwr.testing import InProcessGrid

SECRET = "SECRET_TOKEN_4711"
NO_OPT_IN = {"allow-run-config-paths": False}


def secret_file(tmp_path):
    path = tmp_path / "secret_timeseries.tsv"
    path.write_text(f"root:x:0:0:root:/root:/bin/bash\n{SECRET}\n{SECRET}\n")
    return path


def test_a_run_config_path_is_refused_without_the_nodes_opt_in(tmp_path, monkeypatch):
    monkeypatch.delenv("FEDCAUSAL_ALLOW_RUN_CONFIG_PATHS", raising=False)
    path = secret_file(tmp_path)
    rc = {"algorithm": "fdbnl", "dbn.data": "dream4", "dbn.data-path": str(path)}
    grid = InProcessGrid(client_app, 1, rc, {0: NO_OPT_IN})
    with pytest.raises(ValueError, match="allow-run-config-paths") as e:
        glue("fdbnl").client("fdbnl", grid.contexts[1000])
    assert SECRET not in str(e.value) and "root:x" not in str(e.value)
    grid = InProcessGrid(client_app, 1, rc, {0: {**NO_OPT_IN,
                                                "data-dir": str(tmp_path / "elsewhere")}})
    with pytest.raises(ValueError, match="data-dir"):
        glue("fdbnl").client("fdbnl", grid.contexts[1000])


def test_no_content_reaches_the_server_or_result_json(tmp_path, monkeypatch):
    monkeypatch.delenv("FEDCAUSAL_ALLOW_RUN_CONFIG_PATHS", raising=False)
    path = secret_file(tmp_path)
    rc = {"algorithm": "fdbnl", "dbn.data": "dream4", "dbn.data-path": str(path),
          "min-nodes": 2, "node-wait-s": 2.0, "dbn.num-rounds": 1, "outputs": str(tmp_path),
          "run-name": "run"}
    grid = InProcessGrid(client_app, 2, rc, {0: NO_OPT_IN, 1: NO_OPT_IN})
    try:
        server_app.run(grid, rc)
    except Exception as e:  # noqa: BLE001 - the run may fail; its text must not carry content
        assert SECRET not in str(e) and "root:x" not in str(e)
    text = (tmp_path / "run" / "result.json").read_text()
    assert "allow-run-config-paths" in text
    assert SECRET not in text and "root:x" not in text


def test_the_nodes_data_dir_allows_the_paths_under_it(tmp_path, shared_data):
    src = shared_data("dream4/insilico_size100_1_timeseries.tsv")
    rc = {"algorithm": "fdbnl", "dbn.data": "dream4", "dbn.data-path": str(src)}
    node = {"allow-run-config-paths": False, "data-dir": str(src.parent)}
    grid = InProcessGrid(client_app, 5, rc, dict.fromkeys(range(5), node))
    opted = InProcessGrid(client_app, 5, rc)  # in process: opted in by default
    assert glue("fdbnl").client("fdbnl", grid.contexts[1000]) is not None
    assert glue("fdbnl").client("fdbnl", opted.contexts[1000]) is not None


def test_dev_zero_is_refused_quickly_without_reading():
    t = time.perf_counter()
    with pytest.raises(ValueError, match="not a regular file"):
        read_csv("/dev/zero", "client 0")
    with pytest.raises(ValueError, match="not a regular file"):
        load_dream4("/dev/zero")
    assert time.perf_counter() - t < 1.0


def test_fifo_and_directory_are_refused(tmp_path):
    fifo = tmp_path / "pipe.csv"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="not a regular file"):
        read_csv(fifo, "client 0")  # would block forever if opened
    with pytest.raises(ValueError, match="a directory"):
        read_csv(tmp_path, "client 0")


def test_an_oversize_file_is_refused_before_parsing(tmp_path):
    path = tmp_path / "big.csv"
    path.write_text("a,b\n1,2\n")
    os.truncate(path, 600 * 1024 * 1024)  # sparse: nothing written
    t = time.perf_counter()
    with pytest.raises(ValueError, match="over the node's limit of 512 MB .*max-file-mb"):
        read_csv(path, "client 0")
    assert time.perf_counter() - t < 1.0
    with node_limits({"max-file-mb": 1}):
        small = tmp_path / "small.csv"
        small.write_text("a,b\n" + "1,2\n" * 300_000)
        with pytest.raises(ValueError, match="max-file-mb"):
            read_csv(small, "client 0")


def test_a_wide_csv_is_refused_before_its_rows(tmp_path, monkeypatch):
    path = tmp_path / "wide.csv"
    bad_row = ",".join(["oops"] * 3000)  # never parsed: the header stops it
    path.write_text(",".join(f"v{j}" for j in range(3000)) + "\n" + (bad_row + "\n") * 3)
    with pytest.raises(ValueError, match="3000 columns, over the node's limit of 2000 "
                                         r"\(node config max-columns"):
        read_csv(path, "client 0")
    with node_limits({"max-columns": 5000}), pytest.raises(ValueError, match="not a number"):
        read_csv(path, "client 0")


def test_too_many_rows_name_max_rows(tmp_path):
    path = tmp_path / "long.csv"
    path.write_text("a,b\n" + "1,2\n" * 50)
    with node_limits({"max-rows": 10}), pytest.raises(ValueError, match="max-rows"):
        read_csv(path, "client 0")
    assert read_csv(path, "client 0").values.shape == (50, 2)


def test_limits_come_from_the_node_config():
    assert Limits.from_node_config({}) == Limits(512.0, 2000, 10_000_000)
    assert Limits.from_node_config({"max-columns": "3000"}).max_columns == 3000
    with pytest.raises(ValueError, match="node config max-rows"):
        Limits.from_node_config({"max-rows": "-1"})


def test_a_bad_cells_content_is_not_in_the_error(tmp_path):
    path = tmp_path / "own.csv"
    path.write_text(f"a,b\n1,2\n3,{SECRET}\n4,5\n")
    grid = InProcessGrid(client_app, 1, {"algorithm": "fdbnl"}, {0: {"data-path": str(path)}})
    with pytest.raises(ValueError, match=r"row 3, column 2 \('b'\): not a number$") as e:
        glue("fdbnl").client("fdbnl", grid.contexts[1000])
    assert SECRET not in str(e.value)
    dream = tmp_path / "x_timeseries.tsv"
    dream.write_text(f"Time\tG1\n0\t1\n10\t{SECRET}\n")
    with pytest.raises(ValueError, match=r"line 3, column 2: not a number$") as e:
        load_dream4(dream)
    assert SECRET not in str(e.value)
