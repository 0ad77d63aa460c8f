"""Metric families, one module each; see ``base`` for the interface and the registry."""
