"""VFedCD ClientApp: each party reads its own CSV (node config ``data-path``, an ``id``
column); parties align rows by keyed hashes of the IDs under the key they share (node config
``id-key`` or ``$FEDCAUSAL_ID_KEY``, never told to the server)."""

from flwr.app import Context
from flwr.clientapp import ClientApp

from fedcausal_flwr.clients import register
from fedcausal_flwr.data import node_data


def make(context: Context) -> dict:
    data = node_data("vfedcd", context)
    # this party's own consent (its node config): default Paillier with >= 2048-bit keys
    nc = context.node_config
    if nc.get("accept-backends"):
        data["accept_backends"] = str(nc["accept-backends"])
    if nc.get("min-key-bits"):
        data["min_key_bits"] = int(nc["min-key-bits"])
    return data


app = ClientApp()
register(app, "vfedcd", make)
