"""Regenerate the tables of ``simulations/RESULTS.md`` from the JSON in ``simulations/results/``.

Each managed table sits between ``<!-- table:NAME -->`` and ``<!-- /table -->``; everything
outside the markers (the prose) is left alone. ``--check`` rewrites nothing and exits 1 when
RESULTS.md differs from what the JSON gives (a table edited by hand, or JSON rerun without
regenerating).

    python simulations/tables.py            # rewrite the marked tables
    python simulations/tables.py --check    # exit 1 if RESULTS.md is out of date
    python simulations/tables.py --list     # the table names it knows
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from harness import SIM_DIR, fmt, markdown, read_results

RESULTS_MD = SIM_DIR / "RESULTS.md"
MARKER = re.compile(r"(<!-- table:(?P<name>[\w.-]+) -->\n)(?P<body>.*?)(<!-- /table -->)",
                    re.DOTALL)
NETSIM_DIMS = {1: 5, 2: 10, 3: 15}  # NetSim sims 1-3: 5, 10, 15 regions
DREAM4_PAPER_MEAN = {"auroc": 0.600, "aupr": 0.040}  # Table 7's means, for JSON written before
# fdbnl_dream4.py recorded them (not the mean of the rounded per-network values: 0.604, 0.039)


def dot(v: float, digits: int = 2) -> str:
    """``0.64`` -> ``.64`` (the papers' style); ``1.00`` stays."""
    s = f"{v:.{digits}f}"
    return s[1:] if s.startswith("0.") else s


def short(v: float, digits: int = 3) -> str:
    """At most ``digits`` decimals, trailing zeros dropped (``0.736``, ``0.74``, ``6.2``)."""
    return f"{round(v, digits):g}"


def bold(m: float, s: float, digits: int = 3) -> str:
    """``**m ± s**``: a headline mean."""
    return f"**{fmt(m, s, digits)}**"


# ----------------------------------------------------------------------------- FDBNL / PFDBNL
def fdbnl_table1() -> str:
    """Table 1: PFDBNL vs FDBNL, paper weights (fdbnl_table1) and code weights (_codeweights)."""
    runs = [read_results("fdbnl_table1"), read_results("fdbnl_table1_codeweights")]
    paper = runs[0]["paper"]
    rows = []

    def pair(summ: dict, a: str, b: str) -> str:
        return f"{dot(summ[a][0])} / {dot(summ[b][0])}"

    for label, key in (("mSHD W", "shd_w"), ("mSHD A", "shd_a")):
        rows.append([label] + [c for i, m in enumerate(("PFDBNL", "FDBNL"))
                               for c in [short(paper[key][i]),
                                         *(fmt(*r["summary"][m][key]) for r in runs)]])
    for label, a, b, with_paper in (
            ('paper "mTPR" W / A', "paper_tpr_w", "paper_tpr_a", True),
            ('paper "mFDR" W / A', "paper_fdr_w", "paper_fdr_a", True),
            ("true TPR W / A", "tpr_w", "tpr_a", False),
            ("true FDR W / A", "fdr_w", "fdr_a", False)):
        row = [label]
        for i, m in enumerate(("PFDBNL", "FDBNL")):
            row.append(f"{dot(paper[a][i])} / {dot(paper[b][i])}" if with_paper else "")
            row += [pair(r["summary"][m], a, b) for r in runs]
        rows.append(row)
    return markdown(["", "paper PFDBNL", "ours, paper weights", "ours, code weights",
                     "paper FDBNL", "ours, paper weights", "ours, code weights"], rows)


def fdbnl_netsim_sim3() -> str:
    """NetSim sim3 per subject (Table 8), FDBNL and PFDBNL, paper beside ours."""
    r = read_results("fdbnl_netsim")
    rows, subjects = [], None
    for m in ("FDBNL", "PFDBNL"):
        per = r["per_subject"]["3"][m]
        subjects = [s["subject"] for s in per]
        paper = r["paper"][m]["3"]
        rows.append([f"paper {m}", *(dot(p) for p in paper), short(sum(paper) / len(paper))])
        rows.append([f"ours {m}", *(dot(s["auroc"]) for s in per),
                     bold(*r["summary"][f"sim3 {m}"]["auroc"])])
    return markdown(["subject", *map(str, subjects or []), "mean"], rows)


def fdbnl_netsim() -> str:
    """NetSim sims 1-3: mean AUROC ± sd over five subjects, ours / paper, and code-compat."""
    r = read_results("fdbnl_netsim")
    rows = []
    for sim in r["settings"]["sims"]:
        s = {m: r["summary"][f"sim{sim} {m}"]
             for m in ("FDBNL", "PFDBNL", "PFDBNL code-compat")}
        rows.append([f"{sim} (d={NETSIM_DIMS[sim]})",
                     *(f"{fmt(*s[m]['auroc'], 3)} / {s[m]['paper'][0]:.3f}"
                       for m in ("FDBNL", "PFDBNL")),
                     fmt(*s["PFDBNL code-compat"]["auroc"], 3)])
    return markdown(["sim", "FDBNL ours / paper", "PFDBNL ours / paper", "PFDBNL code-compat"],
                    rows)


def fdbnl_dream4() -> str:
    """DREAM4 size 100 (Table 7): AUROC and AUPR per network, paper beside ours."""
    r = read_results("fdbnl_dream4")
    nets = r["settings"]["networks"]
    per = r["per_network"]["FDBNL"]
    rows = []
    for key, pd, od in (("auroc", 2, 3), ("aupr", 3, 3)):
        paper = [r["paper"]["FDBNL"][key][i - 1] for i in nets]
        mean = r["paper"]["FDBNL"].get(f"{key}_mean", DREAM4_PAPER_MEAN[key])
        rows.append([f"paper {key.upper()}", *(dot(p, pd) for p in paper),
                     f"{mean:.3f}" if len(nets) == 5 else "-"])
        rows.append([f"ours {key.upper()}", *(dot(per[str(i)][key], od) for i in nets),
                     bold(*r["summary"]["FDBNL"][key])])
    return markdown(["network", *map(str, nets), "mean"], rows)


def fdbnl_lambda_scale() -> str:
    """SHD/TPR/FDR of W across K, ``lambda_scale`` paper vs pooled, and pooled DYNOTEARS."""
    r = read_results("fdbnl_lambda_scale")
    s = r["summary"]
    digits = {"shd_w": 1, "tpr_w": 2, "fdr_w": 2}
    rows = [[K, *(fmt(s[f"K={K} {sc}"][k][0], digits=d) for k, d in digits.items()
                  for sc in ("paper", "pooled"))] for K in r["settings"]["K"]]
    rows.append(["Alldata (pooled DYNOTEARS)",
                 *(c for k, d in digits.items() for c in (fmt(s["Alldata"][k][0], digits=d), ""))])
    return markdown(["K", "SHD(W) paper", "SHD(W) pooled", "TPR(W) paper", "TPR(W) pooled",
                     "FDR(W) paper", "FDR(W) pooled"], rows)


def fdbnl_varying_d() -> str:
    """Fig. 3: SHD(W) of FDBNL, Ave, Best, Alldata per d, and whether FDBNL <= Ave."""
    r = read_results("fdbnl_varying_d")
    rows = []
    for d, ms in r["summary"].items():
        shd = {m: ms[m]["shd_w"] for m in ("FDBNL", "Ave", "Best", "Alldata")}
        rows.append([d, len(r["per_seed"][d]), *(fmt(*v, 1) for v in shd.values()),
                     "yes" if shd["FDBNL"][0] <= shd["Ave"][0] else "no"])
    return markdown(["d", "seeds", "FDBNL", "Ave", "Best", "Alldata", "FDBNL <= Ave"], rows)


def fdbnl_varying_k() -> str:
    """d=20, n=512, K=64: TPR/SHD/FDR of W, FDBNL at the first and the oracle-picked lambda."""
    r = read_results("fdbnl_varying_k")
    rows = []
    for K, s in r["summary"].items():
        paper = r["paper_tpr_w"].get(K, {})
        grid, pick = r["settings"]["grid"], s["lambda_w"]

        def row(label: str, m: dict, p: Any) -> list[str]:
            return [label, "-" if p is None else short(p, 1), fmt(m["tpr_w"][0]),
                    f"{m['shd_w'][0]:.0f}", fmt(m["fdr_w"][0])]

        rows.append(row(f"FDBNL lambda {grid[0]:g}", s["grid"][str(grid[0])], paper.get("FDBNL")))
        if pick != grid[0]:
            rows.append(row(f"FDBNL lambda {pick:g} (oracle pick)", s["grid"][str(pick)],
                            paper.get("FDBNL")))
        n = r["settings"]["ave_clients"] or int(K)
        for m in ("Ave", "Best"):
            rows.append(row(f"{m} ({n} of {K} clients)", s["methods"][m], paper.get(m)))
        rows.append(row("Alldata (pooled DYNOTEARS)", s["methods"]["Alldata"], None))
    return markdown(["method", "TPR(W) paper", "TPR(W) ours", "SHD(W)", "FDR(W)"], rows)


def benchmark_flower_overhead() -> str:
    """Flower overhead of FDBNL: reference loop vs ``flwr run``, per K and round count."""
    r = read_results("benchmark_flower_overhead")
    rows = [[x["K"], x["rounds"], f"{x['reference_s']:.2f}", f"{x['flower_s']:.1f}",
             f"{x['ratio']:.0f}", f"{x['strategy_s']:.1f}", f"{x['s_per_round']:.3f}",
             f"{x['ref_s_per_round']:.3f}",
             f"{x['bytes_up_per_round'] / 1000:.1f} kB / {x['bytes_down_per_round'] / 1000:.1f} kB"]
            for x in r["rows"]]
    return markdown(["K", "rounds", "reference s", "`flwr run` s", "ratio", "strategy s",
                     "s/round Flower", "s/round reference", "bytes up / down per round"], rows)


TABLES: dict[str, Callable[[], str]] = {f.__name__: f for f in (
    fdbnl_table1, fdbnl_netsim_sim3, fdbnl_netsim, fdbnl_dream4, fdbnl_lambda_scale,
    fdbnl_varying_d, fdbnl_varying_k, benchmark_flower_overhead)}


# ----------------------------------------------------------------------------- RESULTS.md
def render(text: str, tables: dict[str, Callable[[], str]] = TABLES) -> str:
    """``text`` with every marked table replaced by what its JSON gives."""
    def one(m: re.Match[str]) -> str:
        name = m["name"]
        if name not in tables:
            raise KeyError(f"RESULTS.md marks a table {name!r} that tables.py does not know")
        return m.group(1) + tables[name]().rstrip("\n") + "\n" + m.group(4)

    return MARKER.sub(one, text)


def main(argv: Sequence[str] | None = None) -> int:
    """Rewrite RESULTS.md's marked tables, or with ``--check`` report whether they are stale."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if stale")
    ap.add_argument("--list", action="store_true", help="print the known table names")
    ap.add_argument("--file", type=Path, default=RESULTS_MD)
    args = ap.parse_args(argv)
    if args.list:
        print("\n".join(TABLES))
        return 0
    old = args.file.read_text()
    new = render(old)
    marked = [m["name"] for m in MARKER.finditer(old)]
    if args.check:
        if new != old:
            sys.stdout.writelines(difflib.unified_diff(
                old.splitlines(True), new.splitlines(True), str(args.file), "from JSON"))
            print(f"{args.file}: tables differ from simulations/results/*.json; "
                  "run python simulations/tables.py", file=sys.stderr)
            return 1
        print(f"{args.file}: {len(marked)} tables match the JSON")
        return 0
    if new != old:
        args.file.write_text(new)
    print(f"{args.file}: {len(marked)} tables regenerated ({'changed' if new != old else 'same'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
