"""The report formats, registered once: CLI flags, plugin options and config keys derive
from here.

A format names its renderer by dotted path (``"module:function"``, a function of a
``GateResult`` returning text), imported when a report is rendered, so this registry is plain
data that the configuration (below the reports in the layers) can read. Adding a format is a
renderer module plus one ``register_report_format`` call below; ``faithgate check --NAME``,
``pytest --faithgate-NAME``, ``[tool.faithgate.reports] NAME``, ``faithgate.report.render``
and the GitHub Action (its step output ``report-NAME`` and the file it writes into its report
directory; ``tests/integration/test_action.py`` checks ``action.yml`` lists the output) then
know it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ReportFormat:
    """One report format: its ``name`` (flag, option and config key), a ``help`` line, its
    ``renderer`` (``"module:function"``) and whether it is written to a file (``to_file``;
    the terminal report is printed), with the file's name in a report directory (``filename``:
    the Action's ``report-dir``; default ``faithgate.NAME``)."""

    name: str
    help: str
    renderer: str
    to_file: bool = True
    filename: str = ""

    @property
    def report_filename(self) -> str:
        return self.filename or f"faithgate.{self.name}"

    @property
    def action_output(self) -> str:
        """The GitHub Action's step output holding the report's path."""
        return f"report-{self.name}"


REPORT_FORMATS: dict[str, ReportFormat] = {}


def register_report_format(fmt: ReportFormat) -> ReportFormat:
    """Add ``fmt`` to the registry (a name registered twice is a programming error)."""
    if fmt.name in REPORT_FORMATS:
        raise ValueError(f"report format {fmt.name!r} is registered twice")
    REPORT_FORMATS[fmt.name] = fmt
    return fmt


def file_report_kinds() -> tuple[str, ...]:
    """Names of the formats written to files, in registration order."""
    return tuple(name for name, fmt in REPORT_FORMATS.items() if fmt.to_file)


for _fmt in (
    ReportFormat(
        "junit",
        "write a JUnit XML report",
        "faithgate.report.junit:to_junit",
        True,
        "faithgate.xml",
    ),
    ReportFormat(
        "markdown",
        "write a Markdown report",
        "faithgate.report.markdown:to_markdown",
        True,
        "faithgate.md",
    ),
    ReportFormat(
        "json", "write the result JSON (usable as a baseline)", "faithgate.report:to_json"
    ),
    ReportFormat("html", "write a self-contained HTML report", "faithgate.report.html:to_html"),
    ReportFormat(
        "terminal", "the plain-text report", "faithgate.report.terminal:to_terminal", False
    ),
):
    register_report_format(_fmt)
