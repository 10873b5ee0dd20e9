"""FedIV ClientApp: each clinic reads its own CSV (node config ``data-path``); the run config
names the instrument, treatment and outcome columns."""

from pathlib import Path

from flwr.app import Context
from flwr.clientapp import ClientApp

from fedcausal_flwr.clients import register
from fedcausal_flwr.data import node_data

HERE = Path(__file__).resolve().parent


def make(context: Context) -> dict:
    if not context.node_config.get("data-path"):  # plain simulation: the bundled demo CSV
        pid = int(context.node_config.get("partition-id", 0))
        context.node_config["data-path"] = str(HERE / "data" / f"clinic{pid}.csv")
    return node_data("fediv", context)  # train/validation split, column names


app = ClientApp()
register(app, "fediv", make)
