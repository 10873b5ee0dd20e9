"""Limits of a run config: results stay under ``outputs``, every size has an upper bound that
is refused (naming its key) before anything is allocated, ``seed`` is validated like every
key, a DBN's lags fit in a client's rows, and the state-space data readers need no ``seed``."""

from __future__ import annotations

import json
import time

import pytest

from fedcausal_flwr import server_app
from fedcausal_flwr.appconfig import AppConfig
from fedcausal_flwr.cli import launch
from fedcausal_flwr.dbn.data import DBNData
from fedcausal_flwr.results import RunResult


def _files(root):
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


# ---- run-name: results stay under outputs ---------------------------------------------------
BAD_NAMES = ["../../x", "../x", "/tmp/x", "a/b", "..", ".", ".hidden", "a\\b", " ", "a b",
             "x/../../y"]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_a_run_name_that_escapes_outputs_is_refused(tmp_path, name):
    outputs = tmp_path / "outputs"
    rc = {"algorithm": "fdbnl", "outputs": str(outputs), "run-name": name}
    with pytest.raises(ValueError, match="'run-name'"):
        server_app.output_dir(rc, "fdbnl")
    with pytest.raises(ValueError, match="'run-name'"):
        AppConfig.from_run_config(rc)
    with pytest.raises(ValueError, match="'run-name'"):
        launch.run_output(rc)
    with pytest.raises(ValueError, match="'run-name'"):
        server_app.run(None, rc)  # refused before any node is asked: no grid needed
    # nothing outside outputs; the failure is recorded under <outputs>/fdbnl-<timestamp>
    assert all(f.startswith("outputs/") for f in _files(tmp_path))
    escaped = (outputs / name).resolve()
    assert escaped.is_relative_to(outputs.resolve()) or not (escaped / "result.json").exists()
    (record,) = [p for p in outputs.iterdir()]
    assert record.name.startswith("fdbnl-")
    doc = json.loads((record / "result.json").read_text())
    assert doc["status"].startswith("failed: ValueError: run config 'run-name'")


def test_the_absolute_run_name_writes_nothing_where_it_points(tmp_path):
    target = tmp_path / "elsewhere"
    rc = {"algorithm": "fdbnl", "outputs": str(tmp_path / "outputs"), "run-name": str(target)}
    with pytest.raises(ValueError, match="'run-name'"):
        server_app.run(None, rc)
    assert not target.exists()


def test_plain_run_names_are_kept(tmp_path):
    from fedcausal_flwr.appconfig import run_dir

    for name in ("r", "run-1", "fdbnl_2024.01", "A.b-c_d", "2024"):
        rc = {"outputs": str(tmp_path), "run-name": name}
        assert run_dir(rc) == (tmp_path / name).resolve()
        assert launch.run_output(rc) == (tmp_path / name).resolve()
    assert run_dir({"outputs": str(tmp_path)}, "fdbnl").name.startswith("fdbnl-")


def test_a_symbolic_link_out_of_outputs_is_refused(tmp_path, monkeypatch):
    outputs, elsewhere = tmp_path / "outputs", tmp_path / "elsewhere"
    monkeypatch.setenv("FEDCAUSAL_OUTPUTS_ROOT", str(outputs))  # the operator's root
    outputs.mkdir()
    elsewhere.mkdir()
    (outputs / "link").symlink_to(elsewhere)
    with pytest.raises(ValueError, match="not under the outputs directory"):
        server_app.output_dir({"outputs": str(outputs), "run-name": "link"}, "fdbnl")
    assert not list(elsewhere.iterdir())


def test_result_save_refuses_a_directory_outside_outputs(tmp_path):
    outputs = tmp_path / "outputs"
    result = RunResult("fdbnl", {})
    for bad in (tmp_path / "x", outputs / ".." / "x", outputs):
        with pytest.raises(ValueError, match="not under the outputs directory"):
            result.save(bad, within=outputs)
    assert _files(tmp_path) == []
    assert result.save(outputs / "ok", within=outputs) == (outputs / "ok" / "result.json")


def test_the_launcher_refuses_a_bad_run_name_before_any_process(tmp_path, capsys):
    app = tmp_path / "app"
    app.mkdir()
    (app / "pyproject.toml").write_text('[tool.flwr.app]\npublisher = "x"\n')
    code = launch.main(["simulate", "--app", str(app), "--run-config",
                        f'outputs="{tmp_path / "outputs"}" run-name="../x"'])
    assert code == 2 and "'run-name'" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


# ---- upper bounds: absurd sizes refused, naming the key, before any allocation ----------------
HUGE = 10**9
ABSURD = [
    ("fediv", "iv.iv-n"), ("fediv", "iv.iv-n-test"), ("fediv", "iv.iv-rounds"),
    ("fediv", "iv.iv-batch-size"), ("fediv", "iv.iv-local-epochs"),
    ("fedgc", "statespace.ss-t"), ("fedgc", "statespace.ss-d"), ("fedgc", "statespace.ss-p"),
    ("fedgc", "statespace.ss-clients"), ("fedgc", "statespace.ss-epochs"),
    ("fedgc", "statespace.ss-window"), ("fedcf", "statespace.ss-t"),
    ("fdbnl", "dbn.samples-per-client"), ("fdbnl", "dbn.num-rounds"), ("fdbnl", "dbn.lags"),
    ("fdbnl", "dbn.d"), ("pfdbnl", "dbn.num-rounds"),
    ("vfedcd", "vertical.n"), ("vfedcd", "vertical.d"), ("vfedcd", "vertical.num-epochs"),
    ("vfedcd", "vertical.batch"), ("vfedcd", "vertical.hidden"), ("vfedcd", "vertical.key-bits"),
    ("fdbnl", "min-nodes"),
]


@pytest.mark.parametrize(("algorithm", "key"), ABSURD)
def test_an_absurd_size_is_refused_naming_the_key(tmp_path, algorithm, key):
    rc = {"algorithm": algorithm, key: HUGE, "outputs": str(tmp_path), "run-name": "r"}
    start = time.perf_counter()
    with pytest.raises(ValueError, match=f"'{key}' = {HUGE}: must be <= "):
        server_app.run(None, rc)  # before any node: no grid, nothing allocated
    assert time.perf_counter() - start < 30
    status = json.loads((tmp_path / "r" / "result.json").read_text())["status"]
    assert f"'{key}' = {HUGE}" in status


def test_the_data_readers_refuse_absurd_sizes_before_allocating():
    from fedcausal_flwr.dbn.data import client_data as dbn_client_data
    from fedcausal_flwr.iv.data import dataset
    from fedcausal_flwr.statespace.data import synthetic_series
    from fedcausal_flwr.vertical.data import VerticalData

    with pytest.raises(ValueError, match="'iv.iv-n' = 1000000000: must be <="):
        dataset({"iv-n": HUGE})
    with pytest.raises(ValueError, match="'statespace.ss-t' = 1000000000: must be <="):
        synthetic_series({"ss-t": HUGE})
    with pytest.raises(ValueError, match="'dbn.samples-per-client' = 1000000000: must be <="):
        dbn_client_data({"samples-per-client": HUGE}, 0, 2)
    with pytest.raises(ValueError, match="'vertical.n' = 1000000000: must be <="):
        VerticalData.from_run_config({"n": HUGE})


@pytest.mark.parametrize("algorithm", ["fdbnl", "pfdbnl", "fediv", "fedgc", "fedcf", "vfedcd"])
def test_a_negative_seed_is_refused_naming_seed(tmp_path, algorithm):
    rc = {"algorithm": algorithm, "seed": -1, "outputs": str(tmp_path), "run-name": "r"}
    with pytest.raises(ValueError, match="'seed' = -1: must be >= 0"):
        server_app.run(None, rc)
    from fedcausal_flwr.appconfig import readers

    for cls in readers(algorithm):
        if "seed" in cls.keys():
            with pytest.raises(ValueError, match="'seed' = -1: must be >= 0"):
                cls.from_run_config({"seed": -1})


def test_every_default_is_within_its_bounds():
    from fedcausal_flwr.appconfig import declared

    for algorithm in ("fdbnl", "pfdbnl", "fediv", "fedgc", "fedcf", "vfedcd"):
        from fedcausal_flwr.appconfig import readers

        for cls in readers(algorithm):
            cls.from_run_config(declared())  # the App's declared defaults pass


# ---- lags vs rows -------------------------------------------------------------------------
@pytest.mark.parametrize(("lags", "rows"), [(10, 10), (20, 10), (2, 2)])
def test_lags_at_or_over_a_clients_rows_are_refused(tmp_path, lags, rows):
    with pytest.raises(ValueError, match=r"'dbn.lags' = \d+: must be below "
                                         r"'dbn.samples-per-client'"):
        DBNData(lags=lags, samples_per_client=rows)
    rc = {"algorithm": "fdbnl", "dbn.lags": lags, "dbn.samples-per-client": rows,
          "outputs": str(tmp_path), "run-name": "r"}
    with pytest.raises(ValueError, match="'dbn.lags'"):
        server_app.run(None, rc)
    assert DBNData(lags=2, samples_per_client=3).lags == 2


# ---- the state-space data readers without seed ----------------------------------------------
@pytest.mark.parametrize("model", ["fedgc", "fedcf"])
def test_statespace_data_without_seed_reads_the_default(model):
    import numpy as np

    from fedcausal_flwr.statespace.data import all_clients, merged_config, synthetic_series

    rc = {k: v for k, v in merged_config({"ss-t": 200}, model).items() if k != "seed"}
    sys, clients = all_clients(rc)
    assert len(clients) == 2
    _, _, y, _ = synthetic_series(rc)
    _, _, y0, _ = synthetic_series({**rc, "seed": 0})
    np.testing.assert_array_equal(y, y0)  # the default seed is 0
    _, _, y_bare, _ = synthetic_series({"ss-t": 200})
    assert y_bare.shape[0] == 200
