"""What crosses the wire in FedPC: each phase's arrays by name.

``moments`` (up): ``n``, ``mean``, ``comoment``, ``square``, each m x m over the m = d (p + 1)
columns of the window (pairwise counts, means, co-moments and sums of squares; nothing down);
with R replicas the same four of each half sample of the client's rows, ``n_r`` ...
``square_r`` (R x m x m; absent when R = 0).
``ratio``: down the regression of lag 0 on the lags ``B`` (p d x d), ``intercept`` (d) and
residual ``sd`` (d); up the pairwise row counts ``rows``, ``e_tanh`` = sum e tanh(e)^T and
``e_e`` = sum e e^T (d x d each, over the rows where both residuals are observed). The
settings travel as :meth:`~fedcausal_flwr.settings.Settings.to_wire`; a site whose variables
differ from the federation's also gets ``variables`` (``federation.sites``), and its arrays
are over the federation's d variables, zero counts where it holds none.
"""

from __future__ import annotations

from fedcausal_flwr.federation.wire import Phase

PHASES: dict[str, Phase] = {
    "moments": Phase(down=(), up=("n", "mean", "comoment", "square", "n_r", "mean_r",
                                  "comoment_r", "square_r")),
    "ratio": Phase(down=("B", "intercept", "sd"), up=("rows", "e_tanh", "e_e")),
}
