"""The ClientApp: serves every algorithm's NumPyClient over ``train.<phase>``/``query.<phase>``.

The run config's ``algorithm`` picks ``clients/<algorithm>.py``; only that module is imported.
A user's own ClientApp registers its phases with ``@app.train("<phase>")`` and calls
:func:`fedcausal_flwr.clients.base.reply` instead.
"""

from __future__ import annotations

from importlib import import_module

from flwr.app import Context, Message
from flwr.clientapp import ClientApp

from fedcausal_flwr.clients.base import reply


def handle(msg: Message, context: Context) -> Message:
    """Build this node's client for the run's ``algorithm`` and let it answer ``msg``."""
    algorithm = str(context.run_config.get("algorithm", "fdbnl"))
    client = import_module(f"fedcausal_flwr.clients.{algorithm}").from_context(context)
    return reply(client, msg)


class CausalClientApp(ClientApp):
    """A ClientApp that hands every message to :func:`handle`, whatever its phase."""

    def __call__(self, message: Message, context: Context) -> Message:
        """Answer one message."""
        return handle(message, context)


app = CausalClientApp()
