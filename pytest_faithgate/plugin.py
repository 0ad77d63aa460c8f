"""pytest hooks and fixtures for faithgate (``pytest --faithgate``).

Without ``--faithgate`` the plugin registers its options and marker and changes nothing else.
"""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("faithgate", "faithfulness gate for summarizers")
    group.addoption(
        "--faithgate",
        action="store_true",
        default=False,
        help="run the faithgate release gate and enable the faithgate fixture",
    )
