"""Data: the built-in sets (synthetic, DREAM4, NetSim, Sachs, ...) and the public readers of a
node's own CSV (:mod:`fedcausal_flwr.data.node`): ``read_csv``, ``node_csv``, ``lagged``,
``node_data``, ``Table``; ``node_context`` (:mod:`fedcausal_flwr.data.examples`): a node's own
CSV or an example's data made on the node. Exports are lazy."""

from fedcausal_flwr.lazy import lazy_getattr

_EXPORTS = {"Table": ".node", "read_csv": ".node", "node_csv": ".node", "lagged": ".node",
            "node_data": ".node", "node_context": ".examples"}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_getattr(__name__, _EXPORTS)
