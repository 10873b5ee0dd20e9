"""The result contract: ``<outputs>/<run-name>/result.json`` plus PNG plots beside it."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np


def jsonable(x: Any) -> Any:
    """Nested lists/dicts of plain numbers; non-finite floats become None."""
    if isinstance(x, np.ndarray):
        return jsonable(x.tolist())
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, (np.floating, float)):
        return float(x) if math.isfinite(x) else None
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, np.bool_):
        return bool(x)
    return x


@dataclass
class RunResult:
    """What one federated (or reference) run produced.

    ``estimates`` maps names to learned matrices; ``truth`` (optional) maps the same names to
    ground truth for plots; ``status`` is ``"completed"`` or says why the run stopped early.
    """

    algorithm: str
    config: dict[str, Any]
    metrics: dict[str, Any] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)
    estimates: dict[str, Any] = field(default_factory=dict)
    timing: dict[str, float] = field(default_factory=dict)
    truth: dict[str, Any] = field(default_factory=dict)
    status: str = "completed"
    evaluations: dict[int, dict[str, Any]] = field(default_factory=dict)

    # ---- Flower's ``Result`` interface -----------------------------------------------------
    @property
    def arrays(self) -> Any:
        """The final estimates as Flower's ``ArrayRecord`` (numeric arrays only, by name)."""
        from flwr.app import Array, ArrayRecord

        out = {}
        for name, value in self.estimates.items():
            a = np.asarray(value) if not isinstance(value, list) or _numeric(value) else None
            if a is not None and a.dtype.kind in "biuf" and a.size:
                out[name] = Array(np.ascontiguousarray(a))
        return ArrayRecord(out)

    @property
    def train_metrics_clientapp(self) -> dict[int, Any]:
        """Each round's history row (numbers only) as Flower's ``MetricRecord``."""
        return {int(r.get("round", i + 1)): _metric_record(r)
                for i, r in enumerate(self.history)}

    @property
    def evaluate_metrics_clientapp(self) -> dict[int, Any]:
        """Empty: clients never evaluate on their own data here."""
        return {}

    @property
    def evaluate_metrics_serverapp(self) -> dict[int, Any]:
        """The server-side evaluation (``evaluate_fn``) of each round as ``MetricRecord``."""
        return {r: _metric_record(m) for r, m in self.evaluations.items()}

    def to_dict(self) -> dict[str, Any]:
        """The JSON document of the result contract."""
        return jsonable({
            "algorithm": self.algorithm, "status": self.status, "config": self.config,
            "metrics": self.metrics, "history": self.history, "estimates": self.estimates,
            "timing": self.timing, "truth": self.truth,
        })

    def save(self, directory: str | Path) -> Path:
        """Write ``result.json`` atomically into ``directory`` and return its path."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / "result.json"
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.to_dict(), indent=1))
        tmp.replace(path)
        return path


def _numeric(value: list) -> bool:
    try:
        return np.asarray(value).dtype.kind in "biuf"
    except ValueError:  # ragged
        return False


def _metric_record(row: dict[str, Any]) -> Any:
    """The int/float entries of ``row`` as a ``MetricRecord``."""
    from flwr.app import MetricRecord

    return MetricRecord({k: (float(v) if isinstance(v, (float, np.floating)) else int(v))
                         for k, v in row.items()
                         if isinstance(v, (int, float, np.integer, np.floating))
                         and not isinstance(v, (bool, np.bool_))})


def load_result(path: str | Path) -> dict[str, Any]:
    """Read a ``result.json`` (a directory or the file itself)."""
    path = Path(path)
    if path.is_dir():
        path = path / "result.json"
    return json.loads(path.read_text())
