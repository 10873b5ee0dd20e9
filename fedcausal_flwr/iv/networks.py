"""DeepGMM's tensors and networks: a client's :class:`Batch` of float64 tensors, the model
g(x; theta) and the test function f(z; tau) (:func:`networks`: the authors' MLPs, or their CNN
for images), and the players' parameters as lists of float64 numpy arrays in
``named_parameters`` order (:func:`get_params`, :func:`set_params`).

Pure torch/numpy: no I/O, no Flower; :mod:`fedcausal_flwr.iv.model` re-exports these names.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fedcausal_flwr.extras import missing_extra

try:
    import torch
    from torch import nn
except ModuleNotFoundError as e:
    raise missing_extra(e, "FedIV", "fediv", "torch") from e


Params = list[np.ndarray]
DTYPE = torch.float64


@dataclass
class Batch:
    """One client's data as float64 tensors (``x`` may be images ``(n, 1, h, w)``)."""

    x: torch.Tensor
    y: torch.Tensor
    z: torch.Tensor

    @property
    def n(self) -> int:
        """Number of samples."""
        return int(self.y.shape[0])

    def rows(self, idx: torch.Tensor | slice) -> Batch:
        """The sub-batch of rows ``idx``."""
        return Batch(self.x[idx], self.y[idx], self.z[idx])


def batch(x: np.ndarray, y: np.ndarray, z: np.ndarray, device: str = "cpu") -> Batch:
    """Arrays as a float64 :class:`Batch` on ``device`` (``y`` as a column)."""
    t = lambda a: torch.as_tensor(np.asarray(a, dtype=np.float64), device=device)  # noqa: E731
    return Batch(t(x), t(y).reshape(-1, 1), t(z))


def device_of(name: str = "auto") -> str:
    """``"cuda"`` when asked for or when ``"auto"`` finds a GPU, else ``"cpu"``."""
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return name


# ---- networks ------------------------------------------------------------------------------
class LeakySoftmax(nn.Module):
    """DeepGMM's output head: 0.01 leaky_relu(h) + 0.99 sum(leaky_relu(h)) softmax(h)."""

    def forward(self, h: torch.Tensor) -> torch.Tensor:  # noqa: D102
        a = nn.functional.leaky_relu(h)
        return 0.01 * a + 0.99 * a.sum(dim=1, keepdim=True) * torch.softmax(h, dim=1)


def mlp(sizes: Sequence[int]) -> nn.Sequential:
    """Linear layers with LeakyReLU between; Xavier-normal weights (gain 1), zero biases."""
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
        lin = nn.Linear(a, b)
        nn.init.xavier_normal_(lin.weight)
        nn.init.zeros_(lin.bias)
        layers += [lin] + ([nn.LeakyReLU()] if i < len(sizes) - 2 else [])
    return nn.Sequential(*layers)


def cnn(channels: int, side: int) -> nn.Sequential:
    """DeepGMM's DefaultCNN for ``channels x side x side`` images, without its BatchNorm.

    (BatchNorm's running statistics are buffers that FedGDA would have to average; dropped.)
    """
    s = side // 2
    s = (s + 2) // 2
    return nn.Sequential(
        nn.Conv2d(channels, 20, 3, padding=1), nn.LeakyReLU(), nn.MaxPool2d(2),
        nn.Conv2d(20, 50, 3, padding=2), nn.LeakyReLU(), nn.MaxPool2d(2), nn.Flatten(),
        nn.Linear(50 * s * s, 200), nn.LeakyReLU(), nn.Linear(200, 10), LeakySoftmax(),
        nn.Linear(10, 1))


def network(shape: Sequence[int], role: str) -> nn.Module:
    """g (``role="g"``) or f (``"f"``) for inputs of per-sample ``shape``.

    Vectors: g = MLP(d, 20, 3, 1), f = MLP(d, 20, 1) (the authors' low-dim nets);
    images ``(c, h, w)``: the CNN.
    """
    if len(shape) == 3:
        return cnn(int(shape[0]), int(shape[1]))
    d = int(np.prod(shape)) if len(shape) else 1
    return mlp([d, 20, 3, 1] if role == "g" else [d, 20, 1])


def networks(x_shape: Sequence[int], z_shape: Sequence[int], seed: int,
             device: str = "cpu") -> tuple[nn.Module, nn.Module]:
    """``(g, f)`` in float64, initialised from ``seed``."""
    torch.manual_seed(int(seed))
    g, f = network(x_shape, "g"), network(z_shape, "f")
    return g.to(device=device, dtype=DTYPE), f.to(device=device, dtype=DTYPE)


def get_params(net: nn.Module) -> Params:
    """The network's parameters as float64 numpy arrays (``named_parameters`` order)."""
    return [p.detach().cpu().numpy().astype(np.float64, copy=True) for p in net.parameters()]


def set_params(net: nn.Module, params: Sequence[np.ndarray]) -> nn.Module:
    """Load ``params`` (``get_params`` order and shapes) into ``net``; returns ``net``."""
    ps = list(net.parameters())
    if len(ps) != len(params):
        raise ValueError(f"expected {len(ps)} parameter arrays, got {len(params)}")
    with torch.no_grad():
        for p, a in zip(ps, params, strict=True):
            if tuple(p.shape) != tuple(np.shape(a)):
                raise ValueError(f"parameter of shape {tuple(np.shape(a))}, expected "
                                 f"{tuple(p.shape)}")
            p.copy_(torch.as_tensor(np.asarray(a), dtype=p.dtype, device=p.device))
    return net


def shapes(net: nn.Module) -> list[tuple[int, ...]]:
    """Shapes of the network's parameter arrays."""
    return [tuple(p.shape) for p in net.parameters()]


def predict(net: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Network output as a column ``(n, 1)``; a 1-D input is one feature per row."""
    return net(x.reshape(-1, 1) if x.ndim == 1 else x).reshape(-1, 1)
