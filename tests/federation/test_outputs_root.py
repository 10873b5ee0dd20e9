"""Issue 35, item 6: the outputs root is the operator's, not the submitter's.

The ServerApp host's operator sets it (``FEDCAUSAL_OUTPUTS_ROOT``; default ``./outputs`` of the
ServerApp); the run config's ``outputs`` only names a folder beneath it: an absolute path
elsewhere or ``..`` out of it is refused naming the key, nothing written where it points. An
unwritable root fails with a clear message (not an uncaught FileNotFoundError) and the run's
status is still recorded where it can be. The launcher, whose user runs the ServerApp host, sets
the root for the processes it starts.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from fedcausal_flwr import server_app
from fedcausal_flwr.appconfig import OUTPUTS_ROOT_ENV, outputs_dir, outputs_root, run_dir
from fedcausal_flwr.cli import launch
from fedcausal_flwr.cli.runconfig import outputs_env


@pytest.fixture
def root(tmp_path, monkeypatch) -> Path:
    r = tmp_path / "root"
    monkeypatch.setenv(OUTPUTS_ROOT_ENV, str(r))
    return r.resolve()


def _files(path: Path) -> list[str]:
    return sorted(p.relative_to(path).as_posix() for p in path.rglob("*") if p.is_file())


@pytest.mark.parametrize("bad", ["/etc", "..", "../elsewhere", "a/../../x", "/tmp"])
def test_outputs_out_of_the_root_is_refused_naming_the_key(root, tmp_path, bad):
    rc = {"algorithm": "fdbnl", "outputs": bad, "run-name": "r"}
    with pytest.raises(ValueError, match=f"run config 'outputs' = '{bad}': must be a folder "
                                         f"under the outputs root {root}.*{OUTPUTS_ROOT_ENV}"):
        server_app.output_dir(rc, "fdbnl")
    with pytest.raises(ValueError, match="run config 'outputs'"):
        server_app.run(None, rc)  # refused before any node is asked: no grid needed
    # the failure is recorded under the root itself, nothing written where outputs points
    assert all(f.startswith("root/fdbnl-") for f in _files(tmp_path)), _files(tmp_path)
    (record,) = list(root.iterdir())
    doc = json.loads((record / "result.json").read_text())
    assert doc["status"].startswith("failed: ValueError: run config 'outputs'")


def test_outputs_names_a_folder_beneath_the_root(root):
    assert outputs_dir({}) == outputs_dir({"outputs": "outputs"}) == root
    assert outputs_dir({"outputs": "study/a"}) == root / "study" / "a"
    assert outputs_dir({"outputs": str(root / "abs")}) == root / "abs"
    assert run_dir({"outputs": "study", "run-name": "r"}) == root / "study" / "r"


def test_the_root_defaults_to_the_apps_outputs(monkeypatch, tmp_path):
    monkeypatch.delenv(OUTPUTS_ROOT_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    assert outputs_root() == (tmp_path / "outputs").resolve()
    assert run_dir({"outputs": "outputs", "run-name": "r"}) == (tmp_path / "outputs" / "r")
    with pytest.raises(ValueError, match="run config 'outputs'"):
        run_dir({"outputs": str(tmp_path / "elsewhere"), "run-name": "r"})


def test_a_run_config_cannot_move_the_root(root, tmp_path):
    """The run config's outputs never sets the root (before: any absolute folder)."""
    assert outputs_root({"outputs": str(tmp_path / "mine")}) == root


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere: use a missing parent")
def test_a_read_only_root_fails_clearly(tmp_path, monkeypatch):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        monkeypatch.setenv(OUTPUTS_ROOT_ENV, str(ro))
        with pytest.raises(server_app.OutputsUnwritable, match=OUTPUTS_ROOT_ENV):
            server_app.run(None, {"algorithm": "fdbnl", "run-name": "r"})
    finally:
        ro.chmod(0o700)


def test_an_unwritable_root_fails_clearly_and_the_status_is_recorded(tmp_path, monkeypatch):
    """Before: an uncaught FileNotFoundError and no result.json anywhere."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(OUTPUTS_ROOT_ENV, str(blocker / "outputs"))  # under a file: unwritable
    fallback = tmp_path / "tmp"
    monkeypatch.setattr(server_app.tempfile, "gettempdir", lambda: str(fallback))
    with pytest.raises(server_app.OutputsUnwritable) as e:
        server_app.run(None, {"algorithm": "fdbnl", "run-name": "unwritable"})
    msg = str(e.value)
    assert f"the outputs root {(blocker / 'outputs').resolve()} cannot be written" in msg
    assert OUTPUTS_ROOT_ENV in msg
    record = fallback / server_app.UNWRITABLE_RECORDS / "unwritable" / "result.json"
    doc = json.loads(record.read_text())
    assert doc["status"].startswith("failed: OutputsUnwritable: the outputs root")


def test_the_launcher_gives_its_processes_the_root(tmp_path, monkeypatch):
    monkeypatch.delenv(OUTPUTS_ROOT_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    cfg = {"outputs": "out", "run-name": "r"}
    assert outputs_env(cfg) == {OUTPUTS_ROOT_ENV: str((tmp_path / "out").resolve())}
    assert launch.run_output(cfg) == (tmp_path / "out" / "r").resolve()
    assert outputs_env({}) == {}
    monkeypatch.setenv(OUTPUTS_ROOT_ENV, str(tmp_path))  # the operator's own: inherited
    assert outputs_env(cfg) == {}
    assert launch.run_output(cfg) == (tmp_path / "out" / "r").resolve()
    monkeypatch.setenv(OUTPUTS_ROOT_ENV, str(tmp_path / "other"))
    with pytest.raises(ValueError, match="run config 'outputs'"):
        launch.run_output(cfg)
