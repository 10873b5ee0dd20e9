"""FedCF ClientApp: each plant reads its own sensor CSV (node config ``data-path``)."""

from pathlib import Path

from flwr.app import Context
from flwr.clientapp import ClientApp

from fedcausal_flwr.clients import register
from fedcausal_flwr.data import node_data

HERE = Path(__file__).resolve().parent


def make(context: Context) -> dict:
    if not context.node_config.get("data-path"):  # plain simulation: the bundled demo CSV
        pid = int(context.node_config.get("partition-id", 0))
        context.node_config["data-path"] = str(HERE / "data" / f"plant{pid}.csv")
    # sensors z-scored, hidden states identified (run config ss-p), names from the header
    return node_data("fedcf", context)


app = ClientApp()
register(app, "fedcf", make)
