"""`faithgate train`'s working directory (OUT.work: checkpoint, dataset, synthetic pairs):
written only when faithgate made it, resumed from when it did, and an earlier version's
checkpoint refused with a message that says what to do."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from tiny_models import tiny_train_config

from faithgate.errors import InputError


def _cli(out: Path, base: Path, docs: Path):
    from click.testing import CliRunner

    from faithgate.cli import cli

    args = ["train", "--out", str(out), "--documents", str(docs), "--base-model", str(base),
            "--snli-pairs", "0", "--max-steps", "1", "--dev-fraction", "0", "--threads", "1",
            "--max-length", "96"]  # fmt: skip  # the tiny base takes 128 positions
    return CliRunner().invoke(cli, args)


def _listing(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.iterdir())}


def test_an_out_work_the_user_made_is_refused_untouched(tmp_path, tiny_base, tiny_docs):
    from faithgate.training.train import train

    out = tmp_path / "m\x1b[2J"  # printed escaped, like every path the CLI prints
    work = tmp_path / "m\x1b[2J.work"
    work.mkdir()
    (work / "notes.txt").write_text("mine\n")
    before = _listing(work)
    with pytest.raises(InputError, match=r"m\\x1b\[2J\.work .*not made by faithgate train"):
        train(
            tiny_train_config(out, tiny_base, tiny_docs, max_steps=3), log=lambda _: None, threads=1
        )
    res = _cli(out, tiny_base, tiny_docs)
    assert res.exit_code == 2, res.output
    assert res.output.count("\n") == 1 and res.output.startswith("faithgate: ")
    assert "m\\x1b[2J.work" in res.output and "notes.txt" in res.output
    assert "\x1b" not in res.output and "Traceback" not in res.output
    assert _listing(work) == before and not out.exists()
    # A file where the directory would be is refused too (it was an internal error).
    (tmp_path / "f.work").write_text("mine\n")
    with pytest.raises(InputError, match=r"f\.work .*is a file, not a directory"):
        train(
            tiny_train_config(tmp_path / "f", tiny_base, tiny_docs, max_steps=3),
            log=lambda _: None,
            threads=1,
        )
    assert (tmp_path / "f.work").read_text() == "mine\n"


def test_a_work_directory_faithgate_made_is_resumed(tmp_path, tiny_base, tiny_docs):
    from faithgate.training.train import train
    from faithgate.training.workdir import WORK_MARKER

    class Stop(Exception):
        pass

    def stop_at_2(line: str) -> None:
        if line.startswith("step 2/"):
            raise Stop

    out = tmp_path / "r"
    with pytest.raises(Stop):
        train(
            tiny_train_config(out, tiny_base, tiny_docs, max_steps=3),
            log=stop_at_2,
            threads=1,
            log_every=1,
        )
    work = tmp_path / "r.work"
    assert (work / WORK_MARKER).is_file() and (work / "checkpoint.pt").is_file()
    lines: list[str] = []
    train(tiny_train_config(out, tiny_base, tiny_docs, max_steps=3), log=lines.append, threads=1)
    assert any(line.startswith("resumed at step 1/3") for line in lines), lines
    # One from before the marker (only the files a run writes there) is faithgate's too, and
    # so is one holding just a dataset file copied in to train on another machine.
    (work / WORK_MARKER).unlink()
    shutil.rmtree(out)
    dataset = next(work.glob("dataset-*.json.gz"))
    for name in [p.name for p in work.iterdir() if p != dataset]:
        (work / name).unlink()
    lines.clear()
    train(tiny_train_config(out, tiny_base, tiny_docs, max_steps=3), log=lines.append, threads=1)
    assert any(line.startswith("dataset: ") for line in lines)  # read back, not rebuilt
    assert (work / WORK_MARKER).is_file()


def test_an_earlier_versions_checkpoint_says_what_to_do(tmp_path, tiny_base, tiny_docs, torch):
    from faithgate.training.train import train

    out = tmp_path / "m\x1b[2J"
    work = tmp_path / "m\x1b[2J.work"
    work.mkdir()
    cfg = tiny_train_config(out, tiny_base, tiny_docs, max_steps=3)
    # As written before checkpoints recorded the dataset digest and the total step count.
    legacy = {"recipe_hash": cfg.recipe_hash(), "model": {}, "optimizer": {}, "scheduler": {},
              "step": 1, "history": [], "torch_rng": torch.get_rng_state()}  # fmt: skip
    torch.save(legacy, work / "checkpoint.pt")
    lines: list[str] = []
    with pytest.raises(InputError) as err:
        train(cfg, log=lines.append, threads=1)
    message = str(err.value)
    assert "\n" not in message and "earlier faithgate version" in message
    assert "damaged" not in message  # it is whole: only its data cannot be checked
    assert "remove it (or the whole work directory " in message and "to start afresh" in message
    assert message.endswith(f"{tmp_path}/m\\x1b[2J.work) to start afresh")
    assert not any(line.startswith("resumed") for line in lines)
    res = _cli(out, tiny_base, tiny_docs)
    assert res.exit_code == 2, res.output
    # The only line: "faithgate train: recipe ..." comes with the first progress line.
    (last,) = res.output.splitlines()
    assert last.startswith("faithgate: ") and "\x1b" not in res.output
    assert "earlier faithgate version" in last and "m\\x1b[2J.work) to start afresh" in last
    assert not out.exists() and (work / "checkpoint.pt").is_file()  # never resumed, never removed
