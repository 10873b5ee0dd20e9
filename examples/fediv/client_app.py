"""FedIV ClientApp: each clinic reads its own CSV (node config ``data-path``); the run config
names the instrument, treatment and outcome columns. A node given no CSV (a simulation, a FAB
run) makes the example's data for its ``partition-id`` (make_data.py)."""

from flwr.app import Context
from flwr.clientapp import ClientApp
from make_data import csv_files

from fedcausal_flwr.clients import register
from fedcausal_flwr.data import node_context, node_data


def make(context: Context) -> dict:
    return node_data("fediv", node_context(context, csv_files))  # train/validation split


app = ClientApp()
register(app, "fediv", make)
