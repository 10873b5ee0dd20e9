"""End to end: the wheel a user installs (issue 10, item 6).

Builds the wheel from this checkout, installs ``<wheel>[fdbnl]`` into a fresh venv (no
``--system-site-packages``: pip resolves flwr, numpy, ... itself, so the wheel's metadata is what
is tested) and, from a folder outside the checkout, runs FDBNL with the public API only
(``register`` + ``FDBNL(...).start`` on :class:`~fedcausal_flwr.testing.InProcessGrid`), then
through the App's own ServerApp and ClientApp with the App's whole declared run config (every
family's section, as ``flwr run`` hands it over). torch, phe and gmpy2 must not be installed
(nor loaded by either run), and FedIV / VFedCD with real Paillier keys must fail with the
ImportError naming their extra. Neither Ray (the ``simulation`` extra) nor dp-accounting
(``dp``) may be installed: a deployed node needs neither. ``python -m fedcausal_flwr new`` then
writes a starter App from the wheel's own templates (``fedcausal_flwr/_examples``). 90 to 150 s
on the shared 2-core machine, most of it ``pip install`` (37 s alone against the local package
mirror).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest
from flwr.common.config import flatten_dict

import fedcausal_flwr

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]

# Run with the fresh venv's python, from a folder outside the checkout.
SMOKE = r'''
import importlib.metadata as md, importlib.util, json, sys
from pathlib import Path

import numpy as np
from flwr.app import Context, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import ServerApp

import fedcausal_flwr
from fedcausal_flwr.clients import register
from fedcausal_flwr.strategies import FDBNL, FDBNLSettings
from fedcausal_flwr.testing import InProcessGrid

rng = np.random.default_rng(0)


def svar(n=80):  # 4 variables: lag 0.4 on each, contemporaneous chain 0 -> 1 -> 2
    x = np.zeros((n, 4))
    for t in range(1, n):
        x[t] = 0.4 * x[t - 1] + rng.standard_normal(4)
        x[t, 1] += 0.8 * x[t, 0]
        x[t, 2] += 0.8 * x[t, 1]
    return x


series = [svar() for _ in range(3)]   # 3 nodes
client_app = ClientApp()
register(client_app, "fdbnl", lambda context: {
    "Xt": series[int(context.node_config["partition-id"])][1:],
    "Xlag": series[int(context.node_config["partition-id"])][:-1]})
server_app = ServerApp()
out = {}

@server_app.main()
def main(grid, context):
    settings = FDBNLSettings(lambda_w=0.05, lambda_a=0.05, node_wait_s=5)
    out["result"] = FDBNL(settings, min_nodes=3).start(grid=grid, num_rounds=5)

server_app(InProcessGrid(client_app, 3), Context(1, 0, {}, RecordDict(), {}))
result = out["result"]

# The App's own run: its whole declared config (all sections), FDBNL selected.
from fedcausal_flwr import client_app as app_client, server_app as app_server

rc = {**json.loads(Path("app_config.json").read_text()), "algorithm": "fdbnl",
      "dbn.d": 4, "dbn.samples-per-client": 40, "dbn.num-rounds": 3, "min-nodes": 2,
      "node-wait-s": 5.0, "outputs": str(Path.cwd() / "outputs"), "run-name": "app"}
app_result = app_server.run(InProcessGrid(app_client.app, 2, rc), rc)

errors = {}
for name in ("FedIV", "VFedCD"):  # VFedCD: real keys (its default) need the extra, mock not
    try:
        import fedcausal_flwr.strategies as s
        getattr(s, name)()
        errors[name] = None
    except ImportError as e:
        errors[name] = str(e)

package = Path(fedcausal_flwr.__file__).parent
print(json.dumps({
    "file": fedcausal_flwr.__file__,
    "version": fedcausal_flwr.__version__,
    "dist_version": md.version("fedcausal-flwr"),
    "py_typed": (package / "py.typed").is_file(),
    "license": any(str(f).endswith("LICENSE") for f in md.files("fedcausal-flwr")),
    "status": result.status,
    "rounds": len(result.history),
    "W": np.asarray(result.estimates["W"]).tolist(),
    "app_status": app_result.status,
    "app_saved": json.loads((Path("outputs") / "app" / "result.json").read_text())["status"],
    "loaded": [m for m in ("torch", "phe", "gmpy2", "ray") if m in sys.modules],
    "installed": [m for m in ("torch", "phe", "gmpy2", "ray", "dp_accounting")
                  if importlib.util.find_spec(m)],
    "errors": errors,
}))
'''


def _run(cmd: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, f"{cmd} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def test_wheel_with_fdbnl_extra_runs_fdbnl_and_the_apps_fdbnl_without_torch(tmp_path: Path):
    dist = tmp_path / "dist"
    # pip builds with hatchling (pyproject's build backend) in an isolated environment;
    # `python -m build --wheel` does the same where the `build` package is installed.
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), str(ROOT)],
         tmp_path, 300)
    (wheel,) = dist.glob("fedcausal_flwr-*.whl")
    assert wheel.name.startswith(f"fedcausal_flwr-{fedcausal_flwr.__version__}-")

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], tmp_path, 120)
    python = venv / "bin" / "python"
    _run([str(python), "-m", "pip", "install", "-q", f"{wheel}[fdbnl]"], tmp_path, 600)

    work = tmp_path / "user"
    work.mkdir()
    doc = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (work / "app_config.json").write_text(
        json.dumps(flatten_dict(doc["tool"]["flwr"]["app"]["config"])))
    proc = _run([str(python), "-c", SMOKE], work, 300)
    report = json.loads(proc.stdout.strip().splitlines()[-1])

    assert Path(report["file"]).is_relative_to(venv), report["file"]  # the wheel, not the repo
    assert report["version"] == report["dist_version"] == fedcausal_flwr.__version__
    assert report["py_typed"] and report["license"]
    assert report["installed"] == [] and report["loaded"] == []
    assert report["status"] == "completed" and report["rounds"] == 5
    assert report["app_status"] == report["app_saved"] == "completed"
    W = np.asarray(report["W"])
    assert W.shape == (4, 4) and np.isfinite(W).all() and np.abs(W).max() > 0.1
    assert report["errors"] == {
        "FedIV": "FedIV needs torch: pip install 'fedcausal-flwr[fediv]'",
        "VFedCD": "VFedCD needs phe and gmpy2: pip install 'fedcausal-flwr[vfedcd]'",
    }

    # the wheel carries the examples as the starter Apps' templates (issue 25)
    listing = _run([str(python), "-m", "fedcausal_flwr", "new", "--list"], work, 60)
    assert listing.stdout.split() == [
        "fdbnl", "pfdbnl", "fedgc", "fedcf", "fediv", "vfedcd", "fedpc", "fedtrees"]
    _run([str(python), "-m", "fedcausal_flwr", "new", "fedgc", "my-fedgc"], work, 60)
    where = _run([str(python), "-c", "from fedcausal_flwr.cli import starter; "
                  "print(starter.templates_dir())"], work, 60).stdout.strip()
    assert Path(where).is_relative_to(venv) and Path(where).name == "_examples", where
    app = work / "my-fedgc"
    assert tomllib.loads((app / "pyproject.toml").read_text())["project"]["name"] == "my-fedgc"
    assert {p.name for p in app.iterdir()} >= {"pyproject.toml", "LICENSE", "README.md",
                                               "client_app.py", "server_app.py",
                                               "make_data.py", "data"}
    assert (app / "make_data.py").read_text() == (ROOT / "examples" / "fedgc" /
                                                  "make_data.py").read_text()
