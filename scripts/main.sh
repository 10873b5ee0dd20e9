#!/usr/bin/env bash
# The main job: set up, then a federated FDBNL run on built-in synthetic data under
# `flwr run` (Ray simulation, 5 SuperNodes). Prints per-round progress and final SHD/TPR/FDR,
# saves outputs/main/result.json and graphs.png, and stops the local SuperLink it started.
# Extra arguments go to the launcher, e.g. --nodes 8 --run-config 'algorithm="pfdbnl" dbn.mu=0.2'
# (run configs add up; family keys in their section: dbn., statespace., iv., vertical.).
# Exits non-zero unless result.json says "completed" (`flwr run` itself exits 0 when the
# ServerApp fails; the launcher reads the run's result.json).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
python -m fedcausal_flwr.cli.launch simulate --nodes 5 --run-config 'run-name="main"' "$@"
