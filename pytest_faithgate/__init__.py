"""pytest plugin for faithgate: ``pytest --faithgate`` runs the configured release gate.

The ``faithgate`` fixture returns a ``FaithgateFixture`` (import it for type hints)::

    from pytest_faithgate import FaithgateFixture

    def test_summary(faithgate: FaithgateFixture) -> None:
        faithgate.assert_faithful(source, summary, threshold=0.6, metric="bertscore")

A check that could not score (the metric failed on the summary or returned NaN) raises
``FaithgateScoringError``, which is not an ``AssertionError``: a test expecting the check to
fail (``pytest.raises(AssertionError)``) fails too when nothing was scored.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_faithgate.fixture import FaithgateFixture, FaithgateScoringError

__all__ = ["FaithgateFixture", "FaithgateScoringError"]


def __getattr__(name: str) -> Any:
    # Lazy, so that loading the plugin entry point stays cheap.
    if name in __all__:
        from pytest_faithgate import fixture

        return getattr(fixture, name)
    raise AttributeError(f"module 'pytest_faithgate' has no attribute {name!r}")
