"""App glue of fediv (transitional: wraps the strategy/client modules' own glue)."""

from __future__ import annotations

from collections.abc import Mapping
from importlib import import_module
from pathlib import Path
from typing import Any

from flwr.app import Context


def strategy(algorithm: str, rc: Mapping[str, Any]):
    """The strategy of ``algorithm`` from the run config."""
    return import_module(f"fedcausal_flwr.strategies.{algorithm}").from_run_config(rc)


def client(algorithm: str, context: Context):
    """This node's client on the built-in data."""
    return import_module(f"fedcausal_flwr.clients.{algorithm}").from_context(context)


def truth(algorithm: str, rc: Mapping[str, Any]) -> dict:
    """Matrices for the learned-vs-true PNG."""
    module = import_module(f"fedcausal_flwr.strategies.{algorithm}")
    return module.truth_for_plots(rc, None) if hasattr(module, "truth_for_plots") else {}


def save_plots(algorithm: str, rc: Mapping[str, Any], result: Any, out: Path) -> None:
    """The family's own figures."""
    module = import_module(f"fedcausal_flwr.strategies.{algorithm}")
    if hasattr(module, "save_plots"):
        module.save_plots(rc, result, out)
