"""The protocol hooks a :class:`~fedcausal_flwr.federation.strategy.CausalStrategy` fills in.

:class:`ProtocolHooks` is what an algorithm declares (its class attributes) and overrides
(its round hooks, node checks and reply screening), with the defaults; the run that calls
them (discovery, exchanges, rounds, ``start()``) is
:class:`~fedcausal_flwr.federation.strategy.CausalStrategy`'s.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from functools import partial
from typing import Any, ClassVar

import numpy as np

from fedcausal_flwr.federation.exchange import Payload
from fedcausal_flwr.federation.nodes import NodeInfo, agreed_props
from fedcausal_flwr.federation.replies import (
    SCREEN_FACTOR,
    SCREEN_FLOOR,
    MagnitudeScreen,
    ReplyFilter,
    Shape,
)
from fedcausal_flwr.federation.robust import ByzantineScreen, robust_mean
from fedcausal_flwr.federation.roster import Roster
from fedcausal_flwr.settings import ScreenedRunSettings


class ProtocolHooks:
    """The hooks of a federated causal-learning protocol, and their defaults.

    A mixin of :class:`~fedcausal_flwr.federation.strategy.CausalStrategy`, which supplies
    :attr:`nodes` and :attr:`roster` and calls the hooks from its run: ``setup`` once the
    nodes are known, then per round ``select``, ``payload``, ``reply_shapes``,
    ``aggregate``, ``record`` and ``done`` (``run_rounds``); ``expected_props`` and
    ``info_config`` at discovery; ``screens`` (with ``reply_bound``, ``robust_view`` and
    ``robust_cohort``) for the reply filters of every exchange.
    ``setup``, ``payload``, ``reply_shapes`` and ``aggregate`` raise ``NotImplementedError``
    until a protocol defines them.
    """

    algorithm = "base"
    #: Whether a restarted SuperNode may take its client's place mid-run: True when every
    #: piece of protocol state lives on the server (by partition id), so the new node loses
    #: nothing; False when clients keep state in ``context.state`` (the run then stops,
    #: naming the client, when one leaves).
    rejoinable: ClassVar[bool] = True
    progress_keys: tuple[str, ...] = ("n_clients", "dropped", "seconds")
    round_label = "round"
    screen_factor: ClassVar[float] = SCREEN_FACTOR
    screen_floor: ClassVar[float] = SCREEN_FLOOR
    #: Properties a node may leave out (e.g. a user's own NumPyClient that states no variable
    #: names); a node that reports one must report the federation's value.
    optional_props: ClassVar[tuple[str, ...]] = ("names", "y-name")
    phase = "local"

    # supplied by CausalStrategy
    nodes: dict[int, NodeInfo]
    roster: Roster
    settings: Any

    def setup(self, nodes: Mapping[int, NodeInfo]) -> None:
        """Initialise server state once the nodes are known."""
        raise NotImplementedError

    def warm_start(self, arrays: list[np.ndarray]) -> None:
        """Replace the initial model by ``arrays`` (after :meth:`setup`)."""
        raise ValueError(f"{type(self).__name__} has no model to warm-start: pass no "
                         "initial_arrays")

    def select(self) -> list[int]:
        """Client ids taking part in this round."""
        return sorted(self.nodes)

    def payload(self, cid: int) -> Payload:
        """Arrays and config sent to client ``cid`` this round."""
        raise NotImplementedError

    def reply_shapes(self) -> list[Shape]:
        """Shapes of the arrays every client must return."""
        raise NotImplementedError

    def aggregate(self, replies: Mapping[int, list[np.ndarray]]) -> None:
        """Update server state from the accepted replies {cid: arrays}."""
        raise NotImplementedError

    def record(self) -> dict[str, Any]:
        """Per-round numbers for the history (losses, residuals, penalties)."""
        return {}

    def estimates(self) -> dict[str, Any]:
        """Current learned matrices."""
        return {}

    def round_estimates(self) -> dict[str, Any]:
        """What ``evaluate_fn`` scores after each round (default: :meth:`estimates`); differs
        where a protocol reports nothing until it completes (checkpoints hold no estimate)."""
        return self.estimates()

    def done(self) -> bool:
        """Stop rule of the algorithm (the round budget is the base's)."""
        return False

    def show(self, rec: Mapping[str, Any]) -> bool:
        """Whether round ``rec`` gets a progress line (default: every round)."""
        return True

    def expected_props(self, infos: Sequence[NodeInfo]) -> dict[str, Any]:
        """Properties every node must agree on (default: majority of d and p, then the
        majority of the variable names among the nodes with that d and p)."""
        return agreed_props(infos)

    def refused(self, info: NodeInfo) -> str | None:
        """Why a node that agrees on :meth:`expected_props` is still dropped at discovery
        (e.g. too many missing cells), or None (default: never)."""
        return None

    def agreed_names(self, d: int, prefix: str = "x") -> list[str]:
        """The variable names the kept nodes reported (they agree), else ``x0, x1, ...``."""
        return self.roster.names(d, prefix)

    def result_names(self) -> dict[str, Any]:
        """Labels of the estimates for ``RunResult.names``: ``{estimate: labels}``, where
        labels is one list (rows and columns) or ``{"rows": [...], "cols": [...]}``; other
        keys (``variables``, ...) describe the data. Default: none."""
        return {}

    def info_config(self) -> dict[str, Any]:
        """Config sent with ``query.info`` (settings every client must share, if any)."""
        return {}

    def reply_bound(self, phase: str) -> float | None:
        """Largest |x| a float reply to ``train.<phase>`` may hold (None: only
        :data:`MAX_ABS`). A protocol that knows a bound from what it sent declares it here; it
        is what protects an exchange with a single reply, where there is nothing to compare."""
        return None

    def robust_view(self, phase: str, cid: int, arrays: list[np.ndarray]
                    ) -> list[np.ndarray] | None:
        """What the Byzantine screen compares of client ``cid``'s reply to ``train.<phase>``:
        one or more groups of numbers (each compared on its own), or None (not screened,
        the default)."""
        return None

    def robust_cohort(self, phase: str, cid: int) -> Hashable:
        """The cohort client ``cid``'s reply to ``train.<phase>`` is screened within (replies
        that differ by design, e.g. a first reply beside returning clients'); one for all
        by default."""
        return None

    #: What of the server's aggregate goes through :func:`~fedcausal_flwr.federation.robust.
    #: robust_mean` with the settings' ``robust_rule`` ("" : none, the aggregate is unscreened
    #: by a robust rule; a family names it where it wires the rule in).
    robust_aggregate: str = ""
    #: Where the protocol cannot bound a party's influence (reported as "unscreened").
    unscreened: str = ""

    def combine(self):
        """The robust centre the family's aggregate uses instead of a mean (None: the mean:
        ``robust_rule`` "mean", or settings without one)."""
        s = self.settings
        rule = getattr(s, "robust_rule", "mean")
        if rule == "mean" or not self.robust_aggregate:
            return None
        return partial(robust_mean, rule=rule, trim=s.robust_trim)

    def robustness(self, flagged: dict[int, int]) -> dict[str, Any]:
        """``metrics["robustness"]``: the robust rule and what it bounds, the screens, the
        clients flagged ({"client k": replies}) and what is unscreened."""
        s = self.settings
        rule = getattr(s, "robust_rule", None)
        out: dict[str, Any] = {
            "rule": (rule if rule and self.robust_aggregate else "none"),
            "screens": ["magnitude"] + (["byzantine"] if isinstance(s, ScreenedRunSettings)
                                        and s.byzantine_screen else []),
            "flagged": {f"client {c}": n for c, n in sorted(flagged.items())}}
        if rule and rule != "mean" and self.robust_aggregate:
            out["bounded"] = self.robust_aggregate
            if rule == "trimmed-mean":
                out["trim"] = s.robust_trim
        if self.unscreened or not self.robust_aggregate or rule in (None, "mean"):
            out["unscreened"] = self.unscreened or ("the server's aggregate (no robust rule: "
                                                    "a liar under the screens moves it)")
        return out

    def screens(self) -> list[ReplyFilter]:
        """The protocol's reply filters, run in order on every exchange before a user's
        (``reply_filters``): the magnitude screen (:class:`MagnitudeScreen` with
        :meth:`reply_bound`, :attr:`screen_factor` and :attr:`screen_floor`) and, for settings
        with ``byzantine_screen`` on, the Byzantine screen (:class:`ByzantineScreen` on
        :meth:`robust_view` and :meth:`robust_cohort`, with the settings' ``byzantine_*``)."""
        out: list[ReplyFilter] = [MagnitudeScreen(self.reply_bound, self.screen_factor,
                                                  self.screen_floor)]
        s = self.settings
        if isinstance(s, ScreenedRunSettings) and s.byzantine_screen:
            out.append(ByzantineScreen(self.robust_view, self.robust_cohort,
                                       factor=s.byzantine_factor, floor=s.byzantine_floor))
        return out
