"""Hooks active only under ``pytest --faithgate``: gate items, result transport, summary.

Results reach the process that prints the summary on the test reports themselves: each
report of a test (setup, call, teardown: a fixture may check in its setup or teardown) carries
``faithgate_checks`` (the fixture's checks made in that phase), the call report of a gate item
``faithgate_gate`` (the gate result as JSON), and any report ``faithgate_logged`` (the
``faithgate`` logger's warnings in that phase, which pytest's log capture would keep to
itself). pytest-xdist serialises extra report attributes, so the same
``pytest_runtest_logreport`` hook collects them in-process and on the xdist controller;
workers never print the table or write reports.
"""

from __future__ import annotations

import logging
from collections.abc import Generator
from typing import Any

import pytest

from faithgate.errors import FaithgateError
from faithgate.safety.escape import safe_line
from pytest_faithgate.fixture import CHECKS_KEY
from pytest_faithgate.messages import plugin_line
from pytest_faithgate.session import PluginSession
from pytest_faithgate.summary import write_terminal_summary

# Log records shown in the summary, at most (a metric failing on every example logs each).
MAX_LOGGED = 20


def fail_if_not_run(report: pytest.TestReport) -> None:
    """A gate item skipped or xfailed from outside the gate (a conftest's ``pytest.skip`` in
    ``pytest_runtest_setup``, a ``skip``/``skipif``/``xfail`` marker added to every item)
    passed the session while the gate never ran or failed: it fails instead, saying so.
    Deselection (``-m "not faithgate_gate"``) is the way to run the tests without it."""
    xfail = getattr(report, "wasxfail", None)
    if xfail is not None:
        del report.wasxfail
        if report.passed:  # the gate ran and passed: an ordinary pass
            return
        if report.when == "call":  # the gate ran and failed: its own report, not "expected"
            report.outcome = "failed"
            return
    if report.skipped:  # in setup: the gate never ran (a skip, or xfail(run=False))
        longrepr = report.longrepr
        if xfail is not None:
            reason = f"xfail: {xfail}"
        elif isinstance(longrepr, tuple) and len(longrepr) == 3:
            reason = str(longrepr[2])
        else:
            reason = "skipped"
        report.outcome = "failed"
        report.longrepr = (
            f"faithgate: the gate did not run ({safe_line(reason)}): a skipped gate fails; "
            "to run the tests without it, deselect it with -m 'not faithgate_gate'"
        )


class LogCollector(logging.Handler):
    """Keeps the ``faithgate`` logger's warnings (e.g. "score cache ... moved it aside") as
    escaped lines: under pytest the log capture would show them only beside a failing test."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.lines.append(f"{record.levelname.lower()}: {plugin_line(record.getMessage())}")
        except Exception:  # pragma: no cover - logging's own convention
            self.handleError(record)

    def take(self) -> list[str]:
        lines, self.lines = self.lines, []
        return lines


def is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


class GatePlugin:
    """Registered by ``pytest_configure`` when ``--faithgate`` is given."""

    def __init__(self, config: pytest.Config, session: PluginSession) -> None:
        self.config = config
        self.session = session
        self.checks: list[dict[str, Any]] = []
        self.gates: list[dict[str, Any]] = []
        self.report_lines: list[str] = []
        self.logged: list[str] = []
        # The files of the tests run (from their reports), which no gate report may replace.
        self.test_files: set[str] = set()
        self.log_collector = LogCollector()
        logging.getLogger("faithgate").addHandler(self.log_collector)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        logging.getLogger("faithgate").removeHandler(self.log_collector)

    # -- header ---------------------------------------------------------------------------
    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        cfg = self.session.gate_config
        where = str(cfg.source) if cfg.source is not None else "defaults (no configuration file)"
        header = f"faithgate: {where}; metrics: {', '.join(cfg.metrics)}; backend: {cfg.backend}"
        return [safe_line(header)]  # the path is the user's: one escaped line

    # -- gate items -----------------------------------------------------------------------
    # tryfirst: append before pytest's -k / -m deselection, so those select gate items too.
    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(
        self, session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        from pytest_faithgate.items import gate_items
        from pytest_faithgate.run_files import check_collected_files

        if not is_xdist_worker(config):
            # Before any test runs. (A worker's usage error is xdist's INTERNALERROR: under
            # xdist the controller checks the files of the test reports before writing.)
            check_collected_files(self.session, items)
        items.extend(gate_items(session, self.session))

    # -- transport ------------------------------------------------------------------------
    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        # The checks made since the previous phase's report (setup, call or teardown).
        checks = item.stash.get(CHECKS_KEY, None)
        if checks:
            report.faithgate_checks = list(checks)  # type: ignore[attr-defined]
            checks.clear()
        logged = self.log_collector.take()
        if logged:
            report.faithgate_logged = logged  # type: ignore[attr-defined]
        if call.when == "call":
            gate = getattr(item, "faithgate_result", None)
            if gate is not None:
                report.faithgate_gate = gate  # type: ignore[attr-defined]
        if getattr(item, "is_faithgate_gate", False):
            fail_if_not_run(report)
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if is_xdist_worker(self.config):
            return
        self.test_files.add(report.fspath)  # relative to the rootdir (the node id's file)
        self.checks.extend(getattr(report, "faithgate_checks", None) or [])
        self.logged.extend(getattr(report, "faithgate_logged", None) or [])
        gate = getattr(report, "faithgate_gate", None)
        if gate is not None:
            self.gates.append(gate)

    # -- output (controller / single process only) --------------------------------------
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if is_xdist_worker(self.config):
            return
        # Each worker logs the same warning once: show it once (first seen first).
        logged = list(dict.fromkeys(self.logged + self.log_collector.take()))
        write_terminal_summary(
            terminalreporter, self.checks, self.gates, render_gate, logged_lines(logged)
        )
        for line in self.report_lines:
            terminalreporter.write_line(line)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        # Runs before the terminal summary (inside the terminal reporter's wrapper).
        if is_xdist_worker(self.config) or not self.gates:
            return
        from pytest_faithgate.items import write_gate_outputs
        from pytest_faithgate.run_files import gate_writes, refuse_overwriting_pytest_files

        root = self.config.rootpath
        try:
            # Checked after collection in a single process; under xdist only the workers
            # collect, so the controller checks here, before writing anything.
            refuse_overwriting_pytest_files(
                gate_writes(self.session),
                [("collected test file", root / name) for name in sorted(self.test_files)],
            )
            paths = write_gate_outputs(self.session, self.gates)
        except FaithgateError as exc:
            self.report_lines.append(f"faithgate: {plugin_line(exc)}")
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
            for data in self.gates:  # the baseline went with the reports: not updated
                if data.pop("baseline_to_write", None) is not None:
                    data.pop("baseline_note", None)
            return
        self.report_lines.extend(f"faithgate report: {safe_line(p)}" for p in paths)


def logged_lines(logged: list[str]) -> list[str]:
    """The collected log lines for the summary, at most ``MAX_LOGGED`` of them."""
    lines = [f"faithgate: {line}" for line in logged[:MAX_LOGGED]]
    if len(logged) > MAX_LOGGED:
        lines.append(f"faithgate: ... and {len(logged) - MAX_LOGGED} more logged warnings")
    return lines


def render_gate(data: dict[str, Any]) -> list[str]:
    """The gate's lines in the ``faithgate`` summary section.

    A passing gate shows its whole terminal report (verdict, rule table); a failing one only
    its verdict line and a pointer, because its item's failure report in FAILURES already
    holds the table: pytest users expect a failure's detail once, in FAILURES."""
    from faithgate.report import render
    from faithgate.report.terminal import headline
    from faithgate.result import GateResult
    from pytest_faithgate.items import in_plugin_words

    try:
        result = GateResult.from_dict(data)
    except FaithgateError as exc:
        # One line, as ``pytest_sessionfinish`` reports a failure to write the reports: a
        # traceback from the summary hook is pytest's INTERNALERROR.
        return [f"faithgate: {plugin_line(exc)}"]
    if result.passed:
        lines = render("terminal", in_plugin_words(result)).rstrip("\n").splitlines()
    else:
        lines = [headline(result), "(rule table and failing examples: see FAILURES above)"]
    note = data.get("baseline_note")
    if note:
        lines.append(plugin_line(note))
    lines.extend(f"faithgate: warning: {plugin_line(w)}" for w in data.get("warnings", ()))
    return lines
