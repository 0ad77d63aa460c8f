"""Hostile inputs through the real command line (a subprocess per case, ``cases.CASES``).

For every case: the exit code is one the documentation promises for it (0, 1 or 2), standard
error holds exactly one line for an error (at most one otherwise: a warning), there is no
traceback and no "internal error", and every file that existed before is unchanged unless
changing it is the command's purpose. Cases that print example ids also have their stdout read
by a GitHub workflow-command parser: it must find no command.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cases import CASES, Case
from gh_commands import parse_output

HERE = Path(__file__).resolve().parent
FAKE_CLI = HERE / "fgcli.py"


def _materialise(root: Path, case: Case) -> dict[str, bytes]:
    for name, content in case.files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    for link, target in case.symlinks.items():
        (root / link).symlink_to(root / target)
    return _snapshot(root)


def _snapshot(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and not p.is_symlink()
    }


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_hostile_input(tmp_path: Path, case: Case) -> None:
    before = _materialise(tmp_path, case)
    command = [sys.executable, "-m", "faithgate"] if case.real else [sys.executable, str(FAKE_CLI)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONIOENCODING": "utf-8"}
    env.pop("GITHUB_ACTIONS", None)
    proc = subprocess.run(
        [*command, *case.args],
        cwd=tmp_path,
        capture_output=True,
        env=env,
        timeout=300,
    )
    out = proc.stdout.decode("utf-8", "replace")
    err = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode in case.codes, f"exit {proc.returncode}\n{err}{out[-2000:]}"
    lines = err.splitlines()
    assert len(lines) == 1 if proc.returncode == 2 else len(lines) <= 1, err
    assert "Traceback" not in err + out
    assert "internal error" not in err
    if case.stderr_has is not None:
        assert case.stderr_has in err, err
    if case.no_commands:
        assert parse_output(out) == [], out
        assert parse_output(err) == [], err
        assert "\x1b" not in out + err
    after = _snapshot(tmp_path)
    changed = sorted(
        name
        for name, data in before.items()
        if name not in case.changes and after.get(name) != data
    )
    assert changed == [], f"pre-existing files changed: {changed}"


def test_the_corpus_is_large_and_covers_every_exit_code() -> None:
    assert len(CASES) >= 40
    assert len({c.name for c in CASES}) == len(CASES)
    codes = {code for c in CASES for code in c.codes}
    assert codes == {0, 1, 2}
