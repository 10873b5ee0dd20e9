"""Optional dependencies: which extra installs what an algorithm needs beyond the core.

torch is FedIV's alone and phe + gmpy2 + pynacl those of VFedCD's real Paillier keys and PSI
alone (its plaintext ``mock`` backend needs neither), so ``pip install fedcausal-flwr[fdbnl]``
(or ``[fedgc]``, ``[fedcf]``, ``[pfdbnl]``) installs neither. Two capabilities are extras too:
``simulation`` (Ray, for ``flwr run``'s simulation; a deployed node needs none) and ``dp``
(dp-accounting, for FedGC/FedCF's differential privacy). A module that needs one imports it as

    try:
        import torch
    except ModuleNotFoundError as e:
        raise missing_extra(e, "FedIV", "fediv", "torch") from e

and a user without it gets ``ImportError: FedIV needs torch: pip install 'fedcausal-flwr[fediv]'``.
"""

from __future__ import annotations

import importlib.util

# extra -> the top-level modules it provides (pyproject.toml [project.optional-dependencies];
# their distributions are named alike, but for nacl: DISTRIBUTIONS)
EXTRAS = {
    "fediv": ("torch",),
    "vfedcd": ("phe", "gmpy2", "nacl"),
    "graphs": ("pandas", "networkx"),
    "simulation": ("ray",),
    "dp": ("dp_accounting",),
}

DISTRIBUTIONS = {"nacl": "pynacl", "dp_accounting": "dp-accounting"}
"""The distribution of a module whose name differs from it."""


def missing_extra(
    error: ModuleNotFoundError, what: str, extra: str, *packages: str
) -> ImportError | ModuleNotFoundError:
    """The error to raise for ``error``: one naming the extra when ``error`` is about one of
    ``packages`` (``error`` itself otherwise, e.g. a broken install missing something else)."""
    missing = (error.name or "").partition(".")[0]
    if missing not in packages:
        return error
    needs = " and ".join(packages)
    return ImportError(
        f"{what} needs {needs}: pip install 'fedcausal-flwr[{extra}]'", name=missing
    )


def require_extra(what: str, extra: str, *modules: str) -> None:
    """Raise the ImportError naming ``extra`` unless every one of ``modules`` is installed
    (for a dependency that its user imports late, as Flower's RdpAccountant does
    dp-accounting)."""
    for m in modules:
        if importlib.util.find_spec(m) is None:
            raise missing_extra(ModuleNotFoundError(name=m), what, extra, *modules)
