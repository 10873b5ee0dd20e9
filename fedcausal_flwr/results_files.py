"""The files of a result: ``result.json`` written atomically, read back, and its writer's life.

The status values are :mod:`fedcausal_flwr.results`'s. A running checkpoint
(:meth:`~fedcausal_flwr.results.RunResult.checkpoint`) is a summary ``result.json`` with its
rounds in :data:`HISTORY_FILE` and its large arrays in :data:`ARRAYS_FILE`; :func:`load_result`
merges them back.

Every write stamps ``process`` = ``{pid, host, pid_start, heartbeat, stale_after_s}``: who wrote
the file and when (``heartbeat``, Unix time). A reader (:func:`load_result`, :func:`run_status`)
reports ``"interrupted"`` when the file says ``running`` but its writer is gone: on the same
host, when the pid is not alive (or a zombie, or a different process now has that pid); from
another host, when the heartbeat is older than ``stale_after_s`` (the larger of
:data:`STALE_AFTER_S` and three times the longest finished round). Only ``"completed"`` means
the run finished normally (:func:`is_completed`).

A run-name folder can hold one folder per run (:func:`new_run_folder`, what
:meth:`~fedcausal_flwr.results.RunResult.save_run` writes: ``<run-name>/<timestamp>/``) and
a :data:`LATEST` link to the newest *completed* one (:func:`point_latest`); a reader given the
run-name folder reads that run (:func:`result_folder`), so a failed or stopped run never
hides, replaces or mixes its plots with the last completed one.
"""

from __future__ import annotations

import json
import math
import os
import socket
import time
from pathlib import Path
from typing import Any

import numpy as np

ARRAYS_FILE = "arrays.npz"
"""A running result's large estimates and truth, binary, beside its summary ``result.json``
(:meth:`RunResult.checkpoint`); merged back by :func:`load_result`."""
INLINE_NUMBERS = 100_000
"""Estimates and truth up to this many numbers in all stay inside a running checkpoint's
``result.json``; beyond, they go to :data:`ARRAYS_FILE` (JSON of a d = 1,000 graph costs
seconds per round, the binary file milliseconds)."""
HISTORY_FILE = "history.jsonl"
"""A running result's rounds, one JSON line each, beside its summary ``result.json``
(:meth:`RunResult.checkpoint`); merged back by :func:`load_result`."""

LATEST = "latest"
"""In a run-name folder of per-run folders: the link (a relative symbolic link; where the file
system has none, a text file naming the folder) to the newest completed run's folder."""

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


def inside(directory: str | Path, root: str | Path) -> Path:
    """``directory`` resolved, or a ValueError if it is not strictly under ``root`` (resolved:
    neither ``..`` nor a symbolic link leads a result out of ``outputs``)."""
    d, r = Path(directory).expanduser().resolve(), Path(root).expanduser().resolve()
    if d == r or not d.is_relative_to(r):
        raise ValueError(f"refusing to write results to {d}: not under the outputs directory {r}")
    return d


def new_run_folder(base: str | Path) -> Path:
    """A new, empty folder for one run under ``base``: ``<base>/<YYYYmmdd-HHMMSS>`` (``-2``,
    ``-3`` ... when a run of the same second has one)."""
    base = Path(base)
    base.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for i in range(1, 10_000):
        folder = base / (stamp if i == 1 else f"{stamp}-{i}")
        try:
            folder.mkdir()
        except FileExistsError:
            continue
        return folder
    raise RuntimeError(f"no free run folder for {stamp} under {base}")


def point_latest(base: str | Path, folder: str | Path) -> Path:
    """Point ``<base>/latest`` at ``folder`` (a folder directly under ``base``), atomically:
    a reader sees the previous run or this one, never neither."""
    base, name = Path(base), Path(folder).name
    tmp = base / f".{LATEST}.{os.getpid()}.tmp"
    tmp.unlink(missing_ok=True)
    try:
        tmp.symlink_to(name, target_is_directory=True)
    except OSError:  # no symbolic links here: a file naming the folder
        tmp.write_text(name + "\n")
    os.replace(tmp, base / LATEST)
    return base / LATEST


def result_folder(path: str | Path) -> Path:
    """The folder a reader of ``path`` means: the newest completed run's (``path/latest``)
    when ``path`` is a run-name folder of per-run folders, else ``path`` itself."""
    path = Path(path)
    link = path / LATEST
    if link.is_symlink() or link.is_file():
        target = path / (link.readlink() if link.is_symlink() else link.read_text().strip())
        if (target / "result.json").is_file():
            return target
    return path


def _write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Write ``arrays`` to ``path`` atomically."""
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb") as f:
        np.savez(f, **arrays)
    tmp.replace(path)


def _write_json(path: Path, doc: dict[str, Any]) -> None:
    """Write ``doc`` to ``path`` atomically (a reader sees the old file or the new one)."""
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=1))
    tmp.replace(path)


def _as_array(value: Any) -> Any:
    """A loaded estimate: a numpy array when it is a rectangular numeric list."""
    if isinstance(value, list) and value and _numeric(value):
        return np.asarray(value)
    return value


def _numeric(value: list) -> bool:
    try:
        return np.asarray(value).dtype.kind in "biuf"
    except ValueError:  # ragged
        return False


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
    rounds are in ``history`` as written. A running checkpoint's summary
    (:meth:`RunResult.checkpoint`) comes back with its ``history.jsonl`` merged in: the
    document :meth:`RunResult.save` writes.
    """
    path = Path(path)
    if path.is_dir():
        path = result_folder(path) / "result.json"
    for _ in range(3):  # the writer may finish (and remove the side files) as we read
        doc = json.loads(path.read_text())
        if "history_file" not in doc:
            break
        rows = _read_history(path.parent / str(doc["history_file"]))
        arrays = _read_arrays(path.parent / str(doc.pop("arrays_file", ""))) \
            if "arrays_file" in doc else {}
        if rows is not None and arrays is not None:
            for key, value in arrays.items():
                part, name = key.split("/", 1)
                doc.setdefault(part, {})[name] = value.tolist()
            doc = _merged(doc, rows)
            break
    if doc.get("status") == "running":
        alive, why = writer_alive(doc.get("process") or {}, stale_after_s)
        if not alive:
            doc["status"] = "interrupted"
            doc["status_detail"] = f"result.json says running but {why}"
    return doc


def _read_arrays(side: Path) -> dict[str, np.ndarray] | None:
    """The arrays of a running checkpoint's binary side file, None when it is gone (a
    checkpoint a round newer than the summary read may have replaced it: the same run)."""
    try:
        with np.load(side, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError, EOFError):
        return None


def _read_history(side: Path) -> list[dict[str, Any]] | None:
    """The complete JSON lines of a side history file, None when it is gone."""
    try:
        text = side.read_text()
    except FileNotFoundError:
        return None
    rows = []
    for line in text.splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:  # a line being written
            break
    return rows


def _merged(summary: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """A checkpoint's summary with its side history merged back: :meth:`RunResult.save`'s
    document (the rounds the summary counts; ``stale_after_s`` as the summary computed it)."""
    n = summary.get("history_rounds")
    rows = rows[:n] if isinstance(n, int) else rows
    out: dict[str, Any] = {}
    for key, value in summary.items():
        if key in ("history_file", "history_rounds", "last_round"):
            continue
        out[key] = value
        if key == "metrics":
            out["history"] = rows
    out.setdefault("history", rows)
    return out

