"""Optional dependencies: which extra installs what an algorithm needs beyond the core.

torch is FedIV's alone and phe + gmpy2 those of VFedCD's real Paillier keys alone (its
plaintext ``mock`` backend needs neither), so ``pip install fedcausal-flwr[fdbnl]``
(or ``[fedgc]``, ``[fedcf]``, ``[pfdbnl]``) installs neither. A module that needs one imports it as

    try:
        import torch
    except ModuleNotFoundError as e:
        raise missing_extra(e, "FedIV", "fediv", "torch") from e

and a user without it gets ``ImportError: FedIV needs torch: pip install 'fedcausal-flwr[fediv]'``.
"""

from __future__ import annotations

# extra -> the top-level modules it provides (pyproject.toml [project.optional-dependencies];
# their distributions are named alike, but for nacl: DISTRIBUTIONS)
EXTRAS = {
    "fediv": ("torch",),
    "vfedcd": ("phe", "gmpy2", "nacl"),
    "graphs": ("pandas", "networkx"),
}

DISTRIBUTIONS = {"nacl": "pynacl"}
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
