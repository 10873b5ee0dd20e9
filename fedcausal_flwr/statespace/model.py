"""State-space federated causal learning: FedGC (Mohanty et al.) and FedCF (Mohamed et al.).

Global LTI system ``h^t = A h^{t-1} + B u^{t-1} + b^t + w^t``, ``y^t = C h^t + v^t`` with block
``A = [A_mn]``, ``B = [B_mn]`` and block-diagonal ``C``. Client m knows ``A_mm, B_mm, C_mm``,
runs a proprietary Kalman filter ``hc`` and augments it with ``theta_m y_m`` (and the constant
``phi_m`` in FedCF). The server learns the off-diagonal blocks ``A_mn`` (and ``B_mn``) from the
states the clients send and returns gradients w.r.t. the augmented states.

One exchange carries a *window* of time steps ``ts`` (each t >= 1): the clients' states with
their current parameters, the server's window-mean gradients, one Jacobi step on both sides.
``W = 1`` is FedGC's online schedule, ``W = T - 1`` FedCF's full batch.

FedGC is FedCF without inputs, with ``phi = 0`` and ``xi = 0``: then ``r_s = -D`` and
``L_s^FedCF = (1 + xi) L_s^FedGC`` (tested). Row convention: a window of states is ``W x P``.

:class:`FedGCSettings` and :class:`FedCFSettings` hold every setting with the App's defaults;
:func:`fedcausal_flwr.statespace.loop.reference` is the in-process loop the Flower path is
tested against; the client's data and Kalman filter are in :mod:`fedcausal_flwr.statespace.kalman`.
The simulators (systems, series, the centralized oracle) are in
:mod:`fedcausal_flwr.statespace.lti`.
Everything here is pure numpy/scipy: no I/O, no logging, no Flower.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, NamedTuple, Self

import numpy as np
import scipy.linalg as slin
from scipy.stats import t as student_t

from fedcausal_flwr.settings import (
    MAX_CLIENTS,
    MAX_ROUNDS,
    MAX_ROWS,
    MAX_VARS,
    RunSettings,
    setting,
)
from fedcausal_flwr.statespace.kalman import ClientData


# ---- blocks -----------------------------------------------------------------------------------
def block(M: np.ndarray, rows: Sequence[int], cols: Sequence[int], m: int, n: int
          ) -> np.ndarray:
    """Block (m, n) of ``M`` with row sizes ``rows`` and column sizes ``cols``."""
    r, c = offsets(rows), offsets(cols)
    return M[r[m]:r[m + 1], c[n]:c[n + 1]]


def offsets(sizes: Sequence[int]) -> np.ndarray:
    """Start index of each block, and the total at the end."""
    return np.cumsum((0, *sizes))


def time_difference(X: np.ndarray) -> np.ndarray:
    """``x^t - x^{t-1}`` of a window's rows (``W x k`` -> ``(W - 1) x k``).

    Departure from both papers (FedGC eq 15, FedCF eq 13 are losses on levels): with
    ``difference`` the server's residuals are differenced in time before they are squared.
    An unknown mean shift ``b^t`` on client m's states (the Kalman filters do not
    model b) sits in client m's residual as ``b^t``; it is piecewise constant, so its
    difference vanishes except at its few jumps, while ``A_mn`` still maps the differenced
    states of client n to the differenced residual of client m. On levels, ``b^t`` is
    explained by the other clients' states, which follow it through ``A_nm`` (spurious
    ``A_mn``). Unknown shifts need no model and no estimate, and nothing new is sent.
    """
    return X[1:] - X[:-1]


def time_difference_adjoint(E: np.ndarray) -> np.ndarray:
    """``Delta^T E`` (``(W - 1) x k`` -> ``W x k``): the chain rule through
    :func:`time_difference`, so ``d ||Delta R||^2 / dR = 2 Delta^T Delta R``."""
    G = np.zeros((E.shape[0] + 1, E.shape[1]))
    G[1:] += E
    G[:-1] -= E
    return G


def differenced(R: np.ndarray, difference: bool) -> tuple[np.ndarray, np.ndarray, int]:
    """``(residual as squared, its gradient direction, n)`` of a window's residual rows ``R``.

    Levels: ``(R, R, W)``. Differenced: ``(Delta R, Delta^T Delta R, W - 1)``, so that the
    window's loss is ``||first||^2 / n`` and its gradient w.r.t. ``R`` is ``2 second / n``
    (a window of one row contributes nothing).
    """
    if not difference:
        return R, R, R.shape[0]
    E = time_difference(R)
    return E, time_difference_adjoint(E), max(E.shape[0], 1)


# ---- settings and state ----------------------------------------------------------------------
TARGETS = ("predicted", "refined", "innovation")

# The former default schedule (:meth:`StateSpaceSettings.paper_schedule`).
PAPER_SCHEDULE: dict[str, Any] = {"window": 1000, "epochs": 30, "lr_server": 0.3,
                                  "lr_client": 1.5}


@dataclass(frozen=True)
class StateSpaceSettings(RunSettings):
    """What FedGC and FedCF share (the papers give no values; ours are the App's defaults).

    Schedule: ``window`` time steps per exchange (W = 1 is FedGC's online schedule,
    ``W = T - 1`` FedCF's full batch), ``epochs`` passes over t = 1..T-1. A run is
    ``epochs * ceil((T - 1) / W)`` windows, one exchange each (plus setup and a final
    gradient delivery), and windows are sequential, so the exchanges are set by W and epochs.
    How the defaults were chosen: ``docs/algorithms/fedgc.md``, ``docs/algorithms/fedcf.md``.
    Steps are normalized: each block moves by ``lr / L`` along its gradient, with ``L`` the
    running maximum, over the windows seen so far, of a bound of the block's curvature on the
    window (kept in ``ClientParams.curv`` / ``ServerParams.curv_A, curv_B``), so the same
    ``lr`` works across scales and the step never grows: a quiet window cannot undo what a
    mean-shift window taught (for full batch, ``W = T - 1``, ``L`` is the batch's bound).
    ``eta1``/``eta2`` weight the client's local loss and the server loss in the client step
    (FedGC eq 24, FedCF eqs 9-10); ``lambda_g``/``lambda_l`` are ridge weights on
    ``A_hat, B_hat`` and on ``theta``.
    ``dp``: every state array a client sends is a Gaussian release (rows clipped to
    ``dp_clip_msg``, :mod:`fedcausal_flwr.privacy`), with the noise multiplier derived from the
    run's TOTAL budget (``dp_epsilon``, ``dp_delta``) by Flower's RDP accountant for the
    releases the run will make (:func:`dp_releases`); the server's gradients are
    post-processing of those releases and travel unnoised. ``dp_debias``: the server removes
    the known noise variance from its regressors' second moment (:func:`dp_noise_ridge`).
    Noise is seeded by ``seed``, client and release (:func:`dp_release_key`).
    ``xi``, ``learn_phi``, ``target``, ``alg1_literal``, ``init_std``: FedCF's (see
    :class:`FedCFSettings`); FedGC fixes all but ``target`` (no penalty weight, no ``phi``,
    the zero start of the FedGC paper; see :class:`FedGCSettings` for its target).
    The ``wire`` fields are the client's share: the server sends them with every window
    (:meth:`~fedcausal_flwr.settings.Settings.to_wire`), so a client never rebuilds them.
    ``difference``: the server fits its model to first differences in time of its residuals
    within each window (:func:`time_difference`), which removes unknown piecewise-constant
    mean shifts ``b^t`` of any client's states; ``False`` is the papers' loss on levels.
    It needs ``window >= 2`` (a window of one step has no difference). FedGC's default, keyed
    ``ss-difference``; FedCF keeps levels (no key; see :class:`FedCFSettings`).
    ``granger_alpha``: the graph view (``RunResult.edges``, ``to_networkx``) keeps an entry
    of ``A_hat`` (``B_hat``) as an edge when its p-value for "no Granger effect" is below it
    (:func:`granger_test`; 0: every nonzero entry); 0.05 is the nominal level whose
    false-positive rate ``docs/algorithms/fedgc.md`` reports. ``granger_lags``: the
    Newey-West lags of the standard errors (-1: :func:`hac_lags` of each window's rows;
    0: White's, which ignores the scores' serial correlation). The server alone reads both.
    ``known_zero``: coupling blocks the user knows to be zero, e.g. ``"A:1<-0, A:2<-*,
    B:1<-0"`` (:func:`parse_known_zero`), held at exactly 0 in every iterate
    (:func:`known_zero_masks`); empty: none. ``max_missing``: a client whose share of missing
    cells (of ``y`` and ``u``) is above it is dropped at setup, named. The server reads both.
    """

    section: ClassVar[str] = "statespace"

    window: int = setting(10000, "ss-window", ge=1, le=MAX_ROWS)
    epochs: int = setting(20, "ss-epochs", ge=1, le=MAX_ROUNDS)
    lr_server: float = setting(1.0, "ss-lr-server", ge=0)
    lr_client: float = setting(1.5, "ss-lr-client", ge=0, wire=True)
    eta1: float = setting(1.0, "ss-eta1", ge=0, wire=True)
    eta2: float = setting(1.0, "ss-eta2", ge=0, wire=True)
    lambda_g: float = setting(0.0, "ss-lambda-g", ge=0)
    lambda_l: float = setting(0.0, "ss-lambda-l", ge=0, wire=True)
    xi: float = setting(0.0, ge=0, wire=True)
    learn_phi: bool = setting(False, wire=True)
    target: str = setting("predicted", choices=TARGETS, wire=True)
    alg1_literal: bool = setting(False, wire=True)
    difference: bool = setting(False, wire=True)
    dp: bool = setting(False, "ss-dp", wire=True)
    dp_epsilon: float = setting(8.0, "ss-dp-epsilon", gt=0,
                                doc="the run's TOTAL epsilon (inf: clip, no noise)")
    dp_delta: float = setting(1e-5, "ss-dp-delta", gt=0, lt=1, doc="the run's total delta")
    dp_clip_msg: float = setting(0.2, "ss-dp-clip-msg", gt=0, wire=True)
    dp_debias: bool = setting(False)
    seed: int = setting(0, "seed", ge=0, wire=True)
    init_std: float = setting(0.0, ge=0, wire=True)
    granger_alpha: float = setting(0.05, "ss-granger-alpha", ge=0, lt=1)
    granger_lags: int = setting(-1, "ss-granger-lags", ge=-1, le=MAX_ROWS)
    known_zero: str = setting("", "ss-known-zero",
                              doc="coupling blocks known to be 0: 'A:1<-0, A:2<-*, B:1<-0'")
    max_missing: float = setting(0.5, "ss-max-missing", ge=0, le=1,
                                 doc="largest share of missing cells a client may have")

    def __post_init__(self) -> None:
        super().__post_init__()
        self.zero_blocks()
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

    def zero_blocks(self) -> tuple[ZeroBlock, ...]:
        """The parsed ``known_zero`` (a syntax error names the key)."""
        return parse_known_zero(self.known_zero, f"run config {self.app_key('ss-known-zero')!r}")


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
    cf_delta: str = setting("", "ss-cf-delta")

    def __post_init__(self) -> None:
        super().__post_init__()
        try:
            self.delta_u()
        except ValueError:
            raise ValueError(f"run config {self.app_key('ss-cf-delta')!r} = {self.cf_delta!r}: "
                             "expected "
                             "comma-separated numbers (allowed: str such as '1,0.5'; empty: "
                             "no query)") from None

    def delta_u(self) -> np.ndarray:
        """``cf_delta`` as an array (empty: no query)."""
        return np.array([float(p) for p in self.cf_delta.split(",") if p.strip()])


# ---- known-zero blocks -----------------------------------------------------------------------
ANY_CLIENT = "*"


class ZeroBlock(NamedTuple):
    """``matrix`` (``"A"`` or ``"B"``) block ``(target, source)`` known to be 0: client
    ``source``'s state (input) does not drive client ``target``'s state; None: every client."""

    matrix: str
    target: int | None
    source: int | None

    def __str__(self) -> str:
        def name(c: int | None) -> str:
            return ANY_CLIENT if c is None else str(c)
        return f"{self.matrix}:{name(self.target)}<-{name(self.source)}"


def _client_id(text: str, statement: str, where: str) -> int | None:
    """A partition id (``3`` or ``c3``, the result's naming) or ``*`` (None)."""
    t = text.strip()
    if t == ANY_CLIENT:
        return None
    digits = t[1:] if t[:1] in ("c", "C") else t
    if not digits.isdigit():
        raise ValueError(f"{where}: {statement!r}: {t!r} is not a client; name one by its "
                         "partition id (e.g. 2 or c2) or '*' for every client")
    return int(digits)


def parse_known_zero(text: str, where: str = "known-zero") -> tuple[ZeroBlock, ...]:
    """The comma-separated statements ``A:m<-n`` (``A_mn = 0``: client n's state does not
    drive client m's; also written ``A:n->m``) and ``B:m<-n`` (``B_mn = 0``: client n's input
    does not drive client m's state), clients by partition id or ``*`` (every client, the
    diagonal block left out); a malformed statement is a ValueError naming ``where``."""
    out = []
    for item in (t.strip() for t in str(text).split(",")):
        if not item:
            continue
        matrix, colon, body = item.partition(":")
        matrix = matrix.strip().upper()
        arrows = [a for a in ("<-", "->") if body.count(a) == 1]
        if not colon or matrix not in ("A", "B") or len(arrows) != 1:
            raise ValueError(f"{where}: {item!r} is not a known-zero block; write "
                             "'A:target<-source' or 'B:target<-source' (partition ids or "
                             "'*'), e.g. 'A:1<-0, A:2<-*, B:1<-0'")
        left, right = body.split(arrows[0])
        target, source = (left, right) if arrows[0] == "<-" else (right, left)
        block_ = ZeroBlock(matrix, _client_id(target, item, where),
                           _client_id(source, item, where))
        if block_.target is not None and block_.target == block_.source:
            raise ValueError(f"{where}: {item!r}: the diagonal block is client "
                             f"{block_.target}'s own, known to it and not learned")
        out.append(block_)
    return tuple(out)


def known_zero_masks(blocks: Sequence[ZeroBlock], cids: Sequence[int], P: Sequence[int],
                     U: Sequence[int], known: Sequence[int] | None = None
                     ) -> tuple[np.ndarray, np.ndarray] | None:
    """Boolean ``(zero_A, zero_B)`` over the full ``A_hat`` (``B_hat``) of the clients
    ``cids`` (sizes ``P``, ``U``), True on the known-zero blocks; None without statements.

    ``known``: every client of the federation (default ``cids``); a statement naming a
    client outside it is a ValueError naming the client, one naming a known client that
    is not in ``cids`` (dropped) holds no block.
    """
    if not blocks:
        return None
    known = list(cids) if known is None else list(known)
    for b in blocks:
        for c in (b.target, b.source):
            if c is not None and c not in known:
                raise ValueError(f"known-zero block {str(b)!r}: no client {c}; the "
                                 f"federation's clients are {sorted(known)}")
    pa, ua = offsets(P), offsets(U)
    zero_A = np.zeros((pa[-1], pa[-1]), dtype=bool)
    zero_B = np.zeros((pa[-1], ua[-1]), dtype=bool)
    for b in blocks:
        Z, cols = (zero_A, pa) if b.matrix == "A" else (zero_B, ua)
        for m, cm in enumerate(cids):
            for n, cn in enumerate(cids):
                if m != n and b.target in (None, cm) and b.source in (None, cn):
                    Z[pa[m]:pa[m + 1], cols[n]:cols[n + 1]] = True
    return zero_A, zero_B


def zero_block_list(Z: np.ndarray, cids: Sequence[int], rows: Sequence[int],
                    cols: Sequence[int]) -> list[list[int]]:
    """``[[target, source], ...]`` client ids of the blocks ``Z`` holds at zero."""
    r, c = offsets(rows), offsets(cols)
    return [[int(cm), int(cn)] for m, cm in enumerate(cids) for n, cn in enumerate(cids)
            if m != n and r[m + 1] > r[m] and c[n + 1] > c[n]
            and Z[r[m]:r[m + 1], c[n]:c[n + 1]].all()]


def with_known_zero(par: ServerParams, masks: tuple[np.ndarray, np.ndarray] | None
                    ) -> ServerParams:
    """``par`` carrying ``masks`` (:func:`known_zero_masks`), its known-zero entries set to
    exactly 0; ``par`` itself without masks."""
    if masks is None:
        return par
    zA, zB = masks
    return ServerParams(np.where(zA, 0.0, par.A_hat), np.where(zB, 0.0, par.B_hat),
                        par.curv_A, par.curv_B, zA, zB)


def windows(T: int, W: int, epochs: int) -> list[np.ndarray]:
    """Time indices of every exchange: t = 1..T-1 in chunks of W, ``epochs`` times."""
    if W < 1:
        raise ValueError(f"window must be >= 1, got {W}")
    chunks = [np.arange(s, min(s + W, T)) for s in range(1, T, W)]
    return [c for _ in range(epochs) for c in chunks]


@dataclass
class ClientParams:
    """Client m's private parameters and the running curvature bound of its theta step."""

    theta: np.ndarray
    phi: np.ndarray
    curv: float = 0.0


@dataclass
class ServerParams:
    """Off-diagonal estimates, full-size with zero diagonal blocks, the running curvature
    bounds of their steps and the known-zero masks (None: no known-zero block; see
    :func:`with_known_zero`)."""

    A_hat: np.ndarray
    B_hat: np.ndarray
    curv_A: float = 0.0
    curv_B: float = 0.0
    zero_A: np.ndarray | None = None
    zero_B: np.ndarray | None = None

    @property
    def masks(self) -> tuple[np.ndarray, np.ndarray] | None:
        """``(zero_A, zero_B)``, or None."""
        return None if self.zero_A is None else (self.zero_A, self.zero_B)


def initial_server(P: Sequence[int], U: Sequence[int], init_std: float = 0.0,
                   rng: np.random.Generator | None = None) -> ServerParams:
    """``A_hat = B_hat = 0`` off the diagonal (or N(0, init_std^2) with ``rng``)."""
    pa, ua = offsets(P), offsets(U)
    A = np.zeros((pa[-1], pa[-1]))
    B = np.zeros((pa[-1], ua[-1]))
    if init_std and rng is not None:
        A, B = rng.normal(0, init_std, A.shape), rng.normal(0, init_std, B.shape)
    return ServerParams(*off_diagonal(A, B, P, U))


def off_diagonal(A: np.ndarray, B: np.ndarray, P: Sequence[int], U: Sequence[int]
                  ) -> tuple[np.ndarray, np.ndarray]:
    pa, ua = offsets(P), offsets(U)
    A, B = A.copy(), B.copy()
    for m in range(len(P)):
        A[pa[m]:pa[m + 1], pa[m]:pa[m + 1]] = 0.0
        B[pa[m]:pa[m + 1], ua[m]:ua[m + 1]] = 0.0
    return A, B


def initial_client(c: ClientData, init_std: float = 0.0, seed: int = 0, m: int = 0
                   ) -> ClientParams:
    """``theta, phi`` ~ N(0, init_std^2) seeded by ``(seed, m)``; zeros when init_std is 0."""
    p, _, d = c.dims
    if not init_std:
        return ClientParams(np.zeros((p, d)), np.zeros(p))
    rng = np.random.default_rng([seed, 3, m])
    return ClientParams(rng.normal(0, init_std, (p, d)), rng.normal(0, init_std, p))


def initial_server_for(P: Sequence[int], U: Sequence[int], init_std: float, seed: int,
                       masks: tuple[np.ndarray, np.ndarray] | None = None) -> ServerParams:
    """Server start of a run: N(0, init_std^2) off-diagonal blocks seeded by ``seed``, the
    known-zero blocks (``masks``, :func:`known_zero_masks`) at 0."""
    return with_known_zero(initial_server(P, U, init_std, np.random.default_rng([seed, 4])),
                           masks)


# ---- the augmented client --------------------------------------------------------------------
def client_states(c: ClientData, par: ClientParams, ts: np.ndarray, target: str
                  ) -> list[np.ndarray]:
    """What client m sends for window ``ts``: ``[target, hhat_a^{t-1}, hhat_c^{t-1}, u^{t-1}]``.

    ``target`` is ``h_a^t = A hhat_a^{t-1} + B u^{t-1} + phi`` (predicted), ``hhat_a^t``
    (refined) or ``h_a^t + C^+ r_a^t = C^+ y^t`` (innovation: the refined state with gain
    ``C^+`` instead of ``K``, so all of ``B_mn u_n^{t-1}`` in ``h^t`` reaches the server, not
    only the part ``K C`` lets through). FedGC uses only ``[hhat_a^{t-1}, hhat_c^{t-1}]``.
    """
    ha_prev = c.hc[ts - 1] + c.y[ts - 1] @ par.theta.T
    if target == "refined":
        h = c.hc[ts] + c.y[ts] @ par.theta.T
    elif target == "innovation":
        h = c.y[ts] @ np.linalg.pinv(c.C).T
    else:
        h = ha_prev @ c.A.T + c.u[ts - 1] @ c.B.T + par.phi
    return [h, ha_prev, c.hc[ts - 1], c.u[ts - 1]]


def local_residual(c: ClientData, par: ClientParams, ts: np.ndarray) -> np.ndarray:
    """``r_a^t = y^t - C (A hhat_a^{t-1} + B u^{t-1} + phi)`` (eq 20 / eq 5), W x D; 0 in
    the components of ``y^t`` that were not observed (``c.observed``)."""
    ha_prev = c.hc[ts - 1] + c.y[ts - 1] @ par.theta.T
    r = c.y[ts] - (ha_prev @ c.A.T + c.u[ts - 1] @ c.B.T + par.phi) @ c.C.T
    return r if c.observed is None else np.where(c.observed[ts], r, 0.0)


def local_loss(c: ClientData, par: ClientParams, ts: np.ndarray) -> float:
    """Window mean of ``||r_a^t||^2``."""
    return float(np.mean(np.sum(local_residual(c, par, ts) ** 2, axis=1)))


def local_gradients(c: ClientData, par: ClientParams, ts: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """``(grad_theta L_a, grad_phi L_a)`` (eq 21 and the FedCF table), window means."""
    r = local_residual(c, par, ts)
    W = len(ts)
    return (-2.0 / W) * (c.C @ c.A).T @ r.T @ c.y[ts - 1], (-2.0 / W) * c.C.T @ r.sum(axis=0)


def server_grad_theta(c: ClientData, ts: np.ndarray, g: np.ndarray, g_tilde: np.ndarray,
                      target: str, alg1_literal: bool = False
                      ) -> tuple[np.ndarray, np.ndarray]:
    """``(grad_theta L_s, grad_phi L_s)`` from the server's gradients (eqs 7-8)."""
    y_prev = c.y[ts - 1]
    if target == "refined":  # d hhat_a^t / d theta = y^t; phi does not enter
        return g.T @ c.y[ts] + g_tilde.T @ y_prev, np.zeros(c.A.shape[0])
    if target == "innovation":  # C^+ y^t depends on neither theta nor phi
        return g_tilde.T @ y_prev, np.zeros(c.A.shape[0])
    gt = np.zeros_like(g) if alg1_literal else g_tilde
    return (g @ c.A + gt).T @ y_prev, g.sum(axis=0)


def client_step(c: ClientData, par: ClientParams, ts: np.ndarray, g: np.ndarray,
                g_tilde: np.ndarray, *, lr_client: float, eta1: float, eta2: float,
                lambda_l: float, xi: float, learn_phi: bool, target: str,
                alg1_literal: bool, difference: bool) -> ClientParams:
    """One Jacobi step of ``theta`` (and ``phi``): eq 24 / eqs 9-10, normalized step."""
    gth_a, gph_a = local_gradients(c, par, ts)
    gth_s, gph_s = server_grad_theta(c, ts, g, g_tilde, target, alg1_literal)
    Y = c.y[ts - 1] if target != "refined" else np.vstack([c.y[ts - 1], c.y[ts]])
    sy = np.linalg.norm(Y, 2) ** 2 / len(ts)
    CA, A = np.linalg.norm(c.C @ c.A, 2) ** 2, max(np.linalg.norm(c.A, 2) ** 2, 1.0)
    if difference:  # local loss on levels, server loss on differenced rows
        Ys = [c.y[ts - 1]] if target != "refined" else [c.y[ts - 1], c.y[ts]]
        dY = np.vstack([time_difference(Yk) for Yk in Ys])
        sd = np.linalg.norm(dY, 2) ** 2 / (len(ts) - 1) if dY.size else 0.0
        bound = 2.0 * (eta1 * CA * np.linalg.norm(c.y[ts - 1], 2) ** 2 / len(ts)
                       + eta2 * (1.0 + xi) * A * sd)
    else:
        bound = 2.0 * sy * (eta1 * CA + eta2 * (1.0 + xi) * A)
    curv = max(par.curv, bound)
    L = curv + 2.0 * lambda_l + 1e-12
    theta = par.theta - (lr_client / L) * (eta1 * gth_a + eta2 * gth_s
                                           + 2.0 * lambda_l * par.theta)
    phi = par.phi
    if learn_phi:
        Lp = 2.0 * (eta1 * np.linalg.norm(c.C, 2) ** 2 + eta2) + 1e-12
        phi = par.phi - (lr_client / Lp) * (eta1 * gph_a + eta2 * gph_s)
    return ClientParams(theta, phi, curv)


# ---- the server ------------------------------------------------------------------------------
class LossTerm(NamedTuple):
    """One part ``weight * ||E||^2`` of a server loss, linear in the estimates:
    ``d E[t, i] / d (row i of [A_hat, B_hat]) = sign * X[t]`` (``X`` the window's regressors
    ``[hc, u]`` of all clients, as squared: differenced with ``difference``)."""

    weight: float
    sign: float
    E: np.ndarray
    X: np.ndarray


@dataclass
class ServerWindow:
    """Window results: losses, per-client gradients and the gradients of the estimates;
    ``terms``: the loss's parts (:class:`LossTerm`), for :func:`granger_window`."""

    L_s: float
    penalty: float
    residual: float
    g: list[np.ndarray]
    g_tilde: list[np.ndarray]
    grad_A: np.ndarray
    grad_B: np.ndarray
    terms: list[LossTerm] = field(default_factory=list)


def server_window(A_diag: Sequence[np.ndarray], B_diag: Sequence[np.ndarray],
                  par: ServerParams, msgs: Sequence[Sequence[np.ndarray]], xi: float,
                  difference: bool = False) -> ServerWindow:
    """FedCF server model (eqs 11-16) on one window; ``msgs[m]`` from :func:`client_states`.

    ``h_s = A_mm hc + sum_n A_mn hc_n + B_mm u + sum_n B_mn u_n``, ``r_s = h_s - target``,
    ``D_m = A_mm (ha - hc) - sum_n A_mn hc_n``, ``L_s = mean_t sum_m ||r_s||^2 + xi ||D_m||^2``;
    with ``difference`` the means are over ``||Delta r_s||^2 + xi ||Delta D_m||^2``
    (:func:`time_difference`; not in the paper), which ``phi_m`` does not enter.
    """
    P = [a.shape[0] for a in A_diag]
    U = [b.shape[1] for b in B_diag]
    pa = offsets(P)
    HC = np.hstack([m[2] for m in msgs])
    UU = np.hstack([m[3] for m in msgs])
    X = HC @ par.A_hat.T  # x_m for all m (the diagonal blocks of A_hat are zero)
    Bu = UU @ par.B_hat.T
    R, Dm = [], []
    for m, (target, ha, hc, u) in enumerate(msgs):
        sl = slice(pa[m], pa[m + 1])
        R.append(hc @ A_diag[m].T + X[:, sl] + u @ B_diag[m].T + Bu[:, sl] - target)
        Dm.append((ha - hc) @ A_diag[m].T - X[:, sl])
    (Re, GR, n), (De, GD, _) = (differenced(np.hstack(Z), difference) for Z in (R, Dm))
    res, pen = float(np.sum(Re * Re)) / n, float(np.sum(De * De)) / n
    g = [(-2.0 / n) * GR[:, pa[m]:pa[m + 1]] for m in range(len(P))]
    gt = [(2.0 * xi / n) * GD[:, pa[m]:pa[m + 1]] @ A_diag[m] for m in range(len(P))]
    grad_A = (2.0 / n) * (GR - xi * GD).T @ HC
    grad_B = (2.0 / n) * GR.T @ UU
    grad_A, grad_B = off_diagonal(grad_A, grad_B, P, U)
    X = differenced(np.hstack([HC, UU]), difference)[0]
    X_pen = np.hstack([X[:, :pa[-1]], np.zeros_like(X[:, pa[-1]:])])  # B_hat is not in D_m
    terms = [LossTerm(1.0, 1.0, Re, X), LossTerm(xi, -1.0, De, X_pen)]
    return ServerWindow(res + xi * pen, pen, res, g, gt, grad_A, grad_B, terms)


def fedgc_server_window(A_diag: Sequence[np.ndarray], A_hat: np.ndarray,
                        msgs: Sequence[Sequence[np.ndarray]], target: str = "predicted",
                        difference: bool = False) -> ServerWindow:
    """FedGC server (eqs 15, 16, 22) on one window; ``msgs[m]`` from :func:`fedgc_states`.

    ``target="predicted"`` (the paper): ``msgs[m] = [hhat_a^{t-1}, hhat_c^{t-1}]``,
    ``D_m = A_mm (ha - hc) - sum_n A_mn hc_n``, ``L_s = mean_t sum_m ||D_m||^2``,
    ``g_m = 2 A_mm^T D_m`` (w.r.t. ``hhat_a^{t-1}``), ``grad A_mn = -2 D_m hc_n^T``.

    ``target="innovation"`` (not in the paper; FedCF's innovation target with ``B = 0``,
    ``phi = 0``, ``xi = 0``): ``msgs[m] = [C_mm^+ y_m^t, hhat_c^{t-1}]``,
    ``D_m = C^+ y^t - A_mm hc - sum_n A_mn hc_n``: what client m's own model leaves of its
    measured state, regressed on the others' states (eq 15 with the measured instead of the
    augmented state). It depends on no ``theta``, so ``g_m = 0`` and ``theta_m`` learns from
    its local loss alone (eq 20). Eq 15's target ``A_mm theta_m y^{t-1}`` is client m's
    prediction of that drive from its own past, whose only cross-client content is the
    persistent part; differenced, that part is gone (see :func:`time_difference`).

    ``difference``: ``L_s = mean_t sum_m ||Delta D_m||^2`` (:func:`time_difference`).
    """
    P = [a.shape[0] for a in A_diag]
    pa = offsets(P)
    HC = np.hstack([m[1] for m in msgs])
    X = HC @ A_hat.T
    if target == "innovation":
        D = np.hstack([z - hc @ A_diag[m].T - X[:, pa[m]:pa[m + 1]]
                       for m, (z, hc) in enumerate(msgs)])
    else:
        D = np.hstack([(ha - hc) @ A_diag[m].T - X[:, pa[m]:pa[m + 1]]
                       for m, (ha, hc) in enumerate(msgs)])
    De, GD, n = differenced(D, difference)
    g = [(2.0 / n) * GD[:, pa[m]:pa[m + 1]] @ A_diag[m] for m in range(len(P))]
    if target == "innovation":
        g = [np.zeros_like(x) for x in g]
    grad_A = off_diagonal((-2.0 / n) * GD.T @ HC, np.zeros((pa[-1], 0)), P, [0] * len(P))[0]
    L = float(np.sum(De * De)) / n
    terms = [LossTerm(1.0, -1.0, De, differenced(HC, difference)[0])]
    return ServerWindow(L, L, L, [np.zeros_like(x) for x in g], g, grad_A,
                        np.zeros((pa[-1], 0)), terms)


def server_step(par: ServerParams, win: ServerWindow, msgs: Sequence[Sequence[np.ndarray]],
                *, lr_server: float, lambda_g: float, xi: float, difference: bool,
                hc_index: int = 2, u_index: int = 3, noise_ridge: float = 0.0) -> ServerParams:
    """``A_hat -= lr / L_A (grad + 2 (lambda_g + noise_ridge) A_hat)``; likewise ``B_hat``
    without ``noise_ridge`` (eqs 3, 14-15).

    ``L_A``, ``L_B``: running maxima of the windows' curvature bounds, plus the ridge (on the
    differenced states and inputs with ``difference``). Known-zero entries (``par.masks``):
    their gradient is 0 and the new iterate holds them at exactly 0 (a projection, no
    penalty).
    """
    def curvature(Z: np.ndarray) -> float:
        if difference:
            Z = time_difference(Z)
        return np.linalg.norm(Z, 2) ** 2 / max(Z.shape[0], 1) if Z.size else 0.0

    HC = np.hstack([m[hc_index] for m in msgs])
    if par.masks is not None:  # the known-zero entries get no gradient
        win = replace(win, grad_A=np.where(par.zero_A, 0.0, win.grad_A),
                      grad_B=np.where(par.zero_B, 0.0, win.grad_B))
    cA = max(par.curv_A, 2.0 * max(1.0 + xi, 1.0) * curvature(HC))
    A = par.A_hat - (lr_server / (cA + 2 * lambda_g + 1e-12)) * (
        win.grad_A + 2 * (lambda_g + noise_ridge) * par.A_hat)
    B, cB = par.B_hat, par.curv_B
    if B.size:
        UU = np.hstack([m[u_index] for m in msgs])
        cB = max(cB, 2.0 * curvature(UU))
        B = B - (lr_server / (cB + 2 * lambda_g + 1e-12)) * (win.grad_B + 2 * lambda_g * B)
    return with_known_zero(ServerParams(A, B, cA, cB), par.masks)


# ---- standard errors and the Granger test ----------------------------------------------------
def hac_lags(n: int) -> int:
    """Newey-West lag truncation ``floor(4 (n / 100)^(2/9))`` for ``n`` score rows (0 for
    ``n <= 1``): Newey & West (1994), Review of Economic Studies 61(4), section 3."""
    return int(np.floor(4.0 * (n / 100.0) ** (2.0 / 9.0))) if n > 1 else 0


@dataclass
class GrangerStats:
    """The sandwich's two sides summed over windows: ``hessian`` ``H = sum_j w_j X_j^T X_j``
    (K x K, K = states + inputs of all clients), ``meat[i]`` the HAC long-run covariance of
    row i's scores (rows x K x K), ``n`` score rows and the largest lag used."""

    hessian: np.ndarray
    meat: np.ndarray
    n: int
    lags: int

    def __add__(self, other: GrangerStats) -> GrangerStats:
        return GrangerStats(self.hessian + other.hessian, self.meat + other.meat,
                            self.n + other.n, max(self.lags, other.lags))


def scores(terms: Sequence[LossTerm]) -> np.ndarray:
    """``s[t, i] = sum_j w_j sign_j E_j[t, i] X_j[t]`` (n x rows x K): half the gradient of
    time step t's loss w.r.t. row i of ``[A_hat, B_hat]``."""
    return sum(t.weight * t.sign * t.E[:, :, None] * t.X[:, None, :] for t in terms)


def granger_window(terms: Sequence[LossTerm], lags: int = -1) -> GrangerStats:
    """One window's share of :class:`GrangerStats`: ``H`` and Newey-West's Bartlett-weighted
    ``sum_{|l| <= L} (1 - |l| / (L + 1)) sum_t s_t s_{t-l}^T`` per row (``L``:
    :func:`hac_lags` of the window's rows when ``lags`` is -1; lags do not cross windows)."""
    live = [t for t in terms if t.weight]
    H = sum(t.weight * t.X.T @ t.X for t in live)
    S = scores(live)
    n = S.shape[0]
    L = hac_lags(n) if lags < 0 else min(int(lags), max(n - 1, 0))
    meat = np.einsum("tia,tib->iab", S, S)
    for lag in range(1, L + 1):
        G = np.einsum("tia,tib->iab", S[lag:], S[:-lag])
        meat += (1.0 - lag / (L + 1.0)) * (G + G.transpose(0, 2, 1))
    return GrangerStats(H, meat, n, L)


@dataclass
class GrangerTest:
    """Per-entry standard errors and two-sided p-values of ``A_hat`` and ``B_hat`` for
    H0: entry = 0, full-size: on the diagonal blocks, known and not learned (``A_hat`` is 0
    there), the standard error is 0 and the p-value 1."""

    se_A: np.ndarray
    pvalue_A: np.ndarray
    se_B: np.ndarray
    pvalue_B: np.ndarray


def off_diagonal_columns(P: Sequence[int], U: Sequence[int], m: int) -> np.ndarray:
    """Columns of ``[A_hat, B_hat]`` that row block m learns: other clients' states, then
    other clients' inputs (offset by ``sum P``)."""
    pa, ua = offsets(P), offsets(U)
    a = [j for j in range(pa[-1]) if not pa[m] <= j < pa[m + 1]]
    b = [pa[-1] + j for j in range(ua[-1]) if not ua[m] <= j < ua[m + 1]]
    return np.array(a + b, dtype=int)


def granger_test(stats: GrangerStats, A_hat: np.ndarray, B_hat: np.ndarray,
                 P: Sequence[int], U: Sequence[int],
                 masks: tuple[np.ndarray, np.ndarray] | None = None) -> GrangerTest:
    """Sandwich standard errors and Wald t-tests of every learned entry.

    ``V_i = H_J^{-1} Omega_i,J H_J^{-1}`` for row i of client m's blocks, ``J`` the columns
    it learns (:func:`off_diagonal_columns`), ``H``, ``Omega_i`` from :class:`GrangerStats`;
    ``se = sqrt(diag V_i)``, ``p = 2 P(T_df > |entry / se|)``, ``df = n - |J|``. This is the
    M-estimator covariance of the server loss's minimiser (Newey-West HAC for the serially
    correlated scores: filter errors, differencing); ``A_hat`` after k full-batch normalized
    steps from 0 is that minimiser shrunk by ``I - (I - lr H / L)^k`` (eigenvalues in
    [0, 1]), whose covariance is no larger, so the test is conservative before convergence.
    Known-zero entries (``masks``) are not learned: ``J`` leaves them out (the restricted
    fit's covariance) and their standard error and p-value are NaN (fixed by the user).
    """
    pa, n_a = offsets(P), sum(P)
    se = np.zeros((n_a, n_a + sum(U)))
    df = np.ones((n_a, 1))
    Z = None if masks is None else np.hstack(masks)
    for m in range(len(P)):
        J = off_diagonal_columns(P, U, m)
        if Z is not None and P[m]:
            J = J[~Z[pa[m], J]]
        if not J.size:
            continue
        Hinv = np.linalg.pinv(stats.hessian[np.ix_(J, J)])
        df[pa[m]:pa[m + 1]] = max(stats.n - J.size, 1)
        for i in range(pa[m], pa[m + 1]):
            V = Hinv @ stats.meat[i][np.ix_(J, J)] @ Hinv
            se[i, J] = np.sqrt(np.clip(np.diag(V), 0.0, None))
    est = np.hstack([A_hat, B_hat])
    with np.errstate(divide="ignore", invalid="ignore"):
        p = 2.0 * student_t.sf(np.abs(est / se), df)
    p[~(se > 0)] = 1.0  # nothing learned there: A_hat (B_hat) is 0
    if Z is not None:
        se[Z], p[Z] = np.nan, np.nan
    return GrangerTest(se[:, :n_a], p[:, :n_a], se[:, n_a:], p[:, n_a:])


def last_epoch(k: int, total: int, T: int, W: int) -> bool:
    """Whether exchange k (1-based) of ``total`` recorded windows is among the last
    ``ceil((T - 1) / W)``: one pass over t = 1..T-1, whose windows the test uses."""
    return k > total - len(range(1, T, W))


# ---- protocol steps --------------------------------------------------------------------------
def fedgc_server_update(A_diag: Sequence[np.ndarray], spar: ServerParams,
                        msgs: Sequence[Sequence[np.ndarray]], *, target: str, difference: bool,
                        lr_server: float, lambda_g: float, noise_ridge: float = 0.0
                        ) -> tuple[ServerWindow, ServerParams]:
    """FedGC's server on one window: :func:`fedgc_server_window`, then the ``A_hat`` step
    (eq 3) with the penalty's curvature alone (FedGC has no ``xi``); ``noise_ridge``:
    :func:`dp_noise_ridge`."""
    win = fedgc_server_window(A_diag, spar.A_hat, msgs, target, difference)
    return win, server_step(spar, win, msgs, lr_server=lr_server, lambda_g=lambda_g, xi=0.0,
                            difference=difference, hc_index=1, noise_ridge=noise_ridge)


def fedcf_server_update(A_diag: Sequence[np.ndarray], B_diag: Sequence[np.ndarray],
                        spar: ServerParams, msgs: Sequence[Sequence[np.ndarray]], *, xi: float,
                        difference: bool, lr_server: float, lambda_g: float
                        ) -> tuple[ServerWindow, ServerParams]:
    """FedCF's server on one window: :func:`server_window`, then the ``A_hat, B_hat`` steps
    (eqs 14-15)."""
    win = server_window(A_diag, B_diag, spar, msgs, xi, difference)
    return win, server_step(spar, win, msgs, lr_server=lr_server, lambda_g=lambda_g, xi=xi,
                            difference=difference)


def fedgc_states(c: ClientData, par: ClientParams, ts: np.ndarray,
                 target: str = "predicted") -> list[np.ndarray]:
    """What FedGC's server model needs of client m: ``[hhat_a^{t-1}, hhat_c^{t-1}]`` (eq 15,
    ``target="predicted"``; the middle two of :func:`client_states`) or
    ``[C_mm^+ y^t, hhat_c^{t-1}]`` (``"innovation"``, see :func:`fedgc_server_window`).
    Either way two ``W x P`` state arrays (``C_mm`` and ``y`` stay with the client)."""
    if target == "innovation":
        return [c.y[ts] @ np.linalg.pinv(c.C).T, c.hc[ts - 1]]
    return [c.hc[ts - 1] + c.y[ts - 1] @ par.theta.T, c.hc[ts - 1]]


# ---- differential privacy (the mechanism and its accounting: fedcausal_flwr.privacy) ---------
def dp_sent_arrays(s: StateSpaceSettings) -> int:
    """State arrays a client sends per window: FedGC 2, FedCF 4 (:func:`client_states`)."""
    return 4 if isinstance(s, FedCFSettings) else 2


def dp_fresh(s: StateSpaceSettings) -> bool:
    """Whether a client's upload changes with its parameters. FedGC's innovation target
    sends ``[C^+ y^t, hhat_c^{t-1}]`` (:func:`fedgc_states`), fixed by the data: a window's
    release is then drawn once and repeated in every epoch (a repeat is post-processing,
    free); otherwise every window is a fresh release."""
    return isinstance(s, FedCFSettings) or s.target != "innovation"


def dp_release_key(s: StateSpaceSettings, k: int, T: int) -> int:
    """The release (noise draw) of exchange k: k itself, or the window's place in its epoch
    when the upload is fixed (:func:`dp_fresh`)."""
    per_epoch = len(range(1, T, s.window))
    return k if dp_fresh(s) else (k - 1) % per_epoch + 1


def dp_releases(s: StateSpaceSettings, T: int, rounds: int) -> int:
    """Gaussian releases per client in ``rounds`` windows: arrays x distinct releases."""
    per_epoch = len(range(1, T, s.window))
    return dp_sent_arrays(s) * (rounds if dp_fresh(s) else min(rounds, per_epoch))


def dp_noise_multiplier(s: StateSpaceSettings, T: int, rounds: int) -> float:
    """``z`` whose composition over :func:`dp_releases` is (``dp_epsilon``, ``dp_delta``)
    (:func:`~fedcausal_flwr.privacy.noise_multiplier_for`; ``inf``: clipped, no noise;
    NaN: DP off)."""
    from fedcausal_flwr.privacy import noise_multiplier_for

    if not s.dp:
        return math.nan

    return noise_multiplier_for(s.dp_epsilon, s.dp_delta, dp_releases(s, T, rounds))


def dp_noise_ridge(s: StateSpaceSettings, noise_multiplier: float) -> float:
    """The server's ridge correction for noisy regressors (errors in variables; Fuller 1987,
    Measurement Error Models, sec. 1.2): each sent entry carries independent noise of
    variance ``sigma^2 = (2 z clip)^2``, which adds ``sigma^2 I`` (``2 sigma^2 I`` after
    time differencing) to the regressors' second moment and shrinks ``A_hat`` towards 0; a
    ridge weight of minus that removes it in expectation. FedGC only (0 otherwise)."""
    if (not s.dp or not s.dp_debias or math.isinf(noise_multiplier)
            or isinstance(s, FedCFSettings)):
        return 0.0
    sigma = 2.0 * noise_multiplier * s.dp_clip_msg
    return -(2.0 if s.difference else 1.0) * sigma ** 2


def dp_report(s: StateSpaceSettings, T: int, rounds: int, noise_multiplier: float
              ) -> dict[str, Any]:
    """The run's DP account per client: releases made in ``rounds`` windows, their total
    (epsilon, delta) by the RDP accountant, the budget and the mechanism."""
    from fedcausal_flwr.privacy import ACCOUNTANT, rdp_epsilon

    n = dp_releases(s, T, rounds)
    z = noise_multiplier
    return {"epsilon": rdp_epsilon(z, n, s.dp_delta), "delta": s.dp_delta,
            "budget_epsilon": s.dp_epsilon, "releases_per_client": n,
            "noise_multiplier": z if math.isfinite(z) else None,
            "sigma": 2.0 * z * s.dp_clip_msg if math.isfinite(z) else 0.0,
            "clip": s.dp_clip_msg, "fresh_per_window": dp_fresh(s),
            "noise_ridge": dp_noise_ridge(s, z), "accountant": ACCOUNTANT,
            "unit": "one time step's row of a sent state array (replace-one, sensitivity "
                    "2 clip); the server's gradients are post-processing"}


def private(arrays: Sequence[np.ndarray], m: int, key: int, *, noise_multiplier: float,
            clip: float, seed: int) -> list[np.ndarray]:
    """Client m's release ``key`` of ``arrays``: rows clipped to ``clip``, Gaussian noise of
    multiplier ``noise_multiplier`` (:class:`~fedcausal_flwr.privacy.GaussianRelease`; NaN:
    DP off, unchanged). Array j draws its noise from ``release_rng(seed, 1, m, key, j)``."""
    if math.isnan(noise_multiplier):
        return list(arrays)
    from fedcausal_flwr.privacy import GaussianRelease, release_rng

    rel = GaussianRelease(noise_multiplier, clip)
    return [rel(a, release_rng(seed, 1, m, key, j)) for j, a in enumerate(arrays)]


def history_row(k: int, win: ServerWindow, local: Sequence[float]) -> dict[str, float]:
    """Per-exchange numbers: L_s, its parts and the clients' local losses."""
    row = {"round": k, "L_s": win.L_s, "penalty": win.penalty, "residual": win.residual}
    row.update({f"L_a_{m}": float(v) for m, v in enumerate(local)})
    return row


# ---- evaluation ------------------------------------------------------------------------------
def full_estimate(A_diag: Sequence[np.ndarray], A_hat: np.ndarray) -> np.ndarray:
    """Known diagonal blocks plus learned off-diagonal blocks."""
    return A_hat + slin.block_diag(*A_diag)


def block_error(est: np.ndarray, truth: np.ndarray, rows: Sequence[int], cols: Sequence[int],
                m: int, n: int) -> float:
    """``||est_mn - truth_mn||_F``."""
    r, c = offsets(rows), offsets(cols)
    sl = (slice(r[m], r[m + 1]), slice(c[n], c[n + 1]))
    return float(np.linalg.norm(est[sl] - truth[sl]))


def counterfactual(C_mm: np.ndarray, B_hat_mn: np.ndarray, delta_u: np.ndarray) -> np.ndarray:
    """Change of ``E[y_m]`` when client n's input changes by ``delta_u``: ``C_mm B_mn du``."""
    return C_mm @ (B_hat_mn @ delta_u)


def counterfactual_error(C_mm: np.ndarray, B_hat_mn: np.ndarray, B_mn: np.ndarray) -> float:
    """``||C_mm (B_hat_mn - B_mn)||_F / ||C_mm B_mn||_F`` (FedCF's counterfactual error)."""
    return float(np.linalg.norm(C_mm @ (B_hat_mn - B_mn)) / np.linalg.norm(C_mm @ B_mn))


def prediction_loss(c: ClientData, states: np.ndarray, ts: np.ndarray) -> float:
    """Mean ``||y^t - C A states^{t-1}||^2`` of a posterior state sequence (plain, aug, oracle)."""
    r = c.y[ts] - states[ts - 1] @ (c.C @ c.A).T
    return float(np.mean(np.sum(r * r, axis=1)))


def augmented_states(c: ClientData, par: ClientParams) -> np.ndarray:
    """``hhat_a^t = hhat_c^t + theta y^t`` for all t."""
    return c.hc + c.y @ par.theta.T


def iterate_windows(T: int, W: int, epochs: int) -> Iterator[tuple[int, np.ndarray]]:
    """``(exchange number, ts)`` pairs of a run."""
    yield from enumerate(windows(T, W, epochs), start=1)
