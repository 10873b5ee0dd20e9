"""Base of the package's Message-API strategies: the run of a protocol, and ``start()``.

Our protocols are iterative multi-party algorithms, not FedAvg rounds, so each strategy drives
the Grid from :meth:`CausalStrategy.start`: discover the nodes (phase ``query.info``), then
validated ``self.channel.run(phase, ...)`` exchanges (:meth:`Exchange.run`) inside
:meth:`CausalStrategy.rounds`. A
protocol with one exchange per round only fills in the round hooks of
:class:`~fedcausal_flwr.federation.protocol.ProtocolHooks` (``setup``, ``payload``,
``reply_shapes``, ``aggregate``, ``record``, ``estimates``, ``done``); a multi-phase protocol
overrides :meth:`~CausalStrategy.run_rounds` and calls ``channel.run`` once per phase inside
``rounds()``. The machinery is composed from three pieces, each built from the values it
needs (none holds the strategy): the node roster (discovery, node health, rejoin:
:mod:`~fedcausal_flwr.federation.roster`), the exchange (transport on the Grid, reply
validation and reply filters: :mod:`~fedcausal_flwr.federation.exchange`) and the run
recorder (rounds, bytes, history, checkpoints, the result:
:mod:`~fedcausal_flwr.federation.recorder`).
"""
from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from logging import ERROR, INFO
from typing import Any, ClassVar

from flwr.common.logger import log
from flwr.serverapp import Grid

from fedcausal_flwr.federation.errors import Diverged, ProtocolStopped, TooFewReplies  # noqa: F401
from fedcausal_flwr.federation.exchange import Exchange, Payload  # noqa: F401
from fedcausal_flwr.federation.flower import GridStrategy, as_arrays, check_start
from fedcausal_flwr.federation.limits import Limits
from fedcausal_flwr.federation.nodes import (  # noqa: F401 - re-exported for strategies
    NodeInfo,
    agreed_props,
    majority_props,
    parse_info,
)
from fedcausal_flwr.federation.protocol import ProtocolHooks
from fedcausal_flwr.federation.recorder import Recorder
from fedcausal_flwr.federation.replies import (  # noqa: F401 - re-exported for strategies
    MAX_ABS,
    SCREEN_FACTOR,
    SCREEN_FLOOR,
    Expected,
    ReplyFilter,
    Shape,
    Spec,
    outliers,
)
from fedcausal_flwr.federation.roster import Roster
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
    reply_filters : sequence of ReplyFilter
        Filters every exchange runs after the protocol's own screens (:meth:`screens`):
        ``filter(phase, replies) -> {client id: why}`` drops those replies, named (see
        :class:`~fedcausal_flwr.federation.replies.ReplyFilter`).
    **changes
        Settings fields to change, e.g. ``FDBNL(min_nodes=3)``.

    Attributes
    ----------
    roster : Roster
        The clients (:attr:`nodes`) and their nodes' health.
    channel : Exchange or None
        The run's exchange on its Grid (built by :meth:`start`): ``channel.run(phase, ...)``
        sends ``train.<phase>`` and validates the replies; ``channel.reply_metrics``.
    recorder : Recorder
        The run's rounds, drops, bytes, history and checkpoints (``recorder.round``).
    reply_filters : list of ReplyFilter
        The protocol's screens, then the ``reply_filters`` given: what each exchange of a run
        started later filters its replies with (append to add one).
    """

    settings_class: ClassVar[type[RunSettings]] = RunSettings

    def __init__(self, settings: RunSettings | None = None, *,
                 evaluate_fn: EvaluateFn | None = None,
                 checkpoint: Callable[[RunResult], None] | None = None,
                 audit: bool = False, reply_filters: Sequence[ReplyFilter] = (),
                 **changes: Any) -> None:
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
        self.reply_filters: list[ReplyFilter] = [*self.screens(), *reply_filters]
        self._grid: Grid | None = None
        self._timeout: float | None = None
        self._reset()

    def _reset(self) -> None:
        """A new run's recorder, roster (the clients stay until discovery replaces them) and,
        on the run's grid, exchange (before each :meth:`start`)."""
        s, grid = self.settings, self._grid
        limits = Limits.of(s.min_nodes, s.timeout_s if self._timeout is None else self._timeout,
                           s.grace_s, s.node_wait_s)
        self.recorder = Recorder(self.algorithm, label=self.round_label,
                                 progress_keys=self.progress_keys, checkpoint=self.checkpoint,
                                 snapshot=self._snapshot)
        self.roster = Roster(self.recorder, limits, name=type(self).__name__,
                             rejoinable=self.rejoinable, bind_partitions=s.bind_partitions,
                             nodes=self.roster.nodes if hasattr(self, "roster") else None)
        self.channel: Exchange | None = None if grid is None else Exchange(
            grid, self.roster, self.recorder, limits, self.reply_filters,
            algorithm=self.algorithm, wire_log=self.wire_log)

    @property
    def nodes(self) -> dict[int, NodeInfo]:
        """The clients by partition id (:attr:`roster`'s)."""
        return self.roster.nodes

    @nodes.setter
    def nodes(self, nodes: dict[int, NodeInfo]) -> None:
        self.roster.nodes = nodes

    def summary(self) -> None:
        """Log the strategy's settings."""
        log(INFO, "%s: %s", type(self).__name__, self.config())

    def config(self) -> dict[str, Any]:
        """Settings that go into ``result.json``."""
        return self.settings.asdict()

    # ---- the run ---------------------------------------------------------------------------
    def discover(self, grid: Grid) -> dict[int, NodeInfo]:
        """The consistent clients by partition id (see :meth:`Roster.discover`), asked
        through :attr:`channel` (on ``grid``)."""
        assert self.channel is not None, "discover() runs inside start()"
        return self.roster.discover(
            self.channel, {"algorithm": self.algorithm, **self.info_config()},
            expected_props=self.expected_props, refused=self.refused,
            optional_props=self.optional_props)

    def rounds(self, result: RunResult) -> Iterator[dict[str, Any]]:
        """Open a round per iteration until :meth:`done` or the round budget is spent.

        The loop body runs the round's exchanges and fills the yielded record with the
        algorithm's numbers; the recorder then adds clients, drops, bytes, the evaluation and
        seconds, appends it to the history, logs a progress line and checkpoints.
        """
        while not self.done() and not self.recorder.budget_spent(result):
            rec = self.recorder.open_round()
            if self.recorder.round > 1 and self.channel is not None:
                self.roster.refresh(self.channel)
            yield rec
            self.recorder.close_round(result, rec, show=self.show, evaluate=None if (
                self.evaluate_fn is None) else self._evaluate_round)

    def _evaluate_round(self) -> dict[str, Any]:
        assert self.evaluate_fn is not None
        return self.evaluate_fn(self.round_estimates(), sorted(self.nodes))

    def _snapshot(self, result: RunResult) -> None:
        """The current estimates and their labels into ``result`` (before a checkpoint)."""
        result.estimates = self.estimates()
        result.names = self.result_names()

    def run_rounds(self, grid: Grid, result: RunResult) -> None:
        """The protocol loop: one exchange per round until :meth:`done`."""
        for rec in self.rounds(result):
            assert self.channel is not None
            replies = self.channel.run(self.phase, {c: self.payload(c) for c in self.select()},
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
        self._grid, self._timeout = grid, None if timeout is None else float(timeout)
        self._reset()
        self.recorder.max_rounds = num_rounds
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
        """Final estimates and metrics, then :meth:`Recorder.finish` (subclasses add theirs
        after calling this). An error while scoring the final estimates is recorded in
        ``result.errors``, never replaces the status."""
        try:
            if self.nodes and self.recorder.round:
                self._snapshot(result)
                if self.evaluate_fn is not None:
                    result.metrics.update(self.evaluate_fn(result.estimates, sorted(self.nodes)))
        except Exception as e:  # noqa: BLE001 - the run's outcome stands; say what failed
            result.errors.append(f"final evaluation: {type(e).__name__}: {e}")
            log(ERROR, "%s: final evaluation failed: %s", self.algorithm,
                traceback.format_exc())
        self.recorder.finish(result, t0, len(self.nodes))
        result.metrics["robustness"] = self.robustness(self.recorder.flagged)

    def wire_summary(self) -> dict[str, dict[str, Any]]:
        """Per ``"<phase> <direction>"``: messages, array bytes, shapes seen (see
        :class:`WireLog`)."""
        return self.wire_log.summary()
