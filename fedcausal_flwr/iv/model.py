"""Deep GMM for instrumental-variable regression, centralized and federated (FedGDA).

Notation follows Geetika, Tyagi, Chatterjee (2025). Client i holds ``(x, y, z)``; the model
``g(x; theta)`` and the test function ``f(z; tau)`` are networks. The client's moment game
(eq. 14, with theta~ = the current theta held constant) is

    U_i(theta, tau) = mean f(z)(y - g(x)) - 1/4 mean f(z)^2 (y - g~(x))^2,

minimised in theta and maximised in tau by simultaneous gradient descent-ascent. FedGDA
(Algorithm 1) runs R local epochs on every client from the global ``(theta_t, tau_t)`` and
averages the deltas of both players (uniformly, or n_i-weighted, eq. 20). Model selection
without pooling scores theta by psi' C^-1 psi over random Fourier features of z (Lemma 1),
from the clients' validation sums only.

:class:`FedIVSettings` (:mod:`fedcausal_flwr.iv.settings`, no torch) holds every setting.
Parameters travel as lists of float64 numpy arrays in ``named_parameters`` order. The
tensors and networks are in :mod:`fedcausal_flwr.iv.networks`, the players' optimizers in
:mod:`fedcausal_flwr.iv.optim`, the validation criterion in :mod:`fedcausal_flwr.iv.validation`
(this module re-exports their names).
Everything here is pure torch/numpy: no I/O, no logging, no Flower.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fedcausal_flwr.extras import missing_extra
from fedcausal_flwr.iv.networks import (  # noqa: F401 - re-exported: iv.model's names
    DTYPE,
    Batch,
    LeakySoftmax,
    Params,
    batch,
    cnn,
    device_of,
    get_params,
    mlp,
    network,
    networks,
    predict,
    set_params,
    shapes,
)
from fedcausal_flwr.iv.optim import OptState, _direction, clip
from fedcausal_flwr.iv.settings import FedIVSettings
from fedcausal_flwr.iv.validation import (  # noqa: F401 - re-exported: iv.model's names
    criterion,
    features,
    pooled_criterion,
    rff,
    validation_sums,
)

try:
    import torch
    from torch import nn
except ModuleNotFoundError as e:
    raise missing_extra(e, "FedIV", "fediv", "torch") from e


# ---- the moment game -----------------------------------------------------------------------
def game(fz: torch.Tensor, r: torch.Tensor, dim: tuple[int, ...] | None = None
         ) -> torch.Tensor:
    """Eq. 14 from f(z) and the residuals r = y - g(x): mean f r - 1/4 mean f^2 r~^2, with
    r~ = r detached (theta~ held constant); ``dim``: the axes of the mean (default all; a
    stack of replicas ``(R, n, 1)`` takes ``(1, 2)``, one value per replica)."""
    if dim is None:
        return (fz * r).mean() - 0.25 * (fz ** 2 * r.detach() ** 2).mean()
    return (fz * r).mean(dim) - 0.25 * (fz ** 2 * r.detach() ** 2).mean(dim)


def game_value(g: nn.Module, f: nn.Module, b: Batch) -> torch.Tensor:
    """U(theta, tau) on batch ``b`` (eq. 14, theta~ = current theta, detached)."""
    r = b.y - predict(g, b.x)
    fz = predict(f, b.z)
    return game(fz, r)


def moment(g: nn.Module, f: nn.Module, b: Batch) -> float:
    """psi(f; theta) = mean f(z)(y - g(x)) on ``b``."""
    with torch.no_grad():
        return float((predict(f, b.z) * (b.y - predict(g, b.x))).mean())


def gda_step(g: nn.Module, f: nn.Module, b: Batch, st: OptState, *, lr_g: float, lr_f: float,
             grad_clip: float, optimizer: str, momentum: float, betas: tuple[float, float]
             ) -> float:
    """One simultaneous descent (theta) / ascent (tau) step on ``b``; returns U before it."""
    th, ta = list(g.parameters()), list(f.parameters())
    u = game_value(g, f, b)
    grads = torch.autograd.grad(u, th + ta)
    st.step += 1
    opt = (optimizer, momentum, betas)
    d_th = _direction(list(grads[:len(th)]), lr_g, "g", st, *opt)
    d_ta = _direction(clip(list(grads[len(th):]), grad_clip), lr_f, "f", st, *opt)
    with torch.no_grad():
        for p, d in zip(th, d_th, strict=True):
            p.sub_(d)
        for p, d in zip(ta, d_ta, strict=True):
            p.add_(d)
    return float(u.detach())


def minibatches(n: int, seed: Sequence[int], mode: str, batch_size: int) -> list[np.ndarray]:
    """Row indices of one epoch: everything (GDA) or shuffled minibatches (SGDA)."""
    if mode == "gda":
        return [np.arange(n)]
    perm = np.random.default_rng(list(seed)).permutation(n)
    return [perm[i:i + batch_size] for i in range(0, n, batch_size)]


def train_epochs(g: nn.Module, f: nn.Module, b: Batch, st: OptState, epochs: int,
                 seed: Sequence[int], *, mode: str, batch_size: int, **step: Any) -> float:
    """``epochs`` passes of :func:`gda_step` (``step``: its numbers); returns the mean U of the
    last pass."""
    if mode == "sgda" and b.n < batch_size:
        raise ValueError(f"{b.n} samples, fewer than one minibatch of {batch_size}")
    values: list[float] = []
    for e in range(epochs):
        values = [gda_step(g, f, b.rows(torch.as_tensor(idx, device=b.y.device)), st, **step)
                  for idx in minibatches(b.n, [*seed, e], mode, batch_size)]
    return float(np.mean(values)) if values else float("nan")


def local_update(g: nn.Module, f: nn.Module, b: Batch, theta: Params, tau: Params,
                 seed: Sequence[int], *, local_epochs: int, **game: Any
                 ) -> tuple[Params, Params, float]:
    """Client step of FedGDA: R = ``local_epochs`` local epochs from ``(theta, tau)``;
    ``(dtheta, dtau, U)``. ``game``: the numbers of :func:`train_epochs`
    (:meth:`FedIVSettings.local_args` gives them all).

    ``seed`` (e.g. ``[run seed, round, client id]``) fixes the minibatch order.
    """
    set_params(g, theta)
    set_params(f, tau)
    u = train_epochs(g, f, b, OptState(), local_epochs, seed, **game)
    dth = [a - b0 for a, b0 in zip(get_params(g), theta, strict=True)]
    dta = [a - b0 for a, b0 in zip(get_params(f), tau, strict=True)]
    return dth, dta, u


def client_weights(n: Mapping[int, int], weighting: str) -> dict[int, float]:
    """Averaging weights by client id: 1/N (eq. 20) or n_i / sum n (``weighting="n"``)."""
    if weighting == "n":
        total = sum(n.values())
        return {c: n[c] / total for c in n}
    return {c: 1.0 / len(n) for c in n}


#: A robust centre of per-client arrays, in place of their weighted mean (e.g.
#: ``federation.robust.robust_mean`` with the settings' rule: see ``CausalStrategy.combine``).
Combine = Callable[[list[np.ndarray]], np.ndarray]


def server_update(params: Params, deltas: Mapping[int, Params], weights: Mapping[int, float],
                  combine: Combine | None = None) -> Params:
    """``params + sum_i w_i delta_i`` over the clients that answered (weights renormalised).

    ``combine``: ``params + combine([delta_i])`` per parameter array instead (a robust centre
    of the clients' deltas, coordinate-wise; it weighs every client alike, so ``weights``
    are not used); None: the weighted mean."""
    if combine is not None:
        return [p + combine([d[j] for _, d in sorted(deltas.items())])
                for j, p in enumerate(params)]
    total = sum(weights[c] for c in deltas)
    return [p + sum(weights[c] / total * d[j] for c, d in sorted(deltas.items()))
            for j, p in enumerate(params)]


# ---- reference loops -----------------------------------------------------------------------
@dataclass
class FedState:
    """Server state of FedGDA: global players, the best round by validation, the history.

    ``peak``: the largest |parameter| of the global players so far (the initial ones and
    every finished round; :func:`divergence`). ``stopped``: why the run ended early (empty
    while it goes on or when it completed); ``diverged_round``: the round whose update
    diverged (0: none).
    """

    theta: Params
    tau: Params
    round: int = 0
    best_round: int = 0
    best_score: float = math.inf
    best_theta: Params = field(default_factory=list)
    history: list[dict] = field(default_factory=list)
    peak: float = 0.0
    stopped: str = ""
    diverged_round: int = 0

    def __post_init__(self) -> None:
        self.peak = max(self.peak, peak(self.theta + self.tau))


def peak(params: Sequence[np.ndarray]) -> float:
    """Largest |x| over ``params`` (inf when any value is NaN or inf)."""
    out = 0.0
    for a in params:
        a = np.asarray(a)
        if a.size and not np.isfinite(a).all():
            return math.inf
        out = max(out, float(np.max(np.abs(a), initial=0.0)))
    return out


def divergence(theta: Params, tau: Params, state: FedState, factor: float) -> str | None:
    """Why the global players after a round count as diverged, or None (the detection rule).

    - **non-finite**: any parameter of g or f is NaN or inf;
    - **exploding**: the largest |parameter| of g and f exceeds ``factor`` times the largest
      one the run has had so far (``state.peak``: the initial players and every finished
      round), floored at 1 (so networks of small weights never trip it).

    The rule is relative to the run's own history: a round multiplying the largest weight by
    ``factor`` (``diverge_factor``) is the first round of a blow-up, not learning.
    ``factor = 0`` keeps only the non-finite rule.
    """
    p = peak(list(theta) + list(tau))
    if not math.isfinite(p):
        bad = [name for name, ps in (("g", theta), ("f", tau))
               if not all(np.isfinite(a).all() for a in ps)]
        return f"non-finite global parameters ({' and '.join(bad)})"
    bound = factor * max(1.0, state.peak)
    if factor > 0 and p > bound:
        return (f"exploding global parameters (max |parameter| {p:.3g} > {factor:g} x "
                f"the run's largest so far, {max(1.0, state.peak):.3g})")
    return None


def select(state: FedState, score: float, theta: Params, rnd: int) -> None:
    """Keep ``theta`` (the global after round ``rnd``) when its score is the best yet."""
    if np.isfinite(score) and score < state.best_score:
        state.best_round, state.best_score = rnd, score
        state.best_theta = [a.copy() for a in theta]


def fedgda_reference(clients: Sequence[Batch], s: FedIVSettings, seed: int,
                     val: Sequence[tuple[Batch, np.ndarray]] | None = None,
                     device: str = "cpu",
                     evaluate: Callable[[Params], dict] | None = None,
                     ids: Sequence[int] | None = None,
                     init: tuple[Params, Params | None] | None = None,
                     combine: Combine | None = None) -> FedState:
    """FedGDA (Algorithm 1) in process, in the Flower path's order (oracle of the tests).

    Round t: each client c (``ids``, default positions) validates the incoming global theta_t
    on its validation batch (if ``val``) and runs :func:`local_update` with seed
    ``[seed, t, c]``; the server averages both players' deltas. After the last round the final
    global is validated. ``init = (theta, tau)`` starts from those parameters instead of the
    seed's networks (``tau`` None: f from the seed). ``combine``: the server's robust centre
    of the deltas (:func:`server_update`) and of the validation means
    (:func:`pooled_criterion`); None: the means.

    As the Flower path: a client whose local game gives a non-finite loss or delta is left
    out of the round (fewer than ``min_nodes`` left: the run stops), and a round whose
    averaged players :func:`divergence` rejects ends the run; then ``state.stopped`` says
    why, ``state.theta``/``tau`` stay the last accepted global (round ``state.round``) and
    the selected round is kept.
    """
    xs, zs = tuple(clients[0].x.shape[1:]), tuple(clients[0].z.shape[1:])
    g, f = networks(xs, zs, seed, device)
    st = FedState(get_params(g), get_params(f))
    if init is not None:
        st.theta = get_params(set_params(g, init[0]))
        if init[1] is not None:
            st.tau = get_params(set_params(f, init[1]))
    ids = list(range(len(clients)) if ids is None else ids)
    w = client_weights({c: b.n for c, b in zip(ids, clients, strict=True)}, s.weighting)
    need = min(s.min_nodes, len(clients))
    st.peak = peak(st.theta + st.tau)
    for t in range(1, s.rounds + 1):
        dth, dta, us, sums = {}, {}, {}, []
        for i, (c, b) in enumerate(zip(ids, clients, strict=True)):
            if val is not None:
                set_params(g, st.theta)
                sums.append(validation_sums(g, *val[i]) + (val[i][0].n,))
            with np.errstate(all="ignore"):
                dth[c], dta[c], us[c] = local_update(g, f, b, st.theta, st.tau, [seed, t, c],
                                                     **s.local_args())
            if not np.isfinite(us[c]) or not math.isfinite(peak(dth[c] + dta[c])):
                del dth[c], dta[c], us[c]  # the client's local game diverged: dropped
        if sums:
            select(st, pooled_criterion(sums, combine), st.theta, t - 1)
        if len(us) < need:
            st.stopped = (f"round {t}: the local games diverged (non-finite loss); keeping "
                          f"round {st.best_round}")
            st.diverged_round = t
            break
        theta = server_update(st.theta, dth, w, combine)
        tau = server_update(st.tau, dta, w, combine)
        why = divergence(theta, tau, st, s.diverge_factor)
        if why is not None:
            st.stopped = f"round {t}: diverged, {why}; keeping round {st.best_round}"
            st.diverged_round = t
            break
        st.theta, st.tau, st.round = theta, tau, t
        st.peak = max(st.peak, peak(theta + tau))
        st.history.append({"round": t, "loss": float(np.mean(list(us.values()))),
                           "peak": st.peak, "n_clients": len(us),
                           **(evaluate(st.theta) if evaluate else {})})
    if val is not None and not st.stopped:
        set_params(g, st.theta)
        select(st, pooled_criterion([validation_sums(g, *v) + (v[0].n,) for v in val],
                                    combine), st.theta, s.rounds)
    return st


def centralized_deepgmm(b: Batch, s: FedIVSettings, seed: int, epochs: int, device: str = "cpu",
                        val: tuple[Batch, np.ndarray] | None = None, eval_every: int = 1
                        ) -> tuple[nn.Module, nn.Module, Params, int]:
    """DeepGMM on pooled data: ``epochs`` epochs, one optimizer kept throughout.

    Returns ``(g, f, best theta, best epoch)``, best by the validation criterion (the last
    epoch when ``val`` is None). Epoch e uses minibatch seed ``[seed, e, 0]`` so that one
    client with R = 1 reproduces it round by round.
    """
    g, f = networks(tuple(b.x.shape[1:]), tuple(b.z.shape[1:]), seed, device)
    st = OptState()
    best = (math.inf, get_params(g), 0)
    for e in range(1, epochs + 1):
        train_epochs(g, f, b, st, 1, [seed, e, 0], **s.game_args())
        if val is not None and (e % eval_every == 0 or e == epochs):
            score = criterion(*validation_sums(g, *val), val[0].n)
            if np.isfinite(score) and score < best[0]:
                best = (score, get_params(g), e)
    if val is None:
        best = (0.0, get_params(g), epochs)
    return g, f, best[1], best[2]


def g_values(g: nn.Module, theta: Params, x: np.ndarray, device: str = "cpu",
             chunk: int = 4096) -> np.ndarray:
    """g(x; theta) as a flat numpy array."""
    set_params(g, theta)
    xt = torch.as_tensor(np.asarray(x, dtype=np.float64), device=device)
    with torch.no_grad():
        return np.concatenate([predict(g, xt[i:i + chunk]).cpu().numpy().ravel()
                               for i in range(0, len(xt), chunk)])


def mse(pred: np.ndarray, truth: np.ndarray) -> float:
    """Mean squared error."""
    return float(np.mean((np.asarray(pred).ravel() - np.asarray(truth).ravel()) ** 2))


# ---- bootstrap replicas (intervals) --------------------------------------------------------
#: the tag of a replica's bootstrap draw, apart from the data's and the validation features'
BOOT_TAG = 0xB007


def bootstrap_rows(n: int, seed: int, replica: int, client: int) -> np.ndarray:
    """Row indices of replica ``replica``'s bootstrap resample of a client's ``n`` train rows:
    n draws with replacement from ``[seed, BOOT_TAG, replica, client]`` (the same every round,
    so a replica is one run on one resampled data set)."""
    rng = np.random.default_rng([int(seed), BOOT_TAG, int(replica), int(client)])
    return rng.integers(0, int(n), int(n))


def replica_rows(b: Batch, seed: int, replicas: int, client: int) -> Batch:
    """Replicas 1..``replicas`` of a client's batch, stacked: x ``(R, n, ...)``, y ``(R, n, 1)``."""
    idx = np.stack([bootstrap_rows(b.n, seed, r, client) for r in range(1, replicas + 1)])
    return b.rows(torch.as_tensor(idx, device=b.y.device))


def stacked(params: Sequence[Params]) -> Params:
    """R parameter lists as one list of arrays with a leading replica axis ``(R, *shape)``."""
    return [np.stack([p[j] for p in params]) for j in range(len(params[0]))]


def unstacked(params: Params) -> list[Params]:
    """The inverse of :func:`stacked`: one parameter list per replica."""
    return [[np.array(a[r]) for a in params] for r in range(len(params[0]))]


def clip_each(grads: list[torch.Tensor], max_norm: float) -> list[torch.Tensor]:
    """:func:`clip` of every replica's gradient on its own (leading axis = replica)."""
    if max_norm <= 0:
        return grads
    norm = torch.sqrt(sum((gi * gi).flatten(1).sum(1) for gi in grads))
    over = torch.isfinite(norm) & (norm > max_norm)
    scale = torch.where(over, max_norm / norm, torch.ones_like(norm))
    return [gi * scale.reshape(-1, *[1] * (gi.ndim - 1)) for gi in grads]


def _stacked_mlp(net: nn.Sequential, params: Sequence[torch.Tensor], x: torch.Tensor
                 ) -> torch.Tensor:
    """An :func:`mlp` applied replica by replica: ``x`` (R, n, d), ``params`` stacked
    (weights (R, out, in), biases (R, out)); ``(R, n, 1)``."""
    h, i = x, 0
    for layer in net:
        if isinstance(layer, nn.Linear):
            h = torch.baddbmm(params[i + 1].unsqueeze(1), h, params[i].transpose(1, 2))
            i += 2
        else:
            h = nn.functional.leaky_relu(h, layer.negative_slope)
    return h


def _is_mlp(net: nn.Module) -> bool:
    return isinstance(net, nn.Sequential) and all(
        isinstance(m, (nn.Linear, nn.LeakyReLU)) for m in net)


def _replica_grads(g: nn.Module, f: nn.Module) -> Callable[..., Any]:
    """``(theta, tau, x, y, z) -> ((grad theta, grad tau), U)`` of :func:`game`, vectorised
    over a leading replica axis of every argument: batched matrix products for the MLPs,
    ``torch.func.vmap`` for other networks (the CNN)."""
    from torch.func import functional_call, grad_and_value, vmap

    if _is_mlp(g) and _is_mlp(f):
        def stacked_grads(th: list[torch.Tensor], ta: list[torch.Tensor], x: torch.Tensor,
                          y: torch.Tensor, z: torch.Tensor) -> Any:
            th = [p.detach().requires_grad_() for p in th]
            ta = [p.detach().requires_grad_() for p in ta]
            x = x.reshape(*x.shape[:2], -1)
            u = game(_stacked_mlp(f, ta, z), y - _stacked_mlp(g, th, x), dim=(1, 2))
            grads = torch.autograd.grad(u.sum(), th + ta)  # replicas do not interact
            return (grads[:len(th)], grads[len(th):]), u.detach()

        return stacked_grads

    gn, fn = [n for n, _ in g.named_parameters()], [n for n, _ in f.named_parameters()]

    def value(th: list[torch.Tensor], ta: list[torch.Tensor], x: torch.Tensor,
              y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        gx = functional_call(g, dict(zip(gn, th, strict=True)), (x,)).reshape(-1, 1)
        fz = functional_call(f, dict(zip(fn, ta, strict=True)), (z,)).reshape(-1, 1)
        return game(fz, y - gx)

    return vmap(grad_and_value(value, argnums=(0, 1)))


def replicas_update(g: nn.Module, f: nn.Module, b: Batch, theta: Params, tau: Params,
                    seed: Sequence[int], *, local_epochs: int, mode: str, batch_size: int,
                    lr_g: float, lr_f: float, grad_clip: float, optimizer: str,
                    momentum: float, betas: tuple[float, float]
                    ) -> tuple[Params, Params, np.ndarray]:
    """:func:`local_update` of R replicas at once: ``b`` from :func:`replica_rows`, ``theta``
    and ``tau`` :func:`stacked`; ``(dtheta, dtau, U)`` stacked, U of shape ``(R,)``.

    Each replica takes :func:`gda_step`'s steps (the same minibatch order ``seed``, f's
    gradient clipped per replica), vectorised over replicas: the cost grows with R far less
    than R separate runs. A replica that goes non-finite does not touch the others.
    """
    dev = b.y.device
    th = [torch.as_tensor(a, dtype=DTYPE, device=dev) for a in theta]
    ta = [torch.as_tensor(a, dtype=DTYPE, device=dev) for a in tau]
    grads, st, n = _replica_grads(g, f), OptState(), int(b.y.shape[1])
    opt = (optimizer, momentum, betas)
    if mode == "sgda" and n < batch_size:
        raise ValueError(f"{n} samples, fewer than one minibatch of {batch_size}")
    values: list[torch.Tensor] = []
    for e in range(local_epochs):
        values = []
        for idx in minibatches(n, [*seed, e], mode, batch_size):
            i = torch.as_tensor(idx, device=dev)
            (g_th, g_ta), u = grads(th, ta, b.x[:, i], b.y[:, i], b.z[:, i])
            st.step += 1
            d_th = _direction(list(g_th), lr_g, "g", st, *opt)
            d_ta = _direction(clip_each(list(g_ta), grad_clip), lr_f, "f", st, *opt)
            th = [p - d for p, d in zip(th, d_th, strict=True)]
            ta = [p + d for p, d in zip(ta, d_ta, strict=True)]
            values.append(u.detach())
    u = torch.stack(values).mean(0).cpu().numpy() if values else np.full(len(theta[0]), np.nan)
    dth = [p.detach().cpu().numpy() - a for p, a in zip(th, theta, strict=True)]
    dta = [p.detach().cpu().numpy() - a for p, a in zip(ta, tau, strict=True)]
    return dth, dta, u


def replica_ok(dtheta: Params, dtau: Params, u: np.ndarray) -> np.ndarray:
    """1.0 for each replica whose local game stayed finite, else 0.0 (shape ``(R,)``)."""
    fine = np.isfinite(u)
    for a in list(dtheta) + list(dtau):
        fine &= np.isfinite(a.reshape(len(a), -1)).all(axis=1)
    return fine.astype(np.float64)


def replicas_round(reps: Sequence[FedState], deltas: Mapping[int, tuple[Params, Params,
                                                                         np.ndarray]],
                   weights: Mapping[int, float], factor: float, need: int, rnd: int,
                   combine: Combine | None = None) -> None:
    """The server step of every replica still running, as :func:`fedgda_reference`'s
    (``combine``: as in :func:`server_update`).

    ``deltas``: by client, ``(dtheta, dtau, ok)`` stacked over replicas. Replica r averages
    the clients whose game stayed finite for it (``ok[r]``); fewer than ``need`` of them, or
    averaged players that :func:`divergence` rejects, stop the replica (``stopped``), never
    the run: it keeps its last accepted round.
    """
    for r, st in enumerate(reps):
        if st.stopped:
            continue
        ok = {c: d for c, d in deltas.items() if d[2][r] > 0}
        if len(ok) < need:
            st.stopped, st.diverged_round = f"round {rnd}: the local games diverged", rnd
            continue
        theta = server_update(st.theta, {c: [a[r] for a in d[0]] for c, d in ok.items()},
                              weights, combine)
        tau = server_update(st.tau, {c: [a[r] for a in d[1]] for c, d in ok.items()}, weights,
                            combine)
        why = divergence(theta, tau, st, factor)
        if why is not None:
            st.stopped, st.diverged_round = f"round {rnd}: diverged, {why}", rnd
            continue
        st.theta, st.tau, st.round = theta, tau, rnd
        st.peak = max(st.peak, peak(theta + tau))


def select_replicas(reps: Sequence[FedState], main: FedState, rnd: int) -> None:
    """When the main run just selected round ``rnd``, every replica keeps its global of
    that round (a replica stopped before it keeps none): the replicas follow the main run's
    model selection."""
    if main.best_round != rnd or not main.best_theta:
        return
    for st in reps:
        st.best_round = rnd
        st.best_theta = [a.copy() for a in st.theta] if st.round == rnd else []


def bootstrap_interval(main: np.ndarray, reps: np.ndarray, level: float, method: str
                       ) -> tuple[np.ndarray, np.ndarray]:
    """``(lower, upper)`` of a two-sided bootstrap interval at ``level``, pointwise.

    ``main``: the estimate (m,); ``reps``: the replicas' estimates (R, m). ``"percentile"``:
    the replicas' a and 1 - a quantiles (a = (1 - level) / 2); ``"basic"``: those reflected
    about the estimate, 2 main - q(1 - a) .. 2 main - q(a); ``"normal"``: main -/+ z(1 - a)
    times the replicas' sample sd (Efron and Tibshirani 1993, ch. 13).
    """
    from statistics import NormalDist

    reps = np.asarray(reps, dtype=float)
    a = (1.0 - float(level)) / 2.0
    if method == "normal":
        half = NormalDist().inv_cdf(1.0 - a) * reps.std(axis=0, ddof=1)
        return main - half, main + half
    lo, hi = np.quantile(reps, [a, 1.0 - a], axis=0)
    if method == "basic":
        return 2 * main - hi, 2 * main - lo
    if method != "percentile":
        raise ValueError(f"interval method {method!r}: use percentile, basic or normal")
    return lo, hi


def g_interval(g: nn.Module, theta: Params, replicas: Sequence[Params], x: np.ndarray,
               level: float, method: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(g, lower, upper)`` at the rows of ``x``: g of ``theta`` and the
    :func:`bootstrap_interval` of the replicas' g (at least two replicas)."""
    if len(replicas) < 2:
        raise ValueError(f"an interval needs at least 2 bootstrap replicas, got {len(replicas)}")
    main = g_values(g, theta, x)
    reps = np.stack([g_values(g, p, x) for p in replicas])
    lo, hi = bootstrap_interval(main, reps, level, method)
    return main, lo, hi
