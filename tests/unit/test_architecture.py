"""The import contracts of pyproject's ``[tool.importlinter]`` (layers, no cycles) hold.

``make test`` runs ``lint-imports`` before the suite; this test keeps the check in a plain
``pytest`` run too, so a layer violation shows where developers look first.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_import_contracts_are_kept():
    pytest.importorskip("importlinter.cli", reason="import-linter is a dev dependency")
    # In a subprocess: import-linter configures logging with dictConfig, which disables every
    # logger already created in the calling process (faithgate's own included), so run in
    # process it silenced the CLI's warnings for the rest of a test worker's session.
    code = (
        "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports("
        f"config_filename={str(ROOT / 'pyproject.toml')!r}, no_cache=True))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 broken" in proc.stdout
