"""Issue 20's security rows ("Trust no one"): every probe of a hostile party, re-run.

Issue 20 probed the App as a run submitter, a node operator and a client acting against the
others would. Each probe here repeats one finding the way it was seen, in process (the App's
ServerApp and ClientApp on :class:`fedcausal_flwr.testing.InProcessGrid`, or the public function
the finding went through), and returns ``(outcome words, handled, detail)``. "before" is what
the same probe gave on the code before the issue's fixes (be41777; checked once by hand, not
rerun here). Who is trusted with what, and what is not defended: ``docs/threat-model.md``.

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
import os
import resource
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
    """One finding of issue 20 and the function that repeats it."""

    name: str
    what: str  # the probe, as the table names it
    before: str  # what the issue saw
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
            node_configs: Mapping[int, Mapping[str, Any]] | None = None) -> AppRun:
    """Run the App's ServerApp with ``rc`` on ``k`` in-process nodes; results under ``tmp``."""
    rc = {**rc, "outputs": str(tmp / "outputs"), "run-name": "probe"}
    grid = InProcessGrid(client_app, k, rc, node_configs)
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
              events: Mapping[int, Callable[[InProcessGrid], Any]] | None = None
              ) -> tuple[RunResult, InProcessGrid, Any]:
    """FDBNL (the App's glue and ClientApp) on ``k`` in-process nodes; ``events[r](grid)`` runs
    after round ``r``. The result, the grid and the strategy."""
    grid = grid_class(client_app, k, rc)
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
    """Issue 20's probes (security.json): how many are handled, and each probe's before and
    now."""
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
        ["probe", "what was seen before (issue 20, at be41777)", "now", "handled"], rows)


#: this script's tables in results/*.md (``<!-- table:NAME -->``), which
#: ``simulations/tables.py`` renders from its results
TABLES = {"security": table_security}


if __name__ == "__main__":
    main()
