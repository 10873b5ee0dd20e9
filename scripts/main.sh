#!/usr/bin/env bash
# The main job: set up, then a federated FDBNL run on built-in synthetic data under
# `flwr run` (Ray simulation, 5 SuperNodes). Prints per-round progress and final SHD/TPR/FDR,
# saves outputs/main/result.json and graphs.png, and stops the local SuperLink it started.
# Extra arguments go to the launcher, e.g. --nodes 8 --run-config 'algorithm="pfdbnl"'.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
python -m fedcausal_flwr.launch simulate --nodes 5 --run-config 'run-name="main"' "$@"
python - <<'PY'
from fedcausal_flwr.results import load_result
r = load_result("outputs/main")
m = r["metrics"]
print(f"\n{r['algorithm']} {r['status']}: {m['rounds']} rounds, {m['clients']} clients, "
      f"{r['timing']['wall_s']:.1f}s")
print("  ".join(f"{k}={m[k]:.3g}" for k in ("shd_w", "tpr_w", "fdr_w", "shd_a", "tpr_a", "fdr_a")
                if isinstance(m.get(k), (int, float))))
print("saved outputs/main/result.json and outputs/main/graphs.png")
PY
