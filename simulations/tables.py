"""Regenerate the marked tables of ``simulations/RESULTS.md`` and ``simulations/results/*.md``.

Each table is rendered by the script whose results it shows: a script of ``paper/``,
``studies/`` or ``bench/`` lists its table functions in ``TABLES`` (marker name -> function,
built with ``harness``'s formatting helpers); this file collects them and adds the headline
table of RESULTS.md, which draws on several scripts. Sources: the scripts' JSON in
``simulations/results/`` (``harness.write_results``), the JSON lines of long runs
(``results/fediv_runs/*.jsonl``, ``results/vfedcd_runs.jsonl``) and the paper values the
scripts hold (``PAPER`` of ``paper/fediv_table1.py``, ``paper/vfedcd_table1.py``). No number is
written here. Each managed table sits between ``<!-- table:NAME -->`` and ``<!-- /table -->``;
everything outside the markers (prose, hand-written or frozen tables) is left alone.
``--check`` rewrites nothing and exits 1 when a file differs from what the results give (a table
edited by hand, or results rerun without regenerating).

Each table ends with a code check (:func:`code_check`): a result file records the hash of every
module it ran (``harness.code_record``); the line says **current** when none has changed since,
**STALE** with the changed modules when one has (the numbers may no longer be what today's code
gives: rerun the script), and *unverified* for files made before the records were kept (and JSON
lines, which keep none). A code change makes its tables' lines change, so ``--check`` (and
``tests/project/test_results_freshness.py``) fail until ``python simulations/tables.py`` marks
them: no table has to be rerun to be honest, only marked. ``--stale`` lists the tables that are
not current.

    python simulations/tables.py            # rewrite the marked tables of every file
    python simulations/tables.py --check    # exit 1 if any file is out of date
    python simulations/tables.py --list     # the table names it knows, and their scripts
    python simulations/tables.py --stale    # the tables older than the code they describe
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import json
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType

import harness  # first: puts the script folders on sys.path
import numpy as np
from fedgc_default import FEDGC_RUNS, gc_setting
from fediv_table1 import PAPER as FEDIV_PAPER
from fediv_table1 import fediv_runs, fediv_select
from harness import RESULTS_DIR, SIM_DIR, markdown, pm, read_jsonl, read_results, seed_range, sig2
from vfedcd_fast_schedule import VFEDCD_FAST_EVAL
from vfedcd_sachs_settings import config_changes
from vfedcd_table1 import PAPER as VFEDCD_PAPER
from vfedcd_table1 import PAPER_T3, vfedcd_mean, vfedcd_select

RESULTS_MD = SIM_DIR / "RESULTS.md"
MARKER = re.compile(r"(<!-- table:(?P<name>[\w.-]+) -->\n)(?P<body>.*?)(<!-- /table -->)",
                    re.DOTALL)


# ----------------------------------------------------------------------------- headline
def headline() -> str:
    """RESULTS.md's headline rows of the families beyond FDBNL, from their result files."""
    rows = []
    for name in FEDGC_RUNS:
        gc = read_results(name)
        rows.append(["FedGC", f"‖Â_21 − A_21‖_F / ‖Â_12‖_F, {gc_setting(gc)} "
                     f"({seed_range(gc['per_seed'])})",
                     f"{gc['paper']['err_A21']:.3f} / {gc['paper']['norm_A12']:.3f}",
                     f"{pm(gc, 'err_A21')} / {pm(gc, 'norm_A12')}"])
    for name in ("fedcf_default", "fedcf_default_shifts"):
        cf = read_results(name)
        lit, rec = cf["variants"]["literal"], cf["variants"][cf["recovering"]]
        scale = cf["setting"]["shift_scale"]
        where = (f"unknown shifts (scale {scale:g})" if scale else "no shifts (FedCF's default "
                 "data)")
        rows.append(["FedCF", f"counterfactual error CF_y, literal / "
                     f"{cf['recovering'].replace(' ', '-')} variant, {where} "
                     f"({seed_range(lit['per_seed'])})", "-",
                     f"{pm(lit, 'cf_y')} / {pm(rec, 'cf_y')}"])
        rows.append(["FedCF", f"‖Â_21 − A_21‖_F, literal / "
                     f"{cf['recovering'].replace(' ', '-')} variant, {where} "
                     f"({seed_range(lit['per_seed'])})", "-",
                     f"{pm(lit, 'err_A21')} / {pm(rec, 'err_A21')}"])
    dp = read_results("fedgc_dp")
    by = {x["epsilon"]: x for x in dp["summary"]}
    rows.append(["FedGC", "‖Â_21 − A_21‖_F with DP, total ε 16 / ∞ (clip only) / DP off, "
                 f"δ 1e-5, clip {dp['chosen_clip']:g}, App defaults "
                 f"({seed_range(dp['settings']['seeds'])}); smallest total ε with ≤ 0.1: "
                 f"{dp['smallest_epsilon'] or 'none of 1-16'}", "-",
                 " / ".join(f"{by[e]['err_A21']['mean']:.3f} ± {by[e]['err_A21']['sd']:.3f}"
                            for e in ("16.0", "inf", "off"))])
    runs = fediv_runs()
    for method in ("FedDeepGMM-GDA", "FedDeepGMM-SGDA"):
        cells = [fediv_select(runs, sc, method) for sc in ("abs", "step", "linear")]
        seeds = {r["seed"] for c in cells for r in c}
        rows.append(["FedIV", f"{method} test MSE abs / step / linear ({seed_range(seeds)})",
                     " / ".join(f"{FEDIV_PAPER[sc][method]:g}" for sc in ("abs", "step", "linear")),
                     " / ".join(sig2(float(np.mean([r["mse_selected"] for r in c])))
                                for c in cells)])

    def pair(v: tuple) -> str:
        return f"{v[0]:g} / {v[1]:.3f}"

    fast = [r for r in read_jsonl(VFEDCD_FAST_EVAL) if r["preset"] == "fast"]
    rows.append(["VFedCD", "SHD / F1, 15 attributes, 3 parties, App default (Adam, 30 epochs, "
                 "600 exchanges; parties z-score, the default before `transform`) "
                 f"({seed_range([r['seed'] for r in fast])})",
                 pair(VFEDCD_PAPER[15]),
                 f"{vfedcd_mean(fast)[0]:.1f} / {vfedcd_mean(fast)[1]:.3f}"])
    r15 = vfedcd_select(15, "vfedcd")
    rows.append(["VFedCD", f"SHD / F1, 15 attributes, 3 parties, `slow` preset (data seeds "
                 f"{seed_range([r['seed'] for r in r15])})", pair(VFEDCD_PAPER[15]),
                 f"{vfedcd_mean(r15)[0]:.1f} / {vfedcd_mean(r15)[1]:.3f}"])
    other = [vfedcd_select(d, "vfedcd") for d in (10, 25)]
    rows.append(["VFedCD", f"SHD / F1, 10 and 25 attributes, `slow` "
                 f"({seed_range([r['seed'] for r in other[0] + other[1]])})",
                 ", ".join(pair(VFEDCD_PAPER[d]) for d in (10, 25)),
                 ", ".join(f"{m[0]:.1f} / {m[1]:.3f}" for m in map(vfedcd_mean, other))])
    t3 = [vfedcd_select(15, m) for m in ("framework", "ctv", "vfedcd")]
    rows.append(["VFedCD", f"Table 3: SHD framework / + CTV / VFedCD "
                 f"({seed_range([r['seed'] for c in t3 for r in c])})",
                 " / ".join(f"{PAPER_T3[m][0]:g}" for m in ("framework", "ctv", "vfedcd")),
                 " / ".join(f"{vfedcd_mean(c)[0]:.1f}" for c in t3)])
    sachs = vfedcd_select("sachs", "vfedcd")
    nnz = [r["nnz"] for r in sachs]
    rows.append(["VFedCD", f"Sachs SHD, `slow` preset (training seeds "
                 f"{seed_range([r['seed'] for r in sachs])})",
                 f"{VFEDCD_PAPER['sachs'][0]:g}",
                 f"{vfedcd_mean(sachs)[0]:.1f} ({min(nnz)}-{max(nnz)} edges)"])
    st = read_results("vfedcd_sachs_fast")
    ch, sa = st["chosen"], st["sachs"]
    for who, what in (("chosen", "setting chosen on Sachs-shaped synthetic data (dev seeds "
                       "{}-{}; ".format(*st["dev_seeds"])
                       + config_changes(st["configs"][ch["config"]]) + f", tau {ch['tau']:g})"),
                      ("app", "App default (yeo-johnson transform)")):
        rows.append(["VFedCD", f"Sachs SHD, {what}, run once (training seed {sa['seed']})",
                     f"{VFEDCD_PAPER['sachs'][0]:g}",
                     f"{sa[who]['shd']} ({sa[who]['nnz']} edges, F1 {sa[who]['f1']:.3f}; "
                     f"empty graph {sa['empty_shd']})"])
    return markdown(["algorithm", "measure (seeds)", "paper", "ours"], rows)


# ----------------------------------------------------------------------------- the scripts' tables
def script_modules() -> list[ModuleType]:
    """The scripts of ``paper/``, ``studies/`` and ``bench/`` that define ``TABLES``, imported."""
    out = []
    for group in harness.GROUPS:
        for path in sorted((SIM_DIR / group).glob("*.py")):
            if not re.search(r"^TABLES\b", path.read_text(), re.MULTILINE):
                continue
            mod = importlib.import_module(path.stem)
            if Path(mod.__file__).resolve() != path.resolve():
                raise ImportError(f"{path.stem!r} imports {mod.__file__}, not {path}")
            out.append(mod)
    return out


def all_tables() -> dict[str, Callable[[], str]]:
    """Every table by marker name: the scripts' ``TABLES`` and the headline."""
    tables: dict[str, Callable[[], str]] = {"headline": headline}
    for mod in script_modules():
        for name, fn in mod.TABLES.items():
            if name in tables:
                raise KeyError(f"table {name!r} is in two scripts' TABLES")
            tables[name] = fn
    return tables


def owners(tables: dict[str, Callable[[], str]]) -> dict[str, str]:
    """Marker name -> the file that renders it (``paper/fdbnl_table1.py``, ``tables.py``)."""
    def where(fn: Callable[[], str]) -> str:
        return Path(sys.modules[fn.__module__].__file__).resolve().relative_to(SIM_DIR).as_posix()

    return {name: where(fn) for name, fn in tables.items()}


# ----------------------------------------------------------------------------- markdown files
def markdown_files() -> list[Path]:
    """Every file whose marked tables this script owns: RESULTS.md and ``results/*.md``."""
    return [RESULTS_MD, *sorted(RESULTS_DIR.glob("*.md"))]


CHECK_PREFIX = "*Code check:"


def _rel(path: Path) -> str:
    return path.relative_to(SIM_DIR).as_posix() if path.is_relative_to(SIM_DIR) else str(path)


def freshness(path: Path) -> tuple[str, list[str], str]:
    """``(status, changed modules, made)`` of one results file: ``current``, ``stale`` or
    ``unverified`` (no code record: older JSON, JSON lines)."""
    if path.suffix != ".json":
        return "unverified", [], "JSON lines"
    meta = json.loads(path.read_text()).get("meta", {})
    made = str(meta.get("finished", "?"))[:10]
    changed = harness.changed_modules(meta)
    if changed is None:
        return "unverified", [], made
    return ("stale" if changed else "current"), changed, made


def code_check(reads: Sequence[Path]) -> str:
    """The code-check line of a table rendered from the results files ``reads``."""
    files = sorted(set(reads), key=_rel)
    if not files:
        return f"{CHECK_PREFIX} no results file.*"
    parts = {"current": [], "stale": [], "unverified": []}
    for f in files:
        status, changed, made = freshness(f)
        if status == "stale":
            more = f" and {len(changed) - 4} more" if len(changed) > 4 else ""
            parts[status].append(f"{_rel(f)} ({made}; changed since: "
                                 f"{', '.join(changed[:4])}{more})")
        else:
            parts[status].append(f"{_rel(f)} ({made})")
    out = []
    if parts["stale"]:
        out.append("**STALE**, the code changed since " + "; ".join(parts["stale"]))
    if parts["unverified"]:
        out.append("unverified (made before code records) " + ", ".join(parts["unverified"]))
    if parts["current"]:
        out.append("current " + ", ".join(parts["current"]))
    return f"{CHECK_PREFIX} " + "; ".join(out) + ".*"


def rendered(fn: Callable[[], str]) -> tuple[str, str]:
    """A table function's table and its code-check line."""
    harness.track_reads(True)
    try:
        body = fn().rstrip("\n")
    finally:
        reads = harness.track_reads(False)
    return body, code_check(reads)


def render(text: str, tables: dict[str, Callable[[], str]]) -> str:
    """``text`` with every marked table replaced by what its result files give, each ending
    with its code check (:func:`code_check`)."""
    def one(m: re.Match[str]) -> str:
        name = m["name"]
        if name not in tables:
            raise KeyError(f"a file marks a table {name!r} that no script's TABLES holds")
        body, check = rendered(tables[name])
        return m.group(1) + body + "\n\n" + check + "\n" + m.group(4)

    return MARKER.sub(one, text)


def checks_in(text: str) -> dict[str, str]:
    """Marker name -> the code-check line a file holds for it ("" where none)."""
    out = {}
    for m in MARKER.finditer(text):
        lines = [x for x in m["body"].splitlines() if x.startswith(CHECK_PREFIX)]
        out[m["name"]] = lines[-1] if lines else ""
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Rewrite the marked tables, or with ``--check`` report whether any is stale."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if stale")
    ap.add_argument("--list", action="store_true", help="print the known table names")
    ap.add_argument("--stale", action="store_true",
                    help="list the tables whose code check is not current; change nothing")
    ap.add_argument("--file", type=Path, nargs="+", default=None,
                    help="only these markdown files (default RESULTS.md and results/*.md)")
    args = ap.parse_args(argv)
    tables = all_tables()
    if args.list:
        print("\n".join(f"{name}  ({where})" for name, where in sorted(owners(tables).items())))
        return 0
    if args.stale:
        for path in args.file or markdown_files():
            for name in checks_in(path.read_text()):
                line = rendered(tables[name])[1]
                if "STALE" in line or "unverified" in line:
                    print(f"{_rel(path)}  {name}: {line}")
        return 0
    stale = 0
    for path in args.file or markdown_files():
        old = path.read_text()
        new = render(old, tables)
        marked = [m["name"] for m in MARKER.finditer(old)]
        name = path.relative_to(SIM_DIR) if path.is_relative_to(SIM_DIR) else path
        if args.check:
            if new != old:
                sys.stdout.writelines(difflib.unified_diff(
                    old.splitlines(True), new.splitlines(True), str(name), "from results"))
                print(f"{name}: tables differ from simulations/results/; "
                      "run python simulations/tables.py", file=sys.stderr)
                stale += 1
            else:
                print(f"{name}: {len(marked)} tables match the results")
            continue
        if new != old:
            path.write_text(new)
        print(f"{name}: {len(marked)} tables regenerated ({'changed' if new != old else 'same'})")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
