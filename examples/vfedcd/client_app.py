"""VFedCD ClientApp: each party reads its own CSV (node config ``data-path``, an ``id``
column); a party given none (a simulation, a FAB run) makes the example's data for its
``partition-id`` (make_data.py). Parties align rows by private set intersection of the IDs over
the server's relay, no secret shared (or by keyed hashes under a key they already share: node
config ``id-key`` or ``$FEDCAUSAL_ID_KEY`` at every party, never told to the server).

Consent: a party accepts Paillier with >= 2048-bit keys only, unless its node config says
otherwise with the App's own keys ``vfedcd-accept-backends``, ``vfedcd-accept-modes`` and
``vfedcd-min-key-bits`` (the party's client reads them from the node config itself)."""

from flwr.clientapp import ClientApp
from make_data import csv_files

from fedcausal_flwr.clients import register
from fedcausal_flwr.data import node_context, node_data

app = ClientApp()
register(app, "vfedcd", lambda context: node_data("vfedcd", node_context(context, csv_files)))
