"""FedCF ClientApp: each plant reads its own CSV (node config ``data-path``): its sensors, and
the valve named by node config ``input-columns`` as its known input. A node given no CSV (a
simulation, a FAB run) makes the example's data for its ``partition-id`` (make_data.py), its
valve column included."""

from flwr.app import Context
from flwr.clientapp import ClientApp
from make_data import NODE_CONFIGS, csv_files

from fedcausal_flwr.clients import register
from fedcausal_flwr.data import node_context, node_data


def make(context: Context) -> dict:
    # sensors z-scored, hidden states and the valve's B_mm identified (run config
    # statespace.ss-p), names from the header
    return node_data("fedcf", node_context(context, csv_files, NODE_CONFIGS))


app = ClientApp()
register(app, "fedcf", make)
