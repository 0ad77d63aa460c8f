"""Hostile inputs through the real command line (a process per case, ``cases.CASES``).

For every case: the exit code is one the documentation promises for it (0, 1 or 2), standard
error holds exactly one line for an error (at most one otherwise: a warning), there is no
traceback and no "internal error", and every file that existed before is unchanged unless
changing it is the command's purpose. Cases that print example ids also have their stdout read
by a GitHub workflow-command parser: it must find no command.

Each case runs in a process of its own: a fork of one driver that imported the CLI once
(``tests/forked_cli.py``), not a cold start. The file took 53 CPU s with a cold start per
case and 36 s forked (one run each, ``pytest -n 0``). A child runs its exit handlers and
flushes its streams, as a process does at its end.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from cases import CASES, Case
from gh_commands import parse_output

HERE = Path(__file__).resolve().parent
FAKE_CLI = HERE / "fgcli.py"
DRIVER = HERE.parents[1] / "forked_cli.py"

# One worker runs every case, so the driver (the module's fixture) runs once under xdist.
pytestmark = pytest.mark.xdist_group("hostile")


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


@dataclass
class Run:
    """One case's run: its working directory, the files before it, its exit status and
    output."""

    cwd: Path
    before: dict[str, bytes]
    returncode: int
    stdout: bytes
    stderr: bytes


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    """Every case, each in a fork of the driver, in a directory of its own."""
    root = tmp_path_factory.mktemp("hostile")
    spec, befores = [], {}
    for i, case in enumerate(CASES):
        work, out = root / f"case{i}", root / f"out{i}"
        work.mkdir()
        out.mkdir()
        befores[case.name] = (work, out, _materialise(work, case))
        entry = {"argv": case.args, "out": str(out), "cwd": str(work)}
        if not case.real:
            entry["script"] = str(FAKE_CLI)
        spec.append(entry)
    (root / "cases.json").write_text(json.dumps(spec), encoding="utf-8")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONIOENCODING": "utf-8"}
    env["FORKED_CLI_PRELOAD"] = "faithgate.cli"  # most cases use no model: a small parent
    env.pop("GITHUB_ACTIONS", None)
    subprocess.run(
        [sys.executable, str(DRIVER), str(root / "cases.json")],
        env=env,
        stdin=subprocess.DEVNULL,
        check=True,
        timeout=900,
    )
    return {
        name: Run(
            work,
            before,
            int((out / "exit").read_text()),
            (out / "stdout").read_bytes(),
            (out / "stderr").read_bytes(),
        )
        for name, (work, out, before) in befores.items()
    }


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_hostile_input(runs: dict[str, Run], case: Case) -> None:
    proc = runs[case.name]
    before, tmp_path = proc.before, proc.cwd
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
