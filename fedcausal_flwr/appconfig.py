"""The App's run config: shared keys at the top, one section per family.

``[tool.flwr.app.config]`` holds :data:`~fedcausal_flwr.settings.SHARED_KEYS` (``algorithm``,
``seed``, ``min-nodes``, timeouts, ``outputs``, ``run-name``); each family's keys sit in its own
table (``[tool.flwr.app.config.dbn]``), which Flower flattens to ``dbn.lambda-w``. The App
checks a run config once (:func:`check`) and hands the family's glue the view of its section
(:func:`view`). The classes whose keys an algorithm reads (:func:`readers`) come from the
registry, so this module names no algorithm, and checking a section imports only that family's
settings (no torch for FedIV's, no phe for VFedCD's).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from difflib import get_close_matches
from pathlib import Path
from types import ModuleType
from typing import Any

from fedcausal_flwr import registry
from fedcausal_flwr.settings import SHARED_KEYS, Settings, section_view, setting


@dataclass(frozen=True)
class AppConfig(Settings):
    """The App's own keys: which algorithm runs and where its results go."""

    algorithm: str = setting("fdbnl", "algorithm")
    outputs: str = setting("outputs", "outputs",
                           doc="the folder of this run's results under the outputs root, "
                               "which the ServerApp host's operator sets "
                               "(FEDCAUSAL_OUTPUTS_ROOT; default: the App's outputs/): "
                               "'outputs' is the root itself, a relative path a folder "
                               "beneath it, an absolute path must lie inside it")
    run_name: str = setting("", "run-name", doc="a plain folder name under outputs (letters, "
                            "digits, '-', '_', '.'; no leading '.'); empty: "
                            "<algorithm>-<timestamp>")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.run_name:
            check_run_name(self.run_name)


RUN_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,199}")
"""A ``run-name``: one plain folder name under ``outputs`` (no ``/``, no ``..``, not absolute,
no leading dot), at most 200 characters."""


def check_run_name(name: Any) -> str:
    """``name`` as a run-name, or a ValueError naming the key: results stay under ``outputs``."""
    text = str(name)
    if not RUN_NAME.fullmatch(text):
        raise ValueError(f"run config 'run-name' = {name!r}: must be a plain folder name under "
                         "'outputs' (letters, digits, '-', '_', '.'; not starting with '.'; at "
                         "most 200 characters; no '/' or '..')")
    return text


OUTPUTS_ROOT_ENV = "FEDCAUSAL_OUTPUTS_ROOT"
"""The environment variable by which the ServerApp host's operator fixes the outputs root."""
DEFAULT_OUTPUTS = "outputs"
"""The run config's default ``outputs``: the root itself (unset root: ``./outputs`` of the
ServerApp's working directory, where results always went by default)."""


def outputs_root(rc: Mapping[str, Any] | None = None) -> Path:  # noqa: ARG001 - see below
    """The outputs root, resolved: every run's results lie under it. The operator's, never the
    submitter's: ``$FEDCAUSAL_OUTPUTS_ROOT`` on the ServerApp host, else ``./outputs`` of the
    ServerApp's working directory (the App's). ``rc`` is not read (the run config's
    ``outputs`` only names a folder beneath the root: :func:`outputs_dir`)."""
    return Path(os.environ.get(OUTPUTS_ROOT_ENV) or DEFAULT_OUTPUTS).expanduser().resolve()


def outputs_dir(rc: Mapping[str, Any], root: Path | str | None = None) -> Path:
    """The folder under the outputs ``root`` (default :func:`outputs_root`) that the run
    config's ``outputs`` names: ``"outputs"`` (the default) or empty is the root itself, a
    relative path a folder beneath it, an absolute path must lie inside it.

    Raises
    ------
    ValueError
        Naming ``outputs`` when it leads out of the root (an absolute path elsewhere, ``..``,
        a symbolic link out of it).
    """
    root = Path(root).expanduser().resolve() if root is not None else outputs_root()
    value = str(rc.get("outputs", DEFAULT_OUTPUTS) or DEFAULT_OUTPUTS)
    if value == DEFAULT_OUTPUTS:
        return root
    path = Path(value).expanduser()
    out = (path if path.is_absolute() else root / path).resolve()
    if out != root and not out.is_relative_to(root):
        raise ValueError(
            f"run config 'outputs' = {value[:200]!r}: must be a folder under the outputs root "
            f"{root}, which the ServerApp host's operator sets ({OUTPUTS_ROOT_ENV}; default: "
            "./outputs of the ServerApp); give a relative name such as 'my-study' (no '..'), "
            "or an absolute path inside the root")
    return out


def default_run_name(algorithm: Any) -> str:
    """``<algorithm>-<timestamp>`` (``run-<timestamp>`` when the algorithm is no plain name)."""
    alg = str(algorithm)
    return f"{alg if RUN_NAME.fullmatch(alg) else 'run'}-{time.strftime('%Y%m%d-%H%M%S')}"


def run_dir(rc: Mapping[str, Any], algorithm: Any = None,
            root: Path | str | None = None) -> Path:
    """``<outputs>/<run-name>``, resolved, ``outputs`` under the outputs ``root`` (default
    :func:`outputs_root`; :func:`outputs_dir`); run-name defaults to
    ``<algorithm>-<timestamp>``.

    Raises
    ------
    ValueError
        Naming ``run-name`` when it is not a plain name (:func:`check_run_name`), ``outputs``
        when it leads out of the root, or when the folder would not be under the root (a
        symbolic link out of it).
    """
    name = rc.get("run-name")
    name = check_run_name(name) if name not in (None, "") else default_run_name(
        algorithm if algorithm is not None else rc.get("algorithm", "fdbnl"))
    from fedcausal_flwr.results import inside

    root = Path(root).expanduser().resolve() if root is not None else outputs_root()
    return inside(outputs_dir(rc, root) / name, root)


def glue(algorithm: str) -> ModuleType:
    """The App glue module of ``algorithm``; a ValueError names the known ones."""
    try:
        return registry.get(algorithm).app()
    except ValueError as e:
        raise ValueError(f"run config 'algorithm': {e}") from e


def section(algorithm: str) -> str:
    """The run-config section of ``algorithm``'s keys."""
    return registry.get(algorithm).section


def settings_class(algorithm: str) -> type:
    """The settings class of ``algorithm`` (the one source of its defaults)."""
    return registry.get(algorithm).settings_class()


def readers(algorithm: str) -> list[type]:
    """Every class whose run-config keys ``algorithm``'s run reads."""
    return [AppConfig, *registry.get(algorithm).reader_classes()]


def section_keys(algorithm: str) -> set[str]:
    """The keys of its section that ``algorithm`` reads, without the section prefix."""
    raw = registry.get(algorithm).raw_keys
    return {k for c in readers(algorithm) for k in c.keys() if k not in SHARED_KEYS} | set(raw)


def defaults(algorithm: str) -> dict[str, Any]:
    """``{sectioned key: default}`` of every key ``algorithm`` reads."""
    out: dict[str, Any] = {}
    for cls in readers(algorithm):
        out.update(cls().app_config())
    for raw in registry.get(algorithm).raw_keys:
        out.setdefault(f"{section(algorithm)}.{raw}", "")  # a file path: none by default
    return out


def view(algorithm: str, rc: Mapping[str, Any]) -> dict[str, Any]:
    """The shared keys and ``algorithm``'s section without its prefix: what its glue reads."""
    return section_view(section(algorithm), rc)


def read_instead_as(algorithm: str, key: str) -> str | None:
    """The sectioned key under which ``algorithm`` reads the field that another algorithm of
    its section reads as ``key`` (bare), if it has one (``Settings.read_instead``)."""
    for cls in readers(algorithm):
        if key in (moved := cls.read_instead()):
            return cls.app_key(moved[key][0])
    return None


def problems(algorithm: str, rc: Mapping[str, Any]) -> list[str]:
    """One line per key of ``rc`` that ``algorithm``'s run would not read as its sender meant:
    a key without its section (renamed), a key of another section set to other than its
    default, a key its section does not have."""
    own, sections = section(algorithm), registry.sections()
    keys_of = {a: section_keys(a) for algs in sections.values() for a in algs}
    defaults_of = {a: defaults(a) for a in keys_of}
    mine = keys_of[algorithm]
    out = []
    for key in sorted(rc):
        if key in SHARED_KEYS:
            continue
        sec, dot, bare = str(key).partition(".")
        if not dot:
            homes = [s for s, algs in sections.items() if any(key in keys_of[a] for a in algs)]
            if homes:
                new = f"{own}.{key}" if own in homes else " or ".join(f"{s}.{key}" for s in homes)
                out.append(f"{key!r} is now {new!r} (keys sit in their family's section)")
            else:
                out.append(f"{key!r} is not a key of the App")
            continue
        owners = sections.get(sec)
        if owners is None:
            out.append(f"{key!r}: no section {sec!r} (sections: {', '.join(sections)})")
        elif sec != own or bare not in mine:
            readers_of = [a for a in owners if bare in keys_of[a]]
            if not readers_of:
                near = get_close_matches(bare, sorted(mine), n=2, cutoff=0.6) if sec == own \
                    else []
                out.append(f"{key!r} is not a key of section {sec!r}" + (
                    f" (did you mean {' or '.join(repr(f'{own}.{n}') for n in near)}?)"
                    if near else ""))
            elif all(rc[key] != defaults_of[a].get(key) for a in readers_of):
                own_key = read_instead_as(algorithm, bare) if sec == own else None
                out.append(f"{key!r} = {rc[key]!r} is read by {', '.join(readers_of)}, not by "
                           f"{algorithm} (" + (f"which reads {own_key!r} instead)" if own_key
                                               else f"whose keys are in section {own!r})"))
    return out


def check(algorithm: str, rc: Mapping[str, Any]) -> None:
    """Refuse a run config with :func:`problems`, naming every key."""
    bad = problems(algorithm, rc)
    if bad:
        raise ValueError(f"run config for {algorithm!r}: " + "; ".join(bad))


def declared() -> dict[str, Any]:
    """The App's run config with every default: what ``[tool.flwr.app.config]`` declares."""
    out: dict[str, Any] = {}
    for name in registry.ALGORITHMS:
        out.update(defaults(name))
    out["algorithm"] = "fdbnl"
    return out


def drift(algorithm: str, app_config: Mapping[str, Any]) -> list[str]:
    """Where the App's declared run config (flattened) disagrees with the defaults of
    ``algorithm``'s classes; the state-space family's model-specific data keys travel in a
    JSON file instead, so data keys must agree where declared but need not be."""
    out = []
    alg = registry.get(algorithm)
    for cls in readers(algorithm):
        must = cls is not alg.data_class()
        for key, value in cls().app_config().items():
            if key == "algorithm":
                continue
            if key not in app_config:
                if must:
                    out.append(f"{algorithm}: {key!r} is not declared in the App's run config")
            elif app_config[key] != value or type(app_config[key]) is not type(value):
                out.append(f"{algorithm}: {key!r} is {app_config[key]!r} in the App config but "
                           f"{value!r} in {cls.__name__}")
    return out
