"""``faithgate train --out`` replaces an earlier output of its own only when the directory holds
nothing else (``models.refuse_foreign_dir``; the cases are in
tests/unit/backends/test_export_out_dir.py): a directory holding ``faithgate_training.json``
beside the user's files was replaced whole, deleting them."""

from __future__ import annotations

from click.testing import CliRunner

from faithgate import models
from faithgate.cli import cli


def test_an_earlier_output_with_a_file_of_the_users_is_refused(tmp_path, tiny_base, tiny_docs):
    out = tmp_path / "proj"
    (out / "src").mkdir(parents=True)
    (out / "faithgate_training.json").write_text("{}\n")
    (out / "app.py").write_text("print()\n")
    (out / "src" / "mod.py").write_text("x = 1\n")
    args = ["train", "--out", str(out), "--documents", str(tiny_docs)]
    args += ["--base-model", str(tiny_base), "--snli-pairs", "0", "--max-steps", "1"]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 2, res.output
    assert res.output.startswith(f"faithgate: --out {out} holds faithgate_training.json")
    assert "but also app.py (and 1 more)" in res.output and res.output.count("\n") == 1
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*")) == [
        "app.py",
        "faithgate_training.json",
        "src",
        "src/mod.py",
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["proj"]  # refused before any work


def test_what_training_writes_may_be_replaced(tmp_path, tiny_base):
    """The base model as ``save_pretrained`` wrote it (what a training run writes, with its
    manifest beside it) holds nothing a later run may not replace."""
    import shutil

    out = tmp_path / "out"
    shutil.copytree(tiny_base, out)
    (out / "faithgate_training.json").write_text("{}\n")
    assert models.foreign_entries(out, "faithgate_training.json") == []
