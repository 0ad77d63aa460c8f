"""Run the commands of ``docs/getting-started.md`` (its ``console`` blocks), in order.

The document's ``console`` blocks hold shell sessions: a line starting with ``$ `` is a
command (a ``<<'EOF'`` here-document runs on to its ``EOF`` line, a trailing ``\\`` continues
it), the lines after it are its output, and an output that ends with ``(exit code N)`` says the
command exits with N (0 otherwise). ``tests/integration/test_getting_started.py`` runs every command in a
fresh directory and checks the exit codes; run as a script, this module does the same and
rewrites each command's output in the document with what it printed (``--write``), printing
every command's wall time, so the pasted output is always a real run's::

    python tests/walkthrough.py --workdir /tmp/walk [--write]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "getting-started.md"
EXIT_LINE = re.compile(r"^\(exit code (\d+)\)$")
# Keep the document's lines readable: long output lines are kept whole (they are real), but
# control characters (a progress bar's carriage returns) never reach the Markdown.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


@dataclass
class Command:
    """One ``$`` command of a console block: its text, expected exit code and where its
    output sits in the document (line indices, end exclusive)."""

    text: str
    expected: int
    output_start: int
    output_end: int


def parse(lines: list[str]) -> list[Command]:
    """Commands of every ``console`` block, in document order."""
    commands: list[Command] = []
    i, in_block = 0, False
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            in_block = line.strip() == "```console" if not in_block else False
            i += 1
            continue
        if not in_block or not line.startswith("$ "):
            i += 1
            continue
        parts = [line[2:]]
        heredoc = "<<'EOF'" in line
        while parts[-1].endswith("\\") and not heredoc:
            i += 1
            parts.append(lines[i])
        if heredoc:
            while lines[i] != "EOF":
                i += 1
                parts.append(lines[i])
        i += 1
        start = i
        while i < len(lines) and not lines[i].startswith("$ ") and not lines[i].startswith("```"):
            i += 1
        output = [x for x in lines[start:i] if x.strip()]
        match = EXIT_LINE.match(output[-1]) if output else None
        commands.append(Command("\n".join(parts), int(match.group(1)) if match else 0, start, i))
    return commands


def run(command: Command, cwd: Path, env: dict[str, str]) -> tuple[int, str, float, Path]:
    """Run one command with bash in ``cwd``; returns (exit code, output, seconds, new cwd).

    Output is stdout then stderr, as a reader's terminal would show them for these commands
    (the CLI's stderr lines come after its report). The working directory carries over from
    one command to the next (``cd``), as in a shell session."""
    marker = "__WALKTHROUGH_CWD__"
    script = f"{command.text}\nrc=$?\necho; echo {marker}$(pwd)\nexit $rc\n"
    start = time.perf_counter()
    proc = subprocess.run(
        ["bash", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=900
    )
    seconds = time.perf_counter() - start
    out, _, tail = proc.stdout.rpartition(marker)
    new_cwd = Path(tail.strip()) if tail.strip() else cwd
    text = (out.rstrip("\n") + "\n" + proc.stderr).strip("\n")
    return proc.returncode, _CONTROL.sub("", text), seconds, new_cwd


def environment() -> dict[str, str]:
    """The reader's environment, with the thread count the measurements were taken with."""
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    env.pop("PYTEST_ADDOPTS", None)
    env.pop("PYTEST_XDIST_WORKER", None)
    return env


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", required=True, help="an empty directory to run in")
    ap.add_argument("--write", action="store_true", help="paste the outputs into the document")
    args = ap.parse_args()
    cwd = Path(args.workdir).resolve()
    cwd.mkdir(parents=True, exist_ok=True)
    lines = DOC.read_text(encoding="utf-8").split("\n")
    commands = parse(lines)
    env = environment()
    results = []
    failed = 0
    for cmd in commands:
        rc, output, seconds, cwd = run(cmd, cwd, env)
        results.append((cmd, rc, output))
        status = "ok" if rc == cmd.expected else f"EXPECTED {cmd.expected}"
        failed += rc != cmd.expected
        first = cmd.text.splitlines()[0]
        print(f"{seconds:7.1f} s  exit {rc}  {status:<11}  $ {first}")
    if args.write:
        # From the end, so earlier line indices stay valid.
        for cmd, rc, output in reversed(results):
            new = output.split("\n") if output else []
            if rc:
                new.append(f"(exit code {rc})")
            lines[cmd.output_start : cmd.output_end] = new
        DOC.write_text("\n".join(lines), encoding="utf-8")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
