"""Scoring: the scorer (texts -> scores) and the executors that run it (local, Ray)."""
