"""fedcausal-flwr: federated causal learning on Flower.

Importing the package limits BLAS to one thread (unless ``OPENBLAS_NUM_THREADS`` is set or
``FEDCAUSAL_BLAS_THREADS`` says otherwise; ``0`` leaves BLAS alone): the algorithms here
multiply many small matrices, and a multi-threaded OpenBLAS made the FDBNL server step up to
15x slower on a 2-core machine.
"""

import os
from importlib import metadata

try:  # the one place the version is written is pyproject.toml (a Flower App needs it there)
    __version__ = metadata.version("fedcausal-flwr")
except metadata.PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"


def _limit_blas_threads() -> None:
    n = os.environ.get("FEDCAUSAL_BLAS_THREADS", "1")
    if n == "0" or "OPENBLAS_NUM_THREADS" in os.environ:
        return
    os.environ["OPENBLAS_NUM_THREADS"] = n  # child processes, and numpy if not yet loaded
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # only the environment variable then
        return
    threadpool_limits(int(n), user_api="blas")


_limit_blas_threads()
