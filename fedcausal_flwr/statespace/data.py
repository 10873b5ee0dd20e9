"""Data of the state-space family: the papers' synthetic systems and the plant-CSV loader.

Data keys of the run config (hyphenated, defaults in :class:`FedGCData`, FedCF's own in
:class:`FedCFData`; a ``.json`` file named by ``data-path`` may set any of them, and any
settings key, since ``flwr run`` only accepts keys the App declares). The learning keys and
their defaults are ``FedGCSettings`` / ``FedCFSettings`` in ``statespace/model.py``; the
``seed`` draws the noise here and seeds the learning there.

``ss-model``        ``"fedgc"`` or ``"fedcf"`` (set by the strategy)
``ss-clients``      M, number of clients of the synthetic system
``ss-p``, ``ss-u``, ``ss-d``  state, input and measurement size per client
``ss-t``            time steps of the training series
``ss-coupling``     value of every entry of ``A_{m+1,m}`` (chain m -> m+1)
``ss-q``, ``ss-r``  process and measurement noise variances
``ss-shift-scale``  multiplies the FedGC mean-shift levels (0: no shifts)
``ss-shift-cycle`` shift one state of client 0 per window, cycling (else all states)
``ss-shift-known``  FedGC: the shifts are client 0's own operating-point changes, known to
                    its Kalman filter as the input ``u_0^{t-1} = b_0^t`` (``B_00 = I``);
                    client 1 only sees their effect through ``A_21`` (else no KF models them)
``ss-input-ar``     AR(1) coefficient of the inputs (0: i.i.d., the FedCF paper)
``ss-system-seed``  seed of the system matrices (``seed`` draws the noise)
``ss-data``         ``"synthetic"``, ``"netsim"`` (``ss-clients`` groups of regions,
                    ``ss-netsim-subjects`` concatenated, 0: all) or ``"plant-csv"`` (HAI/SWaT
                    layout, ``ss-group`` = ``"prefix"`` or ``"digit"``); file at ``ss-data-path``;
                    or ``"node"``: every SuperNode's own CSV (node config ``data-path``).
                    Real clients identify ``(A_mm, C_mm, K_m)`` by SVD + VAR(1) with P = ``ss-p``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from fedcausal_flwr.data.nodefiles import checked_file, logged
from fedcausal_flwr.settings import (
    MAX_CLIENTS,
    MAX_ROWS,
    MAX_VARS,
    Settings,
    section_view,
    setting,
)
from fedcausal_flwr.statespace import kalman, lti

# FedGC fork's shift windows (1000-2000 +5, ... of T = 30000, B = 0.1), as fractions of T.
SHIFTS = ((1 / 30, 2 / 30, 0.5), (3 / 30, 5 / 30, -0.3), (7 / 30, 9 / 30, 0.2),
          (12 / 30, 18 / 30, 0.1), (25 / 30, 26 / 30, -0.2))

@dataclass(frozen=True)
class FedGCData(Settings):
    """The FedGC data keys with their defaults (the one source; validated on every read)."""

    section: ClassVar[str] = "statespace"

    clients: int = setting(2, "ss-clients", ge=1, le=MAX_CLIENTS)
    p: int = setting(2, "ss-p", ge=1, le=MAX_VARS)
    u: int = setting(0, "ss-u", ge=0, le=MAX_VARS)
    d: int = setting(8, "ss-d", ge=1, le=MAX_VARS)
    coupling: float = setting(0.25, "ss-coupling")
    t: int = setting(10000, "ss-t", ge=3, le=MAX_ROWS)
    q: float = setting(1e-3, "ss-q", gt=0)
    r: float = setting(1e-3, "ss-r", gt=0)
    shift_scale: float = setting(4.0, "ss-shift-scale", ge=0)
    input_ar: float = setting(0.0, "ss-input-ar", gt=-1, lt=1)
    system_seed: int = setting(-1, "ss-system-seed", ge=-1)
    shift_cycle: bool = setting(True, "ss-shift-cycle")
    shift_known: bool = setting(False, "ss-shift-known")
    data: str = setting("synthetic", "ss-data", choices=("synthetic", "netsim", "plant-csv",
                                                                "node"))
    data_path: str = setting("", "ss-data-path")
    netsim_subjects: int = setting(0, "ss-netsim-subjects", ge=0, le=10_000)
    group: str = setting("prefix", "ss-group", choices=("prefix", "digit"))


@dataclass(frozen=True)
class FedCFData(FedGCData):
    """FedCF's data defaults: inputs, fewer measurements, more noise, no mean shifts."""

    u: int = setting(2, "ss-u", ge=0, le=MAX_VARS)
    d: int = setting(2, "ss-d", ge=1, le=MAX_VARS)
    q: float = setting(1e-2, "ss-q", gt=0)
    r: float = setting(1e-2, "ss-r", gt=0)
    shift_scale: float = setting(0.0, "ss-shift-scale", ge=0)


DEFAULTS: dict[str, Any] = FedGCData().run_config()
FEDCF_DEFAULTS: dict[str, Any] = {k: v for k, v in FedCFData().run_config().items()
                                  if v != DEFAULTS[k]}


def merged_config(rc: Mapping[str, Any], model: str = "fedgc") -> dict[str, Any]:
    """Defaults < model defaults < run config < the JSON file at ``data-path`` (if any); the
    data keys are validated (:class:`FedGCData` / :class:`FedCFData`)."""
    cls = FedCFData if model == "fedcf" else FedGCData
    rc = section_view(cls.section, rc)
    out = {**cls().run_config(), **rc}
    path = str(rc.get("data-path", "") or "")
    if path.endswith(".json"):
        out.update(read_json_config(path))
    cls.from_run_config(out)
    out["ss-model"] = model
    return out


def read_json_config(path: str | Path) -> dict[str, Any]:
    """The JSON object of run-config keys at ``data-path``; a ValueError names the file and
    the problem (line and column of malformed JSON)."""
    where = f"{path} (run-config key 'data-path')"
    p = checked_file(path, where)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(logged(f"{where}: cannot read it ({type(e).__name__})", str(e))
                         ) from None
    if not text.strip():
        raise ValueError(f"{where}: empty file; expected a JSON object of run-config keys")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        # e.msg is the parser's fixed description ("Expecting value"), never the text
        raise ValueError(f"{where}: malformed JSON at line {e.lineno}, column {e.colno}: "
                         f"{e.msg}") from None
    if not isinstance(doc, dict):
        raise ValueError(f"{where}: expected a JSON object of run-config keys, got "
                         f"{type(doc).__name__}")
    return doc


def with_defaults(rc: Mapping[str, Any]) -> Mapping[str, Any]:
    """``rc`` with every data key it lacks at its data class's default (FedCF's when
    ``ss-model`` is ``"fedcf"``; ``seed`` at the settings' default), validated: a library
    caller's dict without ``seed`` (or any other data key) reads as the App's would. A
    complete config comes back as it is."""
    from fedcausal_flwr.statespace.settings import FedCFSettings, FedGCSettings

    fedcf = rc.get("ss-model") == "fedcf"
    cls = FedCFData if fedcf else FedGCData
    settings = FedCFSettings if fedcf else FedGCSettings
    defaults = {**cls().run_config(), "seed": settings().seed}  # the settings' default seed
    if all(k in rc for k in defaults):
        return rc
    out = {**defaults, **section_view(cls.section, rc)}
    cls.from_run_config(out)
    settings(seed=out["seed"])  # a seed is validated like every key
    return out


def synthetic_system(rc: Mapping[str, Any]) -> lti.LTISystem:
    """The paper's default system: chain couplings ``A_{m+1,m} = c * ones`` (A_12 = 0)."""
    rc = with_defaults(rc)
    M, p, u, d = (int(rc[k]) for k in ("ss-clients", "ss-p", "ss-u", "ss-d"))
    seed = int(rc["ss-system-seed"]) if int(rc["ss-system-seed"]) >= 0 else int(rc["seed"])
    rng = np.random.default_rng([seed, 1])
    c = float(rc["ss-coupling"])
    couplings = {(m + 1, m): c * np.ones((p, p)) for m in range(M - 1)}
    for _ in range(1000):  # every C_mm well conditioned (cond < 10)
        sys = lti.random_system([p] * M, [u] * M, [d] * M, couplings, rng,
                               q=float(rc["ss-q"]), r=float(rc["ss-r"]))
        if all(np.linalg.cond(sys.block(sys.C, sys.D, sys.P, m, m)) < 10 for m in range(M)):
            return sys
    raise ValueError(f"no C_mm with condition number < 10 in 1000 draws (D={d}, P={p})")


def synthetic_series(rc: Mapping[str, Any], sys: lti.LTISystem | None = None
                     ) -> tuple[lti.LTISystem, np.ndarray, np.ndarray, np.ndarray]:
    """``(system, h, y, u)`` of the run's synthetic data (noise seeded by ``seed``)."""
    rc = with_defaults(rc)
    sys = sys or synthetic_system(rc)
    T = int(rc["ss-t"])
    rng = np.random.default_rng([int(rc["seed"]), 2])
    u = lti.inputs(T, sum(sys.U), rng, float(rc["ss-input-ar"]))
    h, y, u = lti.simulate(sys, T, rng, u=u, shifts=shift_series(rc, sys))
    return sys, h, y, u


def shift_series(rc: Mapping[str, Any], sys: lti.LTISystem) -> np.ndarray | None:
    """The mean shifts ``b^t`` on client 0's states (T x sum P), None without shifts."""
    rc = with_defaults(rc)
    scale = float(rc["ss-shift-scale"])
    if not scale:
        return None
    return lti.mean_shifts(int(rc["ss-t"]), sys.P, [(a, b, scale * v) for a, b, v in SHIFTS],
                          cycle=bool(rc["ss-shift-cycle"]))


def known_shift_input(rc: Mapping[str, Any], sys: lti.LTISystem) -> np.ndarray | None:
    """FedGC's client 0 input ``u^{t-1} = b_0^t`` (T x P_0) when ``ss-shift-known``, else None."""
    rc = with_defaults(rc)
    b = shift_series(rc, sys)
    if b is None or not bool(rc.get("ss-shift-known", False)) or rc.get("ss-model") == "fedcf":
        return None
    u = np.zeros((b.shape[0], sys.P[0]))
    u[:-1] = b[1:, :sys.P[0]]
    return u


def synthetic_clients(rc: Mapping[str, Any], sys: lti.LTISystem, y: np.ndarray, u: np.ndarray,
                      only: int | None = None) -> list[kalman.ClientData]:
    """:func:`lti.split_clients`, with client 0's known shifts (:func:`known_shift_input`)."""
    out = lti.split_clients(sys, y, u, only)
    ub = known_shift_input(rc, sys)
    if ub is not None and only in (None, 0):
        c = out[0]
        out[0] = kalman.ClientData(c.A, np.hstack([c.B, np.eye(sys.P[0])]), c.C, c.K, c.y,
                                   np.hstack([c.u, ub]), c.Q, c.R)
    return out


def all_clients(rc: Mapping[str, Any]) -> tuple[lti.LTISystem, list[kalman.ClientData]]:
    """The system and every client's data (for references and simulations)."""
    sys, _, y, u = synthetic_series(rc)
    return sys, synthetic_clients(rc, sys, y, u)


def real_clients(rc: Mapping[str, Any]) -> list[tuple[str, np.ndarray]]:
    """``[(client name, z-scored T x D_m)]`` of ``ss-data`` = ``netsim`` or ``plant-csv``."""
    rc = with_defaults(rc)
    path = str(rc["ss-data-path"])
    if rc["ss-data"] == "netsim":
        subjects = int(rc["ss-netsim-subjects"]) or None
        groups = netsim_groups(path, int(rc["ss-clients"]), subjects)
    elif rc["ss-data"] == "plant-csv":
        groups = load_plant_csv(path, str(rc["ss-group"]))
    elif rc["ss-data"] == "node":
        raise ValueError("run config ss-data = 'node' but this SuperNode has no node config "
                         "data-path (its own CSV)")
    else:
        raise ValueError(f"unknown ss-data {rc['ss-data']!r} (synthetic, netsim, plant-csv)")
    return [(name, Y) for name, (_, Y) in groups.items()]


@lru_cache(maxsize=64)
def _client_data(key: str, pid: int) -> kalman.ClientData:
    rc = with_defaults(json.loads(key))
    if rc["ss-data"] != "synthetic":
        groups = real_clients(rc)
        if not 0 <= pid < len(groups):
            raise ValueError(f"partition-id {pid} but the data has {len(groups)} clients")
        name, Y = groups[pid]
        return svd_var_client(Y, int(rc["ss-p"]), name)[0]
    sys, _, y, u = synthetic_series(rc)
    if not 0 <= pid < len(sys.P):
        raise ValueError(f"partition-id {pid} but the system has {len(sys.P)} clients "
                         "(set ss-clients to the number of SuperNodes)")
    return synthetic_clients(rc, sys, y, u, only=pid)[0]


def client_data(rc: Mapping[str, Any], pid: int) -> kalman.ClientData:
    """Client ``pid``'s data (cached per run config: a SuperNode rebuilds its client often)."""
    return _client_data(json.dumps(dict(rc), sort_keys=True, default=str), int(pid))


# ---- real data: one-column-per-tag plant CSVs (HAI, SWaT) and NetSim ---------------------------
NON_TAGS = ("timestamp", "time", "attack", "normal/attack", "attack_p1", "attack_p2",
            "attack_p3")


def tag_group(name: str, mode: str = "prefix") -> str:
    """Client of a tag: ``"P1"`` for HAI's ``P1_FT01`` (prefix), ``"S1"`` for SWaT's
    ``FIT101`` (the first digit of the tag number, ``mode="digit"``)."""
    if mode == "digit":
        digits = [ch for ch in name if ch.isdigit()]
        return f"S{digits[0]}" if digits else "S?"
    return name.split("_", 1)[0]


def keep_channel(x: np.ndarray, max_levels: int = 5, dominance: float = 0.99) -> bool:
    """False for constant, near-binary or quasi-discrete channels (few levels, one dominant)."""
    x = x[np.isfinite(x)]
    if x.size < 3 or np.ptp(x) == 0:
        return False
    values, counts = np.unique(x, return_counts=True)
    return values.size > max_levels and counts.max() / x.size < dominance


def load_plant_csv(path: str | Path, group: str = "prefix", nominal_only: bool = True
                   ) -> dict[str, tuple[list[str], np.ndarray]]:
    """``{client: (tags, z-scored T x D_m values)}`` from a one-column-per-tag CSV.

    Attack rows are dropped (``nominal_only``), then constant and near-binary channels; every
    kept channel is z-scored; clients are tag prefixes (HAI ``P1..P4``) or stage digits (SWaT).
    """
    from fedcausal_flwr.data.csvdata import csv_rows

    rows = [(n, r) for n, r in csv_rows(path, str(path), encoding=None)
            if any(c.strip() for c in r)]
    if not rows:
        raise ValueError(f"{path}: empty file; expected a header row of tag names, then one "
                         "row per time step")
    header, body = [h.strip() for h in rows[0][1]], rows[1:]
    for n, r in body:
        if len(r) != len(header):
            raise ValueError(f"{path}: row {n} has {len(r)} fields, the header (row "
                             f"{rows[0][0]}) has {len(header)}")
    attack = [i for i, h in enumerate(header) if h.lower().startswith("attack")
              or h.lower() == "normal/attack"]
    tags = [i for i, h in enumerate(header) if h.lower() not in NON_TAGS and i not in attack]
    if not tags:
        raise ValueError(f"{path}: no tag columns in the header ({len(header)} columns)")
    if nominal_only and attack:
        body = [(n, r) for n, r in body if all(
            r[i].strip().lower() in ("0", "0.0", "normal", "") for i in attack)]
    if len(body) < 3:
        raise ValueError(f"{path}: {len(body)} nominal rows; need at least 3")
    X = np.empty((len(body), len(tags)))
    for k, (n, r) in enumerate(body):
        for j, i in enumerate(tags):
            try:
                X[k, j] = float(r[i])
            except ValueError:
                raise ValueError(logged(f"{path}: row {n}, column {i + 1}: not a number",
                                        f"column {header[i]!r}, cell {r[i]!r}")) from None
    bad = ~np.isfinite(X)
    if bad.any():
        k, j = np.argwhere(bad)[0]
        raise ValueError(logged(f"{path}: row {body[k][0]}, column {tags[j] + 1}: not "
                                "finite", f"column {header[tags[j]]!r}"))
    out: dict[str, tuple[list[str], list[np.ndarray]]] = {}
    for j, i in enumerate(tags):
        if keep_channel(X[:, j]):
            g = tag_group(header[i], group)
            x = X[:, j]
            out.setdefault(g, ([], []))
            out[g][0].append(header[i])
            out[g][1].append((x - x.mean()) / x.std())
    return {g: (names, np.column_stack(cols)) for g, (names, cols) in sorted(out.items())}


def observed_zscored(table: Any, who: str) -> np.ndarray:
    """A CSV table's values z-scored (:func:`~fedcausal_flwr.data.csvdata.zscored`), over the
    observed cells of each column when some are missing (NaN stays NaN); a column with
    fewer than two observed cells is an error naming it."""
    from fedcausal_flwr.data.csvdata import zscored

    X = table.values
    if not np.isnan(X).any():
        return zscored(table, who)
    for j in np.flatnonzero(np.sum(~np.isnan(X), axis=0) < 2):
        raise ValueError(f"{table.where(who)}: column {table.names[j]!r} has fewer than two "
                         "observed cells")
    sd = np.nanstd(X, axis=0)
    for j in np.flatnonzero(sd == 0):
        raise ValueError(f"{table.where(who)}: column {table.names[j]!r} is constant; it "
                         "carries no information (drop it)")
    return (X - np.nanmean(X, axis=0)) / sd


def svd_var_client(Y: np.ndarray, P: int, who: str = "client", u: np.ndarray | None = None
                   ) -> tuple[kalman.ClientData, np.ndarray]:
    """FedGC's real-data identification of one client: ``(ClientData, states)``.

    ``Y = U S V^T``; states ``sqrt(T) U_P`` (unit scale), ``C = V_P S_P / sqrt(T)``; ``A`` (and,
    with known inputs ``u`` (T x U), ``B``) by least squares ``h^t = A h^{t-1} + B u^{t-1}``
    on the states (A shrunk to spectral radius 0.99 if needed); the gain from the residual
    covariances ``Q``, ``R`` (kept with the client). Missing (NaN) cells: the identification
    reads a measurement as 0 (its z-scored mean) and an input as its observed mean
    (:func:`~fedcausal_flwr.statespace.kalman.filled_inputs`), ``R`` is the variance of the
    observed residuals; the client's filter then skips them
    (:class:`~fedcausal_flwr.statespace.kalman.ClientData`).
    """
    T, D = Y.shape
    if D < P:
        raise ValueError(f"{who}: {D} channels left, fewer than P = {P} states")
    u = np.zeros((T, 0)) if u is None else np.asarray(u, dtype=float).reshape(T, -1)
    gaps = bool(np.isnan(Y).any() or np.isnan(u).any())
    Yo, uo = (np.nan_to_num(Y, nan=0.0), kalman.filled_inputs(u)) if gaps else (Y, u)
    U, S, Vt = np.linalg.svd(Yo, full_matrices=False)
    H = np.sqrt(T) * U[:, :P]
    C = Vt[:P].T * S[:P] / np.sqrt(T)
    AB = np.linalg.lstsq(np.hstack([H[:-1], uo[:-1]]), H[1:], rcond=None)[0].T
    A, B = AB[:, :P], AB[:, P:]
    rho = kalman.spectral_radius(A)
    A = A * (0.99 / rho) if rho >= 0.99 else A
    Q = np.cov((H[1:] - H[:-1] @ A.T - uo[:-1] @ B.T).T).reshape(P, P) + 1e-6 * np.eye(P)
    var = np.nanvar if gaps else np.var
    R = np.diag(var(Y - H @ C.T, axis=0) + 1e-6)
    K = kalman.kalman_gain(A, C, Q, R)
    return kalman.checked_client(A, B, C, K, Y, u, who, Q, R), H


def central_var(states: list[np.ndarray]) -> np.ndarray:
    """The centralized reference: VAR(1) least squares on the stacked client states."""
    H = np.hstack(states)
    return np.linalg.lstsq(H[:-1], H[1:], rcond=None)[0].T


def netsim_groups(path: str | Path, clients: int = 3, subjects: int | None = None
                  ) -> dict[str, tuple[list[str], np.ndarray]]:
    """NetSim regions split into ``clients`` contiguous groups; subjects concatenated."""
    from fedcausal_flwr.data.netsim import load_netsim

    ts, _ = load_netsim(path)
    ts = ts[:subjects] if subjects else ts
    X = np.concatenate(list(ts), axis=0)
    X = (X - X.mean(0)) / X.std(0)
    parts = np.array_split(np.arange(X.shape[1]), clients)
    return {f"C{m}": ([f"r{i}" for i in idx], X[:, idx]) for m, idx in enumerate(parts)}
