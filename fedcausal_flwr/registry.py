"""The registry: one descriptor per algorithm, the one list of algorithms.

Every other list (the App's dispatch, :func:`~fedcausal_flwr.clients.register`, the public
``strategies``/``clients`` exports, ``RunResult`` views, ``node_data``, the docs, the tests)
is derived from :data:`ALGORITHMS`. A descriptor names its family package and classes as
strings and imports them on first use, so naming one algorithm never imports another's stack
(FDBNL never loads torch or phe).

A family package ``<package>`` holds

- ``model.py``: equations and the settings class (no flwr);
- ``strategy.py``, ``client.py``: the Flower strategy and NumPyClient;
- ``data.py``: the class of its built-in data keys;
- ``app.py``: ``strategy(algorithm, run_config)``, ``client(algorithm, context)``, and
  optionally ``node_data(algorithm, context, path, who)`` (a node's own CSV) and
  ``truth``/``save_plots``; each takes the whole run config or its section;
- ``view.py`` (optional): ``layers(result, client)``, ``thresholds(result)`` and
  ``predict(result, x, selected)`` for :class:`~fedcausal_flwr.results.RunResult`.

Adding an algorithm = one family package + one :func:`add` (or one line in
:data:`ALGORITHMS`).
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from types import ModuleType
from typing import Any


@dataclass(frozen=True)
class Algorithm:
    """What the package knows of one algorithm.

    Parameters
    ----------
    name : run config ``algorithm`` (``"fdbnl"``).
    title : its display name (``"FDBNL"``).
    package : its family package (``"fedcausal_flwr.dbn"``).
    strategy, client, settings, data : class names in the family's ``strategy``,
        ``client``, ``model`` (``settings_module``) and ``data`` modules.
    extra : the pip extra that installs what it needs beyond the core.
    graphs : the estimates that are graphs (drawn, thresholded, viewed as layers).
    every_party : whether every node must answer every exchange (a lost party stops it).
    readers : further classes of run-config keys it reads, ``"module:Class"`` in the family.
    raw_keys : keys of its section read outside any settings class (a file of more keys).
    """

    name: str
    title: str
    package: str
    strategy: str
    client: str
    settings: str
    data: str
    extra: str
    graphs: tuple[str, ...] = ()
    every_party: bool = False
    settings_module: str = "model"
    readers: tuple[str, ...] = ()
    raw_keys: tuple[str, ...] = ()

    @property
    def section(self) -> str:
        """Its run-config section, the family package's name (``dbn``: ``dbn.lambda-w``)."""
        return self.package.rpartition(".")[2]

    def module(self, part: str) -> ModuleType:
        """The family's module ``part`` (``"strategy"``, ``"app"`` ...), imported now."""
        return import_module(f"{self.package}.{part}")

    def has_module(self, part: str) -> bool:
        """Whether the family has a module ``part``."""
        from importlib.util import find_spec

        return find_spec(f"{self.package}.{part}") is not None

    def strategy_class(self) -> type:
        """The strategy class."""
        return getattr(self.module("strategy"), self.strategy)

    def client_class(self) -> type:
        """The NumPyClient class."""
        return getattr(self.module("client"), self.client)

    def settings_class(self) -> type:
        """The settings class (every default of the algorithm, once)."""
        return getattr(self.module(self.settings_module), self.settings)

    def data_class(self) -> type:
        """The class of its built-in data keys."""
        return getattr(self.module("data"), self.data)

    def reader_classes(self) -> list[type]:
        """Every class of its section's keys: settings, data, and :attr:`readers`."""
        extra = [getattr(self.module(m), c) for m, _, c in (r.partition(":") for r in self.readers)]
        return [self.settings_class(), self.data_class(), *extra]

    def app(self) -> ModuleType:
        """The family's App glue."""
        return self.module("app")


ALGORITHMS: dict[str, Algorithm] = {a.name: a for a in (
    Algorithm("fdbnl", "FDBNL", "fedcausal_flwr.dbn", "FDBNL", "FDBNLClient",
              "FDBNLSettings", "DBNData", "fdbnl", graphs=("W", "A")),
    Algorithm("pfdbnl", "PFDBNL", "fedcausal_flwr.dbn", "PFDBNL", "PFDBNLClient",
              "PFDBNLSettings", "DBNData", "pfdbnl", graphs=("W", "A")),
    Algorithm("fedgc", "FedGC", "fedcausal_flwr.statespace", "FedGC",
              "FedGCClient", "FedGCSettings", "FedGCData", "fedgc", graphs=("A_hat",),
              every_party=True, raw_keys=("data-path",)),
    Algorithm("fedcf", "FedCF", "fedcausal_flwr.statespace", "FedCF",
              "FedCFClient", "FedCFSettings", "FedCFData", "fedcf",
              graphs=("A_hat", "B_hat"), every_party=True, raw_keys=("data-path",)),
    Algorithm("fediv", "FedIV", "fedcausal_flwr.iv", "FedIV", "FedIVClient",
              "FedIVSettings", "IVDataConfig", "fediv", settings_module="settings"),
    Algorithm("vfedcd", "VFedCD", "fedcausal_flwr.vertical", "VFedCD",
              "VFedCDClient", "VFedCDSettings", "VerticalData", "vfedcd", graphs=("B",),
              every_party=True, readers=("model:PartyConsent",)),
    Algorithm("fedpc", "FedPC", "fedcausal_flwr.constraint", "FedPC", "FedPCClient",
              "FedPCSettings", "ConstraintData", "fedpc", graphs=("graph",),
              settings_module="settings"),
    Algorithm("fedtrees", "FedTrees", "fedcausal_flwr.trees", "FedTrees", "FedTreesClient",
              "FedTreesSettings", "TreesData", "fedtrees", graphs=("graph",),
              settings_module="settings"),
)}
"""Every algorithm, by run-config name."""


def get(name: str) -> Algorithm:
    """The descriptor of ``name``; a ValueError names the known algorithms."""
    key = str(name).strip().lower()
    if key not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {name!r}; one of {', '.join(ALGORITHMS)}")
    return ALGORITHMS[key]


def add(algorithm: Algorithm) -> Algorithm:
    """Register ``algorithm`` (a user's or a test's own family package)."""
    ALGORITHMS[algorithm.name] = algorithm
    return algorithm


def remove(name: str) -> None:
    """Forget ``name`` (undoes :func:`add`)."""
    ALGORITHMS.pop(name, None)


def sections() -> dict[str, list[str]]:
    """``{run-config section: [algorithm, ...]}``."""
    out: dict[str, list[str]] = {}
    for a in ALGORITHMS.values():
        out.setdefault(a.section, []).append(a.name)
    return out


def exported(attribute: str) -> dict[str, tuple[str, str]]:
    """``{class name: (module, class name)}`` of every algorithm's ``attribute`` class
    (``"strategy"``, ``"client"`` or ``"settings"``): the lazy public exports."""
    def module(a: Algorithm) -> str:
        return {"strategy": "strategy", "client": "client",
                "settings": a.settings_module}[attribute]

    return {getattr(a, attribute): (f"{a.package}.{module(a)}", getattr(a, attribute))
            for a in ALGORITHMS.values()}


def lazy_exports(package: str, attributes: tuple[str, ...],
                 fixed: dict[str, str]) -> Any:
    """A module ``__getattr__`` resolving ``fixed`` names and every registered class of
    ``attributes`` (looked up when asked, so an algorithm added later is found too)."""

    def __getattr__(name: str) -> Any:
        if name in fixed:
            return getattr(import_module(fixed[name]), name)
        for attribute in attributes:
            found = exported(attribute).get(name)
            if found is not None:
                return getattr(import_module(found[0]), found[1])
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
