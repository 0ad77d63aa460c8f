"""pytest hooks and fixtures for faithgate (``pytest --faithgate``).

Always active (registered through the ``pytest11`` entry point): the ``--faithgate-*`` options,
the ``faithgate`` marker (so ``--strict-markers`` accepts it) and the ``faithgate`` fixture.
Nothing else happens without ``--faithgate``: the hooks that add gate items, collect results and
print the summary live in ``GatePlugin``, which is registered only when the flag is given.

With ``--faithgate``:

- one gate item per configured dataset (``[tool.faithgate]`` / ``faithgate.toml``: ``outputs``
  or ``summarizer`` + ``data``) is appended to the collected tests, so ``pytest --faithgate``
  alone runs the release gate; its failure report is the rule table and the failing examples;
  with no dataset (no configuration found, or none in it) the item ``faithgate[nothing to
  gate]`` fails saying so, as ``faithgate check`` exits 2: the flag never passes ungated;
- every fixture check and gate result travels on its test report (an attribute that
  pytest-xdist serialises), so the controller prints one summary table and writes the gate's
  reports, whether tests ran in-process or on xdist workers;
- models load once per process: one ``PluginSession`` per process holds the model pools, the
  scorers and the SQLite score cache (safe to share between worker processes).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from faithgate.backends import BACKEND_CHOICES
from faithgate.errors import FaithgateError
from faithgate.formats import file_report_kinds
from faithgate.safety.escape import safe_line
from faithgate.scoring.execution import EXECUTOR_CHOICES, executors_help
from pytest_faithgate.fixture import FaithgateFixture
from pytest_faithgate.messages import plugin_line
from pytest_faithgate.run_files import gate_writes, ini_files, refuse_overwriting_pytest_files
from pytest_faithgate.session import (
    Options,
    PluginSession,
    check_marker_kwargs,
    load_session_config,
)

GATE_MARKER_HELP = (
    "faithgate_gate: the release-gate items added by --faithgate "
    "(deselect with -m 'not faithgate_gate')"
)
SESSION_KEY = pytest.StashKey[PluginSession]()

MARKER_HELP = (
    "faithgate(metric=None, threshold=None, margin=None, min_rate=None, types=None, "
    "settings=None, models=None, backend=None): per-test settings of the faithgate fixture"
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("faithgate", "faithfulness gate for summarizers")
    group.addoption(
        "--faithgate",
        action="store_true",
        default=False,
        help="run the faithgate release gate (one test per configured dataset) and show "
        "faithfulness results in the summary",
    )
    group.addoption(
        "--faithgate-config",
        metavar="FILE",
        default=None,
        help="gate configuration (default: faithgate.toml or [tool.faithgate] of "
        "pyproject.toml, searched from the rootdir up)",
    )
    group.addoption(
        "--faithgate-metric",
        metavar="NAME",
        default=None,
        help="metric for the gate and the default of the faithgate fixture",
    )
    group.addoption(
        "--faithgate-threshold",
        metavar="X",
        type=float,
        default=None,
        help="per-example threshold of the selected metric(s)",
    )
    group.addoption(
        "--faithgate-min-pass-rate",
        metavar="R",
        type=float,
        default=None,
        help="share of examples that must pass the threshold",
    )
    group.addoption(
        "--faithgate-baseline",
        metavar="FILE",
        default=None,
        help="baseline results JSON for the regression rule",
    )
    group.addoption(
        "--faithgate-update-baseline",
        action="store_true",
        default=False,
        help="write this run's gate results to the baseline file (refused when the gate "
        "fails, unless --faithgate-force-baseline)",
    )
    group.addoption(
        "--faithgate-force-baseline",
        action="store_true",
        default=False,
        help="with --faithgate-update-baseline: write the baseline even when the gate fails",
    )
    group.addoption(
        "--faithgate-backend",
        choices=BACKEND_CHOICES,
        default=None,
        help="model backend (default: from the configuration, else auto)",
    )
    group.addoption(
        "--faithgate-executor",
        choices=EXECUTOR_CHOICES,
        default=None,
        help=f"where the gate items score: {executors_help()}; options from "
        "[tool.faithgate.execution] (default: from the configuration)",
    )
    for kind in file_report_kinds():  # the report format registry
        group.addoption(
            f"--faithgate-{kind}",
            metavar="FILE",
            default=None,
            help=f"write the gate's {kind} report to FILE",
        )
    group.addoption(
        "--faithgate-cache",
        metavar="FILE",
        default=None,
        help="score cache file (SQLite; default: <cache_dir>/scores.sqlite, the file faithgate "
        "check uses)",
    )
    group.addoption(
        "--faithgate-no-cache",
        action="store_true",
        default=False,
        help="score everything afresh; do not read or write the score cache",
    )


# The names this module is registered under: the ``pytest11`` entry point's, or its module
# name (``-p pytest_faithgate.plugin``, ``pytest_plugins = ["pytest_faithgate.plugin"]``).
PLUGIN_NAMES = ("faithgate", __name__)


def pytest_plugin_registered(plugin: object, manager: pytest.PytestPluginManager) -> None:
    """Once registered under one name, block the other: pluggy refuses to register one module
    twice (a ValueError traceback), and pytest skips a blocked name silently."""
    if plugin is not sys.modules[__name__]:
        return
    name = manager.get_name(plugin)
    for other in PLUGIN_NAMES:
        if other != name and not manager.is_blocked(other):
            manager.set_blocked(other)


def pytest_configure(config: pytest.Config) -> None:
    # Always: a registered marker keeps --strict-markers happy with or without the flag.
    config.addinivalue_line("markers", MARKER_HELP)
    config.addinivalue_line("markers", GATE_MARKER_HELP)
    options = Options.from_config(config)
    blank = options.blank_given()
    if blank:
        raise pytest.UsageError(f"faithgate: {', '.join(blank)}: expected a value, got none")
    if not options.enabled:
        ignored = options.gate_only_given()
        if ignored and not hasattr(config, "workerinput"):  # the xdist controller says it
            message = (
                f"faithgate: {', '.join(ignored)} given without --faithgate: the gate does not "
                "run, so they have no effect (the faithgate fixture does not use them)"
            )
            config.issue_config_time_warning(
                pytest.PytestConfigWarning(safe_line(message)), stacklevel=2
            )
        return
    session = _build_session(config, options)
    try:
        check_paths(config, session)
        check_gate_inputs(session)
    except FaithgateError as exc:
        raise pytest.UsageError(f"faithgate: {plugin_line(exc)}") from None
    config.stash[SESSION_KEY] = session
    from pytest_faithgate.gate_plugin import GatePlugin

    config.pluginmanager.register(GatePlugin(config, session), "faithgate-gate")


def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.stash.get(SESSION_KEY, None)
    if session is not None:
        session.close()


def _build_session(config: pytest.Config, options: Options) -> PluginSession:
    try:
        gate_config = load_session_config(Path(config.rootpath), options)
    except FaithgateError as exc:
        raise pytest.UsageError(f"faithgate: {plugin_line(exc)}") from None
    return PluginSession(Path(config.rootpath), options, gate_config)


def check_paths(config: pytest.Config, session: PluginSession, gate: bool = True) -> None:
    """Raise ``InputError`` when a file the plugin writes (the gate's reports and the baseline
    it updates, with ``gate``; the score cache) or pytest's ``--junitxml`` file is one of the
    gate's inputs or the same file as another of them: the last writer would silently replace
    the other's content (a faithgate JUnit file saying failures="0" in place of pytest's).
    Nor may a report or that baseline replace a file of the pytest run: a Python module (a
    test module, a conftest), pytest's ini file (``refuse_overwriting_pytest_files``; the
    other collected files are checked once collected, ``check_collected_files``)."""
    from faithgate.gate import input_files
    from faithgate.safety.paths import refuse_overwriting_inputs

    cfg = session.gate_config
    opts = session.options
    writes: list[tuple[str, Any]] = []
    xmlpath = config.getoption("xmlpath", None)
    if xmlpath:
        # pytest resolves it so (``_pytest.junitxml``), against the current directory.
        writes.append(("pytest --junitxml file", os.path.expanduser(os.path.expandvars(xmlpath))))
    # Without --faithgate neither reports nor a baseline are written.
    gate_outputs = gate_writes(session) if gate else []
    writes += gate_outputs
    if not opts.no_cache:
        writes.append(("score cache", session.cache_path()))
    refuse_overwriting_inputs(writes, input_files(cfg, baseline=not opts.update_baseline))
    refuse_overwriting_pytest_files(gate_outputs, ini_files(config))


def check_gate_inputs(session: PluginSession) -> None:
    """Before any test runs (a usage error, as ``faithgate check`` exits 2), the gate's
    checks of its configuration (``faithgate.gate.check_config``): e.g. a
    ``--faithgate-baseline`` that does not exist (without ``--faithgate-update-baseline``) is a
    typo far more often than a first run; ``rules.regression`` with no baseline path (in the
    configuration or ``--faithgate-baseline``) is a configuration error, not a failed gate.
    (Metric names are checked by the gate item: a conftest collected later may still register
    the metric.)"""
    from faithgate.gate import check_config

    opts = session.options
    checks = check_config(
        session.gate_config, opts.baseline_policy(), registry=False, use_cache=not opts.no_cache
    )
    checks.raise_errors()


def _session(config: pytest.Config) -> PluginSession:
    """The process's session, built on first use when ``--faithgate`` was not given."""
    session = config.stash.get(SESSION_KEY, None)
    if session is None:
        options = Options.from_config(config)
        try:
            gate_config = load_session_config(Path(config.rootpath), options)
            session = PluginSession(Path(config.rootpath), options, gate_config)
            check_paths(config, session, gate=False)
        except FaithgateError as exc:
            raise pytest.fail.Exception(f"faithgate: {plugin_line(exc)}", pytrace=False) from None
        config.stash[SESSION_KEY] = session
    return session


def marker_settings(node: pytest.Item) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The ``faithgate`` markers' keyword arguments: merged, the closest marker winning per key
    (a test's marker overrides its class's, which overrides its module's), and each marker's
    own, closest first. A marker's ``threshold`` and ``settings`` are resolved from the latter
    (``scoped_value``): they belong to that marker's ``metric``, so a class's
    ``(metric="a", threshold=X)`` never becomes the threshold of a test marker's
    ``metric="b"``."""
    merged: dict[str, Any] = {}
    closest_first: list[dict[str, Any]] = []
    for mark in node.iter_markers("faithgate"):
        if mark.args:
            pytest.fail(
                safe_line(
                    f"{node.nodeid}: @pytest.mark.faithgate takes keyword arguments only "
                    f"(got {mark.args!r})"
                ),
                pytrace=False,
            )
        closest_first.append(dict(mark.kwargs))
    try:
        # Each marker on its own: an outer marker's value may still be used (for its metric).
        for kwargs in closest_first:
            check_marker_kwargs(kwargs, node.nodeid)
    except FaithgateError as exc:  # keys and values are the user's: one escaped line
        raise pytest.fail.Exception(safe_line(exc), pytrace=False) from None
    for kwargs in reversed(closest_first):
        merged.update(kwargs)
    return merged, closest_first


@pytest.fixture
def faithgate(request: pytest.FixtureRequest) -> Generator[FaithgateFixture, None, None]:
    """Score summaries and assert faithfulness; see ``pytest_faithgate.fixture``.

    Works with or without ``--faithgate`` (a test that asks for it wants scoring); models are
    loaded once per process and shared by every test.
    """
    node = request.node
    merged, markers = marker_settings(node)
    yield FaithgateFixture(_session(request.config), node, merged, markers)
