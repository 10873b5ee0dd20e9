#!/usr/bin/env bash
# Set up, then lint and run the whole test suite: the unit tests and the whole in-process runs
# (marked integration; dots) and the e2e tier (real `flwr run` simulations, loopback
# deployments, fresh venvs; each test named on its own line with its start time, since one may
# print nothing for minutes). Extra arguments go to pytest, e.g. -m "not integration and not
# e2e" for the inner loop, -m "not e2e" for everything in process.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
ruff check .
python -m pytest -q --durations=10 "$@"
