"""The ClientApp: serves every algorithm's client over ``train.<phase>``/``query.<phase>``.

The run config's ``algorithm`` picks the family's App glue (through the registry) that builds
this node's client from its section of the run config; only that family's modules are
imported. A user's own
ClientApp calls :func:`fedcausal_flwr.clients.register` with its own data instead.
"""

from __future__ import annotations

from flwr.app import Context, Message
from flwr.clientapp import ClientApp

from fedcausal_flwr.appconfig import glue
from fedcausal_flwr.data.nodefiles import adopt_node_config, node_limits
from fedcausal_flwr.federation.client import reply
from fedcausal_flwr.threads import limit_blas_threads


def handle(msg: Message, context: Context) -> Message:
    """Build this node's client for the run's ``algorithm`` and let it answer ``msg``."""
    limit_blas_threads()
    algorithm = str(context.run_config.get("algorithm", "fdbnl"))
    adopt_node_config(context.node_config)  # a simulated node's own CSV (launch --node-data)
    with node_limits(context.node_config):  # the node's limits on the files it reads
        return reply(glue(algorithm).client(algorithm, context), msg, context)


class CausalClientApp(ClientApp):
    """A ClientApp that hands every message to :func:`handle`, whatever its phase."""

    def __call__(self, message: Message, context: Context) -> Message:
        """Answer one message."""
        return handle(message, context)


app = CausalClientApp()
