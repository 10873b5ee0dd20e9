"""The test suite: plain ``pytest`` runs every tier (see tests/conftest.py)."""
