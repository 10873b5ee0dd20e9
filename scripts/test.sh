#!/usr/bin/env bash
# Set up, then lint and run the whole test suite (unit tests, in-process App runs, one real
# `flwr run` simulation and one real loopback deployment). Extra arguments go to pytest.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
ruff check .
python -m pytest -q --durations=10 "$@"
