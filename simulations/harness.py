"""The shared command line and results layer of every script in ``simulations/``.

The scripts sit in ``paper/`` (reproductions of a paper's numbers), ``studies/`` (how the
defaults were chosen) and ``bench/`` (cost, scale, reliability); each imports its folder's
``_sims`` first, which puts this folder on ``sys.path``, and importing this module puts the
script folders there too (scripts import each other by name).

Every script takes the same flags (``--seeds`` the seeds themselves, ``--n-seeds`` a count,
``--quick``, ``--out``)
plus its own, prints tables with the paper's value beside ours, and writes its numbers with
:func:`write_results` to ``simulations/results/<script>.json`` (with machine, time and argv).
A script whose results make tables of ``RESULTS.md`` or ``results/*.md`` renders them itself:
its ``TABLES`` maps each marker name to a function built on the helpers below (:func:`markdown`,
:func:`fmt`, :func:`seed_range`...), and ``python simulations/tables.py`` (``--check``) writes
(verifies) them all.

    ap = harness.parser(__doc__, seeds=10)  # default 0..9; --seeds 7 -> [7];
    # --seeds 3 7 -> [3, 7]; --seeds 3..5 -> [3, 4, 5]; --n-seeds 4 -> [0, 1, 2, 3]
    ap.add_argument("--t", type=int, default=5000)
    args = ap.parse_args()
    ...
    harness.write_results("fedcf_default", {"settings": harness.settings(args), "rows": rows})
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import math
import os
import platform
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fedcausal_flwr.threads import limit_blas_threads

SIM_DIR = Path(__file__).resolve().parent
RESULTS_DIR = SIM_DIR / "results"
DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
#: the script folders: reproductions of a paper's numbers, how the defaults were chosen, and
#: cost / scale / reliability benchmarks
GROUPS = ("paper", "studies", "bench")
for _dir in (SIM_DIR, *(SIM_DIR / g for g in GROUPS)):  # scripts import each other by name
    if str(_dir) not in sys.path:
        sys.path.insert(0, str(_dir))
if str(SIM_DIR.parent) not in sys.path:  # the checkout: the tests' fault kit, tests.helpers
    sys.path.append(str(SIM_DIR.parent))


# ----------------------------------------------------------------------------- CLI
def app_config(algorithm: str, flat: Mapping[str, Any]) -> dict[str, Any]:
    """The App's run config for ``flat`` keys of ``algorithm``: shared keys as they are, the
    others under the algorithm's section (``lambda-w`` -> ``dbn.lambda-w``). What a script hands
    to ``launch.simulate``/``deploy``; library functions keep taking the flat keys."""
    from fedcausal_flwr.registry import get
    from fedcausal_flwr.settings import SHARED_KEYS

    section = get(algorithm).section
    return {k if k in SHARED_KEYS else f"{section}.{k}": v for k, v in flat.items()}


def seed_list(values: Sequence[str] | int | None) -> list[int]:
    """The seeds of ``--seeds``: every value is a seed, ``a..b`` an inclusive range.

    ``--seeds 7`` is seed 7, ``--seeds 3 7`` seeds 3 and 7, ``--seeds 100..109`` ten seeds; a
    count of seeds 0..N-1 is ``--n-seeds N`` (:func:`parser`). An int (a script's default, not
    the command line) is a count: ``seed_list(10)`` is 0..9.
    """
    if values is None:
        return []
    if isinstance(values, int):
        return list(range(values))
    out: list[int] = []
    for v in values:
        lo, sep, hi = str(v).partition("..")
        try:
            seeds = list(range(int(lo), int(hi) + 1)) if sep else [int(lo)]
        except ValueError:
            raise ValueError(f"--seeds {v!r}: write seeds (7), lists (3 7) or inclusive "
                             f"ranges (100..109)") from None
        if sep and not seeds:
            raise ValueError(f"--seeds {v!r}: an empty range (write a..b with a <= b)")
        out += seeds
    return out


def parser(description: str | None, seeds: int | Sequence[int] | None = None,
           data: bool = False, out_help: str | None = None) -> argparse.ArgumentParser:
    """The common flags; a script adds its own to the returned parser.

    Parameters
    ----------
    description
        The script's docstring (its first line is the summary).
    seeds
        Default seeds, a count (0..N-1) or a list; None: the script takes no ``--seeds``.
        On the command line ``--seeds`` always lists seeds (``7``, ``3 7``, ``100..109``)
        and ``--n-seeds N`` is the count 0..N-1: one number never means a count.
    data
        Add the positional ``data`` directory (default ``../shared/data`` beside the checkout).
    out_help
        Help text of ``--out`` where a script gives it another meaning.

    Returns
    -------
    argparse.ArgumentParser
        ``parse_args`` turns ``--seeds`` into a list of ints.
    """
    limit_blas_threads()  # one BLAS thread, as every committed result was made
    ap = _Parser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    if seeds is not None:
        default = seed_list(seeds) if isinstance(seeds, int) else list(seeds)
        group = ap.add_mutually_exclusive_group()
        group.add_argument("--seeds", nargs="+", default=default, metavar="S",
                           help=f"the seeds: 7 is seed 7, '3 7' seeds 3 and 7, a..b an "
                                f"inclusive range (default "
                                f"{seed_range(default) if default else 'none'})")
        group.add_argument("--n-seeds", type=int, default=None, metavar="N",
                           help="seeds 0..N-1 (instead of --seeds)")
    ap.add_argument("--quick", action="store_true", help="a much smaller smoke-test run")
    ap.add_argument("--out", type=Path, default=None,
                    help=out_help or "JSON output (default simulations/results/<script>.json)")
    if data:
        ap.add_argument("data", nargs="?", type=Path, default=DEFAULT_DATA,
                        help="data directory holding dream4/ and netsim/")
    return ap


class _Parser(argparse.ArgumentParser):
    """``parse_args`` with ``--seeds`` (or ``--n-seeds``) turned into a list of ints."""

    def parse_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                   namespace: argparse.Namespace | None = None) -> argparse.Namespace:
        ns = super().parse_args(args, namespace)
        if "n_seeds" in vars(ns):
            n = ns.__dict__.pop("n_seeds")
            if n is not None:
                if n < 1:
                    self.error(f"--n-seeds {n}: at least 1")
                ns.seeds = list(range(n))
        if isinstance(getattr(ns, "seeds", None), list) and ns.seeds \
                and isinstance(ns.seeds[0], str):
            try:
                ns.seeds = seed_list(ns.seeds)
            except ValueError as e:
                self.error(str(e))
        return ns


def settings(args: argparse.Namespace, drop: Iterable[str] = ("out",)) -> dict[str, Any]:
    """The parsed arguments as JSON-able settings (paths as strings), without ``drop``."""
    return {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()
            if k not in set(drop)}


class Clock:
    """Wall-clock since construction, for the elapsed-time lines."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()

    def __call__(self) -> float:
        return time.perf_counter() - self.t0


def log(msg: str) -> None:
    """Print and flush (progress lines of long runs)."""
    print(msg, flush=True)


# ----------------------------------------------------------------------------- statistics
def mean_sd(values: Iterable[float]) -> tuple[float, float]:
    """Mean and sample sd (ddof=1; 0 for a single value), NaN-free input expected."""
    v = np.asarray(list(values), dtype=float)
    if v.size == 0:
        return float("nan"), float("nan")
    return float(v.mean()), float(v.std(ddof=1)) if v.size > 1 else 0.0


def fmt(m: float | None, s: float | None = None, digits: int = 2) -> str:
    """``m`` or ``m ± s`` with ``digits`` decimals; ``-`` for a missing value."""
    if m is None or (isinstance(m, float) and math.isnan(m)):
        return "-"
    if s is None:
        return f"{m:.{digits}f}"
    return f"{m:.{digits}f} ± {s:.{digits}f}"


def verdict(ours: float, paper: float, tol: float, lower_is_better: bool) -> str:
    """PASS within ``paper ± tol``, else BETTER or WORSE by the side it falls on."""
    if abs(ours - paper) <= tol + 1e-12:
        return "PASS"
    better = ours < paper if lower_is_better else ours > paper
    return "BETTER" if better else "WORSE"


def check(ok: bool) -> str:
    """PASS or WORSE."""
    return "PASS" if ok else "WORSE"


# ----------------------------------------------------------------------------- tables
def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A fixed-width text table (also valid Markdown when pasted into RESULTS.md)."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    width = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(r: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(r, width, strict=True)) + " |"

    sep = "|" + "|".join("-" * (w + 2) for w in width) + "|"
    return "\n".join([line(cells[0]), sep] + [line(r) for r in cells[1:]])


def markdown(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A compact Markdown table (``| a | b |`` rows, ``|---|`` rule), as in RESULTS.md."""
    def line(r: Sequence[Any]) -> str:
        return "|" + "|".join(f" {c} " if str(c) else " " for c in r) + "|"

    return "\n".join([line(headers), "|" + "---|" * len(headers), *map(line, rows)])


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


def sig2(v: float) -> str:
    """Two significant figures, trailing zeros kept (``0.0197`` -> ``0.020``)."""
    return f"{v:.{max(0, 1 - math.floor(math.log10(abs(v))))}f}" if v else "0"


def dec3(v: float) -> str:
    """Three decimals, but at least two significant figures (``0.003776`` -> ``0.0038``)."""
    return f"{v:.3f}" if abs(v) >= 0.01 else sig2(v)


def seed_range(seeds: Sequence[Any]) -> str:
    """``0-9`` (or the list where the seeds are not a range)."""
    s = sorted({int(x) for x in seeds})
    return f"{s[0]}-{s[-1]}" if s == list(range(s[0], s[-1] + 1)) else ", ".join(map(str, s))


def pm(r: dict[str, Any], key: str, digits: int = 3) -> str:
    """``mean ± sd`` (sample sd) of ``key`` in a run's ``mean`` and ``sd``."""
    return fmt(r["mean"][key], r["sd"][key], digits)


def paper_table(rows: Sequence[tuple[str, Any, Any]], digits: int = 3,
                headers: Sequence[str] = ("measure", "paper", "ours")) -> str:
    """Our value beside the paper's, one measure a row; a missing paper value prints ``-``.

    Parameters
    ----------
    rows
        ``(label, paper, ours)``; numbers are formatted with ``digits`` decimals, a
        ``(mean, sd)`` pair as ``mean ± sd``, strings as they are.
    """
    def cell(v: Any) -> str:
        if isinstance(v, str):
            return v
        if isinstance(v, tuple | list) and len(v) == 2:
            return fmt(v[0], v[1], digits)
        return fmt(None if v is None else float(v), digits=digits)

    return table(headers, [[label, cell(p), cell(o)] for label, p, o in rows])


# ----------------------------------------------------------------------------- JSON
def jsonable(x: Any) -> Any:
    """Nested dicts/lists of plain Python numbers (NaN as null, tuple keys as strings)."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return jsonable(x.tolist())
    if isinstance(x, np.bool_):
        return bool(x)
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating | float):
        return None if math.isnan(float(x)) else float(x)
    if isinstance(x, Path):
        return str(x)
    return x


def script_path(script: str) -> str:
    """``simulations/<folder>/<script>.py``, the script of a results name (as the repository
    names it; ``simulations/<script>.py`` where no folder holds it)."""
    folder = next((g for g in GROUPS if (SIM_DIR / g / f"{script}.py").is_file()), None)
    return f"simulations/{folder}/{script}.py" if folder else f"simulations/{script}.py"


def metadata(script: str) -> dict[str, Any]:
    """Where, when and how a result was made: script, argv, versions, machine, time, and the
    code it ran (:func:`code_record`)."""
    return {"script": script_path(script), "argv": sys.argv[1:],
            "python": platform.python_version(), "numpy": np.__version__,
            "machine": {"host": platform.node(), "system": platform.system(),
                        "cpu": platform.machine(), "cores": os.cpu_count()},
            "finished": time.strftime("%Y-%m-%d %H:%M:%S"), "code": code_record()}


# ----------------------------------------------------------------------------- freshness
CHECKOUT = SIM_DIR.parent
#: the folders whose modules a result records: the library and the scripts
CODE_DIRS = ("fedcausal_flwr", "simulations")


def module_hash(path: Path) -> str:
    """A hash of a module's code without its docstrings and comments (``ast.dump``): a
    docstring or comment edit leaves it, any change of what runs changes it."""
    tree = ast.parse(Path(path).read_text())
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(getattr(body[0], "value", None), ast.Constant) \
                and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
    return hashlib.sha256(ast.dump(tree).encode()).hexdigest()[:16]


def loaded_modules() -> list[str]:
    """The checkout's modules this process has imported (``fedcausal_flwr/``, ``simulations/``)
    and the script it runs, as paths relative to the checkout."""
    files = {getattr(m, "__file__", None) for m in list(sys.modules.values())}
    files.add(getattr(sys.modules.get("__main__"), "__file__", None))
    out = set()
    for f in files:
        if not f or not f.endswith(".py"):
            continue
        path = Path(f).resolve()
        if path.is_relative_to(CHECKOUT):
            rel = path.relative_to(CHECKOUT)
            if rel.parts[0] in CODE_DIRS:
                out.add(rel.as_posix())
    return sorted(out)


def code_record() -> dict[str, Any]:
    """The code a result was made with: the git commit (None outside a checkout) and the
    hash (:func:`module_hash`) of every checkout module the process imported."""
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=CHECKOUT, capture_output=True,
                                text=True, timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        commit = None
    return {"commit": commit,
            "modules": {m: module_hash(CHECKOUT / m) for m in loaded_modules()}}


def changed_modules(meta: Mapping[str, Any]) -> list[str] | None:
    """The modules whose code differs today from what a result's ``meta`` recorded (gone
    ones included); None when it recorded no code (made before records were kept)."""
    mods = (meta.get("code") or {}).get("modules")
    if not mods:
        return None
    out = []
    for rel, h in mods.items():
        path = CHECKOUT / rel
        if not path.is_file() or module_hash(path) != h:
            out.append(rel)
    return out


#: every results file read since :func:`track_reads` started (None: not tracking)
_READS: list[Path] | None = None


def track_reads(on: bool = True) -> list[Path]:
    """Start (or stop) recording the results files :func:`read_results` and
    :func:`read_jsonl` read; returns those read since the last start."""
    global _READS
    done = list(_READS or [])
    _READS = [] if on else None
    return done


def _read(path: Path) -> None:
    if _READS is not None:
        _READS.append(Path(path).resolve())


def results_path(script: str, out: Path | None = None) -> Path:
    """``out`` or ``simulations/results/<script>.json``."""
    return Path(out) if out else RESULTS_DIR / f"{script}.json"


def write_results(script: str, payload: dict[str, Any], out: Path | None = None) -> Path:
    """Write ``{"meta": ..., **payload}`` to ``results/<script>.json`` (or ``out``).

    Parameters
    ----------
    script
        The script's name without ``.py``.
    payload
        Its numbers: ``settings``, ``summary``, ``rows``, ``per_seed``, ``checks``...

    Returns
    -------
    Path
        The file written.
    """
    path = results_path(script, out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(jsonable({"meta": metadata(script), **payload}), indent=1) + "\n")
    return path


def read_results(script: str) -> dict[str, Any]:
    """The JSON a script wrote (``results/<script>.json``)."""
    path = results_path(script)
    out = json.loads(path.read_text())
    _read(path)
    return out


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Every record of a JSON-lines file (blank lines skipped)."""
    out = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    _read(path)
    return out


def append_jsonl(path: str | Path, record: dict[str, Any]) -> None:
    """Append one record to a JSON-lines file (a long run keeps what it finished)."""
    with open(path, "a") as fh:
        fh.write(json.dumps(record) + "\n")


def finish(script: str, args: argparse.Namespace, clock: Clock, checks: dict[str, str],
           heading: str, payload: dict[str, Any]) -> Path:
    """Print the acceptance checks and elapsed time, then write the run's JSON; return its path."""
    log(f"\n{heading}")
    for k, v in checks.items():
        log(f"  {v:6s} {k}")
    elapsed = clock()
    log(f"elapsed {elapsed:.0f}s")
    path = write_results(script, {"settings": settings(args), **payload, "checks": checks,
                                  "elapsed_s": elapsed}, args.out)
    log(f"wrote {path}")
    return path


def script_name(file: str) -> str:
    """``simulations/<folder>/x.py`` -> ``x``: the results name of a script (``__file__``)."""
    return Path(file).stem
