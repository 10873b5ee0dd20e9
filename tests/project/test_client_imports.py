"""A ClientApp process imports what its client computes with: a SuperNode starts one per
message, so every server-only import (metrics, plots, tables) costs each exchange."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from fedcausal_flwr import registry

#: Never on a client's import path: the server's metrics, tables and plots.
SERVER_ONLY = ("sklearn", "pandas", "matplotlib", "networkx", "scipy.stats", "scipy.io")
#: Only the family that computes with it.
OWN = {"torch": "fediv", "phe": "vfedcd", "gmpy2": "vfedcd"}


@pytest.mark.parametrize("algorithm", list(registry.ALGORITHMS))
def test_the_client_path_loads_no_server_only_module(algorithm):
    a = registry.get(algorithm)
    code = (f"import sys, fedcausal_flwr.client_app, {a.package}.app, {a.package}.client\n"
            f"print(__import__('json').dumps(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    loaded = set(json.loads(out))
    heavy = [m for m in SERVER_ONLY if m in loaded]
    heavy += [m for m, owner in OWN.items() if m in loaded and owner != algorithm]
    assert heavy == [], f"{algorithm}'s client path imports {heavy}"
