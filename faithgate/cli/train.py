"""``faithgate train``: train the NLI checker (``nli`` role) from offline data.

A thin layer over ``faithgate.training.train``: parses options into a ``TrainConfig`` and
reports progress on stderr. Rerunning the same command resumes from its last checkpoint.
"""

from __future__ import annotations

import click

from faithgate.cli.params import FiniteFloatRange
from faithgate.perturb import RULES
from faithgate.safety.escape import safe_line
from faithgate.training.recipe import BUILTIN_CORPORA, TrainConfig
from faithgate.training.synth import SynthConfig


@click.command("train")
@click.option(
    "--out",
    "output",
    required=True,
    type=click.Path(file_okay=False),
    help="Directory of the trained model (a transformers directory; checkpoints go to "
    "OUT.work/). An existing OUT must be empty or an earlier faithgate train output (it holds "
    "faithgate_training.json), which is replaced as a whole; an existing OUT.work must be "
    "empty or made by faithgate train (it holds faithgate_work.json), whose checkpoint is "
    "resumed. OUT.work.lock, beside it, is held while the run lasts: a second run on the same "
    "OUT waits for the first, then resumes.",
)
@click.option(
    "--documents",
    multiple=True,
    help=f"Unlabelled documents for synthetic pairs: {', '.join(BUILTIN_CORPORA)} (built in) or a JSONL file with a 'source' field (a file, not '-': each is read twice "
    "and its SHA-256 recorded). Repeatable, each once; default: the built-in corpora. The "
    "edit rules are English-only: a document that does not read as English is left out, "
    "with a warning (none left: exit 2).",
)
@click.option(
    "--labelled",
    multiple=True,
    type=click.Path(dir_okay=False),
    help="Optional labelled summaries: JSONL with source, summary, label (1 faithful / 0 not), "
    "as faithgate bench reads; turned into sentence-level pairs against retrieved evidence. "
    "Repeatable, each file once. A --documents text that is also the source of a held-out "
    "labelled item is left out of the synthetic training pairs.",
)
@click.option(
    "--labelled-dev-fraction",
    default=TrainConfig.labelled_dev_fraction,
    show_default=True,
    type=FiniteFloatRange(0, 0.9),
    help="Share of the labelled files' source documents held out for evaluation.",
)
@click.option(
    "--max-synthetic-pairs",
    default=None,
    type=click.IntRange(min=1),
    help="Keep at most this many synthetic training pairs (a seeded sample).",
)
@click.option(
    "--init-from",
    default=None,
    type=click.Path(file_okay=False, exists=True),
    help="Continue from a trained checker directory (e.g. an earlier faithgate train --out).",
)
@click.option(
    "--snli-pairs",
    default=20000,
    show_default=True,
    type=click.IntRange(min=0),
    help="SNLI training pairs mixed in (0: none).",
)
@click.option(
    "--base-model",
    default=TrainConfig.base_model,
    show_default=True,
    help="Encoder to start from (hub id or local directory).",
)
@click.option("--epochs", default=1, show_default=True, type=click.IntRange(min=1))
@click.option(
    "--max-steps",
    default=None,
    type=click.IntRange(min=1),
    help="Stop after this many optimiser steps (the learning-rate schedule ends there).",
)
@click.option("--batch-size", default=32, show_default=True, type=click.IntRange(min=1))
@click.option(
    "--max-length",
    default=256,
    show_default=True,
    type=click.IntRange(min=16),
    help="Tokens per pair; a long premise is cut. A pair whose hypothesis alone leaves no "
    "room for the premise (e.g. a long unfaithful --labelled summary) is skipped, counted in "
    "the log and the manifest.",
)
@click.option(
    "--lr",
    "learning_rate",
    default=6e-5,
    show_default=True,
    type=FiniteFloatRange(min=0, min_open=True),
)
@click.option("--claims-per-document", default=12, show_default=True, type=click.IntRange(min=1))
@click.option(
    "--paraphrase-probability",
    default=SynthConfig.paraphrase_probability,
    show_default=True,
    type=FiniteFloatRange(0, 1),
    help="Share of synthetic claims that also get a meaning-preserving rewrite (pronoun "
    "resolved, names shortened, numbers, reporting tense, attribution dropped, sentences "
    "fused) as a supported pair, and an edit of it as an unsupported one (measured: no gain "
    "for the shipped checker; docs/models/checker.md).",
)
@click.option(
    "--perturb-rules",
    default=SynthConfig.perturb_rules,
    show_default=True,
    type=click.IntRange(1, RULES),
    help="Revision of faithgate perturb's edit rules that makes the contradiction pairs: 1 "
    "reproduces the shipped checker's pairs, including edits a review found still true or "
    'unreadable ("More than 200 people" -> "More than 120 people", labelled '
    f"contradiction); 2 skips those, {RULES} also swaps verbs only within their class "
    "(perturb's own default). A recipe setting: other than 1 is a new recipe hash.",
)
@click.option(
    "--synthesis",
    default=SynthConfig.synthesis,
    show_default=True,
    type=click.IntRange(1, 2),
    help="Revision of the synthetic-pair rules: 2 keeps conditions and restrictive clauses in "
    "compressed claims, never labels unsupported what the premise states, and holds out "
    "copies of one text and chunks of one article together; 1 reproduces the shipped "
    "checker's data (onnx_models/build_checker.sh).",
)
@click.option("--dev-fraction", default=0.05, show_default=True, type=FiniteFloatRange(0, 0.5))
@click.option("--checkpoint-every", default=100, show_default=True, type=click.IntRange(min=1))
@click.option(
    "--seed",
    default=0,
    show_default=True,
    type=click.IntRange(0, 2**32 - 1),  # numpy's seed range: anything else fails mid-run
)
@click.option(
    "--init-precision",
    default="float32",
    show_default=True,
    type=click.Choice(["float32", "float16"]),
    help="float16: round the base's trained tensors to float16 before training (a recipe "
    "setting: the base can then travel in half the bytes, e.g. to a GPU machine).",
)
@click.option(
    "--device",
    default="cpu",
    show_default=True,
    help="Where torch trains: cpu, cuda or cuda:N (recorded in the manifest, not the recipe).",
)
@click.option(
    "--threads",
    default=None,
    type=click.IntRange(min=1),
    help="torch CPU threads (default: torch's choice). Not part of the recipe, but the weights "
    "are bit-identical only for the same thread count and device: both are recorded in the "
    "checkpoint and manifest, and a resume on others says so.",
)
def train_command(
    output: str,
    documents: tuple[str, ...],
    labelled: tuple[str, ...],
    labelled_dev_fraction: float,
    max_synthetic_pairs: int | None,
    init_from: str | None,
    snli_pairs: int,
    base_model: str,
    epochs: int,
    max_steps: int | None,
    batch_size: int,
    max_length: int,
    learning_rate: float,
    claims_per_document: int,
    paraphrase_probability: float,
    perturb_rules: int,
    synthesis: int,
    dev_fraction: float,
    checkpoint_every: int,
    seed: int,
    init_precision: str,
    device: str,
    threads: int | None,
) -> None:
    """Train an NLI cross-encoder checker: SNLI + synthetic pairs from documents (+ labels)."""
    from faithgate.training.dataset import refuse_repeated_files
    from faithgate.training.train import train
    from faithgate.training.workdir import check_output

    config = TrainConfig(
        output=output,
        base_model=base_model,
        documents=list(documents) or list(BUILTIN_CORPORA),
        labelled=list(labelled),
        labelled_dev_fraction=labelled_dev_fraction,
        max_synthetic_pairs=max_synthetic_pairs,
        init_from=init_from,
        snli_pairs=snli_pairs,
        synth=SynthConfig(
            claims_per_document=claims_per_document,
            seed=seed,
            paraphrase_probability=paraphrase_probability,
            perturb_rules=perturb_rules,
            synthesis=synthesis,
        ),
        dev_fraction=dev_fraction,
        epochs=epochs,
        batch_size=batch_size,
        max_length=max_length,
        learning_rate=learning_rate,
        max_steps=max_steps,
        checkpoint_every=checkpoint_every,
        seed=seed,
        init_precision=init_precision,
    )
    # A refused --out, or file named twice, is the only line printed (train checks them too).
    check_output(config)
    refuse_repeated_files(config)
    # Paths (and messages quoting them) are the user's text: one safe line each. The recipe
    # line comes with the first progress line, once train() has checked its inputs: a refused
    # input (a missing --base-model) is then the only line printed.
    header = [f"faithgate train: recipe {config.recipe_hash()} -> {output}"]

    def log(line: str) -> None:
        for text in [*header, line]:
            click.echo(safe_line(text), err=True)
        header.clear()

    train(
        config,
        log=log,
        threads=threads,
        device=device,
    )
