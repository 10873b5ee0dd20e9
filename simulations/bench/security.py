"""Issues 20 and 35's security rows ("Trust no one", and its hostile inputs found later):
every probe of a hostile party, re-run.

Issue 20 probed the App as a run submitter, a node operator and a client acting against the
others would; issue 35 found more hostile inputs (name lists from nodes, PSI parties that
deviate, knowledge files, non-finite numbers, the outputs root). Each probe here repeats one
finding the way it was seen, in process (the App's ServerApp and ClientApp on
:class:`fedcausal_flwr.testing.InProcessGrid`, the launcher's ``--knowledge``, or the public
function the finding went through), and returns ``(outcome words, handled, detail)``. "before"
is what the same probe gave on the code before the issue's fixes (issue 20: be41777; issue 35:
3c8cd83, its rows' "before" starting "issue 35:"; checked once by hand, not rerun here). Who
is trusted with what, and what is not defended: ``docs/threat-model.md``.

No probe puts a file's content or a cell's value in its words: a probe that finds one where it
must not be says where, redacted. Writes ``results/security.json``, then regenerates the
``security`` table of ``results/reliability.md`` from it (``simulations/tables.py``).
``tests/federation/test_security_rows.py`` reruns the cheap probes against the committed JSON.

    python simulations/bench/security.py                   # every probe (~10 s)
    python simulations/bench/security.py --quick           # the cheap ones (no 3,000 rounds)
    python simulations/bench/security.py --probes run-name late-round --out /tmp/s.json

The committed JSON is a full run: ``--quick`` or ``--probes`` without ``--out`` overwrite it
with fewer rows (the test then fails until a full run).
"""

from __future__ import annotations

import csv
import json
import logging
import math
import os
import resource
import sys
import tempfile
import time
import tracemalloc
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import _sims  # noqa: F401 - simulations/ on sys.path
import numpy as np
from harness import Clock, log, markdown, parser, read_results, settings, write_results

from fedcausal_flwr import server_app
from fedcausal_flwr.appconfig import OUTPUTS_ROOT_ENV, glue, view
from fedcausal_flwr.client_app import app as client_app
from fedcausal_flwr.data.nodefiles import ALLOW_ENV, ALLOW_RUN_CONFIG_PATHS
from fedcausal_flwr.results import RunResult
from fedcausal_flwr.settings import SHARED_KEYS
from fedcausal_flwr.testing import InProcessGrid
from tests.helpers.faults import SMALL, run_app

# This script is the operator of the ServerApps it runs in process: their outputs root
# (FEDCAUSAL_OUTPUTS_ROOT) is the temporary folder, where each probe's folder lies.
os.environ.setdefault(OUTPUTS_ROOT_ENV, tempfile.gettempdir())

SCRIPT = "security"
#: (outcome words, handled, detail): the words are the table's "now"; the detail says what
#: the probe saw (numbers that vary from run to run go here, not in the words)
Outcome = tuple[str, bool, str]
SECRET = "SECRET_TOKEN"
NO_OPT_IN = {ALLOW_RUN_CONFIG_PATHS: False}
FAST = {"min-nodes": 2, "node-wait-s": 2.0, "round-timeout-s": 5.0}


@dataclass(frozen=True)
class Probe:
    """One finding of issue 20 or 35 and the function that repeats it."""

    name: str
    what: str  # the probe, as the table names it
    before: str  # what the issue saw (issue 35's rows say so)
    fn: Callable[[Path], Outcome]
    cheap: bool = True  # a few seconds at most: the tests rerun it


PROBES: dict[str, Probe] = {}


def probe(name: str, what: str, before: str, cheap: bool = True
          ) -> Callable[[Callable[[Path], Outcome]], Callable[[Path], Outcome]]:
    """Register the decorated function as the probe ``name`` (in the table's order)."""
    def add(fn: Callable[[Path], Outcome]) -> Callable[[Path], Outcome]:
        PROBES[name] = Probe(name, what, before, fn, cheap)
        return fn

    return add


# ----------------------------------------------------------------------------- helpers
@contextmanager
def quiet() -> Iterator[None]:
    """Flower's log silenced (every probe logs refusals; a node logs its local detail)."""
    logger = logging.getLogger("flwr")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            yield
        finally:
            logger.setLevel(level)


@contextmanager
def no_env_opt_in() -> Iterator[None]:
    """Without ``FEDCAUSAL_ALLOW_RUN_CONFIG_PATHS`` in this process (a node that did not opt
    in by its environment either)."""
    old = os.environ.pop(ALLOW_ENV, None)
    try:
        yield
    finally:
        if old is not None:
            os.environ[ALLOW_ENV] = old


def clip(text: Any, n: int = 160) -> str:
    """``text`` on one line, at most ``n`` characters."""
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[:n - 3] + "..."


def redact(text: str, secrets: Sequence[str]) -> str:
    """``text`` with every secret replaced (a probe's detail never repeats what leaked)."""
    for s in secrets:
        text = text.replace(s, "<redacted>")
    return text


def wire_text(grid: InProcessGrid) -> str:
    """What the nodes sent the server: error reasons and config/metric records."""
    out = []
    for m in grid.received:
        if m.has_error():
            out.append(str(m.error.reason))
            continue
        for name, rec in m.content.items():
            if name not in m.content.array_records:
                out.append(f"{name}: {dict(rec)}")
    return "\n".join(out)


def leaks(places: Mapping[str, str], secrets: Sequence[str]) -> list[str]:
    """The places whose text holds any of ``secrets``."""
    return [where for where, text in places.items() if any(s in text for s in secrets)]


@dataclass
class AppRun:
    """One in-process run of the App's ServerApp (``server_app.run``) on an InProcessGrid."""

    grid: InProcessGrid
    status: str  # result.json's status
    dropped: list[str]
    result_json: str  # the whole file as written
    raised: str  # what server_app.run raised, or ""

    def places(self) -> dict[str, str]:
        """Every text the server side holds, by where it is."""
        return {"status": self.status, "dropped": "\n".join(self.dropped),
                "result.json": self.result_json, "the wire": wire_text(self.grid),
                "the raised error": self.raised}


def app_run(tmp: Path, rc: Mapping[str, Any], k: int,
            node_configs: Mapping[int, Mapping[str, Any]] | None = None,
            app: Callable = client_app) -> AppRun:
    """Run the App's ServerApp with ``rc`` on ``k`` in-process nodes of ``app`` (default the
    App's ClientApp); results under ``tmp``."""
    rc = {**rc, "outputs": str(tmp / "outputs"), "run-name": "probe"}
    grid = InProcessGrid(app, k, rc, node_configs)
    raised = ""
    try:
        server_app.run(grid, rc)
    except Exception as e:  # noqa: BLE001 - a refusal may raise; result.json holds it too
        raised = f"{type(e).__name__}: {e}"
    path = tmp / "outputs" / "probe" / "result.json"
    text = path.read_text() if path.exists() else ""
    doc = json.loads(text) if text else {}
    return AppRun(grid, doc.get("status", "no result.json"),
                  list(doc.get("metrics", {}).get("dropped", [])), text, raised)


def dropped_of(run: AppRun, node: int) -> str:
    """The drop line naming ``node`` (empty if none)."""
    return next((d for d in run.dropped if d.startswith(f"node {node}")
                 or f"(node {node})" in d), "")


def write_csv(path: Path, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> Path:
    """A CSV file; its path."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return path


def own_data_run(tmp: Path, bad: Path, bad_node: Mapping[str, Any] | None = None) -> AppRun:
    """FDBNL on three node operators' own CSVs (``dbn.data="node"``: no built-in truth to
    score), two good, the third ``bad``."""
    rng = np.random.default_rng(0)
    nodes = {i: {"data-path": str(write_csv(tmp / f"good{i}.csv", ["a", "b", "c"],
                                            rng.standard_normal((30, 3)).round(6)))}
             for i in range(2)}
    nodes[2] = {"data-path": str(bad), **(bad_node or {})}
    return app_run(tmp, {"algorithm": "fdbnl", "dbn.data": "node", "dbn.num-rounds": 1, **FAST},
                   3, nodes)


def peak_rss_mb() -> float:
    """This process's peak resident memory so far, MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def verdict(checks: Mapping[str, bool]) -> tuple[bool, str]:
    """Whether every check passed, and the failed ones in words."""
    failed = [k for k, ok in checks.items() if not ok]
    return not failed, "; ".join(failed)


# ----------------------------------------------------------------------------- node files
PASSWD = Path("/etc/passwd")


def file_lines(path: Path) -> list[str]:
    """The lines of ``path`` that no message may repeat (those of 8 characters or more, and
    ``root:x``); none if it is absent."""
    if not path.is_file():
        return ["root:x"]
    lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines()]
    return [ln for ln in lines if len(ln) >= 8] + ["root:x"]


def passwd(tmp: Path) -> tuple[Path, list[str]]:
    """``/etc/passwd`` and its lines (a stand-in with the same kind of lines where absent)."""
    path = PASSWD
    if not path.is_file():
        path = tmp / "passwd"
        path.write_text("root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1::/:/bin/false\n")
    return path, file_lines(path)


@probe("run-config-path", "run config `dbn.data-path=/etc/passwd` (`dbn.data=dream4`), nodes "
       "without opt-in",
       "each node opened the submitter's path; the parse error carried the file's first two "
       "lines to the server's status, dropped list and result.json")
def run_config_path(tmp: Path) -> Outcome:
    """The submitter names a node's file in the run config; the nodes did not opt in."""
    path, lines = passwd(tmp)
    with no_env_opt_in():
        run = app_run(tmp, {"algorithm": "fdbnl", "dbn.data": "dream4",
                            "dbn.data-path": str(path), "dbn.num-rounds": 1, **FAST},
                      2, {0: NO_OPT_IN, 1: NO_OPT_IN})
    drops = [dropped_of(run, 1000 + i) for i in range(2)]
    leaked = leaks(run.places(), lines)
    ok, failed = verdict({
        "a node did not refuse naming dbn.data-path and allow-run-config-paths":
            all("dbn.data-path" in d and ALLOW_RUN_CONFIG_PATHS in d for d in drops),
        "the run did not stop": run.status.startswith("stopped"),
        "a message other than query.info was sent":
            {m.metadata.message_type for m in run.grid.sent} == {"query.info"},
        f"the file's content is in {', '.join(leaked)}": not leaked})
    words = ("refused on every node, naming `dbn.data-path` and the node-config opt-in; no "
             "line of the file on the wire or in result.json") if ok else f"NOT HANDLED: {failed}"
    return words, ok, redact(f"{clip(drops[0])}; status: {clip(run.status)}", lines)


@probe("bad-cell", f"a node operator's own CSV with a bad cell `{SECRET}` (node config "
       "`data-path`)",
       "the error named row and column and quoted the cell: the token reached the server's "
       "dropped list and result.json")
def bad_cell(tmp: Path) -> Outcome:
    """A cell of a node's own CSV is not a number; its text must stay on the node."""
    bad = write_csv(tmp / "own.csv", ["a", "b", "c"],
                    [[1, 2, 3], [4, SECRET, 6], [7, 8, 9], [1, 2, 3]])
    run = own_data_run(tmp, bad)
    drop = dropped_of(run, 1002)
    leaked = leaks(run.places(), [SECRET])
    ok, failed = verdict({
        "the error does not name the file, row 3 and column 2":
            "own.csv" in drop and "row 3, column 2" in drop,
        "the other nodes' run did not complete": run.status == "completed",
        f"the cell's text is in {', '.join(leaked)}": not leaked})
    words = ("dropped, named with file, row and column; the cell's text is nowhere on the "
             "server side" if ok else f"NOT HANDLED: {failed}")
    return words, ok, redact(clip(drop, 240), [SECRET])


@probe("dev-zero", "`dbn.data-path=/dev/zero` on nodes that opted in",
       "each node read /dev/zero until its memory ran out (MemoryError after 5 s under a 3 GB "
       "limit)")
def dev_zero(tmp: Path) -> Outcome:
    """A path that is no regular file: it must be refused before it is read."""
    rss = peak_rss_mb()
    run = app_run(tmp, {"algorithm": "fdbnl", "dbn.data": "dream4",
                        "dbn.data-path": "/dev/zero", "dbn.num-rounds": 1, **FAST}, 2)
    grown = peak_rss_mb() - rss
    drops = [dropped_of(run, 1000 + i) for i in range(2)]
    ok, failed = verdict({
        "a node did not refuse it as not a regular file":
            all("not a regular file" in d for d in drops),
        f"peak memory grew by {grown:.0f} MB": grown < 256})
    words = ("refused on every node as not a regular file, before reading it; no memory "
             "growth" if ok else f"NOT HANDLED: {failed}")
    return words, ok, f"{clip(drops[0], 240)}; peak memory +{grown:.0f} MB"


@probe("oversize-file", "a node's own CSV larger than its node config `max-file-mb` (8 MB, "
       "limit 1)",
       "no size limit: the whole file was read into the CSV parser (which then failed)")
def oversize_file(tmp: Path) -> Outcome:
    """A file over the node's size limit (sparse: nothing written) is refused unread."""
    big = tmp / "big.csv"
    big.write_text("a,b,c\n")
    os.truncate(big, 8 * 1024 * 1024)
    run = own_data_run(tmp, big, {"max-file-mb": 1})
    drop = dropped_of(run, 1002)
    ok, failed = verdict({
        "the error does not name max-file-mb": "max-file-mb" in drop,
        "it was parsed (a parse error, not the size)": "not a number" not in drop
        and "row" not in drop,
        "the other nodes' run did not complete": run.status == "completed"})
    words = ("dropped before parsing, naming its size and `max-file-mb`" if ok
             else f"NOT HANDLED: {failed}")
    return words, ok, clip(drop, 240)


@probe("wide-file", "a node's own CSV with 3,000 columns (over the default `max-columns` "
       "2000) and non-numeric rows",
       "no column limit: the header was taken and the rows parsed; the first bad cell stopped "
       "it, its text quoted to the server")
def wide_file(tmp: Path) -> Outcome:
    """A header wider than the node's limit stops the file before its first row."""
    wide = write_csv(tmp / "wide.csv", [f"v{j}" for j in range(3000)], [["x"] * 3000] * 3)
    run = own_data_run(tmp, wide)
    drop = dropped_of(run, 1002)
    ok, failed = verdict({
        "the error does not name max-columns": "max-columns" in drop,
        "its rows were parsed (a cell error)": "not a number" not in drop,
        "the other nodes' run did not complete": run.status == "completed"})
    words = ("dropped on its header, before any row, naming `max-columns`" if ok
             else f"NOT HANDLED: {failed}")
    return words, ok, clip(drop, 240)


# ----------------------------------------------------------------------------- run config
#: (algorithm, key, absurd value, other keys, what the issue saw)
ABSURD: list[tuple[str, str, int, dict[str, Any], str]] = [
    ("fdbnl", "dbn.lags", 10**6, {"dbn.samples-per-client": 40},
     "accepted: the nodes set out to build it (no answer within 60 s)"),
    ("fediv", "iv.iv-n", 10**9, {},
     "accepted; building the strategy allocated the data set: MemoryError (15 GiB), or the "
     "process was killed"),
    ("fdbnl", "dbn.samples-per-client", 10**9, {},
     "accepted: no upper bound"),
    ("fedgc", "statespace.ss-t", 10**9, {},
     "accepted by the settings; building the run failed with `KeyError: 'seed'`, no key "
     "named"),
    ("fdbnl", "dbn.num-rounds", 10**9, {}, "accepted: no upper bound on the rounds"),
    ("fdbnl", "seed", -1, {}, "accepted by the server; every node then failed its "
     "`query.info` with numpy's 'expected non-negative integer', no key named"),
]


def absurd_size(algorithm: str, key: str, value: int, extra: Mapping[str, Any]
                ) -> Callable[[Path], Outcome]:
    """The probe of one absurd value: refused by the App's ServerApp before any node is asked
    and before anything is allocated (Python's traced allocations stay small)."""
    def fn(tmp: Path) -> Outcome:
        rc = {"algorithm": algorithm, key: value, **extra,
              "outputs": str(tmp / "outputs"), "run-name": "probe"}

        def refusal() -> str:
            try:
                server_app.run(None, rc)  # type: ignore[arg-type] - no node may be needed
            except Exception as e:  # noqa: BLE001 - the refusal
                return f"{type(e).__name__}: {e}"
            return "accepted"

        refusal()  # imports the family's modules: not counted below
        tracemalloc.start()
        try:
            said = refusal()
            peak = tracemalloc.get_traced_memory()[1] / 2**20
        finally:
            tracemalloc.stop()
        status = json.loads((tmp / "outputs" / "probe" / "result.json").read_text())["status"]
        named = f"'{key}' = {value}: must be"
        ok, failed = verdict({f"the error does not say {named!r}": named in said,
                              "result.json's status does not name it": named in status,
                              f"{peak:.0f} MB allocated": peak < 64})
        words = (f"refused before any node or allocation: `{named} ...`" if ok
                 else f"NOT HANDLED: {failed}")
        return words, ok, f"{clip(said)}; traced peak {peak:.1f} MB"

    return fn


for _alg, _key, _value, _extra, _before in ABSURD:
    probe(f"size:{_key}", f"`{_key}={_value if _value < 10**5 else f'10**{len(str(_value)) - 1}'}`"
          + (" on 40 rows" if _extra else "") + f" ({_alg})", _before)(
        absurd_size(_alg, _key, _value, _extra))


@probe("unknown-key-app", "unknown run-config key `num-round=5` (and `dbn.num-round=5`), the "
       "App's ServerApp in process",
       "already refused by name (`appconfig.check`, since the sectioned run config)")
def unknown_key_app(tmp: Path) -> Outcome:
    """A misspelt key through the App's ServerApp: refused, named, before any node."""
    said = []
    for key, words in (("num-round", "'num-round' is not a key of the App"),
                       ("dbn.num-round", "did you mean 'dbn.num-rounds'?")):
        run = app_run(tmp / key, {**SMALL["fdbnl"][0], key: 5}, SMALL["fdbnl"][1])
        said.append((words in run.raised and words in run.status, not run.grid.sent,
                     run.raised))
    ok, failed = verdict({"not refused by name": all(s[0] for s in said),
                          "a node was asked": all(s[1] for s in said)})
    words = ("refused before any node, naming the key (and the key it meant)" if ok
             else f"NOT HANDLED: {failed}")
    return words, ok, " | ".join(clip(s[2], 120) for s in said)


@probe("unknown-key-library", "the same key through `testing.run_app` (the App in process "
       "without its ServerApp)",
       "ignored: the run completed with the default number of rounds")
def unknown_key_library(tmp: Path) -> Outcome:
    """A misspelt key through the test helper that runs the App in process: checked as the
    App's ServerApp checks it. (A strategy built from ``Settings.from_run_config`` reads only
    its own keys by design: a user's Flower project has keys of its own.)"""
    rc, k = {**SMALL["fdbnl"][0], "num-round": 5}, SMALL["fdbnl"][1]
    result = run_app("fdbnl", client_app, k, rc=rc)
    if result.status.startswith("failed") and "num-round" in result.status:
        return "refused, naming the key", True, clip(result.status)
    rounds = len(result.history)
    return ("not handled: ignored, the run completes (`Settings.from_run_config` reads only its "
            "own keys, as a user's project with keys of its own needs; the App's ServerApp "
            "refuses it: row above)", False, f"status {result.status}, {rounds} rounds")


@probe("run-name", "`run-name=\"../../x\"`; `RunResult.save`/`checkpoint` to a folder outside "
       "`outputs`",
       "the run's folder was `outputs/../../x`: results written outside `outputs`")
def run_name(tmp: Path) -> Outcome:
    """Results never leave ``outputs``, whatever the run name or the directory asked for."""
    outputs = tmp / "run" / "outputs"  # ../../x is tmp/x: an escape stays in the probe's tmp
    rc = {"algorithm": "fdbnl", "outputs": str(outputs), "run-name": "../../x"}
    try:
        server_app.run(None, rc)  # type: ignore[arg-type] - refused before any node
        said = "accepted"
    except Exception as e:  # noqa: BLE001 - the refusal, or the missing grid if accepted
        said = f"{type(e).__name__}: {e}"
    refusals = []
    result = RunResult("fdbnl", {})
    for write in (result.save, result.checkpoint):
        for where in (tmp / "x", outputs / ".." / "x"):
            try:
                write(where, within=outputs)
                refusals.append(False)
            except ValueError as e:
                refusals.append("not under the outputs directory" in str(e))
    outside = [p for p in tmp.rglob("*") if p.is_file() and not p.is_relative_to(outputs)]
    ok, failed = verdict({"the run name was not refused by name": "ValueError: run config "
                          "'run-name'" in said,
                          "save/checkpoint wrote outside outputs": all(refusals),
                          f"{len(outside)} files outside outputs": not outside})
    words = ("refused naming `run-name` (its failure recorded under `outputs`); "
             "`save`/`checkpoint` refuse a folder outside `outputs`" if ok
             else f"NOT HANDLED: {failed}")
    return words, ok, clip(said)


# ----------------------------------------------------------------------------- parties
def vfedcd_csvs(tmp: Path) -> dict[int, dict[str, Any]]:
    """Two VFedCD parties' own CSVs (id and two attributes each) and their node configs."""
    X = np.random.default_rng(4).standard_normal((12, 4))
    return {pid: {"data-path": str(write_csv(
        tmp / f"party{pid}.csv", ["id", f"a{pid}", f"b{pid}"],
        [[str(r), *X[r, 2 * pid:2 * pid + 2].round(6)] for r in range(12)])), "id-key": "k"}
        for pid in range(2)}


@probe("vfedcd-consent", "VFedCD parties with their own data, the run config alone carrying "
       "consent to the mock backend and 256-bit keys (`vertical.vfedcd-accept-*`)",
       "completed: the parties took the run submitter's consent and trained on the mock "
       "backend (nothing encrypted)")
def vfedcd_consent(tmp: Path) -> Outcome:
    """The submitter cannot consent for a party that holds its own data."""
    rc = {**SMALL["vfedcd"][0], "vertical.data": "node", "vertical.parts": "2,2",
          "vertical.num-epochs": 1}
    grid = InProcessGrid(client_app, 2, rc, vfedcd_csvs(tmp))
    result = glue("vfedcd").strategy("vfedcd", view("vfedcd", rc)).start(grid=grid)
    st = result.status
    ok, failed = verdict({
        "the run did not stop": st.startswith("stopped"),
        "a party's refusal is not named": "party 0 refuses" in st and "party 1 refuses" in st,
        "the node-config key is not named": "vfedcd-accept-backends" in st,
        "a training message was sent":
            {m.metadata.message_type for m in grid.sent} == {"query.info"}})
    words = ("stopped at discovery: each party refuses, naming the node-config key "
             "`vfedcd-accept-backends`; nothing encrypted or sent" if ok
             else f"NOT HANDLED: {failed}")
    return words, ok, clip(st, 220)


# ----------------------------------------------------------------------------- late nodes
class SlowStart(InProcessGrid):
    """Every node answers its first message (``query.info``) 0.8 s late (a cold app install),
    later than the 0.5 s reply timeout of :data:`SMALL`."""

    delay_s = 0.8

    def add_node(self, *args: Any, **kwargs: Any) -> int:  # noqa: D102
        node = super().add_node(*args, **kwargs)
        self.delay(node, self.delay_s)
        return node


def fdbnl_run(grid_class: type[InProcessGrid], k: int, rc: Mapping[str, Any],
              events: Mapping[int, Callable[[InProcessGrid], Any]] | None = None,
              app: Callable = client_app) -> tuple[RunResult, InProcessGrid, Any]:
    """FDBNL (the App's glue; ``app``, default its ClientApp) on ``k`` in-process nodes;
    ``events[r](grid)`` runs after round ``r``. The result, the grid and the strategy."""
    grid = grid_class(app, k, rc)
    strategy = glue("fdbnl").strategy("fdbnl", view("fdbnl", rc))
    events = events or {}
    strategy.checkpoint = lambda res: events.get(len(res.history), lambda g: None)(grid)
    return strategy.start(grid=grid), grid, strategy


@probe("late-discovery", "every node answers `query.info` after `round-timeout-s` (0.5 s) "
       "but within `node-wait-s` (5 s)",
       "every node dropped at discovery ('no reply to query.info in 0.5s'): the run stopped "
       "with 0 usable nodes")
def late_discovery(tmp: Path) -> Outcome:
    """Late is not dead at discovery."""
    rc = {**SMALL["fdbnl"][0], "dbn.num-rounds": 3}
    result, _, _ = fdbnl_run(SlowStart, 3, rc)
    clients = [h["n_clients"] for h in result.history]
    ok, failed = verdict({"the run did not complete": result.status == "completed",
                          "a node was dropped": not result.metrics.get("dropped"),
                          "a round ran without every node": clients == [3, 3, 3]})
    words = ("waited for within `node-wait-s`: the run completes with every node" if ok
             else f"NOT HANDLED: {failed}")
    return words, ok, f"status {clip(result.status)}, clients per round {clients}"


@probe("late-round", "a node's round-3 reply 0.75 s late (reply timeout 0.5 s, `min-nodes` "
       "= all 3)",
       "the late node dropped at the 0.5 s timeout: the run stopped in round 3 (min-nodes=3)")
def late_round(tmp: Path) -> Outcome:
    """Late is not dead in a round: the exchange waits once more, counted."""
    rc = {**SMALL["fdbnl"][0], "dbn.num-rounds": 4, "min-nodes": 3}
    result, _, _ = fdbnl_run(InProcessGrid, 3, rc,
                             {2: lambda g: g.delay(g.node_id(2), 0.75)})
    retries = [h.get("retries", 0) for h in result.history]
    ok, failed = verdict({"the run did not complete": result.status == "completed",
                          "a node was dropped": not result.metrics.get("dropped"),
                          "the retry was not counted in round 3": retries == [0, 0, 1, 0]})
    words = ("the exchange waits once more: the run completes with every node, the retry "
             "counted in round 3" if ok else f"NOT HANDLED: {failed}")
    return words, ok, f"status {clip(result.status)}, retries per round {retries}"


# ----------------------------------------------------------------------------- replies
def without_metrics(app: Callable, pid: int = 1) -> Callable:
    """``app`` whose partition ``pid`` answers its decode messages without a metrics record."""
    from flwr.app import Message, RecordDict

    def call(msg: Any, context: Any) -> Any:
        reply = app(msg, context)
        if msg.metadata.message_type.endswith("decode") and not reply.has_error() \
                and int(context.node_config["partition-id"]) == pid:
            reply = Message(RecordDict({"arrays": reply.content["arrays"]}), reply_to=msg)
        return reply

    return call


@probe("vfedcd-no-metrics", "a VFedCD party's decode reply without its metrics record",
       "the server failed with `KeyError: 'loss'`, naming no party")
def vfedcd_no_metrics(tmp: Path) -> Outcome:
    """A malformed reply of an every-party protocol stops the run naming the party."""
    rc = {**SMALL["vfedcd"][0], "vertical.num-epochs": 1}
    grid = InProcessGrid(without_metrics(client_app), SMALL["vfedcd"][1], rc)
    result = glue("vfedcd").strategy("vfedcd", view("vfedcd", rc)).start(grid=grid)
    st = result.status
    ok, failed = verdict({
        "the run did not stop naming client 1 and the phase":
            st.startswith("stopped") and "client 1 failed in phase vfedcd_decode" in st,
        "it says the metrics record is missing": "without its metrics record" in st,
        "a KeyError": "KeyError" not in st})
    words = ("stopped, naming party 1, its phase and the missing metrics record" if ok
             else f"NOT HANDLED: {failed}")
    return words, ok, clip(st)


# ----------------------------------------------------------------------------- checkpoints
@probe("checkpoint-cost", "result.json checkpointed every round over 3,000 rounds",
       "result.json rewritten whole every round (`RunResult.save`): O(rounds) per round, "
       "O(rounds^2) per run",
       cheap=False)
def checkpoint_cost(tmp: Path) -> Outcome:
    """O(1) per round: the running result.json of a 3,000-round run is no larger than a
    300-round run's, and its last rounds are not much slower (rewriting the file whole made
    them about ten times slower; timings on a shared machine vary, hence the wide margin)."""
    from checkpoint_cost import run as cost_run

    long = cost_run("checkpoint", 3000, 10, tmp / "long")
    short = cost_run("checkpoint", 300, 10, tmp / "short")
    ratio = long["last10_rounds_per_s"] / short["last10_rounds_per_s"]
    ok, failed = verdict({
        f"the last rounds are {1 / ratio:.1f}x slower than a short run's": ratio >= 1 / 3,
        "result.json grows with the rounds":
            long["result_json_bytes"] <= short["result_json_bytes"] + 1024,
        "a reader misses rounds": long["reader_sees_every_round"]
        and long["final_has_history"]})
    rates = (f"{long['rounds_per_s']:.0f} rounds/s over 3,000 rounds, the last 10 % "
             f"{long['last10_rounds_per_s']:.0f} (a 300-round run's: "
             f"{short['last10_rounds_per_s']:.0f})")
    words = (f"O(1) per round: one appended line (`history.jsonl`) and a summary; {rates}" if ok
             else f"NOT HANDLED: {failed}")
    return words, ok, (f"{rates}; running result.json {long['result_json_bytes']} B "
                       f"(300 rounds: {short['result_json_bytes']} B)")


# ----------------------------------------------------------------------------- identity
# SLOT: partition binding (issue 20, branch i20-bind, merged). Where the shared keys lack
# ``bind-partitions`` this probe reports "not handled: partitions are self-declared"; where
# they have it, it runs with ``bind-partitions=true`` and reports what the roster did.
#: the run-config key that binds a partition to its node id, where the settings have it
BIND_KEY = "bind-partitions"


@probe("impersonation", "another registered node claims a bound partition (partition 1's node "
       "leaves after round 1; a new node id says `partition-id=1`)",
       "taken: the new node id became client 1 (partition ids are self-declared)")
def impersonation(tmp: Path) -> Outcome:
    """A new node id claims a partition that another node held: refused, or taken over.

    With ``bind-partitions`` among the shared keys (partition binding), the run binds; without
    it, partition ids are self-declared and the probe says so.
    """
    bind = BIND_KEY in SHARED_KEYS
    rc = {**SMALL["fdbnl"][0], "dbn.num-rounds": 3, **({BIND_KEY: True} if bind else {})}
    claimed: list[int] = []

    def claim(grid: InProcessGrid) -> None:
        grid.remove_node(grid.node_id(1))
        claimed.append(grid.add_node(1))

    result, _, strategy = fdbnl_run(InProcessGrid, SMALL["fdbnl"][1], rc, {1: claim})
    (new,) = claimed
    holder = strategy.roster.nodes[1].node_id if 1 in strategy.roster.nodes else None
    named = [d for d in result.metrics.get("dropped", []) if d.startswith(f"node {new}")
             or f"(node {new})" in d]
    setting = f"{BIND_KEY}=true" if bind else f"no `{BIND_KEY}` setting"
    if holder == new:
        return (f"not handled: partitions are self-declared ({setting}); node {new} took "
                "client 1's place", False, f"status {clip(result.status)}; client 1 is now "
                f"node {new}")
    ok = bool(named) and "refused" in named[0] and result.status == "completed"
    words = (f"refused and named ({setting}, which the launcher's authenticated deployment "
             "sets; by default partitions stay self-declared: `docs/threat-model.md`); the run "
             "goes on without client 1" if ok
             else f"NOT HANDLED: the claim was neither taken nor refused by name ({setting})")
    return words, ok, clip(named[0] if named else result.status)


# ----------------------------------------------------------------------------- issue 35
# Issue 35 ("hostile inputs, again") found more, at 3c8cd83; each row below repeats one of them.
ISSUE_35 = "issue 35: "  # its rows' "before" says whose finding it was


@contextmanager
def env(name: str, value: str | None) -> Iterator[None]:
    """This process's environment variable ``name`` set to ``value`` (None: unset), then
    restored."""
    old = os.environ.pop(name, None)
    if value is not None:
        os.environ[name] = value
    try:
        yield
    finally:
        os.environ.pop(name, None)
        if old is not None:
            os.environ[name] = old


@contextmanager
def patched(obj: Any, attr: str, value: Any) -> Iterator[None]:
    """``obj.attr`` replaced by ``value``, then restored (a defence taken away on purpose)."""
    old = getattr(obj, attr)
    setattr(obj, attr, value)
    try:
        yield
    finally:
        setattr(obj, attr, old)


def app_refusal(tmp: Path, rc: Mapping[str, Any]) -> tuple[str, str]:
    """What the App's ServerApp raised for ``rc`` with no grid (a refusal needs no node), and
    the status its result.json records."""
    rc = {**rc, "outputs": str(tmp / "outputs"), "run-name": "probe"}
    try:
        server_app.run(None, rc)  # type: ignore[arg-type] - no node may be needed
        said = "accepted"
    except Exception as e:  # noqa: BLE001 - the refusal
        said = f"{type(e).__name__}: {e}"
    path = tmp / "outputs" / "probe" / "result.json"
    return said, json.loads(path.read_text())["status"] if path.exists() else "no result.json"


def lying_info(props: Mapping[str, Any], pid: int = 2) -> Callable:
    """The App's ClientApp whose partition ``pid`` answers ``query.info`` with ``props``
    changed (its data and every other reply stay honest)."""
    from flwr.app import ConfigRecord, Message, RecordDict

    def call(msg: Any, context: Any) -> Any:
        reply = client_app(msg, context)
        if msg.metadata.message_type == "query.info" and not reply.has_error() \
                and int(context.node_config["partition-id"]) == pid:
            changed = {**dict(reply.content["properties"]), **props}
            reply = Message(RecordDict({"properties": ConfigRecord(changed)}), reply_to=msg)
        return reply

    return call


def drop_of_partition(result: RunResult, grid: InProcessGrid, pid: int) -> str:
    """The drop line naming partition ``pid``'s node and partition (empty if none)."""
    who = f"node {grid.node_id(pid)} (partition-id {pid})"
    return next((d for d in result.metrics.get("dropped", []) if who in d), "")


@probe("node-names-count", "`dbn.variables=union`, a node listing 10**5 variable names (and "
       "one listing 3,000); sites each within the 2,000-variable cap, their union above it",
       ISSUE_35 + "the server attempted a 9.3 GiB allocation before any round (the 2,000-"
       "variable cap was checked on the run config, not on the union of the names nodes "
       "send); 3,000 names started a 3,003-variable run that died at 5.7 GB")
def node_names_count(tmp: Path) -> Outcome:
    """A node's name list is bounded at discovery; the union of the sites' names before any
    array of the federation's size exists."""
    from fedcausal_flwr.federation.nodes import NodeInfo
    from fedcausal_flwr.settings import MAX_VARS

    rc = {**SMALL["fdbnl"][0], "dbn.variables": "union", "dbn.num-rounds": 2}
    rss = peak_rss_mb()
    runs = {}
    for count in (3000, 10**5):
        names = ",".join(f"{SECRET}{i}" for i in range(count))
        result, grid, _ = fdbnl_run(InProcessGrid, 4, rc, app=lying_info({"names": names}))
        runs[count] = (result, drop_of_partition(result, grid, 2))
    grown = peak_rss_mb() - rss
    strategy = glue("fdbnl").strategy("fdbnl", view("fdbnl", rc))
    strategy.p = 1  # as setup() sets it before federation()
    lists = [[f"x{i}" for i in range(5)]] * 2 + [[f"{SECRET}{i}" for i in range(MAX_VARS - 1)]]
    try:
        strategy.federation({c: NodeInfo(100 + c, c, 3, {"d": len(x), "p": 1, "n": 40,
                                                         "names": ",".join(x)})
                             for c, x in enumerate(lists)})
        union = "accepted"
    except ValueError as e:
        union = str(e)
    drops = [d for _, d in runs.values()]
    ok, failed = verdict({
        "a node over the cap was not dropped naming its node, partition and the cap": all(
            f"lists {n} names, above the variable cap of {MAX_VARS}" in d
            for n, (_, d) in runs.items()),
        "the run did not go on with the other 3 nodes' 5 variables": all(
            r.status == "completed" and r.metrics.get("clients") == 3
            and len(r.names.get("variables", [])) == 5 for r, _ in runs.values()),
        "the union over the cap was not refused naming dbn.variables and each site":
            "'dbn.variables' = 'union'" in union and "client 2 (node 102)" in union
            and f"are {MAX_VARS + 4}, above the variable cap of {MAX_VARS}" in union,
        "a node's names are echoed": not any(SECRET in t for t in [*drops, union]),
        f"peak memory grew by {grown:.0f} MB": grown < 256})
    words = ("dropped at discovery, naming the node, its partition and the 2,000-variable cap "
             "(its names not echoed); the run goes on with the others; a union above the cap "
             "is refused naming `dbn.variables` and each site's count, before any array"
             if ok else f"NOT HANDLED: {failed}")
    return words, ok, redact(f"{clip(drops[-1])}; union: {clip(union)}; peak memory "
                             f"+{grown:.0f} MB", [SECRET])


@probe("node-name-length", "a node's `query.info` names one variable with 100,000 characters "
       "(the App's ServerApp, plots included)",
       ISSUE_35 + "accepted; the plots stalled (> 150 s)")
def node_name_length(tmp: Path) -> Outcome:
    """A name longer than the limit is refused at discovery, quoted by a short prefix only."""
    from fedcausal_flwr.federation.limits import MAX_NAME_CHARS, PREFIX_CHARS

    t0 = time.perf_counter()
    run = app_run(tmp, {**SMALL["fdbnl"][0], "dbn.num-rounds": 2}, 4,
                  app=lying_info({"names": f"x0,x1,{'s' * 100_000},x3,x4"}))
    took = time.perf_counter() - t0
    drop = dropped_of(run, run.grid.node_id(2))
    ok, failed = verdict({
        "the node was not refused naming its partition and the limit":
            "(partition-id 2)" in drop and f"100000 characters, above {MAX_NAME_CHARS}" in drop,
        "more of the name than its prefix is quoted":
            len(drop) < 1000 and "s" * (PREFIX_CHARS + 1) not in drop,
        "the run did not complete without it": run.status == "completed",
        f"the run took {took:.0f} s": took < 60})
    words = (f"refused at discovery, naming the node and the {MAX_NAME_CHARS}-character limit, "
             f"the name quoted by its first {PREFIX_CHARS} characters; the run and its plots "
             "complete without it" if ok else f"NOT HANDLED: {failed}")
    return words, ok, f"{clip(drop, 240)}; {took:.1f} s"


# PSI: three parties' own CSVs, aligned by private set intersection (tests/vertical/test_psi.py's
# smallest run); party 1 deviates
PSI_BAD = 1


def psi_run(tmp: Path, app: Callable = client_app,
            node: Mapping[int, Mapping[str, Any]] | None = None,
            rc: Mapping[str, Any] | None = None) -> tuple[str, InProcessGrid]:
    """VFedCD on the PSI tests' three parties (30, 30 and 25 IDs; node configs plus ``node``);
    its status and grid."""
    from tests.vertical.test_psi import HELD, RC, own_csvs

    tmp.mkdir(parents=True, exist_ok=True)
    cfgs = own_csvs(tmp, HELD)
    for m, extra in (node or {}).items():
        cfgs[m] = {**cfgs[m], **extra}
    rc = {**RC, **(rc or {})}
    with env("FEDCAUSAL_ID_KEY", None):  # PSI, not the keyed hash
        grid = InProcessGrid(app, 3, rc, cfgs)
        result = glue("vfedcd").strategy("vfedcd", rc).start(grid=grid)
    return result.status, grid


def psi_tampering(phase: str, fn: Callable[[np.ndarray], np.ndarray]) -> Callable:
    """The App's ClientApp whose party :data:`PSI_BAD` replaces the points of its ``phase``
    reply (its first array) by ``fn(points)``."""
    from flwr.app import ArrayRecord

    def call(msg: Any, context: Any) -> Any:
        reply = client_app(msg, context)
        if msg.metadata.message_type == f"train.vfedcd_{phase}" and not reply.has_error() \
                and int(context.node_config["partition-id"]) == PSI_BAD:
            arrays = reply.content["arrays"].to_numpy_ndarrays()
            arrays[0] = np.ascontiguousarray(fn(arrays[0]), dtype=np.uint8)
            reply.content["arrays"] = ArrayRecord(arrays)
        return reply

    return call


def sent_types(grid: InProcessGrid) -> set[str]:
    """The message types the server sent."""
    return {m.metadata.message_type for m in grid.sent}


def swap_two(a: np.ndarray) -> np.ndarray:
    """``a`` with its first two rows swapped."""
    out = a.copy()
    out[[0, 1]] = out[[1, 0]]
    return out


@probe("psi-reorder", "a VFedCD party reorders the set it re-blinds at its PSI hop (two points "
       "swapped; all reversed)",
       ISSUE_35 + "the intersection size unchanged (257), the learned B moved by up to 0.31 "
       "(largest honest entry 0.53), silently")
def psi_reorder(tmp: Path) -> Outcome:
    """A hop's output must come with a proof that it is its input times the committed key,
    position by position: a reorder fails it, and the run stops naming the party."""
    seen = []
    for what, fn in (("swapped", swap_two), ("reversed", lambda a: a[::-1])):
        st, grid = psi_run(tmp / what, psi_tampering("psi_hop", fn))
        seen.append((st, grid.node_id(PSI_BAD), sent_types(grid)))
    ok, failed = verdict({
        "the run did not stop naming the party, its hop and whose set": all(
            st.startswith("stopped") and f"party {PSI_BAD} (node {node}) at hop 1, on party "
            "0's set" in st for st, node, _ in seen),
        "another party or the ID column is blamed": not any(
            "ID column" in st or "party 2 (node" in st for st, _, _ in seen),
        "keys or training went on": not any(
            {"train.vfedcd_keys", "train.vfedcd_plain_setup"} & sent for _, _, sent in seen)})
    words = ("stopped at the hop, naming the party, the hop and whose set (its proof fails); "
             "nothing relayed, no training" if ok else f"NOT HANDLED: {failed}")
    return words, ok, clip(seen[0][0], 240)


@probe("psi-points", "a VFedCD party sends repeated points (and random bytes) as its own "
       "blinded PSI set",
       ISSUE_35 + "the run stopped, but the message blamed the ID column, not the party")
def psi_points(tmp: Path) -> Outcome:
    """A party's own first set is checked for the group and for repeats before it is relayed,
    and the party named."""
    seen = []
    for what, fn, says in (
            ("repeated", lambda a: a[np.arange(len(a)) // 2], "repeated"),
            ("random", lambda a: np.random.default_rng(3).integers(0, 256, a.shape,
                                                                   dtype=np.uint8),
             "not a valid point of the prime-order group")):
        st, grid = psi_run(tmp / what, psi_tampering("psi_blind", fn))
        seen.append((st, f"party {PSI_BAD} (node {grid.node_id(PSI_BAD)}) sent" in st
                     and says in st, sent_types(grid)))
    ok, failed = verdict({
        "the run did not stop naming the party and what is wrong with its points": all(
            st.startswith("stopped") and named for st, named, _ in seen),
        "another party or the ID column is blamed": not any(
            "ID column" in st or "party 2" in st for st, _, _ in seen),
        "its set was relayed": not any("train.vfedcd_psi_hop" in sent for _, _, sent in seen)})
    words = ("stopped before its set is relayed, naming the party and what is wrong (repeated "
             "points; not a valid point of the group)" if ok else f"NOT HANDLED: {failed}")
    return words, ok, clip(seen[0][0], 240)


@probe("psi-set-size", "a VFedCD party's set above another party's node config `max-psi-set` "
       "(30 IDs, limit 26; the run config asks 10**6), and with the server's check taken away",
       ISSUE_35 + "a party with 10**7 IDs: no bound, ~4,600 s per hop for every other party")
def psi_set_size(tmp: Path) -> Outcome:
    """The server stops at discovery naming both parties and the key; the run config cannot
    raise the limit; a party refuses an oversize set itself, before any work per point."""
    from fedcausal_flwr.vertical.strategy import VFedCD

    st, grid = psi_run(tmp / "server", node={0: {"max-psi-set": 26}},
                       rc={"max-psi-set": 10**6, "vertical.max-psi-set": 10**6})
    with patched(VFedCD, "_check_psi_limits", lambda *a: None):
        own, _ = psi_run(tmp / "party", node={2: {"max-psi-set": 29}})
    ok, failed = verdict({
        "the run did not stop at discovery naming both parties and max-psi-set":
            st.startswith("stopped") and "party 1 holds 30 IDs, above party 0's limit of 26"
            in st and "'max-psi-set'" in st,
        "something was blinded": sent_types(grid) == {"query.info"},
        "a party did not refuse the oversize set itself": own.startswith("stopped")
            and "party 2: hop 1: party 1's set of 30 points" in own and "'max-psi-set'" in own})
    words = ("stopped at discovery, nothing blinded, naming both parties and the node-config "
             "key `max-psi-set` (default 1,000,000; the run config cannot raise it); each party "
             "also refuses such a set before any work per point" if ok
             else f"NOT HANDLED: {failed}")
    return words, ok, f"{clip(st)} | party's own: {clip(own)}"


def stack_depth() -> int:
    """How many frames the stack holds here."""
    frame, n = sys._getframe(), 0
    while frame is not None:
        frame, n = frame.f_back, n + 1
    return n


@probe("knowledge-chain", "knowledge `require` a chain of 1,000 edges (v0->v1, ..., "
       "v999->v1000), and the same chain closed into a cycle",
       ISSUE_35 + "RecursionError, no key named")
def knowledge_chain(tmp: Path) -> Outcome:
    """The cycle check walks the required edges without recursion: run here with only 200
    frames above this one allowed, which a recursive walk of the chain would exceed."""
    from fedcausal_flwr.knowledge import Knowledge

    names = [f"v{i}" for i in range(1001)]
    chain = ", ".join(f"{a}->{b}" for a, b in zip(names, names[1:], strict=False))
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(stack_depth() + 200)
    said = []
    try:
        for text in (chain, chain + ", v1000->v0"):
            try:
                said.append(int(Knowledge.parse(require=text).masks(names).require_W.sum()))
            except (ValueError, RecursionError) as e:
                said.append(f"{type(e).__name__}: {e}")
    finally:
        sys.setrecursionlimit(limit)
    ok, failed = verdict({
        "the chain's 1,000 required edges were not set": said[0] == 1000,
        "the cycle was not refused naming require":
            str(said[1]).startswith("ValueError: knowledge 'require'") and "cycle" in str(said[1])})
    words = ("walked without recursion: the 1,000 required edges set; the chain closed into a "
             "cycle is refused naming `require` and the cycle" if ok
             else f"NOT HANDLED: {failed}")
    return words, ok, f"chain: {clip(said[0], 80)}; cycle: {clip(said[1], 120)}"


REPO = Path(__file__).resolve().parents[2]  # the source checkout: the App's directory


def launch_knowledge(path: Path | str) -> str:
    """What the launcher's ``--knowledge path`` gives (the run config it would send, or its
    error), read on this machine (the submitting one)."""
    from fedcausal_flwr.cli import launch

    args = launch.parser().parse_args(["simulate", "--knowledge", str(path)])
    try:
        return repr(launch.run_config(args, REPO))
    except (OSError, ValueError) as e:
        return f"{type(e).__name__}: {e}"


@probe("knowledge-tiers", "`--knowledge` file with a tier level `nan`; one with a name at two "
       "tier levels",
       ISSUE_35 + "tier level nan: tiers misordered silently; a name at two levels: the last "
       "row won silently")
def knowledge_tiers(tmp: Path) -> Outcome:
    """A tier level is a finite integer and a name has one level: otherwise the file is
    refused naming the row (both rows for a name at two levels)."""
    f = tmp / "k.csv"
    f.write_text("tier,a,0\ntier,b,nan\n")
    level = launch_knowledge(f)
    f.write_text("tier,a,0\ntier,b,1\ntier,a,2\n")
    twice = launch_knowledge(f)
    ok, failed = verdict({
        "a nan level was not refused naming its row":
            "--knowledge:" in level and "row 2: tier level must be a finite integer" in level,
        "a name at two levels was not refused naming both rows":
            "row 3: 'a' is already at tier level 0 (row 1)" in twice})
    words = ("refused by the launcher naming the row: a tier level must be a finite integer; a "
             "name at two levels names both rows" if ok else f"NOT HANDLED: {failed}")
    return words, ok, f"{clip(level)} | {clip(twice)}"


@probe("number-lists", "`dbn.lambda-path=\"0.2,nan\"` (holdout), `dbn.tau-path=\"0.1,nan\"`, "
       "a `dbn.tau-path` of 10**5 values (fdbnl)",
       ISSUE_35 + "nan: passed validation; every client failed without the key named; 10**5 "
       "values: accepted (run 10x slower)")
def number_lists(tmp: Path) -> Outcome:
    """Every list of numbers is finite and at most ``settings.MAX_LIST`` long, refused by the
    App's ServerApp before any node, naming the key (a long value not echoed whole)."""
    from fedcausal_flwr.settings import MAX_LIST

    cases = [({"dbn.lambda-path": "0.2,nan", "dbn.lambda-select": "holdout"},
              "'dbn.lambda-path' = '0.2,nan': NaN and inf are not values"),
             ({"dbn.tau-path": "0.1,nan"}, "'dbn.tau-path' = '0.1,nan': NaN and inf are not "
              "values"),
             ({"dbn.tau-path": ",".join(["0.1"] * 10**5)},
              f"100000 values, at most {MAX_LIST}")]
    seen = [(says, *app_refusal(tmp / str(i), {"algorithm": "fdbnl", **rc}))
            for i, (rc, says) in enumerate(cases)]
    ok, failed = verdict({
        "a list was not refused naming its key and why": all(
            says in said and "run config 'dbn." in said for says, said, _ in seen),
        "result.json's status does not name it": all(says in st for says, _, st in seen),
        "the long value is echoed whole": len(seen[2][1]) < 600})
    words = (f"refused before any node, naming the key: NaN and inf are not values; at most "
             f"{MAX_LIST} values" if ok else f"NOT HANDLED: {failed}")
    return words, ok, " | ".join(clip(said, 120) for _, said, _ in seen)


@probe("knowledge-file", "`--knowledge /dev/zero`; a 200 MB knowledge file (limit 4 MB)",
       ISSUE_35 + "read without a limit on the submitting machine")
def knowledge_file(tmp: Path) -> Outcome:
    """A knowledge file must be a regular file within the size limit, checked before it is
    read."""
    from fedcausal_flwr.knowledge import MAX_FILE

    big = tmp / "big.csv"
    big.write_text("forbid,a,b\n")
    os.truncate(big, 200 * 2**20)  # sparse: nothing written
    rss = peak_rss_mb()
    zero, large = launch_knowledge("/dev/zero"), launch_knowledge(big)
    grown = peak_rss_mb() - rss
    ok, failed = verdict({
        "/dev/zero was not refused as not a regular file": "/dev/zero: not a regular file" in zero,
        "the large file was not refused by its size":
            f"{200 * 2**20} bytes, more than the limit {MAX_FILE}" in large,
        f"peak memory grew by {grown:.0f} MB": grown < 64})
    words = ("refused by the launcher before reading: not a regular file; over the 4 MB limit "
             "(its size named); no memory growth" if ok else f"NOT HANDLED: {failed}")
    return words, ok, f"{clip(zero)} | {clip(large)}; peak memory +{grown:.0f} MB"


@probe("outputs-elsewhere", "the run config's `outputs` an absolute folder elsewhere (and "
       "`..`) on the ServerApp host",
       ISSUE_35 + "results written to any absolute folder on the ServerApp host")
def outputs_elsewhere(tmp: Path) -> Outcome:
    """The outputs root is the operator's (``FEDCAUSAL_OUTPUTS_ROOT``); the run config's
    ``outputs`` only names a folder beneath it."""
    roots = [(tmp / f"root{i}").resolve() for i in range(2)]  # one per case: a record each
    said, records = [], []
    for root, bad in zip(roots, (str(tmp / "elsewhere"), ".."), strict=True):
        rc = {"algorithm": "fdbnl", "outputs": bad, "run-name": "probe"}
        with env(OUTPUTS_ROOT_ENV, str(root)):
            try:
                server_app.run(None, rc)  # type: ignore[arg-type] - refused before any node
                said.append((bad, "accepted"))
            except Exception as e:  # noqa: BLE001 - the refusal
                said.append((bad, f"{type(e).__name__}: {e}"))
        records.append([json.loads(p.read_text())["status"] for p in root.rglob("result.json")])
    outside = [p for p in tmp.rglob("*") if p.is_file()
               and not any(p.is_relative_to(root) for root in roots)]
    ok, failed = verdict({
        "outputs was not refused naming the key and the root": all(
            f"ValueError: run config 'outputs' = '{bad}': must be a folder under the outputs "
            f"root" in s and OUTPUTS_ROOT_ENV in s for bad, s in said),
        f"{len(outside)} files outside the root": not outside,
        "the failure is not recorded under the root": all(
            len(r) == 1 and r[0].startswith("failed: ValueError: run config 'outputs'")
            for r in records)})
    words = ("refused before any node, naming `outputs` and the operator's root "
             f"(`{OUTPUTS_ROOT_ENV}`); the failure recorded under the root, nothing written "
             "where it points" if ok else f"NOT HANDLED: {failed}")
    return words, ok, clip(said[0][1], 240)


@probe("outputs-unwritable", "an outputs root that cannot be written (a folder under a file)",
       ISSUE_35 + "uncaught FileNotFoundError, no result.json")
def outputs_unwritable(tmp: Path) -> Outcome:
    """An unwritable root fails clearly, before any node, its status recorded under the
    temporary folder."""
    blocker = tmp / "a-file"
    blocker.write_text("not a folder")
    root, fallback = (blocker / "outputs").resolve(), tmp / "fallback"
    with env(OUTPUTS_ROOT_ENV, str(root)), patched(tempfile, "tempdir", str(fallback)):
        try:
            server_app.run(None, {"algorithm": "fdbnl",  # type: ignore[arg-type] - no node
                                  "run-name": "probe"})
            said = "accepted"
        except Exception as e:  # noqa: BLE001 - the failure
            said = f"{type(e).__name__}: {e}"
    record = fallback / server_app.UNWRITABLE_RECORDS / "probe" / "result.json"
    status = json.loads(record.read_text())["status"] if record.is_file() else "no record"
    ok, failed = verdict({
        "it did not fail with OutputsUnwritable naming the root and who sets it":
            said.startswith(f"OutputsUnwritable: the outputs root {root} cannot be written")
            and OUTPUTS_ROOT_ENV in said,
        "its status was not recorded": status.startswith("failed: OutputsUnwritable")})
    words = ("fails before any node with `OutputsUnwritable`, naming the root and "
             f"`{OUTPUTS_ROOT_ENV}`; the status recorded under the temporary folder" if ok
             else f"NOT HANDLED: {failed}")
    return words, ok, clip(said, 240)


@probe("inf-keys", "`round-timeout-s`, `node-wait-s`, `node-grace-s` and `dbn.lambda-w` = inf "
       "(fdbnl)",
       ISSUE_35 + "accepted")
def inf_keys(tmp: Path) -> Outcome:
    """Every float key refuses inf (and NaN), timeouts included, before any node."""
    keys = ("round-timeout-s", "node-wait-s", "node-grace-s", "dbn.lambda-w")
    seen = [(key, *app_refusal(tmp / key, {"algorithm": "fdbnl", key: math.inf}))
            for key in keys]
    ok, failed = verdict({
        "a key was not refused by name": all(
            f"ValueError: run config '{key}' = inf: inf is not a value" in said
            for key, said, _ in seen),
        "result.json's status does not name it": all(f"'{key}' = inf" in st
                                                     for key, _, st in seen)})
    words = ("refused before any node, naming the key: inf is not a value" if ok
             else f"NOT HANDLED: {failed}")
    return words, ok, " | ".join(clip(said, 90) for _, said, _ in seen)


# ----------------------------------------------------------------------------- running
def run_probe(p: Probe) -> dict[str, Any]:
    """Run one probe in a fresh temporary folder; its row (an exception is not handled)."""
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp, quiet():
        try:
            words, ok, detail = p.fn(Path(tmp))
        except Exception as e:  # noqa: BLE001 - the probe itself failed: not handled
            words, ok, detail = (f"NOT HANDLED: the probe raised {type(e).__name__}", False,
                                 redact(clip(e), [SECRET]))
        detail = detail.replace(str(Path(tmp).resolve()), "<tmp>").replace(tmp, "<tmp>")
    return {"name": p.name, "probe": p.what, "before": p.before, "now": words,
            "handled": bool(ok), "detail": detail, "seconds": time.perf_counter() - t0}


def run_probes(names: Sequence[str] | None = None, cheap_only: bool = False
               ) -> list[dict[str, Any]]:
    """The rows of ``names`` (default every probe; ``cheap_only``: the cheap ones), in order."""
    chosen = [p for n, p in PROBES.items() if (names is None or n in names)
              and (p.cheap or not cheap_only)]
    rows = []
    for p in chosen:
        rows.append(run_probe(p))
        r = rows[-1]
        log(f"{'ok ' if r['handled'] else 'NO '} {p.name:22s} {r['now']} ({r['seconds']:.1f} s)")
    return rows


def main() -> None:
    ap = parser(__doc__.splitlines()[0])
    ap.add_argument("--probes", nargs="+", default=None, choices=list(PROBES), metavar="NAME",
                    help=f"only these probes (default all: {', '.join(PROBES)})")
    args = ap.parse_args()
    clock = Clock()
    rows = run_probes(args.probes, cheap_only=args.quick)
    not_handled = {r["name"]: r["now"] for r in rows if not r["handled"]}
    summary = {"probes": len(rows), "handled": len(rows) - len(not_handled),
               "not_handled": not_handled}
    log(f"\n{summary['handled']} of {summary['probes']} probes handled; elapsed {clock():.0f}s")
    path = write_results(SCRIPT, {"settings": settings(args), "bind_key_known":
                                  BIND_KEY in SHARED_KEYS, "rows": rows, "summary": summary,
                                  "elapsed_s": clock()}, args.out)
    log(f"wrote {path}")
    if args.out is None:  # the committed table follows the committed JSON
        from reliability import MD, write_md

        write_md()
        log(f"wrote {MD}")


# ----------------------------------------------------------------------------- tables
def table_security() -> str:
    """Issues 20 and 35's probes (security.json): how many are handled, and each probe's
    before and now."""
    r = read_results(SCRIPT)
    summ = r["summary"]
    lines = [f"**{summ['handled']} of {summ['probes']} probes handled.** Made by "
             f"`{r['meta']['script']}` on {r['meta']['finished']} ({r['elapsed_s']:.0f} s).", ""]
    if summ["not_handled"]:
        lines += ["Not handled:", ""] + [f"- `{k}`: {v}" for k, v in summ["not_handled"].items()]
        lines.append("")

    def cell(text: str) -> str:
        return str(text).replace("|", "\\|")

    rows = [[cell(x["probe"]), cell(x["before"]), cell(x["now"]),
             "yes" if x["handled"] else "**no**"] for x in r["rows"]]
    return "\n".join(lines) + "\n" + markdown(
        ["probe", "what was seen before (issue 20, at be41777; issue 35, at 3c8cd83)",
         "now", "handled"], rows)


#: this script's tables in results/*.md (``<!-- table:NAME -->``), which
#: ``simulations/tables.py`` renders from its results
TABLES = {"security": table_security}


if __name__ == "__main__":
    main()
