"""Gate items: one collected test per configured dataset (placeholder until the gate lands)."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_faithgate.session import PluginSession


def gate_items(session: pytest.Session, plugin_session: PluginSession) -> list[pytest.Item]:
    return []


def write_gate_outputs(plugin_session: PluginSession, gates: list[dict[str, Any]]) -> None:
    return None
