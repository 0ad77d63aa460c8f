"""GitHub Actions glue: a gate result JSON -> step outputs, job summary and annotations.

Run by the composite action (``action.yml``) after ``faithgate check``; it reads only files
(the result JSON, the Markdown report, the check's stderr) and never scores::

    faithgate github report --result reports/faithgate.json \\
        --markdown reports/faithgate.md --exit-code 1
    faithgate github cache-dir      # the score cache dir of the configuration

(the commands are ``faithgate.cli.github``; this module is what they call).

``report`` writes to the files GitHub names in the environment:

- ``$GITHUB_OUTPUT``: ``verdict`` (pass / fail / error; pass when ``--fail-on-regression false``
  lets a gate failing only its regression rules, each on a measured drop, pass), ``pass-rate``,
  ``means`` (a JSON object metric -> mean; both in full, a failing 0.89996 never reads as the
  0.9 it failed),
  ``failed-examples``, ``report-NAME`` for every file format of the registry
  (``faithgate.formats``: markdown, json, junit, html)
  and ``step-exit-code`` (what the action's last step exits with);
- ``$GITHUB_STEP_SUMMARY``: the Markdown report (cut at GitHub's 1 MiB limit);
- standard output: one ``::error`` workflow command per failing example (with ``file`` and
  ``line`` of the example in the outputs JSONL when it can be found), one per failing rule,
  escaped as GitHub's workflow-command parser expects (``escape_data`` / ``escape_property``).

Outside GitHub (no ``GITHUB_OUTPUT``) the outputs are printed instead, so the command is safe to
run locally.
"""

from __future__ import annotations

import json
import math
import re
import sys
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from faithgate.errors import InputError
from faithgate.formats import REPORT_FORMATS, file_report_kinds
from faithgate.io import jsonl_lines
from faithgate.numbers import is_finite_number, shortest, shown_against
from faithgate.report import render
from faithgate.result import GateResult, is_recorded_number
from faithgate.safety.escape import clipped, markdown_literal, printable, safe_line
from faithgate.safety.userjson import parse_json

# GitHub rejects a step summary over 1 MiB (1024 * 1024 bytes); keep room for the cut notice.
SUMMARY_LIMIT = 1024 * 1024 - 1024
ANNOTATION_MESSAGE_LIMIT = 4000


# ---------------------------------------------------------------------- workflow commands


def escape_data(text: str) -> str:
    """Escape a workflow command's message (``::cmd::MESSAGE``): ``%``, CR and LF.

    The same rules as ``escapeData`` in GitHub's ``@actions/core`` (``%`` first, so an escape
    sequence in the text is not decoded by the runner).
    """
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """Escape a workflow command's property value (``::cmd key=VALUE::``): as ``escape_data``
    plus ``:`` and ``,``, which would end the value (``escapeProperty`` in ``@actions/core``)."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def workflow_command(command: str, message: str, **properties: Any) -> str:
    """One workflow command line, e.g. ``::error file=a.jsonl,line=3,title=...::message``.

    The only function that builds workflow commands. Properties whose value is ``None`` are
    left out. Every line of the message and every property goes through
    ``faithgate.safety.escape.printable`` first (no escape sequences or stray control characters
    reach the log), then through GitHub's escaping (a multi-line message stays one command).
    """
    props = ",".join(
        f"{key}={escape_property(printable(value))}"
        for key, value in properties.items()
        if value is not None
    )
    text = "\n".join(printable(line) for line in str(message).split("\n"))
    return f"::{command}{' ' + props if props else ''}::{escape_data(text)}"


def format_output(name: str, value: str) -> str:
    """A ``$GITHUB_OUTPUT`` entry. One-line values are ``name=value``; others use the
    ``name<<DELIMITER`` form with a random delimiter that does not occur in the value."""
    if "\n" not in value and "\r" not in value:
        return f"{name}={value}\n"
    while True:
        delimiter = f"ghadelimiter_{uuid.uuid4()}"
        if delimiter not in value:
            break
    return f"{name}<<{delimiter}\n{value}\n{delimiter}\n"


# ---------------------------------------------------------------------- reading the result


def load_result(path: str | Path) -> dict[str, Any]:
    """The gate result JSON (``GateResult.to_dict``); ``InputError`` when unreadable."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: no gate result (did faithgate check run?)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: unreadable gate result ({exc})") from None
    data = parse_json(text, path, "unreadable gate result")
    if not isinstance(data, dict) or "passed" not in data or "examples" not in data:
        raise InputError(f"{path}: not a faithgate result JSON")
    # Every part the report steps read is well formed, before anything is printed: the
    # examples and rules (from_checked_dict), and the top-level fields the outputs, the
    # annotations and the job summary use.
    GateResult.from_checked_dict(data, path)
    problem = _top_level_problem(data)
    if problem is not None:
        raise InputError(f"{path}: malformed faithgate result ({problem})"[:300])
    return data


def _top_level_problem(data: Mapping[str, Any]) -> str | None:
    """What is wrong with the fields a result JSON records beside ``GateResult``'s own (the
    schema checked those in ``from_checked_dict``): ``verdict``, ``pass_rate`` and ``means``,
    which the report steps read as they are (``outputs_for``, ``summary_markdown``), or
    ``None``."""
    means = data.get("means")
    checks = [
        (data.get("verdict") in (None, "pass", "fail"), "verdict must be 'pass' or 'fail'"),
        (
            data.get("pass_rate") is None or is_recorded_number(data["pass_rate"]),
            "pass_rate must be a number or null",
        ),
        (
            means is None
            or (
                isinstance(means, dict)
                and all(v is None or is_recorded_number(v) for v in means.values())
            ),
            "means must be an object of numbers or null",
        ),
    ]
    return next((why for ok, why in checks if not ok), None)


def _fmt_rate(value: Any) -> str:
    """The ``pass-rate`` output in full (``shortest``: 1 only when every example passed, 0 only
    when none did, and a rate short of ``min_pass_rate`` never rounded up to it), empty when
    there is no rate."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return shortest(float(value))


def outputs_for(result: Mapping[str, Any], reports: Mapping[str, Path | None]) -> dict[str, str]:
    """Step outputs of a gate result: verdict, pass rate, means, failure count, report paths."""
    examples = [e for e in result.get("examples", []) if not e.get("probe")]
    failed = [e for e in examples if not e.get("passed")]
    means = {
        # In full (0.7499996 is not 0.75); a non-finite mean (a result written before results
        # were strict JSON) is null: the output is read with fromJSON(), which refuses NaN.
        name: (float(v) if v is not None and math.isfinite(float(v)) else None)
        for name, v in (result.get("means") or {}).items()
    }
    out = {
        "verdict": str(result.get("verdict") or ("pass" if result.get("passed") else "fail")),
        "pass-rate": _fmt_rate(result.get("pass_rate")),
        "means": json.dumps(means, sort_keys=True, allow_nan=False),
        "failed-examples": str(len(failed)),
    }
    for kind in file_report_kinds():  # one ``report-NAME`` per file format of the registry
        path = reports.get(kind)
        out[REPORT_FORMATS[kind].action_output] = (
            str(path) if path is not None and Path(path).is_file() else ""
        )
    return out


def example_lines(path: str | Path) -> dict[str, int]:
    """Example id -> 1-based line in a JSONL file (ids default to the line number, as in
    ``faithgate.io``). Unparsable lines are skipped: this only places annotations."""
    lines: dict[str, int] = {}
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError):
        return lines
    for number, line in enumerate(jsonl_lines(text), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):  # bad JSON, a number too long: no line to place
            continue
        if isinstance(record, dict):
            lines.setdefault(str(record.get("id", number)), number)
    return lines


def _input_path(result: Mapping[str, Any], root: str | Path | None = None) -> str | None:
    """The JSONL the examples came from: the outputs file, or for a summarizer run
    (``input`` = ``"mod:fn over DATA"``) the dataset, whose ids the outputs keep. The check
    records it relative to its configuration's directory, ``root`` (else the current one)."""
    text = str(result.get("input") or "")
    base = Path(root) if root is not None else Path.cwd()
    if " over " in text and not (base / text).is_file():
        text = text.rsplit(" over ", 1)[1]
    return str(base / text) if text else None


def _annotation_file(path: str | None, workspace: str | None) -> str | None:
    """The input file as GitHub wants it in an annotation: relative to the workspace. A file
    outside the workspace (or no workspace) gives ``None``: the annotation is then shown
    without a file rather than attached to a path GitHub cannot resolve."""
    if not path or not workspace or not Path(path).is_file():
        return None
    try:
        return Path(path).resolve().relative_to(Path(workspace).resolve()).as_posix()
    except ValueError:
        return None


def _clip(text: str, limit: int = ANNOTATION_MESSAGE_LIMIT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def example_message(example: Mapping[str, Any]) -> str:
    """Why an example failed, with its scores; several lines (escaped when emitted)."""
    lines = [example.get("message") or "failed"]
    scores = example.get("scores") or {}
    parts = []
    for name, s in scores.items():
        value, threshold = s.get("value"), s.get("threshold")
        if value is None:
            shown = "unscored" + (
                f" (threshold {float(threshold):g})" if threshold is not None else ""
            )
        elif threshold is None:
            shown = f"{float(value):.4f}"
        else:
            shown = "{} (threshold {})".format(*shown_against(float(value), float(threshold)))
        parts.append(f"{name} {shown}")
    if parts:
        lines.append("scores: " + ", ".join(parts))
    summary = " ".join(str(example.get("summary") or "").split())
    if summary:
        lines.append(f"summary: {summary}")
    return _clip("\n".join(lines))


def annotations_for(
    result: Mapping[str, Any],
    *,
    max_annotations: int = 50,
    workspace: str | None = None,
    fail_on_regression: bool = True,
    input_root: str | Path | None = None,
) -> list[str]:
    """Workflow commands: one ``::error`` per failing example (probes excluded), then one per
    failing rule (``::warning`` for a regression when ``fail_on_regression`` is off). At most
    ``max_annotations`` example annotations; a notice says how many were left out.
    ``input_root``: the directory of the check's configuration (see ``_input_path``)."""
    commands: list[str] = []
    input_path = _input_path(result, input_root)
    file = _annotation_file(input_path, workspace)
    lines = example_lines(input_path) if file else {}
    failed = [e for e in result.get("examples", []) if not e.get("probe") and not e.get("passed")]
    for example in failed[:max_annotations]:
        eid = str(example.get("id"))
        line = lines.get(eid)
        commands.append(
            workflow_command(
                "error",
                example_message(example),
                file=file if line else None,
                line=line,
                title=f"faithgate: example {clipped(eid)} failed",
            )
        )
    if len(failed) > max_annotations:
        commands.append(
            workflow_command(
                "warning",
                f"{len(failed) - max_annotations} more failing examples are not annotated; "
                "see the job summary or the JUnit report",
                title="faithgate: more failures",
            )
        )
    for rule in result.get("rules", []):
        if rule.get("passed"):
            continue
        level = "error"
        if measured_regression(rule) and not fail_on_regression:
            level = "warning"
        commands.append(
            workflow_command(
                level,
                _clip(str(rule.get("message") or "failed")),
                title=f"faithgate: rule {rule.get('name')} failed",
            )
        )
    return commands


def measured_regression(rule: Mapping[str, Any]) -> bool:
    """Whether a failing rule is a regression the gate measured: a mean that dropped past the
    tolerance against the baseline (the rule's value is the drop). The regression rule also
    fails without comparing anything (no baseline with ``require_baseline``, a baseline made
    with other settings or without the metric, no example in common; a drop that is not a
    number): those have no value and are never waived."""
    return rule.get("kind") == "regression" and is_finite_number(rule.get("value"))


def waived_regressions(
    result: Mapping[str, Any] | None, exit_code: int, fail_on_regression: bool
) -> list[str]:
    """The failing rules the step lets pass: with ``fail_on_regression`` off, those of a
    failed gate whose only failing rules are measured regressions (else none)."""
    if exit_code != 1 or result is None or fail_on_regression:
        return []
    failing = [r for r in result.get("rules", []) if not r.get("passed")]
    if failing and all(measured_regression(r) for r in failing):
        return [str(r.get("name")) for r in failing]
    return []


def step_exit_code(
    result: Mapping[str, Any] | None, exit_code: int, fail_on_regression: bool
) -> int:
    """What the action's step exits with: the check's code, except that with
    ``fail_on_regression`` off a gate whose only failing rules are measured regressions
    (``measured_regression``) passes."""
    return 0 if waived_regressions(result, exit_code, fail_on_regression) else exit_code


def _waived_note(rules: list[str]) -> str:
    """The job summary's first lines when the step passes a regression: the report below
    still shows the gate's own FAIL (the result JSON is the next release's baseline)."""
    names = ", ".join(markdown_literal(name) for name in rules)
    return (
        f"## ⚠️ faithgate: PASS with a warning ({names})\n\n"
        "The only failing rules are measured regressions against the baseline, and "
        "`fail-on-regression` is `false`: the step passes (verdict `pass`). The report below "
        "is the gate's own result.\n\n"
    )


def summary_markdown(
    result: Mapping[str, Any] | None,
    markdown: str | None,
    error: str | None,
    waived: list[str] | None = None,
) -> str:
    """The job summary: the Markdown report, or a rendering of the result, or the error;
    headed by a note when the step passes the ``waived`` regression rules."""
    if markdown is None and result is not None:
        markdown = render("markdown", GateResult.from_dict(result))
    if markdown is None:
        text = printable(error or "no result")
        # A fence longer than any backtick run in the text: the text cannot close it.
        longest = max((len(run) for run in re.findall("`+", text)), default=0)
        fence = "`" * max(3, longest + 1)
        markdown = f"## faithgate: could not run\n\n{fence}\n{text}\n{fence}\n"
    if waived:
        markdown = _waived_note(waived) + markdown
    data = markdown.encode("utf-8")
    if len(data) > SUMMARY_LIMIT:
        cut = data[:SUMMARY_LIMIT].decode("utf-8", errors="ignore")
        markdown = cut + "\n\n…(cut at GitHub's 1 MiB job summary limit; see the report file)\n"
    return markdown if markdown.endswith("\n") else markdown + "\n"


# ---------------------------------------------------------------------- commands


def write_env_file(path: str | None, text: str, stream: Any) -> None:
    """Append to a GitHub environment file (``$GITHUB_OUTPUT``...), or print when not on
    GitHub."""
    if path:
        try:
            with open(path, "a", encoding="utf-8") as fh:
                fh.write(text)
        except OSError as exc:  # a runner's broken environment: one line, exit 2
            raise InputError(f"cannot append to {path}: {exc.strerror or exc}") from None
    else:
        stream.write(text)


def write_outputs(path: str | None, outputs: Mapping[str, str], stream: Any) -> None:
    """Step outputs: appended to ``$GITHUB_OUTPUT`` (``path``) as they are (a later step reads
    the real paths), or, outside GitHub, printed one ``name=value`` line each with every value
    through ``faithgate.safety.escape.safe_line``: a report or cache path is user text, and a
    directory named with ``ESC [ 2J`` or an OSC 8 hyperlink must not reach the terminal raw."""
    if path:
        write_env_file(path, "".join(format_output(k, v) for k, v in outputs.items()), None)
    else:
        stream.write("".join(f"{k}={safe_line(v)}\n" for k, v in outputs.items()))


# How ``faithgate check`` prints a warning on stderr (faithgate.cli); the Action turns each
# into a warning annotation.
WARNING_PREFIX = "faithgate: warning: "


def _warnings(path: str | None) -> list[str]:
    """The warnings ``faithgate check`` wrote to its stderr file, without their prefix."""
    if not path or not Path(path).is_file():
        return []
    text = Path(path).read_text("utf-8", errors="replace")
    return [
        ln[len(WARNING_PREFIX) :].strip()
        for ln in text.splitlines()
        if ln.startswith(WARNING_PREFIX)
    ]


def _last_line(path: str | None) -> str | None:
    if not path or not Path(path).is_file():
        return None
    lines = [ln.strip() for ln in Path(path).read_text("utf-8", errors="replace").splitlines()]
    lines = [ln for ln in lines if ln]
    return lines[-1] if lines else None


@dataclass(frozen=True)
class ReportRequest:
    """The files and settings of one ``faithgate github report`` run."""

    result: str
    # The other reports of the run, by format name (``faithgate.formats``): their paths become
    # the ``report-NAME`` outputs; the Markdown one is also the job summary.
    reports: Mapping[str, str | None] = field(default_factory=dict)
    stderr: str | None = None
    exit_code: int | None = None
    fail_on_regression: bool = True
    max_annotations: int = 50
    # The check's configuration directory: the result's input path is relative to it.
    input_root: str | None = None


def run_report(args: ReportRequest, env: Mapping[str, str], out: Any = None) -> int:
    """The ``report`` command; returns the process exit code (0 unless this step itself broke)."""
    out = out or sys.stdout
    result: dict[str, Any] | None = None
    error: str | None = None
    try:
        result = load_result(args.result)
    except InputError as exc:
        error = _last_line(args.stderr) or str(exc)
    rc = args.exit_code
    if result is None and rc in (None, 0, 1):
        rc = 2  # a check that wrote no result did not decide anything
    elif rc is None:
        rc = 0 if result and result.get("passed") else 1
    reports = {**args.reports, "json": args.result}
    markdown = None
    markdown_path = reports.get("markdown")
    if markdown_path and Path(markdown_path).is_file() and result is not None:
        # The report faithgate wrote is UTF-8; anything else there (a file replaced since, an
        # unreadable one) must not cost the step its annotations and outputs.
        try:
            markdown = Path(markdown_path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            markdown = None

    if result is not None:
        outputs = outputs_for(result, reports)
        commands = annotations_for(
            result,
            max_annotations=args.max_annotations,
            workspace=env.get("GITHUB_WORKSPACE"),
            fail_on_regression=args.fail_on_regression,
            input_root=args.input_root,
        )
        commands += [
            workflow_command("warning", w, title="faithgate: warning")
            for w in _warnings(args.stderr)
        ]
    else:
        outputs = {
            "verdict": "error",
            "pass-rate": "",
            "means": "{}",
            "failed-examples": "0",
            **{REPORT_FORMATS[kind].action_output: "" for kind in file_report_kinds()},
        }
        commands = [workflow_command("error", error or "faithgate check failed", title="faithgate")]
    waived = waived_regressions(result, rc, args.fail_on_regression)
    if waived:  # the step passes: so does the verdict (each regression is a ::warning)
        outputs["verdict"] = "pass"
    outputs["step-exit-code"] = str(step_exit_code(result, rc, args.fail_on_regression))
    summary = summary_markdown(result, markdown, error, waived)  # made before anything is printed

    for command in commands:
        out.write(command + "\n")
    write_env_file(env.get("GITHUB_STEP_SUMMARY"), summary, _NullStream())
    write_outputs(env.get("GITHUB_OUTPUT"), outputs, out)
    return 0


class _NullStream:
    def write(self, text: str) -> None:  # the summary is not echoed outside GitHub
        return None
