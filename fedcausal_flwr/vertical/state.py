"""A VFedCD party's protocol state in its node's ``context.state`` as typed records, no pickle.

Three records: ``vfedcd.settings`` (a ConfigRecord: the shared settings by
:meth:`~fedcausal_flwr.settings.Settings.to_wire`), ``vfedcd`` (a ConfigRecord: numbers,
strings and bytes: the PSI key and hops, the key pair as the bytes of its integers ``n``,
``p``, ``q``, counters) and ``vfedcd.arrays`` (an ArrayRecord: the shared rows, the PSI row
order, fragments, decoder weights, optimizer moments, the peers' public keys and the
ciphertexts a party holds as their wire bytes, a step's intermediates). What a party holds
(:class:`~fedcausal_flwr.vertical.dispatch.Replicas`, :class:`~fedcausal_flwr.vertical.dispatch.
Party`, :class:`~fedcausal_flwr.vertical.dispatch.PlainParty`) becomes a tree of dicts and
lists whose leaves are arrays and scalars (:func:`party_tree`), stored one leaf per record
key (its path, ``.``-joined; ``#i`` an int key or list index, ``#i,j`` a pair); each
container's key ``<path>.~`` says what it is (its keys in order, a list's length, or
``"none"``). The columns ``x`` never enter it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, RecordDict

from fedcausal_flwr.knowledge import Masks
from fedcausal_flwr.secure.shares import Mock
from fedcausal_flwr.secure.shares import backend as make_backend
from fedcausal_flwr.vertical import dispatch
from fedcausal_flwr.vertical import model as core
from fedcausal_flwr.vertical.model import VFedCDSettings

KEY = "vfedcd"
SETTINGS, ARRAYS = f"{KEY}.settings", f"{KEY}.arrays"
_KIND = "~"
_SCALARS = (bool, int, float, str, bytes)
#: An array's bytes as they lie (``raw.C`` or ``raw.F``: its memory order, kept).
_RAW = "raw."


# ---- a tree of dicts and lists as flat records -----------------------------------------
def _part(k: Any) -> str:
    if isinstance(k, str) and k and "." not in k and k[0] not in "#~":
        return k
    if isinstance(k, (int, np.integer)) and not isinstance(k, bool):
        return f"#{int(k)}"
    if isinstance(k, tuple) and len(k) > 1 and all(isinstance(i, int) for i in k):
        return "#" + ",".join(str(i) for i in k)
    raise TypeError(f"state key {k!r} cannot be stored")


def _key(part: str) -> Any:
    if not part.startswith("#"):
        return part
    items = tuple(int(i) for i in part[1:].split(","))
    return items if len(items) > 1 else items[0]


def _write(path: str, v: Any, arrays: dict[str, Array], config: dict[str, Any]) -> None:
    if v is None:
        config[f"{path}.{_KIND}"] = "none"
    elif isinstance(v, dict):
        parts = [_part(k) for k in v]
        config[f"{path}.{_KIND}"] = parts
        for p, x in zip(parts, v.values(), strict=True):
            _write(f"{path}.{p}", x, arrays, config)
    elif isinstance(v, list):
        config[f"{path}.{_KIND}"] = len(v)
        for i, x in enumerate(v):
            _write(f"{path}.#{i}", x, arrays, config)
    elif isinstance(v, np.ndarray) and v.dtype != object:
        order = "F" if v.flags.f_contiguous and not v.flags.c_contiguous else "C"
        arrays[path] = Array(dtype=v.dtype.str, shape=tuple(v.shape), stype=_RAW + order,
                             data=v.tobytes(order=order))
    elif type(v) in _SCALARS:
        config[path] = v
    else:
        raise TypeError(f"state {path!r}: a {type(v).__name__} cannot be stored")


def _array(a: Array) -> np.ndarray:
    order = a.stype.removeprefix(_RAW)
    return np.frombuffer(a.data, dtype=np.dtype(a.dtype)).reshape(a.shape, order=order).copy(
        order="K")


def _read(path: str, arrays: Mapping[str, np.ndarray], config: Mapping[str, Any]) -> Any:
    kind = config.get(f"{path}.{_KIND}")
    if kind is None:
        return arrays[path] if path in arrays else config[path]
    if kind == "none":
        return None
    if isinstance(kind, int):
        return [_read(f"{path}.#{i}", arrays, config) for i in range(kind)]
    return {_key(p): _read(f"{path}.{p}", arrays, config) for p in kind}


# ---- what a party holds, as a tree -----------------------------------------------------
def _keys_tree(keys: tuple[Any, Any]) -> dict[str, Any]:
    """A key pair as the bytes of its integers (none under the ``mock`` backend)."""
    pk, sk = keys
    if pk is None:
        return {"kind": "none"}

    def raw(i: int) -> bytes:
        return int(i).to_bytes((int(i).bit_length() + 7) // 8, "big")

    return {"kind": "paillier", "n": raw(pk.n), "p": raw(sk.p), "q": raw(sk.q)}


def _keys_from(tree: Mapping[str, Any]) -> tuple[Any, Any]:
    if tree["kind"] == "none":
        return None, None
    from fedcausal_flwr.secure import paillier  # phe + gmpy2: the vfedcd extra

    pk = paillier.PublicKey(int.from_bytes(tree["n"], "big"))
    return pk, paillier.PrivateKey(pk, int.from_bytes(tree["p"], "big"),
                                   int.from_bytes(tree["q"], "big"))


def _prior_tree(prior: Masks | None) -> dict[str, np.ndarray] | None:
    return None if prior is None else {"forbid_W": prior.forbid_W, "require_W": prior.require_W,
                                       "forbid_A": prior.forbid_A, "require_A": prior.require_A}


def _one_party(p: dispatch.Party) -> dict[str, Any]:
    b = p.backend
    return {"F": p.F, "dec": p.dec, "memory": p.memory, "updates": p.updates, "tmp": p.tmp,
            "pks": {i: b.public_array(pk) for i, pk in p.pks.items()},
            "enc_in": {it: b.to_wire(p.pks[it[0]], c) for it, c in p.enc_in.items()}}


def party_tree(party: Any) -> dict[str, Any]:
    """What ``party`` (a :class:`~dispatch.Replicas` or :class:`~dispatch.PlainParty`) holds,
    but its columns, settings and backend: a tree of dicts, lists, arrays and scalars."""
    if isinstance(party, dispatch.PlainParty):
        return {"kind": "plain", "me": party.me, "sizes": list(party.sizes), "W": party.W,
                "dec": party.dec, "memory": party.memory, "tmp": party.tmp,
                "updates": party.updates, "prior": _prior_tree(party.prior)}
    first = party.parties[0]
    return {"kind": "replicas", "me": party.me, "sizes": list(first.sizes), "n": party.n,
            "rows": party.rows, "keys": _keys_tree((first.pk, first.sk)),
            "prior": _prior_tree(first.prior),
            "parties": [_one_party(p) for p in party.parties]}


def party_from(tree: Mapping[str, Any], s: VFedCDSettings, backend: Mock) -> Any:
    """The party :func:`party_tree` described, with settings ``s`` and ``backend`` (its
    columns unset)."""
    prior = None if tree["prior"] is None else Masks(**tree["prior"])
    sizes = [int(v) for v in tree["sizes"]]
    if tree["kind"] == "plain":
        q = object.__new__(dispatch.PlainParty)
        q.me, q.x, q.sizes, q.s, q.K = tree["me"], None, sizes, s, len(sizes)
        q.starts, q.prior = core.starts_of(sizes), prior
        q.W, q.dec, q.memory, q.tmp, q.updates = (tree["W"], tree["dec"], tree["memory"],
                                                  tree["tmp"], tree["updates"])
        return q
    keys = _keys_from(tree["keys"])
    out = object.__new__(dispatch.Replicas)
    out.me, out.s, out.K, out.n = tree["me"], s, len(sizes), tree["n"]
    out.copies, out.rows = s.replicas + 1, tree["rows"]
    out.parties = []
    for r, t in enumerate(tree["parties"]):
        p = object.__new__(dispatch.Party)
        p.me, p.x, p.sizes, p.s, p.backend = tree["me"], None, sizes, \
            core.replica_settings(s, r), backend
        p.K, p.h, p.starts = len(sizes), p.s.hidden, core.starts_of(sizes)
        p.pk, p.sk = keys
        p.pks = {i: backend.public_from(a) for i, a in t["pks"].items()}
        p.prior, p.F, p.dec, p.memory = prior, t["F"], t["dec"], t["memory"]
        p.enc_in = {(i, k): backend.from_wire(p.pks[i], a, p._shape(k))
                    for (i, k), a in t["enc_in"].items()}
        p.tmp, p.updates = t["tmp"], t["updates"]
        out.parties.append(p)
    return out


# ---- the records -----------------------------------------------------------------------
def save(records: RecordDict, state: Mapping[str, Any]) -> None:
    """Write the client's ``state`` (``settings``, ``keys``, ``rows``, ``party``, ``psi``:
    what it holds) into ``records`` (the node's ``context.state``)."""
    s = state.get("settings")
    tree = {k: v for k, v in state.items() if k != "settings"}
    if "keys" in tree:
        tree["keys"] = _keys_tree(tree["keys"])
    if "party" in tree:
        tree["party"] = party_tree(tree["party"])
    arrays: dict[str, Array] = {}
    config: dict[str, Any] = {}
    _write("state", tree, arrays, config)
    records[SETTINGS] = ConfigRecord({} if s is None else s.to_wire())
    records[KEY] = ConfigRecord(config)
    records[ARRAYS] = held = ArrayRecord()
    for k, a in arrays.items():  # one by one: ArrayRecord(dict) checks each again
        held[k] = a


def load(records: RecordDict, who: str = "client") -> dict[str, Any]:
    """The state :func:`save` wrote (``{}`` if none)."""
    if KEY not in records.config_records:
        return {}
    arrays = {k: _array(v) for k, v in records.array_records[ARRAYS].items()}
    state = _read("state", arrays, dict(records.config_records[KEY]))
    wire = dict(records.config_records[SETTINGS])
    if wire:
        state["settings"] = VFedCDSettings.from_wire(wire, who)
    if "keys" in state:
        state["keys"] = _keys_from(state["keys"])
    if "party" in state:
        s = state["settings"]
        state["party"] = party_from(state["party"], s, make_backend(s.he_backend, s.key_bits))
    return state
