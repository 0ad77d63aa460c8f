"""Shared test fixtures.

Benchmark data lives outside the repo (``../shared/data`` or ``$FAITHGATE_SHARED_DATA``);
tests that read it skip when it is absent, as on a user's machine.
"""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


def shared_data_dir() -> Path | None:
    env = os.environ.get("FAITHGATE_SHARED_DATA")
    path = Path(env) if env else REPO_ROOT.parent / "shared" / "data"
    return path if path.is_dir() else None


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """Directory of the public benchmark files; skips the test when absent."""
    path = shared_data_dir()
    if path is None:
        pytest.skip("benchmark data (../shared/data) not present")
    return path


@pytest.fixture(scope="session")
def bump_rows(shared_data: Path) -> list[dict]:
    """All rows of BUMP task 1 (reference and edited summaries)."""
    with (shared_data / "bump_task1.jsonl").open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


# torch and transformers are not in the core install (it scores with ONNX exports): a test that
# needs them asks for these fixtures and is skipped alone where they are missing. Never skip a
# whole module on them (tests/unit/test_architecture.py checks): its torch-free tests would
# silently not run.
@pytest.fixture(scope="session")
def torch():
    """The ``torch`` module; skips the test where torch is not installed."""
    return pytest.importorskip("torch", reason="needs torch (faithgate[full])")


@pytest.fixture(scope="session")
def transformers(torch):
    """The ``transformers`` module; skips the test where it (or torch) is not installed."""
    return pytest.importorskip("transformers", reason="needs transformers (faithgate[full])")


# What the plugin's inner runs import (measured: the modules new in ``sys.modules`` at the
# end of each in-process run of tests/integration/test_plugin*.py), by module name: ``from
# faithgate import perturb`` would be the function of that name.
INNER_RUN_MODULES = (
    "email.parser",
    "faithgate.perturb",
    "faithgate.scoring.scorer",
    "numpy.ma",
    "numpy.random",
    "threadpoolctl",
)
INNER_RUN_PACKAGES = ("faithgate.gate", "faithgate.report", "pytest_faithgate")


@pytest.fixture(scope="session")
def inner_run_imports() -> None:
    """Imports, once, what the plugin's in-process inner runs (``runpytest_inprocess``)
    import, before pytester snapshots ``sys.modules``: at the end of a run and of a test it
    unloads every module imported since, and a module imported again is a second copy. A
    second faithgate metric module registers its metric twice (an error); a second
    ``faithgate.errors`` raises classes the first one's ``except`` misses; numpy and torch
    cannot be loaded twice."""
    from faithgate.metrics import base

    for name in INNER_RUN_MODULES:
        importlib.import_module(name)
    for name in INNER_RUN_PACKAGES:
        package = importlib.import_module(name)
        for info in pkgutil.iter_modules(package.__path__):
            importlib.import_module(f"{name}.{info.name}")
    base.metric_names()  # every built-in metric's module


@pytest.fixture
def pytester(
    inner_run_imports: None, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> pytest.Pytester:
    """Inner pytest runs with a wide terminal: off CI, pytest cuts each line of its short test
    summary at the terminal width (80 in a subprocess), and the plugin's tests read those lines
    whole. With the CI variable set, pytest never cuts them; ``make test`` may run without it."""
    monkeypatch.setenv("COLUMNS", "300")
    return pytester
