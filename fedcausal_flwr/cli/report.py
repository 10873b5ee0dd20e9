"""A run's verdict: its result.json (or ``flwr run``'s exit code and Flower's run status) and
the summary line ``clients: U used of S started``."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def run_output(cfg: Mapping[str, Any]) -> Path:
    """``<outputs>/<run-name>`` of a run config whose ``run-name`` is set (the ServerApp's
    :func:`~fedcausal_flwr.server_app.output_dir`); a ValueError names a ``run-name`` that is
    not a plain folder name under ``outputs`` (:func:`fedcausal_flwr.appconfig.run_dir`), or
    an ``outputs`` outside the root the launched ServerApp gets
    (:func:`~fedcausal_flwr.cli.runconfig.launch_outputs_root`)."""
    from fedcausal_flwr.appconfig import check_run_name, run_dir
    from fedcausal_flwr.cli.runconfig import launch_outputs_root, with_absolute_paths

    check_run_name(cfg["run-name"])
    return run_dir(with_absolute_paths(cfg), root=launch_outputs_root(cfg))


def dropped_clients(metrics: Mapping[str, Any]) -> dict[str, tuple[str, int]]:
    """``metrics["dropped"]`` (``"<who>: <why>"`` per drop) by who was dropped: its first
    reason and how many drops (a client may be dropped in several rounds)."""
    out: dict[str, tuple[str, int]] = {}
    for entry in metrics.get("dropped") or []:
        who, _, why = str(entry).partition(": ")
        first, n = out.get(who, (why, 0))
        out[who] = (first, n + 1)
    return out


def summary_line(metrics: Mapping[str, Any] | None, started: int) -> str:
    """``clients: U used of S started`` and each dropped one with its reason (``metrics``:
    the result's; None: an App that writes no result.json, so U is unknown)."""
    used = "?" if not metrics or "clients" not in metrics else int(metrics["clients"])
    line = f"clients: {used} used of {started} started"
    drops = dropped_clients(metrics or {})
    if drops:
        line += "; dropped " + "; ".join(f"{who}: {why}" + (f" ({n} times)" if n > 1 else "")
                                         for who, (why, n) in drops.items())
    return line + ("" if metrics is not None else " (the App writes no result.json)")


def all_used(metrics: Mapping[str, Any], started: int) -> bool:
    """Every started client took part and nothing was dropped (``--no-drops``)."""
    return not metrics.get("dropped") and metrics.get("clients") == started


def run_result_file(out: Path, since: float = 0.0) -> Path:
    """The result.json this run wrote under ``out`` (``<outputs>/<run-name>``): ``out``'s own,
    or, where the App gives each run a folder of its own
    (:meth:`~fedcausal_flwr.results.RunResult.save_run`), the newest ``out/<run>/result.json``
    written since ``since``; ``out/result.json`` when there is none (it may then be missing
    or older than ``since``)."""
    own = out / "result.json"
    runs = [p for p in out.glob("*/result.json")
            if not p.parent.is_symlink() and p.stat().st_mtime >= since]
    if own.exists() and own.stat().st_mtime >= since or not runs:
        return own
    return max(runs, key=lambda p: p.stat().st_mtime)


def report(out: Path, since: float = 0.0, started: int | None = None,
           no_drops: bool = False) -> int:
    """Print the outcome of the run whose result.json is in ``out`` (or in a folder of its own
    there, :func:`run_result_file`); 0 only if "completed" (and, with ``no_drops``, every one
    of the ``started`` clients used, none dropped).

    ``flwr run`` exits 0 even when the ServerApp failed, so this file is the run's verdict. A
    result.json older than ``since`` (a previous run's) counts as missing. A run that did not
    complete names the completed run ``out/latest`` still holds, if any. With ``started``
    (the clients started), the last line is :func:`summary_line`.
    """
    from fedcausal_flwr.results import LATEST, is_completed, load_result, result_folder

    path = run_result_file(out, since)
    if not path.exists() or path.stat().st_mtime < since:
        print(f"\nno result.json written by this run in {out}", file=sys.stderr)
        if started is not None:
            print(summary_line({}, started))
        return 1
    r = load_result(path)
    m, status = r.get("metrics", {}), str(r.get("status"))
    print(f"\n{r.get('algorithm')} {status}: {m.get('rounds', 0)} rounds, "
          f"{m.get('clients', 0)} clients, {r.get('timing', {}).get('wall_s', 0.0):.1f}s")
    nums = {k: v for k, v in m.items() if k not in ("rounds", "clients", "clients_discovered")
            and isinstance(v, (int, float)) and not isinstance(v, bool)}
    if nums:
        print("  ".join(f"{k}={v:.3g}" for k, v in nums.items()))
    for err in r.get("errors", []):
        print(f"error: {err}", file=sys.stderr)
    if r.get("status_detail"):
        print(r["status_detail"], file=sys.stderr)
    pngs = sorted(p.name for p in path.parent.glob("*.png") if p.stat().st_mtime >= since)
    print(f"saved {path}" + (f" and {', '.join(pngs)}" if pngs else ""))
    code = 0
    if not is_completed(status):
        print(f"run not completed: {status}", file=sys.stderr)
        kept = result_folder(out)
        if kept != out and kept != path.parent:
            print(f"{out / LATEST} still reads the last completed run, {kept.name}",
                  file=sys.stderr)
        code = 1
    if started is not None:
        if no_drops and not all_used(m, started):
            print("error: --no-drops: not every started client was used", file=sys.stderr)
            code = 1
        sys.stderr.flush()
        print(summary_line(m, started), flush=True)
    return code


def exit_code_verdict(code: int, started: int, run: Mapping[str, Any] | None = None) -> int:
    """The verdict of a run of an App that writes no result.json: ``flwr run``'s exit
    ``code``, said so; as ``flwr run`` exits 0 also when the ServerApp failed, Flower's own
    status of the ``run`` (:func:`flower_runs`), when known, must be ``finished:completed``.
    Then the summary line."""
    status = str((run or {}).get("status", "") or "")
    print(f"\nflwr run exited with code {code}. This App declares no outputs and run-name, so "
          "no result.json tells how the run ended: the verdict is flwr run's exit code"
          + (f" and Flower's run status: {status}" if status else
             " (Flower's run status unknown: read the ServerApp's log above, flwr run can "
             "exit 0 when the ServerApp failed)") + ".")
    if status and status != "finished:completed":
        details = (run or {}).get("status-details")
        print(f"run not completed: {status}" + (f" ({details})" if details else ""),
              file=sys.stderr)
        code = code or 1
    sys.stderr.flush()
    print(summary_line(None, started), flush=True)
    return code
