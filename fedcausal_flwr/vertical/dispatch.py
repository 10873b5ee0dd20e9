"""The secure dispatch protocol (Algs. 1-6 of the paper, their typos fixed), one party at a
time, and the plain framework of the ablations (Fig. 1b).

A :class:`Party` holds its columns, its fragments ``F[me][k][t]`` of every encoder, its decoder,
its key pair and the ciphertexts of the fragments it multiplies. Each method is one protocol
phase: it takes what the relay delivered and returns what the relay must carry, addressed by
party. Messages are ciphertexts (``Enc_i``), masked shares (uint64) or graph fragments.

Per step (mini-batch rows ``idx``), phases in order:
``forward``  x^me (x) Enc_i(F[i][me][t]) + Enc_i(2^63 + r)        -> owner i    (HE2SS, Alg. 3)
``share``    z_me,t = comp + sum holder shares + sum owner shares  -> target t
``decode``   Z_t = sum_k z_kt (z_tt included), decoder step, Enc_me(dZ) -> every k
``gradient`` x^meT (x) Enc_t(dZ_t) - Enc_t(phi)                    -> target t   (Alg. 4)
``update``   apply data + CTV + L1 gradients, re-encrypt F[me][j][t] -> holder j;
             graph fragments B_t^me                                 -> CTV (Algs. 5-6)
The arithmetic is that of :func:`fedcausal_flwr.vertical.loop.train_reference`, so a run of
these phases equals the reference loop exactly.

A :class:`PlainParty` (modes "framework" and "ctv") holds its whole encoders and sends the
features ``H_kt`` and receives their gradients in the clear, as the paper's framework without
the secure dispatch does.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from fedcausal_flwr.knowledge import Masks
from fedcausal_flwr.secure.shares import Mock, forward_masks, holder_share, ring
from fedcausal_flwr.vertical import model as core
from fedcausal_flwr.vertical.decoder import init_decoder, train_decoder

Outbox = dict[int, dict[str, np.ndarray]]  # destination party -> name -> array

#: the first phase's config key: the sorted sample ids every party holds (the alignment); under
#: PSI each party's own positions of the shared values in its permuted list, in the common order
SHARED_IDS = "shared-ids"
#: the ``psi_hop`` config key: the hop h (1..K-1); the set in the message started at party
#: (me - h) mod K
PSI_HOP = "psi-hop"


class Party:
    """Party ``me`` of the secure dispatch protocol; ``prior``: the knowledge masks in block
    order (:meth:`Masks.from_config`), held on every fragment it steps."""

    def __init__(self, me: int, x: np.ndarray, sizes: Sequence[int], s: core.VFedCDSettings,
                 backend: Mock, keys: tuple[Any, Any] | None = None,
                 prior: Masks | None = None) -> None:
        if not s.secure:
            raise ValueError("the secure dispatch runs only in mode 'vfedcd'")
        self.me, self.x, self.sizes, self.s, self.backend = me, x, list(sizes), s, backend
        self.K, self.h = len(sizes), s.hidden
        self.starts = core.starts_of(sizes)
        self.pk, self.sk = keys or backend.keypair()
        self.pks: dict[int, Any] = {}
        K = self.K
        self.prior = prior
        self.F = [[core.init_fragment(me, k, t, sizes, s.hidden, s.secure, s.seed, prior)
                   for t in range(K)] for k in range(K)]
        self.dec = init_decoder(me, sizes[me], s.hidden, s.dec_layers, s.loss, s.seed)
        self.memory: dict[Any, Any] = {"dec": []}  # optimizer memory (Adam's moments)
        self.enc_in: dict[tuple[int, int], np.ndarray] = {}
        self.tmp: dict[str, Any] = {}
        self.updates = 0

    # ---- helpers ---------------------------------------------------------------------
    def _shape(self, t: int) -> tuple[int, int]:
        return (self.sizes[self.me], self.sizes[t] * self.h)

    def _encrypted_fragments(self) -> Outbox:
        """``Enc_me(Q(F[me][j][t]))`` for every other party j and every target t."""
        out: Outbox = {}
        for j in range(self.K):
            if j == self.me:
                continue
            out[j] = {f"frag.t{t}": self.backend.to_wire(
                self.pk, self.backend.encrypt(
                    self.pk, core.quantize(self.F[j][t], self.s.frac).reshape(
                        self.sizes[j], -1), self.sk)) for t in range(self.K)}
        return out

    def graph_fragments(self) -> dict[str, np.ndarray]:
        """``B_t^me`` (d x d_t) for every t, plus Laplace noise if ``dp_b``: what the CTV sees."""
        st = self.starts
        noise = core.dp_noise(self.s.dp_b, self.s.seed, self.updates, self.me, st[-1])
        return {f"B.t{t}": core.graph_fragment([self.F[k][t] for k in range(self.K)], t, st)
                + noise[:, st[t]:st[t + 1]] for t in range(self.K)}

    # ---- phases ----------------------------------------------------------------------
    def public_key(self) -> np.ndarray:
        """This party's public key, as published."""
        return self.backend.public_array(self.pk)

    def setup(self, public_keys: Mapping[int, np.ndarray]) -> tuple[Outbox,
                                                                   dict[str, np.ndarray]]:
        """Store the others' keys; send each j its encrypted fragments; graph fragments."""
        self.pks = {i: self.backend.public_from(a) for i, a in public_keys.items()}
        return self._encrypted_fragments(), self.graph_fragments()

    def forward(self, step: int, idx: np.ndarray, inbox: Mapping[int, Mapping[str, np.ndarray]]
                ) -> Outbox:
        """Store the fragments' ciphertexts; HE2SS of ``x^me F[i][me][t]`` for every i, t."""
        b, me, s = self.backend, self.me, self.s
        for i, msg in inbox.items():
            for t in range(self.K):
                self.enc_in[i, t] = b.from_wire(self.pks[i], msg[f"frag.t{t}"], self._shape(t))
        xq = core.quantize(core.inputs(self.x[idx]), s.frac)
        self.tmp = {"idx": idx, "xq": xq, "z": {}}
        out: Outbox = {i: {} for i in range(self.K) if i != me}
        for t in range(self.K):
            own = core.quantize(self.F[me][t], s.frac).reshape(self.sizes[me], -1)
            z = ring(xq @ own)
            for i in out:
                c = b.matmul(self.pks[i], xq, self.enc_in[i, t])
                lo, hi = forward_masks(core.rng_for(s.seed, "eps", step, me, i, t),
                                       (len(idx), self.sizes[t] * self.h))
                out[i][f"he2ss.t{t}"] = b.to_wire(self.pks[i],
                                                  b.mask_forward(self.pks[i], c, lo, hi))
                with np.errstate(over="ignore"):
                    z = z + holder_share(lo)
            self.tmp["z"][t] = z
        return out

    def share(self, inbox: Mapping[int, Mapping[str, np.ndarray]], ctv_share: np.ndarray
              ) -> Outbox:
        """Owner shares of the others' products; send ``z_me,t`` to each target t."""
        b, n = self.backend, len(self.tmp["idx"])
        self.tmp["ctv"] = np.asarray(ctv_share, dtype=float)
        out: Outbox = {}
        for t in range(self.K):
            z = self.tmp["z"][t]
            shape = (n, self.sizes[t] * self.h)
            cs = [b.from_wire(self.pk, msg[f"he2ss.t{t}"], shape) for msg in inbox.values()]
            if cs:  # the holders' ciphertexts added, then decrypted together
                with np.errstate(over="ignore"):
                    z = z + b.owner_forward_sum(self.sk, cs, shape)
            if t == self.me:
                self.tmp["z_own"] = z
            else:
                out[t] = {"z": z}
        return out

    def decode(self, inbox: Mapping[int, Mapping[str, np.ndarray]]) -> tuple[Outbox, float]:
        """``Z_t = sum_k z_kt``, decoder step, own-encoder gradient, broadcast ``Enc(dZ)``."""
        me, s, b = self.me, self.s, self.backend
        Z = self.tmp["z_own"]
        n, d_t = len(self.tmp["idx"]), self.sizes[me]
        for msg in inbox.values():
            with np.errstate(over="ignore"):
                Z = Z + np.asarray(msg["z"], dtype=np.uint64).reshape(Z.shape)
        Zf = core.dequantize(Z, 2 * s.frac).reshape(n, d_t, self.h)
        self.dec, dZ, loss = train_decoder(self.dec, Zf, self.x[self.tmp["idx"]],
                                           self.memory["dec"], **s.optimizer_args())
        gq = core.quantize(dZ, s.frac)
        self.tmp["grads"] = {(me, me): core.dequantize(
            core.encoder_grad_q(self.tmp["xq"], gq), 2 * s.frac)}
        enc = b.to_wire(self.pk, b.encrypt(self.pk, gq.reshape(n, -1), self.sk))
        return {k: {"dz": enc} for k in range(self.K) if k != me}, loss

    def gradient(self, step: int, inbox: Mapping[int, Mapping[str, np.ndarray]]) -> Outbox:
        """HE2SS of ``x^meT dZ_t`` for each other target t; keep the mask phi as my share."""
        me, s, b = self.me, self.s, self.backend
        n = len(self.tmp["idx"])
        out: Outbox = {}
        for t, msg in inbox.items():
            c = b.matmul(self.pks[t], self.tmp["xq"].T,
                         b.from_wire(self.pks[t], msg["dz"], (n, self.sizes[t] * self.h)))
            phi = core.phi_mask(s.seed, s.sigma_phi, s.frac, step, me, t,
                                (self.sizes[me], self.sizes[t], self.h))
            self.tmp["grads"][me, t] = core.dequantize(phi, 2 * s.frac)
            out[t] = {"he2ss": b.to_wire(self.pks[t], b.mask_backward(
                self.pks[t], c, phi.reshape(self.sizes[me], -1)))}
        return out

    def update(self, inbox: Mapping[int, Mapping[str, np.ndarray]]
               ) -> tuple[Outbox, dict[str, np.ndarray]]:
        """Apply every gradient to my fragments; re-encrypt them; new graph fragments."""
        me, s, st = self.me, self.s, self.starts
        grads = self.tmp["grads"]
        for k, msg in inbox.items():
            shape = (self.sizes[k], self.sizes[me], self.h)
            flat = (shape[0], shape[1] * shape[2])
            rem = self.backend.owner_backward(self.sk, self.backend.from_wire(
                self.pk, msg["he2ss"], flat), flat)
            grads[k, me] = core.dequantize(rem, 2 * s.frac).reshape(shape)
        G = self.tmp["ctv"]
        for k in range(self.K):
            for t in range(self.K):
                w = self.F[k][t]
                g = core.norm_backward(w, G[st[k]:st[k + 1], st[t]:st[t + 1]])
                if (k, t) in grads:
                    g = g + grads[k, t].reshape(w.shape)
                self.F[k][t] = core.update_fragment(w, g, k, t, self.memory.setdefault((k, t), {}),
                                                    **_held(self.prior, self.sizes, k, t, s),
                                                    **s.optimizer_args())
        self.tmp = {}
        self.updates += 1
        return self._encrypted_fragments(), self.graph_fragments()


class Replicas:
    """Party ``me`` of a run and its replicas: one :class:`Party` per replica, one message.

    Replica 0 is the run on all rows; replica r >= 1 (``s.replicas`` of them) fits the rows
    :func:`core.replica_rows` with the settings :func:`core.replica_settings` (its own seed,
    so no mask repeats). Every phase runs each replica's phase and returns one outbox holding
    every replica's arrays, named ``r<replica>.<name>`` (with no replicas the bare names, so
    the messages are the ordinary run's): the exchanges are the run's, only the arrays
    multiply. One key pair serves every replica.
    """

    def __init__(self, me: int, x: np.ndarray, sizes: Sequence[int], s: core.VFedCDSettings,
                 backend: Mock, keys: tuple[Any, Any] | None = None,
                 prior: Masks | None = None) -> None:
        self.me, self.s, self.K, self.n = me, s, len(sizes), len(x)
        self.copies = s.replicas + 1
        self.rows = [core.replica_rows(self.n, s, r) for r in range(self.copies)]
        keys = keys or backend.keypair()
        self.parties = [Party(me, x[rows], sizes, core.replica_settings(s, r), backend, keys,
                              prior) for r, rows in enumerate(self.rows)]

    @property
    def x(self) -> np.ndarray | None:
        """Not kept: set by the node before each phase (each replica takes its rows)."""
        return None

    @x.setter
    def x(self, x: np.ndarray | None) -> None:
        for p, rows in zip(self.parties, self.rows, strict=True):
            p.x = None if x is None else x[rows]

    @property
    def backend(self) -> Mock:
        """The HE backend every replica uses."""
        return self.parties[0].backend

    @backend.setter
    def backend(self, backend: Mock) -> None:
        for p in self.parties:
            p.backend = backend

    def batches(self, epoch: int, batch: int) -> list[np.ndarray]:
        """Each replica's rows (into its own) of mini-batch ``batch`` of ``epoch``."""
        return [core.replica_batches(self.n, self.s, r, epoch)[batch]
                for r in range(self.copies)]

    def _tag(self, r: int, name: str) -> str:
        return name if self.copies == 1 else f"r{r}.{name}"

    def _merged(self, boxes: Sequence[Outbox]) -> Outbox:
        out: Outbox = {}
        for r, box in enumerate(boxes):
            for dst, msg in box.items():
                out.setdefault(dst, {}).update({self._tag(r, k): v for k, v in msg.items()})
        return out

    def _split(self, inbox: Mapping[int, Mapping[str, np.ndarray]], r: int
               ) -> dict[int, dict[str, np.ndarray]]:
        if self.copies == 1:
            return {src: dict(msg) for src, msg in inbox.items()}
        pre = f"r{r}."
        return {src: {k[len(pre):]: v for k, v in msg.items() if k.startswith(pre)}
                for src, msg in inbox.items()}

    def _graphs(self, graphs: Sequence[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
        return {self._tag(r, k): v for r, g in enumerate(graphs) for k, v in g.items()}

    def public_key(self) -> np.ndarray:
        """The party's one public key."""
        return self.parties[0].public_key()

    def setup(self, public_keys: Mapping[int, np.ndarray]) -> tuple[Outbox,
                                                                   dict[str, np.ndarray]]:
        """:meth:`Party.setup` of every replica."""
        out = [p.setup(public_keys) for p in self.parties]
        return self._merged([o[0] for o in out]), self._graphs([o[1] for o in out])

    def forward(self, step: int, idx: Sequence[np.ndarray],
                inbox: Mapping[int, Mapping[str, np.ndarray]]) -> Outbox:
        """:meth:`Party.forward` of every replica on its rows ``idx[r]``."""
        return self._merged([p.forward(step, i, self._split(inbox, r))
                             for r, (p, i) in enumerate(zip(self.parties, idx, strict=True))])

    def share(self, inbox: Mapping[int, Mapping[str, np.ndarray]],
              ctv_shares: Sequence[np.ndarray]) -> Outbox:
        """:meth:`Party.share` of every replica with its CTV share ``ctv_shares[r]``."""
        return self._merged([p.share(self._split(inbox, r), g) for r, (p, g) in
                             enumerate(zip(self.parties, ctv_shares, strict=True))])

    def decode(self, inbox: Mapping[int, Mapping[str, np.ndarray]]
               ) -> tuple[Outbox, list[float]]:
        """:meth:`Party.decode` of every replica; the losses, replica 0's first."""
        out = [p.decode(self._split(inbox, r)) for r, p in enumerate(self.parties)]
        return self._merged([o[0] for o in out]), [o[1] for o in out]

    def gradient(self, step: int, inbox: Mapping[int, Mapping[str, np.ndarray]]) -> Outbox:
        """:meth:`Party.gradient` of every replica."""
        return self._merged([p.gradient(step, self._split(inbox, r))
                             for r, p in enumerate(self.parties)])

    def update(self, inbox: Mapping[int, Mapping[str, np.ndarray]]
               ) -> tuple[Outbox, dict[str, np.ndarray]]:
        """:meth:`Party.update` of every replica."""
        out = [p.update(self._split(inbox, r)) for r, p in enumerate(self.parties)]
        return self._merged([o[0] for o in out]), self._graphs([o[1] for o in out])


class PlainParty:
    """Party ``me`` of the plain framework (Fig. 1b; modes "framework" and "ctv").

    It holds its whole encoders ``W_me,t`` and sends the features ``H_me,t`` and receives their
    gradients in the clear (fixed point, as in :func:`core.train_reference`).
    """

    def __init__(self, me: int, x: np.ndarray, sizes: Sequence[int],
                 s: core.VFedCDSettings, prior: Masks | None = None) -> None:
        if s.secure:
            raise ValueError("PlainParty runs the ablations 'framework' and 'ctv' only")
        self.me, self.x, self.sizes, self.s, self.K = me, x, list(sizes), s, len(sizes)
        self.starts, self.prior = core.starts_of(sizes), prior
        self.W = [core.init_fragment(me, me, t, sizes, s.hidden, s.secure, s.seed, prior)
                  for t in range(self.K)]
        self.dec = init_decoder(me, sizes[me], s.hidden, s.dec_layers, s.loss, s.seed)
        self.memory: dict[Any, Any] = {"dec": []}  # optimizer memory (Adam's moments)
        self.tmp: dict[str, Any] = {}
        self.updates = 0

    def graph_fragments(self) -> list[np.ndarray]:
        """``B_t^me`` (d x d_t) for every t, plus Laplace noise if ``dp_b``."""
        st, K = self.starts, self.K
        noise = core.dp_noise(self.s.dp_b, self.s.seed, self.updates, self.me, st[-1])
        return [core.graph_fragment([self.W[t] if k == self.me else None for k in range(K)],
                                    t, st) + noise[:, st[t]:st[t + 1]] for t in range(K)]

    def forward(self, idx: np.ndarray) -> dict[int, np.ndarray]:
        """Integer features ``H_me,t = x^me W_me,t`` of the batch, addressed to each target t."""
        xq = core.quantize(core.inputs(self.x[idx]), self.s.frac)
        H = {t: core.features_q(xq, core.quantize(self.W[t], self.s.frac)) for t in range(self.K)}
        self.tmp = {"idx": idx, "xq": xq, "own": H.pop(self.me)}
        return H

    def decode(self, inbox: Mapping[int, np.ndarray]) -> tuple[np.ndarray, float]:
        """``Z_me = sum_k H_k,me``, decoder step; the integer feature gradient for every k."""
        s, idx = self.s, self.tmp["idx"]
        Z = self.tmp["own"] + sum(np.asarray(H).reshape(self.tmp["own"].shape)
                                  for H in inbox.values())
        self.dec, dZ, loss = train_decoder(self.dec, core.dequantize(Z, 2 * s.frac), self.x[idx],
                                           self.memory["dec"], **s.optimizer_args())
        gq = core.quantize(dZ, s.frac)
        self.tmp["gq"] = {self.me: gq}
        return gq, loss

    def update(self, inbox: Mapping[int, np.ndarray], ctv_share: np.ndarray) -> list[np.ndarray]:
        """Data + CTV gradients on every ``W_me,t``; the new graph fragments."""
        s, st, me = self.s, self.starts, self.me
        G = np.asarray(ctv_share, dtype=float)
        gq = {**{t: np.asarray(g).reshape(len(self.tmp["idx"]), self.sizes[t], s.hidden)
                 for t, g in inbox.items()}, **self.tmp["gq"]}
        for t in range(self.K):
            data = core.dequantize(core.encoder_grad_q(self.tmp["xq"], gq[t]), 2 * s.frac)
            ctv = core.norm_backward(self.W[t], G[st[me]:st[me + 1], st[t]:st[t + 1]])
            self.W[t] = core.update_fragment(self.W[t], data + ctv, me, t,
                                             self.memory.setdefault(t, {}),
                                             **_held(self.prior, self.sizes, me, t, s),
                                             **s.optimizer_args())
        self.tmp = {}
        self.updates += 1
        return self.graph_fragments()


def _held(prior: Masks | None, sizes: Sequence[int], k: int, t: int, s: core.VFedCDSettings
          ) -> dict[str, Any]:
    """The ``lambda1`` and ``keep`` of fragment (k, t)'s step: without knowledge the
    settings' ``lambda1``; with it no L1 on required rows and forbidden rows held at 0."""
    if prior is None:
        return {"lambda1": s.lambda1}
    return {"lambda1": s.lambda1 * core.block(core.penalised(prior), sizes, k, t)[..., None],
            "keep": core.block(core.kept(prior), sizes, k, t)[..., None]}


class CTV:
    """The Centralized Topology Validator: sees graph fragments only; with ``prior`` (block
    order) it zeroes the forbidden entries of B and sends no gradient on them nor on the
    required ones (:func:`core.ctv_gradient`)."""

    def __init__(self, sizes: Sequence[int], s: core.VFedCDSettings,
                 prior: Masks | None = None) -> None:
        self.sizes, self.s, self.K, self.prior = list(sizes), s, len(sizes), prior
        d = sum(sizes)
        self.lam2, self.frozen, self.step = 0.0, False, 0
        self.u = self.v = np.ones(d) / np.sqrt(d)
        self.B = np.zeros((d, d))
        self.rho = 0.0

    def receive(self, fragments: Mapping[int, Mapping[str, np.ndarray]]) -> np.ndarray:
        """``B = sum_k B^k`` from every party's ``B.t*``."""
        self.B = core.validated(core.assemble([sum(np.asarray(f[f"B.t{t}"], dtype=float)
                                                   for f in fragments.values())
                                               for t in range(self.K)]), self.prior)
        return self.B

    def shares(self) -> list[np.ndarray]:
        """This step's gradient shares of B (one per party); advances the step."""
        s = self.s
        G, self.rho, self.u, self.v = core.ctv_gradient(self.B, self.lam2, self.u, self.v,
                                                        s.power_iters, s.lambda_b, self.prior)
        out = core.split_gradient(G, self.K, core.rng_for(s.seed, "split", self.step), s.split,
                                  s.secure)
        self.step += 1
        return out

    def end_epoch(self) -> None:
        """lambda2 schedule on the current B."""
        s = self.s
        self.lam2, self.frozen = core.next_lambda2(self.lam2, self.frozen, self.B, ctv=s.ctv,
                                                   unfreeze=s.unfreeze, tau=s.tau,
                                                   dag_tol=s.dag_tol, gamma=s.gamma,
                                                   prior=self.prior)


def deliver(outboxes: Mapping[int, Outbox]) -> dict[int, dict[int, dict[str, np.ndarray]]]:
    """The relay: ``{src: {dst: msg}}`` -> ``{dst: {src: msg}}``."""
    inboxes: dict[int, dict[int, dict[str, np.ndarray]]] = {}
    for src, box in outboxes.items():
        for dst, msg in box.items():
            inboxes.setdefault(dst, {})[src] = msg
    return inboxes


def run_local(xs: Sequence[np.ndarray], s: core.VFedCDSettings, backend: Mock, epochs: int,
              log: list | None = None, steps: int | None = None,
              clock: dict[str, float] | None = None, prior: Masks | None = None
              ) -> tuple[list[Party], CTV]:
    """The whole protocol in one process (relay = :func:`deliver`); ``log`` keeps messages.

    ``steps`` stops after that many mini-batch steps (for timing a fraction of an epoch).
    ``clock`` gets the parties' compute seconds over the steps: ``total`` (one after the other,
    as here), ``critical`` (the slowest party of each phase: parties on their own machines)
    and ``cpu`` (the process's CPU seconds in the phases, blind to other processes' load).
    Returns the run's parties and CTV (replica 0; :func:`run_replicas` gives every replica's).
    """
    parties, ctvs = run_replicas(xs, s, backend, epochs, log, steps, clock, prior)
    return [p.parties[0] for p in parties], ctvs[0]


def run_replicas(xs: Sequence[np.ndarray], s: core.VFedCDSettings, backend: Mock, epochs: int,
                 log: list | None = None, steps: int | None = None,
                 clock: dict[str, float] | None = None, prior: Masks | None = None
                 ) -> tuple[list[Replicas], list[CTV]]:
    """:func:`run_local` of a run and its ``s.replicas`` replicas, every replica's arrays in
    the same relayed messages; each party's :class:`Replicas` and each replica's CTV."""
    sizes, K, copies = [x.shape[1] for x in xs], len(xs), s.replicas + 1
    parties = [Replicas(k, x, sizes, s, backend, prior=prior) for k, x in enumerate(xs)]
    ctvs = [CTV(sizes, core.replica_settings(s, r), prior) for r in range(copies)]
    keys = {p.me: p.public_key() for p in parties}
    setup = {p.me: p.setup(keys) for p in parties}
    enc = deliver({k: v[0] for k, v in setup.items()})
    receive(ctvs, {k: v[1] for k, v in setup.items()})

    def relay(phase: str, boxes: dict[int, Outbox]) -> dict:
        if log is not None:
            log.append((phase, boxes))
        return deliver(boxes)

    def each(phase: str, args: Mapping[int, tuple]) -> dict[int, Any]:
        out, slowest = {}, 0.0
        for p in parties:
            t0, c0 = time.perf_counter(), time.process_time()
            out[p.me] = getattr(p, phase)(*args[p.me])
            slowest = max(slowest, time.perf_counter() - t0)
            if clock is not None:
                clock["total"] = clock.get("total", 0.0) + time.perf_counter() - t0
                clock["cpu"] = clock.get("cpu", 0.0) + time.process_time() - c0
        if clock is not None:
            clock["critical"] = clock.get("critical", 0.0) + slowest
        return out

    step = 0
    for epoch in range(epochs):
        for b in range(len(core.batches(len(xs[0]), s.batch, s.seed, epoch))):
            if steps is not None and step >= steps:
                return parties, ctvs
            idx = parties[0].batches(epoch, b)
            fwd = relay("forward", each("forward", {k: (step, idx, enc.get(k, {}))
                                                    for k in range(K)}))
            G = [c.shares() for c in ctvs]
            zs = relay("share", each("share", {k: (fwd.get(k, {}), [g[k] for g in G])
                                               for k in range(K)}))
            dz = relay("decode", {k: v[0] for k, v in each(
                "decode", {k: (zs.get(k, {}),) for k in range(K)}).items()})
            gr = relay("gradient", each("gradient", {k: (step, dz.get(k, {}))
                                                     for k in range(K)}))
            up = each("update", {k: (gr.get(k, {}),) for k in range(K)})
            enc = relay("update", {k: v[0] for k, v in up.items()})
            receive(ctvs, {k: v[1] for k, v in up.items()})
            step += 1
        for c in ctvs:
            c.end_epoch()
    return parties, ctvs


def receive(ctvs: Sequence[CTV], graphs: Mapping[int, Mapping[str, np.ndarray]]) -> None:
    """Each replica's CTV takes its graph fragments (``r<replica>.B.t*``, or bare ``B.t*``
    without replicas) from every party's graphs."""
    if len(ctvs) == 1:
        ctvs[0].receive(graphs)
        return
    for r, c in enumerate(ctvs):
        pre = f"r{r}."
        c.receive({m: {k[len(pre):]: v for k, v in g.items() if k.startswith(pre)}
                   for m, g in graphs.items()})


def fragments_of(parties: Sequence[Party]) -> core.Fragments:
    """``F[i][k][t]`` gathered from the parties (for tests and the final graph)."""
    return [p.F for p in parties]
