"""The in-process reference loop of FedGC and FedCF: the oracle of the Flower path.

Tests compare the two to 1e-10. It writes each exchange out from the equations of
:mod:`fedcausal_flwr.statespace.model`, independently of the strategy and client modules,
including what crosses the wire (FedGC: ``[hhat_a^{t-1}, hhat_c^{t-1}]`` up and ``[g~]``
down; FedCF: all four states up and ``[g, g~]`` down), because the DP noise is drawn per sent
array (the states; the gradients are post-processing and travel unnoised).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fedcausal_flwr.statespace import model as ss
from fedcausal_flwr.statespace.kalman import ClientData
from fedcausal_flwr.statespace.model import (
    ClientParams,
    GrangerTest,
    ServerParams,
    ServerWindow,
)
from fedcausal_flwr.statespace.settings import FedCFSettings, StateSpaceSettings


def exchange_step(clients: Sequence[ClientData], cpar: Sequence[ClientParams],
                  spar: ServerParams, ts: np.ndarray, s: StateSpaceSettings, k: int = 1,
                  noise_multiplier: float = math.nan, key: int | None = None
                  ) -> tuple[list[ClientParams], ServerParams, ServerWindow]:
    """One exchange on window ``ts`` (number k): states, server window, both Jacobi steps.

    FedGC with :class:`FedGCSettings`, FedCF with :class:`FedCFSettings`; with DP, the
    states are release ``key`` (default k) of multiplier ``noise_multiplier``
    (:func:`~fedcausal_flwr.statespace.model.dp_noise_multiplier`).
    """
    if s.dp and math.isnan(noise_multiplier):
        raise ValueError("a DP exchange needs the run's noise multiplier "
                         "(statespace.model.dp_noise_multiplier)")
    pairs = list(zip(clients, cpar, strict=True))
    up = {"noise_multiplier": noise_multiplier if s.dp else math.nan,
          "clip": s.dp_clip_msg, "seed": s.seed}
    key = k if key is None else key
    server = {"difference": s.difference, "lr_server": s.lr_server, "lambda_g": s.lambda_g}
    if isinstance(s, FedCFSettings):
        sent = [ss.private(ss.client_states(c, p, ts, s.target), m, key, **up)
                for m, (c, p) in enumerate(pairs)]
        win, sp = ss.fedcf_server_update(clients_A(clients), clients_B(clients), spar, sent,
                                         xi=s.xi, **server)
        grads = [[win.g[m], win.g_tilde[m]] for m in range(len(pairs))]
    else:
        sent = [ss.private(ss.fedgc_states(c, p, ts, s.target), m, key, **up)
                for m, (c, p) in enumerate(pairs)]
        win, sp = ss.fedgc_server_update(clients_A(clients), spar, sent, target=s.target,
                                         noise_ridge=ss.dp_noise_ridge(s, up["noise_multiplier"]),
                                         **server)
        grads = [[np.zeros_like(win.g_tilde[m]), win.g_tilde[m]] for m in range(len(pairs))]
    step = {"lr_client": s.lr_client, "eta1": s.eta1, "eta2": s.eta2, "lambda_l": s.lambda_l,
            "xi": s.xi, "learn_phi": s.learn_phi, "target": s.target,
            "alg1_literal": s.alg1_literal, "difference": s.difference}
    new = [ss.client_step(c, p, ts, g, gt, **step)
           for (c, p), (g, gt) in zip(pairs, grads, strict=True)]
    return new, sp, win


def clients_A(clients: Sequence[ClientData]) -> list[np.ndarray]:
    """The ``A_mm`` the clients send once."""
    return [c.A for c in clients]


def clients_B(clients: Sequence[ClientData]) -> list[np.ndarray]:
    """The ``B_mm`` the clients send once."""
    return [c.B for c in clients]


@dataclass
class ReferenceRun:
    """End state and per-exchange history of :func:`reference`."""

    clients: list[ClientParams]
    server: ServerParams
    history: list[dict[str, float]]
    granger: GrangerTest | None = None
    dp: dict | None = None


def check_lengths(clients: Sequence[ClientData]) -> int:
    """Common T of all clients, or a ValueError naming the first client that differs."""
    T = clients[0].y.shape[0]
    for m, c in enumerate(clients):
        if c.y.shape[0] != T:
            raise ValueError(f"client {m}: {c.y.shape[0]} time steps, client 0 has {T}")
    return T


def reference(clients: Sequence[ClientData], s: StateSpaceSettings,
              spar: ServerParams | None = None, num_rounds: int | None = None) -> ReferenceRun:
    """The in-process loop (FedGC or FedCF by the type of ``s``), window after window.

    ``spar``: the server's start (default:
    :func:`~fedcausal_flwr.statespace.model.initial_server_for`); ``num_rounds``: stop
    after that many exchanges (default: every window of every epoch). The settings'
    ``known_zero`` blocks (clients by their position) are held at 0. The clients end with
    the last window's gradients applied; ``granger``: standard errors and p-values of the
    final estimates from the last pass over the series (:func:`~fedcausal_flwr.statespace.
    model.granger_test`).
    """
    T = check_lengths(clients)
    cf = isinstance(s, FedCFSettings)
    P = [c.dims[0] for c in clients]
    U = [c.dims[1] if cf else 0 for c in clients]
    masks = ss.known_zero_masks(s.zero_blocks(), range(len(clients)), P, U)
    spar = (ss.initial_server_for(P, U, s.init_std, s.seed, masks) if spar is None
            else ss.with_known_zero(spar, masks))
    cpar = [ss.initial_client(c, s.init_std, s.seed, m) for m, c in enumerate(clients)]
    hist, stats = [], None
    plan = ss.windows(T, s.window, s.epochs)[:num_rounds]
    z = ss.dp_noise_multiplier(s, T, len(plan))
    for k, ts in enumerate(plan):
        la = [ss.local_loss(c, p, ts) for c, p in zip(clients, cpar, strict=True)]
        cpar, spar, win = exchange_step(clients, cpar, spar, ts, s, k + 1, z,
                                        ss.dp_release_key(s, k + 1, T))
        hist.append(ss.history_row(k + 1, win, la))
        if ss.last_epoch(k + 1, len(plan), T, s.window):
            part = ss.granger_window(win.terms, s.granger_lags)
            stats = part if stats is None else stats + part
    test = None if stats is None else ss.granger_test(stats, spar.A_hat, spar.B_hat, P, U,
                                                      spar.masks)
    dp = ss.dp_report(s, T, len(plan), z) if s.dp else None
    return ReferenceRun(cpar, spar, hist, test, dp)
