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
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import traceback
from pathlib import Path


def _child(case: dict) -> None:
    """Run one command line in this (forked) process; never returns."""
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
    code: object = 1
    try:
        from faithgate.cli import main

        sys.argv = ["faithgate", *case["argv"]]
        sys.exit(main(case["argv"]))  # as faithgate/__main__.py does
    except SystemExit as exc:
        code = exc.code
        if code is not None and not isinstance(code, int):
            print(code, file=sys.stderr)  # as the interpreter does with sys.exit("message")
            code = 1
    except BaseException:
        traceback.print_exc()  # as the interpreter does with an uncaught exception
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code or 0)


def main() -> None:
    cases = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    # faithgate first: it sets the thread pools' variables, which torch reads as it loads.
    # transformers' Auto* classes import its generation code and scikit-learn (2.4 s).
    for module in ("faithgate.cli", "torch", "transformers.models.auto.modeling_auto"):
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
