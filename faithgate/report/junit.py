"""JUnit XML report (``junit-xml`` package): what CI systems show as test results.

Two suites: ``faithgate.examples`` with one test case per gated example (its failure message is
the reason, naming the least supported sentence; an unscorable example is a failure of type
``unscorable``, never a skip) and ``faithgate.rules`` with one test case per decision rule (a
rule that passed without being checked, such as the regression rule without a baseline yet, is
a skipped test case). Suite properties carry the verdict, pass rate, mean per metric (in full,
``shortest``: a failing 0.89996 must not read as the 0.9 it failed) and the settings hash of
every metric.
"""

from __future__ import annotations

import re

from junit_xml import TestCase, TestSuite, to_xml_report_string

from faithgate.numbers import shortest
from faithgate.report.format import fmt_against
from faithgate.result import GateResult
from faithgate.safety.escape import printable, printable_lines

# Characters XML 1.0 cannot hold at all, not even as references: C0 controls other than tab,
# LF and CR, lone surrogates, and the noncharacters U+FFFE / U+FFFF. A summary may contain
# them (they are valid text); in the report they become visible escapes (``\\ufffe``).
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(text: object) -> str:
    """``text`` with every character XML 1.0 forbids shown as a backslash escape, and then,
    as in every other report, C1 controls (U+009B CSI), DEL and bidi controls (the "Trojan
    Source" characters), which XML holds but a JUnit viewer would act on
    (``printable_lines``)."""
    return printable_lines(_NOT_XML.sub(lambda m: f"\\u{ord(m.group()):04x}", str(text)))


def xml_attribute(text: object) -> str:
    """``xml_text`` for an XML attribute (a test case's name, a failure's message, a
    property): tab, LF and CR are shown as escapes too, since an XML parser reads each of them
    in an attribute as a space (ids "a\\nb" and "a b" would be one name)."""
    return printable(_NOT_XML.sub(lambda m: f"\\u{ord(m.group()):04x}", str(text)))


def _example_output(e) -> str:  # noqa: ANN001 - ExampleResult (kept light for TYPE_CHECKING)
    lines = [f"summary: {e.summary}"]
    for m, s in e.scores.items():
        shown, limit = fmt_against(s.value, s.threshold)
        thr = f" (threshold {limit})" if s.threshold is not None else ""
        val = shown if s.value is not None else f"unscorable: {s.error}"
        lines.append(f"{m}: {val}{thr}")
    ls = e.least_supported
    if ls is not None:
        lines.append(f"least supported sentence ({ls.metric} {ls.value:.3f}): {ls.text}")
    return xml_text("\n".join(lines))


def _full(value: float | None) -> str:
    """A property value in full (``shortest``); ``-`` when there is none."""
    return "-" if value is None else shortest(value)


def to_junit(result: GateResult) -> str:
    """JUnit XML text for ``result``."""
    props = {
        "faithgate.verdict": result.verdict,
        "faithgate.version": result.faithgate_version,
        "faithgate.pass_rate": _full(result.pass_rate),
    }
    for m, v in result.means().items():
        props[f"faithgate.mean.{m}"] = _full(v)
    for m, h in result.settings_hashes.items():
        props[f"faithgate.settings_hash.{m}"] = h
    props = {xml_attribute(k): xml_attribute(v) for k, v in props.items()}
    example_cases = []
    for e in result.outputs:
        tc = TestCase(
            xml_attribute(e.id), classname="faithgate.examples", stdout=_example_output(e)
        )
        if not e.passed:
            unscorable = any(not s.ok for s in e.scores.values())
            tc.add_failure_info(
                message=xml_attribute(e.message),
                output=_example_output(e),
                failure_type="unscorable" if unscorable else "unfaithful",
            )
        example_cases.append(tc)
    rule_cases = []
    for r in result.rules:
        tc = TestCase(
            xml_attribute(r.name),
            classname="faithgate.rules",
            stdout=xml_text(
                "value {}, limit {}: ".format(*fmt_against(r.value, r.limit)) + r.message
            ),
        )
        if not r.passed:
            tc.add_failure_info(
                message=xml_attribute(r.message), failure_type=xml_attribute(r.kind)
            )
        elif r.skipped:  # passed without being checked: CI must not show it green
            tc.add_skipped_info(message=xml_attribute(r.message))
        rule_cases.append(tc)
    suites = [
        TestSuite("faithgate.examples", example_cases, properties=props, timestamp=result.created),
        TestSuite("faithgate.rules", rule_cases, properties=props, timestamp=result.created),
    ]
    return to_xml_report_string(suites, prettyprint=True)
