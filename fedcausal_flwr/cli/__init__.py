"""Tools beside the library: the launcher, the starter Apps and the TLS helpers.

``python -m fedcausal_flwr.cli.launch simulate|deploy ...`` runs any Flower App under real
Flower (:mod:`~fedcausal_flwr.cli.launch`); ``python -m fedcausal_flwr new <algorithm> DIR``
writes a starter App (:mod:`~fedcausal_flwr.cli.starter`); ``python -m fedcausal_flwr.cli.tls
DIR [HOST ...]`` writes a deployment's certificates (:mod:`~fedcausal_flwr.cli.tls`). Nothing
in the library imports this package.
"""
