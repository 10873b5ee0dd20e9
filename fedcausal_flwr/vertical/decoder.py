"""VFedCD's decoders: target t's per-attribute MLP towers on the aggregated features Z_t.

    xhat^t_j = Linear_j(sigma(... sigma(Z_t[:, j] + b_j)))    L = sum_j MSE (Eq. 1) or the
                                                             Gaussian NLL of SDCD

Backpropagated by hand in numpy float64; each target party steps its own decoder.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fedcausal_flwr.vertical.model import decayed, optimizer_step, rng_for


def init_decoder(t: int, d_t: int, h: int, layers: int, loss: str, seed: int
                 ) -> list[np.ndarray]:
    """Per-attribute towers: ``[b0 (d_t,h), (W (d_t,h,h), b (d_t,h)) x (L-1), Wo, bo]``.

    Under the Gaussian NLL (``loss`` "nll") a log-variance per attribute (0) comes last (an
    even-length list).
    """
    bound, rng = 1.0 / np.sqrt(h), rng_for(seed, "decoder", t)
    p = [rng.uniform(-bound, bound, (d_t, h))]
    for _ in range(layers - 1):
        p += [rng.uniform(-bound, bound, (d_t, h, h)), rng.uniform(-bound, bound, (d_t, h))]
    p += [rng.uniform(-bound, bound, (d_t, h)), rng.uniform(-bound, bound, d_t)]
    return p + [np.zeros(d_t)] if loss == "nll" else p


def towers_and_log_var(params: Sequence[np.ndarray]
                       ) -> tuple[Sequence[np.ndarray], np.ndarray | None]:
    """The tower parameters and the log-variances (None under MSE, an odd-length list)."""
    return (params[:-1], params[-1]) if len(params) % 2 == 0 else (params, None)


def residual_loss(e: np.ndarray, log_var: np.ndarray | None
                  ) -> tuple[float, np.ndarray, np.ndarray | None]:
    """``(L, dL/dxhat, dL/dlog_var)`` of the residuals ``e = xhat - x`` (n x d_t).

    MSE: ``L = sum_j mean_n e^2``. Gaussian NLL (SDCD): ``L = sum_j (lv_j + mean_n e^2 /
    exp(lv_j)) / 2``, constants dropped. A missing cell (``x`` NaN, so ``e`` NaN) adds nothing:
    :func:`observed_loss`.
    """
    if np.isnan(e).any():
        return observed_loss(e, log_var)
    if log_var is None:
        return float((e ** 2).mean(0).sum()), 2.0 * e / len(e), None
    w, msq = np.exp(-log_var), (e ** 2).mean(0)
    return float((0.5 * log_var + 0.5 * msq * w).sum()), e * w / len(e), 0.5 - 0.5 * msq * w


def observed_loss(e: np.ndarray, log_var: np.ndarray | None
                  ) -> tuple[float, np.ndarray, np.ndarray | None]:
    """:func:`residual_loss` over the observed cells: the sum of each observed cell's loss
    over the n rows (MSE ``sum_nj m e^2 / n``, NLL ``sum_j (o_j lv_j + sum_n m e^2 /
    exp(lv_j)) / (2 n)`` with m the observed cells and o_j their count in column j), the
    likelihood of what was observed; with every cell observed it is :func:`residual_loss`."""
    m = ~np.isnan(e)
    e, n = np.where(m, e, 0.0), len(e)
    if log_var is None:
        return float((e ** 2).sum() / n), 2.0 * e / n, None
    w, msq, share = np.exp(-log_var), (e ** 2).sum(0) / n, m.sum(0) / n
    return (float((0.5 * share * log_var + 0.5 * msq * w).sum()), e * w / n,
            0.5 * share - 0.5 * msq * w)


def sigmoid(a: np.ndarray) -> np.ndarray:
    """``1 / (1 + exp(-a))``."""
    return 1.0 / (1.0 + np.exp(-a))


def decoder_activations(params: Sequence[np.ndarray], Z: np.ndarray
                        ) -> tuple[list[np.ndarray], np.ndarray]:
    """Each tower layer's sigmoid activations (n x d_t x h) and ``xhat`` (n x d_t)."""
    acts = [sigmoid(Z + params[0])]
    for W, b in zip(params[1:-2:2], params[2:-2:2], strict=True):
        acts.append(sigmoid(np.einsum("nth,thg->ntg", acts[-1], W) + b))
    return acts, np.einsum("nth,th->nt", acts[-1], params[-2]) + params[-1]


def decode(params: Sequence[np.ndarray], Z: np.ndarray) -> np.ndarray:
    """``xhat`` (n x d_t) of the decoder towers on aggregated features Z (n x d_t x h)."""
    return decoder_activations(towers_and_log_var(params)[0], Z)[1]


def decoder_grads(params: Sequence[np.ndarray], Z: np.ndarray, x: np.ndarray
                  ) -> tuple[list[np.ndarray], np.ndarray, float]:
    """``(dL/dparams, dL/dZ, L)`` of the :func:`residual_loss` (backprop)."""
    params, log_var = towers_and_log_var(params)
    acts, xhat = decoder_activations(params, Z)
    loss, r, g_log_var = residual_loss(xhat - x, log_var)
    grads = [np.einsum("nt,nth->th", r, acts[-1]), r.sum(0)]
    if log_var is not None:
        grads.append(g_log_var)
    da = r[:, :, None] * params[-2]
    for layer in range(len(acts) - 1, 0, -1):
        dpre = da * acts[layer] * (1.0 - acts[layer])
        W = params[2 * layer - 1]
        grads = [np.einsum("nth,ntg->thg", acts[layer - 1], dpre), dpre.sum(0), *grads]
        da = np.einsum("ntg,thg->nth", dpre, W)
    dZ = da * acts[0] * (1.0 - acts[0])
    return [dZ.sum(0), *grads], dZ, loss


def decoder_step(params: Sequence[np.ndarray], Z: np.ndarray, x: np.ndarray, lr: float
                 ) -> tuple[list[np.ndarray], np.ndarray, float]:
    """One SGD step of target t's decoder; returns (new params, dL/dZ, loss)."""
    grads, dZ, loss = decoder_grads(params, Z, x)
    return [p - lr * g for p, g in zip(params, grads, strict=True)], dZ, loss


def train_decoder(params: Sequence[np.ndarray], Z: np.ndarray, x: np.ndarray,
                  memory: list[dict], *, optimizer: str, lr: float, adam_eps: float, l2: float
                  ) -> tuple[list[np.ndarray], np.ndarray, float]:
    """Target t's decoder step under ``optimizer``: SGD after the L2 decay (:func:`decayed`,
    :func:`decoder_step`), or Adam on the data gradient plus ``2 l2 p``; ``memory`` (one dict
    per parameter, filled on first use) keeps Adam's moments. Returns (params, dL/dZ, loss)."""
    if optimizer == "sgd":
        return decoder_step(decayed(params, lr, l2), Z, x, lr)
    grads, dZ, loss = decoder_grads(params, Z, x)
    while len(memory) < len(params):
        memory.append({})
    return [optimizer_step(p, g + 2 * l2 * p if l2 else g, m, optimizer=optimizer, lr=lr,
                           adam_eps=adam_eps)
            for p, g, m in zip(params, grads, memory, strict=True)], dZ, loss


def reconstruction_loss(params: Sequence[np.ndarray], Z: np.ndarray, x: np.ndarray) -> float:
    """The :func:`residual_loss` without a step."""
    return residual_loss(decode(params, Z) - x, towers_and_log_var(params)[1])[0]
