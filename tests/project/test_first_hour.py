"""The first hour of a new user (issue 37): a starter App that takes every feature of its
family, runs that never destroy another run's result, and a launcher that checks what it can
before anything starts."""

from __future__ import annotations

import json
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
