#!/usr/bin/env bash
# Idempotent set-up, sourced by main.sh and test.sh (or by you, for the venv and the variables
# below): a .venv with the CPU torch and the package. Needs only python3 (3.11+) and pip.
# Re-installs only when pyproject.toml changed. The install runs in a subshell with strict
# options, so sourcing this leaves your shell's options (errexit, nounset, pipefail) as they
# were; it does cd to the checkout.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT" || return 1 2>/dev/null || exit 1
(
    set -euo pipefail
    PY="${PYTHON:-python3}"
    if [ ! -x .venv/bin/python ]; then
        "$PY" -m venv .venv
    fi
    # shellcheck disable=SC1091
    source .venv/bin/activate
    # constraints.txt pins every distribution to the versions the suite last ran on (refresh
    # it on purpose: bash scripts/constraints.sh); FEDCAUSAL_CONSTRAINTS=none installs what
    # pyproject.toml's ranges resolve to today, another path another pin set.
    constraints="${FEDCAUSAL_CONSTRAINTS:-constraints.txt}"
    pin=()
    [ "$constraints" = none ] || pin=(-c "$constraints")
    stamp=".venv/.fedcausal-installed"
    want="$(cat pyproject.toml "${pin[@]:1}" | sha256sum | cut -d' ' -f1)"
    if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
        echo "[setup] installing dependencies into .venv (about a minute; constraints: $constraints)"
        python -m pip install -q --upgrade pip 2>&1 | grep -v "^WARNING: Location" || true
        # The CPU build of torch first, so no multi-GB CUDA build is pulled in.
        python -m pip install -q "${pin[@]}" "torch==2.13.0" 2>&1 | grep -v "^WARNING: Location" || true
        # [all]: every extra (Ray for simulations, dp-accounting, torch for FedIV, phe + gmpy2
        # + pynacl for VFedCD, pandas + networkx for graph outputs), which the tests need;
        # [dev]: pytest, ruff, build.
        python -m pip install -q "${pin[@]}" -e ".[all,dev]" 2>&1 | grep -v "^WARNING: Location" || true
        python -c "import fedcausal_flwr, flwr, ray, dp_accounting, torch, phe, gmpy2, nacl, sklearn, pandas, networkx"
        echo "$want" > "$stamp"
    fi
) || { echo "[setup] failed (see above)" >&2; return 1 2>/dev/null || exit 1; }
# shellcheck disable=SC1091
source .venv/bin/activate
export FLWR_HOME="$ROOT/.flwr"
export FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION=1
# Our matrices are small (d x d): a multi-threaded BLAS only adds contention, up to 15x
# slower on 2 cores (measured on the FDBNL global step).
export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}"
