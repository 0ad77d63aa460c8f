"""faithgate: a faithfulness gate for text summarizers.

The public API is small and imported lazily, so ``import faithgate`` stays fast and does not pull
torch in (the runtime install has none)::

    from faithgate import Scorer, Example, score, load_examples
"""

from __future__ import annotations

import importlib
from typing import Any

from faithgate.threads import prefer_passive_openmp, prefer_reproducible_mkl

__version__ = "0.1.0"

# Before anything imports torch (spaCy does): torch's OpenMP threads wait passively instead of
# spinning, which on shared CI machines made its passes 4x slower (faithgate/threads.py).
prefer_passive_openmp()
# Likewise MKL's reproducible mode: a score must not depend on the batch it was scored in.
prefer_reproducible_mkl()

# public name -> module that defines it
_API = {
    "Example": "faithgate.types",
    "Score": "faithgate.types",
    "SentenceScore": "faithgate.types",
    "FaithgateError": "faithgate.errors",
    "InputError": "faithgate.errors",
    "load_examples": "faithgate.io",
    "Scorer": "faithgate.scoring.scorer",
    "score": "faithgate.scoring.scorer",
    "Metric": "faithgate.metrics.base",
    "register": "faithgate.metrics.base",
    "get_metric": "faithgate.metrics.base",
    "metric_names": "faithgate.metrics.base",
    "Gate": "faithgate.gate",
    "GateResult": "faithgate.result",
    "GateConfig": "faithgate.config",
    "load_config": "faithgate.config",
    "perturb": "faithgate.perturb",
}

__all__ = ["__version__", *_API]


def __getattr__(name: str) -> Any:
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'faithgate' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
