"""The Flower App layer: everything that reads a run config, knows the built-in data sets or
draws plots. Nothing below it (strategies, clients, core) imports it.

One glue module per algorithm family (``dbn/app.py``, ``statespace/app.py``, ``iv/app.py``,
``vertical/app.py``) provides

- ``strategy(algorithm, run_config)``: the strategy with validated settings, and an evaluator
  only when the truth of the configured built-in data set is known;
- ``client(algorithm, context)``: this node's client on the configured built-in data;
- ``DATA_CLASSES``: ``{algorithm: the Settings class of its built-in data keys}``;
- optionally ``CLIENT_CLASSES``: ``{algorithm: the Settings class of the run-config keys its
  client reads}`` (VFedCD's party consent);
- optionally ``RAW_KEYS``: ``{algorithm: run-config keys it reads outside those classes}``;
- optionally ``truth(algorithm, run_config)`` (matrices for the learned-vs-true PNG) and
  ``save_plots(algorithm, run_config, result, out)`` (the family's own figures).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from fedcausal_flwr import registry
from fedcausal_flwr.settings import Settings, setting

FAMILIES = registry.ALGORITHMS



@dataclass(frozen=True)
class AppConfig(Settings):
    """The App's own keys: which algorithm runs and where its results go."""

    algorithm: str = setting("fdbnl", "algorithm", choices=tuple(FAMILIES))
    outputs: str = setting("outputs", "outputs")
    run_name: str = setting("", "run-name")


def glue(algorithm: str) -> ModuleType:
    """The App glue module of ``algorithm``; a ValueError names the known ones."""
    return registry.get(algorithm).app()


def settings_class(algorithm: str) -> type:
    """The settings class of ``algorithm`` (the one source of its defaults)."""
    return registry.get(algorithm).settings_class()


def data_class(algorithm: str) -> type:
    """The class of ``algorithm``'s built-in data keys (their one source of defaults)."""
    return glue(algorithm).DATA_CLASSES[algorithm]


def client_classes(algorithm: str) -> list[type]:
    """The classes of the run-config keys ``algorithm``'s client glue reads (may be none)."""
    cls = getattr(glue(algorithm), "CLIENT_CLASSES", {}).get(algorithm)
    return [cls] if cls is not None else []


def drift(algorithm: str, app_config: Mapping[str, Any]) -> list[str]:
    """Where the App's declared run config disagrees with the defaults of ``algorithm``'s
    settings class (every key must be declared) or data class (declared keys must agree; the
    state-space family's model-specific data keys travel in a JSON file instead)."""
    out = []
    for cls, must in ((settings_class(algorithm), True), (data_class(algorithm), False),
                      (AppConfig, True), *((c, True) for c in client_classes(algorithm))):
        for key, value in cls().run_config().items():
            if key not in app_config:
                if must:
                    out.append(f"{algorithm}: {key!r} is not declared in [tool.flwr.app.config]")
            elif app_config[key] != value or type(app_config[key]) is not type(value):
                out.append(f"{algorithm}: {key!r} is {app_config[key]!r} in the App config but "
                           f"{value!r} in {cls.__name__}")
    return out


def readers(algorithm: str) -> list[type]:
    """Every class whose run-config keys ``algorithm``'s run reads."""
    return [AppConfig, settings_class(algorithm), data_class(algorithm),
            *client_classes(algorithm)]


def foreign_keys(algorithm: str, rc: Mapping[str, Any]) -> list[str]:
    """One line per run-config key that ``algorithm`` never reads but another algorithm does,
    set to other than that algorithm's default (it would be silently ignored)."""
    from difflib import get_close_matches

    def read_by(a: str) -> set[str]:
        return {k for c in readers(a) for k in c.keys()} | \
            set(getattr(glue(a), "RAW_KEYS", {}).get(a, ()))

    mine = read_by(algorithm)
    out = []
    for key in sorted(set(rc) - mine):
        theirs = {a: c for a in FAMILIES for c in readers(a) if key in c.keys()}
        if not theirs or all(rc[key] == c().run_config()[key] for c in theirs.values()):
            continue
        near = get_close_matches(key, sorted(mine), n=2, cutoff=0.6)
        out.append(f"{key!r} = {rc[key]!r} is read by {', '.join(theirs)}, not by "
                   f"{algorithm}" + (f" (did you mean {' or '.join(map(repr, near))}?)"
                                     if near else ""))
    return out


def check_foreign_keys(algorithm: str, rc: Mapping[str, Any]) -> None:
    """Refuse a run config that sets keys ``algorithm`` ignores (:func:`foreign_keys`)."""
    bad = foreign_keys(algorithm, rc)
    if bad:
        raise ValueError(f"run config sets keys algorithm {algorithm!r} does not read: "
                         + "; ".join(bad))


def owners(key: str) -> list[str]:
    """The classes whose field ``key`` is, over every algorithm (for orphan checks)."""
    classes = {c for a in FAMILIES for c in readers(a)}
    return sorted(c.__name__ for c in classes if key in c.keys())
