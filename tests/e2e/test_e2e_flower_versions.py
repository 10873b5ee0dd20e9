"""End to end on the other supported Flower release (issue 25, item 1).

The package allows ``flwr>=1.41.0,<1.43``; the test suite runs on whichever release its
environment has (a fresh ``scripts/setup.sh`` installs the newest allowed). This test installs
the OTHER one of 1.41.0 and 1.42.0 beside this checkout in a fresh venv (pip resolves it, Ray
included, from the index), runs one FDBNL ``flwr run`` simulation with it through the launcher,
and checks that the run equals the in-process reference loop as on this environment's release
(test_e2e_flower.py). About 2 to 3 minutes, most of it ``pip install``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import flwr
import pytest

from fedcausal_flwr.results import load_result
from tests.helpers.e2e import RC, check_against_reference

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
TESTED = ("1.41.0", "1.42.0")  # pyproject.toml's flwr range, each release tested

RUN = r'''
import json, sys
import flwr
from fedcausal_flwr.cli import launch
rc = json.loads(sys.argv[1])
launch.simulate(3, rc, app_dir=sys.argv[2], flwr_home=sys.argv[3], timeout=600)
print(json.dumps({"flwr": flwr.__version__}))
'''


def other_release(version: str) -> str:
    """The tested release that ``version`` is not (the newest when it is neither)."""
    others = [v for v in TESTED if v != version]
    return others[0] if len(others) == 1 else TESTED[-1]


def test_tested_releases_are_the_pinned_range():
    import tomllib

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (pin,) = [d for d in deps if d.startswith("flwr")]
    low, high = pin.removeprefix("flwr>=").split(",<")
    assert TESTED[0] == low and TESTED[-1].rsplit(".", 1)[0] < high


def test_fdbnl_flwr_run_on_the_other_flower_release(tmp_path: Path):
    version = other_release(flwr.__version__)
    venv = tmp_path / "venv"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    pip = subprocess.run([python, "-m", "pip", "install", "-q", str(ROOT),
                          f"flwr[simulation]=={version}"],
                         env=env, capture_output=True, text=True, timeout=900)
    assert pip.returncode == 0, pip.stdout[-2000:] + pip.stderr[-3000:]

    rc = {**RC, "algorithm": "fdbnl", "dbn.num-rounds": 12, "outputs": str(tmp_path),
          "run-name": "other"}
    proc = subprocess.run([python, "-c", RUN, json.dumps(rc), str(ROOT), str(tmp_path / "flwr")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {"flwr": version}
    check_against_reference(load_result(tmp_path / "other"), 3)
