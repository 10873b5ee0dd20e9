"""Base of the package's Message-API strategies: the run of a protocol, and ``start()``.

Our protocols are iterative multi-party algorithms, not FedAvg rounds, so each strategy drives
the Grid from :meth:`CausalStrategy.start`: discover the nodes (phase ``query.info``), then
validated :meth:`CausalStrategy.exchange` calls inside :meth:`CausalStrategy.rounds`. A
protocol with one exchange per round only fills in the round hooks of
:class:`~fedcausal_flwr.federation.protocol.ProtocolHooks` (``setup``, ``payload``,
``reply_shapes``, ``aggregate``, ``record``, ``estimates``, ``done``); a multi-phase protocol
overrides :meth:`~CausalStrategy.run_rounds` and calls ``exchange`` once per phase inside
``rounds()``. The machinery is composed from three pieces: the node roster (discovery, node
health, rejoin: :mod:`~fedcausal_flwr.federation.roster`), the exchange (transport, reply
validation and screening: :mod:`~fedcausal_flwr.federation.exchange`) and the run recorder
(rounds, bytes, history, checkpoints, the result: :mod:`~fedcausal_flwr.federation.recorder`).
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from logging import INFO
from typing import Any, ClassVar

import numpy as np
from flwr.common.logger import log
from flwr.serverapp import Grid

from fedcausal_flwr.federation.errors import Diverged, ProtocolStopped, TooFewReplies  # noqa: F401
from fedcausal_flwr.federation.exchange import Exchange, Payload
from fedcausal_flwr.federation.flower import GridStrategy, as_arrays, check_start
from fedcausal_flwr.federation.protocol import ProtocolHooks
from fedcausal_flwr.federation.recorder import Recorder
from fedcausal_flwr.federation.replies import (  # noqa: F401 - re-exported for strategies
    MAX_ABS,
    SCREEN_FACTOR,
    SCREEN_FLOOR,
    Expected,
    Shape,
    Spec,
    outliers,
)
from fedcausal_flwr.federation.roster import (  # noqa: F401 - re-exported for strategies
    NodeInfo,
    Roster,
    agreed_props,
    majority_props,
    parse_info,
)
from fedcausal_flwr.federation.wire import WireLog
from fedcausal_flwr.results import RunResult
from fedcausal_flwr.settings import RunSettings

EvaluateFn = Callable[[Mapping[str, Any], list[int]], dict[str, Any]]


class CausalStrategy(ProtocolHooks, GridStrategy):
    """A federated causal-learning protocol: its hooks (:class:`ProtocolHooks`), and
    :meth:`start` to run it.

    Flower's contract: this is a ``flwr.serverapp.strategy.Strategy`` whose :meth:`start`
    runs the whole protocol on the Grid. Flower's per-round hooks (``configure_train``,
    ``aggregate_train``, ``configure_evaluate``, ``aggregate_evaluate``) raise
    ``NotImplementedError`` saying why: one configure/aggregate pair per round cannot express
    discovery, validated phases (several per round in most protocols) and server-held state.
    :meth:`start` returns our :class:`~fedcausal_flwr.results.RunResult`, which offers
    Flower's ``Result`` attributes (``arrays``, ``train_metrics_clientapp``,
    ``evaluate_metrics_clientapp``, ``evaluate_metrics_serverapp``) and builds the real
    ``flwr.serverapp.strategy.Result`` with ``result.flower_result()``.

    Parameters
    ----------
    settings : RunSettings
        The algorithm's settings (a subclass of :class:`RunSettings`: ``min_nodes``,
        ``node_wait_s``, ``timeout_s``, ``grace_s``, ``bind_partitions`` and the algorithm's
        own fields); default: its class's
        defaults, the App's defaults.
    evaluate_fn : callable, optional
        ``evaluate_fn(estimates, client_ids) -> dict`` of metrics, called after each round
        (e.g. SHD against a known truth). It sees estimates only, never client data.
    checkpoint : callable, optional
        ``checkpoint(result)`` when the run starts, after each round (``status``
        ``"running"``) and once more at its end with the final status, so a crash never loses
        finished rounds.
    audit : bool
        Keep every message's shapes, dtypes and config keys in :attr:`wire_log` (for tests
        that audit the wire). Default False: :attr:`wire_log` keeps bounded per-phase
        summaries only (counts, bytes, shapes seen).
    **changes
        Settings fields to change, e.g. ``FDBNL(min_nodes=3)``.

    Attributes
    ----------
    roster : Roster
        The clients (:attr:`nodes`) and their nodes' health.
    channel : Exchange
        What :meth:`exchange` sends and validates through.
    recorder : Recorder
        The run's rounds, drops, bytes, history and checkpoints (``recorder.round``).
    """

    settings_class: ClassVar[type[RunSettings]] = RunSettings

    def __init__(self, settings: RunSettings | None = None, *,
                 evaluate_fn: EvaluateFn | None = None,
                 checkpoint: Callable[[RunResult], None] | None = None,
                 audit: bool = False, **changes: Any) -> None:
        base = self.settings_class() if settings is None else settings
        if not isinstance(base, self.settings_class):
            raise TypeError(f"{type(self).__name__} takes {self.settings_class.__name__}, got "
                            f"{type(base).__name__}")
        unknown = sorted(set(changes) - {f for f, _ in base.items()})
        if unknown:
            raise TypeError(f"{type(self).__name__}: unknown settings {unknown}; "
                            f"{self.settings_class.__name__} has {[f for f, _ in base.items()]}")
        self.settings = base.replace(**changes) if changes else base
        self.evaluate_fn = evaluate_fn
        self.checkpoint = checkpoint
        self.wire_log = WireLog(audit=audit)
        self.recorder = Recorder(self)
        self.roster = Roster(self, self.recorder)
        self.channel = Exchange(self, self.roster, self.recorder)
        self._reset()

    def _reset(self) -> None:
        """Forget the last run's counters and node health (before each :meth:`start`)."""
        self.recorder.reset()
        self.roster.reset()
        self._timeout: float | None = None
        self._grid: Grid | None = None

    @property
    def nodes(self) -> dict[int, NodeInfo]:
        """The clients by partition id (:attr:`roster`'s)."""
        return self.roster.nodes

    @nodes.setter
    def nodes(self, nodes: dict[int, NodeInfo]) -> None:
        self.roster.nodes = nodes

    @property
    def reply_metrics(self) -> dict[int, dict[str, Any]]:
        """The metrics of the last exchange's accepted replies, by client id."""
        return self.channel.reply_metrics

    @property
    def min_nodes(self) -> int:
        """Fewest valid replies an exchange needs."""
        return self.settings.min_nodes

    @property
    def node_wait_s(self) -> float:
        """How long discovery waits for SuperNodes."""
        return self.settings.node_wait_s

    @property
    def timeout_s(self) -> float:
        """Reply timeout of one exchange (``start(timeout=...)`` overrides the settings')."""
        return self.settings.timeout_s if self._timeout is None else self._timeout

    @property
    def grace_s(self) -> float:
        """Wait for a node on probation or a new SuperNode (at most :attr:`timeout_s`)."""
        return min(self.settings.grace_s, self.timeout_s)

    @property
    def bind_partitions(self) -> bool:
        """Whether only the node id that held a partition at discovery may hold it later."""
        return self.settings.bind_partitions

    def summary(self) -> None:
        """Log the strategy's settings."""
        log(INFO, "%s: %s", type(self).__name__, self.config())

    def config(self) -> dict[str, Any]:
        """Settings that go into ``result.json``."""
        return self.settings.asdict()

    # ---- the run ---------------------------------------------------------------------------
    def discover(self, grid: Grid) -> dict[int, NodeInfo]:
        """The consistent clients by partition id (see :meth:`Roster.discover`)."""
        return self.roster.discover(grid, self.channel)

    def exchange(self, grid: Grid, phase: str, payloads: Mapping[int, Payload],
                 expected: Expected | Mapping[int, Expected], *, need: int | None = None,
                 every: bool = False, metrics: Sequence[str] = ()
                 ) -> dict[int, list[np.ndarray]]:
        """Send ``train.<phase>``; the valid replies by client id (see :meth:`Exchange.run`;
        ``metrics``: the metrics each reply must carry as finite numbers)."""
        return self.channel.run(grid, phase, payloads, expected, need=need, every=every,
                                metrics=metrics)

    def drop(self, who: str, why: str) -> None:
        """Log and count a dropped node or reply."""
        self.recorder.drop(who, why)

    def rounds(self, result: RunResult) -> Iterator[dict[str, Any]]:
        """Open a round per iteration until :meth:`done` or the round budget is spent.

        The loop body runs the round's exchanges and fills the yielded record with the
        algorithm's numbers; the recorder then adds clients, drops, bytes, the evaluation and
        seconds, appends it to the history, logs a progress line and checkpoints.
        """
        while not self.done() and not self.recorder.budget_spent(result):
            rec = self.recorder.open_round()
            if self.recorder.round > 1 and self._grid is not None:
                self.roster.refresh(self._grid, self.channel)
            yield rec
            self.recorder.close_round(result, rec)

    def run_rounds(self, grid: Grid, result: RunResult) -> None:
        """The protocol loop: one exchange per round until :meth:`done`."""
        for rec in self.rounds(result):
            replies = self.exchange(grid, self.phase,
                                    {c: self.payload(c) for c in self.select()},
                                    self.reply_shapes())
            self.aggregate(replies)
            rec.update(self.record())

    def start(self, grid: Grid, initial_arrays: Any = None, num_rounds: int | None = None,
              timeout: float | None = None, train_config: Any = None,
              evaluate_config: Any = None, evaluate_fn: EvaluateFn | None = None
              ) -> RunResult:
        """Run the whole protocol on ``grid`` and return its :class:`RunResult`.

        Flower's contract: ``initial_arrays`` (an ``ArrayRecord`` or list of arrays)
        warm-starts the algorithm's model where it has one, and is rejected where it has
        none; ``num_rounds`` bounds the recorded rounds (default: the algorithm's own stop
        rule and budget); ``timeout`` is the reply timeout of one exchange in seconds;
        ``evaluate_fn(estimates, client_ids) -> dict`` replaces the strategy's evaluator.
        ``train_config`` and ``evaluate_config`` are not used (each protocol sends its own
        settings) and must stay None. A run that loses too many clients stops with
        ``status`` saying why and keeps every finished round; it never averages fewer than
        ``min_nodes`` valid replies. ``result.flower_result()`` is Flower's ``Result``.
        """
        check_start(type(self).__name__, self.settings_class.__name__, num_rounds, timeout,
                    train_config, evaluate_config)
        warm = None
        if initial_arrays is not None:
            if type(self).warm_start is ProtocolHooks.warm_start:
                self.warm_start([])  # raises: no model
            warm = as_arrays(initial_arrays)
        if evaluate_fn is not None:
            self.evaluate_fn = evaluate_fn
        self._reset()
        self.recorder.max_rounds = num_rounds
        self._timeout = None if timeout is None else float(timeout)
        self._grid = grid
        t0 = time.time()
        self.summary()
        result = RunResult(self.algorithm, self.config(), status="running")
        with self.recorder.outcome(result, lambda: self._finish(result, t0)):
            self.recorder.checkpoint(result)  # a "running" file from the start
            self.nodes = self.discover(grid)
            self.setup(self.nodes)
            if warm is not None:
                self.warm_start(warm)
            self.run_rounds(grid, result)
            result.status = "completed"
        return result

    def _finish(self, result: RunResult, t0: float) -> None:
        """Final estimates and metrics (:meth:`Recorder.finish`; subclasses add theirs after
        calling this)."""
        self.recorder.finish(result, t0)

    def wire_summary(self) -> dict[str, dict[str, Any]]:
        """Per ``"<phase> <direction>"``: messages, array bytes, shapes seen (see
        :class:`WireLog`)."""
        return self.wire_log.summary()
