"""VFedCD's in-process reference loop: the oracle of the secure dispatch and the Flower path.

Every step is the protocol's (:mod:`fedcausal_flwr.vertical.dispatch`): CTV shares of the
spectral gradient, fixed-point features and encoder gradients, decoder steps, then
``w - lr (grad + lambda1 sign w)`` on every fragment, vectorized over the stacked fragments,
so the shared protocol equals :func:`train_reference` exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from fedcausal_flwr.knowledge import Masks
from fedcausal_flwr.vertical import model as core
from fedcausal_flwr.vertical.decoder import init_decoder, train_decoder
from fedcausal_flwr.vertical.model import Fragments, VFedCDSettings


@dataclass
class State:
    """Everything a run learns: fragments, decoders, lambda2 and the CTV's vectors."""

    F: Fragments
    decoders: list[list[np.ndarray]]
    lam2: float = 0.0
    frozen: bool = False
    u: np.ndarray | None = None
    v: np.ndarray | None = None
    step: int = 0
    history: list[dict] = field(default_factory=list)
    memory: dict = field(default_factory=dict)
    """Optimizer memory: ``"F"`` (stacked fragments) and ``"dec"`` (per target, per param)."""
    past: list = field(default_factory=list)
    """The stacked fragments before each of the last ``delay`` steps, oldest first
    (:func:`train_reference` with ``delay``), so a resumed run equals one run."""


def initial_state(sizes: Sequence[int], s: VFedCDSettings, prior: Masks | None = None
                  ) -> State:
    """Seeded fragments (forbidden rows at 0 with ``prior``) and decoders; u = v = 1/sqrt(d)."""
    F = core.init_fragments(sizes, s.hidden, s.secure, s.seed, prior)
    dec = [init_decoder(t, d_t, s.hidden, s.dec_layers, s.loss, s.seed)
           for t, d_t in enumerate(sizes)]
    d = sum(sizes)
    return State(F, dec, u=np.ones(d) / np.sqrt(d), v=np.ones(d) / np.sqrt(d))


def step_grads(state: State, Fs: np.ndarray, x: np.ndarray, xq: np.ndarray,
               sizes: Sequence[int], s: VFedCDSettings, prior: Masks | None = None,
               Fs_data: np.ndarray | None = None) -> tuple[np.ndarray, list[float], float]:
    """One step's gradient of every stacked fragment (data + CTV), target losses and rho.

    ``x``, ``xq``: the mini-batch of all parties' columns, plain (the decoders' targets, NaN
    where missing) and quantized (the encoders' inputs, :func:`~fedcausal_flwr.vertical.model.
    inputs`). Updates the decoders in place (they are local to their target party).
    ``Fs_data``: the fragments the features are computed from (default ``Fs``; a pipelined
    schedule's older fragments, :func:`train_reference` ``delay``); the CTV's gradient is
    always on ``Fs``.
    """
    K, st, h, n, two_f = len(sizes), core.starts_of(sizes), s.hidden, len(x), 2.0 ** (2 * s.frac)
    d = st[-1]
    B = core.validated(core.stacked_graph(Fs, s.dp_b, s.seed, state.step), prior)
    G, rho, state.u, state.v = core.ctv_gradient(B, state.lam2, state.u, state.v, s.power_iters,
                                                 s.lambda_b, prior)
    shares = core.split_gradient(G, K, core.rng_for(s.seed, "split", state.step), s.split,
                                 s.secure)
    Fd = Fs if Fs_data is None else Fs_data
    Zq = core.exact_matmul(xq, np.rint(Fd * 2.0 ** s.frac).sum(0).reshape(d, d * h))
    D = np.zeros_like(Fs)
    losses = []
    for t in range(K):
        T = slice(st[t], st[t + 1])
        Z = (Zq[:, st[t] * h:st[t + 1] * h] / two_f).reshape(n, -1, h)
        state.decoders[t], dZ, loss = train_decoder(
            state.decoders[t], Z, x[:, T],
            state.memory.setdefault("dec", {}).setdefault(t, []), **s.optimizer_args())
        losses.append(loss)
        g = core.exact_matmul(xq.T, np.rint(dZ * 2.0 ** s.frac).reshape(n, -1)).reshape(d, -1, h)
        for k in range(K):
            S = slice(st[k], st[k + 1])
            if s.secure and k != t:
                phi = core.phi_mask(s.seed, s.sigma_phi, s.frac, state.step, k, t,
                                    g[S].shape).astype(float)
                D[k, S, T], D[t, S, T] = phi / two_f, (g[S] - phi) / two_f
            else:
                D[t if s.secure else k, S, T] = g[S] / two_f
    return D + core.norm_backward(Fs, np.stack(shares)), losses, rho


def train_reference(xs: Sequence[np.ndarray], s: VFedCDSettings, epochs: int | None = None,
                    state: State | None = None, replica: int = 0,
                    prior: Masks | None = None, delay: int = 0) -> State:
    """The in-process reference loop: ``epochs`` epochs of mini-batch steps, lambda2 schedule.

    ``xs[k]`` is party k's training block (same rows, aligned). History rows per epoch.
    ``replica``: which replica of a run with ``s.replicas`` to train (0: the run itself; r >= 1
    its rows :func:`~fedcausal_flwr.vertical.model.replica_rows` and settings
    :func:`~fedcausal_flwr.vertical.model.replica_settings`), as the shared protocol does.
    ``prior``: knowledge masks in block order (the parties' columns one after the other),
    enforced as the parties and the CTV do. Missing cells are NaN in ``xs``.
    ``delay``: step j's features and data gradients come from the fragments before step
    ``j - delay`` (bounded staleness of a pipelined schedule, delayed-gradient SGD; 0: the
    protocol as it runs); the CTV's gradient and every update use the current fragments.
    """
    sizes = [x.shape[1] for x in xs]
    n = len(xs[0])
    run, s = s, core.replica_settings(s, replica)
    state = state or initial_state(sizes, s, prior)
    Fs = core.stacked(state.F, sizes, s.hidden)
    keep = (1.0 - np.eye(Fs.shape[1]))[:, :, None]  # self-loops stay 0
    lambda1 = s.lambda1
    if prior is not None:  # forbidden rows stay 0; no L1 on required ones
        keep = keep * core.kept(prior)[:, :, None]
        lambda1 = s.lambda1 * core.penalised(prior)[:, :, None]
    X = np.hstack(xs)[core.replica_rows(n, run, replica)]
    Xq = np.rint(core.inputs(X) * 2.0 ** s.frac)  # quantize(), as integer-valued floats
    schedule = {"ctv": s.ctv, "unfreeze": s.unfreeze, "tau": s.tau, "dag_tol": s.dag_tol,
                "gamma": s.gamma, "prior": prior}
    past = state.past if len(state.past) == delay else [Fs] * delay
    for _ in range(s.epochs if epochs is None else epochs):
        rec = {"loss": 0.0, "rho": 0.0}
        for idx in core.replica_batches(n, run, replica, len(state.history)):
            grads, losses, rho = step_grads(state, Fs, X[idx], Xq[idx], sizes, s, prior,
                                            past[0] if delay else None)
            past = past[1:] + [Fs] if delay else past
            Fs = core.descent(Fs, grads, state.memory.setdefault("F", {}), lambda1=lambda1,
                              **s.optimizer_args()) * keep
            state.step += 1
            rec = {"loss": rec["loss"] + float(sum(losses)) * len(idx) / len(X), "rho": rho}
        B = core.validated(core.stacked_graph(Fs, s.dp_b, s.seed, state.step), prior)
        state.lam2, state.frozen = core.next_lambda2(state.lam2, state.frozen, B, **schedule)
        state.history.append({"epoch": len(state.history) + 1, **rec, "lambda2": state.lam2,
                              "frozen": state.frozen,
                              "acyclic": core.is_dag(core.support(B, s.dag_tol, prior))})
    state.F, state.past = core.unstacked(Fs, sizes, s.secure), past
    return state


def train_replicas(xs: Sequence[np.ndarray], s: VFedCDSettings, epochs: int | None = None,
                   prior: Masks | None = None) -> list[State]:
    """:func:`train_reference` of replica 0 (the run) and each of its ``s.replicas``."""
    return [train_reference(xs, s, epochs, replica=r, prior=prior)
            for r in range(s.replicas + 1)]
