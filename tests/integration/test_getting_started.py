"""docs/getting-started.md: every command of the walkthrough runs and exits as the page says.

The commands run in a fresh directory, in order, as a new user would type them (their output
is pasted in the page from a real run by ``python tests/walkthrough.py --write``). Slow: the
CLI loads the embedding model in each ``faithgate`` command (about two minutes on 2 cores).
"""

from __future__ import annotations

import pytest
from walkthrough import DOC, environment, parse, run


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
    for command in parse(DOC.read_text(encoding="utf-8").split("\n")):
        rc, output, _, cwd = run(command, cwd, env)
        assert rc == command.expected, f"$ {command.text}\n{output[-3000:]}"
