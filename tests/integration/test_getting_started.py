"""docs/getting-started.md: every command of the walkthrough runs and exits as the page says.

The commands run in a fresh directory, in order, as a new user would type them (their output
is pasted in the page from a real run by ``python tests/walkthrough.py --write``, every command
a process). Here the one-line ``faithgate`` commands that score run the console script's entry
point, ``faithgate.cli.main``, in this process (each process imported torch, transformers and
spaCy again, about 4 CPU s); ``faithgate metrics`` runs the installed console script in bash
and ``pytest --faithgate`` a process of its own. Slow: each scoring command loads its models.
"""

from __future__ import annotations

import contextlib
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner
from walkthrough import DOC, Command, environment, parse, run

# Run by bash as typed: the console script on PATH, as a process, exit code included.
IN_A_SHELL = ("faithgate metrics",)
# Quotes are read as bash reads them (shlex); a command with any other shell syntax is bash's.
SHELL_SYNTAX = set("|&;<>()$`\\*?~{}[]#\n")


def run_in_process(command: Command, cwd: Path) -> tuple[int, str] | None:
    """Exit code and output of a plain ``faithgate ...`` command (no shell syntax) run through
    ``faithgate.cli.main`` in ``cwd``, as the console script's ``sys.exit(main())`` would
    exit; None for any other command (bash runs it)."""
    words = shlex.split(command.text) if not SHELL_SYNTAX & set(command.text) else []
    if command.text in IN_A_SHELL or words[:1] != ["faithgate"]:
        return None
    from faithgate.cli import main

    with contextlib.chdir(cwd), CliRunner().isolation() as (_, _, output):
        try:
            code = main(words[1:])
        except SystemExit as exc:
            code = exc.code
    # sys.exit's rule: None is 0, an int is itself, anything else is printed and 1.
    status = 0 if code is None else code if isinstance(code, int) else 1
    return status, output.getvalue().decode("utf-8", "replace")


def test_the_page_has_the_walkthrough_commands():
    commands = parse(DOC.read_text(encoding="utf-8").split("\n"))
    texts = [c.text.splitlines()[0] for c in commands]
    # the path a newcomer takes: spot check, configure, first run, baseline, a failing
    # release, a refused baseline update, pytest
    for needed in (
        "faithgate score --source article.txt",
        "cat > pyproject.toml <<'EOF'",
        "faithgate check",
        "faithgate check --update-baseline",
        "faithgate check --outputs outputs-v2.jsonl",
        "faithgate check --outputs outputs-v2.jsonl --update-baseline",
        "pytest --faithgate -p no:cacheprovider",
    ):
        assert any(t.startswith(needed) for t in texts), needed
    expected = {c.text.splitlines()[0]: c.expected for c in commands}
    assert expected["faithgate check"] == 0  # a first run without a baseline passes
    assert expected["faithgate check --outputs outputs-v2.jsonl"] == 1
    assert expected["faithgate check --outputs outputs-v2.jsonl --update-baseline"] == 1


def test_parse_reads_heredocs_continuations_and_exit_codes():
    page = [
        "```console",
        "$ cat > a.txt <<'EOF'",
        "$ not a command inside a here-document",
        "EOF",
        "$ false \\",
        "  --flag",
        "some output",
        "(exit code 1)",
        "```",
        "```bash",
        "$ not run: not a console block",
        "```",
    ]
    first, second = parse(page)
    assert first.text.endswith("EOF") and "not a command" in first.text and first.expected == 0
    assert second.text == "false \\\n  --flag" and second.expected == 1
    assert (second.output_start, second.output_end) == (6, 8)


@pytest.mark.slow
@pytest.mark.xdist_group("examples")
def test_walkthrough_commands_exit_as_documented(tmp_path):
    cwd, env = tmp_path, environment()
    commands = parse(DOC.read_text(encoding="utf-8").split("\n"))
    in_process = 0
    for command in commands:
        result = run_in_process(command, cwd)
        if result is None:
            rc, output, _, cwd = run(command, cwd, env)
        else:
            (rc, output), in_process = result, in_process + 1
        assert rc == command.expected, f"$ {command.text}\n{output[-3000:]}"
    # The installed console script ran as a process at least once, the scoring commands here.
    assert in_process and any(c.text in IN_A_SHELL for c in commands)


def test_only_plain_faithgate_commands_run_in_process(tmp_path):
    """Shell syntax, the console script's own run and other programs go to bash untouched."""
    for text in (
        "faithgate metrics",
        "faithgate check > out.txt",
        "faithgate check --outputs $FILE",
        "mkdir a && cd a",
        "pytest --faithgate -p no:cacheprovider",
        "cat > a.txt <<'EOF'\nfaithgate check\nEOF",
    ):
        assert run_in_process(Command(text, 0, 0, 0), tmp_path) is None, text
    assert not list(tmp_path.iterdir())
