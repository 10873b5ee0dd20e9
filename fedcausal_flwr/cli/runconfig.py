"""The App a launch runs and the run config it sends: ``flwr run``'s rules, checked first.

Finds the Flower App directory (:func:`find_app_dir`), reads what its pyproject declares, refuses
a run-config key it does not declare before Flower starts (Flower says only "Invalid run
configuration"), adds ``outputs``/``run-name`` where the App declares them, and writes a
run config in the ``flwr run --run-config`` syntax (:func:`run_config_arg`).
"""

from __future__ import annotations

import difflib
import os
import re
import sys
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

APP_DIR = Path(__file__).resolve().parents[2]  # the App's pyproject in a source checkout
PATH_KEYS = ("outputs", "data-path")
BIND_KEY = "bind-partitions"  # the shared run-config key that binds partitions to node ids


class AppDirError(ValueError):
    """No Flower App directory (a folder whose pyproject.toml has ``[tool.flwr.app]``)."""


def is_app_dir(path: Path) -> bool:
    """Whether ``path`` holds a pyproject.toml with a ``[tool.flwr.app]`` table."""
    try:
        doc = tomllib.loads((Path(path) / "pyproject.toml").read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return False
    return isinstance(doc.get("tool", {}).get("flwr", {}).get("app"), dict)


def find_app_dir(app_dir: Path | str | None = None) -> Path:
    """The Flower App directory ``flwr run`` gets.

    ``app_dir`` if given (it must be an App); else the current directory if it is one; else
    this package's source checkout (:data:`APP_DIR`). An installed wheel has no App around it
    (``APP_DIR`` is then site-packages): that raises :class:`AppDirError` naming what to pass.
    """
    if app_dir is not None:
        path = Path(app_dir).expanduser().resolve()
        if not is_app_dir(path):
            raise AppDirError(f"{path} is not a Flower App directory: it needs a pyproject.toml "
                              "with a [tool.flwr.app] table")
        return path
    for path in (Path.cwd(), APP_DIR):
        if is_app_dir(path):
            return path.resolve()
    raise AppDirError(
        f"no Flower App found: neither the current directory ({Path.cwd()}) nor {APP_DIR} has "
        "a pyproject.toml with [tool.flwr.app]. Pass --app DIR (Python: app_dir=DIR), the "
        "folder of your App's pyproject.toml (e.g. a copy of one of the project's examples/), "
        "or run from that folder.")


def default_flwr_home() -> Path:
    """``$FLWR_HOME`` when set (never overridden), else ``./.flwr``."""
    home = os.environ.get("FLWR_HOME")
    return Path(home).expanduser().resolve() if home else (Path.cwd() / ".flwr").resolve()


def toml_value(v: Any) -> str:
    """One run-config value in TOML syntax."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'


def parse_run_config(text: str) -> dict[str, Any]:
    """``'k=v dbn.k2="s"'`` (the ``flwr run --run-config`` syntax) as a flat dict, dotted
    keys kept dotted as Flower flattens them (``dbn.lambda-w``)."""
    return _flat(tomllib.loads("\n".join(_split_pairs(text)))) if text.strip() else {}


def _flat(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, Mapping):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _app_table(app_dir: Path | str) -> dict[str, Any]:
    doc = tomllib.loads((Path(app_dir) / "pyproject.toml").read_text())
    return doc.get("tool", {}).get("flwr", {}).get("app", {})


def declared_config(app_dir: Path | str) -> dict[str, Any]:
    """The run config the App's ``pyproject.toml`` declares (its defaults), flattened as
    Flower does (``dbn.lambda-w``)."""
    return _flat(_app_table(app_dir).get("config", {}))


def declared_keys(app_dir: Path | str) -> set[str]:
    """The run-config keys the App's ``pyproject.toml`` declares, flattened as Flower does."""
    return set(declared_config(app_dir))


def is_package_app(app_dir: Path | str) -> bool:
    """Whether the App's ServerApp is this package's (whose keys
    :func:`fedcausal_flwr.appconfig.problems` knows)."""
    comps = _app_table(app_dir).get("components", {})
    return comps.get("serverapp") == "fedcausal_flwr.server_app:app"


def undeclared_keys(cfg: Mapping[str, Any], app_dir: Path | str) -> list[str]:
    """The keys of ``cfg`` the App does not declare: ``flwr run`` refuses them, naming none."""
    return sorted(set(cfg) - declared_keys(app_dir))


def undeclared_message(keys: list[str], app_dir: Path | str) -> str:
    """One line naming every undeclared key (with the nearest declared key) and the App's
    pyproject, where a user adds a key the App should take."""
    declared = sorted(declared_keys(app_dir))
    named = []
    for key in keys:
        near = difflib.get_close_matches(key, declared, n=1, cutoff=0.6)
        named.append(repr(key) + (f" (did you mean {near[0]!r}?)" if near else ""))
    where = Path(app_dir).resolve() / "pyproject.toml"
    return (f"{', '.join(named)} not declared by the App: {where} [tool.flwr.app.config] "
            + (f"declares {len(declared)} keys" if declared else "declares no key")
            + "; flwr run refuses a key its App does not declare (Flower says only "
            "'Invalid run configuration')")


def config_problems(cfg: Mapping[str, Any], app_dir: Path | str) -> list[str]:
    """Why ``flwr run`` would refuse ``cfg`` or this package's ServerApp misread it, one line
    each (empty: none). This package's App: :func:`renamed_keys`; any App: the keys it does not
    declare (:func:`undeclared_message`), then the values its algorithm's settings refuse
    (:func:`value_problems`)."""
    out = renamed_keys(cfg) if is_package_app(app_dir) else []
    missing = undeclared_keys(cfg, app_dir)
    if out or missing:
        return out + ([undeclared_message(missing, app_dir)] if missing else [])
    return value_problems(cfg, app_dir)


def app_algorithm(cfg: Mapping[str, Any], app_dir: Path | str) -> str | None:
    """The registered algorithm a run of the App runs: ``cfg``'s or the App's declared
    ``algorithm``; else (a user's App, e.g. a starter) the algorithm of a declared section
    whose settings read most of the section's declared keys; None when no registered section
    is declared."""
    from fedcausal_flwr import registry

    declared = declared_config(app_dir)
    named = cfg.get("algorithm", declared.get("algorithm"))
    if named is not None:
        return str(named).strip().lower() if str(named).strip().lower() in registry.ALGORITHMS \
            else None
    bare: dict[str, set[str]] = {}
    for key in declared:
        sec, dot, rest = key.partition(".")
        if dot:
            bare.setdefault(sec, set()).add(rest)
    fits = [(len(keys & set(a.settings_class().keys())), -i, name)
            for i, (name, a) in enumerate(registry.ALGORITHMS.items())
            if (keys := bare.get(a.section))]
    return max(fits)[2] if fits else None


def value_problems(cfg: Mapping[str, Any], app_dir: Path | str) -> list[str]:
    """The values of ``cfg`` over the App's declared run config that the settings of its
    algorithm (:func:`app_algorithm`) refuse, one line each: checked here, before any Flower
    process, with the settings' own errors (the ServerApp would raise them only once it
    runs). Nothing for an App without a registered section."""
    from fedcausal_flwr import appconfig

    algorithm = app_algorithm(cfg, app_dir)
    if algorithm is None:
        return []
    merged = {**declared_config(app_dir), **cfg}
    out = []
    for cls in appconfig.readers(algorithm):
        try:
            cls.from_run_config(merged)
        except ValueError as e:
            line = re.sub(r"^run config:? ", "", str(e))
            if line not in out:
                out.append(line)
    return out


RESULT_KEYS = ("outputs", "run-name")  # an App declaring both writes <outputs>/<run-name>


def writes_result(app_dir: Path | str) -> bool:
    """Whether the App declares ``outputs`` and ``run-name``: it writes
    ``<outputs>/<run-name>/result.json`` (this package's App and its examples do)."""
    return set(RESULT_KEYS) <= declared_keys(app_dir)


def app_run_config(cfg: Mapping[str, Any], app_dir: Path | str) -> dict[str, Any]:
    """``cfg`` plus what the App declares of ``outputs`` and ``run-name`` (nothing for an App
    that declares neither): the user's values, else the declared ones; a ``run-name`` given
    or declared empty becomes ``<algorithm>-<timestamp>``, so the launcher knows where
    result.json lands."""
    from fedcausal_flwr.appconfig import default_run_name

    defaults, out = declared_config(app_dir), dict(cfg)
    if "outputs" in defaults:
        out.setdefault("outputs", defaults["outputs"])
    if "run-name" in defaults and not str(out.get("run-name", "") or ""):
        out["run-name"] = (str(defaults["run-name"] or "") or default_run_name(
            out.get("algorithm", defaults.get("algorithm", "run"))))
    return out


def deploy_run_config(run_config: Mapping[str, Any], app_dir: Path | str,
                      secure: bool) -> dict[str, Any]:
    """The run config of a deployment: with SuperNode authentication, ``bind-partitions=true``
    (a partition stays with the node id of the registered key that held it) unless
    ``run_config`` sets it, where the App declares the key (``flwr run`` refuses a key its App
    does not declare; such an App decides in its own ServerApp)."""
    cfg = dict(run_config)
    if secure and BIND_KEY in declared_keys(app_dir):
        cfg.setdefault(BIND_KEY, True)
    return cfg


def renamed_keys(cfg: Mapping[str, Any]) -> list[str]:
    """The run-config problems of ``cfg`` (:func:`fedcausal_flwr.appconfig.problems`): a key
    without its section is refused here, naming its new name, before any Flower process."""
    from fedcausal_flwr.appconfig import problems

    return problems(str(cfg.get("algorithm", "fdbnl")), cfg)


def _split_pairs(text: str) -> list[str]:
    out, cur, quote = [], "", False
    for ch in text.strip():
        if ch == '"':
            quote = not quote
        if ch.isspace() and not quote:
            if cur:
                out.append(cur)
            cur = ""
        else:
            cur += ch
    return out + ([cur] if cur else [])


def with_absolute_paths(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """``cfg`` with its relative paths (:data:`PATH_KEYS`) made absolute, as it is sent."""
    cfg = dict(cfg)
    for key in list(cfg):
        if key.rpartition(".")[2] in PATH_KEYS and cfg.get(key):
            cfg[key] = str(Path(str(cfg[key])).expanduser().resolve())
    return cfg


def run_config_arg(cfg: Mapping[str, Any]) -> str:
    """A dict as the ``--run-config`` argument, relative paths made absolute."""
    return " ".join(f"{k}={toml_value(v)}" for k, v in with_absolute_paths(cfg).items())


def launch_outputs_root(cfg: Mapping[str, Any]) -> Path | None:
    """The outputs root of the ServerApp a launch starts: ``$FEDCAUSAL_OUTPUTS_ROOT`` when set
    here (the operator's; the processes inherit it), else the run config's ``outputs`` made
    absolute (the launcher's user runs the ServerApp host: their own folder), else None (an
    App that declares no ``outputs``: its ServerApp's default)."""
    from fedcausal_flwr.appconfig import OUTPUTS_ROOT_ENV

    if os.environ.get(OUTPUTS_ROOT_ENV):
        return Path(os.environ[OUTPUTS_ROOT_ENV]).expanduser().resolve()
    value = cfg.get("outputs")
    return Path(str(value)).expanduser().resolve() if value else None


def outputs_env(cfg: Mapping[str, Any]) -> dict[str, str]:
    """``{FEDCAUSAL_OUTPUTS_ROOT: root}`` for the processes a launch starts, where this
    environment does not set it already (:func:`launch_outputs_root`)."""
    from fedcausal_flwr.appconfig import OUTPUTS_ROOT_ENV

    root = launch_outputs_root(cfg)
    return {} if root is None or os.environ.get(OUTPUTS_ROOT_ENV) else \
        {OUTPUTS_ROOT_ENV: str(root)}


def flwr_env(flwr_home: Path) -> dict[str, str]:
    """Environment for the Flower CLIs: own FLWR_HOME, no per-run dependency install.

    This interpreter's ``bin`` goes first on ``PATH``: the Flower CLIs start
    ``flower-superlink`` / ``flower-superexec`` by name, also from an unactivated virtualenv.
    The nodes it starts (simulation, loopback deployment) are the submitter's own, so they
    read the run config's data paths (``FEDCAUSAL_ALLOW_RUN_CONFIG_PATHS=1``, see
    :mod:`fedcausal_flwr.data.nodefiles`; already set in the environment: kept).
    """
    flwr_home.mkdir(parents=True, exist_ok=True)
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    return {**os.environ, "FLWR_HOME": str(flwr_home), "PATH": path,
            "FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION": "1",
            "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0", "PYTHONUNBUFFERED": "1",
            "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "1"),
            "FEDCAUSAL_ALLOW_RUN_CONFIG_PATHS": os.environ.get(
                "FEDCAUSAL_ALLOW_RUN_CONFIG_PATHS", "1")}



def knowledge_config(path: Path, algorithm: str) -> dict[str, str]:
    """The run-config keys of the prior knowledge in the CSV at ``path``
    (:meth:`~fedcausal_flwr.knowledge.Knowledge.from_file`), in ``algorithm``'s section: its
    edge keys, or its known-zero key for ``known-zero`` rows (statements ``algorithm`` does not
    take are a ValueError naming who takes them). Read on the submitting machine, so neither
    the server nor a node opens a file for it."""
    from fedcausal_flwr import registry
    from fedcausal_flwr.knowledge import KEYS, KNOWN_ZERO, Knowledge

    alg = registry.get(algorithm)
    keys = alg.settings_class().keys()
    know = Knowledge.from_file(path)
    if know.edges() and "forbid" not in keys:
        raise ValueError(f"{algorithm} takes no edge knowledge ({edge_knowledge()})")
    zero = next((k for k in keys if k.endswith(KNOWN_ZERO)), None)
    if know.zero_blocks and zero is None:
        raise ValueError(f"{algorithm} takes no known-zero blocks ({edge_knowledge()})")
    text = know.config()
    out = {f"{alg.section}.{k}": text[k] for k in KEYS if text[k]}
    if know.zero_blocks:
        out[alg.settings_class().app_key(zero)] = text[KNOWN_ZERO]
    return out


def edge_knowledge() -> str:
    """Which registered algorithms take edge knowledge (a ``forbid`` key), and which take
    known-zero keys instead: ``"FDBNL, PFDBNL and VFedCD do; FedGC/FedCF take
    statespace.ss-known-zero"``, derived from the registry."""
    from fedcausal_flwr import registry

    takers, zeros = [], {}
    for a in registry.ALGORITHMS.values():
        keys = a.settings_class().keys()
        if "forbid" in keys:
            takers.append(a.title)
        for key in (k for k in keys if k.endswith("known-zero")):
            zeros.setdefault(a.settings_class().app_key(key), []).append(a.title)
    said = (", ".join(takers[:-1]) + " and " + takers[-1] if len(takers) > 1
            else "".join(takers)) + (" do" if len(takers) > 1 else " does")
    return "; ".join([said, *(f"{'/'.join(titles)} take {key}" for key, titles in zeros.items())])
