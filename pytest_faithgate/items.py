"""Gate items: one collected test per configured dataset, running ``faithgate.gate.Gate``.

The item is a thin layer over the gate engine (the same ``Gate.run`` as ``faithgate check``)
that scores through the session's shared scorer, so models load once per process. It passes
when the gate passes; its failure report (in pytest's FAILURES section) is the gate's terminal
report: the verdict line, the rule table and the failing examples (with their least supported
sentences). The ``faithgate`` summary section then gives a failed gate its verdict line only,
so the table is printed once.

The gate result travels to the controller as JSON on the test report (``faithgate_gate``),
where the summary is printed and the configured reports are written.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import pytest
from _pytest._code.code import ReprExceptionInfo, ReprFileLocation, ReprTracebackNative

from faithgate.config import GateConfig
from faithgate.errors import FaithgateError
from faithgate.numbers import shortest
from faithgate.safety.escape import safe_line
from pytest_faithgate.messages import plugin_line, plugin_text, skip_exceptions, skip_message
from pytest_faithgate.session import PluginSession


class GateFailed(Exception):
    """Raised by a gate item whose gate failed; carries the result for the report."""

    def __init__(self, result: Any) -> None:
        super().__init__(f"faithgate: gate failed ({len(result.failed_rules)} rules)")
        self.result = result


class GateSkipped(Exception):
    """A summarizer or a metric raised pytest's skip / xfail while the gate ran."""


class GateFile(pytest.File):
    """The configuration file the gate items come from (their parent node)."""

    def collect(self) -> list[pytest.Item]:  # pragma: no cover - items are built directly
        return []


def one_line_crash(path: Path, text: str) -> ReprExceptionInfo:
    """A failure report that prints ``text`` in FAILURES but gives the short summary one line.

    A plain string report is copied whole into pytest's "short test summary info" line when
    pytest runs on CI (the ``CI`` variable) or with ``-vv``, which would print the rule table a
    second time. A native-style exception repr prints the same text in FAILURES, carries the
    verdict line as its crash message (what the summary shows) and survives xdist's report
    serialisation."""
    lines = text.rstrip("\n").splitlines()
    return ReprExceptionInfo(
        reprtraceback=ReprTracebackNative([line + "\n" for line in lines]),
        reprcrash=ReprFileLocation(str(path), 0, lines[0] if lines else "faithgate: gate failed"),
    )


def in_plugin_words(result: Any) -> Any:
    """A copy of a ``GateResult`` whose rule messages name the plugin's options (the
    regression rule says "update it with --update-baseline"), for the terminal only."""
    rules = [dataclasses.replace(r, message=plugin_text(r.message)) for r in result.rules]
    return dataclasses.replace(result, rules=rules)


def has_dataset(config: GateConfig) -> bool:
    """Whether ``config`` names something to gate (``Gate.load_examples``' test)."""
    return config.outputs is not None or (config.summarizer is not None and config.data is not None)


def dataset_name(config: GateConfig) -> str:
    """A short, stable label of the configured input for the item's name: one printable line
    (a file name may hold line breaks or escape sequences; pytest prints the name as is)."""
    if config.outputs is not None:
        return safe_line(Path(config.outputs).name)
    if config.summarizer is not None:
        return safe_line(f"{config.summarizer}@{Path(config.data).name if config.data else '?'}")
    return NOTHING_TO_GATE


# The name of the item that stands for a configuration with no dataset (``nothing_to_gate``).
NOTHING_TO_GATE = "nothing to gate"


def nothing_to_gate(config: GateConfig, rootdir: Path) -> FaithgateError:
    """The error of ``faithgate check`` (exit 2) for a configuration with no dataset, in the
    library's words (``Gate.load_examples``, which reads nothing when there is no input),
    saying where the configuration was looked for when none was found (under pytest most
    often a run from another directory: another rootdir) and how to run the tests alone."""
    from faithgate.errors import InputError
    from faithgate.gate import Gate

    try:
        Gate(config).load_examples()
    except FaithgateError as exc:
        reason = str(exc)
    else:  # pragma: no cover - only called when there is no dataset
        reason = "nothing to gate"
    if config.source is None:
        reason += f" (no faithgate.toml or [tool.faithgate] found from {rootdir} up)"
    return InputError(f"{reason}; to run the tests without the gate: -m 'not faithgate_gate'")


class GateItem(pytest.Item):
    """Runs the release gate of one dataset and fails with the rule table when it fails."""

    # Read by gate_plugin (which does not import this module at import time): a gate item
    # that is skipped or xfailed from outside fails (``gate_plugin.fail_if_not_run``).
    is_faithgate_gate = True

    def __init__(self, *, gate_config: GateConfig, plugin_session: PluginSession, **kw: Any):
        super().__init__(**kw)
        self.gate_config = gate_config
        self.plugin_session = plugin_session
        # Set by runtest; copied onto the call report for the controller (see gate_plugin).
        self.faithgate_result: dict[str, Any] | None = None
        self.add_marker(pytest.mark.faithgate_gate)

    def runtest(self) -> None:
        if not has_dataset(self.gate_config):
            # ``pytest --faithgate`` asked for the gate: with nothing to gate it fails, as
            # ``faithgate check`` exits 2, never passes (deselect it to run the tests only).
            raise nothing_to_gate(self.gate_config, self.plugin_session.rootdir)
        try:
            gate, result = self._run_gate()
        except skip_exceptions() as exc:
            # pytest.skip / importorskip / xfail in a summarizer or a metric (its constructor,
            # say) would report the gate as skipped and the session would pass: a gate that
            # cannot score fails.
            raise GateSkipped(skip_message("a summarizer or metric", exc, "gate")) from None
        self.faithgate_result = result.to_dict()
        if gate.baseline_note:
            # Travels with the result to the controller, which prints it in the summary.
            self.faithgate_result["baseline_note"] = gate.baseline_note
        if gate.baseline_to_write is not None:
            # The controller writes it with the reports, as one set (write_gate_outputs).
            self.faithgate_result["baseline_to_write"] = str(gate.baseline_to_write)
        withheld = [
            kind for kind, _ in self.gate_config.reports.items() if kind not in gate.reports.paths
        ]
        if withheld:  # e.g. the json report at a baseline this failing run may not replace
            self.faithgate_result["withheld_reports"] = withheld
        if gate.warnings:  # likewise (e.g. a threshold for a metric that is not selected)
            self.faithgate_result["warnings"] = list(gate.warnings)
        self._record_properties(result)
        if not result.passed:
            raise GateFailed(result)

    def _run_gate(self) -> tuple[Any, Any]:
        from faithgate.gate import Gate

        opts = self.plugin_session.options
        gate = Gate(
            self.gate_config,
            scorer=self.plugin_session.gate_scorer(),
            cache=self.plugin_session.cache,
            progress=False,
            use_cache=not opts.no_cache,
            baseline=opts.baseline_policy(),
        )
        return gate, gate.run()

    def _record_properties(self, result: Any) -> None:
        """Headline numbers for pytest's own JUnit XML (``--junitxml``)."""
        props = self.user_properties
        props.append(("faithgate.verdict", result.verdict))
        props.append(("faithgate.examples", result.n_examples))
        if result.pass_rate is not None:
            props.append(("faithgate.pass_rate", shortest(result.pass_rate)))
        for metric, mean in result.means().items():
            if mean is not None and not math.isnan(mean):
                props.append((f"faithgate.mean.{metric}", shortest(mean)))
        for metric, digest in result.settings_hashes.items():
            props.append((f"faithgate.settings_hash.{metric}", digest))
        for rule in result.rules:
            value = "-" if rule.value is None else shortest(rule.value)
            props.append((f"faithgate.rule.{rule.name}", value))
            props.append((f"faithgate.rule.{rule.name}.passed", rule.passed))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, GateFailed):
            from faithgate.report import render

            text = render("terminal", in_plugin_words(excinfo.value.result))
            return one_line_crash(self.path, text)
        if isinstance(excinfo.value, FaithgateError):
            return f"faithgate: {plugin_line(excinfo.value)}"
        if isinstance(excinfo.value, GateSkipped):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        # Line 0, not None: pytest's report of a skip marker on an item needs a line number
        # (None was an INTERNALERROR, and under xdist a run that passed).
        return self.path, 0, f"faithgate gate on {dataset_name(self.gate_config)}"


def gate_configs(plugin_session: PluginSession) -> list[GateConfig]:
    """The configured datasets to gate (one configuration holds one input today). With none
    (no configuration found, or one without ``outputs`` / ``summarizer``), the configuration
    still gives one item, ``faithgate[nothing to gate]``, that fails saying so: ``pytest
    --faithgate`` never passes without gating (a configuration not found from the rootdir
    looked like a passed gate). The other tests still run; a run that wants only the
    fixture's summary deselects the gate as always (``-m "not faithgate_gate"``)."""
    return [plugin_session.gate_config]


def gate_items(session: pytest.Session, plugin_session: PluginSession) -> list[pytest.Item]:
    """Gate items to append to the collection (see ``gate_configs``).

    Each item's parent file is reported through ``pytest_collectreport`` as if collected, so
    the terminal's "collected N items" line (and any plugin counting collect reports) counts
    the gate items like any other test instead of saying "collected 0 items"."""
    items: list[pytest.Item] = []
    for cfg in gate_configs(plugin_session):
        path = str(cfg.source or (plugin_session.rootdir / "faithgate.toml"))
        # The node id starts with this path and pytest prints it as it is: a file name with a
        # line break or an escape sequence is shown escaped (the file is never collected).
        shown = Path(safe_line(path))
        try:
            nodeid = str(shown.relative_to(session.config.rootpath))
        except ValueError:
            # Outside the rootdir (a configuration found above it, or --faithgate-config):
            # pytest's fallback id is "::" + the file name, a line such as "::warning::..." that
            # a GitHub runner reads as a workflow command. Its full path instead.
            nodeid = str(shown)
        parent = GateFile.from_parent(session, path=shown, nodeid=nodeid)
        item = GateItem.from_parent(
            parent,
            name=f"faithgate[{dataset_name(cfg)}]",
            gate_config=cfg,
            plugin_session=plugin_session,
        )
        report = pytest.CollectReport(parent.nodeid, "passed", None, [item])
        session.config.hook.pytest_collectreport(report=report)
        items.append(item)
    return items


def write_gate_outputs(plugin_session: PluginSession, gates: list[dict[str, Any]]) -> list[Path]:
    """Write the configured reports (JUnit / Markdown / JSON / HTML) of the gate results.

    Runs on the controller (or the single process) after the session, from the results
    carried by the reports, so it works the same with and without xdist.
    """
    from faithgate.report import write_reports
    from faithgate.result import GateResult

    written: list[Path] = []
    for data in gates:
        result = GateResult.from_dict(data)
        reports = plugin_session.gate_config.reports
        for kind in data.get("withheld_reports", ()):
            reports = reports.with_path(kind, None)
        baseline = data.get("baseline_to_write")
        written.extend(write_reports(result, reports, baseline=baseline).values())
    return written
