"""The ClientApp: serves every algorithm's NumPyClient over ``train.<phase>``/``query.info``."""

from __future__ import annotations

from importlib import import_module

from flwr.app import Context, Message
from flwr.clientapp import ClientApp

from fedcausal_flwr.clients import PHASES, reply

app = ClientApp()


def handle(msg: Message, context: Context) -> Message:
    """Build this node's client for the run's ``algorithm`` and let it answer ``msg``."""
    algorithm = str(context.run_config.get("algorithm", "fdbnl"))
    client = import_module(f"fedcausal_flwr.clients.{algorithm}").from_context(context)
    return reply(client, msg)


for _phase in PHASES:
    app.train(_phase)(handle)
app.query("info")(handle)
