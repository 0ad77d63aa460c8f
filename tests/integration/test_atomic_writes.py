"""Every file faithgate writes is replaced atomically.

A write that fails half way (an injected exception after part of the content is written, a
full disk, a file-size limit) must leave the previous file byte for byte intact and no
temporary file behind.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from faithgate.errors import InputError, WriteError
from faithgate.safety import atomic
from faithgate.safety.atomic import atomic_write_bytes, atomic_write_text, atomic_writer


class DiskFull(OSError):
    pass


@pytest.fixture
def failing_fsync(monkeypatch):
    """Every atomic write fails at its fsync, after the content went to the temporary file."""

    def boom(fd: int) -> None:
        raise DiskFull(28, "No space left on device")

    monkeypatch.setattr(atomic.os, "fsync", boom)


# The files written, not the scores, are under test: the command runs below register the exact
# test metric gate_fake (tests/gate_fakes.py: a summary's first word is its score), as the
# hostile-input suite does, where overlap imported spaCy and NLTK in each child (5 CPU s).
REGISTER_GATE_FAKE = (
    f"import sys; sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r}); "
    "import gate_fakes\n"
)


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


def test_exception_mid_write_keeps_the_old_file(tmp_path):
    target = tmp_path / "baseline.json"
    target.write_text("old content\n")
    with pytest.raises(RuntimeError), atomic_writer(target) as fh:
        fh.write("new half")
        raise RuntimeError("renderer crashed")
    assert target.read_text() == "old content\n"
    assert leftovers(tmp_path) == []


def test_disk_full_keeps_the_old_file(tmp_path, failing_fsync):
    target = tmp_path / "r.bin"
    target.write_bytes(b"\x00old")
    with pytest.raises(WriteError, match="No space left on device"):
        atomic_write_bytes(target, b"new" * 1000)
    assert target.read_bytes() == b"\x00old"
    assert leftovers(tmp_path) == []


def test_success_replaces_content_keeps_mode_and_symlink(tmp_path):
    real = tmp_path / "real.toml"
    real.write_text("a = 1\n")
    real.chmod(0o640)
    link = tmp_path / "link.toml"
    link.symlink_to(real)
    atomic_write_text(link, "a = 2\n")
    assert link.is_symlink(), "the user's symlink is kept"
    assert real.read_text() == "a = 2\n"
    assert (real.stat().st_mode & 0o777) == 0o640
    assert leftovers(tmp_path) == []


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux's /proc")
def test_reading_the_umask_never_clears_it(tmp_path, monkeypatch):
    # os.umask is read by setting it: for that instant another thread's new file would be
    # created world-writable. Where the kernel reports the umask, it is read, never set.
    calls = []
    real_umask = os.umask
    monkeypatch.setattr(atomic.os, "umask", lambda mask: calls.append(mask) or real_umask(mask))
    old = real_umask(0o027)
    try:
        assert atomic.current_umask() == 0o027
        atomic_write_text(tmp_path / "new.txt", "x")
        assert (tmp_path / "new.txt").stat().st_mode & 0o777 == 0o640
    finally:
        real_umask(old)
    assert calls == []


def test_a_process_name_that_is_not_ascii_does_not_make_the_umask_be_set(tmp_path, monkeypatch):
    # /proc/self/status's "Name:" line holds the process name's raw bytes (setproctitle, prctl,
    # a non-ASCII executable): read as ASCII text it raised, and the umask was read by setting
    # it to 0 for an instant, the race reading it from the kernel avoids.
    status = tmp_path / "status"
    status.write_bytes(b"Name:\tr\xc3\xa9sum\xc3\xa9-\xff-job\nUmask:\t0027\nState:\tR (running)\n")
    monkeypatch.setattr(atomic, "_PROC_STATUS", str(status))
    calls = []
    monkeypatch.setattr(atomic.os, "umask", lambda mask: calls.append(mask) or 0o022)
    assert atomic.current_umask() == 0o027
    assert calls == []


def test_new_file_and_parent_directories_are_created(tmp_path):
    target = tmp_path / "a" / "b" / "report.md"
    atomic_write_text(target, "x")
    assert target.read_text() == "x"


def test_calibration_failure_keeps_pyproject(tmp_path, failing_fsync):
    from faithgate.evaluation.calibrate import Calibration, write_calibration

    pyproject = tmp_path / "pyproject.toml"
    original = '[project]\nname = "x"\n\n[tool.ruff]\nline-length = 99\n'
    pyproject.write_text(original)
    cal = Calibration("overlap", 0.5, (0.4, 0.6), "balanced_accuracy", 0.8, 0.7, 0.6, 10, 5, 5)
    with pytest.raises(InputError, match="left unchanged"):
        write_calibration(pyproject, cal)
    assert pyproject.read_text() == original


def test_report_and_jsonl_failures_keep_old_files(tmp_path, failing_fsync):
    from faithgate.config import Reports
    from faithgate.gate import GateResult
    from faithgate.io import write_jsonl
    from faithgate.report import write_reports

    result = GateResult(True, ["m"], {"m": "h"}, {}, [], [])
    md = tmp_path / "report.md"
    md.write_text("previous report")
    with pytest.raises(InputError, match="cannot write the markdown report"):
        write_reports(result, Reports(markdown=md))
    assert md.read_text() == "previous report"

    with pytest.raises(InputError, match="left unchanged"):
        result.save(tmp_path / "baseline.json")
    assert not (tmp_path / "baseline.json").exists()

    data = tmp_path / "data.jsonl"
    data.write_text('{"id": 1}\n')
    with pytest.raises(WriteError, match="No space left on device"):
        write_jsonl([{"id": 2}], data)
    assert data.read_text() == '{"id": 1}\n'
    assert leftovers(tmp_path) == []


def test_a_set_of_reports_is_written_whole_or_not_at_all(tmp_path, monkeypatch):
    """Reports were written one by one: the html write failing (a full disk on the largest)
    left the junit and markdown of this run, saying PASS, beside an exit 2."""
    from faithgate.config import Reports
    from faithgate.gate import GateResult
    from faithgate.report import write_reports

    result = GateResult(True, ["m"], {"m": "h"}, {}, [], [])
    paths = {kind: tmp_path / f"r.{kind}" for kind in ("junit", "markdown", "html")}
    for path in paths.values():
        path.write_text("previous run")
    real_fsync = atomic.os.fsync
    calls = []

    def fsync_fails_third_time(fd: int) -> None:
        calls.append(fd)
        if len(calls) == 3:
            raise DiskFull(28, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(atomic.os, "fsync", fsync_fails_third_time)
    with pytest.raises(InputError, match=r"cannot write the html report .*no report was written"):
        write_reports(result, Reports(**paths))
    assert {p.read_text() for p in paths.values()} == {"previous run"}
    assert leftovers(tmp_path) == []
    monkeypatch.setattr(atomic.os, "fsync", real_fsync)
    assert write_reports(result, Reports(**paths)) == paths
    assert "previous run" not in {p.read_text() for p in paths.values()}


@pytest.mark.parametrize("links", [True, False], ids=["put-back", "no-hard-links"])
def test_a_rename_failing_part_way_puts_back_the_reports_already_renamed(
    tmp_path, monkeypatch, links
):
    """The renames were not all or nothing: the html rename failing (another user's file in a
    sticky directory) left this run's junit and a new markdown beside the last run's html,
    under "no report was written". Now those are put back; where they cannot be (no hard
    links to keep them aside), the message names them."""
    import errno

    from faithgate.config import Reports
    from faithgate.gate import GateResult
    from faithgate.report import write_reports

    result = GateResult(True, ["m"], {"m": "h"}, {}, [], [])
    paths = {kind: tmp_path / f"r.{kind}" for kind in ("junit", "markdown", "html")}
    paths["junit"].write_text("previous junit")
    paths["html"].write_text("previous html")  # no markdown yet: a new file is removed again
    real_replace = atomic.os.replace

    def replace(src, dst):
        if str(dst).endswith("r.html") and str(src).endswith(".tmp"):
            raise PermissionError(errno.EPERM, "Operation not permitted")
        return real_replace(src, dst)

    def no_link(src, dst):
        raise PermissionError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(atomic.os, "replace", replace)
    if not links:
        monkeypatch.setattr(atomic.os, "link", no_link)
    with pytest.raises(InputError) as err:
        write_reports(result, Reports(**paths))
    message = str(err.value)
    assert message.startswith(f"cannot write the html report to {paths['html']}: Operation not")
    assert paths["html"].read_text() == "previous html"
    if links:
        assert message.endswith("; no report was written")
        assert paths["junit"].read_text() == "previous junit"
        assert not paths["markdown"].exists()
    else:
        # The new markdown is removed all the same; the junit had no copy kept aside.
        assert message.endswith(
            f"; only {paths['junit']} replaced (could not be put back), the rest left unchanged"
        )
        assert "previous" not in paths["junit"].read_text()
        assert not paths["markdown"].exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.html", "r.junit"]  # nothing else


def test_onnx_manifest_save_is_atomic(tmp_path, failing_fsync):
    from faithgate.backends.export import MANIFEST_NAME, ExportManifest

    (tmp_path / MANIFEST_NAME).write_text('{"old": true}\n')
    manifest = ExportManifest.__new__(ExportManifest)
    manifest.to_dict = lambda: {"new": True}  # type: ignore[method-assign]
    with pytest.raises(WriteError, match="No space left on device"):
        ExportManifest.save(manifest, tmp_path)
    assert json.loads((tmp_path / MANIFEST_NAME).read_text()) == {"old": True}


def _limited(size: int):
    def apply() -> None:  # runs in the child before exec: cap the size of any written file
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))

    return apply


@pytest.mark.skipif(not hasattr(resource, "RLIMIT_FSIZE"), reason="needs RLIMIT_FSIZE")
def test_update_baseline_under_a_file_size_limit_keeps_the_old_baseline(tmp_path):
    """The reported case: a full disk during ``check --update-baseline`` truncated the
    baseline. With a file-size cap below the new baseline's size the old one must survive and
    the command must say so in one line (exit 2)."""
    rows = [
        {"id": f"e{i}", "source": "The cat sat on the mat in the sun.", "summary": "0.9 The cat."}
        for i in range(40)
    ]
    (tmp_path / "outputs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    old = json.dumps({"metrics": ["gate_fake"], "examples": []}) + "\n"
    baseline = tmp_path / "baseline.json"
    baseline.write_text(old)
    script = REGISTER_GATE_FAKE + textwrap.dedent(
        """
        import sys
        from faithgate.cli import main
        sys.exit(main())
        """
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            script,
            "check",
            "--outputs",
            "outputs.jsonl",
            "--metric",
            "gate_fake",
            "--baseline",
            "baseline.json",
            "--update-baseline",
            "--force",  # the old baseline has no examples: record this run anyway
            "--no-cache",
            "-q",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        preexec_fn=_limited(4096),
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr
    assert baseline.read_text() == old
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "left unchanged" in proc.stderr and "Traceback" not in proc.stderr
    assert leftovers(tmp_path) == []


SMALL_FILES = textwrap.dedent(
    """
    import json, sys
    from faithgate.safety.atomic import atomic_write_bytes, atomic_write_files, atomic_write_text
    from faithgate.result import GateResult

    result = GateResult(True, ["m"], {"m": "h"}, {}, [], [], input="x" * 3000)
    writes = {
        "text": lambda: atomic_write_text("text.txt", "x" * 3000),
        "bytes": lambda: atomic_write_bytes("bytes.bin", b"x" * 3000),
        "files": lambda: atomic_write_files([("a.md", "x" * 10), ("b.md", "x" * 3000)]),
        "save": lambda: result.save("base.json"),
    }
    raised = {}
    for name, write in writes.items():
        try:
            write()
            raised[name] = None
        except Exception as exc:
            raised[name] = [type(exc).__name__, str(exc)]
    print(json.dumps(raised))
    """
)


@pytest.mark.skipif(not hasattr(resource, "RLIMIT_FSIZE"), reason="needs RLIMIT_FSIZE")
def test_a_size_limit_on_a_small_file_is_a_write_error(tmp_path):
    """A file under the 8 KiB write buffer fails at its last flush, in close(), which was
    outside the error conversion: a bare OSError (\"internal error\", exit 1), not WriteError."""
    names = ["text.txt", "bytes.bin", "a.md", "b.md", "base.json"]
    for name in names:
        (tmp_path / name).write_text(f"old {name}\n")
    proc = subprocess.run(
        [sys.executable, "-c", SMALL_FILES],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        preexec_fn=_limited(1000),  # a real EFBIG, as from a full disk
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    raised = json.loads(proc.stdout)
    for name, (kind, message) in raised.items():
        assert kind == "WriteError", (name, message)
        assert "(left unchanged): File too large" in message
    for name in names:
        assert (tmp_path / name).read_text() == f"old {name}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names)  # no temporary file


LIMIT_AT_FIRST_WRITE = textwrap.dedent(
    """
    import resource, sys
    from faithgate.safety import atomic
    from faithgate.cli import main

    real = atomic._open_temporary

    def full_from_here(path):  # the disk fills up once scoring is done
        resource.setrlimit(resource.RLIMIT_FSIZE, (200, 200))
        return real(path)

    atomic._open_temporary = full_from_here
    sys.exit(main())
    """
)


@pytest.mark.skipif(not hasattr(resource, "RLIMIT_FSIZE"), reason="needs RLIMIT_FSIZE")
@pytest.mark.parametrize("report", [False, True], ids=["last-result", "markdown"])
def test_a_full_disk_after_scoring_keeps_the_verdict(tmp_path, report):
    """The last-result.json of a passing run failing on a full disk is a warning (exit 0), and
    a report failing is one line and exit 2 beside the verdict: both were "internal error",
    exit 1, for a file under 8 KiB, and the previous run's last-result.json stayed behind."""
    row = {"id": "a", "source": "The cat sat on the mat.", "summary": "0.9 The cat sat."}
    (tmp_path / "o.jsonl").write_text(json.dumps(row) + "\n")
    last = tmp_path / ".faithgate" / "last-result.json"
    last.parent.mkdir()
    last.write_text('{"schema": 1, "verdict": "pass"}\n')  # the previous run's result
    (tmp_path / "r.md").write_text("previous report\n")
    args = ["check", "--outputs", "o.jsonl", "--metric", "gate_fake", "--threshold", "0.5"]
    args += ["--no-cache", "--markdown", "r.md"] if report else []
    proc = subprocess.run(
        [sys.executable, "-c", REGISTER_GATE_FAKE + LIMIT_AT_FIRST_WRITE, *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        timeout=300,
    )
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    assert "PASS" in proc.stdout
    if report:
        assert proc.returncode == 2, proc.stderr
        [line] = proc.stderr.splitlines()
        assert line.startswith("faithgate: cannot write the markdown report to ")
        assert line.endswith("r.md: File too large; no report was written")
        assert (tmp_path / "r.md").read_text() == "previous report\n"
    else:
        assert proc.returncode == 0, proc.stderr
        assert "last-result.json: File too large; the previous run's file there is removed" in (
            proc.stderr
        )
        assert not last.exists()
    assert leftovers(tmp_path) == [] and leftovers(last.parent) == []


needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs mkfifo")


@needs_fifo
def test_a_fifo_is_never_replaced_by_an_atomic_write(tmp_path):
    """The temporary file was renamed over whatever the path named: a FIFO (or, as root,
    a device such as /dev/null) was replaced by a regular file."""
    import stat

    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    with pytest.raises(WriteError, match="not a regular file"):
        atomic_write_text(fifo, "new")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert leftovers(tmp_path) == []


CHECK = ["check", "--outputs", "o.jsonl", "--metric", "overlap", "--threshold", "0.5"]


@needs_fifo
@pytest.mark.parametrize(
    "args",
    [
        [*CHECK, "--no-cache", "--json", "out.fifo"],
        [*CHECK, "--no-cache", "--junit", "out.fifo"],
        ["bench", "--data", "o.jsonl", "--metric", "overlap", "--no-cache", "--output", "out.fifo"],
        ["perturb", "--input", "o.jsonl", "--output", "out.fifo"],
    ],
    ids=["check-json", "check-junit", "bench-output", "perturb-output"],
)
def test_a_fifo_report_path_is_refused_before_scoring(tmp_path, monkeypatch, args):
    """``--json``/``--junit``/``--output`` naming a FIFO (or a device: ``--json /dev/null`` as
    root) replaced it with a regular file, rc 0; without the right to do so, the write failed
    only after scoring."""
    import stat

    from click.testing import CliRunner

    from faithgate.cli import cli

    monkeypatch.chdir(tmp_path)
    row = {"id": "a", "source": "The cat sat on the mat.", "summary": "The cat sat.", "label": 1}
    (tmp_path / "o.jsonl").write_text(json.dumps(row) + "\n")
    os.mkfifo(tmp_path / "out.fifo")
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 2, res.output
    assert "out.fifo) is a named pipe (FIFO), not a regular file" in res.stderr
    assert "PASS" not in res.output and "FAIL" not in res.output  # refused before scoring
    assert stat.S_ISFIFO(os.stat(tmp_path / "out.fifo").st_mode)


def test_a_previous_file_that_cannot_be_put_back_is_kept_and_named(tmp_path, monkeypatch):
    """When a put-back failed too, the kept hard link (the only copy of the previous file)
    was deleted with the others, while the message said only "could not be put back"."""
    import errno

    from faithgate.safety.atomic import atomic_write_files

    first, second = tmp_path / "a.txt", tmp_path / "c.txt"
    first.write_text("previous a")
    second.write_text("previous c")
    real_replace = atomic.os.replace

    def replace(src, dst):
        # The second file's rename fails, and so does putting the first one back.
        if str(dst) == str(second) or str(src).endswith(".old"):
            raise PermissionError(errno.EPERM, "Operation not permitted")
        return real_replace(src, dst)

    monkeypatch.setattr(atomic.os, "replace", replace)
    with pytest.raises(InputError) as err:
        atomic_write_files([(first, "new a"), (second, "new c")])
    kept = [p for p in tmp_path.iterdir() if p.name.startswith(".a.txt.")]
    assert len(kept) == 1 and kept[0].read_text() == "previous a"
    assert f"{first} (previous file kept as {kept[0]})" in str(err.value)
    assert first.read_text() == "new a" and second.read_text() == "previous c"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".c.txt.")]
