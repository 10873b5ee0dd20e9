"""Lazy package exports (PEP 562), so importing one algorithm never loads another's stack."""

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any


def lazy_getattr(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` that imports ``exports[name]`` on first use: a module path,
    absolute (``fedcausal_flwr.dbn.strategy``) or relative to ``package`` (``.node``)."""

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = exports[name]
        return getattr(import_module(module, package if module.startswith(".") else None), name)

    return __getattr__
