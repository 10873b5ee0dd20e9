"""A seventh algorithm made for a test: federated mean estimation in one family package.

Everything an algorithm needs lives here; ``tests/federation/test_seventh_algorithm.py``
registers it with one :func:`fedcausal_flwr.registry.add` and runs it through the App, editing
nothing else.
"""
