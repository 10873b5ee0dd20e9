"""VFedCD strategy: the ServerApp is the CTV and the relay of every party-to-party message.

Parties are SuperNodes holding disjoint column blocks of the same samples. Alignment: own CSVs
without a shared key align by private set intersection over the relay (``psi_blind`` and K - 1
``psi_hop`` exchanges, :meth:`VFedCD._psi`; the server sees only blinded points and sends each
party its positions of the shared values); otherwise each party reports its sample ids at
discovery (own CSVs with ``id-key``: keyed hashes, see :mod:`fedcausal_flwr.vertical.app`) and
the server intersects them. The first phase names each party's shared rows; every party trains
on them in the common order (rows outside the intersection stay unused).
The server sends every party the settings they must share
(:meth:`~fedcausal_flwr.settings.Settings.to_wire`, with the first phase), then per mini-batch
step five phases run (``train.vfedcd_forward/share/decode/gradient/update``, the secure dispatch of
:mod:`fedcausal_flwr.vertical.dispatch`); the server only routes ciphertexts (uint8 rows of the
owner's key width, or uint64 under the ``mock`` backend) and masked uint64 shares, and reads
the graph fragments ``B_t^k`` (d x d_t) for the CTV step. Every party is needed: a party that
fails, disagrees or replies with a wrong array (or a decode reply without its loss) stops the
run, and no graph is reported. A party keeps its key pair and fragments in ``context.state``, so
a restarted SuperNode cannot rejoin (``rejoinable = False``): a party that leaves the SuperLink
stops the run, named.

In the ablation modes "framework" and "ctv" (Table 3) three plain phases run per step
(``train.vfedcd_plain_forward/decode/update``): features ``H_kt`` and their gradients travel
in the clear through the relay, as the paper's plain framework sends them party to party.

Consent: every party checks the settings against its own
:class:`~fedcausal_flwr.vertical.model.PartyConsent` (secure only by default) and refuses the
first phase otherwise; parties report their consent at discovery, so a run that some party
would refuse stops before any key is made, naming every refusing party. Whatever crosses the
wire unprotected (the ``mock`` backend, the plain modes, test-only keys) is logged as a WARNING
once per run.

Replicas (``replicas`` R > 0, mode "vfedcd"): every message carries the arrays of the run and
of R replicas on complementary halves of the shared rows (each party derives the halves from
the shared ``seed``; within each peer's block replica by replica), so the exchanges are the
run's; the server keeps one CTV per replica (each sees only its replica's graph fragments) and
reports each edge's selection frequency over the replicas, the stable set and the bound on its
expected false edges (:func:`~fedcausal_flwr.vertical.model.edge_confidence`).

Prior knowledge (``forbid``, ``require``, ``tiers``, ``exogenous``): the server turns it into
masks over the parties' variable names at setup (an unknown name, a contradiction or a
required cycle fails the run there, before any round) and sends each party the masks (flat
indices, :meth:`~fedcausal_flwr.knowledge.Masks.to_config`) with the first phase and setup;
no name of another party's columns. Missing cells: each party reports the share of its cells
that are missing at discovery (over its rows) and in its first reply (over the shared rows);
a share above ``max-missing`` stops the run there, naming the party.

One round is one epoch; ``start(num_rounds=...)`` bounds the epochs (default: the settings'
``epochs``). Settings and their defaults: :class:`~fedcausal_flwr.vertical.model.VFedCDSettings`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import reduce
from logging import INFO, WARNING
from typing import Any

import numpy as np
from flwr.common.logger import log
from flwr.serverapp import Grid

from fedcausal_flwr.data.nodefiles import MAX_PSI_SET
from fedcausal_flwr.federation.limits import over_cap, prefix
from fedcausal_flwr.federation.strategy import (
    CausalStrategy,
    NodeInfo,
    ProtocolStopped,
    Spec,
    TooFewReplies,
)
from fedcausal_flwr.results import RunResult
from fedcausal_flwr.secure import psi
from fedcausal_flwr.secure.shares import backend as he_codec
from fedcausal_flwr.vertical import dispatch, wire
from fedcausal_flwr.vertical import model as core
from fedcausal_flwr.vertical.model import PartyConsent, VFedCDSettings

__all__ = ["VFedCD", "VFedCDSettings"]

LOSS = ("loss",)
"""The metric every party's decode reply carries: a reply without it stops the run, named."""
ALIGNMENT = {"ids": "sample ids (keyed hashes of own CSVs' IDs)",
             "psi": "private set intersection"}
"""How a party aligns its rows (its ``alignment`` property at discovery)."""
MISSING = ("missing",)
"""The metric of every party's first reply: its share of missing cells over the shared rows."""


class VFedCD(CausalStrategy):
    """Vertical federated causal discovery with the secure dispatch protocol.

    Parameters
    ----------
    settings : VFedCDSettings
        Model, optimiser, CTV and encryption settings (default: the App's).
    **kwargs
        ``evaluate_fn``, ``checkpoint`` and settings fields to change, e.g.
        ``VFedCD(he_backend="mock")`` (see
        :class:`~fedcausal_flwr.federation.strategy.CausalStrategy`).
    """

    unscreened = ("a party's own columns and the blocks it relays (vertical: no other party holds "
                  'them, so no robust rule can bound them)')

    algorithm = "vfedcd"
    settings_class = VFedCDSettings
    rejoinable = False  # keys, fragments and decoder live in the party's context.state
    round_label = "epoch"
    progress_keys = ("loss", "rho", "lambda2", "frozen", "shd", "f1", "seconds")

    def __init__(self, settings: VFedCDSettings | None = None, **kwargs: Any) -> None:
        super().__init__(settings, **kwargs)
        if self.settings.secure:  # a Paillier backend needs the vfedcd extra: say so now
            he_codec(self.settings.he_backend, self.settings.key_bits)
        self.complete = False
        self.B: np.ndarray | None = None

    def _reset(self) -> None:
        super()._reset()
        self.complete, self.B = False, None
        self.prior = self.block_prior = None
        self.missing: dict[str, float] = {}

    def expected_props(self, infos: Sequence[NodeInfo]) -> dict[str, Any]:
        """Nothing to agree on: the parties' sample ids are intersected in :meth:`discover`."""
        return {}

    def summary(self) -> None:
        """The settings, and a WARNING for whatever would cross the wire unprotected."""
        super().summary()
        for line in self.settings.exposure():
            log(WARNING, "%s: %s", type(self).__name__, line)

    def discover(self, grid: Grid) -> dict[int, NodeInfo]:
        """Base discovery, then: every party present, columns disjoint, every party's
        reported consent covers the settings."""
        try:
            nodes = super().discover(grid)
        except TooFewReplies as e:
            raise ProtocolStopped(f"{e}; {'; '.join(self.recorder.dropped)}") from e
        k = max(i.num_partitions for i in nodes.values())
        missing, extra = sorted(set(range(k)) - set(nodes)), sorted(set(nodes) - set(range(k)))
        if missing:
            dropped = "; ".join(self.recorder.dropped)
            raise ProtocolStopped(f"parties {missing} missing or rejected (every party holds "
                                  f"attributes, all {k} are needed): {dropped}")
        if extra:
            raise ProtocolStopped(f"partition ids {extra} are not below num-partitions={k}")
        sizes = {f"party {cid} (node {info.node_id})": len(str(info.props["columns"]).split(","))
                 for cid, info in sorted(nodes.items())}  # each within the cap: parse_info
        if why := over_cap(sum(sizes.values()), "the parties' attributes", sizes,
                           "columns per party"):
            raise ProtocolStopped(why)
        seen: dict[int, int] = {}
        total = sum(sizes.values())
        for cid, info in sorted(nodes.items()):
            for c in str(info.props["columns"]).split(","):
                if not c.strip().isdigit() or int(c) >= total:
                    raise ProtocolStopped(f"party {cid} (node {info.node_id}) reports column "
                                          f"{prefix(c)}, not an attribute index in [0, {total})")
                if int(c) in seen:
                    raise ProtocolStopped(f"attribute {c} is held by party {seen[int(c)]} and "
                                          f"party {cid}; parties must hold disjoint attributes")
                seen[int(c)] = cid
        named: dict[str, int] = {}
        for cid, info in sorted(nodes.items()):
            names = str(info.props.get("names", "")).split(",") if info.props.get("names") \
                else []
            for n in names:
                if n in named:
                    raise ProtocolStopped(f"attribute name {prefix(n)} is used by party "
                                          f"{named[n]} "
                                          f"and party {cid}; names must be distinct")
                named[n] = cid
        refused = []
        for cid, info in sorted(nodes.items()):
            try:
                consent = PartyConsent.from_properties(info.props)
            except ValueError:
                consent = None  # the party checks for itself in the first phase
            why = consent.refusals(self.settings) if consent is not None else []
            if why:
                refused.append(f"party {cid} refuses: {'; '.join(why)}")
        if refused:
            raise ProtocolStopped(f"{'; '.join(refused)} (each party's node config states what "
                                  "it accepts; a party with its own data never takes consent "
                                  "from the run config)")
        self._check_missing({cid: info.props.get("missing", 0.0)
                             for cid, info in nodes.items()}, "of its rows")
        self.nodes = nodes  # the roster the alignment's exchanges (PSI) send to
        self.shared_of = self._shared_ids(grid, nodes)
        return nodes

    def _check_missing(self, shares: Mapping[int, Any], over: str) -> dict[str, float]:
        """``{"m": share}`` of missing cells by party id; a share above ``max-missing`` stops
        the run naming the party, its share and the key (a party's columns cannot be
        dropped)."""
        out = {str(cid): float(v) for cid, v in sorted(shares.items())}
        limit = self.settings.max_missing
        over_limit = [f"party {cid} has {v:.1%} of its cells missing ({over})"
                      for cid, v in out.items() if not v <= limit]
        if over_limit:
            raise ProtocolStopped(
                f"{'; '.join(over_limit)}, above {self.settings.app_key('max-missing')!r} = "
                f"{limit:g}; in vertical FL a party's columns are the graph's, so it cannot be "
                "left out: fill its gaps or raise the limit")
        return out

    def _shared_ids(self, grid: Grid, nodes: Mapping[int, NodeInfo]) -> dict[int, np.ndarray]:
        """Per party, what its first phase names as its shared rows: the sorted sample ids every
        party holds (keyed hashes or the built-in parties' ids), or, where the parties align by
        private set intersection, its own positions of the shared values (:meth:`_psi`).
        Parties that align differently, or fewer than 2 shared samples, stop the run."""
        how = {cid: str(info.props.get("alignment", "ids")) for cid, info in sorted(nodes.items())}
        if len(set(how.values())) > 1:
            raise ProtocolStopped(
                "the parties align their rows differently (" + ", ".join(
                    f"party {cid} by {ALIGNMENT[a]}" for cid, a in how.items()) + "): every "
                "party must set node config id-key (keyed hash) or none must (private set "
                "intersection)")
        sizes = {cid: int(info.props["n"]) for cid, info in sorted(nodes.items())}
        if set(how.values()) == {"psi"}:
            self._check_psi_limits(nodes, sizes)
            shared_of = self._psi(grid, sizes)
        else:
            held = {cid: np.asarray(info.props.get("ids", []), dtype=np.int64)
                    for cid, info in sorted(nodes.items())}
            shared = reduce(np.intersect1d, held.values())
            shared_of = dict.fromkeys(held, shared)
        n = len(shared_of[min(shared_of)])
        counts = ", ".join(f"party {cid} {k}" for cid, k in sizes.items())
        if n < 2:
            hint = ("do all parties use the same ID column?" if set(how.values()) == {"psi"}
                    else "do all parties use the same id-key and ID column?")
            raise ProtocolStopped(f"the parties share {n} sample ids ({counts}); need at least "
                                  f"2 (own CSVs: {hint})")
        dropped = {cid: k - n for cid, k in sizes.items() if k > n}
        log(INFO, "VFedCD: %d samples shared by all parties (%s, aligned by %s)%s", n, counts,
            ALIGNMENT[how[min(how)]], "; rows outside the intersection are not used: " +
            ", ".join(f"party {cid} drops {k}" for cid, k in dropped.items()) if dropped else "")
        self.dropped_rows = dropped
        self.aligned_by = how[min(how)]  # "psi" or "ids" (ALIGNMENT)
        return shared_of

    def _check_psi_limits(self, nodes: Mapping[int, NodeInfo], sizes: Mapping[int, int]
                          ) -> None:
        """Stop before any PSI exchange when a party's set is larger than another party's
        limit (node config ``max-psi-set``, reported at discovery; each party also refuses
        such a set itself before any work per point), naming both parties and the key."""
        over = []
        for cid, info in sorted(nodes.items()):
            limit = info.props.get(MAX_PSI_SET)
            if limit is None:
                continue  # the party checks for itself at its hop
            for other, n in sorted(sizes.items()):
                if other != cid and n > int(limit):
                    over.append(f"party {other} holds {n} IDs, above party {cid}'s limit "
                                f"of {int(limit)}")
        if over:
            raise ProtocolStopped(
                f"private set intersection refused: {'; '.join(over)} (node config "
                f"{MAX_PSI_SET!r} of each party bounds the sets it re-blinds; the run config "
                "cannot raise it)")

    def _psi(self, grid: Grid, sizes: Mapping[int, int]) -> dict[int, np.ndarray]:
        """Private set intersection over the relay (:mod:`fedcausal_flwr.secure.psi`), K
        exchanges: every party blinds its permuted set (``psi_blind``) and commits to its
        key, then at hop h = 1..K-1 party j multiplies the set that started at party
        (j - h) mod K by its key and proves it did (``psi_hop``); the fully blinded sets give
        each party's positions of the shared values in the common order. The server sees
        only blinded points, the commitments and the proofs (what it learns:
        docs/threat-model.md).

        Against a deviating party the server checks every set it gets before it relays it:
        the count (the reply specs), distinct points of the group (:func:`~fedcausal_flwr.
        secure.psi.points_problem`) for a party's own set, and each hop's proof
        (:func:`~fedcausal_flwr.secure.psi.hop_proof_ok`): a party that reorders, replaces
        or drops points of another party's set, or blinds it with another key, stops the run
        named. The server checks the K sets of an exchange in K threads where it has the
        cores."""
        K = len(sizes)
        node = {cid: info.node_id for cid, info in self.nodes.items()}
        # the sets' checks side by side: libsodium's calls run outside the GIL (cffi)
        workers = max(1, min(K, os.cpu_count() or 1))

        def parallel(fn, items):
            with ThreadPoolExecutor(workers) as pool:
                return list(pool.map(fn, items))

        def who(j: int) -> str:
            return f"party {j} (node {node[j]})"

        def ask(phase: str, sent: Mapping[int, tuple[list[np.ndarray], dict[str, Any]]],
                of: Mapping[int, int], extra: str, nbytes: int
                ) -> dict[int, tuple[np.ndarray, bytes]]:
            """Each party j's blinded set, ``sizes[of[j]]`` points, and its ``extra``."""
            lay = {j: wire.layout(phase, "up", j, K, spec=lambda name, *_, n=sizes[of[j]]: (
                ((n, psi.POINT_BYTES) if name == "psi" else (nbytes,)), "uint8"))
                for j in range(K)}
            got = self.channel.run(phase, sent, {j: lay[j].specs() for j in range(K)},
                                   every=True)
            out = {}
            for j, arrays in got.items():
                named = lay[j].unpack(arrays)
                out[j] = (named["psi"], np.asarray(named[extra], dtype=np.uint8).tobytes())
            return out

        down = {j: wire.layout("vfedcd_psi_hop", "down", j, K) for j in range(K)}
        first = ask("vfedcd_psi_blind", {m: ([], {}) for m in range(K)},
                    {m: m for m in range(K)}, "psi_key", psi.POINT_BYTES)
        problems = parallel(lambda m: psi.points_problem(first[m][0]), range(K))
        bad = [f"in the blinded set {who(m)} sent, {problem}"
               for m, problem in enumerate(problems) if problem]
        bad += [f"{who(m)} sent an invalid key commitment" for m, (_, key) in
                sorted(first.items()) if psi.points_problem(
                    np.frombuffer(key, dtype=np.uint8).reshape(1, -1))]
        if bad:
            raise ProtocolStopped(f"private set intersection: {'; '.join(bad)} (a party's "
                                  "own set must be distinct points of the group); nothing "
                                  "was relayed")
        committed = {m: key for m, (_, key) in first.items()}
        sets = {m: pts for m, (pts, _) in first.items()}
        for h in range(1, K):
            start = {j: (j - h) % K for j in range(K)}
            rep = ask("vfedcd_psi_hop", {j: (down[j].pack({"psi": sets[start[j]]}),
                                             {dispatch.PSI_HOP: h}) for j in range(K)},
                      start, "psi_proof", psi.PROOF_BYTES)
            proved = parallel(lambda a: psi.hop_proof_ok(*a), [
                (sets[start[j]], rep[j][0], committed[j], rep[j][1],
                 psi.hop_label(h, start[j], j, K)) for j in range(K)])
            bad = [f"{who(j)} at hop {h}, on party {start[j]}'s set"
                   for j in range(K) if not proved[j]]
            if bad:
                raise ProtocolStopped(
                    f"private set intersection: {'; '.join(bad)}: the set it returned is "
                    "not the set it got times its committed key, position by position (points "
                    "reordered, replaced or outside the group, or another key); nothing of "
                    "it was relayed")
            sets = {start[j]: rep[j][0] for j in range(K)}
        positions = psi.common_positions([sets[m] for m in range(K)])
        return dict(enumerate(positions))

    def setup(self, nodes: Mapping[int, NodeInfo]) -> None:
        """Party m is partition id m; sizes, columns and n from their properties."""
        self.K = len(nodes)
        self.cols = [np.array([int(c) for c in str(nodes[m].props["columns"]).split(",")])
                     for m in range(self.K)]
        self.sizes = [len(c) for c in self.cols]
        d = sum(self.sizes)
        self.variables = [f"x{i}" for i in range(d)]
        for m in range(self.K):  # each party names its own columns; global index order
            names = str(nodes[m].props.get("names") or "").split(",")
            if len(names) == len(self.cols[m]) and all(names):
                for c, n in zip(self.cols[m], names, strict=True):
                    if 0 <= c < d:
                        self.variables[c] = n
        self.n = len(self.shared_of[0])
        self.copies = self.settings.replicas + 1
        order = np.concatenate(self.cols)
        self.prior = core.prior_masks(self.settings, self.variables)  # errors before round 1
        self.block_prior = None if self.prior is None else self.prior.subset(order, 0, d)
        self.ctvs = [dispatch.CTV(self.sizes, core.replica_settings(self.settings, r),
                                  self.block_prior) for r in range(self.copies)]
        self.ctv = self.ctvs[0]  # the run's own (replica 0)

    def done(self) -> bool:
        """The settings' epochs are done."""
        return self.recorder.round >= self.settings.epochs

    # ---- routing between parties ---------------------------------------------------------
    def _cipher(self, owner: int, rows: int, cols: int) -> Spec:
        """Wire spec of ``rows x cols`` encrypted values under ``owner``'s key."""
        return self.codec.wire_spec(self.pks[owner], (rows, cols))

    def _peers(self, me: int) -> list[int]:
        return [i for i in range(self.K) if i != me]

    def _spec(self, m: int, nbs: Sequence[int]) -> wire.SpecOf:
        """The spec of each array of party m's replies for mini-batches of ``nbs[r]`` rows
        (replica r); ``peer``: the array's destination, ``t``: its target."""
        sz, h, d = self.sizes, self.settings.hidden, sum(self.sizes)
        of = {"pk": lambda j, r, t: ((None,), "uint8"),
              "frag": lambda j, r, t: self._cipher(m, sz[j], sz[t] * h),
              "B": lambda j, r, t: ((d, sz[t]), "float"),
              "he2ss_fwd": lambda j, r, t: self._cipher(j, nbs[r], sz[t] * h),
              "z": lambda j, r, t: ((nbs[r] * sz[j] * h,), "uint64"),
              "dz": lambda j, r, t: self._cipher(m, nbs[r], sz[m] * h),
              "he2ss_bwd": lambda j, r, t: self._cipher(j, sz[m], sz[j] * h),
              "H": lambda j, r, t: ((nbs[0] * sz[j] * h,), "int64"),
              "dH": lambda j, r, t: ((nbs[0] * sz[m] * h,), "int64")}
        return lambda name, j, r, t: of[name](j, r, t)

    def _ask(self, phase: str, down: Mapping[int, tuple[Mapping[str, Any], dict[str, Any]]],
             nbs: Sequence[int] | None = None, metrics: Sequence[str] = ()
             ) -> dict[int, dict[str, Any]]:
        """Send every party m its arrays ``down[m][0]`` by name
        (:data:`~fedcausal_flwr.vertical.wire.PHASES`) and config ``down[m][1]``; every
        party's reply by name (:func:`~fedcausal_flwr.vertical.wire.layout`; every party is
        needed)."""
        nbs = (0,) * self.copies if nbs is None else nbs
        K, C = self.K, len(nbs)
        replies = {m: wire.layout(phase, "up", m, K, C, self._spec(m, nbs)) for m in range(K)}
        sent = {m: (wire.layout(phase, "down", m, K, C).pack(arrays), config)
                for m, (arrays, config) in down.items()}
        got = self.channel.run(phase, sent, {m: lay.specs() for m, lay in replies.items()},
                               every=True, metrics=metrics)
        return {m: replies[m].unpack(arrays) for m, arrays in got.items()}

    def _setup_config(self, m: int) -> dict[str, Any]:
        """The shared settings, the parties' column counts and party m's index."""
        masks = {} if self.block_prior is None else self.block_prior.to_config()
        return {**self.settings.to_wire(), "sizes": ",".join(map(str, self.sizes)),
                "index": m, **masks}

    def _first_config(self, m: int) -> dict[str, Any]:
        """The first phase's: the setup config and party m's shared sample ids (sorted ids,
        or under PSI its positions of the shared values in the common order)."""
        return {**self._setup_config(m),
                dispatch.SHARED_IDS: [int(i) for i in self.shared_of[m]]}

    # ---- the protocol ---------------------------------------------------------------------
    def run_rounds(self, grid: Grid, result: RunResult) -> None:
        """The secure dispatch (mode "vfedcd") or the plain framework (the ablations)."""
        result.metrics["samples"] = {"shared": self.n, "unused": {
            f"party {cid}": k for cid, k in self.dropped_rows.items()},
            "aligned_by": getattr(self, "aligned_by", None)}
        if self.prior is not None:
            result.metrics["knowledge"] = {"forbidden": int(self.prior.forbid_W.sum()),
                                           "required": int(self.prior.require_W.sum())}
        if self.settings.secure:
            self._run_secure(grid, result)
        else:
            self._run_plain(grid, result)
        self.complete = True
        if self.copies > 1:
            result.metrics["stability"] = self.confidence()[1]

    def _epochs(self, result: RunResult
                ) -> Iterator[tuple[list[int], dict[str, int], list[float]]]:
        """One round per epoch: yields each mini-batch's (size per replica, config, the epoch's
        losses); after the epoch, every CTV's lambda2 step and the epoch's record (the base
        adds bytes, clients, evaluation, seconds)."""
        step = 0
        for rec in self.rounds(result):
            epoch = self.recorder.round - 1
            losses: list[float] = []
            batches = [core.replica_batches(self.n, self.settings, r, epoch)
                       for r in range(self.copies)]
            for b in range(len(batches[0])):
                yield ([len(rb[b]) for rb in batches], {"epoch": epoch, "batch": b,
                                                        "step": step}, losses)
                step += 1
            for ctv in self.ctvs:
                ctv.end_epoch()
            rec.update({"epoch": epoch + 1, "loss": float(sum(losses)), "rho": self.ctv.rho,
                        "lambda2": self.ctv.lam2, "frozen": self.ctv.frozen,
                        "steps": len(batches)})

    def _loss(self) -> float:
        """The parties' losses of the last decode phase (each reply carries one: checked by
        the exchange, which stops the run naming a party whose reply lacks it)."""
        return sum(v["loss"] for v in self.channel.reply_metrics.values())

    def _run_plain(self, grid: Grid, result: RunResult) -> None:
        """Setup, then three relayed plain phases per mini-batch (features in the clear)."""
        K = self.K
        rep = self._ask("vfedcd_plain_setup", {m: ({}, self._first_config(m)) for m in range(K)},
                        metrics=MISSING)
        self._take_missing(result)
        self._take_graph(rep)
        for nbs, c, losses in self._epochs(result):
            H = self._ask("vfedcd_plain_forward", {m: ({}, c) for m in range(K)}, nbs)
            H = wire.routed({m: got["H"] for m, got in H.items()})
            G = self.ctv.shares()
            dz = self._ask("vfedcd_plain_decode", {m: ({"H": H[m]}, c) for m in range(K)}, nbs,
                           metrics=LOSS)
            losses.append(self._loss() * nbs[0] / self.n)
            up = self._ask("vfedcd_plain_update", {m: (
                {"dH": {f"p{t}.dH": dz[t]["dH"] for t in self._peers(m)}, "G": [G[m]]}, c)
                for m in range(K)}, nbs)
            self._take_graph(up)

    def _run_secure(self, grid: Grid, result: RunResult) -> None:
        """Keys, setup, then five relayed phases per mini-batch; lambda2 per epoch."""
        K, peers = self.K, self._peers
        keys = self._ask("vfedcd_keys", {m: ({}, self._first_config(m)) for m in range(K)},
                         metrics=MISSING)
        self._take_missing(result)
        self.codec = he_codec(self.settings.he_backend, self.settings.key_bits)
        self.pks = {m: self.codec.public_from(keys[m]["pk"]) for m in range(K)}
        rep = self._ask("vfedcd_setup", {m: (
            {"pk": {f"p{i}.pk": keys[i]["pk"] for i in peers(m)}}, self._setup_config(m))
            for m in range(K)})
        frags = self._take_graph(rep)
        for nbs, c, losses in self._epochs(result):
            fwd = self._ask("vfedcd_forward", {m: ({"frag": frags[m]}, c) for m in range(K)},
                            nbs)
            G = [ctv.shares() for ctv in self.ctvs]
            fwd = wire.routed({m: got["he2ss_fwd"] for m, got in fwd.items()})
            zs = self._ask("vfedcd_share", {m: ({"he2ss_fwd": fwd[m], "G": [g[m] for g in G]}, c)
                                            for m in range(K)}, nbs)
            zs = wire.routed({m: got["z"] for m, got in zs.items()})
            dz = self._ask("vfedcd_decode", {m: ({"z": zs[m]}, c) for m in range(K)}, nbs,
                           metrics=LOSS)
            losses.append(self._loss() * nbs[0] / self.n)
            dzin = {m: {"dz": {f"p{t}.{n}": a for t in peers(m) for n, a in dz[t]["dz"].items()}}
                    for m in range(K)}
            gr = self._ask("vfedcd_gradient", {m: (dzin[m], c) for m in range(K)}, nbs)
            gr = wire.routed({m: got["he2ss_bwd"] for m, got in gr.items()})
            up = self._ask("vfedcd_update", {m: ({"he2ss_bwd": gr[m]}, c) for m in range(K)})
            frags = self._take_graph(up)

    def _take_missing(self, result: RunResult) -> None:
        """The first replies' shares of missing cells over the shared rows, checked against
        ``max-missing`` (before any round) and kept as ``metrics["missing"]`` when some party
        has any (as FDBNL's)."""
        shares = self._check_missing(
            {cid: m["missing"] for cid, m in self.channel.reply_metrics.items()},
            "of the shared rows")
        if any(shares.values()):
            result.metrics["missing"] = shares

    def _take_graph(self, replies: Mapping[int, Mapping[str, Any]]
                    ) -> dict[int, dict[str, np.ndarray]]:
        """Each replica's CTV: its B from the graph fragments (``B``, replica by replica); the
        fragment ciphertexts (``frag``, secure runs) routed to their holders."""
        dispatch.receive(self.ctvs, {m: got["B"] for m, got in replies.items()})
        self.B = self.ctv.B
        return wire.routed({m: got["frag"] for m, got in replies.items() if "frag" in got})

    # ---- what the run reports -------------------------------------------------------------
    def _global(self, B: np.ndarray) -> np.ndarray:
        """``B`` (parties' block order) with the attributes in their global order."""
        order = np.concatenate(self.cols)
        out = np.zeros_like(B)
        out[np.ix_(order, order)] = B
        return out

    def confidence(self) -> tuple[dict[str, np.ndarray], dict[str, float]]:
        """The replicas' edge confidence (:func:`~fedcausal_flwr.vertical.model.edge_confidence`
        of replicas 1..R, global order): ``B_frequency``, ``B_stable`` and their metrics."""
        graphs = np.stack([self._global(c.B) for c in self.ctvs[1:]])
        return core.edge_confidence(graphs, self.settings.tau,
                                    self.settings.stability_threshold, self.prior)

    def graph(self) -> dict[str, np.ndarray]:
        """B (d x d, attributes in their global order) and its DAG at ``tau``; with replicas
        also each edge's selection frequency and the stable set (:meth:`confidence`); with
        knowledge its masks ``B_forbidden`` and ``B_required`` (0/1; the DAG holds every
        required edge and no forbidden one, B is 0 on the forbidden entries)."""
        if self.B is None:
            return {}
        B = self._global(self.B)
        out = {"B": B, "dag": core.dag_at_threshold(B, self.settings.tau, self.prior)}
        if self.copies > 1:
            out.update(self.confidence()[0])
        if self.prior is not None:
            out.update(B_forbidden=self.prior.forbid_W.astype(float),
                       B_required=self.prior.require_W.astype(float))
        return out

    def result_names(self) -> dict[str, Any]:
        """B, its DAG and the replicas' frequencies are over the d attributes in their global
        order (each party named its own columns)."""
        v = list(getattr(self, "variables", []))
        keys = ["B", "dag", *(["B_frequency", "B_stable"] if self.settings.replicas else []),
                *(["B_forbidden", "B_required"] if getattr(self, "prior", None) is not None
                  else [])]
        return {"variables": v, **dict.fromkeys(keys, v)} if v else {}

    def estimates(self) -> dict[str, np.ndarray]:
        """:meth:`graph` once the run completed; nothing from a stopped or running protocol."""
        return self.graph() if self.complete else {}

    def round_estimates(self) -> dict[str, np.ndarray]:
        """The evaluator scores each epoch's :meth:`graph`."""
        return self.graph()
