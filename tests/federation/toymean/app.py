"""App glue: the strategy from the run config's section, the client on the built-in data."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flwr.app import Context

from fedcausal_flwr.federation.client import section_context
from fedcausal_flwr.settings import section_view

from .client import ToyClient
from .data import ToyData, client_data
from .model import ToySettings
from .strategy import ToyMean


def strategy(algorithm: str, rc: Mapping[str, Any]) -> ToyMean:
    rc = section_view("toymean", rc)
    ToyData.from_run_config(rc)
    return ToyMean(ToySettings.from_run_config(rc))


def client(algorithm: str, context: Context) -> ToyClient:
    context = section_context(context, "toymean")
    pid = int(context.node_config.get("partition-id", 0))
    return ToyClient.from_context(context, {"x": client_data(context.run_config, pid)})
