"""Packaging (issue 10, item 6): extras per algorithm, and the error naming a missing one.

Each check that an import does (not) happen runs in a fresh interpreter, so modules other tests
loaded do not hide it. A missing package is simulated with ``sys.modules[name] = None``, which
makes ``import name`` raise ModuleNotFoundError as if it were not installed. The wheel itself is
built, installed and run in ``tests/e2e/test_e2e_wheel.py``.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import fedcausal_flwr
from fedcausal_flwr.extras import DISTRIBUTIONS, EXTRAS, missing_extra

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
HEAVY = ("torch", "phe", "gmpy2", "pynacl", "pandas", "networkx", "ray", "dp_accounting")


def _python(code: str) -> str:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip()


@pytest.mark.integration
@pytest.mark.parametrize("algorithm,strategy,client", [
    ("fdbnl", "FDBNL", "FDBNLClient"), ("pfdbnl", "PFDBNL", "PFDBNLClient"),
    ("fedgc", "FedGC", "FedGCClient"), ("fedcf", "FedCF", "FedCFClient"),
])
def test_numpy_algorithms_import_no_optional_package(algorithm, strategy, client):
    loaded = _python(f"""
import sys
import fedcausal_flwr.strategies as s, fedcausal_flwr.clients as c
s.{strategy}; s.{strategy}Settings; c.{client}; c.register
import fedcausal_flwr.testing, fedcausal_flwr.results
print([m for m in {HEAVY!r} if m in sys.modules])
""")
    assert loaded == "[]", f"{algorithm} imported {loaded}"


@pytest.mark.parametrize("blocked,names,message", [
    ("torch", ("strategies.FedIV", "clients.FedIVClient"),
     "FedIV needs torch: pip install 'fedcausal-flwr[fediv]'"),
])
def test_a_missing_extra_is_named(blocked, names, message):
    out = _python(f"""
import importlib, sys
sys.modules[{blocked!r}] = None
for name in {names!r}:
    package, attr = name.split(".")
    try:
        getattr(importlib.import_module("fedcausal_flwr." + package), attr)
    except ImportError as e:
        print(type(e).__name__, e)
    else:
        print("imported", name)
# the numpy algorithms still work without it, and so do FedIV's settings (the App checks
# every family's section of a run config)
import fedcausal_flwr.strategies as s
s.FDBNL
s.FedIVSettings(lr_g=0.1)
""")
    assert out.splitlines() == [f"ImportError {message}"] * len(names)


@pytest.mark.integration
@pytest.mark.parametrize("blocked", ["phe", "gmpy2"])
def test_vfedcd_needs_its_extra_only_for_real_keys(blocked):
    """Without phe/gmpy2 the mock backend (plaintext shares, a test and ablation tool) still
    runs; a Paillier backend is refused when the strategy is built, naming the extra."""
    out = _python(f"""
import sys
sys.modules[{blocked!r}] = None
from fedcausal_flwr.strategies import VFedCD
from fedcausal_flwr.clients import VFedCDClient
from fedcausal_flwr.client_app import app as client_app
from tests.helpers.faults import run_app
for backend in ("paillier", "paillier-packed"):
    try:
        VFedCD(he_backend=backend)
    except ImportError as e:
        print(type(e).__name__, e)
result = run_app("vfedcd", client_app, 3)
print(result.status, len(result.history), {blocked!r} in sys.modules and sys.modules[{blocked!r}])
""")
    message = "ImportError VFedCD needs phe and gmpy2: pip install 'fedcausal-flwr[vfedcd]'"
    assert out.splitlines() == [message, message, "completed 3 None"]


def test_other_missing_modules_keep_their_error():
    error = ModuleNotFoundError("No module named 'sympy'", name="sympy")
    assert missing_extra(error, "FedIV", "fediv", "torch") is error
    sub = ModuleNotFoundError("No module named 'torch.nn'", name="torch.nn")
    assert "pip install 'fedcausal-flwr[fediv]'" in str(missing_extra(sub, "FedIV", "fediv",
                                                                      "torch"))


def _names(requirements: list[str]) -> set[str]:
    return {r.split("[")[0].split(">")[0].split("<")[0].split("=")[0].strip().lower()
            for r in requirements}


def test_pyproject_extras():
    project = PYPROJECT["project"]
    extras = project["optional-dependencies"]
    # every algorithm has its extra, empty where the core dependencies suffice
    for algorithm in ("fdbnl", "pfdbnl", "fedgc", "fedcf"):
        assert extras[algorithm] == []
    flower = {"simulation": "flwr[simulation]", "dp": "flwr[dp]"}  # Flower's own extras
    for extra, modules in EXTRAS.items():
        if extra in flower:
            assert [r.split(">")[0] for r in extras[extra]] == [flower[extra]], extra
        else:
            assert _names(extras[extra]) == {DISTRIBUTIONS.get(m, m) for m in modules}, extra
    core = project["dependencies"]
    assert not _names(core) & set(HEAVY)  # none of them is a core one
    assert [r for r in core if r.startswith("flwr")] == ["flwr>=1.41.0,<1.43"]  # no Ray
    # one Flower range everywhere
    assert {r.partition(">")[2] for e in flower for r in extras[e]} == {"=1.41.0,<1.43"}
    assert extras["all"] == ["fedcausal-flwr[simulation,dp,fediv,vfedcd,graphs]"]
    assert {"pytest", "ruff", "build"} <= _names(extras["dev"])
    # scripts/setup.sh installs what the tests need
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    assert '".[all,dev]"' in setup and "constraints.txt" in setup


def test_the_constraints_pin_every_installed_distribution_within_pyprojects_ranges():
    """constraints.txt names one version of each distribution, among them every direct
    dependency, each inside pyproject.toml's range (a stale pin would fail the install)."""
    from packaging.requirements import Requirement

    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version and name.lower() not in pins, line
            pins[name.lower().replace("_", "-")] = version
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    direct = [Requirement(r) for r in project["dependencies"]] + [
        Requirement(r) for e, rs in project["optional-dependencies"].items() for r in rs
        if not r.startswith("fedcausal-flwr")]
    for req in direct:
        name = req.name.lower().replace("_", "-")
        assert name in pins, f"{name} is not pinned"
        assert req.specifier.contains(pins[name]), f"{name}=={pins[name]} outside {req}"


def test_a_late_import_names_its_extra(monkeypatch):
    """dp-accounting is imported by Flower's accountant only when it is built: the
    accountant's caller names the extra before that."""
    import importlib.util

    from fedcausal_flwr import privacy

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "dp_accounting" else real(name, *a))
    with pytest.raises(ImportError, match=r"pip install 'fedcausal-flwr\[dp\]'"):
        privacy.rdp_epsilon(1.0, 2, 1e-5)


def test_metadata_sources():
    project = PYPROJECT["project"]
    assert "dynamic" not in project  # `flwr run` needs a static [project] version
    assert fedcausal_flwr.__version__ == project["version"]
    assert fedcausal_flwr.__version__.count(".") == 2
    assert (ROOT / "fedcausal_flwr" / "py.typed").is_file()
    assert "Apache License" in (ROOT / "LICENSE").read_text()
    # a file, not an SPDX string: Flower's fab-format-version 1 (tests/project/test_starter.py)
    assert project["license"] == {"file": "LICENSE"}
    assert "License :: OSI Approved :: Apache Software License" in project["classifiers"]
    readme = (ROOT / project["readme"]).read_text()
    assert "scripts/" not in readme  # written for a pip user, not for this repository
    assert "pip install \"fedcausal-flwr[fdbnl]\"" in readme
    assert {"Homepage", "Documentation", "Issues"} <= set(project["urls"])


_BLAS_STATE = """
import json, os, threadpoolctl
def blas():
    return sorted((i["filepath"], i["num_threads"]) for i in threadpoolctl.threadpool_info()
                  if i["user_api"] == "blas")
"""


def _clean_python(code: str, **env: str) -> dict:
    """Run ``code`` in a fresh interpreter with no BLAS thread variables (plus ``env``)."""
    import json
    import os

    base = {k: v for k, v in os.environ.items() if k not in
            ("OPENBLAS_NUM_THREADS", "FEDCAUSAL_BLAS_THREADS", "OMP_NUM_THREADS",
             "MKL_NUM_THREADS")}
    proc = subprocess.run([sys.executable, "-c", _BLAS_STATE + code], capture_output=True,
                          text=True, timeout=120, cwd=ROOT, env={**base, **env})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.integration
def test_importing_the_package_leaves_blas_threads_alone():
    out = _clean_python("""
import numpy, scipy.linalg
before = blas()
import fedcausal_flwr, fedcausal_flwr.strategies, fedcausal_flwr.clients
import fedcausal_flwr.server_app, fedcausal_flwr.client_app, fedcausal_flwr.cli.launch
print(json.dumps({"env": os.environ.get("OPENBLAS_NUM_THREADS"), "before": before,
                  "after": blas()}))
""")
    assert out["env"] is None
    assert out["before"], "no BLAS library found by threadpoolctl"
    assert out["after"] == out["before"]


@pytest.mark.integration
@pytest.mark.parametrize("env,call,expect", [
    ({}, "limit_blas_threads()", 1),
    ({"FEDCAUSAL_BLAS_THREADS": "0"}, "limit_blas_threads()", None),
    ({"OPENBLAS_NUM_THREADS": "2"}, "limit_blas_threads()", None),
    ({"OPENBLAS_NUM_THREADS": "2"}, "limit_blas_threads(1)", 1),
])
def test_limit_blas_threads(env, call, expect):
    out = _clean_python(f"""
import numpy
from fedcausal_flwr.threads import limit_blas_threads
before = blas()
got = {call}
print(json.dumps({{"got": got, "env": os.environ.get("OPENBLAS_NUM_THREADS"),
                  "before": before, "after": blas()}}))
""", **env)
    assert out["got"] == expect
    if expect is None:
        assert out["after"] == out["before"]
        assert out["env"] == env.get("OPENBLAS_NUM_THREADS")
    else:
        assert out["env"] == str(expect)
        assert {n for _, n in out["after"]} == {expect}


def test_sourcing_the_setup_leaves_the_callers_shell_options(tmp_path):
    """The README tells users to source scripts/setup.sh; its strict options (errexit, nounset,
    pipefail) stay inside the install's subshell, else the next failing command in the
    user's interactive shell closes it. Run where the .venv is already set up (the stamp
    matches), so nothing is installed."""
    import hashlib
    import subprocess

    stamp = ROOT / ".venv" / ".fedcausal-installed"
    project = (ROOT / "pyproject.toml").read_bytes()
    wants = {hashlib.sha256(project + pins).hexdigest()  # constrained, FEDCAUSAL_CONSTRAINTS=none
             for pins in ((ROOT / "constraints.txt").read_bytes(), b"")}
    if not stamp.exists() or stamp.read_text().strip() not in wants:
        pytest.skip("no .venv set up by scripts/setup.sh for this pyproject.toml")
    out = subprocess.run(
        ["bash", "-c", f'set +euo pipefail; source "{ROOT}/scripts/setup.sh" >/dev/null; false; '
         'set -o | grep -E "^(errexit|nounset|pipefail)"; echo "venv: $VIRTUAL_ENV"'],
        cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    state = dict(ln.split() for ln in out.stdout.splitlines() if not ln.startswith("venv:"))
    assert state == {"errexit": "off", "nounset": "off", "pipefail": "off"}, out.stdout
    assert f"venv: {ROOT / '.venv'}" in out.stdout


@pytest.mark.integration
def test_a_quiet_run_names_each_slow_test_as_it_starts():
    test = "tests/e2e/test_e2e_flower_versions.py::test_tested_releases_are_the_pinned_range"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert re.search(r"^\[slow test \d\d:\d\d:\d\d\] " + re.escape(test) + "$", proc.stdout,
                     re.M), proc.stdout
