"""The result contract: ``<outputs>/<run-name>/result.json`` plus PNG plots beside it.

``status`` in result.json is one of

- ``"running"``: rounds go on; the file is rewritten after every round (a checkpoint);
- ``"completed"``: the run reached its end (stop rule or round budget);
- ``"stopped: <reason>"``: it ended early (too few valid replies, a party the protocol cannot do
  without failed); finished rounds are kept;
- ``"failed: <ExceptionType>: <message>"``: an error after the run config was read (bad
  settings, bad data, a strategy crash); finished rounds are kept;
- ``"interrupted: <ExceptionType>"``: the ServerApp was stopped by KeyboardInterrupt /
  SystemExit and could still write.

Every write stamps ``process`` = ``{pid, host, pid_start, heartbeat, stale_after_s}``: who wrote
the file and when (``heartbeat``, Unix time). A reader (:func:`load_result`, :func:`run_status`)
reports ``"interrupted"`` when the file says ``running`` but its writer is gone: on the same
host, when the pid is not alive (or a zombie, or a different process now has that pid); from
another host, when the heartbeat is older than ``stale_after_s`` (the larger of
:data:`STALE_AFTER_S` and three times the longest finished round). Only ``"completed"`` means
the run finished normally (:func:`is_completed`).
"""

from __future__ import annotations

import json
import math
import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

STALE_AFTER_S = 1800.0
"""Cross-host bound: a ``running`` file whose heartbeat is older than this (or than three times
its longest round, whichever is larger) is read as interrupted."""


def jsonable(x: Any) -> Any:
    """Nested lists/dicts of plain numbers; non-finite floats become None."""
    if isinstance(x, np.ndarray):
        return jsonable(x.tolist())
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, (np.floating, float)):
        return float(x) if math.isfinite(x) else None
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, np.bool_):
        return bool(x)
    return x


@dataclass
class RunResult:
    """What one federated (or reference) run produced.

    ``estimates`` maps names to learned matrices; ``truth`` (optional) maps the same names to
    ground truth for plots; ``status`` is ``"completed"`` or says why the run stopped early
    (the module docstring lists every value); ``errors`` holds problems after the run that did
    not change its outcome (a plot that failed); ``process`` says which process writes it.
    """

    algorithm: str
    config: dict[str, Any]
    metrics: dict[str, Any] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)
    estimates: dict[str, Any] = field(default_factory=dict)
    timing: dict[str, float] = field(default_factory=dict)
    truth: dict[str, Any] = field(default_factory=dict)
    status: str = "completed"
    evaluations: dict[int, dict[str, Any]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    process: dict[str, Any] = field(default_factory=lambda: process_info())

    # ---- Flower's ``Result`` interface -----------------------------------------------------
    @property
    def arrays(self) -> Any:
        """The final estimates as Flower's ``ArrayRecord`` (numeric arrays only, by name)."""
        from flwr.app import Array, ArrayRecord

        out = {}
        for name, value in self.estimates.items():
            a = np.asarray(value) if not isinstance(value, list) or _numeric(value) else None
            if a is not None and a.dtype.kind in "biuf" and a.size:
                out[name] = Array(np.ascontiguousarray(a))
        return ArrayRecord(out)

    @property
    def train_metrics_clientapp(self) -> dict[int, Any]:
        """Each round's history row (numbers only) as Flower's ``MetricRecord``."""
        return {int(r.get("round", i + 1)): _metric_record(r)
                for i, r in enumerate(self.history)}

    @property
    def evaluate_metrics_clientapp(self) -> dict[int, Any]:
        """Empty: clients never evaluate on their own data here."""
        return {}

    @property
    def evaluate_metrics_serverapp(self) -> dict[int, Any]:
        """The server-side evaluation (``evaluate_fn``) of each round as ``MetricRecord``."""
        return {r: _metric_record(m) for r, m in self.evaluations.items()}

    def to_dict(self) -> dict[str, Any]:
        """The JSON document of the result contract."""
        return jsonable({
            "algorithm": self.algorithm, "status": self.status, "config": self.config,
            "metrics": self.metrics, "history": self.history, "estimates": self.estimates,
            "timing": self.timing, "truth": self.truth, "errors": self.errors,
            "process": {**self.process, "heartbeat": time.time(),
                        "stale_after_s": stale_after(self.history)},
        })

    def save(self, directory: str | Path) -> Path:
        """Write ``result.json`` atomically into ``directory`` and return its path."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / "result.json"
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.to_dict(), indent=1))
        tmp.replace(path)
        return path


def _numeric(value: list) -> bool:
    try:
        return np.asarray(value).dtype.kind in "biuf"
    except ValueError:  # ragged
        return False


def _metric_record(row: dict[str, Any]) -> Any:
    """The int/float entries of ``row`` as a ``MetricRecord``."""
    from flwr.app import MetricRecord

    return MetricRecord({k: (float(v) if isinstance(v, (float, np.floating)) else int(v))
                         for k, v in row.items()
                         if isinstance(v, (int, float, np.integer, np.floating))
                         and not isinstance(v, (bool, np.bool_))})


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """``(state, start time in clock ticks)`` of ``pid`` from ``/proc``, None if unreadable."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # after "pid (comm) "
    return fields[0], int(fields[19])


def process_info() -> dict[str, Any]:
    """This process as a result's writer: pid, host, and its start time (pid reuse check)."""
    stat = _proc_stat(os.getpid())
    return {"pid": os.getpid(), "host": socket.gethostname(),
            "pid_start": stat[1] if stat else None}


def stale_after(history: list[dict[str, Any]]) -> float:
    """Seconds without a heartbeat after which another host reads a running file as dead."""
    rounds = [float(h["seconds"]) for h in history
              if isinstance(h.get("seconds"), (int, float)) and math.isfinite(h["seconds"])]
    return max([STALE_AFTER_S] + [3 * s for s in rounds])


def writer_alive(process: dict[str, Any], stale_after_s: float | None = None,
                 now: float | None = None) -> tuple[bool, str]:
    """Whether the process that wrote a result is still there, and why we think so.

    Same host: the pid must exist, not be a zombie and (where ``/proc`` tells) have the
    recorded start time. Another host (or no pid): the heartbeat must be younger than
    ``stale_after_s`` (default: the file's own ``stale_after_s``, else :data:`STALE_AFTER_S`).
    """
    now = time.time() if now is None else now
    beat = process.get("heartbeat")
    age = f"last heartbeat {now - beat:.0f} s ago" if isinstance(beat, (int, float)) else \
        "no heartbeat"
    pid, host = process.get("pid"), process.get("host")
    if isinstance(pid, int) and host == socket.gethostname():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False, f"its process {pid} on {host} is gone ({age})"
        except PermissionError:
            pass  # exists, another user's
        stat = _proc_stat(pid)
        if stat is not None and stat[0] in ("Z", "X"):
            return False, f"its process {pid} on {host} has exited ({age})"
        start = process.get("pid_start")
        if stat is not None and start is not None and stat[1] != start:
            return False, f"its process {pid} on {host} is gone; the pid was reused ({age})"
        return True, f"process {pid} on {host} is alive ({age})"
    bound = float(stale_after_s if stale_after_s is not None
                  else process.get("stale_after_s") or STALE_AFTER_S)
    if not isinstance(beat, (int, float)) or now - beat > bound:
        return False, f"written on {host}, {age}, over the {bound:.0f} s bound"
    return True, f"written on {host}, {age}, within the {bound:.0f} s bound"


def run_status(doc: dict[str, Any], stale_after_s: float | None = None) -> str:
    """The status of a loaded result: the file's, or ``"interrupted"`` when it says running
    and its writer is gone (:func:`writer_alive`)."""
    status = str(doc.get("status", ""))
    if status != "running":
        return status
    alive, _ = writer_alive(doc.get("process") or {}, stale_after_s)
    return "running" if alive else "interrupted"


def is_completed(status: str) -> bool:
    """Only ``"completed"`` is a finished run; anything else makes launchers exit non-zero."""
    return status == "completed"


def load_result(path: str | Path, stale_after_s: float | None = None) -> dict[str, Any]:
    """Read a ``result.json`` (a directory or the file itself).

    A file that says ``"running"`` whose writer is gone comes back with ``status``
    ``"interrupted"`` and ``status_detail`` saying why (:func:`writer_alive`); the finished
    rounds are in ``history`` as written.
    """
    path = Path(path)
    if path.is_dir():
        path = path / "result.json"
    doc = json.loads(path.read_text())
    if doc.get("status") == "running":
        alive, why = writer_alive(doc.get("process") or {}, stale_after_s)
        if not alive:
            doc["status"] = "interrupted"
            doc["status_detail"] = f"result.json says running but {why}"
    return doc
