"""The run recorder: rounds, drops, bytes, round trips, timing, history and checkpoints.

It owns the numbers a run is accounted by and the :class:`~fedcausal_flwr.results.RunResult`
they end up in: each round's record (clients, drops, bytes, evaluation, seconds), its progress
line and checkpoint, and the final estimates, metrics and timing.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from logging import ERROR, INFO, WARNING
from types import TracebackType
from typing import Any

from flwr.common.logger import log

from fedcausal_flwr.federation.errors import TooFewReplies
from fedcausal_flwr.results import RunResult


class Recorder:
    """The bookkeeping of one run.

    Parameters
    ----------
    algorithm : str
        The name its log lines give.
    label : str
        The progress line's round key (``ProtocolHooks.round_label``).
    progress_keys : sequence of str
        The record keys the progress line shows.
    checkpoint : callable, optional
        ``checkpoint(result)`` at the start, after each recorded round and at the end.
    snapshot : callable, optional
        ``snapshot(result)`` fills ``result``'s estimates and names before each round's
        checkpoint.

    Attributes
    ----------
    round : int
        The current round (protocols may number extra exchanges past the recorded rounds).
    dropped : list of str
        Every drop of the run, ``"<who>: <why>"``.
    max_rounds : int or None
        ``start(num_rounds=...)``: most rounds recorded.
    """

    def __init__(self, algorithm: str = "base", *, label: str = "round",
                 progress_keys: Sequence[str] = (),
                 checkpoint: Callable[[RunResult], None] | None = None,
                 snapshot: Callable[[RunResult], None] | None = None) -> None:
        self.algorithm, self.label, self.progress_keys = algorithm, label, tuple(progress_keys)
        self.save, self.snapshot = checkpoint, snapshot
        self.reset()

    def reset(self) -> None:
        """Zero every counter for a new run."""
        self.round = 0
        self.bytes = {"up": 0, "down": 0}
        self.exchanges = {"round": 0, "total": 0}  # round trips: a deployment's unit of cost
        self.retries = 0  # this round's exchanges retried for late replies (Exchange.run)
        self.dropped: list[str] = []
        self.accepted = 0  # valid replies of the last exchange
        self.took_part: set[int] = set()  # client ids with at least one valid reply
        self.flagged: dict[int, int] = {}  # client id -> exchanges the Byzantine screen flagged
        self._round_flagged: set[int] = set()
        self.max_rounds: int | None = None
        self._t_round, self._n_dropped = time.time(), 0

    def drop(self, who: str, why: str) -> None:
        """Log and count a dropped node or reply."""
        self.dropped.append(f"{who}: {why}")
        log(WARNING, "dropped %s: %s", who, why)

    def flag(self, cid: int) -> None:
        """Count a reply of client ``cid`` flagged by the Byzantine screen (its drop is
        logged and counted by :meth:`drop`)."""
        self.flagged[cid] = self.flagged.get(cid, 0) + 1
        self._round_flagged.add(cid)

    def budget_spent(self, result: RunResult) -> bool:
        """``start(num_rounds=...)`` rounds are recorded."""
        return self.max_rounds is not None and len(result.history) >= self.max_rounds

    def open_round(self) -> dict[str, Any]:
        """Start a round: its number, byte counters, timer, drop count."""
        self.round += 1
        self.bytes = {"up": 0, "down": 0}
        self.exchanges["round"] = 0
        self.retries = 0
        self._round_flagged = set()
        self._t_round, self._n_dropped = time.time(), len(self.dropped)
        return {"round": self.round}

    def close_round(self, result: RunResult, rec: dict[str, Any], *,
                    evaluate: Callable[[], Mapping[str, Any]] | None = None,
                    show: Callable[[Mapping[str, Any]], bool] | None = None) -> None:
        """Finish a round's record (clients, drops, bytes, ``evaluate()``, seconds) and keep
        it (with a progress line where ``show(rec)``, default always)."""
        rec.setdefault("round", self.round)
        rec.update({"n_clients": self.accepted,
                    "dropped": len(self.dropped) - self._n_dropped,
                    "bytes_up": self.bytes["up"], "bytes_down": self.bytes["down"],
                    "exchanges": self.exchanges["round"]})
        if self.retries:  # only where a retry happened: honest records stay as they were
            rec["retries"] = self.retries
        if self._round_flagged:  # likewise: a round with a flagged client says which
            rec["flagged"] = sorted(self._round_flagged)
        if evaluate is not None:
            ev = evaluate()
            rec.update(ev)
            result.evaluations[int(rec["round"])] = dict(ev)
        rec["seconds"] = time.time() - self._t_round
        self.record_round(result, rec, show=True if show is None else show(rec))

    def record_round(self, result: RunResult, rec: dict[str, Any], *,
                     show: bool = True, label: str | None = None) -> None:
        """Append a finished round to the history, log its progress line, checkpoint."""
        result.history.append(rec)
        if show:
            label = label or self.label
            log(INFO, "[%s %s %s] %s", self.algorithm, label, rec.get(label, self.round),
                progress(rec, self.progress_keys))
        if self.save is not None:
            if self.snapshot is not None:
                self.snapshot(result)
            result.status = "running"
            self.save(result)

    def finish(self, result: RunResult, t0: float, discovered: int) -> None:
        """The run's metrics and timing (after its final estimates).

        ``metrics["clients"]`` counts the clients that took part (a valid reply at least
        once), ``metrics["clients_discovered"]`` those discovery kept (``discovered``),
        ``metrics["flagged"]`` (only when the Byzantine screen flagged someone)
        ``{"client k": replies flagged}``.
        """
        result.metrics.update({"rounds": self.round, "clients": len(self.took_part),
                               "clients_discovered": discovered,
                               "dropped": list(self.dropped)})
        if self.flagged:
            result.metrics["flagged"] = {f"client {c}": n
                                         for c, n in sorted(self.flagged.items())}
        result.timing = {"wall_s": time.time() - t0, "rounds": self.round,
                         "exchanges": self.exchanges["total"]}

    def outcome(self, result: RunResult, finish: Callable[[], None]) -> Outcome:
        """Around a run: its status, then ``finish()`` and the final checkpoint (see
        :class:`Outcome`)."""
        return Outcome(self, result, finish)

    def checkpoint(self, result: RunResult) -> None:
        """Hand ``result`` to ``checkpoint``, if there is one."""
        if self.save is not None:
            self.save(result)

    def final_checkpoint(self, result: RunResult) -> None:
        """Checkpoint the final status (a failing checkpoint never masks the outcome)."""
        try:
            self.checkpoint(result)
        except Exception:  # noqa: BLE001
            log(ERROR, "%s: final checkpoint failed: %s", self.algorithm,
                traceback.format_exc())



class Outcome:
    """The status of a run, set when its ``with`` block ends.

    ``"completed"`` is the block's to set; a :class:`TooFewReplies` (or subclass) becomes
    ``"stopped: <why>"`` and is not raised; any other exception becomes ``"failed: ..."``
    (``"interrupted: ..."`` for a ``BaseException`` such as ``KeyboardInterrupt``), is logged
    with its traceback and raised once the finished rounds are kept. Every way out calls
    ``finish()`` and then the final checkpoint.
    """

    def __init__(self, recorder: Recorder, result: RunResult, finish: Callable[[], None]
                 ) -> None:
        self.recorder, self.result, self.finish = recorder, result, finish

    def __enter__(self) -> RunResult:
        return self.result

    def __exit__(self, kind: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> bool:
        algorithm, result = self.recorder.algorithm, self.result
        if isinstance(e, TooFewReplies):
            result.status = f"stopped: {e}"
            log(ERROR, "%s stopped early: %s", algorithm, e)
        elif e is not None:  # keep finished rounds with the error, then re-raise
            result.status = (f"failed: {type(e).__name__}: {e}" if isinstance(e, Exception)
                             else f"interrupted: {type(e).__name__}")
            log(ERROR, "%s", "".join(traceback.format_exception(kind, e, tb)))
        self.finish()
        self.recorder.final_checkpoint(result)
        return isinstance(e, TooFewReplies)

def progress(rec: Mapping[str, Any], keys: Sequence[str]) -> str:
    """A round's progress line: ``key=value`` for each of ``keys`` the record has."""
    return " ".join(f"{k}={rec[k]:.4g}" if isinstance(rec[k], float) else f"{k}={rec[k]}"
                    for k in keys if k in rec)
