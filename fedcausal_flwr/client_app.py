"""The ClientApp: serves every algorithm's client over ``train.<phase>``/``query.<phase>``.

The run config's ``algorithm`` picks the App glue (:mod:`fedcausal_flwr.app`) that builds this
node's client on the built-in data; only that algorithm's modules are imported. A user's own
ClientApp calls :func:`fedcausal_flwr.clients.register` with its own data instead.
"""

from __future__ import annotations

from flwr.app import Context, Message
from flwr.clientapp import ClientApp

from fedcausal_flwr.app import glue
from fedcausal_flwr.federation.client import reply
from fedcausal_flwr.threads import limit_blas_threads


def handle(msg: Message, context: Context) -> Message:
    """Build this node's client for the run's ``algorithm`` and let it answer ``msg``."""
    limit_blas_threads()
    algorithm = str(context.run_config.get("algorithm", "fdbnl"))
    return reply(glue(algorithm).client(algorithm, context), msg)


class CausalClientApp(ClientApp):
    """A ClientApp that hands every message to :func:`handle`, whatever its phase."""

    def __call__(self, message: Message, context: Context) -> Message:
        """Answer one message."""
        return handle(message, context)


app = CausalClientApp()
