"""Bad data files (issue 11, item 7): a ValueError naming the file and the problem (row or line
and column where it applies) on the node that reads it; on the ServerApp side the run ends
"failed: ..." with result.json written."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fedcausal_flwr import server_app
from fedcausal_flwr.client_app import app as client_app
from fedcausal_flwr.data.dream4 import load_dream4
from fedcausal_flwr.data.netsim import load_netsim
from fedcausal_flwr.dbn import app as app_dbn
from fedcausal_flwr.dbn.data import DBNData, client_data
from fedcausal_flwr.results import load_result
from fedcausal_flwr.statespace.data import load_plant_csv, merged_config
from fedcausal_flwr.testing import InProcessGrid

HEADER = "timestamp,P1_FT01,P1_LIT01,P2_PIT01,attack"


def plant_rows(n: int = 6) -> list[str]:
    rng = np.random.default_rng(0)
    return [f"t{i}," + ",".join(f"{v:.4f}" for v in rng.normal(size=3)) + ",0"
            for i in range(n)]


def write(path, text: str | bytes):
    (path.write_bytes if isinstance(text, bytes) else path.write_text)(text)
    return path


# ---- plant CSV (FedGC / FedCF ss-data="plant-csv") -----------------------------------------
@pytest.mark.parametrize("text,message", [
    ("", "empty file; expected a header row"),
    ("\n\n", "empty file; expected a header row"),
    ("\n".join([HEADER, *plant_rows(2), "t9,1.0,2.0", *plant_rows(3)]),
     "row 4 has 3 fields, the header (row 1) has 5"),
    ("\n".join([HEADER, *plant_rows(4), "t9,1.0,oops,3.0,0"]),
     "row 6, column 3: not a number"),
    ("\n".join([HEADER, *plant_rows(3), "t9,1.0,nan,3.0,0"]),
     "row 5, column 3: not finite"),
    ("\n".join([HEADER, *plant_rows(2)]), "2 nominal rows; need at least 3"),
    ("timestamp,attack\nt0,0\n", "no tag columns"),
])
def test_plant_csv_problems_are_named(tmp_path, text, message):
    path = write(tmp_path / "plant.csv", text)
    with pytest.raises(ValueError) as e:
        load_plant_csv(path)
    assert str(path) in str(e.value) and message in str(e.value), str(e.value)


def test_a_good_plant_csv_still_loads(tmp_path):
    path = write(tmp_path / "plant.csv", "\n".join([HEADER, *plant_rows(50)]) + "\n")
    groups = load_plant_csv(path)
    assert sorted(groups) == ["P1", "P2"] and groups["P1"][1].shape == (50, 2)


# ---- NetSim .mat ---------------------------------------------------------------------------
@pytest.mark.parametrize("content,message", [
    (b"", "not a readable MATLAB .mat file"),
    (b"\x00garbage" * 50, "not a readable MATLAB .mat file"),
    (bytes(np.random.default_rng(1).integers(0, 256, 4096, dtype=np.uint8)),
     "not a readable MATLAB .mat file"),
])
def test_garbage_mat_is_named(tmp_path, content, message):
    path = write(tmp_path / "sim1.mat", content)
    with pytest.raises(ValueError) as e:
        load_netsim(path)
    assert str(path) in str(e.value) and message in str(e.value), str(e.value)


def test_mat_without_the_netsim_variables_is_named(tmp_path):
    import scipy.io

    path = tmp_path / "other.mat"
    scipy.io.savemat(path, {"x": np.ones((3, 3))})
    with pytest.raises(ValueError, match=r"other\.mat: expected variables 'ts' and 'net', "
                                         r"found \['x'\]"):
        load_netsim(path)
    scipy.io.savemat(path, {"ts": np.full((4, 2), np.nan), "net": np.zeros((1, 2, 2))})
    with pytest.raises(ValueError, match=r"other\.mat: ts contains NaN/inf values; first at "
                                         r"row 0, column 0"):
        load_netsim(path)


def test_garbage_mat_on_the_client_names_the_client_and_file(tmp_path):
    path = write(tmp_path / "sim1.mat", b"garbage" * 20)
    rc = {"data": "netsim", "data-path": str(path)}
    with pytest.raises(ValueError, match="sim1.mat: not a readable MATLAB"):
        client_data(rc, 0, 2)


# ---- DREAM4 TSV ---------------------------------------------------------------------------
GENES = '"Time"\t"G1"\t"G2"\t"G3"'


def dream4_text(rows_a: list[str] | None = None) -> str:
    rep = [f"{10 * t}\t0.{t}1\t0.{t}2\t0.{t}3" for t in range(5)]
    return "\n".join([GENES, *(rows_a or rep), "", *rep]) + "\n"


@pytest.mark.parametrize("text,message", [
    ("", "expected a header and at least one replicate (the file is empty)"),
    (GENES + "\n", "expected a header and at least one replicate"),
    (dream4_text(["0\t0.1\t0.2\t0.3", "10\t0.1\t0.2"]),
     "line 3 has 3 fields, the header has 4"),
    (dream4_text(["0\t0.1\t0.2\t0.3", "10\t0.1\tx\t0.3"]),
     "line 3, column 3: not a number"),
    (dream4_text(["0\t0.1\t0.2\t0.3", "10\t0.1\t0.2\tinf"]),
     "line 3, column 4: not finite"),
    ('"Time"\t"G1"\t"G1"\n0\t1\t2\n', "line 1: the header needs distinct gene names"),
])
def test_dream4_problems_are_named(tmp_path, text, message):
    path = write(tmp_path / "insilico_size100_1_timeseries.tsv", text)
    with pytest.raises(ValueError) as e:
        load_dream4(path)
    assert str(path) in str(e.value) and message in str(e.value), str(e.value)


def test_binary_dream4_file_is_named(tmp_path):
    path = write(tmp_path / "x_timeseries.tsv", b"\xff\xfe\x00\x81" * 30)
    with pytest.raises(ValueError, match="x_timeseries.tsv: not a text TSV file"):
        load_dream4(path)


def test_a_good_dream4_file_still_loads(tmp_path):
    series, genes, truth = load_dream4(write(tmp_path / "a_timeseries.tsv", dream4_text()))
    assert genes == ["G1", "G2", "G3"] and len(series) == 2 and series[0].shape == (5, 3)
    assert truth is None


def test_bad_dream4_on_the_nodes_drops_them_naming_the_file(tmp_path):
    """The file is read on the nodes: each is dropped with the file, line and column."""
    path = write(tmp_path / "bad_timeseries.tsv",
                 dream4_text(["0\t0.1\t0.2\t0.3", "10\t0.1\tx\t0.3"]))
    rc = {"algorithm": "fdbnl", "dbn.data": "dream4", "dbn.data-path": str(path), "min-nodes": 2,
          "node-wait-s": 2.0, "dbn.num-rounds": 2}
    result = app_dbn.strategy("fdbnl", rc).start(grid=InProcessGrid(client_app, 2, rc))
    assert result.status.startswith("stopped: ")
    dropped = " | ".join(result.metrics["dropped"])
    assert f"{path}: line 3, column 3: not a number" in dropped, dropped
    assert result.metrics["clients"] == 0


# ---- JSON at data-path (FedGC / FedCF), read by the ServerApp ---------------------------------
@pytest.mark.parametrize("text,message", [
    ('{"ss-t": 200,\n "ss-p": }', "malformed JSON at line 2, column 10: Expecting value"),
    ("", "empty file; expected a JSON object"),
    ("[1, 2]", "expected a JSON object of run-config keys, got list"),
])
def test_malformed_json_is_named(tmp_path, text, message):
    path = write(tmp_path / "fedgc.json", text)
    with pytest.raises(ValueError) as e:
        merged_config({"data-path": str(path)})
    assert str(path) in str(e.value) and message in str(e.value), str(e.value)
    assert "run-config key 'data-path'" in str(e.value)


def test_malformed_json_fails_the_serverapp_with_result_json(tmp_path):
    path = write(tmp_path / "fedgc.json", '{"ss-t": 200,\n "ss-p": }')
    rc = {"algorithm": "fedgc", "statespace.data-path": str(path), "outputs": str(tmp_path),
          "run-name": "run", "node-wait-s": 2.0}
    with pytest.raises(ValueError):
        server_app.run(InProcessGrid(client_app, 2, rc), rc)
    doc = load_result(tmp_path / "run")
    assert doc["status"].startswith(f"failed: ValueError: {path} (run-config key 'data-path'): "
                                 "malformed JSON at line 2, column 10")
    assert doc["config"]["run_config"]["statespace.data-path"] == str(path)
    json.loads((tmp_path / "run" / "result.json").read_text())


# ---- d = 100000 ---------------------------------------------------------------------------
def test_huge_d_is_refused_up_front(tmp_path):
    with pytest.raises(ValueError, match=r"'dbn.d' = 100000: must be <= 2000"):
        DBNData.from_run_config({"d": 100000})
    rc = {"algorithm": "fdbnl", "dbn.d": 100000, "outputs": str(tmp_path), "run-name": "run"}
    with pytest.raises(ValueError):
        server_app.run(InProcessGrid(client_app, 2, rc), rc)
    assert "'dbn.d' = 100000" in load_result(tmp_path / "run")["status"]
