"""fedcausal-flwr: federated causal learning on Flower.

Importing the package limits BLAS to one thread (unless ``OPENBLAS_NUM_THREADS`` is set or
``FEDCAUSAL_BLAS_THREADS`` says otherwise; ``0`` leaves BLAS alone): the algorithms here
multiply many small matrices, and a multi-threaded OpenBLAS made the FDBNL server step up to
15x slower on a 2-core machine.
"""

import os

# The one place the version is written: pyproject.toml reads it ([tool.hatch.version]).
__version__ = "0.1.0"


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
