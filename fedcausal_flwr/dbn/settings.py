"""FDBNL's and PFDBNL's settings, composed of small frozen pieces by concern.

Each piece holds one concern's fields with their run-config keys (section ``dbn``):
:class:`Penalty` (PFDBNL's own: :class:`PFDBNLPenalty`), :class:`ADMM`, :class:`StopRule`,
:class:`Solver`, :class:`Variant`, :class:`Sampling`, :class:`GraphReport`,
:class:`ReplicaPlan`, :class:`Sites` and PFDBNL's :class:`LocalStep`, beside the shared run,
screen and knowledge pieces. :class:`FDBNLSettings` and :class:`PFDBNLSettings` compose them
(one flat constructor: ``FDBNLSettings(lambda_w=0.1, lambda_a=0.1)``); what a client reads of
them travels as a small typed message (:class:`PersonalInputs`; FDBNL's clients read none).
The equations that read them are in :mod:`fedcausal_flwr.dbn.model`, which re-exports these
names.

Pure dataclasses: no arrays, no I/O, no Flower.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass
from typing import Any, ClassVar

from fedcausal_flwr.knowledge import KnowledgeSettings
from fedcausal_flwr.settings import (
    MAX_CLIENTS,
    MAX_LAGS,
    MAX_REPLICAS,
    MAX_ROUNDS,
    MAX_VARS,
    ClientMessage,
    ScreenedRunSettings,
    Settings,
    numbers,
    setting,
    variables_setting,
)

#: where PFDBNL's local step (10) starts: the client's last W_k, A_k, its copies, 0
LOCAL_STARTS = ("previous", "copies", "zero")


@dataclass(frozen=True)
class DBNPiece(Settings):
    """A piece of the DBN family's settings: its keys sit in the run config's ``dbn`` table."""

    section: ClassVar[str] = "dbn"


def _lambda_scale() -> Any:
    return setting("pooled", "lambda-scale", choices=("pooled", "paper"))


@dataclass(frozen=True)
class Penalty(DBNPiece):
    """FDBNL's L1 weights of W and A. ``lambda_scale``: ``"pooled"`` multiplies them by the
    number K of participating clients (sum_k l_k = K x pooled loss for equal n_k, so lambda
    keeps its centralized DYNOTEARS meaning); ``"paper"`` applies them once in the server
    step (3)."""

    lambda_w: float = setting(0.05, "lambda-w", ge=0)
    lambda_a: float = setting(0.05, "lambda-a", ge=0)
    lambda_scale: str = _lambda_scale()


@dataclass(frozen=True)
class PFDBNLPenalty(DBNPiece):
    """PFDBNL's own L1 weights (chosen on heterogeneous clients), under their own keys; a
    PFDBNL run config that sets FDBNL's ``lambda-w``, ``lambda-a`` to other than FDBNL's
    defaults is refused, naming these (``setting(..., instead_of=...)``)."""

    lambda_w: float = setting(0.1, "pfdbnl-lambda-w", ge=0,
                              instead_of=("lambda-w", Penalty.lambda_w),
                              doc="L1 weight of W (PFDBNL's own, chosen on heterogeneous "
                                  "clients; FDBNL's is 'lambda-w')")
    lambda_a: float = setting(0.075, "pfdbnl-lambda-a", ge=0,
                              instead_of=("lambda-a", Penalty.lambda_a),
                              doc="L1 weight of A (PFDBNL's own, chosen on heterogeneous "
                                  "clients; FDBNL's is 'lambda-a')")
    lambda_scale: str = _lambda_scale()


@dataclass(frozen=True)
class ADMM(DBNPiece):
    """The ADMM penalties: ``rho1`` of h(W), ``rho2`` of consensus, grown by ``phi1``,
    ``phi2`` per round up to ``rho_max``."""

    rho1: float = setting(1.0, "rho1", gt=0)
    rho2: float = setting(1.0, "rho2", gt=0)
    phi1: float = setting(2.5, "phi1", ge=1)
    phi2: float = setting(1.1, "phi2", ge=1)
    rho_max: float = setting(1e16, "rho-max", gt=0)


@dataclass(frozen=True)
class StopRule(DBNPiece):
    """``max_rounds``: the round budget; the run stops earlier once h(W) <= ``h_tol`` and
    max_k ||B_k - W||_F / max(||W||_F, 1) <= ``primal_tol``."""

    h_tol: float = setting(1e-8, "h-tol", ge=0)
    primal_tol: float = setting(1e-2, "primal-tol", ge=0, allow_inf=True,
                                doc="inf: the stop rule ignores the primal residual")
    max_rounds: int = setting(200, "num-rounds", ge=1, le=MAX_ROUNDS)

    def stop_args(self) -> dict[str, Any]:
        """The numbers of the stop rule (:func:`converged`)."""
        return {"h_tol": self.h_tol, "primal_tol": self.primal_tol,
                "max_rounds": self.max_rounds}


@dataclass(frozen=True)
class Solver(DBNPiece):
    """The L-BFGS-B solvers: ``restarts`` of PFDBNL's local step (10); ``server_*`` of the
    server step (3), see :func:`admm_global_step`."""

    restarts: int = setting(1, ge=1, le=1000,
                            doc="chained L-BFGS-B calls of PFDBNL's local step (10)")
    server_restarts: int = setting(1, ge=1, le=1000,
                                  doc="chained L-BFGS-B calls of the server step (3)")
    server_warm_start: bool = setting(True, doc="server step starts at the previous W, not 0")
    server_a_step: str = setting("closed-form", choices=("closed-form", "lbfgs"),
                                 doc="A of the server step: soft threshold, or joint L-BFGS-B")
    server_screen: bool = setting(True, doc="server step solves W only on the entries that "
                                            "can be nonzero (|weight V| > lambda), signs fixed")


@dataclass(frozen=True)
class Variant(DBNPiece):
    """Paper or official code: ``dual_update`` ``"paper"`` uses W^(t+1) in the dual step (4),
    ``"code"`` the official code's W^(t); ``code_compat``: PFDBNL departures of the official
    code."""

    dual_update: str = setting("paper", "dual-update", choices=("paper", "code"))
    code_compat: bool = setting(False, "code-compat")


@dataclass(frozen=True)
class Sampling(DBNPiece):
    """``clients_per_round``: clients sampled per round (0: all); ``seed``: their sampling."""

    clients_per_round: int = setting(0, "clients-per-round", ge=0, le=MAX_CLIENTS)
    seed: int = setting(0, "seed", ge=0)


@dataclass(frozen=True)
class GraphReport(DBNPiece):
    """``tau_w``, ``tau_a``: thresholds of the reported graphs. ``d``, ``p``: the expected
    data shape (0: the majority of what the clients report)."""

    tau_w: float = setting(0.2, "tau-w", ge=0)
    tau_a: float = setting(0.2, "tau-a", ge=0)
    d: int = setting(0, ge=0, le=MAX_VARS)
    p: int = setting(0, ge=0, le=MAX_LAGS)


@dataclass(frozen=True)
class ReplicaPlan(DBNPiece):
    """The replicas of a run: half samples for edge frequencies and the penalty path of
    ``lambda-select holdout``."""

    replicas: int = setting(0, "replicas", ge=0, le=MAX_REPLICAS,
                            doc="half-sample replicas for edge frequencies (even; 0: none)")
    stability_threshold: float = setting(0.6, "stability-threshold", gt=0.5, le=1,
                                         doc="frequency an edge needs to be stable")
    lambda_select: str = setting("fixed", "lambda-select", choices=("fixed", "holdout"),
                                 doc="lambdas as set, or chosen on held-out blocks")
    lambda_path: str = setting("0.2,0.1,0.05,0.025,0.0125", "lambda-path", floats=True,
                               ge=0, min_items=1,
                               doc="candidate lambdas (both W and A) of lambda-select holdout")
    tau_path: str = setting("0.1,0.2,0.3,0.4", "tau-path", floats=True, ge=0, min_items=1,
                            doc="candidate thresholds (both W and A) of lambda-select holdout")
    holdout: float = setting(0.2, "holdout", gt=0, lt=1,
                             doc="share of each client's rows, its last, held out")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.replicas % 2:
            raise ValueError(f"run config {self.app_key('replicas')!r} = {self.replicas}: "
                             "must be even (replicas come in complementary pairs of halves)")
        if len(numbers(self.lambda_path)) * (self.replicas + 2) > MAX_REPLICAS:
            raise ValueError(f"{self.app_key('lambda-path')!r} x {self.app_key('replicas')!r}"
                             f": more than {MAX_REPLICAS} replicas in one run")

    @property
    def replicated(self) -> bool:
        """Whether a run carries replicas (half samples or a penalty path)."""
        return self.replicas > 0 or self.lambda_select != "fixed"

    def taus(self) -> tuple[float, ...]:
        """The candidate thresholds of ``lambda-select holdout`` (none otherwise)."""
        return numbers(self.tau_path) if self.lambda_select == "holdout" else ()


@dataclass(frozen=True)
class Sites(DBNPiece):
    """The federation's ``variables`` (:class:`~fedcausal_flwr.settings.SiteSettings`) and
    ``max_missing``: a site with a larger share of missing cells is dropped."""

    variables: str = variables_setting()
    max_missing: float = setting(0.5, "max-missing", ge=0, le=1,
                                 doc="largest share of missing cells a site may have")


@dataclass(frozen=True)
class LocalStep(DBNPiece):
    """PFDBNL's ``mu``, the weight of the proximal term of Algorithm 2, and the solver of its
    local step (10): ``local_start`` (where L-BFGS-B starts: ``"previous"``, the client's own
    last W_k, A_k, which the server sends back; ``"copies"``, the copies W~_k, A~_k;
    ``"zero"``), ``local_maxiter`` (L-BFGS-B iterations per call; 0: no cap) and
    ``local_ftol`` (its relative decrease test; 0: scipy's default)
    (``docs/algorithms/pfdbnl.md``, "Local-step cost")."""

    mu: float = setting(0.1, "mu", ge=0)
    local_start: str = setting("previous", choices=LOCAL_STARTS,
                               doc="where L-BFGS-B starts in PFDBNL's local step (10): the "
                                   "client's last W_k, A_k, the copies W~_k, A~_k, or 0")
    local_maxiter: int = setting(100, ge=0, le=100000,
                                 doc="L-BFGS-B iterations per call of PFDBNL's local step "
                                     "(10) (0: no cap)")
    local_ftol: float = setting(0.0, ge=0, lt=1,
                                doc="L-BFGS-B's relative decrease test in the local step (10) "
                                    "(0: scipy's default 2.2e-9)")


@dataclass(frozen=True)
class LocalInputs(ClientMessage):
    """What an FDBNL client reads of the settings with ``train.local``: none (its step (2)
    is closed-form; rho2 travels with each replica's scalars)."""


@dataclass(frozen=True)
class PersonalInputs(ClientMessage):
    """What a PFDBNL client reads of the settings with ``train.personal``: the lambdas (each
    replica's own travel with its scalars), ``restarts``, ``code_compat``, mu and the local
    solver (in the order they travelled in before)."""

    lambda_w: float = setting(MISSING, ge=0)
    lambda_a: float = setting(MISSING, ge=0)
    restarts: int = setting(MISSING, ge=1, le=1000)
    code_compat: bool = setting(MISSING)
    mu: float = setting(MISSING, ge=0)
    local_start: str = setting(MISSING, choices=LOCAL_STARTS)
    local_maxiter: int = setting(MISSING, ge=0, le=100000)
    local_ftol: float = setting(MISSING, ge=0, lt=1)


@dataclass(frozen=True)
class DBNCommon(Sites, ReplicaPlan, GraphReport, Sampling, Variant, Solver, StopRule, ADMM):
    """The pieces FDBNL and PFDBNL share (all but the penalty and PFDBNL's local step).

    Bases are listed last piece first: a dataclass orders its fields by the reversed MRO, so
    the fields (and ``result.json``'s ``config.strategy``) read penalty, ADMM, stop rule, ...
    """

    def fdbnl_round_args(self) -> dict[str, Any]:
        """The numbers of FDBNL's server round (:func:`fdbnl_server_round`), with the
        penalty of the class that composes this."""
        return {n: getattr(self, n) for n in (
            "lambda_w", "lambda_a", "lambda_scale", "dual_update", "server_restarts",
            "server_warm_start", "server_a_step", "server_screen", "phi1", "phi2", "rho_max")}

    def pfdbnl_round_args(self) -> dict[str, Any]:
        """The numbers of PFDBNL's server round (:func:`pfdbnl_server_round`)."""
        return {"phi1": self.phi1, "phi2": self.phi2, "rho_max": self.rho_max,
                "code_compat": self.code_compat}


@dataclass(frozen=True)
class FDBNLSettings(DBNCommon, Penalty, ScreenedRunSettings, KnowledgeSettings):
    """Every setting of FDBNL (Algorithm 1), with the App's defaults (the one source of them):
    the knowledge, run and screen pieces, then :class:`Penalty`, :class:`ADMM`,
    :class:`StopRule`, :class:`Solver`, :class:`Variant`, :class:`Sampling`,
    :class:`GraphReport`, :class:`ReplicaPlan` and :class:`Sites` (each piece's fields and
    keys are documented there). Its clients read none of them (:class:`LocalInputs`).

    How the defaults were chosen: ``docs/algorithms/fdbnl.md``.
    """

    section: ClassVar[str] = "dbn"
    client_message: ClassVar[type[ClientMessage]] = LocalInputs


@dataclass(frozen=True)
class PFDBNLSettings(LocalStep, DBNCommon, PFDBNLPenalty, ScreenedRunSettings,
                     KnowledgeSettings):
    """Every setting of PFDBNL (Algorithm 2): FDBNL's pieces with PFDBNL's own penalty
    (:class:`PFDBNLPenalty`, keys ``pfdbnl-lambda-w``, ``pfdbnl-lambda-a``) and its local
    step (:class:`LocalStep`: ``mu`` and the solver of step (10)). Its clients read
    :class:`PersonalInputs` with every message."""

    section: ClassVar[str] = "dbn"
    client_message: ClassVar[type[ClientMessage]] = PersonalInputs
