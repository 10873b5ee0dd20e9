"""Starter Apps and Hub-valid FABs (issue 25): ``python -m fedcausal_flwr new <algorithm> DIR``
writes an example as the user's own App; the App and every example build a FAB of Flower's
fab-format-version 1 (validated in process by Flower's own builder); an example's node with no
CSV makes the example's data for its partition.

The wheel's templates and a starter App under ``flwr run`` are checked end to end in
``tests/e2e/test_e2e_wheel.py`` and ``tests/e2e/test_e2e_starter.py``.
"""

from __future__ import annotations

import io
import logging
import tomllib
import zipfile
from pathlib import Path

import numpy as np
import pytest
from flwr.app import Context, RecordDict
from flwr.cli.build import build_fab_from_disk

from fedcausal_flwr.cli import starter
from fedcausal_flwr.cli.starter import main
from fedcausal_flwr.data import examples as examples_data
from tests.helpers.examples import ALGORITHMS, EXAMPLES, load_from

ROOT = EXAMPLES.parent
EVERY_EXAMPLE = sorted(p.name for p in EXAMPLES.iterdir() if (p / "pyproject.toml").is_file())


def fab_files(app: Path) -> dict[str, bytes]:
    """The FAB Flower builds from ``app`` (its fab-format rules checked): path -> bytes."""
    with zipfile.ZipFile(io.BytesIO(build_fab_from_disk(app))) as fab:
        return {name: fab.read(name) for name in fab.namelist()}


def test_every_algorithm_has_a_starter():
    assert starter.algorithms() == ALGORITHMS
    assert starter.templates_dir() == EXAMPLES  # a source checkout reads examples/ itself
    with pytest.raises(ValueError, match="one of " + ", ".join(ALGORITHMS)):
        starter.template("plantx")


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_new_writes_a_valid_app_named_after_its_folder(algorithm, tmp_path, capsys):
    target = tmp_path / f"my-{algorithm}-app"
    assert main(["new", algorithm, str(target)]) == 0
    assert "launch simulate --app" in capsys.readouterr().out
    doc = tomllib.loads((target / "pyproject.toml").read_text())
    assert doc["project"]["name"] == target.name
    example = tomllib.loads((EXAMPLES / algorithm / "pyproject.toml").read_text())
    assert doc["tool"] == example["tool"]  # the same App: components, run config, FAB format
    written = {p.relative_to(target) for p in target.rglob("*") if p.is_file()}
    assert written == set(starter.template_files(EXAMPLES / algorithm))
    for module in ("server_app", "client_app"):  # the components import
        mod = load_from(target, module, f"starter_{algorithm}_{module}")
        assert type(mod.app).__name__ == {"server_app": "ServerApp",
                                          "client_app": "ClientApp"}[module]
    fab = fab_files(target)  # passes flwr build: fab-format-version 1, LICENSE inside
    assert {"pyproject.toml", "LICENSE", "client_app.py", "server_app.py",
            "make_data.py"} <= set(fab)
    assert not any(name.endswith(".csv") for name in fab)  # data stay on the nodes
    assert f"examples/{algorithm}" not in (target / "README.md").read_text()


def test_new_refuses_what_it_should(tmp_path, capsys):
    target = tmp_path / "app"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    assert main(["new", "fedgc", str(target)]) == 2
    assert "not empty" in capsys.readouterr().err and not (target / "pyproject.toml").exists()
    assert main(["new", "fedgc", str(target), "--force"]) == 0  # overwrites, keeps the rest
    assert (target / "notes.txt").read_text() == "mine" and (target / "client_app.py").exists()
    assert main(["new", "fdbnl", str(tmp_path / "my_app")]) == 2  # flwr build refuses "_"
    assert "'my-app'" in capsys.readouterr().err
    assert main(["new", "nope", str(tmp_path / "x")]) == 2
    assert "one of fdbnl, pfdbnl" in capsys.readouterr().err
    assert main(["new", "--list"]) == 0
    assert capsys.readouterr().out.split() == ALGORITHMS
    with pytest.raises(SystemExit):
        main(["new", "fdbnl"])


@pytest.mark.parametrize("example", EVERY_EXAMPLE)
def test_every_example_builds_a_hub_fab(example):
    doc = tomllib.loads((EXAMPLES / example / "pyproject.toml").read_text())
    app = doc["tool"]["flwr"]["app"]
    assert app["publisher"] and app["fab-format-version"] == 1
    assert doc["project"]["license"] == {"file": "LICENSE"}
    assert (EXAMPLES / example / "LICENSE").read_bytes() == (ROOT / "LICENSE").read_bytes()
    fab = fab_files(EXAMPLES / example)
    assert "LICENSE" in fab and "make_data.py" in fab and len(fab) <= 9
    assert not any(name.endswith(".csv") for name in fab)
    built = tomllib.loads(fab["pyproject.toml"].decode())
    assert built["tool"]["flwr"]["app"]["flwr-version-target"] == app["flwr-version-target"]


def test_the_app_builds_a_hub_fab():
    doc = tomllib.loads((ROOT / "pyproject.toml").read_text())
    app = doc["tool"]["flwr"]["app"]
    assert app["fab-format-version"] == 1 and doc["project"]["license"] == {"file": "LICENSE"}
    assert any(r.startswith("flwr") and ">=1.41" in r for r in doc["project"]["dependencies"])
    fab = fab_files(ROOT)
    assert {"LICENSE", "README.md", "fedcausal_flwr/server_app.py"} <= set(fab)
    assert all(n.startswith("fedcausal_flwr/") for n in fab
               if n not in ("pyproject.toml", "LICENSE", "README.md", ".info/CONTENT"))
    assert not any(n.startswith("fedcausal_flwr/_examples") for n in fab)
    assert sum(map(len, fab.values())) < 10 * 2 ** 20  # Flower's cap
    # the wheel ships the examples as the templates (built and read in tests/e2e)
    wheel = doc["tool"]["hatch"]["build"]["targets"]["wheel"]
    assert "examples" in wheel["only-include"]
    assert wheel["sources"] == {"examples": "fedcausal_flwr/_examples"}
    # pip install -e (scripts/setup.sh): hatchling's detecting editable refuses that rewrite
    assert wheel["dev-mode-dirs"] == ["."]


def _ctx(node_config: dict) -> Context:
    return Context(1, 7, node_config, RecordDict(), {})


@pytest.mark.parametrize("example", EVERY_EXAMPLE)
def test_a_node_without_csv_makes_the_examples_data(example, caplog):
    """data-path set: it is read; else partition-id: the file make_data.py writes to data/
    (one generator), with a WARNING saying how to give one's own CSV; else a clear error."""
    make_data = load_from(EXAMPLES / example, "make_data", f"make_data_{example}")
    files = sorted((EXAMPLES / example / "data").glob("*.csv"))
    own = _ctx({"partition-id": 0, "data-path": "/mine.csv"})
    assert examples_data.node_context(own, make_data.csv_files) is own
    for i, f in enumerate(files):
        ctx = _ctx({"partition-id": i, "num-partitions": len(files)})
        with caplog.at_level(logging.WARNING, logger="flwr"):
            made = examples_data.node_context(ctx, make_data.csv_files,
                                        getattr(make_data, "NODE_CONFIGS", ()))
        assert Path(made.node_config["data-path"]).read_text() == f.read_text()
        assert made.state is ctx.state and "data-path" not in ctx.node_config
    assert "--node-config 'data-path=" in caplog.text
    with pytest.raises(ValueError, match="no partition-id"):
        examples_data.node_context(_ctx({}), make_data.csv_files)
    if make_data.csv_files(len(files) + 1).keys() == make_data.csv_files().keys():
        with pytest.raises(ValueError, match=f"num-supernodes={len(files)}"):
            examples_data.node_context(_ctx({"partition-id": len(files),
                                       "num-partitions": len(files) + 1}), make_data.csv_files)


def test_the_fedcf_example_names_each_plants_valve():
    make_data = load_from(EXAMPLES / "fedcf", "make_data", "make_data_fedcf_valves")
    made = examples_data.node_context(_ctx({"partition-id": 1, "num-partitions": 2}),
                                make_data.csv_files, make_data.NODE_CONFIGS)
    assert made.node_config["input-columns"] == "turbine_valve"
    mine = _ctx({"partition-id": 1, "num-partitions": 2, "input-columns": "my_valve"})
    assert examples_data.node_context(mine, make_data.csv_files,
                                make_data.NODE_CONFIGS).node_config["input-columns"] == "my_valve"


def test_fdbnl_example_client_reads_the_same_data_with_or_without_a_csv():
    client = load_from(EXAMPLES / "fdbnl", "client_app", "fdbnl_client_made")
    rc = {"dbn.lags": 1}
    made = client.make(Context(1, 7, {"partition-id": 2, "num-partitions": 4}, RecordDict(), rc))
    own = client.make(Context(1, 7, {"partition-id": 2, "num-partitions": 4, "data-path": str(
        EXAMPLES / "fdbnl" / "data" / "site2.csv")}, RecordDict(), rc))
    assert made["names"] == own["names"] and "wind" not in made["names"]
    np.testing.assert_array_equal(made["Xt"], own["Xt"])
