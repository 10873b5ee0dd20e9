"""VFedCD client: one party of the secure dispatch protocol (its columns, keys, fragments).

Each ``train.vfedcd_<phase>`` message is one phase of :class:`secure.dispatch.Party` (mode
"vfedcd"; held as :class:`secure.dispatch.Replicas`, which answers for the run and each of its
``replicas`` in one reply, replica by replica within each peer's block), or of
:class:`secure.dispatch.PlainParty` (the ablations "framework" and "ctv": features and their
gradients in the clear); :attr:`VFedCDClient.phases` names them. The
settings every party shares come from the server with the first phase (``keys`` or
``plain_setup``) and again with ``setup``; a party holds only its data. The party's state
(settings, fragments, decoder, key pair, received ciphertexts) persists in ``context.state``
as typed records (:mod:`~fedcausal_flwr.vertical.state`, no pickle) and never leaves the
node. Arrays travel by name (:func:`~fedcausal_flwr.vertical.wire.layout`: peers ascending,
then replicas, then names), so the relay can route them.

A user's ClientApp is one call plus the party's data::

    register(app, "vfedcd", lambda context: {"x": my_columns, "columns": my_column_ids,
                                             "sample_ids": my_sample_ids})

Consent: a party accepts only what its :class:`~fedcausal_flwr.vertical.model.PartyConsent`
allows, secure only by default (Paillier backends, mode "vfedcd", keys >= 2048 bits). The
node config keys ``vfedcd-accept-backends``, ``vfedcd-accept-modes`` and
``vfedcd-min-key-bits`` (set by whoever runs the SuperNode) widen or narrow it and win over
the constructor arguments ``accept_backends``, ``accept_modes`` and ``min_key_bits`` (set by
the ClientApp's code, e.g. in ``register``'s ``make``; the App passes the run config's only to
its built-in simulated parties, never to a party with its own data). A bad value names where
it came from (``node config 'vfedcd-accept-modes'``, or the argument). A server that asks
for more is refused in the first phase, before a key is made or anything is sent, with an
error naming the party, what was asked and what it accepts. Whatever would cross the wire
unprotected in an accepted run is logged once per run as a WARNING.
"""

from __future__ import annotations

from collections.abc import Sequence
from logging import WARNING
from typing import Any, NamedTuple

import numpy as np
from flwr.app import Context
from flwr.common.logger import log

from fedcausal_flwr.data.csvdata import standardized
from fedcausal_flwr.data.nodefiles import MAX_PSI_SET, Limits, limits
from fedcausal_flwr.federation.arrays import Layout
from fedcausal_flwr.federation.client import CausalClient, Fit
from fedcausal_flwr.knowledge import Masks
from fedcausal_flwr.names import checked_names, joined
from fedcausal_flwr.secure import psi
from fedcausal_flwr.secure.shares import Mock, described
from fedcausal_flwr.secure.shares import backend as make_backend
from fedcausal_flwr.vertical import dispatch, state, wire
from fedcausal_flwr.vertical import model as core
from fedcausal_flwr.vertical.data import (
    TRANSFORMS,
    checked_observed,
    checked_party,
    fitted_scaler,
)
from fedcausal_flwr.vertical.model import PartyConsent, VFedCDSettings

STATE_KEY = state.KEY
_ARGUMENT = {"vfedcd-accept-backends": "accept_backends", "vfedcd-accept-modes": "accept_modes",
             "vfedcd-min-key-bits": "min_key_bits"}
"""The constructor argument of each consent key."""


def shared_rows(ids: np.ndarray, shared: Sequence[int], who: str) -> np.ndarray:
    """Row of each shared ID in ``ids``, in the order of ``shared`` (the server's sorted
    intersection); a ValueError when the server names an ID this party does not hold."""
    ids = np.asarray(ids, dtype=np.int64)
    shared = np.asarray(shared, dtype=np.int64)
    order = np.argsort(ids, kind="stable")
    pos = np.searchsorted(ids, shared, sorter=order)
    pos = np.minimum(pos, len(ids) - 1)
    rows = order[pos]
    if len(shared) < 2 or not np.array_equal(ids[rows], shared):
        raise ValueError(f"{who}: the server's shared sample IDs are not a subset of this "
                         f"party's {len(ids)} IDs (or fewer than 2); refusing to align")
    return rows


class VFedCDClient(CausalClient):
    """Party ``partition_id``: holds ``x`` (its columns of the aligned training samples).

    Parameters
    ----------
    x : array (n x d_k)
        This party's columns, rows in the order of ``sample_ids``; NaN marks a missing cell
        (its share is reported, the limit is the server's ``max-missing``; the rule:
        :func:`~fedcausal_flwr.vertical.model.inputs` and
        :func:`~fedcausal_flwr.vertical.decoder.observed_loss`).
    columns : array of int
        Global attribute index of each column of ``x`` (disjoint across parties).
    sample_ids : array of int, or None
        Id of each row (int64, distinct; own CSVs with ``id-key``: keyed hashes of the IDs).
        The server intersects the parties' ids at discovery; each party then trains on the
        rows of the shared ids, in the server's (sorted) order, whatever the order of ``x``.
        None with ``psi_ids``.
    psi_ids : sequence of str, optional
        Each row's ID (distinct): the rows are aligned by private set intersection instead
        (phases ``psi_blind`` and ``psi_hop`` before the first,
        :mod:`fedcausal_flwr.secure.psi`); only blinded points of them leave the party.
    context : Context, optional
        The node's context, whose ``state`` keeps the protocol state between messages; its
        ``node_config`` consent keys win over the arguments below.
    accept_backends, accept_modes : str or sequence of str, optional
        HE backends and modes this party accepts (default: "paillier,paillier-packed" and
        "vfedcd", secure only); node config ``vfedcd-accept-backends`` and
        ``vfedcd-accept-modes`` win.
    min_key_bits : int, optional
        Smallest Paillier key this party accepts (default 2048); node config
        ``vfedcd-min-key-bits`` wins.
    consent_from : str
        Who gave the arguments above, for the log (the App's glue passes the run config).
    names : sequence of str, optional
        Labels of this party's columns, in the order of ``x`` (default ``x<global index>``);
        the server assembles the global list in the order of the attributes' global indices.
    transform : str, optional
        What this party does to its columns over the shared rows before training: "zscore" or
        "yeo-johnson" (:func:`~fedcausal_flwr.vertical.data.fitted_scaler`; the App passes the
        run config's ``transform``, default :class:`~fedcausal_flwr.vertical.data.VerticalData`);
        None (default) keeps ``x`` as given (the built-in parties arrive transformed over
        their training rows).
    """

    phases = {p: p.removeprefix("vfedcd_") for p in wire.PHASES}

    def __init__(self, x: np.ndarray, columns: np.ndarray, sample_ids: np.ndarray | None,
                 partition_id: int = 0, num_partitions: int = 1,
                 context: Context | None = None,
                 accept_backends: str | Sequence[str] | None = None,
                 accept_modes: str | Sequence[str] | None = None,
                 min_key_bits: int | None = None,
                 consent_from: str = "the ClientApp's arguments",
                 names: Sequence[str] | None = None, transform: str | None = None,
                 psi_ids: Sequence[str] | None = None) -> None:
        self.who = f"party {partition_id}"
        self.consent, self.consent_from = self._consent(
            {"vfedcd-accept-backends": accept_backends, "vfedcd-accept-modes": accept_modes,
             "vfedcd-min-key-bits": min_key_bits}, consent_from, context)
        self.x = checked_party(x, self.who)
        self.columns = np.asarray(columns, dtype=int)
        if len(self.columns) != self.x.shape[1]:
            raise ValueError(f"{self.who}: {len(self.columns)} column ids for "
                             f"{self.x.shape[1]} columns")
        self.names = (checked_names(names, len(self.columns), self.who) if names is not None
                      else [f"x{c}" for c in self.columns])
        self.ids, self.psi_ids = self._alignment(sample_ids, psi_ids)
        if transform is not None and transform not in TRANSFORMS:
            raise ValueError(f"{self.who}: transform {transform!r}: expected one of "
                             f"{', '.join(TRANSFORMS)} or None")
        self.transform = transform
        self.partition_id, self.num_partitions = int(partition_id), int(num_partitions)
        self.context = context
        # the most points of another party's set this party re-blinds: its node config only
        self.psi_max_set = (Limits.from_node_config(context.node_config) if context is not None
                            else limits()).max_psi_set
        self._state: dict[str, Any] = {}
        if context is not None:
            self._state = state.load(context.state, self.who)
        self.x_all = self.x
        if "rows" in self._state:
            self.x = self._aligned(self._state["rows"])

    def _alignment(self, sample_ids: np.ndarray | None, psi_ids: Sequence[str] | None
                   ) -> tuple[np.ndarray | None, list[str] | None]:
        """``(ids, psi_ids)``: exactly one of the two is given, one per row, distinct."""
        if (sample_ids is None) == (psi_ids is None):
            raise ValueError(f"{self.who}: give sample_ids or psi_ids (private set "
                             "intersection), exactly one")
        given = sample_ids if psi_ids is None else psi_ids
        if len(given) != len(self.x):
            raise ValueError(f"{self.who}: {len(given)} sample ids for {len(self.x)} rows")
        if psi_ids is not None:
            if len(set(psi_ids)) != len(psi_ids):
                raise ValueError(f"{self.who}: sample ids are not distinct")
            return None, [str(i) for i in psi_ids]
        ids = np.asarray(sample_ids, dtype=np.int64)
        if len(np.unique(ids)) != len(ids):
            raise ValueError(f"{self.who}: sample ids are not distinct")
        return ids, None

    def _aligned(self, rows: np.ndarray) -> np.ndarray:
        """This party's rows of the shared ids, mapped by ``transform`` fitted on them."""
        x = self.x_all[rows]
        if self.transform is None:
            return x
        where = f"{self.who}, its {len(x)} shared samples"
        if np.isnan(x).any():
            checked_observed(x, self.names, where)
        else:
            standardized(x, self.names, where)  # not constant
        return fitted_scaler(x, self.transform, self.names)(x)

    def _align(self, config: dict[str, Any]) -> np.ndarray:
        """First phase: keep the rows of the server's shared ids (kept in the state); under
        PSI the rows at the server's positions of this party's permuted list."""
        if self.psi_ids is None:
            rows = shared_rows(self.ids, config[dispatch.SHARED_IDS], self.who)
        else:
            perm = self._psi_state()["perm"]
            try:
                rows = psi.rows_of(perm, config[dispatch.SHARED_IDS], len(perm))
            except ValueError as e:
                raise ValueError(f"{self.who}: {e}; refusing to align") from None
            if len(rows) < 2:
                raise ValueError(f"{self.who}: fewer than 2 shared samples; refusing to align")
        self.x = self._aligned(rows)
        return rows

    def _consent(self, given: dict[str, Any], source: str, context: Context | None
                 ) -> tuple[PartyConsent, dict[str, str]]:
        """The consent from the arguments, the node config winning; who gave each key."""
        values = {k: ",".join(v) if isinstance(v, (list, tuple)) else v
                  for k, v in given.items() if v is not None}
        sources = dict.fromkeys(values, source)
        node = context.node_config if context is not None else {}
        for key in PartyConsent.keys():
            if key in node:
                values[key] = node[key]
                sources[key] = "node config"
        if isinstance(values.get("vfedcd-min-key-bits"), str) and \
                values["vfedcd-min-key-bits"].strip().isdigit():
            values["vfedcd-min-key-bits"] = int(values["vfedcd-min-key-bits"])
        try:  # each value named where it came from: a node config key is not the run config's
            for key, value in values.items():
                values[key] = PartyConsent.checked(key, value, (
                    f"node config {key!r}" if sources[key] == "node config"
                    else f"{_ARGUMENT[key]} (from {sources[key]})"))
            consent = PartyConsent.from_run_config(values)
        except ValueError as e:
            where = ", ".join(f"{k} from {v}" for k, v in sources.items())
            raise ValueError(f"{self.who}: bad consent setting ({where}): {e}") from e
        return consent, {k: sources.get(k, "the secure default") for k in PartyConsent.keys()}

    def _accept(self, s: VFedCDSettings) -> None:
        """Refuse what this party's consent does not allow; log, once per run (the first
        phase), what will cross the wire unprotected and whose consent allowed it."""
        self.consent.check(s, self.who)
        exposed = s.exposure()
        if exposed:
            key = ("vfedcd-accept-modes" if not s.secure else "vfedcd-min-key-bits"
                   if described(s.he_backend).encrypts else "vfedcd-accept-backends")
            for line in exposed:
                log(WARNING, "%s: %s (accepted by %r from %s)", self.who, line, key,
                    self.consent_from[key])

    @classmethod
    def context_arguments(cls, context: Context) -> dict[str, Any]:
        """The node's context: the protocol state lives in ``context.state``."""
        return {"context": context}

    def get_properties(self, config: dict[str, Any]) -> dict[str, Any]:
        """Who this party is: its sample ids (keyed hashes for own CSVs; none under private
        set intersection: ``alignment`` says which), its column ids and names, the share of
        its cells that are missing, its consent (no data)."""
        ids = ({"alignment": "psi", MAX_PSI_SET: self.psi_max_set} if self.ids is None
               else {"alignment": "ids", "ids": [int(i) for i in self.ids]})
        return {"partition-id": self.partition_id, "num-partitions": self.num_partitions,
                "n": int(len(self.x)), **ids,
                "columns": ",".join(str(c) for c in self.columns),
                "names": joined(self.names), "missing": core.missing_share(self.x),
                **self.consent.as_properties()}

    # ---- state ------------------------------------------------------------------------
    def _settings(self, config: dict[str, Any]) -> VFedCDSettings:
        """The shared settings the server sent; they must not change within a run."""
        s = VFedCDSettings.from_wire(config, self.who)
        before = self._state.get("settings")
        if before is not None and before != s:
            raise ValueError(f"{self.who}: the server changed the settings within a run")
        return s

    def _backend(self, s: VFedCDSettings) -> Mock:
        return make_backend(s.he_backend, s.key_bits)

    def _setup_sizes(self, config: dict[str, Any]) -> tuple[int, list[int]]:
        """(my index, every party's column count) as the server sent them."""
        sizes = [int(v) for v in str(config["sizes"]).split(",")]
        me = int(config["index"])
        if sizes[me] != self.x.shape[1]:
            raise ValueError(f"{self.who}: server says {sizes[me]} columns, holds "
                             f"{self.x.shape[1]}")
        return me, sizes

    def _party(self, kind: type) -> Any:
        party = self._state.get("party")
        if party is None:
            raise ValueError(f"{self.who}: phase before setup (no protocol state on this node)")
        if not isinstance(party, kind):
            raise ValueError(f"{self.who}: {kind.__name__} phase in a "
                             f"{'secure' if party.s.secure else 'plain'} run")
        party.x = self.x
        if isinstance(party, dispatch.Replicas):
            party.backend = self._backend(party.s)
        return party

    def _save(self, metrics: dict[str, Any] | None = None) -> dict[str, Any]:
        """Keep the state in ``context.state`` as typed records (:mod:`~fedcausal_flwr.
        vertical.state`; the data stay out of it); the metrics."""
        if self.context is not None:
            state.save(self.context.state, self._state)
        return metrics or {}

    def _batch(self, party: Any, config: dict[str, Any]) -> np.ndarray:
        s = party.s
        return core.batches(len(self.x), s.batch, s.seed, int(config["epoch"]))[
            int(config["batch"])]

    # ---- alignment by private set intersection (before the first phase) ----------------
    def _psi_state(self) -> dict[str, Any]:
        if self.psi_ids is None or "psi" not in self._state:
            raise ValueError(f"{self.who}: private set intersection phase or positions, but "
                             "this party aligns by sample ids or has not blinded its set")
        return self._state["psi"]

    def _layout(self, phase: str, direction: str, party: Any = None) -> Layout:
        """This party's arrays of ``phase`` by name (:func:`~fedcausal_flwr.vertical.wire.
        layout`; a message down is checked for its count)."""
        if party is None:
            return wire.layout(f"vfedcd_{phase}", direction, 0, 1)
        copies = getattr(party, "copies", 1)
        return wire.layout(f"vfedcd_{phase}", direction, party.me, party.K, copies)

    def _got(self, phase: str, parameters: list[np.ndarray], party: Any = None
             ) -> dict[str, Any]:
        """The message of ``phase`` by name; a ValueError naming this party otherwise."""
        try:
            return self._layout(phase, "down", party).unpack(parameters)
        except ValueError as e:
            raise ValueError(f"{self.who}: {e}") from None

    def psi_blind(self, parameters: list[np.ndarray], config: dict[str, Any]) -> Fit:
        """``train.vfedcd_psi_blind``: a fresh key and row order; the party's blinded set and
        its commitment to the key (:func:`~fedcausal_flwr.secure.psi.commitment`) out."""
        if self.psi_ids is None:
            raise ValueError(f"{self.who}: private set intersection asked, but this party "
                             "aligns by sample ids (node config id-key)")
        self._got("psi_blind", parameters)
        key, perm = psi.new_key(), psi.random_order(len(self.psi_ids))
        self._state = {"psi": {"key": key, "perm": perm, "hops": []}}
        out = psi.blinded(psi.hashed_points(self.psi_ids), key, perm)
        committed = np.frombuffer(psi.commitment(key), dtype=np.uint8).copy()
        return (self._layout("psi_blind", "up").pack({"psi": out, "psi_key": committed}),
                len(self.x), self._save())

    def psi_hop(self, parameters: list[np.ndarray], config: dict[str, Any]) -> Fit:
        """``train.vfedcd_psi_hop``: another party's set in, times this party's key out (same
        order) with the proof that it is (:func:`~fedcausal_flwr.secure.psi.hop_proof`); each
        hop 1..K-1 once per run. A set above this party's node config ``max-psi-set`` is
        refused before any work per point."""
        held = self._psi_state()
        h = int(config[dispatch.PSI_HOP])
        if not 1 <= h < self.num_partitions or h in held["hops"] or len(parameters) != 1:
            raise ValueError(f"{self.who}: private set intersection hop {h} refused (hops 1.."
                             f"{self.num_partitions - 1}, each once, one set; done: "
                             f"{held['hops']})")
        owner = (self.partition_id - h) % self.num_partitions
        got = np.asarray(self._got("psi_hop", parameters)["psi"])
        if got.ndim != 2 or len(got) > self.psi_max_set:  # before any work per point
            raise ValueError(
                f"{self.who}: hop {h}: party {owner}'s set of {len(got)} points (shape "
                f"{got.shape}) refused: above this party's limit of {self.psi_max_set} "
                f"(node config {MAX_PSI_SET!r})")
        held["hops"].append(h)
        try:
            out = psi.reblinded(got, held["key"])
        except ValueError as e:
            raise ValueError(f"{self.who}: hop {h}: {e}") from None
        proof = psi.hop_proof(got, out, held["key"], psi.hop_label(
            h, owner, self.partition_id, self.num_partitions))
        return (self._layout("psi_hop", "up").pack(
            {"psi": out, "psi_proof": np.frombuffer(proof, dtype=np.uint8).copy()}),
            len(self.x), self._save())

    # ---- secure dispatch phases (mode "vfedcd") ----------------------------------------
    def keys(self, parameters: list[np.ndarray], config: dict[str, Any]) -> Fit:
        """``train.vfedcd_keys``: the shared settings in; a fresh public key out."""
        self._got("keys", parameters)
        s = VFedCDSettings.from_wire(config, self.who)
        self._accept(s)
        rows = self._align(config)
        backend = self._backend(s)
        pk, sk = backend.keypair()
        self._state = {"settings": s, "keys": (pk, sk), "rows": rows}
        out = self._layout("keys", "up").pack({"pk": backend.public_array(pk)})
        return out, len(self.x), self._save(self._missing())

    def _missing(self) -> dict[str, float]:
        """The first phase's metric: the share of missing cells over the shared rows."""
        return {"missing": core.missing_share(self.x)}

    def setup(self, parameters: list[np.ndarray], config: dict[str, Any]) -> Fit:
        """``train.vfedcd_setup``: the others' keys in; encrypted fragments and graph out."""
        if "keys" not in self._state:
            raise ValueError(f"{self.who}: setup before keys (no key pair on this node)")
        s = self._settings(config)
        me, sizes = self._setup_sizes(config)
        got = self._got("setup", parameters, _Shape(me, len(sizes)))
        party = dispatch.Replicas(me, self.x, sizes, s, self._backend(s), self._state["keys"],
                                  Masks.from_config(config, sum(sizes)))
        keys = {j: msg["pk"] for j, msg in wire.by_peer(got["pk"]).items()}
        box, graph = party.setup(keys)
        self._state = {"settings": s, "party": party, "rows": self._state["rows"]}
        return self._fragments_out(party, box, graph), len(self.x), self._save()

    def forward(self, parameters: list[np.ndarray], config: dict[str, Any]) -> Fit:
        """``train.vfedcd_forward``: fragment ciphertexts in; HE2SS of ``x F`` out."""
        party = self._party(dispatch.Replicas)
        inbox = wire.by_peer(self._got("forward", parameters, party)["frag"])
        idx = party.batches(int(config["epoch"]), int(config["batch"]))
        box = party.forward(int(config["step"]), idx, inbox)
        out = self._layout("forward", "up", party).pack({"he2ss_fwd": wire.addressed(box)})
        return out, len(self.x), self._save()

    def share(self, parameters: list[np.ndarray], config: dict[str, Any]) -> Fit:
        """``train.vfedcd_share``: HE2SS and the CTV share in; ``z_me,t`` out."""
        party = self._party(dispatch.Replicas)
        got = self._got("share", parameters, party)
        box = party.share(wire.by_peer(got["he2ss_fwd"]), list(got["G"].values()))
        out = self._layout("share", "up", party).pack({"z": wire.addressed(box)})
        return out, len(self.x), self._save()

    def decode(self, parameters: list[np.ndarray], config: dict[str, Any]) -> Fit:
        """``train.vfedcd_decode``: shares of Z in; ``Enc(dZ)`` and the loss out."""
        party = self._party(dispatch.Replicas)
        box, losses = party.decode(wire.by_peer(self._got("decode", parameters, party)["z"]))
        out = self._layout("decode", "up", party).pack({"dz": box[_peers(party)[0]]})
        return out, len(self.x), self._save({"loss": losses[0]})

    def gradient(self, parameters: list[np.ndarray], config: dict[str, Any]) -> Fit:
        """``train.vfedcd_gradient``: the others' ``Enc(dZ)`` in; HE2SS of ``x^T dZ`` out."""
        party = self._party(dispatch.Replicas)
        box = party.gradient(int(config["step"]),
                             wire.by_peer(self._got("gradient", parameters, party)["dz"]))
        out = self._layout("gradient", "up", party).pack({"he2ss_bwd": wire.addressed(box)})
        return out, len(self.x), self._save()

    def update(self, parameters: list[np.ndarray], config: dict[str, Any]) -> Fit:
        """``train.vfedcd_update``: gradient shares in; new fragment ciphertexts and graph."""
        party = self._party(dispatch.Replicas)
        got = self._got("update", parameters, party)
        box, graph = party.update(wire.by_peer(got["he2ss_bwd"]))
        return self._fragments_out(party, box, graph), len(self.x), self._save()

    def _fragments_out(self, party: dispatch.Replicas, box: dispatch.Outbox,
                       graph: dict[str, np.ndarray]) -> list[np.ndarray]:
        """Fragment ciphertexts for every peer, then every replica's graph fragments."""
        return self._layout("update", "up", party).pack({"frag": wire.addressed(box),
                                                         "B": graph})

    # ---- plain framework phases (modes "framework" and "ctv") --------------------------
    def plain_setup(self, parameters: list[np.ndarray], config: dict[str, Any]) -> Fit:
        """``train.vfedcd_plain_setup``: the shared settings in; graph fragments out."""
        self._got("plain_setup", parameters)
        s = VFedCDSettings.from_wire(config, self.who)
        self._accept(s)
        rows = self._align(config)
        me, sizes = self._setup_sizes(config)
        party = dispatch.PlainParty(me, self.x, sizes, s,
                                    Masks.from_config(config, sum(sizes)))
        self._state = {"settings": s, "party": party, "rows": rows}
        out = self._layout("plain_setup", "up", party).pack({"B": party.graph_fragments()})
        return out, len(self.x), self._save(self._missing())

    def plain_forward(self, parameters: list[np.ndarray], config: dict[str, Any]) -> Fit:
        """``train.vfedcd_plain_forward``: features ``H_me,t`` out, in the clear."""
        party = self._party(dispatch.PlainParty)
        self._got("plain_forward", parameters, party)
        H = party.forward(self._batch(party, config))
        out = self._layout("plain_forward", "up", party).pack(
            {"H": {f"p{t}.H": H[t].ravel() for t in _peers(party)}})
        return out, len(self.x), self._save()

    def plain_decode(self, parameters: list[np.ndarray], config: dict[str, Any]) -> Fit:
        """``train.vfedcd_plain_decode``: the others' features in; feature gradient out."""
        party = self._party(dispatch.PlainParty)
        got = wire.by_peer(self._got("plain_decode", parameters, party)["H"])
        gq, loss = party.decode({j: msg["H"] for j, msg in got.items()})
        out = self._layout("plain_decode", "up", party).pack({"dH": gq.ravel()})
        return out, len(self.x), self._save({"loss": loss})

    def plain_update(self, parameters: list[np.ndarray], config: dict[str, Any]) -> Fit:
        """``train.vfedcd_plain_update``: gradients and the CTV share in; graph fragments."""
        party = self._party(dispatch.PlainParty)
        got = self._got("plain_update", parameters, party)
        dH = {j: msg["dH"] for j, msg in wire.by_peer(got["dH"]).items()}
        out = party.update(dH, got["G"]["G"])
        return self._layout("plain_update", "up", party).pack({"B": out}), len(self.x), \
            self._save()


class _Shape(NamedTuple):
    """Who a party is among how many, before it is made (its setup message's layout)."""

    me: int
    K: int
    copies: int = 1


def _peers(party: Any) -> list[int]:
    return [i for i in range(party.K) if i != party.me]
