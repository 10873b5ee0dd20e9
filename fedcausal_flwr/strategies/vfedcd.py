"""VFedCD strategy: the ServerApp is the CTV and the relay of every party-to-party message.

Parties are SuperNodes holding disjoint column blocks of the same aligned samples. Per
mini-batch step five phases run (``train.vfedcd_forward/share/decode/gradient/update``, see
:mod:`fedcausal_flwr.secure.dispatch`); the server only routes ciphertexts (uint8 rows of the
owner's key width, or uint64 under the ``mock`` backend) and masked uint64 shares, and reads
the graph fragments ``B_t^k`` (d x d_t) for the CTV step. Every party is needed: a party that
fails, disagrees or replies with a wrong array stops the run, and no graph is reported.

In the ablation modes "framework" and "ctv" (spec 2.4) three plain phases run per step
(``train.vfedcd_plain_forward/decode/update``): features ``H_kt`` and their gradients travel
in the clear through the relay, as the paper's plain framework sends them party to party.

Run-config keys (App defaults, :data:`RUN_CONFIG_DEFAULTS`; ``core.Settings`` keeps the
paper's values where they differ, in brackets): ``mode`` ("vfedcd" | "ctv" | "framework"),
``he-backend`` ("paillier" | "paillier-packed" | "mock"), ``key-bits`` (2048; smaller for tests
only), ``num-epochs`` (700 [500]), ``batch`` (16), ``lr`` (0.01), ``lambda1`` (5e-4 [5e-3]),
``gamma`` (5e-4 [0.006]), ``lambda-b`` (0), ``tau`` (0.6 [0.1]), ``dag-tol`` (0.01),
``hidden`` (10), ``decoder-layers`` (2), ``power-iters`` (15), ``sigma-phi`` (1e-3), ``split``
("dirichlet" | "exact"), ``frac-bits`` (16), ``dp-b`` (0: scale of the Laplace noise each party
adds to its graph fragments, the paper's DP variant), ``l2`` (5e-3 [0]: L2 on every weight,
spec 2.5 fallback), ``unfreeze`` (False: lambda2 grows again when ``B > tau`` turns cyclic),
``loss`` ("nll" ["mse"]: Gaussian NLL with a learned variance per attribute), ``seed`` (0),
data keys of :mod:`fedcausal_flwr.data.vertical`. The App defaults were chosen on development
data seeds (``simulations/results/vfedcd.md``, preset "slow").
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict
from typing import Any

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, RecordDict
from flwr.serverapp import Grid

from fedcausal_flwr.clients.vfedcd import settings_from_run_config
from fedcausal_flwr.core import vfedcd as core
from fedcausal_flwr.results import RunResult
from fedcausal_flwr.secure import dispatch
from fedcausal_flwr.secure.shares import backend as he_codec
from fedcausal_flwr.strategies.base import (
    CausalStrategy,
    NodeInfo,
    TooFewReplies,
    _last_line,
    array_bytes,
)

# App defaults: the paper's optimiser (SGD lr 0.01, batch 16, h 10) with the loss,
# regularisers, epochs, gamma and tau chosen on development data seeds 100-109
# (simulations/results/vfedcd.md, preset "slow"); core.Settings() keeps the paper's values.
RUN_CONFIG_DEFAULTS: dict[str, Any] = {
    "mode": "vfedcd", "he-backend": "paillier", "key-bits": 2048, "num-epochs": 700,
    "batch": 16, "lr": 0.01, "lambda1": 5e-4, "gamma": 0.0005, "lambda-b": 0.0, "tau": 0.6,
    "dag-tol": 0.01, "hidden": 10, "decoder-layers": 2, "power-iters": 15, "sigma-phi": 1e-3,
    "split": "dirichlet", "frac-bits": 16, "dp-b": 0.0, "l2": 5e-3, "unfreeze": False,
    "loss": "nll",
    "edges": 60, "n": 1000, "data-seed": 0,
    "parts": "", "test-fraction": 0.2,
}  # what the shared pyproject must declare for `flwr run` to accept these keys

Spec = tuple[tuple[int, ...], str]  # (shape, dtype) of one expected array


class ProtocolStopped(TooFewReplies):
    """A party failed or misbehaved: the protocol cannot go on without it."""


class VFedCD(CausalStrategy):
    """Vertical federated causal discovery with the secure dispatch protocol.

    Parameters
    ----------
    settings : core.Settings
        Model, optimiser and CTV settings (``mode`` must be "vfedcd").
    he_backend : str
        "paillier" or "mock" (same shares, no encryption).
    """

    algorithm = "vfedcd"
    progress_keys = ("loss", "rho", "lambda2", "frozen", "shd", "f1", "seconds")

    def __init__(self, settings: core.Settings | None = None, *, he_backend: str = "paillier",
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.s = settings or core.Settings()
        self.he_backend = he_backend
        self.complete = False
        self.B = None

    def config(self) -> dict[str, Any]:
        """Settings recorded in ``result.json``."""
        return {**super().config(), **asdict(self.s), "he_backend": self.he_backend}

    def expected_props(self, infos: Sequence[NodeInfo]) -> dict[str, Any]:
        """Every party must hold the same samples in the same order (count and digest)."""
        return {k: Counter(i.props.get(k) for i in infos).most_common(1)[0][0]
                for k in ("n", "samples", "backend")}

    def discover(self, grid: Grid) -> dict[int, NodeInfo]:
        """Base discovery, then: every party present, columns disjoint."""
        try:
            nodes = super().discover(grid)
        except TooFewReplies as e:
            raise ProtocolStopped(f"{e}; {'; '.join(self._dropped)}") from e
        k = max(i.num_partitions for i in nodes.values())
        if len(nodes) < k:
            missing = sorted(set(range(k)) - set(nodes))
            raise ProtocolStopped(f"parties {missing} missing or rejected (every party holds "
                                  f"attributes, all {k} are needed): {'; '.join(self._dropped)}")
        seen: dict[int, int] = {}
        for cid, info in sorted(nodes.items()):
            for c in str(info.props["columns"]).split(","):
                if int(c) in seen:
                    raise ProtocolStopped(f"attribute {c} is held by party {seen[int(c)]} and "
                                          f"party {cid}; parties must hold disjoint attributes")
                seen[int(c)] = cid
        return nodes

    def setup(self, nodes: Mapping[int, NodeInfo]) -> None:
        """Parties in partition-id order; sizes, columns and n from their properties."""
        self.cids = sorted(nodes)
        self.K = len(self.cids)
        self.cols = [np.array([int(c) for c in str(nodes[c].props["columns"]).split(",")])
                     for c in self.cids]
        self.sizes = [len(c) for c in self.cols]
        self.n = int(nodes[self.cids[0]].props["n"])
        self.ctv = dispatch.CTV(self.sizes, self.s)

    # ---- the relay ------------------------------------------------------------------------
    def relay(self, grid: Grid, phase: str, payloads: Mapping[int, tuple[list[np.ndarray],
                                                                         dict[str, Any]]],
              specs: Mapping[int, Sequence[Spec]]) -> tuple[dict[int, list[np.ndarray]],
                                                           dict[int, dict[str, Any]]]:
        """``train.vfedcd_<phase>`` to every party; any missing or malformed reply stops."""
        contents = {}
        for me, (arrays, cfg) in payloads.items():
            self._bytes["down"] += array_bytes(arrays)
            contents[self.nodes[self.cids[me]].node_id] = RecordDict({
                "arrays": ArrayRecord([np.asarray(a) for a in arrays]),
                "config": ConfigRecord({**cfg, "server-round": self._round})})
        replies = self._send(grid, contents, f"train.vfedcd_{phase}")
        arrays_out, metrics = {}, {}
        for me in payloads:
            who = f"party {self.cids[me]}"
            r = replies.get(self.nodes[self.cids[me]].node_id)
            if r is None or r.has_error():
                why = "no reply" if r is None else _last_line(r.error.reason)
                self.drop(who, f"{phase}: {why}")
                raise ProtocolStopped(f"{who} failed in phase {phase}: {why}")
            got = r.content["arrays"].to_numpy_ndarrays() if "arrays" in \
                r.content.array_records else []
            self._bytes["up"] += array_bytes(got)
            self.wire_log.append({"round": self._round, "phase": f"train.vfedcd_{phase}",
                                  "direction": "up", "node": r.metadata.src_node_id,
                                  "arrays": [(tuple(a.shape), str(a.dtype)) for a in got]})
            problem = spec_problem(got, specs[me])
            if problem:
                self.drop(who, f"{phase}: {problem}")
                raise ProtocolStopped(f"{who} sent a bad {phase} reply: {problem}")
            arrays_out[me] = got
            metrics[me] = dict(r.content["metrics"]) if "metrics" in r.content.metric_records \
                else {}
        return arrays_out, metrics

    def _cipher(self, owner: int, rows: int, cols: int) -> Spec:
        """Wire spec of ``rows x cols`` encrypted values under ``owner``'s key."""
        return self.codec.wire_spec(self.pks[owner], (rows, cols))

    def _peers(self, me: int) -> list[int]:
        return [i for i in range(self.K) if i != me]

    def _route(self, replies: Mapping[int, list[np.ndarray]], names_per_peer: int,
               skip_tail: int = 0) -> dict[int, dict[int, list[np.ndarray]]]:
        """``{src: packed arrays}`` -> ``{dst: {src: arrays for dst}}``."""
        out: dict[int, dict[int, list[np.ndarray]]] = {d: {} for d in range(self.K)}
        for src, arrays in replies.items():
            arrays = arrays[:len(arrays) - skip_tail]
            for j, dst in enumerate(self._peers(src)):
                out[dst][src] = arrays[j * names_per_peer:(j + 1) * names_per_peer]
        return out

    def _inbox(self, routed: Mapping[int, list[np.ndarray]]) -> list[np.ndarray]:
        return [a for src in sorted(routed) for a in routed[src]]

    def run_rounds(self, grid: Grid, result: RunResult) -> None:
        """The secure dispatch (mode "vfedcd") or the plain framework (the ablations)."""
        if self.s.secure:
            self._run_secure(grid, result)
        else:
            self._run_plain(grid, result)
        self.complete = True

    def _end_epoch(self, result: RunResult, epoch: int, t0: float, losses: list[float],
                   steps: int) -> None:
        """CTV: lambda2 schedule; one history row (with SHD/F1 when an evaluator is set)."""
        self.ctv.end_epoch()
        rec = {"round": self._round, "epoch": epoch + 1, "loss": float(sum(losses)),
               "rho": self.ctv.rho, "lambda2": self.ctv.lam2, "frozen": self.ctv.frozen,
               "steps": steps, "bytes_up": self._bytes["up"],
               "bytes_down": self._bytes["down"]}
        if self.evaluate_fn is not None:
            rec.update(self.evaluate_fn(self.estimates(final=True), self.cids))
        rec["seconds"] = time.time() - t0
        self.record_round(result, rec, label="epoch")

    def _steps(self, result: RunResult) -> Iterator[tuple[int, dict[str, int], list[float]]]:
        """Each mini-batch's (size, config, the epoch's loss list); an epoch's record after it."""
        step = 0
        for epoch in range(self.s.epochs):
            self._round += 1
            t0, losses = time.time(), []
            self._bytes = {"up": 0, "down": 0}
            batches = core.batches(self.n, self.s, epoch)
            for b, idx in enumerate(batches):
                yield len(idx), {"epoch": epoch, "batch": b, "step": step}, losses
                step += 1
            self._end_epoch(result, epoch, t0, losses, len(batches))

    def _run_plain(self, grid: Grid, result: RunResult) -> None:
        """Setup, then three relayed plain phases per mini-batch (features in the clear)."""
        K, sz, h = self.K, self.sizes, self.s.hidden
        d = sum(sz)
        graph_specs = {m: [((d, sz[t]), "float") for t in range(K)] for m in range(K)}
        cfg = {"sizes": ",".join(map(str, sz))}
        rep, _ = self.relay(grid, "plain_setup", {m: ([], {**cfg, "index": m})
                                                   for m in range(K)}, graph_specs)
        self._take_graph(rep)
        for nb, c, losses in self._steps(result):
            H, _ = self.relay(grid, "plain_forward", {m: ([], c) for m in range(K)},
                              {m: [((nb * sz[t] * h,), "int64") for t in self._peers(m)]
                               for m in range(K)})
            H = self._route(H, 1)
            G = self.ctv.shares()
            dz, met = self.relay(grid, "plain_decode", {m: (self._inbox(H[m]), c)
                                                        for m in range(K)},
                                 {m: [((nb * sz[m] * h,), "int64")] for m in range(K)})
            losses.append(sum(v["loss"] for v in met.values()) * nb / self.n)
            up, _ = self.relay(grid, "plain_update",
                               {m: ([dz[t][0] for t in self._peers(m)] + [G[m]], c)
                                for m in range(K)}, graph_specs)
            self._take_graph(up)

    def _run_secure(self, grid: Grid, result: RunResult) -> None:
        """Keys, setup, then five relayed phases per mini-batch; lambda2 per epoch."""
        K, sz, h = self.K, self.sizes, self.s.hidden
        d = sum(sz)
        keys, _ = self.relay(grid, "keys", {m: ([], {}) for m in range(K)},
                             {m: [((None,), "uint8")] for m in range(K)})
        self.codec = he_codec(self.he_backend)
        self.pks = {m: self.codec.public_from(keys[m][0]) for m in range(K)}
        frag_specs = {m: [self._cipher(m, sz[j], sz[t] * h) for j in self._peers(m)
                          for t in range(K)] + [((d, sz[t]), "float") for t in range(K)]
                      for m in range(K)}
        cfg = {"sizes": ",".join(map(str, sz))}
        rep, _ = self.relay(grid, "setup", {m: ([keys[i][0] for i in self._peers(m)],
                                               {**cfg, "index": m}) for m in range(K)},
                            frag_specs)
        frags = self._take_graph(rep)
        for nb, c, losses in self._steps(result):
            fwd, _ = self.relay(grid, "forward", {m: (self._inbox(frags[m]), c)
                                                  for m in range(K)},
                                {m: [self._cipher(i, nb, sz[t] * h) for i in self._peers(m)
                                     for t in range(K)] for m in range(K)})
            G = self.ctv.shares()
            fwd = self._route(fwd, K)
            zs, _ = self.relay(grid, "share", {m: (self._inbox(fwd[m]) + [G[m]], c)
                                               for m in range(K)},
                               {m: [((nb * sz[t] * h,), "uint64") for t in self._peers(m)]
                                for m in range(K)})
            zs = self._route(zs, 1)
            dz, met = self.relay(grid, "decode", {m: (self._inbox(zs[m]), c)
                                                  for m in range(K)},
                                 {m: [self._cipher(m, nb, sz[m] * h)] for m in range(K)})
            losses.append(sum(v["loss"] for v in met.values()) * nb / self.n)
            dzin = {m: [dz[t][0] for t in self._peers(m)] for m in range(K)}
            gr, _ = self.relay(grid, "gradient", {m: (dzin[m], c) for m in range(K)},
                               {m: [self._cipher(t, sz[m], sz[t] * h)
                                    for t in self._peers(m)] for m in range(K)})
            gr = self._route(gr, 1)
            up, _ = self.relay(grid, "update", {m: (self._inbox(gr[m]), c)
                                                for m in range(K)}, frag_specs)
            frags = self._take_graph(up)

    def _take_graph(self, replies: Mapping[int, list[np.ndarray]]
                    ) -> dict[int, dict[int, list[np.ndarray]]]:
        """CTV: B from the graph fragments; route the fragment ciphertexts."""
        self.ctv.receive({m: {f"B.t{t}": a[-self.K + t] for t in range(self.K)}
                          for m, a in replies.items()})
        self.B = self.ctv.B
        return self._route(replies, self.K, skip_tail=self.K)

    def estimates(self, final: bool | None = None) -> dict[str, np.ndarray]:
        """B (d x d, attributes in their global order) and the DAG, once the run completed."""
        if self.B is None or not (self.complete if final is None else final):
            return {}
        order = np.concatenate(self.cols)
        B = np.zeros_like(self.B)
        B[np.ix_(order, order)] = self.B
        return {"B": B, "dag": core.dag_at_threshold(B, self.s.tau)}


def spec_problem(arrays: Sequence[np.ndarray], specs: Sequence[Spec]) -> str | None:
    """Why a reply's arrays do not match ``specs`` (count, shape, dtype, finiteness)."""
    if len(arrays) != len(specs):
        return f"expected {len(specs)} arrays, got {len(arrays)}"
    for i, (a, (shape, dtype)) in enumerate(zip(arrays, specs, strict=True)):
        if len(a.shape) != len(shape) or any(w is not None and w != g
                                             for w, g in zip(shape, a.shape, strict=True)):
            return f"array {i} has shape {a.shape}, expected {shape}"
        if dtype == "float":
            if not np.issubdtype(a.dtype, np.floating) or not np.all(np.isfinite(a)):
                return f"graph fragment {i} is not a finite float array"
        elif a.dtype != np.dtype(dtype):
            return f"array {i} has dtype {a.dtype}, expected {dtype}"
    return None


def evaluator(rc: Mapping[str, Any], tau: float):
    """SHD (reversal = 1) and F1 of the DAG against the simulation's true graph."""
    from fedcausal_flwr.data.vertical import pooled_data
    from fedcausal_flwr.metrics import graph_metrics

    A = pooled_data(rc)[1]

    def evaluate(est: dict[str, np.ndarray], client_ids: list[int]) -> dict[str, Any]:  # noqa: ARG001
        if "dag" not in est:
            return {}
        m = graph_metrics(est["dag"], A)
        p, r = m["precision"], m["tpr"]
        return {"shd": m["shd_rev1"], "f1": 2 * p * r / (p + r) if p + r else 0.0,
                "nnz": m["nnz"]}

    return evaluate


def from_run_config(rc: Mapping[str, Any]) -> VFedCD:
    """The App's strategy for ``algorithm = "vfedcd"``."""
    s = settings_from_run_config(dict(rc))
    return VFedCD(s, he_backend=str(rc.get("he-backend", "paillier")),
                  min_nodes=int(rc.get("min-nodes", 2)),
                  node_wait_s=float(rc.get("node-wait-s", 60.0)),
                  timeout_s=float(rc.get("round-timeout-s", 600.0)),
                  evaluate_fn=evaluator(rc, s.tau))


def truth_for_plots(rc: Mapping[str, Any], result: Any) -> dict[str, np.ndarray]:  # noqa: ARG001
    """The true graph (named B, for the PNG of learned vs true)."""
    from fedcausal_flwr.data.vertical import pooled_data

    return {"B": pooled_data(rc)[1]}
