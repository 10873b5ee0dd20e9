"""fedcausal-flwr: federated causal learning on Flower.

Importing the package changes nothing in the caller's process; the App's entry points limit
BLAS threads (:func:`fedcausal_flwr.threads.limit_blas_threads`).
"""

from importlib import metadata

try:  # the one place the version is written is pyproject.toml (a Flower App needs it there)
    __version__ = metadata.version("fedcausal-flwr")
except metadata.PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"
