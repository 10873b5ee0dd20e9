"""PNG plots of learned graphs beside the truth, and of per-round curves.

:func:`save_with_plots` (or ``RunResult.save(directory, plots=True)``) writes a result's
``result.json`` and, beside it, the App's ``graphs.png`` (each graph estimate above its truth
when known) and ``history.png`` (per-round curves), from a user's own ServerApp as from the
App; a plot that fails never loses the result.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Mapping, Sequence
from logging import ERROR
from pathlib import Path
from typing import Any, Protocol

import numpy as np


class PlottedResult(Protocol):
    """What the plots read of a result: a :class:`~fedcausal_flwr.results.RunResult` has it
    (this module names no result class, so that results may call it and nothing circles)."""

    algorithm: str
    estimates: dict[str, Any]
    truth: dict[str, Any]
    history: list[dict[str, Any]]
    metrics: dict[str, Any]
    errors: list[str]

    def labels(self, estimate: str) -> tuple[list[str], list[str]] | None:  # noqa: D102
        ...

    def save(self, directory: str | Path) -> Path:  # noqa: D102
        ...

HISTORY_KEYS = ("h", "primal_residual", "shd_w", "shd_a", "auroc", "loss")
"""The per-round numbers ``history.png`` draws (those the last round has)."""


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _saved(plt, fig, path: str | Path, title: str) -> Path:
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)


MAX_TICKS = 30
"""Label every row and column with its name up to this many; beyond, indices only."""


def _ticks(ax, mat: np.ndarray, labels: tuple[Sequence[str], Sequence[str]] | None) -> None:
    """Name the rows and columns of a heatmap when they are few enough to read."""
    if labels is None:
        return
    rows, cols = labels
    n, m = mat.shape
    if len(rows) != n or len(cols) != m or max(n, m) > MAX_TICKS:
        return
    small = 8 if max(n, m) <= 12 else 6
    ax.set_yticks(range(n), [str(r) for r in rows], fontsize=small)
    ax.set_xticks(range(m), [str(c) for c in cols], fontsize=small, rotation=90)


def plot_graphs(estimates: Mapping[str, Any], truth: Mapping[str, Any], path: str | Path,
                title: str = "",
                labels: Mapping[str, tuple[Sequence[str], Sequence[str]] | None] | None = None
                ) -> Path:
    """Heatmaps of each 2-D estimate (top) above its ground truth (bottom) when known.

    ``labels``: ``{estimate: (row names, column names)}``; rows and columns are named on the
    axes when there are at most :data:`MAX_TICKS` of them (``RunResult.labels`` gives them).
    """
    labels = labels or {}
    plt = _pyplot()
    names = [k for k, v in estimates.items() if np.ndim(v) == 2]
    rows = 2 if any(k in truth for k in names) else 1
    fig, axes = plt.subplots(rows, max(len(names), 1), squeeze=False,
                             figsize=(3.6 * max(len(names), 1), 3.4 * rows))
    for j, name in enumerate(names):
        est = np.asarray(estimates[name], dtype=float)
        ref = np.asarray(truth[name], dtype=float) if name in truth else None
        vmax = max(np.abs(est).max(initial=0), np.abs(ref).max(initial=0) if ref is not None
                   else 0) or 1.0
        panels = [(est, f"learned {name}")] + ([(ref, f"true {name}")] if rows == 2 else [])
        for i, (mat, label) in enumerate(panels):
            ax = axes[i][j]
            if mat is None:
                ax.axis("off")
                continue
            im = ax.imshow(mat, cmap="RdBu_r", vmin=-vmax, vmax=vmax)
            _ticks(ax, mat, labels.get(name))
            ax.set_title(label)
            ax.set_xlabel("to")
            ax.set_ylabel("from")
            fig.colorbar(im, ax=ax, shrink=0.8)
        if rows == 2 and ref is None:
            axes[1][j].axis("off")
    return _saved(plt, fig, path, title)


def plot_frequencies(freqs: Mapping[str, Any], path: str | Path, title: str = "",
                     labels: Mapping[str, tuple[Sequence[str], Sequence[str]] | None] | None
                     = None, threshold: float | None = None) -> Path:
    """Heatmaps of each edge's selection frequency in [0, 1] (``{graph: frequency}``), the
    stable ones (frequency >= ``threshold``) outlined."""
    labels = labels or {}
    plt = _pyplot()
    fig, axes = plt.subplots(1, max(len(freqs), 1), squeeze=False,
                             figsize=(3.6 * max(len(freqs), 1), 3.4))
    for ax, (name, f) in zip(axes[0], freqs.items(), strict=False):
        f = np.asarray(f, dtype=float)
        im = ax.imshow(f, cmap="Greys", vmin=0.0, vmax=1.0)
        if threshold is not None:
            for i, j in zip(*np.nonzero(f >= threshold), strict=True):
                ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False,
                                           edgecolor="tab:red", linewidth=1.2))
        _ticks(ax, f, labels.get(name))
        ax.set_title(f"{name}: selection frequency")
        ax.set_xlabel("to")
        ax.set_ylabel("from")
        fig.colorbar(im, ax=ax, shrink=0.8)
    return _saved(plt, fig, path, title)


def plot_scores(lambdas: Sequence[float], taus: Sequence[float], scores: np.ndarray,
                chosen: tuple[float, float], path: str | Path, title: str = "") -> Path:
    """The held-out score of each (lambda, tau) against lambda, one line per tau, the
    chosen pair marked."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(4.8, 3.4))
    scores = np.asarray(scores, dtype=float)
    for t, tau in enumerate(taus):
        ax.plot(lambdas, scores[:, t], marker=".", label=f"tau {tau:g}")
    g, t = list(lambdas).index(chosen[0]), list(taus).index(chosen[1])
    ax.plot([lambdas[g]], [scores[g, t]], marker="o", markersize=10, fillstyle="none",
            color="black", label="chosen")
    ax.set_xscale("log")
    ax.set_xticks(list(lambdas), [f"{x:g}" for x in lambdas])
    ax.minorticks_off()
    ax.set_xlabel("lambda")
    ax.set_ylabel("pooled held-out loss")
    ax.legend(fontsize=7)
    return _saved(plt, fig, path, title)


def plot_history(history: Sequence[Mapping[str, Any]], keys: Sequence[str], path: str | Path,
                 title: str = "") -> Path:
    """One log-scale panel per key of the per-round history."""
    plt = _pyplot()
    keys = [k for k in keys if any(k in h for h in history)]
    fig, axes = plt.subplots(1, max(len(keys), 1), squeeze=False,
                             figsize=(3.6 * max(len(keys), 1), 3.0))
    for ax, key in zip(axes[0], keys, strict=False):
        pts = [(h["round"], h[key]) for h in history
               if h.get(key) is not None and np.isfinite(h[key])]
        if pts:
            x, y = zip(*pts, strict=True)
            ax.plot(x, y, marker=".")
            if min(y) > 0:
                ax.set_yscale("log")
        ax.set_title(key)
        ax.set_xlabel("round")
    return _saved(plt, fig, path, title)


PLOT_FILES = ("graphs.png", "history.png", "confidence.png", "penalty.png")
"""The PNGs :func:`result_plots` may draw beside a result.json."""


def result_plots(result: PlottedResult, directory: str | Path
                 ) -> list[tuple[str, Callable[[], Path]]]:
    """``(file name, draw)`` of each PNG of ``result``: ``graphs.png`` (the algorithm's graph
    estimates, above their truth when ``result.truth`` holds it), ``history.png`` and, for a
    replicated run, ``confidence.png`` (selection frequencies) and ``penalty.png`` (the
    held-out score curve)."""
    from fedcausal_flwr import registry

    out = Path(directory)
    alg = registry.ALGORITHMS.get(result.algorithm)
    graphs = alg.graphs if alg is not None else ()
    shown = {k: v for k, v in result.estimates.items() if k in graphs}
    truth = {k: v for k, v in result.truth.items() if k in shown}
    labels = {k: result.labels(k) for k in shown}
    keys = [k for k in HISTORY_KEYS if result.history and k in result.history[-1]]
    plots: list[tuple[str, Callable[[], Path]]] = []
    if shown:
        plots.append(("graphs.png", lambda: plot_graphs(
            shown, truth, out / "graphs.png",
            title=f"{result.algorithm}: learned" + (" vs true" if truth else ""),
            labels=labels)))
    if result.history:
        plots.append(("history.png", lambda: plot_history(
            result.history, keys, out / "history.png", title=result.algorithm)))
    est = result.estimates
    freqs = {k: est[f"{k}_frequency"] for k in graphs if f"{k}_frequency" in est}
    if freqs:
        pi = result.metrics.get("stability", {}).get("threshold")
        plots.append(("confidence.png", lambda: plot_frequencies(
            freqs, out / "confidence.png", title=f"{result.algorithm}: edge confidence",
            labels={k: result.labels(k) for k in freqs}, threshold=pi)))
    if "holdout_score" in est:
        plots.append(("penalty.png", lambda: plot_scores(
            list(np.ravel(est["lambda_path"])), list(np.ravel(est["tau_path"])),
            est["holdout_score"], (float(est["lambda_chosen"]), float(est["tau_chosen"])),
            out / "penalty.png", title=f"{result.algorithm}: penalty chosen on held-out data")))
    return plots


def plots_failed(result: PlottedResult, plots: Sequence[tuple[str, Callable[[], Any]]]) -> bool:
    """Run each ``(name, draw)``; a failure is logged and appended to ``result.errors``."""
    from flwr.common.logger import log

    failed = False
    for name, draw in plots:
        try:
            draw()
        except Exception as e:  # noqa: BLE001 - a plot never loses the result
            result.errors.append(f"plot {name}: {type(e).__name__}: {e}")
            log(ERROR, "plot %s failed (result.json is saved): %s", name,
                traceback.format_exc())
            failed = True
    return failed


def save_with_plots(result: PlottedResult, directory: str | Path) -> Path:
    """Write ``result.json`` into ``directory``, then ``graphs.png`` and ``history.png``
    beside it (:func:`result_plots`); the path of result.json.

    The result is saved before any plot is drawn; a plot that fails (matplotlib missing
    included) is logged and recorded in ``result.errors`` (and result.json saved again),
    never raised.
    """
    path = result.save(directory)
    for stale in PLOT_FILES:  # a previous run's figures never stay beside this result
        (Path(directory) / stale).unlink(missing_ok=True)
    if plots_failed(result, result_plots(result, directory)):
        path = result.save(directory)
    return path
