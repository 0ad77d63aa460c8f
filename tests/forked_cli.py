"""Run several ``python -m faithgate`` command lines in one interpreter, each in a fork of it.

For tests that need a process of the CLI's own (what reaches the stderr file descriptor,
the exit status) but not a cold start each: the driver imports faithgate, torch and
transformers once, then forks one child per command line. Each child starts from that same
state, none from another's (a logging level or a loaded model set by one run cannot hide
what the next would print), and runs the console entry point with its stdin, stdout and
stderr on files. A cold start cost 7-9 CPU s on the test machine, mostly these imports.

Usage: ``python forked_cli.py CASES.json``, where the file holds a list of
``{"argv": [...], "stdin": "...", "out": DIR}``; each child's ``stdout`` and ``stderr`` and
its exit status (``exit``; negative: the signal that ended it) land in its ``out`` directory.
Optional keys: ``cwd`` (the child's working directory) and ``script`` (a file run as
``__main__`` instead of ``faithgate.cli.main``, e.g. a CLI with a test metric registered).
A child ends as an interpreter does: its exit handlers run and its streams are flushed.
"""

from __future__ import annotations

import atexit
import importlib
import json
import os
import runpy
import sys
import traceback
from pathlib import Path


def _child(case: dict) -> None:
    """Run one command line in this (forked) process, then end it; never returns."""
    out = Path(case["out"])
    stdin = out / "stdin"
    stdin.write_text(case.get("stdin", ""), encoding="utf-8")
    write = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    for fd, path, flags in (
        (0, stdin, os.O_RDONLY),
        (1, out / "stdout", write),
        (2, out / "stderr", write),
    ):
        os.dup2(os.open(path, flags, 0o644), fd)
    if "cwd" in case:
        os.chdir(case["cwd"])
    code: object = 0
    try:
        if "script" in case:
            sys.argv = [case["script"], *case["argv"]]
            runpy.run_path(case["script"], run_name="__main__")
        else:
            from faithgate.cli import main

            sys.argv = ["faithgate", *case["argv"]]
            code = main(case["argv"])  # as faithgate/__main__.py does
    except SystemExit as exc:
        code = exc.code
    except BaseException:
        traceback.print_exc()  # as the interpreter does with an uncaught exception
        code = 1
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)  # as the interpreter does with sys.exit("message")
        code = 1
    # What runs at exit runs (atexit handlers, flushed streams), as at the end of a process
    # started cold; the interpreter's module teardown is skipped (seconds with torch loaded).
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code or 0)


PRELOAD = ("faithgate.cli", "torch", "transformers.models.auto.modeling_auto")


def main() -> None:
    cases = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    # faithgate first: it sets the thread pools' variables, which torch reads as it loads.
    # transformers' Auto* classes import its generation code and scikit-learn (2.4 s).
    # FORKED_CLI_PRELOAD (comma-separated) names other modules: a big process forks slower.
    preload = os.environ.get("FORKED_CLI_PRELOAD")
    modules = preload.split(",") if preload else PRELOAD
    for module in modules:
        importlib.import_module(module)

    sys.stdout.flush()
    sys.stderr.flush()
    for case in cases:
        pid = os.fork()
        if pid == 0:
            _child(case)
        _, status = os.waitpid(pid, 0)
        (Path(case["out"]) / "exit").write_text(str(os.waitstatus_to_exitcode(status)))


if __name__ == "__main__":
    main()
