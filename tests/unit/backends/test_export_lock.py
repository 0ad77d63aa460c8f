"""The lock file beside an exported directory (``DIR.lock``, ``faithgate.safety.paths.owned_lock``):
made by faithgate with O_EXCL and deleted when done; a user's file of that name is refused
and left byte for byte as it was, never truncated, written or deleted. No model is loaded:
the lock is taken before anything heavy, so these tests take milliseconds. Also how the
finished directory takes its place (``models.publish_dir``): its mode, and an interrupt."""

from __future__ import annotations

import os
import stat
import tempfile
import threading
import time
from pathlib import Path

import pytest
from export_cli import export_cli, fake_model

from faithgate import models
from faithgate.errors import InputError, Interrupted
from faithgate.safety import paths


def test_export_refuses_a_users_out_lock_and_leaves_it_untouched(tmp_path):
    model = fake_model(tmp_path)
    out = tmp_path / "o\x1b[2J"  # printed escaped, like every path the CLI prints
    lock = tmp_path / "o\x1b[2J.lock"
    lock.write_text("my notes, not a lock\n")
    before = lock.stat()
    res = export_cli("nli", "--model", str(model), "--quantize", "none", "--out", str(out))
    assert res.exit_code == 2, res.output
    assert res.output.startswith("faithgate: the lock file ") and res.output.count("\n") == 1
    assert "not a faithgate lock" in res.output and "o\\x1b[2J.lock" in res.output
    assert "\x1b" not in res.output and "Traceback" not in res.output
    assert lock.read_text() == "my notes, not a lock\n"
    assert lock.stat().st_ino == before.st_ino and lock.stat().st_mtime_ns == before.st_mtime_ns
    assert not out.exists()
    # The library call refuses the same way, whatever the spec.
    spec = models.ModelSpec("nli", str(model), str(model), "path")
    with pytest.raises(InputError, match=r"o\\x1b\[2J\.lock exists and holds data"):
        from faithgate.backends.export import export_model

        export_model(spec, out=out, quantize="none")
    assert lock.read_text() == "my notes, not a lock\n"


@pytest.mark.parametrize("kind", ["symlink", "directory", "fifo"])
def test_a_lock_path_that_is_no_regular_file_is_refused(tmp_path, kind):
    lock = tmp_path / "out.lock"
    target = tmp_path / "precious.txt"
    target.write_text("keep\n")
    if kind == "symlink":
        lock.symlink_to(target)
    elif kind == "directory":
        lock.mkdir()
    else:
        os.mkfifo(lock)
    with (
        pytest.raises(InputError, match=r"out\.lock .*not a faithgate lock"),
        paths.owned_lock(lock),
    ):
        pass
    assert target.read_text() == "keep\n" and os.path.lexists(lock)


def test_a_faithgate_lock_is_made_exclusively_and_removed_when_done(tmp_path):
    lock = tmp_path / "out.lock"
    with paths.owned_lock(lock):
        assert lock.read_bytes() == paths.LOCK_MARKER
    assert not lock.exists()
    # One left by a run that was killed is faithgate's: used, then removed.
    lock.write_bytes(paths.LOCK_MARKER)
    with paths.owned_lock(lock):
        pass
    assert not lock.exists()
    # An empty file (what earlier versions left) is used as a lock, never written or deleted.
    lock.write_bytes(b"")
    with paths.owned_lock(lock):
        assert lock.read_bytes() == b""
    assert lock.read_bytes() == b""


def test_a_lock_is_held_by_one_holder_at_a_time(tmp_path):
    lock = tmp_path / "out.lock"
    events: list[str] = []

    def second() -> None:
        with paths.owned_lock(lock):
            events.append("second in")

    with paths.owned_lock(lock):
        waiter = threading.Thread(target=second)
        waiter.start()
        time.sleep(0.3)
        events.append("first out")
    waiter.join(10)
    assert events == ["first out", "second in"]
    assert not lock.exists()


# --- publish_dir: how an export (or a shipped model) takes its directory's place ---------------


def _new_dir(parent: Path, content: str) -> Path:
    tmp = Path(tempfile.mkdtemp(prefix="out.", dir=parent))  # 0700, as every publisher's
    (tmp / "file.txt").write_text(content)
    return tmp


@pytest.mark.parametrize("mask", [0o022, 0o077, 0o002])
def test_a_published_directory_has_the_umask_mode(tmp_path, mask):
    old = os.umask(mask)
    try:
        target = tmp_path / "out"
        for content in ("first", "second"):  # a new target, then one replaced
            new = _new_dir(tmp_path, content)
            (new / "sub").mkdir(mode=0o700)
            (new / "sub" / "weights.safetensors").touch(mode=0o600)  # as safetensors writes
            models.publish_dir(new, target)
            assert stat.S_IMODE(target.stat().st_mode) == 0o777 & ~mask
            assert stat.S_IMODE((target / "sub").stat().st_mode) == 0o777 & ~mask
            for name in ("file.txt", "sub/weights.safetensors"):
                assert stat.S_IMODE((target / name).stat().st_mode) == 0o666 & ~mask, name
            assert (target / "file.txt").read_text() == content
    finally:
        os.umask(old)


@pytest.mark.parametrize("interrupt", [Interrupted, KeyboardInterrupt, OSError])
@pytest.mark.parametrize("after", [False, True])
def test_an_interrupt_while_publishing_never_loses_the_target(
    tmp_path, monkeypatch, interrupt, after
):
    target = tmp_path / "out"
    models.publish_dir(_new_dir(tmp_path, "old"), target)
    new = _new_dir(tmp_path, "new")
    rename = Path.rename

    def interrupted_rename(self: Path, dst: Path) -> Path:
        if self != new:
            return rename(self, dst)
        if after:  # the signal arrives once the new directory is in place
            rename(self, dst)
        raise interrupt()

    monkeypatch.setattr(Path, "rename", interrupted_rename)
    with pytest.raises(interrupt):
        models.publish_dir(new, target)
    # The old directory back (or the new one, complete), and nothing left beside it.
    assert (target / "file.txt").read_text() == ("new" if after else "old")
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == (["out"] if after else sorted(["out", new.name]))
