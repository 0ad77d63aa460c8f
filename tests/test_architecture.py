"""The import contracts of pyproject's ``[tool.importlinter]`` (layers, no cycles) hold.

``make test`` runs ``lint-imports`` before the suite; this test keeps the check in a plain
``pytest`` run too, so a layer violation shows where developers look first.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_are_kept(monkeypatch, capsys):
    cli = pytest.importorskip("importlinter.cli", reason="import-linter is a dev dependency")
    monkeypatch.chdir(ROOT)
    code = cli.lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True)
    out = capsys.readouterr().out
    assert code == 0, out
    assert "0 broken" in out
