"""VFedCD client: one party of the secure dispatch protocol (its columns, keys, fragments).

Each ``train.vfedcd_<phase>`` message is one phase of :class:`secure.dispatch.Party` (mode
"vfedcd"), or of :class:`PlainParty` (the ablations "framework" and "ctv": features and their
gradients in the clear, spec 2.4); the party's state (fragments, decoder, key pair, received
ciphertexts) persists in ``context.state`` and never leaves the node. Arrays travel in the
canonical order of :func:`secure.dispatch.pack` (peers ascending, then names), so the relay
can route them.
"""

from __future__ import annotations

import hashlib
import pickle
from dataclasses import replace
from typing import Any

import numpy as np
from flwr.app import ConfigRecord, Context
from flwr.client import NumPyClient

from fedcausal_flwr.core import vfedcd as core
from fedcausal_flwr.data.vertical import checked_party
from fedcausal_flwr.secure import dispatch
from fedcausal_flwr.secure.shares import backend as make_backend

STATE_KEY = "vfedcd"


def sample_digest(ids: np.ndarray) -> str:
    """A digest of the aligned sample ids (same value at every party, or misaligned)."""
    return hashlib.sha256(np.asarray(ids, dtype=np.int64).tobytes()).hexdigest()[:16]


def settings_from_run_config(rc: dict[str, Any]) -> core.Settings:
    """Settings from the run config (hyphenated keys; see strategies.vfedcd)."""
    s = core.Settings()
    keys = {"hidden": "hidden", "dec_layers": "decoder-layers", "lr": "lr", "batch": "batch",
            "epochs": "num-epochs", "lambda1": "lambda1", "gamma": "gamma",
            "lambda_b": "lambda-b", "tau": "tau", "dag_tol": "dag-tol",
            "power_iters": "power-iters", "mode": "mode", "sigma_phi": "sigma-phi",
            "split": "split", "frac": "frac-bits", "dp_b": "dp-b", "seed": "seed", "l2": "l2",
            "unfreeze": "unfreeze", "loss": "loss"}
    return replace(s, **{f: type(getattr(s, f))(rc[k]) for f, k in keys.items() if k in rc})


class PlainParty:
    """Party ``me`` of the plain framework (spec 2.4, modes "framework" and "ctv").

    It holds its whole encoders ``W_me,t`` and sends the features ``H_me,t`` and receives their
    gradients in the clear (fixed point, as in :func:`core.train_reference`).
    """

    def __init__(self, me: int, x: np.ndarray, sizes: list[int], s: core.Settings) -> None:
        if s.secure:
            raise ValueError("PlainParty runs the ablations 'framework' and 'ctv' only")
        self.me, self.x, self.sizes, self.s, self.K = me, x, sizes, s, len(sizes)
        self.starts = core.starts_of(sizes)
        self.W = [core.init_fragment(me, me, t, sizes, s) for t in range(self.K)]
        self.dec = core.init_decoder(me, sizes[me], s)
        self.tmp: dict[str, Any] = {}
        self.updates = 0

    def graph_fragments(self) -> list[np.ndarray]:
        """``B_t^me`` (d x d_t) for every t, plus Laplace noise if ``dp_b``."""
        st, K = self.starts, self.K
        noise = core.dp_noise(self.s, self.updates, self.me, st[-1])
        return [core.graph_fragment([self.W[t] if k == self.me else None for k in range(K)],
                                    t, st) + noise[:, st[t]:st[t + 1]] for t in range(K)]

    def forward(self, idx: np.ndarray) -> dict[int, np.ndarray]:
        """Integer features ``H_me,t = x^me W_me,t`` of the batch, addressed to each target t."""
        xq = core.quantize(self.x[idx], self.s.frac)
        H = {t: core.features_q(xq, core.quantize(self.W[t], self.s.frac)) for t in range(self.K)}
        self.tmp = {"idx": idx, "xq": xq, "own": H.pop(self.me)}
        return H

    def decode(self, inbox: dict[int, np.ndarray]) -> tuple[np.ndarray, float]:
        """``Z_me = sum_k H_k,me``, decoder step; the integer feature gradient for every k."""
        s, idx = self.s, self.tmp["idx"]
        Z = self.tmp["own"] + sum(np.asarray(H).reshape(self.tmp["own"].shape)
                                  for H in inbox.values())
        self.dec, dZ, loss = core.decoder_step(core.decayed(self.dec, s),
                                               core.dequantize(Z, 2 * s.frac), self.x[idx], s.lr)
        gq = core.quantize(dZ, s.frac)
        self.tmp["gq"] = {self.me: gq}
        return gq, loss

    def update(self, inbox: dict[int, np.ndarray], ctv_share: np.ndarray) -> list[np.ndarray]:
        """Data + CTV gradients on every ``W_me,t``; the new graph fragments."""
        s, st, me = self.s, self.starts, self.me
        G = np.asarray(ctv_share, dtype=float)
        gq = {**{t: np.asarray(g).reshape(len(self.tmp["idx"]), self.sizes[t], s.hidden)
                 for t, g in inbox.items()}, **self.tmp["gq"]}
        for t in range(self.K):
            data = core.dequantize(core.encoder_grad_q(self.tmp["xq"], gq[t]), 2 * s.frac)
            ctv = core.norm_backward(self.W[t], G[st[me]:st[me + 1], st[t]:st[t + 1]])
            self.W[t] = core.update_fragment(self.W[t], data + ctv, me, t, s)
        self.tmp = {}
        self.updates += 1
        return self.graph_fragments()


class VFedCDClient(NumPyClient):
    """Party ``partition_id``: holds ``x`` (its columns of the aligned training samples)."""

    phases = tuple(f"vfedcd_{p}" for p in ("keys", "setup", "forward", "share", "decode",
                                           "gradient", "update", "plain_setup",
                                           "plain_forward", "plain_decode", "plain_update"))

    def __init__(self, x: np.ndarray, columns: np.ndarray, sample_ids: np.ndarray,
                 partition_id: int = 0, num_partitions: int = 1,
                 settings: core.Settings | None = None, he_backend: str = "paillier",
                 key_bits: int = 2048, context: Context | None = None) -> None:
        self.who = f"party {partition_id}"
        self.x = checked_party(x, self.who)
        self.columns = np.asarray(columns, dtype=int)
        if len(self.columns) != self.x.shape[1]:
            raise ValueError(f"{self.who}: {len(self.columns)} column ids for "
                             f"{self.x.shape[1]} columns")
        if len(sample_ids) != len(self.x):
            raise ValueError(f"{self.who}: {len(sample_ids)} sample ids for {len(self.x)} rows")
        self.ids = np.asarray(sample_ids)
        self.partition_id, self.num_partitions = int(partition_id), int(num_partitions)
        self.s = settings or core.Settings()
        self.backend = make_backend(he_backend, key_bits)
        self.context = context
        self._state: dict[str, Any] = {}
        if context is not None and STATE_KEY in context.state.config_records:
            self._state = pickle.loads(context.state[STATE_KEY]["blob"])

    @classmethod
    def from_context(cls, context: Context) -> VFedCDClient:
        """This node's party from the run config; node config may override for tests:
        ``columns`` (comma list), ``sample-perm-seed`` (permute rows), ``drop-rows``."""
        from fedcausal_flwr.data.vertical import party_data

        rc, nc = dict(context.run_config), context.node_config
        pid, k = int(nc.get("partition-id", 0)), int(nc.get("num-partitions", 1))
        try:
            x, _, cols = party_data(rc, pid, k)
        except ValueError as e:
            raise ValueError(f"party {pid}: {e}") from e
        if "columns" in nc:
            from fedcausal_flwr.data.vertical import pooled_data, split_standardised
            cols = np.array([int(c) for c in str(nc["columns"]).split(",")])
            x, _ = split_standardised(pooled_data(rc)[0][:, cols],
                                      float(rc.get("test-fraction", 0.2)))
        ids = np.arange(len(x))
        if "sample-perm-seed" in nc:
            perm = np.random.default_rng(int(nc["sample-perm-seed"])).permutation(len(x))
            x, ids = x[perm], ids[perm]
        if int(nc.get("drop-rows", 0)):
            x, ids = x[:-int(nc["drop-rows"])], ids[:-int(nc["drop-rows"])]
        if "corrupt" in nc:
            x = x.copy()
            x[0, 0] = np.nan
        return cls(x, cols, ids, pid, k, settings_from_run_config(rc),
                   str(rc.get("he-backend", "paillier")), int(rc.get("key-bits", 2048)),
                   context)

    def get_properties(self, config: dict[str, Any]) -> dict[str, Any]:
        """Who this party is: sample count and digest, its column ids (no data)."""
        return {"partition-id": self.partition_id, "num-partitions": self.num_partitions,
                "n": int(len(self.x)), "samples": sample_digest(self.ids),
                "columns": ",".join(str(c) for c in self.columns),
                "backend": self.backend.name}

    def _save(self) -> None:
        if self.context is not None:
            self.context.state[STATE_KEY] = ConfigRecord({"blob": pickle.dumps(self._state)})

    def _party(self) -> dispatch.Party | PlainParty:
        party = self._state.get("party")
        if party is None:
            raise ValueError(f"{self.who}: phase before setup (no protocol state on this node)")
        party.x, party.backend = self.x, self.backend
        return party

    def fit(self, parameters: list[np.ndarray], config: dict[str, Any]
            ) -> tuple[list[np.ndarray], int, dict[str, Any]]:
        """One protocol phase; arrays in and out in :func:`dispatch.pack` order."""
        phase = str(config.get("phase", "")).removeprefix("vfedcd_")
        n = len(self.x)
        if phase == "keys":
            pk, sk = self.backend.keypair()
            self._state = {"keys": (pk, sk)}
            self._save()
            return [self.backend.public_array(pk)], n, {}
        if phase == "setup":
            sizes = [int(v) for v in str(config["sizes"]).split(",")]
            me, K = int(config["index"]), len(sizes)
            if sizes[me] != self.x.shape[1]:
                raise ValueError(f"{self.who}: server says {sizes[me]} columns, holds "
                                 f"{self.x.shape[1]}")
            peers = [i for i in range(K) if i != me]
            keys = dict(zip(peers, parameters, strict=True))
            party = dispatch.Party(me, self.x, sizes, self.s, self.backend,
                                   self._state["keys"])
            box, graph = party.setup(keys)
            self._state = {"party": party}
            out = dispatch.pack(box, peers, dispatch.peer_names("frag", K))
            return out + [graph[f"B.t{t}"] for t in range(K)], n, self._finish()
        if phase.startswith("plain_"):
            return self._plain(phase.removeprefix("plain_"), parameters, config)
        party = self._party()
        K, me = party.K, party.me
        peers = [i for i in range(K) if i != me]
        if phase == "forward":
            idx = core.batches(n, self.s, int(config["epoch"]))[int(config["batch"])]
            inbox = dispatch.unpack(parameters, peers, dispatch.peer_names("frag", K))
            box = party.forward(int(config["step"]), idx, inbox)
            out = dispatch.pack(box, peers, dispatch.peer_names("he2ss_fwd", K))
        elif phase == "share":
            inbox = dispatch.unpack(parameters[:-1], peers, dispatch.peer_names("he2ss_fwd", K))
            out = dispatch.pack(party.share(inbox, parameters[-1]), peers, ["z"])
        elif phase == "decode":
            box, loss = party.decode(dispatch.unpack(parameters, peers, ["z"]))
            self._state["party"] = party
            return [box[peers[0]]["dz"]], n, {**self._finish(), "loss": loss}
        elif phase == "gradient":
            box = party.gradient(int(config["step"]), dispatch.unpack(parameters, peers, ["dz"]))
            out = dispatch.pack(box, peers, ["he2ss"])
        elif phase == "update":
            box, graph = party.update(dispatch.unpack(parameters, peers, ["he2ss"]))
            out = dispatch.pack(box, peers, dispatch.peer_names("frag", K))
            out += [graph[f"B.t{t}"] for t in range(K)]
        else:
            raise ValueError(f"{self.who}: unknown VFedCD phase {phase!r}")
        self._state["party"] = party
        return out, n, self._finish()

    def _plain(self, phase: str, parameters: list[np.ndarray], config: dict[str, Any]
               ) -> tuple[list[np.ndarray], int, dict[str, Any]]:
        """One phase of :class:`PlainParty`; arrays from and to peers in ascending order."""
        n = len(self.x)
        if phase == "setup":
            sizes = [int(v) for v in str(config["sizes"]).split(",")]
            me = int(config["index"])
            if sizes[me] != self.x.shape[1]:
                raise ValueError(f"{self.who}: server says {sizes[me]} columns, holds "
                                 f"{self.x.shape[1]}")
            self._state = {"party": PlainParty(me, self.x, sizes, self.s)}
            return self._state["party"].graph_fragments(), n, self._finish()
        party = self._party()
        if not isinstance(party, PlainParty):
            raise ValueError(f"{self.who}: plain phase {phase!r} in a secure run")
        peers = [i for i in range(party.K) if i != party.me]
        metrics: dict[str, Any] = {}
        if phase == "forward":
            idx = core.batches(n, self.s, int(config["epoch"]))[int(config["batch"])]
            H = party.forward(idx)
            out = [H[t].ravel() for t in peers]
        elif phase == "decode":
            gq, metrics["loss"] = party.decode(dict(zip(peers, parameters, strict=True)))
            out = [gq.ravel()]
        elif phase == "update":
            out = party.update(dict(zip(peers, parameters[:-1], strict=True)), parameters[-1])
        else:
            raise ValueError(f"{self.who}: unknown VFedCD phase 'plain_{phase}'")
        return out, n, {**self._finish(), **metrics}

    def _finish(self) -> dict[str, Any]:
        party = self._state["party"]
        party.x = None  # the data stay in the client, not in the pickled state
        self._save()
        party.x = self.x
        return {}


def from_context(context: Context) -> VFedCDClient:
    """The App's entry point for ``algorithm = "vfedcd"``."""
    return VFedCDClient.from_context(context)
