"""FedIV ClientApp: each clinic reads its own CSV (node config ``data-path``); the run config
names the instrument, treatment and outcome columns."""

from flwr.app import Context
from flwr.clientapp import ClientApp

from fedcausal_flwr.clients import register
from fedcausal_flwr.data import node_data


def make(context: Context) -> dict:
    return node_data("fediv", context)  # train/validation split, column names


app = ClientApp()
register(app, "fediv", make)
