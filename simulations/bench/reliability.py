"""Fault x algorithm reliability matrix (issue 11): what each algorithm does with each fault.

Every case runs the App's ClientApp in process (``tests/helpers/faults.py``: the same small
configs, faults and oracle as ``tests/federation/test_faults.py``) with one faulty node, next to its
oracle: the run in which that node simply went silent (raised) at the same round. Outcomes:
"dropped client k, equal to silent run" (named, bit-for-bit the silent run's result),
"stopped, names party k" (a protocol that needs every party; it keeps exactly what the silent
run keeps), "not handled: ..." (named failures of the run itself) and "SILENT WRONG RESULT"
(status "completed" with a result that differs from the silent run). Writes
``results/reliability.json``, then regenerates the tables of ``results/reliability.md`` from the
results (``simulations/tables.py``: table ``reliability``, and ``security`` of
``security.py``).

    python simulations/bench/reliability.py                 # all 6 algorithms x 14 faults (~25 s)
    python simulations/bench/reliability.py --quick         # FDBNL and VFedCD only
"""

from __future__ import annotations

import logging
import warnings

import _sims  # noqa: F401 - simulations/ on sys.path
from harness import (
    RESULTS_DIR,
    Clock,
    jsonable,
    log,
    markdown,
    parser,
    read_results,
    settings,
    write_results,
)

from tests.helpers import faults as T

MD = RESULTS_DIR / "reliability.md"
#: the security section (``security.py``'s table) that follows the fault table
SECURITY_HEAD = """
## Security: issue 20's probes

Generated: `python simulations/bench/security.py` repeats every finding of issue 20 ("Trust no
one": a run submitter, a node operator or a client acting against the others) the way it was
seen, in process (the App's ServerApp and ClientApp on `InProcessGrid`, or the public function
the finding went through), and writes `security.json`; the table below is regenerated from that
JSON by `python simulations/tables.py` (table `security`).
`tests/federation/test_security_rows.py` reruns the cheap probes and checks they agree with the
JSON. "before" is what the same probe gave on the code before the issue's fixes (be41777,
checked once by hand; the script runs only today's code). "handled": refused or survived as
`docs/threat-model.md` says, named, with no file content or cell value on the server side.

<!-- table:security -->
<!-- /table -->
"""

BYZANTINE_HEAD = """
## Byzantine screen: one lying client (issue 20)

Generated: `python simulations/studies/byzantine.py` runs the App in process (`InProcessGrid`, the
App's defaults: FDBNL; PFDBNL on its heterogeneous generator; FedIV on its Dirichlet(0.3)
client splits; FDBNL/PFDBNL capped at 50 rounds) with K = 5 or 10 clients, of which partition 1
multiplies every float array of its replies by -1 (sign-flip), 50, 0 (zeros) or 2 from round 1
on; `--summarize` writes `byzantine.json`, from which `python simulations/tables.py` renders the
table below (table `byzantine`). The screen (`federation/robust.py`): a client whose update
(FDBNL/PFDBNL: its consensus targets `B_k + beta_k / rho2`, `D_k + gamma_k / rho2`; FedIV: both
players' deltas) is more than `byzantine-factor` times the median client's distance from the
coordinate-wise median of the exchange's updates is flagged, named and left out of the round
(2.5 for `dbn`, 25 for `iv`: about twice the largest honest ratio of the development seeds
100-102; the evaluation seeds below were run once, after that choice). "ratio": a reply's
distance over the typical distance; "runs caught": runs in which the liar was flagged at least
once. Results are the honest clients' (FDBNL: SHD of W; PFDBNL: mean SHD of the honest
clients' personalized W; FedIV: test MSE of the selected round); means ± sample sd over the
seeds. With the liar flagged, a run learns from the other K - 1 clients' data, so its result
may differ from the honest run of all K.
`tests/federation/test_byzantine.py` asserts the rule and, on small configs, that a liar flagged
in every round leaves exactly the result of the run in which it went silent.

<!-- table:byzantine -->
<!-- /table -->
"""

MD_HEAD = """# Reliability: fault x algorithm (issue 11)

Generated: `python simulations/bench/reliability.py` runs the matrix and writes `reliability.json`;
the table below is regenerated from that JSON by `python simulations/tables.py` (table
`reliability`). The faults, small run configs and the oracle are `tests/helpers/faults.py`'s,
shared with `tests/federation/test_faults.py`, which asserts every case below.

Each case: one faulty node (partition 1, faults from round 2; see the fault list), the App's
ClientApp in process (`InProcessGrid`), reply timeout 0.5 s (a node that does not answer costs
it once, then is skipped: issue 11 item 4). Oracle: the same node raising
from the same round ("the silent run"); "equal" means bit-for-bit equal estimates, rounds,
per-round participation and losses. "exception" is the oracle's own fault (equal by
construction). Discovery faults (`info`, `duplicate`) are compared with the node failing its
`query.info`: FedGC/FedCF then run without it, VFedCD stops (every party holds attributes).

Screening (`federation/exchange.py`: `reply_problem`, `MagnitudeScreen`/`outliers`): float
replies must be float64; then a reply is a magnitude outlier when one of its float arrays has
max |x| over `MAX_ABS` = sqrt(float64 max) ~ 1.34e154 (or a strategy's `reply_bound(phase)`),
or over 1e6 x max(1, median max |x| of the same array in the other replies of the exchange).

<!-- table:reliability -->
<!-- /table -->
""" + SECURITY_HEAD + BYZANTINE_HEAD


def main() -> None:
    ap = parser(__doc__.splitlines()[0])
    ap.add_argument("--algorithms", nargs="+", default=list(T.ALGORITHMS),
                    choices=T.ALGORITHMS)
    ap.add_argument("--faults", nargs="+", default=list(T.FAULTS), choices=list(T.FAULTS))
    args = ap.parse_args()
    if args.quick:
        args.algorithms = ["fdbnl", "vfedcd"]
    logging.getLogger("flwr").setLevel(logging.CRITICAL)  # every case logs its drops
    warnings.simplefilter("ignore", RuntimeWarning)
    clock = Clock()
    cases = []
    for algorithm in args.algorithms:
        for fault in args.faults:
            o = T.check_fault(algorithm, fault)
            cases.append(o.asdict())
            log(f"{algorithm:7s} {fault:15s} {o.outcome}")
    margins = {}
    for algorithm in args.algorithms:  # how near honest runs come to the magnitude screen
        m = margins[algorithm] = T.honest_margin(algorithm)
        log(f"{algorithm:7s} honest: {m['status']}, max peak / floored median of the others "
            f"{m['max_ratio']:.3g} (screen at {m['screen_factor']:g}), screened "
            f"{len(m['screened'])}")
    handled = sum(c["handled"] for c in cases)
    wrong = [f"{c['algorithm']}/{c['fault']}" for c in cases if c["silent_wrong"]]
    not_handled = {f"{c['algorithm']}/{c['fault']}": c["outcome"] for c in cases
                   if not c["handled"]}
    summary = {"cases": len(cases), "handled": handled, "silent_wrong": len(wrong),
               "silent_wrong_cases": wrong, "not_handled": not_handled}
    log(f"\n{handled} of {len(cases)} cases handled; {len(wrong)} silent wrong results; "
        f"elapsed {clock():.0f}s")
    path = write_results("reliability", {
        "settings": settings(args), "faults": T.FAULTS, "algorithms": args.algorithms,
        "configs": {a: {"run_config": T.SMALL[a][0], "nodes": T.SMALL[a][1]}
                    for a in args.algorithms},
        "faulty_partition": T.FAULTY, "from_round": T.FROM_ROUND, "timeout_s": T.TIMEOUT_S,
        "flaky_nodes": T.FLAKY_NODES, "cases": jsonable(cases), "honest": margins,
        "summary": summary,
        "elapsed_s": clock()}, args.out)
    log(f"wrote {path}")
    if args.out is None:  # the committed table follows the committed JSON
        write_md()
        log(f"wrote {MD}")


def write_md() -> None:
    """Regenerate every marked table of ``reliability.md`` (this script's and
    ``security.py``'s) from the committed JSON; the file starts as :data:`MD_HEAD`."""
    import tables

    if not MD.exists():
        MD.write_text(MD_HEAD)
    MD.write_text(tables.render(MD.read_text(), tables.all_tables()))


# ----------------------------------------------------------------------------- tables
def table_reliability() -> str:
    """Issue 11's fault x algorithm matrix (reliability.json): the count of handled cases,
    the silent wrong results, and each case's outcome."""
    r = read_results("reliability")
    summ, algos = r["summary"], r["algorithms"]
    cell = {(c["fault"], c["algorithm"]): c["outcome"] for c in r["cases"]}
    faults = [f for f in r["faults"] if any((f, a) in cell for a in algos)]
    rows = [[f"`{f}`: {r['faults'][f]}"] + [cell.get((f, a), "-") for a in algos]
            for f in faults]
    outcomes = [c["outcome"] for c in r["cases"]]
    dropped = sum(o.startswith("dropped") and "equal" in o for o in outcomes)
    stopped = sum(o.startswith("stopped") for o in outcomes)
    wrong = (f"{summ['silent_wrong']} completed with a wrong result "
             f"({', '.join(summ['silent_wrong_cases'])})" if summ["silent_wrong"] else
             "none completed with a result other than the run without the faulty node")
    lines = [f"**Malformed, crashing and unresponsive nodes ({summ['cases']} cases): "
             f"{dropped} detected and dropped, named, the result equal to the run without "
             f"the node; {stopped} detected and stopped, naming the party; "
             f"{summ['cases'] - summ['handled']} not handled; {wrong}.** Out of this "
             "matrix's scope: well-formed lies inside the honest spread, which the screen "
             "cannot see (bounded only by a robust rule, and only where one applies: the "
             "adaptive-liar table below; FedGC/FedCF/VFedCD unscreened). "
             f"Made by `{r['meta']['script']}` on {r['meta']['finished']} "
             f"({r['elapsed_s']:.0f} s).", ""]
    if r.get("honest"):
        lines += ["Honest runs of the same configs (no fault): largest max |x| of a reply's "
                  "array over max(1, the other replies' median), the screen dropping above "
                  f"{next(iter(r['honest'].values()))['screen_factor']:g}: "
                  + ", ".join(f"{a} {m['max_ratio']:.3g}" + (" (SCREENED)" if m["screened"]
                                                              else "")
                              for a, m in r["honest"].items()) + ".", ""]
    if summ["not_handled"]:
        lines += ["Not handled:", ""] + [f"- {k}: {v}" for k, v in summ["not_handled"].items()]
        lines.append("")
    return "\n".join(lines) + "\n" + markdown(["fault"] + algos, rows)


#: this script's tables in RESULTS.md and results/*.md (``<!-- table:NAME -->``), which
#: ``simulations/tables.py`` renders from its results
TABLES = {"reliability": table_reliability}


if __name__ == "__main__":
    main()
