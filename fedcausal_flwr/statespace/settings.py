"""FedGC's and FedCF's settings (:class:`StateSpaceSettings`, :class:`FedGCSettings`,
:class:`FedCFSettings`): every default once, with its run-config key, composed of small frozen
pieces by concern (:class:`Schedule`, :class:`LossWeights`, :class:`Objective`,
:class:`Privacy`, :class:`Seeds`, :class:`GrangerView`, :class:`Sites`); a client reads
:class:`WindowInputs` alone. The equations that read them are in
:mod:`fedcausal_flwr.statespace.model`, which re-exports these names.

Pure dataclasses: no I/O, no Flower.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass
from typing import Any, ClassVar, Self

import numpy as np

from fedcausal_flwr.knowledge import Knowledge, ZeroBlock
from fedcausal_flwr.settings import (
    MAX_CLIENTS,
    MAX_ROUNDS,
    MAX_ROWS,
    MAX_VARS,
    ClientMessage,
    RunSettings,
    Settings,
    setting,
)

TARGETS = ("predicted", "refined", "innovation")

# The former default schedule (:meth:`StateSpaceSettings.paper_schedule`).
PAPER_SCHEDULE: dict[str, Any] = {"window": 1000, "epochs": 30, "lr_server": 0.3,
                                  "lr_client": 1.5}


@dataclass(frozen=True)
class StateSpacePiece(Settings):
    """A piece of the state-space family's settings: its keys sit in the ``statespace``
    table."""

    section: ClassVar[str] = "statespace"


@dataclass(frozen=True)
class Schedule(StateSpacePiece):
    """Schedule: ``window`` time steps per exchange (W = 1 is FedGC's online schedule,
    ``W = T - 1`` FedCF's full batch), ``epochs`` passes over t = 1..T-1. A run is
    ``epochs * ceil((T - 1) / W)`` windows, one exchange each (plus setup and a final
    gradient delivery), and windows are sequential, so the exchanges are set by W and epochs.
    Steps are normalized: each block moves by ``lr / L`` along its gradient, with ``L`` the
    running maximum, over the windows seen so far, of a bound of the block's curvature on the
    window (kept in ``ClientParams.curv`` / ``ServerParams.curv_A, curv_B``), so the same
    ``lr`` works across scales and the step never grows: a quiet window cannot undo what a
    mean-shift window taught (for full batch, ``W = T - 1``, ``L`` is the batch's bound)."""

    window: int = setting(10000, "ss-window", ge=1, le=MAX_ROWS)
    epochs: int = setting(20, "ss-epochs", ge=1, le=MAX_ROUNDS)
    lr_server: float = setting(1.0, "ss-lr-server", ge=0)
    lr_client: float = setting(1.5, "ss-lr-client", ge=0, wire=True)


@dataclass(frozen=True)
class LossWeights(StateSpacePiece):
    """``eta1``/``eta2`` weight the client's local loss and the server loss in the client step
    (FedGC eq 24, FedCF eqs 9-10); ``lambda_g``/``lambda_l`` are ridge weights on
    ``A_hat, B_hat`` and on ``theta``."""

    eta1: float = setting(1.0, "ss-eta1", ge=0, wire=True)
    eta2: float = setting(1.0, "ss-eta2", ge=0, wire=True)
    lambda_g: float = setting(0.0, "ss-lambda-g", ge=0)
    lambda_l: float = setting(0.0, "ss-lambda-l", ge=0, wire=True)


@dataclass(frozen=True)
class Objective(StateSpacePiece):
    """``xi``, ``learn_phi``, ``target``, ``alg1_literal``: FedCF's (see
    :class:`FedCFSettings`); FedGC fixes all but ``target`` (no penalty weight, no ``phi``;
    see :class:`FedGCSettings` for its target).
    ``difference``: the server fits its model to first differences in time of its residuals
    within each window (:func:`time_difference`), which removes unknown piecewise-constant
    mean shifts ``b^t`` of any client's states; ``False`` is the papers' loss on levels.
    It needs ``window >= 2`` (a window of one step has no difference). FedGC's default, keyed
    ``ss-difference``; FedCF keeps levels (no key; see :class:`FedCFSettings`)."""

    xi: float = setting(0.0, ge=0, wire=True)
    learn_phi: bool = setting(False, wire=True)
    target: str = setting("predicted", choices=TARGETS, wire=True)
    alg1_literal: bool = setting(False, wire=True)
    difference: bool = setting(False, wire=True)


@dataclass(frozen=True)
class Privacy(StateSpacePiece):
    """``dp``: every state array a client sends is a Gaussian release (rows clipped to
    ``dp_clip_msg``, :mod:`fedcausal_flwr.privacy`), with the noise multiplier derived from the
    run's TOTAL budget (``dp_epsilon``, ``dp_delta``) by Flower's RDP accountant for the
    releases the run will make (:func:`dp_releases`); the server's gradients are
    post-processing of those releases and travel unnoised. ``dp_debias``: the server removes
    the known noise variance from its regressors' second moment (:func:`dp_noise_ridge`)."""

    dp: bool = setting(False, "ss-dp", wire=True)
    dp_epsilon: float = setting(8.0, "ss-dp-epsilon", gt=0, allow_inf=True,
                                doc="the run's TOTAL epsilon (inf: clip, no noise)")
    dp_delta: float = setting(1e-5, "ss-dp-delta", gt=0, lt=1, doc="the run's total delta")
    dp_clip_msg: float = setting(0.2, "ss-dp-clip-msg", gt=0, wire=True)
    dp_debias: bool = setting(False)


@dataclass(frozen=True)
class Seeds(StateSpacePiece):
    """``seed``: the DP noise (by client and release, :func:`dp_release_key`) and the random
    start of FedCF (``init_std``; FedGC starts at zero, as its paper)."""

    seed: int = setting(0, "seed", ge=0, wire=True)
    init_std: float = setting(0.0, ge=0, wire=True)


@dataclass(frozen=True)
class GrangerView(StateSpacePiece):
    """``granger_alpha``: the graph view (``RunResult.edges``, ``to_networkx``) keeps an entry
    of ``A_hat`` (``B_hat``) as an edge when its p-value for "no Granger effect" is below it
    (:func:`granger_test`; 0: every nonzero entry); 0.05 is the nominal level whose
    false-positive rate ``docs/algorithms/fedgc.md`` reports. ``granger_lags``: the
    Newey-West lags of the standard errors (-1: :func:`hac_lags` of each window's rows;
    0: White's, which ignores the scores' serial correlation). The server alone reads both."""

    granger_alpha: float = setting(0.05, "ss-granger-alpha", ge=0, lt=1)
    granger_lags: int = setting(-1, "ss-granger-lags", ge=-1, le=MAX_ROWS)


@dataclass(frozen=True)
class Sites(StateSpacePiece):
    """``known_zero``: coupling blocks the user knows to be zero, e.g. ``"A:1<-0, A:2<-*,
    B:1<-0"`` (:func:`parse_known_zero`), held at exactly 0 in every iterate
    (:func:`known_zero_masks`); empty: none. ``max_missing``: a client whose share of missing
    cells (of ``y`` and ``u``) is above it is dropped at setup, named. ``state_screen``: the
    state screen of every window (:meth:`FedGC.screens
    <fedcausal_flwr.statespace.strategy.FedGC.screens>`). The server reads all three."""

    known_zero: str = setting("", "ss-known-zero",
                              doc="coupling blocks known to be 0: 'A:1<-0, A:2<-*, B:1<-0'")
    max_missing: float = setting(0.5, "ss-max-missing", ge=0, le=1,
                                 doc="largest share of missing cells a client may have")
    state_screen: bool = setting(
        True, "ss-state-screen",
        doc="stop the run, naming the client, when a client's states over a window are "
            "degenerate (rank below its state count, e.g. all zero) or when what its data fix "
            "(hhat_c, and the innovation target's C^+ y, FedCF's inputs) differs from its "
            "first answer for the same window (statespace.strategy.FedGC.screens)")

    def __post_init__(self) -> None:
        super().__post_init__()
        parsed = Knowledge.parse(known_zero=self.known_zero, known_zero_where=(
            f"run config {self.app_key('ss-known-zero')!r}"))
        object.__setattr__(self, "_knowledge", parsed)

    def knowledge(self) -> Knowledge:
        """The settings' :class:`~fedcausal_flwr.knowledge.Knowledge`: the ``known_zero``
        blocks, parsed when the settings were made (a syntax error names the key)."""
        return self.__dict__["_knowledge"]

    def zero_blocks(self) -> tuple[ZeroBlock, ...]:
        """The parsed ``known_zero`` (:attr:`Knowledge.zero_blocks
        <fedcausal_flwr.knowledge.Knowledge.zero_blocks>`)."""
        return self.knowledge().zero_blocks


@dataclass(frozen=True)
class WindowInputs(ClientMessage):
    """What a FedGC or FedCF client reads of the settings with every ``ss_window``: its step
    (``lr_client``, the loss weights, the objective), DP (``dp``, ``dp_clip_msg``) and its
    seeded start (in the order they travelled in before)."""

    lr_client: float = setting(MISSING, ge=0)
    eta1: float = setting(MISSING, ge=0)
    eta2: float = setting(MISSING, ge=0)
    lambda_l: float = setting(MISSING, ge=0)
    xi: float = setting(MISSING, ge=0)
    learn_phi: bool = setting(MISSING)
    target: str = setting(MISSING, choices=TARGETS)
    alg1_literal: bool = setting(MISSING)
    difference: bool = setting(MISSING)
    dp: bool = setting(MISSING)
    dp_clip_msg: float = setting(MISSING, gt=0)
    seed: int = setting(MISSING, ge=0)
    init_std: float = setting(MISSING, ge=0)


@dataclass(frozen=True)
class StateSpaceSettings(Sites, GrangerView, Seeds, Privacy, Objective, LossWeights, Schedule,
                         RunSettings):
    """What FedGC and FedCF share (the papers give no values; ours are the App's defaults):
    the run piece, then :class:`Schedule`, :class:`LossWeights`, :class:`Objective`,
    :class:`Privacy`, :class:`Seeds`, :class:`GrangerView` and :class:`Sites` (bases listed
    last piece first: a dataclass orders its fields by the reversed MRO). Each piece
    documents its fields. How the defaults were chosen: ``docs/algorithms/fedgc.md``,
    ``docs/algorithms/fedcf.md``.

    The ``wire`` fields are the client's share: the server sends them with every window
    (:meth:`~fedcausal_flwr.settings.Settings.to_wire`) as :class:`WindowInputs`, all a client
    reads, so a client never rebuilds the settings.
    """

    section: ClassVar[str] = "statespace"
    client_message: ClassVar[type[ClientMessage]] = WindowInputs

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.difference and self.window < 2:
            raise ValueError(f"run config 'statespace.ss-difference' = true needs "
                             f"'statespace.ss-window' >= 2 (got {self.window}): a window of one "
                             "step has no time difference; set statespace.ss-difference = false "
                             "for the online schedule W = 1")

    @classmethod
    def paper_schedule(cls, **changes: Any) -> Self:
        """The former default schedule (:data:`PAPER_SCHEDULE`: mini-batch windows of
        W = 1000, 30 epochs, steps 0.3 / 1.5, i.e. 300 windows), nearer the papers' per-step
        updates; every other field keeps the default, ``changes`` override. Run config:
        ``statespace.ss-window=1000 statespace.ss-epochs=30 statespace.ss-lr-server=0.3
        statespace.ss-lr-client=1.5``."""
        return cls(**{**PAPER_SCHEDULE, **changes})


@dataclass(frozen=True)
class FedGCSettings(StateSpaceSettings):
    """FedGC (Mohanty et al.), with the App's defaults: W = 10000, 20 epochs, lr 1.0 (server) / 1.5.

    FedGC's server loss is the penalty ``||D_m||^2`` alone (eqs 15-16) and clients learn only
    ``theta_m`` from a zero start: ``xi``, ``learn_phi``, ``alg1_literal`` and ``init_std`` keep
    their fixed values and have no run-config key.

    The default learns with mean shifts that no filter models (the paper's setting): the
    server target is ``"innovation"`` (``ss-gc-target``: client m's measured state
    ``C_mm^+ y^t`` instead of eq 15's augmented prediction ``A_mm hhat_a^{t-1}``) and the
    loss is on time differences (``ss-difference``); see :func:`fedgc_server_window` and
    :func:`time_difference`. ``ss-gc-target = "predicted"`` with ``ss-difference = false``
    is the paper's algorithm (eqs 15, 16, 22, 24), which learns only when client m's shifts
    are known to its filter (data key ``ss-shift-known``).
    """

    target: str = setting("innovation", "ss-gc-target", choices=("predicted", "innovation"),
                          wire=True)
    difference: bool = setting(True, "ss-difference", wire=True)

    def __post_init__(self) -> None:
        super().__post_init__()
        inputs = [str(b) for b in self.zero_blocks() if b.matrix == "B"]
        if inputs:
            raise ValueError(f"run config {self.app_key('ss-known-zero')!r}: {inputs}: FedGC "
                             "learns no input blocks B_mn (only FedCF does)")


@dataclass(frozen=True)
class FedCFSettings(StateSpaceSettings):
    """FedCF (Mohamed, Mohanty, Gebraeel), with the App's defaults.

    ``xi`` weights the penalty ``||D_m||^2`` beside the residual (eq 11); ``learn_phi`` learns
    the constant ``phi_m``; ``init_std``: ``theta, phi, A_hat, B_hat`` start N(0, init_std^2)
    (seeded by ``seed`` and the client), as in the FedCF paper.
    ``target``: ``"predicted"`` (paper: ``r_s = h_s - h_a``), ``"refined"`` (regress on
    ``hhat_a^t``, which carries ``y^t``) or ``"innovation"`` (``h_a^t`` corrected by the full
    innovation, ``h_a^t + C^+ (y^t - C h_a^t) = C^+ y^t``: unbiased for ``h^t``, so
    ``B_hat_mn`` is unbiased for i.i.d. inputs; see :func:`client_states`).
    ``alg1_literal`` drops ``g~`` from the client step, as Algorithm 1 is printed.
    ``difference`` stays ``False`` (no key): differenced, ``u_n^{t-2}`` in the regressor
    ``Delta u_n^{t-1}`` meets client m's filter error at ``t - 1``, which carries
    ``B_mn u_n^{t-2}``, and biases ``B_hat_mn``.
    The schedule (``window``, ``epochs``, ``lr_server``, ``lr_client``) shares its keys and
    defaults with FedGC. How the defaults were chosen: ``docs/algorithms/fedcf.md``.
    ``cf_client``, ``cf_source``, ``cf_delta``: the counterfactual query answered after
    training, "what would ``y_m`` (m = ``cf_client``) change by if client n = ``cf_source``
    changed its input by ``delta_u``" with ``cf_delta`` comma-separated floats (empty: none).
    """

    xi: float = setting(10.0, "ss-xi", ge=0, wire=True)
    learn_phi: bool = setting(True, "ss-learn-phi", wire=True)
    target: str = setting("predicted", "ss-target", choices=TARGETS, wire=True)
    alg1_literal: bool = setting(False, "ss-alg1-literal", wire=True)
    init_std: float = setting(0.1, "ss-init-std", ge=0, wire=True)
    cf_client: int = setting(1, "ss-cf-client", ge=0, le=MAX_CLIENTS)
    cf_source: int = setting(0, "ss-cf-source", ge=0, le=MAX_VARS)
    cf_delta: str = setting("", "ss-cf-delta", floats=True,
                            doc="the counterfactual query's input changes (empty: no query)")

    def delta_u(self) -> np.ndarray:
        """``cf_delta`` as an array (empty: no query)."""
        return np.array([float(p) for p in self.cf_delta.split(",") if p.strip()])
