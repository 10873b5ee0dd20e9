"""CPU seconds of VFedCD's cryptography per epoch, per phase and per party, for a schedule, and
the loopback deployment time it implies (issue 12, item 3).

Runs ``dispatch.run_local`` (the three parties' phases in one process, one after the other)
with real keys (``--backend``, default ``paillier-packed``, ``--bits`` 2048) at n=1000
(800 training rows), d=15, K=3 ([5, 5, 5]), h=10, with the settings ``VFedCDSettings()`` plus
``--set k=v`` changes, for ``--epochs`` epochs. Every party phase is timed in CPU seconds
(``time.process_time``, so other processes on a shared machine do not inflate it).
Key generation and the setup phase are counted once per run.

Projection of a loopback deployment: ``E S 5`` relayed exchanges at ``--exchange-s`` seconds
each (7 s measured, RESULTS.md "deployment cost") plus, per epoch, the cryptography of the
parties: the three parties run concurrently on ``--cores`` cores, so a phase takes
``max(slowest party, sum over parties / cores)``.

    python simulations/bench/vfedcd_fast_crypto.py --epochs 1
"""

from __future__ import annotations

import time
from collections import defaultdict

import _sims  # noqa: F401 - simulations/ on sys.path
import numpy as np
from harness import markdown, parser, read_results, settings, write_results
from vfedcd_fast_schedule import PHASES, parse_value, steps_per_epoch

from fedcausal_flwr.secure import shares
from fedcausal_flwr.vertical import dispatch
from fedcausal_flwr.vertical import model as V

N_TRAIN, D, K = 800, 15, 3
PARTY_PHASES = ("setup", "forward", "share", "decode", "gradient", "update")


def party_data(seed: int = 0) -> list[np.ndarray]:
    """Three parties' z-scored columns of 800 aligned rows (only their size matters here)."""
    X = np.random.default_rng(seed).standard_normal((N_TRAIN, D))
    return [X[:, 5 * k:5 * (k + 1)] for k in range(K)]


def timed(cpu: dict) -> None:
    """Wrap every phase of ``dispatch.Party`` to add its CPU seconds to ``cpu[phase][me]``."""
    for phase in PARTY_PHASES:
        fn = getattr(dispatch.Party, phase)

        def wrapper(self, *args, _fn=fn, _phase=phase):
            t0 = time.process_time()
            out = _fn(self, *args)
            cpu[_phase][self.me] += time.process_time() - t0
            return out

        setattr(dispatch.Party, phase, wrapper)


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--set", nargs="*", default=[], help="VFedCDSettings changes k=v")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--backend", default="paillier-packed")
    ap.add_argument("--bits", type=int, default=2048)
    ap.add_argument("--exchange-s", type=float, default=7.0)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--total-epochs", type=int, default=None,
                    help="epochs of the projected run (default: the settings' epochs)")
    a = ap.parse_args()
    changes = {k: parse_value(k, v) for k, _, v in (kv.partition("=") for kv in a.set)}
    s = V.VFedCDSettings(**{**changes, "he_backend": a.backend, "key_bits": a.bits})
    cpu: dict[str, dict[int, float]] = defaultdict(lambda: defaultdict(float))
    timed(cpu)
    backend = shares.backend(a.backend, a.bits)
    t0 = time.process_time()
    dispatch.run_local(party_data(), s, backend, a.epochs)
    total_cpu = time.process_time() - t0
    S = steps_per_epoch(s.batch, N_TRAIN)
    per_epoch = {ph: {k: cpu[ph][k] / a.epochs for k in range(K)} for ph in PARTY_PHASES
                 if ph != "setup"}
    one_core = sum(sum(v.values()) for v in per_epoch.values())
    along = sum(max(max(v.values()), sum(v.values()) / a.cores) for v in per_epoch.values())
    setup = sum(cpu["setup"].values())
    keys_and_setup = total_cpu - one_core * a.epochs
    E = a.total_epochs or s.epochs
    exchanges = E * S * PHASES
    projected = exchanges * a.exchange_s + E * along + keys_and_setup
    print(f"settings: {s.run_config()}")
    print(f"{a.backend} {a.bits}-bit, n_train={N_TRAIN}, d={D}, K={K}, batch {s.batch} "
          f"({S} steps/epoch), {a.epochs} epoch(s) measured; CPU seconds per epoch:")
    print(f"  {'phase':10s} " + " ".join(f"party {k:d}" for k in range(K)) + "     sum")
    for ph, v in per_epoch.items():
        print(f"  {ph:10s} " + " ".join(f"{v[k]:7.1f}" for k in range(K))
              + f" {sum(v.values()):7.1f}")
    print(f"  one core (parties in turn): {one_core:.0f} s; on {a.cores} cores (parties "
          f"concurrent): {along:.0f} s; keys + setup phase (once): {keys_and_setup:.0f} s "
          f"(setup phase {setup:.0f} s)")
    print(f"projected loopback deployment, {E} epochs: {exchanges} exchanges x "
          f"{a.exchange_s:g} s = {exchanges * a.exchange_s:.0f} s + crypto {E} x {along:.0f} s"
          f" = {E * along:.0f} s + {keys_and_setup:.0f} s once -> {projected:.0f} s "
          f"({projected / 3600:.2f} h)")
    write_results("vfedcd_fast_crypto", {
        "settings": settings(a), "run_config": s.run_config(), "steps_per_epoch": S,
        "cpu_s_per_epoch": per_epoch, "cpu_s_per_epoch_one_core": one_core,
        "cpu_s_per_epoch_concurrent": along, "keys_and_setup_s": keys_and_setup,
        "projection": {"epochs": E, "exchanges": exchanges, "exchange_s": a.exchange_s,
                       "cores": a.cores, "seconds": projected}}, a.out)


# ----------------------------------------------------------------------------- tables
def table_vfedcd_fast_crypto() -> str:
    """Issue 12.3: CPU seconds of cryptography per epoch (per phase and party) and the
    projected loopback deployment of the default run."""
    r = read_results("vfedcd_fast_crypto")
    per = r["cpu_s_per_epoch"]
    rows = [[ph, *(f"{v[k]:.1f}" for k in sorted(v)), f"{sum(v.values()):.1f}"]
            for ph, v in per.items()]
    pr = r["projection"]
    head = (f"{r['run_config']['he-backend']}, {r['run_config']['key-bits']}-bit keys, batch "
            f"{r['run_config']['batch']} ({r['steps_per_epoch']} steps per epoch): "
            f"{r['cpu_s_per_epoch_one_core']:.0f} CPU s per epoch on one core (parties in turn), "
            f"{r['cpu_s_per_epoch_concurrent']:.0f} s with the 3 parties on {pr['cores']} cores. "
            f"Projected loopback deployment of {pr['epochs']} epochs: {pr['exchanges']} "
            f"exchanges x {pr['exchange_s']:g} s + {pr['epochs']} x "
            f"{r['cpu_s_per_epoch_concurrent']:.0f} s + {r['keys_and_setup_s']:.0f} s = "
            f"{pr['seconds']:.0f} s ({pr['seconds'] / 3600:.2f} h).\n\n")
    return head + markdown(["phase", "party 0 CPU s", "party 1 CPU s", "party 2 CPU s", "sum"],
                           rows)


#: this script's tables in RESULTS.md and results/*.md (``<!-- table:NAME -->``), which
#: ``simulations/tables.py`` renders from its results
TABLES = {"vfedcd_fast_crypto": table_vfedcd_fast_crypto}


if __name__ == "__main__":
    main()
