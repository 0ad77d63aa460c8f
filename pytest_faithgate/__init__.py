"""pytest plugin for faithgate: ``pytest --faithgate`` runs the configured release gate.

The ``faithgate`` fixture returns a ``FaithgateFixture`` (import it for type hints)::

    from pytest_faithgate import FaithgateFixture

    def test_summary(faithgate: FaithgateFixture) -> None:
        faithgate.assert_faithful(source, summary, threshold=0.6, metric="bertscore")
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_faithgate.fixture import FaithgateFixture

__all__ = ["FaithgateFixture"]


def __getattr__(name: str) -> Any:
    # Lazy, so that loading the plugin entry point stays cheap.
    if name == "FaithgateFixture":
        from pytest_faithgate.fixture import FaithgateFixture

        return FaithgateFixture
    raise AttributeError(f"module 'pytest_faithgate' has no attribute {name!r}")
