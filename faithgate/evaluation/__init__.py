"""Evaluation of the metrics against human judgements: the benchmark (``bench``), threshold
calibration (``calibrate``) and the meta-evaluation statistics they share (``meta``).

An orchestrator layer beside ``faithgate.gate`` and ``faithgate.training`` (see
docs/architecture.md); ``faithgate.perturb`` stays a shared leaf below the gate.
"""
