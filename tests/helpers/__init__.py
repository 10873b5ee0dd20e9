"""Shared test helpers, imported as ``tests.helpers.<module>`` (no cross-test imports)."""
