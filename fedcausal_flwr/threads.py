"""BLAS threads: :func:`limit_blas_threads`, called by the App's entry points only.

Importing :mod:`fedcausal_flwr` changes nothing in the caller's process; the ServerApp's
``main``, the ClientApp's handler and :mod:`fedcausal_flwr.cli.launch` call this helper.
"""

from __future__ import annotations

import os


def limit_blas_threads(n: int | None = None) -> int | None:
    """Limit BLAS to ``n`` threads in this process and the processes it starts.

    The algorithms multiply many small matrices, where a multi-threaded OpenBLAS only adds
    contention: it made the FDBNL server step up to 15x slower on a 2-core machine.

    Parameters
    ----------
    n
        Threads; ``0`` leaves BLAS alone. ``None`` reads ``FEDCAUSAL_BLAS_THREADS`` (default
        1) and leaves BLAS alone when ``OPENBLAS_NUM_THREADS`` is already set.

    Returns
    -------
    int or None
        The limit set (also exported as ``OPENBLAS_NUM_THREADS``), or None when none was.
    """
    if n is None:
        if "OPENBLAS_NUM_THREADS" in os.environ:
            return None
        n = int(os.environ.get("FEDCAUSAL_BLAS_THREADS", "1"))
    if n == 0:
        return None
    os.environ["OPENBLAS_NUM_THREADS"] = str(n)  # child processes, and numpy if not yet loaded
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # only the environment variable then
        return n
    threadpool_limits(n, user_api="blas")
    return n
