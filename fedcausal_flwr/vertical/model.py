"""VFedCD (vertical federated causal discovery): the model, graph and CTV equations.

K parties hold disjoint column blocks S_k of the same samples. The first layer of the
per-attribute MLPs is split vertically into linear encoders ``W_kt`` (d_k x d_t x h), source
party k to target party t, and every encoder is a sum of fragments ``W_kt = sum_i F[i][k][t]``,
fragment i held by party i (under the secure dispatch, Alg. 2; without it only ``F[k][k][t]``).

    Z_t = sum_k x^k W_kt                          (n x d_t x h, exact in fixed point; Alg. 3)
    xhat^t_j = Linear_j(sigma(... sigma(Z_t[:, j] + b_j)))  L = sum_t MSE (Eq. 1) or the
                                                  Gaussian NLL of SDCD
    B_t^i[S_k, :] = ||F[i][k][t]||_h              B = sum_i B^i    (graph of the encoders,
                                                  App. D.1)
    rho(B) (spectral radius), grad = u v^T / u^T v, lambda2 += gamma per epoch until DAG
                                                  (the CTV, Algs. 5-6)
    w <- w - lr (grad + lambda1 sign w + 2 l2 w)        (every fragment; decoders: L2 too)

Products ``x W`` and ``x^T dZ`` are computed in fixed point (``frac`` bits per factor), the
arithmetic the secret shares use, so the shared protocol (:mod:`fedcausal_flwr.vertical.dispatch`)
equals :func:`fedcausal_flwr.vertical.loop.train_reference` exactly. Fragments, decoders and
graphs are numpy float64; the decoders (backpropagated by hand) are in
:mod:`fedcausal_flwr.vertical.decoder`. Every setting and its default is in
:class:`VFedCDSettings`, a party's consent in :class:`PartyConsent` (both in
:mod:`fedcausal_flwr.vertical.settings`, re-exported here).
Pure numpy: no I/O, no data generation (:mod:`fedcausal_flwr.vertical.data`), no Flower.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from fedcausal_flwr.knowledge import Masks
from fedcausal_flwr.stability import complementary_halves, edge_stability
from fedcausal_flwr.vertical.settings import (  # noqa: F401 - re-exported: vertical.model's
    ADAM_BETAS,
    BACKENDS,
    MAX_REPLICAS,
    MIN_KEY_BITS,
    MODES,
    MOMENTUM,
    OPTIMIZERS,
    PAPER,
    SECURE_BACKENDS,
    SLOW,
    PartyConsent,
    VFedCDSettings,
)

Fragments = list[list[list[np.ndarray | None]]]  # F[holder][source][target]


# ---- fixed point ------------------------------------------------------------------------
def quantize(a: np.ndarray, frac: int) -> np.ndarray:
    """``round(a 2^frac)`` as int64."""
    return np.rint(np.asarray(a, dtype=float) * 2.0 ** frac).astype(np.int64)


def dequantize(q: np.ndarray, bits: int) -> np.ndarray:
    """Signed int64 (or uint64 ring element) over 2^bits as float."""
    return np.asarray(q).astype(np.uint64).view(np.int64).astype(float) / 2.0 ** bits


def features_q(xq: np.ndarray, Wq: np.ndarray) -> np.ndarray:
    """Integer ``x^k W`` (n x d_t x h) of quantized data and weights."""
    return np.einsum("na,ath->nth", xq, Wq)


def encoder_grad_q(xq: np.ndarray, gq: np.ndarray) -> np.ndarray:
    """Integer ``x^kT dZ`` (d_k x d_t x h) of quantized data and feature gradient."""
    return np.einsum("na,nth->ath", xq, gq)


# ---- model ------------------------------------------------------------------------------
def self_loop_mask(d_t: int, h: int) -> np.ndarray:
    """1 everywhere except ``[j, j, :]`` (the encoder of a party into itself)."""
    m = np.ones((d_t, d_t, h))
    m[np.arange(d_t), np.arange(d_t), :] = 0.0
    return m


def init_fragment(i: int, k: int, t: int, sizes: Sequence[int], h: int, secure: bool,
                  seed: int, prior: Masks | None = None) -> np.ndarray:
    """Fragment ``F[i][k][t]`` ~ U(+-1/(d sqrt(h)) / K), self-loops masked, seeded per (i,k,t).

    Without the secure dispatch party k holds the whole ``W_kt`` (bound not divided by K).
    With ``prior`` (block order, :func:`prior_masks`) its forbidden rows are 0 from the start.
    """
    bound = 1.0 / (sum(sizes) * np.sqrt(h)) / (len(sizes) if secure else 1)
    w = rng_for(seed, "init", i, k, t).uniform(-bound, bound, (sizes[k], sizes[t], h))
    w = w * self_loop_mask(sizes[t], h) if k == t else w
    return w if prior is None else w * block(kept(prior), sizes, k, t)[..., None]


def holds(i: int, k: int, t: int, secure: bool) -> bool:
    """Whether party i holds a fragment of ``W_kt`` (all do under the secure dispatch)."""
    return secure or i == k


def init_fragments(sizes: Sequence[int], h: int, secure: bool, seed: int,
                   prior: Masks | None = None) -> Fragments:
    """All fragments ``F[i][k][t]`` (None where party i holds none)."""
    K = len(sizes)
    return [[[init_fragment(i, k, t, sizes, h, secure, seed, prior) if holds(i, k, t, secure)
              else None for t in range(K)] for k in range(K)] for i in range(K)]


# ---- prior knowledge and missing cells --------------------------------------------------
def prior_masks(s: VFedCDSettings, names: Sequence[str]) -> Masks | None:
    """The settings' knowledge as masks over ``names`` (in the order given; None: no
    knowledge). An unknown name, a contradiction or a required cycle is a ValueError."""
    knowledge = s.knowledge()
    return knowledge.masks(list(names)) if knowledge else None


def block(M: np.ndarray, sizes: Sequence[int], k: int, t: int) -> np.ndarray:
    """Block (k, t) of a d x d array in block order: rows of party k, columns of party t."""
    st = starts_of(sizes)
    return M[st[k]:st[k + 1], st[t]:st[t + 1]]


def kept(prior: Masks) -> np.ndarray:
    """1.0 where an encoder row may be nonzero (not forbidden), else 0.0 (d x d)."""
    return (~prior.forbid_W).astype(float)


def penalised(prior: Masks) -> np.ndarray:
    """1.0 where ``lambda1`` applies (not a required entry), else 0.0 (d x d)."""
    return (~prior.require_W).astype(float)


def inputs(x: np.ndarray) -> np.ndarray:
    """The encoders' input: ``x`` with each missing cell (NaN) at 0, its column's observed
    mean after the party's transform (``x`` itself when nothing is missing)."""
    miss = np.isnan(x)
    return np.where(miss, 0.0, x) if miss.any() else x


def missing_share(x: np.ndarray) -> float:
    """The share of ``x``'s cells that are missing (NaN)."""
    return float(np.isnan(x).mean()) if x.size else 0.0


# ---- graph and CTV ----------------------------------------------------------------------
def graph_fragment(held: Sequence[np.ndarray | None], t: int, starts: Sequence[int]
                   ) -> np.ndarray:
    """``B_t^i`` (d x d_t): L2 norms over h of the fragments ``held[k] = F[i][k][t]``."""
    d = starts[-1]
    d_t = next(w.shape[1] for w in held if w is not None)
    B = np.zeros((d, d_t))
    for k, w in enumerate(held):
        if w is not None:
            B[starts[k]:starts[k + 1]] = np.linalg.norm(w, axis=2)
    return B


def assemble(cols: Sequence[np.ndarray]) -> np.ndarray:
    """``B = [B_1 ... B_K]`` (d x d) from the per-target column blocks."""
    return np.hstack(cols)


def norm_backward(w: np.ndarray, g: np.ndarray) -> np.ndarray:
    """``dL/dw`` of ``L = sum g * ||w||_h`` (h the last axis): ``g w / ||w||`` (0 where the
    norm is 0); one fragment (``g`` d_k x d_t) or stacked ones (``g`` K x d x d)."""
    nrm = np.linalg.norm(w, axis=-1, keepdims=True)
    return g[..., None] * np.divide(w, nrm, out=np.zeros_like(w), where=nrm > 0)


def spectral_radius(B: np.ndarray, u: np.ndarray, v: np.ndarray, iters: int
                    ) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    """``(rho, drho/dB, u, v)``: power iteration on ``B + 1e-6``, warm-started at (u, v)."""
    A = B + 1e-6
    At = A.T
    for _ in range(iters):
        v = A @ v
        v = v / np.sqrt(v @ v)
        u = At @ u
        u = u / np.sqrt(u @ u)
    uv = float(u @ v)
    return float(u @ A @ v / uv), np.outer(u, v) / uv, u, v


def is_dag(A: np.ndarray) -> bool:
    """No directed cycle among the nonzero entries of ``A``."""
    M = (np.asarray(A) != 0).astype(int)
    indeg, ready, seen = M.sum(0), list(np.flatnonzero(M.sum(0) == 0)), 0
    while ready:
        i = ready.pop()
        seen += 1
        for j in np.flatnonzero(M[i]):
            indeg[j] -= 1
            if indeg[j] == 0:
                ready.append(j)
    return seen == len(M)


def dag_at_threshold(B: np.ndarray, tau: float, prior: Masks | None = None) -> np.ndarray:
    """Binary DAG: edges with ``B >= tau`` by decreasing weight, skipping cycle closers.

    With ``prior`` the required edges (acyclic) come first whatever their weight, and a
    forbidden entry is never an edge whatever ``tau``.
    """
    G = np.zeros(B.shape)
    W = B * (1 - np.eye(len(B)))
    if prior is not None:
        G[prior.require_W] = 1.0
        W = np.where(prior.forbid_W | prior.require_W, -np.inf, W)
    for flat in np.argsort(-W, axis=None, kind="stable"):
        i, j = np.unravel_index(flat, B.shape)
        if W[i, j] < tau:
            break
        G[i, j] = 1.0
        if not is_dag(G):
            G[i, j] = 0.0
    return G


def validated(B: np.ndarray, prior: Masks | None) -> np.ndarray:
    """The graph the CTV works with: ``B`` with its forbidden entries at 0 (they are 0
    already but for the parties' DP noise)."""
    return B if prior is None else np.where(prior.forbid_W, 0.0, B)


def support(B: np.ndarray, tol: float, prior: Masks | None = None) -> np.ndarray:
    """The edges ``B > tol``, with ``prior`` the required ones added, forbidden ones out."""
    S = B > tol
    return S if prior is None else (S & ~prior.forbid_W) | prior.require_W


def ctv_gradient(B: np.ndarray, lam2: float, u: np.ndarray, v: np.ndarray, power_iters: int,
                 lambda_b: float, prior: Masks | None = None
                 ) -> tuple[np.ndarray, float, np.ndarray, np.ndarray]:
    """``d(lambda2 rho(B) + lambda_B |B|_1)/dB``, rho, and the new power-iteration vectors.

    With ``prior`` the gradient is 0 on the required entries (no acyclicity or sparsity push:
    the data alone set their weights) and on the forbidden ones (held at 0).
    """
    rho, drho, u, v = spectral_radius(B, u, v, power_iters)
    G = lam2 * drho + lambda_b * np.sign(B)
    return (G if prior is None else np.where(prior.forbid_W | prior.require_W, 0.0, G)), \
        rho, u, v


def split_gradient(G: np.ndarray, K: int, rng: np.random.Generator, split: str, secure: bool
                   ) -> list[np.ndarray]:
    """CTV shares ``K w_k G`` with ``w ~ Dirichlet(1_K)`` per entry, or G to everyone (split
    "exact" or no secure dispatch)."""
    if split == "exact" or not secure:
        return [G] * K
    w = rng.dirichlet(np.ones(K), size=G.shape)
    return [K * w[..., k] * G for k in range(K)]


def next_lambda2(lam2: float, frozen: bool, B: np.ndarray, *, ctv: bool, unfreeze: bool,
                 tau: float, dag_tol: float, gamma: float, prior: Masks | None = None
                 ) -> tuple[float, bool]:
    """End of epoch: freeze once ``B > dag_tol`` is a DAG, else ``lambda2 += gamma``.

    With ``unfreeze`` (SDCD) a frozen lambda2 grows again once ``B > tau`` is cyclic; without
    the CTV (``ctv`` False) lambda2 stays 0. With ``prior`` the graphs tested are
    :func:`support` (required edges in, forbidden out).
    """
    if not ctv:
        return 0.0, frozen
    if frozen and unfreeze:
        frozen = is_dag(support(B, tau, prior))
    frozen = frozen or is_dag(support(B, dag_tol, prior))
    return (lam2 if frozen else lam2 + gamma), frozen


def optimizer_step(w: np.ndarray, grad: np.ndarray, memory: dict | None = None, *,
                   optimizer: str, lr: float, adam_eps: float) -> np.ndarray:
    """``w - lr grad`` (SGD), or Adam's step (betas :data:`ADAM_BETAS`) with its moments and
    step count kept in ``memory`` (a dict, filled on first use). Elementwise, so a party's
    fragments step alike one by one or stacked."""
    if optimizer == "sgd":
        return w - lr * grad
    if memory is None:
        raise ValueError(f"optimizer {optimizer!r} needs a memory dict for its moments")
    if optimizer == "sgdm":
        m = MOMENTUM * memory.get("m", 0.0) + grad
        memory["m"] = m
        return w - lr * m
    (b1, b2), n = ADAM_BETAS, memory.get("n", 0) + 1
    m = b1 * memory.get("m", 0.0) + (1 - b1) * grad
    v = b2 * memory.get("v", 0.0) + (1 - b2) * grad * grad
    memory.update(m=m, v=v, n=n)
    return w - lr * (m / (1 - b1 ** n)) / (np.sqrt(v / (1 - b2 ** n)) + adam_eps)


def descent(w: np.ndarray, grad: np.ndarray, memory: dict | None = None, *, optimizer: str,
            lr: float, adam_eps: float, lambda1: float, l2: float) -> np.ndarray:
    """Step on ``grad + lambda1 sign w + 2 l2 w`` (data + CTV, local L1 and L2) with
    :func:`optimizer_step` (SGD: ``w - lr (grad + lambda1 sign w + 2 l2 w)``)."""
    if l2:
        grad = grad + 2 * l2 * w
    return optimizer_step(w, grad + lambda1 * np.sign(w), memory, optimizer=optimizer, lr=lr,
                          adam_eps=adam_eps)


def update_fragment(w: np.ndarray, grad: np.ndarray, k: int, t: int,
                    memory: dict | None = None, keep: np.ndarray | None = None,
                    **step: Any) -> np.ndarray:
    """:func:`descent` of one fragment (``step``: its keyword numbers), self-loops kept at 0;
    ``keep`` (d_k x d_t x 1, 0 on forbidden rows) holds forbidden rows at 0."""
    w = descent(w, grad, memory, **step)
    w = w * self_loop_mask(w.shape[1], w.shape[2]) if k == t else w
    return w if keep is None else w * keep


def decayed(params: Sequence[np.ndarray], lr: float, l2: float) -> list[np.ndarray]:
    """Decoder weight decay ``(1 - 2 lr l2) p``, applied by the target before its step."""
    return [p * (1 - 2 * lr * l2) for p in params] if l2 else list(params)


def batches(n: int, batch: int, seed: int, epoch: int) -> list[np.ndarray]:
    """Row indices of each mini-batch of ``epoch`` (a seeded permutation)."""
    perm = rng_for(seed, "batches", epoch).permutation(n)
    return [perm[i:i + batch] for i in range(0, n, batch)]


def rng_for(seed: int, purpose: str, *keys: int) -> np.random.Generator:
    """An independent generator per (seed, purpose, keys): parties draw without talking."""
    tag = int.from_bytes(purpose.encode()[:8].ljust(8, b"\0"), "little")
    return np.random.default_rng([seed, tag, *keys])


def phi_mask(seed: int, sigma_phi: float, frac: int, step: int, k: int, t: int,
             shape: tuple[int, ...]) -> np.ndarray:
    """Quantized gradient mask ``phi_kt`` ~ N(0, sigma_phi^2) kept by source party k."""
    return quantize(rng_for(seed, "phi", step, k, t).normal(0, sigma_phi, shape), 2 * frac)


def starts_of(sizes: Sequence[int]) -> list[int]:
    """Block boundaries ``[0, d_1, d_1 + d_2, ..., d]``."""
    return [0, *np.cumsum(sizes).tolist()]


def graph(F: Fragments, sizes: Sequence[int]) -> np.ndarray:
    """``B = sum_i B^i`` over all holders (d x d)."""
    K, st = len(sizes), starts_of(sizes)
    return assemble([sum(graph_fragment([F[i][k][t] for k in range(K)], t, st)
                         for i in range(K) if any(F[i][k][t] is not None for k in range(K)))
                     for t in range(K)])


def dp_noise(dp_b: float, seed: int, key: int, i: int, d: int) -> np.ndarray:
    """Party i's Laplace(dp_b) noise on its graph fragments (d x d) after ``key`` updates."""
    if dp_b <= 0:
        return np.zeros((d, d))
    return rng_for(seed, "dp", key, i).laplace(0.0, dp_b, (d, d))


def ctv_graph(F: Fragments, sizes: Sequence[int], h: int, dp_b: float, seed: int, key: int
              ) -> np.ndarray:
    """What the CTV sums: every party's graph fragments plus its DP noise (if any)."""
    return stacked_graph(stacked(F, sizes, h), dp_b, seed, key)


def encoder(F: Fragments, k: int, t: int) -> np.ndarray:
    """The whole encoder ``W_kt = sum_i F[i][k][t]``."""
    return sum(f[k][t] for f in F if f[k][t] is not None)


def stacked(F: Fragments, sizes: Sequence[int], h: int) -> np.ndarray:
    """Holder i's fragments as one tensor ``(K, d, d, h)``; block (k, t) is ``F[i][k][t]``."""
    K, st = len(sizes), starts_of(sizes)
    out = np.zeros((K, st[-1], st[-1], h))
    for i, k, t in np.ndindex(K, K, K):
        if F[i][k][t] is not None:
            out[i, st[k]:st[k + 1], st[t]:st[t + 1]] = F[i][k][t]
    return out


def unstacked(Fs: np.ndarray, sizes: Sequence[int], secure: bool) -> Fragments:
    """Inverse of :func:`stacked` (None where a party holds no fragment)."""
    K, st = len(sizes), starts_of(sizes)
    return [[[Fs[i, st[k]:st[k + 1], st[t]:st[t + 1]].copy() if holds(i, k, t, secure) else None
              for t in range(K)] for k in range(K)] for i in range(K)]


def exact_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` of integer-valued float arrays, exact (float BLAS below 2^53, else int64)."""
    if np.abs(a).max(initial=0) * np.abs(b).max(initial=0) * a.shape[1] < 2.0 ** 52:
        return a @ b
    return (a.astype(np.int64) @ b.astype(np.int64)).astype(float)


def stacked_graph(Fs: np.ndarray, dp_b: float, seed: int, key: int) -> np.ndarray:
    """:func:`ctv_graph` of stacked fragments: ``sum_i (||Fs[i]||_h + Laplace noise_i)``."""
    out = 0.0
    for i, Bi in enumerate(np.linalg.norm(Fs, axis=3)):
        out = out + (Bi + dp_noise(dp_b, seed, key, i, len(Bi)))
    return out


def result_graph(F: Fragments, sizes: Sequence[int], tau: float) -> tuple[np.ndarray,
                                                                         np.ndarray]:
    """The weighted graph B and the DAG thresholded at ``tau``."""
    B = graph(F, sizes)
    return B, dag_at_threshold(B, tau)


# ---- replicas and edge confidence -------------------------------------------------------
def replica_settings(s: VFedCDSettings, r: int) -> VFedCDSettings:
    """Replica ``r``'s settings: replica 0 the run's own; replica r >= 1 its own seed (its
    initialisation, masks and CTV splits never repeat another replica's) and no replicas."""
    if r == 0:
        return s
    return replace(s, seed=int(rng_for(s.seed, "replica", r).integers(2 ** 62)), replicas=0)


def replica_rows(n: int, s: VFedCDSettings, r: int) -> np.ndarray:
    """Aligned row indices replica ``r`` fits: all ``n`` for r = 0, else one half of a split
    drawn from the run's ``seed`` (:func:`~fedcausal_flwr.stability.complementary_halves`)."""
    return np.arange(n) if r == 0 else complementary_halves(n, r, s.seed)


def replica_batches(n: int, s: VFedCDSettings, r: int, epoch: int) -> list[np.ndarray]:
    """Each mini-batch of ``epoch`` as indices into replica ``r``'s rows: replica 0 the run's
    :func:`batches`; replica r >= 1 its ``n // 2`` rows in a seeded order, cut into as many
    batches as replica 0 has, so every replica steps in the same exchanges."""
    main = batches(n, s.batch, s.seed, epoch)
    if r == 0:
        return main
    if n // 2 < len(main):
        raise ValueError(f"replicas: {n} rows in batches of {s.batch} give {len(main)} steps "
                         f"an epoch, more than a half ({n // 2} rows) can fill; raise "
                         f"{s.app_key('batch')!r} or set {s.app_key('replicas')!r} = 0")
    return np.array_split(rng_for(s.seed, "rbatches", r, epoch).permutation(n // 2), len(main))


def replica_dags(graphs: np.ndarray, tau: float, prior: Masks | None = None) -> np.ndarray:
    """Each replica's graph ``B`` (R x d x d) thresholded at ``tau`` as the run's own is
    (:func:`dag_at_threshold`)."""
    return np.stack([dag_at_threshold(B, tau, prior) for B in graphs])


def edge_confidence(graphs: np.ndarray, tau: float, pi: float, prior: Masks | None = None
                    ) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """Selection frequency over the replicas' graphs (R x d x d) and the stable set at ``pi``.

    Returns ``({"B_frequency": d x d, "B_stable": d x d in {0, 1}}, metrics)``: ``replicas``
    R, ``threshold`` pi, ``mean_selected`` q (mean edges a replica's DAG at ``tau``
    selects), ``candidates`` p (d (d - 1)), ``false_edge_bound`` (``q^2 / ((2 pi - 1) p)``,
    the bound on the expected false edges in the stable set, Meinshausen & Buhlmann 2010
    Thm. 1) and ``stable_edges`` (:func:`~fedcausal_flwr.stability.edge_stability`).
    """
    dags = replica_dags(graphs, tau, prior)
    conf = edge_stability(dags > 0, pi, ~np.eye(dags.shape[-1], dtype=bool))
    return ({"B_frequency": conf.frequency, "B_stable": conf.stable.astype(float)},
            conf.summary())
