"""The first hour of a new user (issue 37): a starter App that takes every feature of its
family, runs that never destroy another run's result, and a launcher that checks what it can
before anything starts."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from flwr.app import Context, RecordDict
from flwr.common.config import flatten_dict

from fedcausal_flwr.cli import launch
from fedcausal_flwr.cli.runconfig import app_algorithm, declared_config
from fedcausal_flwr.cli.starter import (
    completed_pyproject,
    example_algorithm,
    templates_dir,
    write_app,
)
from fedcausal_flwr.registry import ALGORITHMS
from fedcausal_flwr.results import LATEST, RunResult
from fedcausal_flwr.strategies import FDBNLSettings
from fedcausal_flwr.testing import InProcessGrid
from tests.helpers.examples import EXAMPLES, load_from


# ---- starters carry every key of their family ------------------------------------------------
def test_every_example_declares_every_key_of_its_settings_class():
    seen = set()
    for folder in sorted(EXAMPLES.iterdir()):
        alg = example_algorithm(folder)
        if alg is None:
            continue
        seen.add(alg)
        text = (folder / "pyproject.toml").read_text()
        assert completed_pyproject(text, alg) == text, (
            f"{folder.name}: run python -c 'from fedcausal_flwr.cli.starter import "
            "refresh_examples; refresh_examples()'")
        declared = declared_config(folder)
        cls = ALGORITHMS[alg].settings_class()
        for key in cls().app_config():
            assert key in declared or "." not in key, (folder.name, key)
    assert seen == set(ALGORITHMS)


def test_a_starter_declares_keys_its_template_lacks(tmp_path):
    text = (templates_dir() / "fdbnl" / "pyproject.toml").read_text()
    short = "\n".join(line for line in text.splitlines() if not line.startswith("replicas"))
    assert "replicas" not in tomlkeys(short)
    done = completed_pyproject(short, "fdbnl")
    assert "replicas" in tomlkeys(done) and completed_pyproject(done, "fdbnl") == done
    write_app("fdbnl", tmp_path / "app")
    assert set(FDBNLSettings().app_config()) - set(declared_config(tmp_path / "app")) <= {
        k for k in FDBNLSettings().app_config() if "." not in k}


def tomlkeys(text: str) -> set[str]:
    import tomllib

    return set(tomllib.loads(text)["tool"]["flwr"]["app"]["config"]["dbn"])


def test_from_run_config_refuses_an_unknown_key_of_its_section_with_a_near_match():
    with pytest.raises(ValueError, match=r"'dbn.lamda-w' is not a key of section 'dbn' "
                                         r"\(did you mean 'dbn.lambda-w'\?\)"):
        FDBNLSettings.from_run_config({"dbn.lamda-w": 0.1, "dbn.lags": 1})
    # keys of the section that another reader reads (the data's lags, PFDBNL's mu) are fine,
    # and other sections are not this class's business
    s = FDBNLSettings.from_run_config({"dbn.lags": 2, "dbn.mu": 0.1, "iv.whatever": 1,
                                       "dbn.lambda-w": 0.2})
    assert s.lambda_w == 0.2


def test_the_starters_algorithm_is_known_from_its_section(tmp_path):
    for alg in ("fdbnl", "pfdbnl", "fedgc", "fedcf", "vfedcd", "fediv"):
        write_app(alg, tmp_path / alg)
        assert app_algorithm({}, tmp_path / alg) == alg


def test_the_launcher_checks_values_and_files_before_starting_anything(tmp_path, monkeypatch,
                                                                       capsys):
    app = tmp_path / "app"
    write_app("fdbnl", app)

    def started(*a, **k):
        raise AssertionError("the run started")

    monkeypatch.setattr(launch, "simulate", started)
    monkeypatch.setattr(launch, "require_simulation", lambda: None)
    for text, says in (("dbn.replicas=5", "'dbn.replicas' = 5: must be even"),
                       ('dbn.lambda-w="big"', "'dbn.lambda-w' = 'big': expected a number"),
                       ("dbn.lamda-w=0.1", "did you mean 'dbn.lambda-w'")):
        assert launch.main(["simulate", "--app", str(app), "--run-config", text]) == 2
        err = capsys.readouterr().err
        assert says in err and "Traceback" not in err, err
    data = app / "data"
    (tmp_path / "dir.csv").mkdir()
    (tmp_path / "noheader.csv").write_text("\n1,2\n")
    bad = [data / "site0.csv", data / "sit1.csv", tmp_path / "dir.csv", tmp_path / "noheader.csv"]
    args = ["simulate", "--app", str(app)] + [a for p in bad for a in ("--node-data", str(p))]
    assert launch.main(args) == 2
    err = capsys.readouterr().err
    assert "sit1.csv (node 1): no such file" in err and "site1.csv" in err  # what is there
    assert "dir.csv (node 2): not a regular file" in err
    assert "noheader.csv (node 3): no header row" in err
    assert "site0.csv" not in err.split("(node 1)")[0]  # a good file is not named


# ---- the starter App with knowledge and replicas; a failed run keeps the completed one ------
def starter_run(app: Path, outputs: Path, run_config: list[str], data: list[Path] | None = None,
                knowledge: Path | None = None) -> RunResult:
    """The starter App's own ServerApp and ClientApp in process, with the run config the
    launcher would send (``--knowledge`` and ``--run-config`` read by its own code)."""
    args = launch.parser().parse_args(
        ["simulate", "--app", str(app)] + (["--knowledge", str(knowledge)] if knowledge else [])
        + [a for t in run_config for a in ("--run-config", t)])
    sent = launch.run_config(args, app)
    rc = {**flatten_dict(_app_config(app)), **sent, "outputs": str(outputs)}
    files = data or sorted((app / "data").glob("*.csv"))
    nodes = {i: {"data-path": str(f)} for i, f in enumerate(files)}
    grid = InProcessGrid(load_from(app, "client_app", "starter_client").app, len(files), rc,
                         nodes)
    load_from(app, "server_app", "starter_server").app(grid, Context(1, 0, {}, RecordDict(), rc))
    return RunResult.load(outputs / str(rc["run-name"]))


def _app_config(app: Path) -> dict:
    import tomllib

    return tomllib.loads((app / "pyproject.toml").read_text())["tool"]["flwr"]["app"]["config"]


@pytest.mark.integration
def test_the_starter_takes_knowledge_and_replicas_and_its_result_has_stable_edges(tmp_path):
    app = tmp_path / "app"
    write_app("fdbnl", app)
    knowledge = tmp_path / "knowledge.csv"  # the starter's own variables
    knowledge.write_text("forbid,rain,temperature\nexogenous,pressure\n")
    r = starter_run(app, tmp_path / "outputs", ["dbn.replicas=20 dbn.num-rounds=10"],
                    knowledge=knowledge)
    assert r.status == "completed", r.status
    assert r.config["replicas"] == 20 and r.metrics["stability"]["replicas"] == 20
    assert r.config["forbid"] == "rain->temperature" and r.config["exogenous"] == "pressure"
    assert r.metrics["knowledge"]["forbidden"] > 0
    edges = r.stable_edges()
    assert len(edges) > 0
    assert not any(s == "rain" and t == "temperature" for s, t, *_ in edges)
    assert not any(t == "pressure" for s, t, *_ in edges)  # exogenous: nothing causes it


def test_a_failed_run_leaves_the_completed_result_where_the_page_reads_it(tmp_path, capsys):
    app, outputs = tmp_path / "app", tmp_path / "outputs"
    write_app("fdbnl", app)
    good = starter_run(app, outputs, ["dbn.num-rounds=3"])
    assert good.status == "completed"
    base = outputs / "fdbnl"
    first = (base / LATEST).resolve()
    assert (first / "result.json").is_file() and (first / "graphs.png").is_file()
    since = time.time()
    broken = [tmp_path / f"gone{i}.csv" for i in range(4)]  # every site fails: stopped
    bad = starter_run(app, outputs, ["dbn.num-rounds=3"], data=broken)
    assert bad.status == "completed"  # RunResult.load(base) still reads the completed run
    assert bad.estimates["W"].tolist() == good.estimates["W"].tolist()
    runs = sorted(p for p in base.iterdir() if p.is_dir() and not p.is_symlink())
    assert len(runs) == 2 and (base / LATEST).resolve() == first
    failed = next(p for p in runs if p != first)
    doc = json.loads((failed / "result.json").read_text())
    assert doc["status"].startswith("stopped"), doc["status"]
    assert (first / "graphs.png").is_file()  # the completed run's figures stay with it
    assert launch.report(base, since=since) == 1
    err = capsys.readouterr().err
    assert "run not completed: stopped" in err and f"still reads the last completed run, " \
        f"{first.name}" in err


# ---- the local SuperLink: patience with load, a half-built state.db ------------------------
def test_the_superlink_patience_grows_with_the_load(monkeypatch):
    from fedcausal_flwr.cli import simulation, supervisor

    monkeypatch.setattr(supervisor.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(supervisor.os, "getloadavg", lambda: (0.5, 0, 0))
    idle = simulation.startup_patience()
    monkeypatch.setattr(supervisor.os, "getloadavg", lambda: (12.0, 0, 0))
    busy = simulation.startup_patience()
    assert idle == 60 and busy == 360 and idle > 15  # flwr run alone: 15 s
    monkeypatch.setattr(supervisor.os, "getloadavg", lambda: (400.0, 0, 0))
    assert simulation.startup_patience() == 600


def test_a_half_built_state_db_is_found_and_set_aside(tmp_path):
    import sqlite3

    from fedcausal_flwr.cli import simulation

    db = tmp_path / "state.db"
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE task (id INTEGER)")
    assert simulation.half_migrated(db)
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE alembic_version (version_num TEXT)")
    assert simulation.half_migrated(db)  # the version table, but no version in it
    with sqlite3.connect(db) as con:
        con.execute("INSERT INTO alembic_version VALUES ('abc')")
    assert not simulation.half_migrated(db)
    assert not simulation.half_migrated(tmp_path / "none.db")
    aside = simulation.set_aside(db)
    assert not db.exists() and aside.is_file() and "broken" in aside.name


def test_a_superlink_that_cannot_migrate_is_retried_once_on_a_fresh_database(
        tmp_path, monkeypatch, capsys):
    import sys

    from fedcausal_flwr.cli import simulation

    db, _, _ = simulation.local_superlink_files(tmp_path)
    db.write_text("not empty")  # not sqlite: half_migrated says so before the first start
    starts = []

    def command(port, home):
        starts.append(port)
        return [sys.executable, "-c", "import sys; sys.stderr.write("
                "'sqlalchemy.exc.OperationalError: table task already exists\\n'); sys.exit(1)"]

    monkeypatch.setattr(simulation, "local_superlink_command", command)
    with pytest.raises(RuntimeError, match="exited with code 1: .*table task already exists"):
        simulation.start_local_superlink(29991, tmp_path, dict(os.environ), patience=30)
    err = capsys.readouterr().err
    assert len(starts) == 1 and "half-built" in err and "broken-" in err
    starts.clear()
    db.write_text("")  # an empty database: not half-built before the start
    monkeypatch.setattr(simulation, "half_migrated", lambda db: False)
    with pytest.raises(RuntimeError, match="exited with code 1"):
        simulation.start_local_superlink(29991, tmp_path, dict(os.environ), patience=30)
    assert len(starts) == 2, "an 'already exists' exit is retried once on a fresh database"
    assert "cannot be migrated" in capsys.readouterr().err


def test_nodes_that_connect_but_never_answer_are_named_with_the_likely_cause(tmp_path):
    from fedcausal_flwr import server_app
    from fedcausal_flwr.appconfig import declared
    from fedcausal_flwr.client_app import app as client_app

    rc = {**declared(), "outputs": str(tmp_path), "run-name": "r", "node-wait-s": 1.0,
          "round-timeout-s": 0.3, "node-grace-s": 0.3}
    grid = InProcessGrid(client_app, 3, rc)
    for node in grid.get_node_ids()[:2]:  # two of three: below min-nodes = 2
        grid.hang(node)
    server_app.run(grid, rc)
    status = RunResult.load(tmp_path / "r").status
    assert status.startswith("stopped") and "2 SuperNode(s) connected but never answered" \
        in status, status
    assert "task-token authentication failed" in status and "node-wait-s" in status


def test_eleven_or_more_example_partitions_take_their_files_in_natural_order(tmp_path):
    from fedcausal_flwr.data.examples import made_csv

    def files(n):
        return {f"site{i}.csv": f"x\n{i}\n" for i in range(n)}

    for partition in (2, 10, 11):
        path = made_csv(files, partition, 12, "test")
        assert path.name == f"site{partition}.csv" and path.read_text() == f"x\n{partition}\n"


def test_a_home_without_the_local_connection_is_named_before_the_simulation(tmp_path):
    from fedcausal_flwr.cli import simulation

    simulation.check_local_connection(tmp_path)  # no config.toml: Flower writes its own
    (tmp_path / "config.toml").write_text('[superlink]\ndefault = "mylink"\n\n'
                                          '[superlink.mylink]\naddress = "127.0.0.1:9200"\n')
    with pytest.raises(RuntimeError, match=r"no 'local' connection.*names mylink.*unset "
                                           r"FLWR_HOME"):
        simulation.check_local_connection(tmp_path)
    (tmp_path / "config.toml").write_text('[superlink.local]\naddress = ":local:"\n')
    simulation.check_local_connection(tmp_path)
