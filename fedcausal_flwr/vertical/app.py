"""App glue of VFedCD: settings from the run config, built-in vertical data, truth, evaluator.

The model settings are :class:`~fedcausal_flwr.vertical.model.VFedCDSettings`, the data keys
:class:`~fedcausal_flwr.vertical.data.VerticalData`; both are validated here, before any node
is contacted. The parties get their settings from the server, not from the run config.

Consent (:class:`~fedcausal_flwr.vertical.model.PartyConsent`): every party accepts what its
node config's ``vfedcd-accept-*`` / ``vfedcd-min-key-bits`` keys say (secure only where they are
absent). Only the App's built-in simulated parties, whose data come from the run config's
built-in sets (synthetic, sachs), take a key their node config lacks from the run config's key
of the same name (declared with the secure defaults): a Ray simulation gives nodes no node
config of their own, so this is how the App's simulations and tests opt in to ``mock``, the
plain modes or test keys; that consent is the run submitter's, not the party's, and each
party's WARNING log line says so. A party with data of its own (node config ``data-path``,
here or in a user's ClientApp through :func:`fedcausal_flwr.data.node_data`) never takes
consent from the run config: only from its node config (or its own ``make()``); a run config
that asks it for wider consent is ignored, logged once per run as a WARNING, and the party
refuses what its own consent does not cover.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from logging import WARNING
from typing import Any

import numpy as np
from flwr.app import ConfigRecord, Context
from flwr.common.logger import log

from fedcausal_flwr.federation.client import client_class, section_context
from fedcausal_flwr.settings import section_view
from fedcausal_flwr.vertical.data import VerticalData
from fedcausal_flwr.vertical.settings import PartyConsent, VFedCDSettings

SECTION = "vertical"

__all__ = ["client", "evaluator", "strategy", "truth"]



def strategy(algorithm: str, rc: Mapping[str, Any]):  # noqa: ARG001
    """VFedCD with the run config's settings, scored against the built-in data's truth."""
    rc = section_view(SECTION, rc)  # a sectioned run config or the section itself
    from fedcausal_flwr.vertical.strategy import VFedCD

    s = VFedCDSettings.from_run_config(rc)
    data = VerticalData.from_run_config(rc)  # a bad data key fails here, not on the parties
    PartyConsent.from_run_config(rc)  # and a bad consent key
    return VFedCD(s, evaluate_fn=None if data.data == "node" else evaluator(rc))


def client(algorithm: str, context: Context):
    """This node's party on the run config's data (its block of columns, training rows), or
    on its own CSV when its node config has ``data-path`` (:func:`own_data`)."""
    context = section_context(context, SECTION)
    from fedcausal_flwr.data.csvdata import constructor_kwargs, node_data_path
    from fedcausal_flwr.data.nodefiles import allow_run_config_paths
    from fedcausal_flwr.vertical.data import VerticalData, party_data, sachs

    pid = int(context.node_config.get("partition-id", 0))
    k = int(context.node_config.get("num-partitions", 1))
    path = node_data_path(context.node_config, f"party {pid}")
    cls = client_class(algorithm)
    if path is not None:  # own data: consent from the node config only (none passed here)
        x, cols, ids, names = own_data(path, context, pid, k)
        _ignored_run_consent(context, f"party {pid}")
        return cls.from_context(context, {
            "x": x, "columns": cols, **ids, **constructor_kwargs(cls, names),
            "transform": VerticalData.from_run_config(context.run_config).transform})
    if VerticalData.from_run_config(context.run_config).data == "sachs":
        allow_run_config_paths(context.run_config, context.node_config,
                               {"data-path": f"{SECTION}.data-path"}, f"party {pid}", pid)
    try:  # a built-in simulated party: the run config's data, and consent keys its node lacks
        x, _, cols = party_data(context.run_config, pid, k)
        c = VerticalData.from_run_config(context.run_config)
        names = [sachs(c.data_path)[2][i] for i in cols] if c.data == "sachs" else None
    except ValueError as e:
        raise ValueError(f"party {pid}: {e}") from e
    consent = PartyConsent.from_run_config(context.run_config)
    return cls.from_context(
        context, {"x": x, "columns": cols, "sample_ids": np.arange(len(x)), "names": names,
                  "accept_backends": consent.backends, "accept_modes": consent.modes,
                  "min_key_bits": consent.min_key_bits,
                  "consent_from": "the run config (the run submitter's consent for the App's "
                                  "built-in simulated parties, not this party's node config)"})


_TOLD = "vfedcd-run-consent-ignored"
"""The ``context.state`` record that says this party was told (once per run)."""


def _ignored_run_consent(context: Context, who: str) -> None:
    """Once per run: a WARNING when the run config asks an own-data party for wider consent
    than the secure defaults (it is not this party's consent, and it is ignored)."""
    if _TOLD in context.state.config_records:
        return
    context.state[_TOLD] = ConfigRecord({"told": True})
    try:
        asked = PartyConsent.from_run_config(context.run_config)
    except ValueError:
        return  # the ServerApp refuses a bad consent key itself
    secure = PartyConsent().run_config()
    wider = {PartyConsent.app_key(k): v for k, v in asked.run_config().items()
             if v != secure[k]}
    if wider:
        log(WARNING, "%s: the run config's consent %s is the run submitter's and is ignored: "
            "a party with its own data (node config data-path) takes consent only from its "
            "node config (vfedcd-accept-backends, vfedcd-accept-modes, vfedcd-min-key-bits)",
            who, ", ".join(f"{k}={v!r}" for k, v in wider.items()))


def own_data(path, context: Context, pid: int, k: int
             ) -> tuple[np.ndarray, np.ndarray, dict[str, Any], list[str]]:
    """``(x, columns, alignment, names)`` of a party's own CSV (x raw: the client maps it by
    the run config's ``transform``, fitted over the shared rows); ``alignment`` is the
    client's ``{"sample_ids": tokens}`` or ``{"sample_ids": None, "psi_ids": ids}``.

    The CSV has an ID column (node config ``id-column``, default ``id``) and this party's
    attributes. Alignment, chosen by the party's own node config:

    - no ``id-key`` (and no ``$FEDCAUSAL_ID_KEY``): private set intersection over the relay,
      no secret shared among the parties (:mod:`fedcausal_flwr.secure.psi`; what each side
      learns: docs/threat-model.md). Every party must align the same way, else the run stops.
    - ``id-key`` set: each ID is hashed with HMAC-SHA256 under the key the parties share, 8
      bytes of it as an int64 pseudonym, reported at discovery (``ids`` in ``query.info``);
      the server intersects the parties' sets and sends the sorted intersection with the
      first phase; each party keeps its rows of those pseudonyms in that order.

    Rows outside the intersection are not used; fewer than 2 shared IDs (e.g. another key or
    ID column at one party) stop the run.

    Threat model of the keyed hash: the server is honest-but-curious and does not collude with
    a party; the key stays among the parties (never in the run config, never sent). The server
    learns each party's number of rows and which pseudonyms the parties share (the sizes of
    the sets and of their intersection), nothing about the IDs themselves: it cannot invert
    HMAC or test a guessed ID without the key. A party learns which of its own IDs all
    parties hold (what alignment needs), nothing about the others' IDs outside the
    intersection. Not covered: a party colluding with the server (it can hand over the key,
    and the server then tests guesses against every party's pseudonyms), and a server that
    sends different parties different intersections (it would only break the training).

    Missing values: an empty cell (or NaN, NA, null; a short row's tail) is missing (NaN);
    the party reports the share, the server's ``max-missing`` bounds it, and the model's rule
    is :func:`~fedcausal_flwr.vertical.model.inputs` with
    :func:`~fedcausal_flwr.vertical.decoder.observed_loss`. A row without an ID is an error.

    Columns: node config ``columns`` (this party's global attribute indices, e.g. "3,4"), else
    the run config's ``parts`` (party k holds the k-th block). All shared rows train.
    """
    from fedcausal_flwr.data import csvdata
    from fedcausal_flwr.vertical.data import blocks, checked_observed

    who = f"party {pid}"
    table = csvdata.read_csv(path, who, min_rows=2, id_column=str(
        context.node_config.get(csvdata.ID_COLUMN, "") or "id"), allow_missing=True)
    key = csvdata.id_key(context.node_config)
    if key is None:
        rows, ids = table.values, {"sample_ids": None, "psi_ids": table.ids}
    else:
        rows, tokens = csvdata.aligned_by_ids(table, key, who)
        ids = {"sample_ids": tokens}
    given = str(context.node_config.get("columns", "") or "").strip()
    if given:
        try:
            cols = np.array([int(c) for c in given.split(",")])
        except ValueError:
            raise ValueError(f"{who}: node config columns={given!r}: expected comma-separated "
                             "attribute indices, e.g. '3,4,5'") from None
    else:
        parts = VerticalData.from_run_config(context.run_config).parts
        if not parts:
            raise ValueError(f"{who}: own data need this party's attribute indices: node "
                             "config columns=... or the run config's parts (e.g. '3,2')")
        sizes = [int(v) for v in parts.split(",")]
        if len(sizes) != k or not 0 <= pid < k:
            raise ValueError(f"{who}: run config parts={parts!r} names {len(sizes)} parties "
                             f"but there are {k}")
        cols = blocks(sum(sizes), sizes)[pid]
    if len(cols) != len(table.names):
        raise ValueError(f"{table.where(who)}: row 1: {len(table.names)} attribute columns "
                         f"{table.names}, but this party holds {len(cols)} attributes "
                         f"{cols.tolist()}")
    if np.isnan(rows).any():
        checked_observed(rows, table.names, table.where(who))  # no constant or empty column
    else:
        csvdata.zscored(csvdata.Table(table.path, table.names, rows), who)  # no constant one
    return rows, cols, ids, table.names


def truth(algorithm: str, rc: Mapping[str, Any]) -> dict[str, np.ndarray]:  # noqa: ARG001
    """The true graph (named B, for the PNG of learned vs true)."""
    from fedcausal_flwr.vertical.data import pooled_data

    if VerticalData.from_run_config(rc).data == "node":
        return {}
    return {"B": pooled_data(rc)[1]}


def evaluator(rc: Mapping[str, Any]
              ) -> Callable[[Mapping[str, np.ndarray], Sequence[int]], dict[str, Any]]:
    """SHD (a reversal counts once) and F1 of the DAG against the built-in data's true graph
    (built on first use)."""
    rc = section_view(SECTION, rc)  # a sectioned run config or the section itself
    from fedcausal_flwr.metrics import graph_metrics
    from fedcausal_flwr.vertical.data import pooled_data

    truth_of: dict[str, np.ndarray] = {}

    def evaluate(est: Mapping[str, np.ndarray], client_ids: Sequence[int]  # noqa: ARG001
                 ) -> dict[str, Any]:
        if "dag" not in est:
            return {}
        if "A" not in truth_of:
            truth_of["A"] = pooled_data(rc)[1]
        m = graph_metrics(est["dag"], truth_of["A"])
        p, r = m["precision"], m["tpr"]
        return {"shd": m["shd_rev1"], "f1": 2 * p * r / (p + r) if p + r else 0.0,
                "nnz": m["nnz"]}

    return evaluate


def node_data(algorithm: str, context: Context, path, who: str) -> dict[str, Any]:  # noqa: ARG001
    """The client arguments of a party's own CSV at ``path`` (:func:`own_data`)."""
    pid = int(context.node_config.get("partition-id", 0))
    k = int(context.node_config.get("num-partitions", 1))
    x, cols, ids, names = own_data(path, context, pid, k)
    _ignored_run_consent(context, f"party {pid}")
    return {"x": x, "columns": cols, **ids, "names": names,
            "transform": VerticalData.from_run_config(context.run_config).transform}
