"""What an engine needs of a scoring context, typed structurally.

``faithgate.metrics.base.ScoringContext`` satisfies it; engines sit below the metrics, so
they name this protocol instead of importing the class.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol


class EngineContext(Protocol):
    """The run's models and shared engines, as an engine reaches them."""

    def model(self, role: str, task: str, **options: Any) -> Any:
        """The loaded model of ``role`` for ``task``."""
        ...

    def shared(self, key: str, factory: Callable[[], Any]) -> Any:
        """The engine under ``key``, made by ``factory`` on first use."""
        ...

    @property
    def spacy_model(self) -> str | None:
        """The configured spaCy pipeline, None for the default."""
        ...
