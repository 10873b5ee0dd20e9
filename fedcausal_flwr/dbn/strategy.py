"""FDBNL strategy: ADMM consensus on (W, A); the server keeps the duals by client id.

PFDBNL strategy: personalized DBNs by proximal ADMM; exact averaging on the server.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from fedcausal_flwr.dbn import model as dbn
from fedcausal_flwr.dbn import replicas as rep
from fedcausal_flwr.dbn import wire
from fedcausal_flwr.dbn.model import FDBNLSettings, PFDBNLSettings
from fedcausal_flwr.dbn.sites import SiteView
from fedcausal_flwr.federation.sites import (
    SiteVariables,
    federation_variables,
    held,
    log_sites,
    site_props,
)
from fedcausal_flwr.federation.strategy import (
    CausalStrategy,
    NodeInfo,
    Payload,
    Shape,
)
from fedcausal_flwr.names import lagged_names, split
from fedcausal_flwr.results import RunResult
from fedcausal_flwr.settings import numbers
from fedcausal_flwr.stability import (
    EdgeStability,
    edge_stability,
    holdout_score,
    one_standard_error,
    selection_frequency,
)


class FDBNL(SiteVariables, CausalStrategy):
    """Federated DBN structure learning (Algorithm 1 of Chen, Ma, Yue 2025).

    Each round sends client k ``[W, A, beta_k, gamma_k]`` with ``rho2`` (its clients read no
    other setting: :class:`~fedcausal_flwr.dbn.settings.LocalInputs`) and receives its local
    solution ``[B_k, D_k]`` (:data:`~fedcausal_flwr.dbn.wire.PHASES`).
    The duals are a deterministic function of what the server receives, so the server keeps
    them (by partition id) and clients stay stateless: a client left out of a round keeps its
    duals, a restarted SuperNode loses nothing.
    ``start(initial_arrays=[W, A])`` warm-starts the consensus graph.

    Sites may hold different variables, in any column order, and missing cells: the graph
    is over the union of their variables (``variables``), every message stays shaped by it,
    a site whose list differs gets the federation's ``variables`` in the message config and
    answers over what it observes, and each entry is averaged over the sites that inform it
    (an entry no site informs is NaN and flagged in ``W_unidentified``/``A_unidentified``).
    A site whose share of missing cells exceeds ``max_missing`` is dropped at discovery.
    Prior knowledge (``forbid``, ``require``, ``tiers``, ``exogenous``) is checked against
    the variables before round 1 and enforced in the server step (and, for PFDBNL, in the
    clients' step): forbidden entries are exactly 0, required ones carry no L1 and are kept
    by the thresholds.

    Every run is a stack of R >= 1 replicas (:mod:`~fedcausal_flwr.dbn.replicas`; a plain run
    is its one fit on all rows), each with its own server state, frozen once it meets the
    stop rule; the run ends when every fit on all rows has. With ``replicas`` > 0 or
    ``lambda_select="holdout"`` the estimates add each edge's selection frequency over the
    half-sample replicas and, for a penalty path, the held-out score of every (lambda, tau)
    and the chosen pair. How a stack travels: :mod:`~fedcausal_flwr.dbn.wire`.

    Parameters
    ----------
    settings : FDBNLSettings
        Penalties, lambdas, stop rule, participation, thresholds (default: the App's).
    **kwargs
        ``evaluate_fn``, ``checkpoint`` and settings fields to change (see
        :class:`~fedcausal_flwr.federation.strategy.CausalStrategy`).
    """

    algorithm = "fdbnl"
    settings_class = FDBNLSettings
    phase = "local"
    averaged = ("B", "D")  # what the server averages of a reply (the Byzantine screen's view)
    robust_aggregate = "the consensus targets B_k + beta_k / rho2, D_k + gamma_k / rho2"
    progress_keys = ("h", "rho1", "primal_residual", "shd_w", "tpr_w", "fdr_w", "shd_a",
                     "tpr_a", "fdr_a", "auroc", "aupr", "n_clients", "dropped", "seconds")

    def __init__(self, settings: FDBNLSettings | None = None, **kwargs: Any) -> None:
        super().__init__(settings, **kwargs)
        self.state: dbn.ServerState | None = None
        self.table: list[rep.Replica] = []
        self.states: list[dbn.ServerState] = []
        self.live: list[bool] = []
        self.main = 0
        self.scores: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self.pick: tuple[int, int] | None = None
        self.masks: dbn.Masks | None = None
        self.informed: dict[int, tuple[np.ndarray, np.ndarray]] | None = None
        self.sites: list[np.ndarray] | None = None
        self.differs: set[int] = set()
        self.missing: dict[int, float] = {}

    def expected_props(self, infos):
        """Clients must agree on p (and, with ``variables="same"`` or when no node names its
        variables, on d and the names); the configured ones when given."""
        s = self.settings
        want = super().expected_props(infos)
        want.update({k: v for k, v in (("d", s.d), ("p", s.p)) if v})
        return site_props(s.variables, infos, want, s.p)

    def refused(self, info: NodeInfo) -> str | None:
        """A site with more missing cells than ``max_missing`` allows."""
        share, limit = float(info.props.get("missing", 0.0)), self.settings.max_missing
        if share > limit:
            return (f"{share:.1%} of its cells are missing, above run config "
                    f"{self.settings.app_key('max-missing')!r} = {limit:g}")
        return None

    def federation(self, nodes: Mapping[int, NodeInfo]) -> None:
        """The federation's variables, each site's view of them, the entries its data
        inform and the masks of the prior knowledge (errors here stop the run before any
        round)."""
        s = self.settings
        self.held = held_by = held(nodes)
        dead = {c: split(i.props.get("unobserved")) or [] for c, i in nodes.items()}
        if s.variables == "same":
            self.variables = self.agreed_names(int(next(iter(nodes.values())).props["d"]))
        else:
            self.variables = federation_variables(s.variables, held_by, nodes,
                                                  s.app_key("variables"))
        if len(self.variables) < 2:  # "same" (the others are checked above)
            raise ValueError(f"run config {s.app_key('variables')!r} = {s.variables!r}: "
                             f"{len(self.variables)} variable(s) in the federation; need 2")
        if s.d and s.d != len(self.variables):
            raise ValueError(f"run config {s.app_key('d')!r} = {s.d}: the sites' variables "
                             f"({s.variables}) are {len(self.variables)}")
        self.views = {c: SiteView([n for n in held_by[c] if n not in dead[c]], self.variables,
                                  self.p) for c in held_by}
        self.differs = {c for c, v in self.views.items() if not v.identity}
        self.informed = ({c: v.informed() for c, v in self.views.items()}
                         if self.differs else None)
        self.sites = None if self.informed is None else [  # sites behind each entry
            np.sum([m[k] for m in self.informed.values()], axis=0).astype(float)
            for k in (0, 1)]
        if self.sites is not None:
            np.fill_diagonal(self.sites[0], len(self.informed))
        self.absent = {c: [n for n in self.variables if n not in held_by[c] or n in dead[c]]
                       for c in held_by}
        self.missing = {c: float(i.props.get("missing", 0.0)) for c, i in nodes.items()}
        k = s.knowledge()
        self.masks = k.masks(self.variables, self.p) if k else None
        log_sites(self.variables, self.absent, self.differs)

    def setup(self, nodes: Mapping[int, NodeInfo]) -> None:
        """W = A = 0 for the agreed d, p (for every replica); a number of halves or a
        holdout that the smallest client cannot serve fails here, before any round."""
        info = next(iter(nodes.values())).props
        self.p = int(info["p"])
        self.federation(nodes)
        self.d = len(self.variables)
        s = self.settings
        self.state = dbn.initial_state(self.d, self.p, s.rho1, s.rho2)
        self.rng = np.random.default_rng(s.seed)
        n_min = min(int(info.props.get("n", 0)) for info in nodes.values())
        if s.replicas > rep.max_halves(n_min):
            raise ValueError(f"run config {s.app_key('replicas')!r} = {s.replicas}: a client "
                             f"with {n_min} rows answers at most {rep.max_halves(n_min)} "
                             "halves (one per row)")
        if s.lambda_select == "holdout":
            try:
                rep.train_rows(n_min, s.holdout)
            except ValueError as e:
                raise ValueError(f"run config {s.app_key('holdout')!r}: {e}") from None
        self.table = rep.replicas_of(s)
        self.states = [dbn.initial_state(self.d, self.p, s.rho1, s.rho2) for _ in self.table]
        self.live = [True] * len(self.table)  # still iterating
        self.losses: dict[int, dict[int, np.ndarray]] = {}
        self.sent: list[int] = []
        # the reported fit and its thresholds, and the penalty path's scores and pick (g, t):
        # settled once per round by choose()
        self.main = next(j for j, r in enumerate(self.table) if r.rows == rep.ALL_ROWS)
        self.state = self.states[self.main]
        self.tau_w, self.tau_a = s.tau_w, s.tau_a
        self.scores, self.pick = None, None
        self.phase = wire.wire_phase(type(self).phase, s.replicated)

    def warm_start(self, arrays: list[np.ndarray]) -> None:
        """Start the consensus from ``[W, A]`` instead of zeros."""
        if len(arrays) != 2:
            raise ValueError(f"{type(self).__name__} warm start takes [W, A], got "
                             f"{len(arrays)} arrays")
        s = self.settings
        self.states = [dbn.initial_state(self.d, self.p, s.rho1, s.rho2, (arrays[0], arrays[1]))
                       for _ in self.table]
        self.state = self.states[self.main]

    def select(self) -> list[int]:
        """All clients, or ``clients_per_round`` sampled uniformly without replacement (and
        the replicas of this round's message: those still iterating)."""
        self.sent = [j for j in range(len(self.table)) if self.live[j]]
        return dbn.participants(sorted(self.nodes), self.settings.clients_per_round, self.rng)

    def client_payload(self, state: dbn.ServerState, cid: int) -> list[np.ndarray]:
        """Client ``cid``'s arrays of one server state."""
        return dbn.fdbnl_client_payload(state, cid)

    def payload(self, cid: int) -> Payload:
        """Each array of :meth:`client_payload` stacked over the message's replicas, their
        ``rows`` and ``scalars``, the replicas' seed, holdout and thresholds, the wire
        settings and the site's config, as :func:`~fedcausal_flwr.dbn.wire.down` sends them."""
        s = self.settings
        per = [self.client_payload(self.states[j], cid) for j in self.sent]
        stack = {n: np.stack([a[i] for a in per])
                 for i, n in enumerate(wire.PHASES[type(self).phase].down)}
        stack["rows"] = np.array([self.table[j].rows for j in self.sent], dtype=np.int64)
        stack["scalars"] = np.array([[st.alpha, st.rho1, st.rho2, r.lambda_w, r.lambda_a]
                                     for st, r in ((self.states[j], self.table[j])
                                                   for j in self.sent)])
        return wire.down(self.phase, stack, {
            "replica-seed": int(s.seed), "holdout": float(s.holdout),
            "taus": ",".join(repr(t) for t in s.taus()), **s.to_wire(),
            **self.site_config(cid)})

    def reply_shapes(self) -> list[Shape]:
        """The phase's reply (:data:`~fedcausal_flwr.dbn.wire.PHASES`)."""
        return wire.wire_shapes(self.phase, "up", self.d, self.p, len(self.sent),
                                len(self.settings.taus()))

    def robust_view(self, phase: str, cid: int, arrays: list[np.ndarray]
                    ) -> list[np.ndarray]:
        """The Byzantine screen compares what the server averages of a reply: client k's
        consensus targets ``B_k + beta_k / rho2`` and ``D_k + gamma_k / rho2`` (PFDBNL: of its
        copies ``W~_k, A~_k``), one group per replica. Not ``B_k`` alone: a client back from
        missed rounds answers with its older duals, and its ``B_k`` differs by what they lag,
        its target does not."""
        got = wire.stacked(phase, "up", arrays)
        W, A = (got[n] for n in self.averaged)
        views = [self.target_view(self.states[j], cid, W[i], A[i])
                 for i, j in enumerate(self.sent) if self.live[j]]
        if self.informed is not None and cid in self.informed:  # what its data inform
            seen = np.concatenate([m.ravel() for m in self.informed[cid]])
            views = [np.where(seen, v, np.nan) for v in views]
        return views

    def robust_cohort(self, phase: str, cid: int) -> bool | None:
        """With ``clients-per-round``: whether the server holds duals of client ``cid``. A
        first reply (zero duals) lands nearer the consensus than a returning client's, so in
        sampled runs, where both are common in the early rounds, the two are screened apart;
        None (one cohort) when every client takes part in every round."""
        if not self.settings.clients_per_round:
            return None
        return cid in self.states[self.sent[0]].beta

    @staticmethod
    def target_view(st: dbn.ServerState, cid: int, B: np.ndarray, D: np.ndarray
                    ) -> np.ndarray:
        """Client ``cid``'s consensus targets of one server state, less its consensus."""
        zW, zA = np.zeros_like(st.W), np.zeros_like(st.A)
        return np.concatenate([
            np.ravel(dbn.consensus_target(B, st.beta.get(cid, zW), st.rho2) - st.W),
            np.ravel(dbn.consensus_target(D, st.gamma.get(cid, zA), st.rho2) - st.A)])

    def server_round(self, state: dbn.ServerState, replies: Mapping[int, list[np.ndarray]],
                     lambdas: rep.Replica) -> dbn.ServerState:
        """One server round of ``state`` with the replica ``lambdas``' L1 weights."""
        args = self.settings.fdbnl_round_args()
        args.update(lambda_w=lambdas.lambda_w, lambda_a=lambdas.lambda_a)
        return dbn.fdbnl_server_round(state, {c: (a[0], a[1]) for c, a in replies.items()},
                                      **args, knowledge=self.masks, informed=self.informed,
                                      combine=self.combine())

    def aggregate(self, replies: Mapping[int, list[np.ndarray]]) -> None:
        """Global step, duals, alpha and rho of each replica in the message, and the held-out
        losses of the training-block replicas (of the consensus the clients received)."""
        taus = self.settings.taus()
        replies = {c: wire.stacked(self.phase, "up", a) for c, a in replies.items()}
        step = wire.PHASES[type(self).phase].up  # one replica's reply
        for i, j in enumerate(self.sent):
            if taus and self.table[j].rows == rep.TRAIN_ROWS:
                self.losses[j] = {c: r["val"][i] for c, r in replies.items()}
            self.states[j] = self.server_round(
                self.states[j], {c: [r[n][i] for n in step] for c, r in replies.items()},
                self.table[j])
            self.live[j] = not dbn.converged(self.states[j], **self.settings.stop_args())
        self.choose()
        self.state = self.states[self.main]

    def choose(self) -> None:
        """Settle the reported graph: with ``lambda_select "holdout"`` (once every candidate
        has a score) the fit on all rows at the lambda, and the tau, that the
        one-standard-error rule picks from the held-out scores
        (:func:`~fedcausal_flwr.stability.one_standard_error`); else the settings'."""
        self.scores = self.holdout_scores()
        if self.scores is None:
            return
        s = self.settings
        g, t = self.pick = one_standard_error(*self.scores)
        lam = numbers(s.lambda_path)[g]
        self.main = next(j for j, r in enumerate(self.table)
                         if r.rows == rep.ALL_ROWS and r.lambda_w == lam)
        self.tau_w = self.tau_a = s.taus()[t]

    def holdout_scores(self) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """Pooled held-out loss of every (lambda, tau) of the path, its standard error and
        the edges of each training-block fit (None until each candidate has a score)."""
        cands = [j for j, r in enumerate(self.table) if r.rows == rep.TRAIN_ROWS]
        if not cands or any(not self.losses.get(j) for j in cands):
            return None
        n_val = {c: int(info.props["n"]) - rep.train_rows(int(info.props["n"]),
                                                           self.settings.holdout)
                 for c, info in self.nodes.items()}
        mean, se = zip(*(holdout_score(self.losses[j], n_val) for j in cands),
                       strict=True)
        edges = [[rep.edge_count(self.states[j].W, self.states[j].A, t)
                  for t in self.settings.taus()] for j in cands]
        return np.stack(mean), np.stack(se), np.array(edges)

    def record(self) -> dict[str, Any]:
        """h, penalties and the primal residual max_k ||B_k - W|| / max(||W||, 1)."""
        return {"h": self.state.h, "alpha": self.state.alpha, "rho1": self.state.rho1,
                "rho2": self.state.rho2, "primal_residual": self.state.residual}

    def estimates(self) -> dict[str, np.ndarray]:
        """Unthresholded and thresholded W and A (and :meth:`confidence`)."""
        if self.state is None:
            return {}
        W, A = self.state.W, self.state.A
        return self.identified({
            "W": W, "A": A, "W_thresholded": dbn.threshold(W, self.tau_w, self.kept("W")),
            "A_thresholded": dbn.threshold(A, self.tau_a, self.kept("A")),
            **self.confidence()})

    def kept(self, layer: str) -> np.ndarray | None:
        """The required entries of ``layer`` ("W" or "A"), which no threshold removes."""
        return None if self.masks is None else getattr(self.masks, f"require_{layer}")

    def identified(self, est: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """``est`` with the prior knowledge's masks (``W_forbidden``, ``W_required``, ...)
        and, where sites hold different variables, the number of sites that inform each
        entry (``W_sites``, ``A_sites``) and the entries none informs (``W_unidentified``,
        ``A_unidentified``), NaN in every graph estimate."""
        if self.masks is not None:
            m = self.masks
            est.update(W_forbidden=m.forbid_W.astype(float), W_required=m.require_W.astype(float),
                       A_forbidden=m.forbid_A.astype(float), A_required=m.require_A.astype(float))
        if self.sites is None:
            return est
        for layer, n in zip(("W", "A"), self.sites, strict=True):
            est[f"{layer}_sites"] = n.copy()
            est[f"{layer}_unidentified"] = (n == 0).astype(float)
            for key in (layer, f"{layer}_thresholded"):
                if key in est:
                    est[key] = np.where(n == 0, np.nan, est[key])
        return est

    def halves(self) -> list[int]:
        """The half-sample replicas at the reported graph's lambdas."""
        return [j for j, r in enumerate(self.table) if r.rows >= 1 and (r.lambda_w, r.lambda_a)
                == (self.table[self.main].lambda_w, self.table[self.main].lambda_a)]

    def edge_stability(self) -> EdgeStability | None:
        """The confidence of the half-sample replicas (:meth:`halves`; None without them):
        replica r's graph is its W and A thresholded as the reported ones, W's self-loops no
        candidate edges (:func:`~fedcausal_flwr.stability.edge_stability`)."""
        if not (js := self.halves()):
            return None
        graphs = [np.concatenate([(np.abs(st.W) >= self.tau_w) & (st.W != 0),
                                  (np.abs(st.A) >= self.tau_a) & (st.A != 0)])
                  for st in (self.states[j] for j in js)]
        candidates = np.concatenate([~np.eye(self.d, dtype=bool),
                                     np.ones_like(self.state.A, dtype=bool)])
        return edge_stability(np.stack(graphs), self.settings.stability_threshold, candidates)

    def confidence(self) -> dict[str, np.ndarray]:
        """``W_frequency``, ``A_frequency``: the share of half-sample replicas whose graph,
        thresholded as the reported one, holds each edge; with a penalty path its
        ``lambda_path``, ``tau_path``, ``holdout_score``, ``holdout_se`` and
        ``holdout_edges`` (lambda x tau: the pooled held-out loss, its standard error and the
        edges of the training-block fit) and the chosen ``lambda_chosen``, ``tau_chosen``."""
        out: dict[str, np.ndarray] = {}
        if (conf := self.edge_stability()) is not None:
            out["W_frequency"], out["A_frequency"] = np.split(conf.frequency, [self.d])
        if self.scores is not None:
            s = self.settings
            out.update(lambda_path=np.array(numbers(s.lambda_path)),
                       tau_path=np.array(s.taus()), holdout_score=self.scores[0],
                       holdout_se=self.scores[1], holdout_edges=self.scores[2],
                       lambda_chosen=np.array(self.table[self.main].lambda_w),
                       tau_chosen=np.array(self.tau_w))
        return out

    def stability(self) -> dict[str, float]:
        """The stable edges at ``stability_threshold`` pi and the bound on the expected
        false ones among them (:meth:`edge_stability`), and how many half-sample replicas
        were still iterating at the end (``unconverged``)."""
        if (conf := self.edge_stability()) is None:
            return {}
        return {**conf.summary(),
                "unconverged": int(sum(self.live[j] for j in self.halves()))}

    def _finish(self, result: RunResult, t0: float) -> None:
        """Adds ``metrics["stability"]`` (:meth:`stability`) and, with a penalty path,
        ``metrics["penalty"]`` (the chosen lambda and tau)."""
        super()._finish(result, t0)
        if self.state is None:
            return
        if self.masks is not None:
            result.metrics["knowledge"] = {
                "forbidden": int(self.masks.forbid_W.sum() + self.masks.forbid_A.sum()),
                "required": int(self.masks.require_W.sum() + self.masks.require_A.sum())}
        if any(self.missing.values()):
            result.metrics["missing"] = {str(c): v for c, v in sorted(self.missing.items())}
        if self.informed is not None:
            est = result.estimates
            result.metrics["variables"] = {
                "federation": list(self.variables),
                "absent": {str(c): v for c, v in sorted(self.absent.items()) if v},
                "unidentified": int(np.sum(est.get("W_unidentified", 0))
                                    + np.sum(est.get("A_unidentified", 0)))}
        if stab := self.stability():
            result.metrics["stability"] = stab
        if self.pick is not None:
            score = self.scores[0]
            result.metrics["penalty"] = {"lambda": self.table[self.main].lambda_w,
                                         "tau": self.tau_w,
                                         "score": float(score[self.pick]),
                                         "lowest_score": float(np.min(score))}

    def result_names(self) -> dict[str, Any]:
        """W (and W_k) rows and columns are the d variables; A's rows are ``name(t-k)`` for
        lag k = 1..p, its columns the variables."""
        if self.state is None:
            return {}
        v = self.variables
        lag = {"rows": lagged_names(v, self.p), "cols": list(v)}
        out: dict[str, Any] = {"variables": list(v)}
        for key in self.estimates():
            if key.startswith("W"):
                out[key] = list(v)
            elif key.startswith("A"):
                out[key] = lag
        return out

    def done(self) -> bool:
        """Every fit on all rows has stopped (h(W) <= h_tol or the settings' round budget is
        spent); replicas on halves or training blocks still iterating then are taken as they
        are, so the run has as many exchanges as its fits on all rows need, whatever the
        number of replicas."""
        return not any(self.live[j] for j, r in enumerate(self.table)
                       if r.rows == rep.ALL_ROWS)


class PFDBNL(FDBNL):
    """Personalized FDBNL (Algorithm 2 of Chen, Ma, Yue 2025).

    Client k gets ``[W, A, W~_k, A~_k, beta_k, gamma_k, W_k, A_k]`` (W_k, A_k: its own last
    reply, where its local step starts) with alpha, rho1, rho2 and the wire settings (mu, the
    lambdas, ``code_compat``, ``restarts``, ``local_*``), and returns its copies
    ``W~_k, A~_k``, its personalized ``W_k, A_k`` (derivable from the copies and duals, so
    nothing new is revealed) and ``h(W_k)``.
    """

    algorithm = "pfdbnl"
    settings_class = PFDBNLSettings
    phase = "personal"
    averaged = ("W_tilde", "A_tilde")

    def client_payload(self, state: dbn.ServerState, cid: int) -> list[np.ndarray]:
        """Client ``cid``'s anchors and duals of one server state."""
        return dbn.pfdbnl_client_payload(state, cid)

    def site_config(self, cid: int) -> dict[str, Any]:
        """The federation's ``variables`` (``SiteVariables.site_config``) and the prior
        knowledge's masks over the federation's variables, which PFDBNL's clients enforce
        in their step (:meth:`Masks.to_config <fedcausal_flwr.knowledge.Masks.to_config>`;
        nothing without knowledge)."""
        out = super().site_config(cid)
        if self.masks is not None:
            out.update(self.masks.to_config())
        return out

    def server_round(self, state: dbn.ServerState, replies: Mapping[int, list[np.ndarray]],
                     lambdas: rep.Replica) -> dbn.ServerState:
        """Exact average, duals, alpha (mean h) and rho (the lambdas act on the clients)."""
        return dbn.pfdbnl_server_round(state, replies, **self.settings.pfdbnl_round_args(),
                                       knowledge=self.masks, informed=self.informed,
                                       combine=self.combine())

    def locals_of(self, st: dbn.ServerState) -> tuple[np.ndarray, np.ndarray]:
        """Every client's personalized ``W_k, A_k`` of one server state, by client id."""
        ids = sorted(self.nodes)
        zero_w, zero_a = np.zeros_like(st.W), np.zeros_like(st.A)
        return (np.stack([st.W_local.get(c, zero_w) for c in ids]),
                np.stack([st.A_local.get(c, zero_a) for c in ids]))

    def estimates(self) -> dict[str, np.ndarray]:
        """Global W, A and every client's personalized ``W_k, A_k`` (stacked by client id),
        with :meth:`confidence` and, with half-sample replicas, ``W_local_frequency`` and
        ``A_local_frequency`` (client x ...)."""
        st = self.state
        if st is None:
            return {}
        W_loc, A_loc = self.locals_of(st)
        if self.informed is not None:  # a site's graph says nothing where it observes nothing
            ids = sorted(self.nodes)
            full = (np.ones_like(st.W, bool), np.ones_like(st.A, bool))
            seen = [self.informed.get(c, full) for c in ids]
            W_loc = np.where(np.stack([m[0] for m in seen]), W_loc, np.nan)
            A_loc = np.where(np.stack([m[1] for m in seen]), A_loc, np.nan)
        out = self.identified({
            "W": st.W, "A": st.A, "W_local": W_loc, "A_local": A_loc,
            "W_local_thresholded": dbn.threshold(W_loc, self.tau_w, self.kept("W")),
            "A_local_thresholded": dbn.threshold(A_loc, self.tau_a, self.kept("A")),
            "client_ids": np.array(sorted(self.nodes)), **self.confidence()})
        if js := self.halves():
            locs = [self.locals_of(self.states[j]) for j in js]
            out["W_local_frequency"] = selection_frequency([w for w, _ in locs], self.tau_w)
            out["A_local_frequency"] = selection_frequency([a for _, a in locs], self.tau_a)
        return out
