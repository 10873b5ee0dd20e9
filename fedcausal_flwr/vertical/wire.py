"""What crosses the wire in VFedCD: each phase's arrays by name (the kinds of
:func:`~fedcausal_flwr.vertical.dispatch.peer_names`), from which the relay's reply specs come.

Each name is a group, in wire order: ``pk`` a public key (one up; one per peer down);
``frag`` fragment ciphertexts (per peer, per target); ``B`` graph fragments ``B_t`` (per
target t, d x d_t); ``he2ss_fwd`` HE2SS of ``x F`` (per owner, per target); ``z`` shares of
``Z_t`` (per target); ``dz`` ``Enc(dZ)`` (one up; one per peer down); ``he2ss_bwd`` HE2SS of
``x^T dZ`` (per target); ``G`` the party's CTV share; ``H`` plain features (per target);
``dH`` their gradient (one up; one per peer down); ``psi`` one set of blinded ID points
(``n x 32`` uint8, :mod:`fedcausal_flwr.secure.psi`: the party's own set up at ``psi_blind``,
another party's set down and back at each ``psi_hop``). The shared settings travel with the first
phase and ``vfedcd_setup`` as :meth:`~fedcausal_flwr.settings.Settings.to_wire`.
"""

from __future__ import annotations

from fedcausal_flwr.federation.wire import Phase

PHASES: dict[str, Phase] = {
    "vfedcd_psi_blind": Phase(down=(), up=("psi",)),
    "vfedcd_psi_hop": Phase(down=("psi",), up=("psi",)),
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
