"""The players' optimizers of FedGDA's local steps: SGD, heavy-ball momentum and optimistic
Adam (:func:`_direction`, memory in :class:`OptState`), and the clipping of f's gradient
(:func:`clip`, a departure from Algorithm 1 argued there).

Pure torch: no I/O, no Flower; :mod:`fedcausal_flwr.iv.model` re-exports these names.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fedcausal_flwr.extras import missing_extra

try:
    import torch
except ModuleNotFoundError as e:
    raise missing_extra(e, "FedIV", "fediv", "torch") from e


@dataclass
class OptState:
    """Per-player optimizer memory (momentum buffers, OAdam moments and last step)."""

    step: int = 0
    buf: dict[str, list[torch.Tensor]] = field(default_factory=dict)


def _direction(grads: list[torch.Tensor], lr: float, key: str, st: OptState, optimizer: str,
               momentum: float, betas: tuple[float, float]) -> list[torch.Tensor]:
    """The step ``u`` of one player for its gradients (``p <- p - u`` descends)."""
    if optimizer == "sgd":
        return [lr * g for g in grads]
    if optimizer == "sgdm":
        m = st.buf.setdefault(key, [torch.zeros_like(g) for g in grads])
        for mi, g in zip(m, grads, strict=True):
            mi.mul_(momentum).add_(g)
        return [lr * mi for mi in m]
    b1, b2 = betas  # OAdam: u_t = lr m^_t/(sqrt(v^_t)+eps), p <- p - 2u_t + u_{t-1}
    m = st.buf.setdefault(key + ".m", [torch.zeros_like(g) for g in grads])
    v = st.buf.setdefault(key + ".v", [torch.zeros_like(g) for g in grads])
    prev = st.buf.setdefault(key + ".u", [torch.zeros_like(g) for g in grads])
    t = st.step
    out = []
    for i, g in enumerate(grads):
        m[i].mul_(b1).add_((1 - b1) * g)
        v[i].mul_(b2).add_((1 - b2) * g * g)
        u = lr * (m[i] / (1 - b1 ** t)) / ((v[i] / (1 - b2 ** t)).sqrt() + 1e-8)
        out.append(2 * u - prev[i])
        prev[i] = u
    return out


def clip(grads: list[torch.Tensor], max_norm: float) -> list[torch.Tensor]:
    """A player's gradient scaled to L2 norm at most ``max_norm`` (0: unchanged).

    :func:`gda_step` clips the max player's (f's) ascent gradient. This departs from
    Algorithm 1 (App. B), whose local steps use the raw gradients of U_i: f's step is
    bounded by ``lr_f * max_norm``. The direction is kept, so a step inside the bound is
    exactly the paper's. g's gradient, mean f(z) dg/dtheta, is left raw: it is bounded
    once f is.
    """
    if max_norm <= 0:
        return grads
    norm = torch.sqrt(sum((gi * gi).sum() for gi in grads))
    if not torch.isfinite(norm) or norm <= max_norm:
        return grads
    return [gi * (max_norm / norm) for gi in grads]
