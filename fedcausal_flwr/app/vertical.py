"""App glue of VFedCD: settings from the run config, built-in vertical data, truth, evaluator.

The model settings are :class:`~fedcausal_flwr.core.vfedcd.VFedCDSettings`, the data keys
:class:`~fedcausal_flwr.data.vertical.VerticalData`; both are validated here, before any node
is contacted. The parties get their settings from the server, not from the run config.

Consent (:class:`~fedcausal_flwr.core.vfedcd.PartyConsent`): each built-in party accepts what
its node config's ``vfedcd-accept-*`` / ``vfedcd-min-key-bits`` keys say; a key its node config
lacks is taken from the run config's key of the same name (declared with the secure defaults).
A Ray simulation gives nodes no node config of their own, so this is how the App's simulations
and tests opt in to ``mock``, the plain modes or test keys: that consent is the run submitter's,
not the party's, and each party's WARNING log line says so. The built-in parties' data come
from the run config too; a party with data of its own runs its own ClientApp
(:func:`fedcausal_flwr.clients.register`), where the run config is never consulted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from flwr.app import Context

from fedcausal_flwr.clients.base import client_class
from fedcausal_flwr.core.vfedcd import PartyConsent, VFedCDSettings
from fedcausal_flwr.data.vertical import VerticalData

__all__ = ["client", "evaluator", "strategy", "truth"]

DATA_CLASSES = {"vfedcd": VerticalData}
CLIENT_CLASSES = {"vfedcd": PartyConsent}
"""``{algorithm: the Settings class of the run-config keys this glue's client reads}``."""


def strategy(algorithm: str, rc: Mapping[str, Any]):  # noqa: ARG001
    """VFedCD with the run config's settings, scored against the built-in data's truth."""
    from fedcausal_flwr.strategies.vfedcd import VFedCD

    s = VFedCDSettings.from_run_config(rc)
    VerticalData.from_run_config(rc)  # a bad data key fails here too, not on the parties
    PartyConsent.from_run_config(rc)  # and a bad consent key
    return VFedCD(s, evaluate_fn=evaluator(rc))


def client(algorithm: str, context: Context):
    """This node's party on the run config's data (its block of columns, training rows)."""
    from fedcausal_flwr.data.vertical import VerticalData, party_data, sachs

    pid = int(context.node_config.get("partition-id", 0))
    k = int(context.node_config.get("num-partitions", 1))
    try:
        x, _, cols = party_data(context.run_config, pid, k)
        c = VerticalData.from_run_config(context.run_config)
        names = ([sachs(c.data_path)[2][i] for i in cols] if c.data == "sachs" else None)
    except ValueError as e:
        raise ValueError(f"party {pid}: {e}") from e
    consent = PartyConsent.from_run_config(context.run_config)
    return client_class(algorithm).from_context(
        context, {"x": x, "columns": cols, "sample_ids": np.arange(len(x)),
                  "accept_backends": consent.backends, "accept_modes": consent.modes,
                  "min_key_bits": consent.min_key_bits, "names": names,
                  "consent_from": "the run config (the run submitter's consent, not this "
                                  "party's node config)"})


def truth(algorithm: str, rc: Mapping[str, Any]) -> dict[str, np.ndarray]:  # noqa: ARG001
    """The true graph (named B, for the PNG of learned vs true)."""
    from fedcausal_flwr.data.vertical import pooled_data

    return {"B": pooled_data(rc)[1]}


def evaluator(rc: Mapping[str, Any]
              ) -> Callable[[Mapping[str, np.ndarray], Sequence[int]], dict[str, Any]]:
    """SHD (a reversal counts once) and F1 of the DAG against the built-in data's true graph
    (built on first use)."""
    from fedcausal_flwr.data.vertical import pooled_data
    from fedcausal_flwr.metrics import graph_metrics

    truth_of: dict[str, np.ndarray] = {}

    def evaluate(est: Mapping[str, np.ndarray], client_ids: Sequence[int]  # noqa: ARG001
                 ) -> dict[str, Any]:
        if "dag" not in est:
            return {}
        if "A" not in truth_of:
            truth_of["A"] = pooled_data(rc)[1]
        m = graph_metrics(est["dag"], truth_of["A"])
        p, r = m["precision"], m["tpr"]
        return {"shd": m["shd_rev1"], "f1": 2 * p * r / (p + r) if p + r else 0.0,
                "nnz": m["nnz"]}

    return evaluate
