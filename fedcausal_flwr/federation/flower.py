"""Flower's ``Strategy`` contract for protocols that drive the Grid from ``start()``.

Flower's own strategies (``FedAvg`` ...) are one configure and one aggregate step per round,
looped by ``Strategy.start``. Our protocols discover their nodes, run several validated
phases per round and keep server-side state by partition id, so ``start()`` is overridden and
the four per-round hooks raise, saying so; ``start()``'s Flower arguments are checked here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Strategy


def as_arrays(initial_arrays: Any) -> list[np.ndarray]:
    """Flower's ``ArrayRecord`` (or a list of arrays) as a list of numpy arrays."""
    if isinstance(initial_arrays, ArrayRecord):
        return initial_arrays.to_numpy_ndarrays()
    if isinstance(initial_arrays, Mapping):
        return [np.asarray(a) for a in initial_arrays.values()]
    return [np.asarray(a) for a in initial_arrays]


class GridStrategy(Strategy):
    """A Flower ``Strategy`` whose :meth:`start` runs the whole protocol on the Grid.

    ``configure_train``, ``aggregate_train``, ``configure_evaluate`` and
    ``aggregate_evaluate`` raise ``NotImplementedError`` naming the strategy and pointing to
    ``start()``: Flower's ``Strategy.start`` loop would skip discovery, the per-phase reply
    validation and screening, and the protocol's own state.
    """

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Grid) -> Iterable[Message]:
        """Not used: raises ``NotImplementedError`` (the protocol runs in ``start()``)."""
        raise self._not_flower_rounds("configure_train")

    def aggregate_train(self, server_round: int, replies: Iterable[Message]
                        ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """Not used: raises ``NotImplementedError`` (the protocol runs in ``start()``)."""
        raise self._not_flower_rounds("aggregate_train")

    def configure_evaluate(self, server_round: int, arrays: ArrayRecord,
                           config: ConfigRecord, grid: Grid) -> Iterable[Message]:
        """Not used: raises ``NotImplementedError`` (the protocol runs in ``start()``)."""
        raise self._not_flower_rounds("configure_evaluate")

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]
                           ) -> MetricRecord | None:
        """Not used: raises ``NotImplementedError`` (the protocol runs in ``start()``)."""
        raise self._not_flower_rounds("aggregate_evaluate")

    def _not_flower_rounds(self, method: str) -> NotImplementedError:
        name = type(self).__name__
        return NotImplementedError(
            f"{name}.{method} does not apply: {name} runs its own protocol from start() "
            "(discovery by query.info, then train.<phase> exchanges whose replies are "
            "validated and screened, one or more per round, with server-held state by "
            "partition id), which Flower's configure/aggregate round loop cannot express. Run "
            f"it with {name}(...).start(grid=grid); it returns a RunResult, and "
            "result.flower_result() gives Flower's Result")


def check_start(strategy: str, settings: str, num_rounds: int | None, timeout: float | None,
                train_config: Any, evaluate_config: Any) -> None:
    """Reject ``start()`` arguments the protocol cannot honour, naming them (``strategy``,
    ``settings``: the class names the messages use)."""
    for arg, value in (("train_config", train_config), ("evaluate_config", evaluate_config)):
        if value is not None:
            raise ValueError(f"{strategy}.start: {arg} is not used; every setting is in "
                             f"{settings}")
    if num_rounds is not None and (isinstance(num_rounds, bool)
                                   or not isinstance(num_rounds, int) or num_rounds < 1):
        raise ValueError(f"{strategy}.start: num_rounds = {num_rounds!r}, need an int >= 1")
    if timeout is not None and not float(timeout) > 0:
        raise ValueError(f"{strategy}.start: timeout = {timeout!r}, need seconds > 0")
