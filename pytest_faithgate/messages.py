"""The library's messages as the plugin prints them: one escaped line, in pytest's words.

The library names the ``faithgate`` command's flags (``--force``, ``--threshold``,
``--cache-dir`` ...), which do not exist under pytest: ``plugin_text`` rewrites them to the
plugin's options, ``plugin_line`` also makes the text one safe line (``faithgate.safety.escape``).
"""

from __future__ import annotations

import re

import pytest

from faithgate.safety.escape import safe_line

# The faithgate command's flag (as library messages name it) -> the plugin's option.
_FLAGS = {
    "threshold NAME=X": "--faithgate-threshold X",
    "threshold": "--faithgate-threshold",
    "metric": "--faithgate-metric",
    "min-pass-rate": "--faithgate-min-pass-rate",
    "baseline": "--faithgate-baseline",
    "update-baseline": "--faithgate-update-baseline",
    "force": "--faithgate-force-baseline",
    "backend": "--faithgate-backend",
    "executor": "--faithgate-executor",
    "cache-dir": "--faithgate-cache FILE",
    "no-cache": "--faithgate-no-cache",
    "junit": "--faithgate-junit",
    "markdown": "--faithgate-markdown",
    "json": "--faithgate-json",
    "html": "--faithgate-html",
}
# Longest first, so "--threshold NAME=X" wins over "--threshold".
_FLAG = re.compile(
    r"(?<![\w-])--("
    + "|".join(re.escape(f) for f in sorted(_FLAGS, key=len, reverse=True))
    + r")(?![\w-])"
)


# Whole phrases naming flags the plugin has no equivalent of -> what to do under pytest.
_PHRASES = {
    "faithgate check --update-baseline": "pytest --faithgate --faithgate-update-baseline",
    # "nothing to gate" (``Gate.load_examples``): the plugin has no --outputs / --data.
    "or pass --outputs / --summarizer and --data": "or name such a configuration with "
    "--faithgate-config",
}


def plugin_text(text: object) -> str:
    """``text`` with the ``faithgate`` command's flags replaced by the plugin's options."""
    out = str(text)
    for phrase, replacement in _PHRASES.items():
        out = out.replace(phrase, replacement)
    return _FLAG.sub(lambda m: _FLAGS[m.group(1)], out)


def plugin_line(text: object) -> str:
    """``plugin_text`` made one line that is safe to print (``safe_line``)."""
    return safe_line(plugin_text(text))


def skip_exceptions() -> tuple[type[BaseException], ...]:
    """What pytest turns into a skipped or xfailed test: ``pytest.skip`` / ``importorskip``,
    ``pytest.xfail`` and ``unittest.SkipTest``. Raised by a summarizer or a metric while
    faithgate scores, it must fail the gate or the check: one that cannot score fails."""
    import unittest

    return (pytest.skip.Exception, pytest.xfail.Exception, unittest.SkipTest)


def skip_message(what: str, exc: BaseException, check: str) -> str:
    """The one-line failure of ``check`` ("gate", "check") for a skip raised by ``what``."""
    kind = "xfail" if isinstance(exc, pytest.xfail.Exception) else "skip"
    reason = getattr(exc, "msg", None) or str(exc) or type(exc).__name__
    return safe_line(
        f"faithgate: {what} tried to {kind} the {check} ({reason}); a {check} that cannot score "
        "fails"
    )
