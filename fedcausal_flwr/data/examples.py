"""A node's data for an example App: its own CSV (node config ``data-path``), or the example's
own data for its ``partition-id``, made on the node (:func:`node_context`), so an example runs
unchanged in a simulation and from a FAB, which carries code and config, not CSV files."""

from __future__ import annotations

import copy
import hashlib
import os
import re
import tempfile
from collections.abc import Callable, Mapping, Sequence
from logging import WARNING
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from flwr.app import Context

_MADE: dict[tuple[Callable, int, int], Path] = {}


def _who(context: Context) -> str:
    return f"client {context.node_config.get('partition-id', '?')}"


def natural_key(name: str) -> list[Any]:
    """``name`` split into text and numbers, numbers by value (``site10`` after ``site9``)."""
    return [(1, int(part), "") if part.isdigit() else (0, 0, part)
            for part in re.split(r"(\d+)", name)]


def made_csv(csv_files: Callable[[int], Mapping[str, str]], partition: int,
             partitions: int, who: str) -> Path:
    """The example's CSV of ``partition``, made here once per process into the temp folder
    (``csv_files(partitions)``: file name -> CSV text; partitions take them in the names'
    natural order, numbers by value: ``site2.csv`` before ``site10.csv``)."""
    key = (csv_files, partition, partitions)
    if key in _MADE:
        return _MADE[key]
    files = dict(sorted(csv_files(partitions).items(), key=lambda kv: natural_key(kv[0])))
    if not 0 <= partition < len(files):
        raise ValueError(
            f"{who}: no node config data-path, and the example makes {len(files)} CSVs "
            f"({', '.join(files)}) for partitions 0-{len(files) - 1}: run it with "
            f"{len(files)} SuperNodes (--federation-config num-supernodes={len(files)}), or "
            "give this node its own CSV: --node-config 'data-path=\"/path/to/file.csv\"'")
    name, text = list(files.items())[partition]
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    user = getattr(os, "getuid", lambda: "any")()  # one folder per user: no one else's files
    path = Path(tempfile.gettempdir()) / f"fedcausal-flwr-example-data-{user}" / digest / name
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        part = path.with_name(f".{name}.{os.getpid()}.part")  # this process's own
        part.write_text(text)
        part.replace(path)  # atomic: nodes of one machine may make it at once
    _MADE[key] = path
    return path


def node_context(context: Context, csv_files: Callable[[int], Mapping[str, str]],
                 node_configs: Sequence[Mapping[str, Any]] = ()) -> Context:
    """``context`` whose node config names a CSV: its own ``data-path`` if set; else the
    example's data for its ``partition-id`` (made here by ``csv_files``, with
    ``node_configs[partition]`` for the keys the node config lacks) and a WARNING naming how
    to give one's own CSV; else a ValueError. The returned Context is for reading data only
    (``context.state`` is the same object)."""
    config = context.node_config
    if str(config.get("data-path", "") or "").strip():
        return context
    who = _who(context)
    if "partition-id" not in config:
        raise ValueError(f"{who}: this SuperNode has no node config data-path (its own CSV) "
                         "and no partition-id (the example's data): start it with "
                         "--node-config 'data-path=\"/path/to/file.csv\"'")
    partition = int(config["partition-id"])
    partitions = int(config.get("num-partitions", partition + 1))
    first = (csv_files, partition, partitions) not in _MADE
    path = made_csv(csv_files, partition, partitions, who)
    if first:
        from flwr.common.logger import log

        log(WARNING, "%s: no node config data-path: using the example's own data %s, made on "
            "this node. For your own CSV start the SuperNode with --node-config "
            "'data-path=\"/path/to/file.csv\"' (python make_data.py writes the example's "
            "files to data/)", who, path.name)
    extra = dict(node_configs[partition]) if partition < len(node_configs) else {}
    merged = {**extra, **dict(config), "data-path": str(path)}
    made = copy.copy(context)
    made.node_config = merged
    return made


# ---- the command line: python -m fedcausal_flwr new <algorithm> DIR ------------------------
