"""What a node reads: only files its operator allowed, only regular files within limits, and
errors that never carry the file's content.

The node decides what it reads. Its own CSV comes from its node config (``data-path``); a
path in the RUN config (``dbn.data-path``, ``statespace.data-path``/``ss-data-path``,
``vertical.data-path``: DREAM4/NetSim/Sachs/JSON/plant files) is opened on a node only when the
node's operator opted in: node config ``allow-run-config-paths=true`` (or the environment
variable ``FEDCAUSAL_ALLOW_RUN_CONFIG_PATHS=1`` of the node's process), or the path resolves
under the node config's ``data-dir``. Otherwise the node refuses with an error naming the key.
In-process runs (:class:`fedcausal_flwr.testing.InProcessGrid`) opt in by default: there the
submitter is the node's operator. The ServerApp (the submitter's side) reads run-config paths
for the evaluation truth without these checks.

A simulated node's own files: Flower's simulation gives every virtual node only
``partition-id`` and ``num-partitions``. ``python -m fedcausal_flwr.cli.launch simulate
--node-data`` therefore sets the environment variable ``FEDCAUSAL_NODE_CONFIGS`` (JSON
``{"<partition-id>": {"data-path": ...}, ...}``) on the processes it starts;
:func:`own_node_config` adds the entry of the node's partition to its node config (keys the
node config has win). Like
``FEDCAUSAL_ALLOW_RUN_CONFIG_PATHS`` it is the node process's environment, set by the node's
operator (in a simulation: the machine's user, who starts every virtual node), never the run
config, which the submitter controls.

Every file a node opens must be a regular file (no device, FIFO or directory) of at most
``max-file-mb`` MB (default 512), checked before it is opened for parsing; a table has at
most ``max-columns`` columns (default 2000, checked on the header before any data row) and
``max-rows`` data rows (default 10,000,000, checked while reading). Each is a node-config
key, and the error names the key to raise. Likewise ``max-psi-set`` (default 1,000,000): the
most IDs of another VFedCD party's set this node re-blinds in the private set intersection
(about 0.5 ms of elliptic-curve work per ID and hop); the node reports it at discovery, the
server stops a run whose sets exceed a party's limit before any PSI exchange, and the node
refuses a larger set before any work per point. Limits come only from the node config (and
the node's environment), never from the run config.

Errors cross the wire (the server sees them): they name the file, row and column (and header
names, which a run shares anyway) but never a cell's content or a line of the file; the
detail is logged on the node only (:func:`logged`).
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from logging import WARNING
from pathlib import Path
from typing import Any

ALLOW_RUN_CONFIG_PATHS = "allow-run-config-paths"
ALLOW_ENV = "FEDCAUSAL_ALLOW_RUN_CONFIG_PATHS"
NODE_CONFIGS_ENV = "FEDCAUSAL_NODE_CONFIGS"
DATA_DIR = "data-dir"
MAX_FILE_MB = "max-file-mb"
MAX_COLUMNS = "max-columns"
MAX_ROWS = "max-rows"
MAX_PSI_SET = "max-psi-set"
CLIENT_FIELD = "{client}"


@dataclass(frozen=True)
class Limits:
    """The node's limits on a file it reads (node config ``max-file-mb``, ``max-columns``,
    ``max-rows``) and on the work another node can ask of it (``max-psi-set``: the most
    points of another VFedCD party's set it re-blinds in the private set intersection)."""

    max_file_mb: float = 512.0
    max_columns: int = 2000
    max_rows: int = 10_000_000
    max_psi_set: int = 1_000_000

    @classmethod
    def from_node_config(cls, node_config: Mapping[str, Any]) -> Limits:
        out = {}
        for key, attr, kind in ((MAX_FILE_MB, "max_file_mb", float),
                                (MAX_COLUMNS, "max_columns", int), (MAX_ROWS, "max_rows", int),
                                (MAX_PSI_SET, "max_psi_set", int)):
            raw = node_config.get(key)
            if raw is None or str(raw).strip() == "":
                continue
            try:
                v = kind(raw)
            except (TypeError, ValueError):
                raise ValueError(f"node config {key}={raw!r}: expected a positive number") from None
            if not v > 0:
                raise ValueError(f"node config {key}={raw!r}: expected a positive number")
            out[attr] = v
        return cls(**out)


_LIMITS: ContextVar[Limits | None] = ContextVar("fedcausal_node_limits", default=None)


def limits() -> Limits:
    """The limits in force (those of the node being built, else the defaults)."""
    return _LIMITS.get() or Limits()


@contextmanager
def node_limits(node_config: Mapping[str, Any]) -> Iterator[Limits]:
    """Within the block, the readers use the limits of this node config."""
    lim = Limits.from_node_config(node_config)
    token = _LIMITS.set(lim)
    try:
        yield lim
    finally:
        _LIMITS.reset(token)


def own_node_config(node_config: Mapping[str, Any]) -> dict[str, Any]:
    """``node_config`` plus this node's entry of ``$FEDCAUSAL_NODE_CONFIGS`` (by its
    ``partition-id``; the node config's own keys win); a ValueError names the variable when
    it is not a JSON object of objects."""
    raw = os.environ.get(NODE_CONFIGS_ENV, "").strip()
    if not raw:
        return dict(node_config)
    try:
        table = json.loads(raw)
    except ValueError:
        raise ValueError(f"environment variable {NODE_CONFIGS_ENV} is not JSON") from None
    if not isinstance(table, dict) or not all(isinstance(v, dict) for v in table.values()):
        raise ValueError(f"environment variable {NODE_CONFIGS_ENV} must be a JSON object "
                         '{"<partition-id>": {"key": value, ...}, ...}')
    mine = table.get(str(node_config.get("partition-id", "")), {})
    return {**mine, **dict(node_config)}


def adopt_node_config(node_config: dict[str, Any]) -> dict[str, Any]:
    """Fill ``node_config`` in place with :func:`own_node_config` (a simulated node's own
    entries; nothing changes without ``$FEDCAUSAL_NODE_CONFIGS``) and return it."""
    node_config.update({k: v for k, v in own_node_config(node_config).items()
                        if k not in node_config})
    return node_config


def logged(message: str, detail: str) -> str:
    """Log ``message`` with its local ``detail`` (content of the file: never sent) on this
    node, and return ``message`` for the exception that crosses the wire."""
    from flwr.common.logger import log

    log(WARNING, "%s [local detail, not sent: %s]", message, detail)
    return message


def checked_file(path: str | Path, where: str) -> Path:
    """``path`` if it is a regular file within ``max-file-mb``; else FileNotFoundError /
    ValueError naming ``where`` (and the node-config key that raises the limit)."""
    p = Path(path).expanduser()
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise FileNotFoundError(f"{where}: no such file") from None
    except OSError as e:
        raise ValueError(f"{where}: cannot stat it ({type(e).__name__})") from None
    if not stat.S_ISREG(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        raise ValueError(f"{where}: {kind}; a node reads regular files only")
    lim = limits()
    if st.st_size > lim.max_file_mb * 1024 * 1024:
        raise ValueError(f"{where}: {st.st_size / 1024 / 1024:.0f} MB, over the node's limit "
                         f"of {lim.max_file_mb:g} MB (node config {MAX_FILE_MB} raises it)")
    return p


def checked_dir(path: str | Path, where: str) -> Path:
    """``path`` if it is a directory, else an error naming ``where``."""
    p = Path(path).expanduser()
    if not p.is_dir():
        raise FileNotFoundError(f"{where}: no such directory")
    return p


def check_columns(n: int, where: str) -> None:
    """An error naming ``max-columns`` when a header has more than the limit."""
    lim = limits().max_columns
    if n > lim:
        raise ValueError(f"{where}: {n} columns, over the node's limit of {lim} (node config "
                         f"{MAX_COLUMNS} raises it)")


def check_rows(n: int, where: str) -> None:
    """An error naming ``max-rows`` once a file has more data rows than the limit."""
    lim = limits().max_rows
    if n > lim:
        raise ValueError(f"{where}: more than {lim} data rows, over the node's limit (node "
                         f"config {MAX_ROWS} raises it)")


def _flag(node_config: Mapping[str, Any]) -> bool:
    v = node_config.get(ALLOW_RUN_CONFIG_PATHS, None)
    if v is None:
        v = os.environ.get(ALLOW_ENV, "")
    return v is True or str(v).strip().lower() in ("1", "true", "yes")


def _under(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
    except ValueError:
        return False
    return True


def allow_run_config_paths(run_config: Mapping[str, Any], node_config: Mapping[str, Any],
                           keys: Mapping[str, str], who: str, pid: int = 0) -> None:
    """Refuse (ValueError) a run-config path this node did not allow.

    ``keys``: run-config key as read (``data-path``) -> the key as the submitter spells it
    (``dbn.data-path``). A non-empty value is allowed when the node config says
    ``allow-run-config-paths=true`` (or the process has ``FEDCAUSAL_ALLOW_RUN_CONFIG_PATHS=1``)
    or when it resolves under the node config's ``data-dir``.
    """
    if _flag(node_config):
        return
    root = str(node_config.get(DATA_DIR, "") or "").strip()
    for key, spelled in keys.items():
        raw = str(run_config.get(key, "") or "").strip()
        if not raw:
            continue
        path = Path(raw.replace(CLIENT_FIELD, str(pid))).expanduser()
        if root and _under(path, Path(root).expanduser()):
            continue
        raise ValueError(
            f"{who}: run config {spelled} names a file on this node; a node opens only the "
            f"files its operator allows: node config {DATA_DIR}=<directory holding it> or "
            f"{ALLOW_RUN_CONFIG_PATHS}=true (or its own data-path)")
