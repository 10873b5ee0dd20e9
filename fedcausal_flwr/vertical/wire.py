"""What crosses the wire in VFedCD: each phase's arrays by name, from which the relay's reply
specs come.

Each name is a group, in wire order: ``pk`` a public key (one up; one per peer down);
``frag`` fragment ciphertexts (per peer, per target); ``B`` graph fragments ``B_t`` (per
target t, d x d_t); ``he2ss_fwd`` HE2SS of ``x F`` (per owner, per target); ``z`` shares of
``Z_t`` (per target); ``dz`` ``Enc(dZ)`` (one up; one per peer down); ``he2ss_bwd`` HE2SS of
``x^T dZ`` (per target); ``G`` the party's CTV share; ``H`` plain features (per target);
``dH`` their gradient (one up; one per peer down); ``psi`` one set of blinded ID points
(``n x 32`` uint8, :mod:`fedcausal_flwr.secure.psi`: the party's own set up at ``psi_blind``,
another party's set down and back at each ``psi_hop``), ``psi_key`` the party's commitment to
its PSI key (32 uint8, with its own set) and ``psi_proof`` its proof that a hop's set is the set
it got times that key (64 uint8, :func:`~fedcausal_flwr.secure.psi.hop_proof`). The shared
settings travel with the first phase and ``vfedcd_setup`` as
:meth:`~fedcausal_flwr.settings.Settings.to_wire`.

:func:`layout` lays a phase out for one party (:class:`~fedcausal_flwr.federation.arrays.
Layout`): the strategy and the client pack and unpack every message with it. Each group's
arrays are labelled by their :mod:`~fedcausal_flwr.vertical.dispatch` names (``frag.t1``,
``he2ss.t0``, ``z``, ``dz``, ``he2ss``, ``B.t1``, ``G``), with replicas ``r<r>.<name>``
(replica-major), and where they go to or come from another party ``p<j>.<name>`` (in a
reply: the destination j; in a message down: the source j), peers ascending, so the relay
routes by label (:func:`routed`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from fedcausal_flwr.federation.arrays import Layout, Slot, Spec, group, one
from fedcausal_flwr.federation.wire import Phase

PHASES: dict[str, Phase] = {
    "vfedcd_psi_blind": Phase(down=(), up=("psi", "psi_key")),
    "vfedcd_psi_hop": Phase(down=("psi",), up=("psi", "psi_proof")),
    "vfedcd_keys": Phase(down=(), up=("pk",)),
    "vfedcd_setup": Phase(down=("pk",), up=("frag", "B")),
    "vfedcd_forward": Phase(down=("frag",), up=("he2ss_fwd",)),
    "vfedcd_share": Phase(down=("he2ss_fwd", "G"), up=("z",)),
    "vfedcd_decode": Phase(down=("z",), up=("dz",)),
    "vfedcd_gradient": Phase(down=("dz",), up=("he2ss_bwd",)),
    "vfedcd_update": Phase(down=("he2ss_bwd",), up=("frag", "B")),
    "vfedcd_plain_setup": Phase(down=(), up=("B",)),
    "vfedcd_plain_forward": Phase(down=(), up=("H",)),
    "vfedcd_plain_decode": Phase(down=("H",), up=("dH",)),
    "vfedcd_plain_update": Phase(down=("dH", "G"), up=("B",)),
}

#: ``spec(name, peer, replica, target) -> spec`` of one array of a layout (``peer``,
#: ``target``: None where the array has none).
SpecOf = Callable[[str, "int | None", int, "int | None"], Spec]


def layout(phase: str, direction: str, me: int, K: int, copies: int = 1,
           spec: SpecOf | None = None) -> Layout:
    """Party ``me``'s arrays of ``phase`` (``direction`` ``"up"``: its reply, ``"down"``: the
    message it gets) among ``K`` parties, ``copies`` replicas each; ``spec`` gives each
    array's spec (default: any array, only the count and the names are checked)."""
    peers = [j for j in range(K) if j != me]
    R, T, up = range(copies), range(K), direction == "up"

    def s(name: str, peer: int | None = None, r: int = 0, t: int | None = None) -> Spec:
        return None if spec is None else spec(name, peer, r, t)

    def tag(r: int, n: str) -> str:
        return n if copies == 1 else f"r{r}.{n}"

    def per_peer(name: str, n: str, targets: bool = False) -> Slot:
        return group(name, [(f"p{j}.{tag(r, f'{n}.t{t}' if targets else n)}",
                             s(name, j, r, t if targets else None))
                            for j in peers for r in R for t in (T if targets else [0])])

    slots = {
        "psi": lambda: one("psi", s("psi")),
        "psi_key": lambda: one("psi_key", s("psi_key")),
        "psi_proof": lambda: one("psi_proof", s("psi_proof")),
        "pk": lambda: one("pk", s("pk")) if up else group(
            "pk", [(f"p{j}.pk", s("pk", j)) for j in peers]),
        "frag": lambda: per_peer("frag", "frag", targets=True),
        "B": lambda: group("B", [(tag(r, f"B.t{t}"), s("B", None, r, t)) for r in R for t in T]),
        "he2ss_fwd": lambda: per_peer("he2ss_fwd", "he2ss", targets=True),
        "G": lambda: group("G", [(tag(r, "G"), s("G", None, r)) for r in R]),
        "z": lambda: per_peer("z", "z"),
        "dz": lambda: group("dz", [(tag(r, "dz"), s("dz", None, r)) for r in R]) if up
        else per_peer("dz", "dz"),
        "he2ss_bwd": lambda: per_peer("he2ss_bwd", "he2ss"),
        "H": lambda: group("H", [(f"p{j}.H", s("H", j)) for j in peers]),
        "dH": lambda: one("dH", s("dH")) if up else group(
            "dH", [(f"p{j}.dH", s("dH", j)) for j in peers]),
    }
    names = getattr(PHASES[phase], direction)
    what = f"{phase} {'reply' if up else 'message'}"
    return Layout(what, names, [slots[n]() for n in names])


def by_peer(arrays: Mapping[str, np.ndarray]) -> dict[int, dict[str, np.ndarray]]:
    """A group's ``{"p<j>.<name>": array}`` as ``{j: {name: array}}`` (the dispatch's
    inbox or outbox), in the group's order."""
    out: dict[int, dict[str, np.ndarray]] = {}
    for label, a in arrays.items():
        peer, _, name = label.partition(".")
        out.setdefault(int(peer[1:]), {})[name] = a
    return out


def addressed(box: Mapping[int, Mapping[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """The inverse of :func:`by_peer`: ``{j: {name: array}}`` as ``{"p<j>.<name>": array}``,
    shares (uint64) flat as they travel."""
    out = {}
    for j, msg in box.items():
        for name, a in msg.items():
            a = np.asarray(a)
            out[f"p{j}.{name}"] = a.ravel() if a.dtype == np.uint64 else a
    return out


def routed(replies: Mapping[int, Mapping[str, np.ndarray]]
           ) -> dict[int, dict[str, np.ndarray]]:
    """The relay: each party's group ``{src: {"p<dst>.<name>": array}}`` as each
    destination's ``{dst: {"p<src>.<name>": array}}``."""
    out: dict[int, dict[str, np.ndarray]] = {}
    for src, arrays in sorted(replies.items()):
        for dst, msg in by_peer(arrays).items():
            out.setdefault(dst, {}).update({f"p{src}.{n}": a for n, a in msg.items()})
    return out
