"""``faithgate convert``: published checker checkpoints into standard model directories."""

from __future__ import annotations

from pathlib import Path

import click

from faithgate.safety.escape import printable


def _log(message: str) -> None:
    click.echo(f"faithgate: {message}", err=True)


@click.group("convert")
def convert_command() -> None:
    """Convert a published checker (AlignScore, HHEM) into a directory faithgate loads
    (--model alignscore=DIR, --model hhem=DIR; then `faithgate export` for ONNX)."""


@convert_command.command("alignscore")
@click.argument("ckpt", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("dest", type=click.Path(path_type=Path))
@click.option(
    "--base",
    required=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Local RoBERTa directory it was trained from (config and tokenizer; roberta-large "
    "for AlignScore-large).",
)
@click.option(
    "--head",
    type=click.Choice(["nli", "bin"]),
    default="nli",
    show_default=True,
    help="nli: the three-way head (the reference's default, nli_sp); bin: the binary head.",
)
def convert_alignscore_command(ckpt: Path, dest: Path, base: Path, head: str) -> None:
    """Convert an AlignScore .ckpt (AlignScore-base/large) into DEST."""
    from faithgate.convert import convert_alignscore

    out = convert_alignscore(ckpt, base, dest, head=head, log=_log)
    click.echo(printable(out))


@convert_command.command("hhem")
@click.argument("source", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("dest", type=click.Path(path_type=Path))
@click.option(
    "--foundation",
    required=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Local Flan-T5 directory HHEM names (config and tokenizer; google/flan-t5-base).",
)
def convert_hhem_command(source: Path, dest: Path, foundation: Path) -> None:
    """Convert an HHEM-2.1-open directory (vectara/hallucination_evaluation_model) into DEST."""
    from faithgate.convert import convert_hhem

    out = convert_hhem(source, foundation, dest, log=_log)
    click.echo(printable(out))
