"""``faithgate export ROLE``: export a role's model to ONNX, quantize it, gate it on parity.

Argument handling and printing only; the work is in ``faithgate.backends.export``.
"""

from __future__ import annotations

from pathlib import Path

import click

from faithgate import models
from faithgate.cli.params import FiniteFloatRange
from faithgate.errors import InputError
from faithgate.safety import paths
from faithgate.safety.escape import json_for_terminal, safe_line

EXPORT_ROLES = ("embedder", "nli", "lm", "seq2seq", "alignscore", "hhem")


@click.command("export")
@click.argument("role", type=click.Choice(EXPORT_ROLES))
@click.option("--model", "model_name", metavar="ID_OR_PATH", help="Model (default: the role's).")
@click.option(
    "--quantize",
    default="auto",
    show_default=True,
    type=click.Choice(
        [
            "auto",
            "w8",
            "w8a32",
            "w8a32-ctx8",
            "w8a8",
            "w4",
            "fp16",
            "int8",
            "int8-dynamic",
            "int8-static",
            "none",
        ]
    ),
    help="auto = the smallest form that passes the parity gate (CPU: w4, then w8, then w8a32; "
    "causal LMs: w8a8, w8a32, w8; CUDA: fp16, then w8); w8/w4 = weight-only 8/4-bit blocks "
    "(recommended: w8); w8a8 = SmoothQuant int8 weights x per-token int8 activations; "
    "w8a32-ctx8 (causal LMs) = w8a32 for scored tokens, w8a8 arithmetic for the cached source "
    "pass; fp16 for "
    "CUDA; int8 = dynamic int8. A quantized form is kept only when it passes the gate.",
)
@click.option(
    "--device",
    type=click.Choice(["cpu", "cuda"]),
    default="cpu",
    show_default=True,
    help="Where the export will run: picks auto's candidates and the onnxruntime provider of "
    "the parity runs (cuda needs onnxruntime-gpu).",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    help="Export directory (default: the faithgate cache, where --backend auto finds it), not "
    "the current directory. An existing OUT must be empty or an earlier export (it holds "
    "faithgate_onnx.json and only what an export writes), which is replaced as a whole. "
    "OUT.lock, beside it, is faithgate's lock while the export runs (a file of the user's "
    "with that name is refused, never overwritten).",
)
@click.option(
    "--opset",
    type=int,
    # ``backends.export.DEFAULT_OPSET`` and its range (not imported here: listing the commands
    # would load the export backend; tests/unit/backends/test_export_opset.py checks both).
    default=18,
    show_default=True,
    help="ONNX opset of the export, 14 to 20 (checked before the model is loaded).",
)
@click.option("--no-cache", is_flag=True, help="Causal LM without key/value cache inputs.")
@click.option(
    "--calibration",
    type=click.Path(dir_okay=False, path_type=Path),
    # A product variable of its own: the CI data location is the CI's business (.ci/run sets
    # this one from it), not something the product reads.
    envvar="FAITHGATE_CALIBRATION",
    help="BUMP-style JSONL of minimal pairs for the parity gate "
    "(default: $FAITHGATE_CALIBRATION when set, else built-in sentences).",
)
@click.option("--calibration-pairs", type=int, default=100, show_default=True)
@click.option("--max-diff", type=FiniteFloatRange(min=0), default=0.01, show_default=True,
              help="Largest mean |score difference| of bounded scores (cosine, probability).")  # fmt: skip
@click.option("--max-nats", type=FiniteFloatRange(min=0), default=0.05, show_default=True,
              help="Largest mean |difference| of mean token log-probabilities (nats).")  # fmt: skip
@click.option("--min-agreement", type=FiniteFloatRange(0, 1), default=0.99, show_default=True,
              help="Smallest share of pairs ranked as fp32 ranks them.")  # fmt: skip
@click.option("--max-consistency-change", type=FiniteFloatRange(min=0), default=0.01, show_default=True,
              help="Largest change of pair consistency (0.01 = 1 point).")  # fmt: skip
@click.option("--strict", is_flag=True,
              help="Fail (and write nothing) instead of keeping fp32 when quantization fails.")  # fmt: skip
@click.option(
    "--threads", type=click.IntRange(min=1), help="onnxruntime threads for the parity runs."
)
@click.option("--allow-download", is_flag=True, help="Allow fetching the model from the hub.")
@click.option("--json", "as_json", is_flag=True, help="Print the manifest as JSON.")
def export_command(
    role: str,
    model_name: str | None,
    quantize: str,
    device: str,
    out: Path | None,
    opset: int,
    no_cache: bool,
    calibration: Path | None,
    calibration_pairs: int,
    max_diff: float,
    max_nats: float,
    min_agreement: float,
    max_consistency_change: float,
    strict: bool,
    threads: int | None,
    allow_download: bool,
    as_json: bool,
) -> None:
    """Export ROLE's model to ONNX for the torch-free runtime (``faithgate[runtime]``)."""
    from faithgate.backends.export import check_device, check_opset, export_model
    from faithgate.backends.quantize.parity import Tolerance, load_calibration

    if calibration_pairs < 1:
        raise InputError("--calibration-pairs must be at least 1")
    if not 0.0 <= min_agreement <= 1.0:
        raise InputError("--min-agreement must be between 0 and 1")
    check_device(device)  # before the model is resolved, loaded or exported
    check_opset(opset, "--opset")
    spec = models.resolve(role, model_name, allow_download=allow_download)
    if out is not None:  # the export replaces --out as a whole: it must not hold the data
        paths.refuse_dir_over_inputs(out, [("--calibration file", calibration)])
    calib_path = calibration
    triples = load_calibration(calib_path, calibration_pairs)
    # Progress lines quote paths and model names: the user's text, printed as one safe line.
    say = (
        (lambda msg: None) if as_json else (lambda msg: click.echo(safe_line(f"  {msg}"), err=True))
    )
    manifest = export_model(
        spec,
        out=out,
        quantize=quantize,
        opset=opset,
        use_cache=not no_cache,
        calibration=triples,
        calibration_source=str(calib_path) if calib_path else "built-in",
        tolerance=Tolerance(max_diff, min_agreement, max_consistency_change, max_nats),
        require_quantized=strict,
        threads=threads,
        device=device,
        log=say,
    )
    if as_json:
        click.echo(json_for_terminal(manifest.to_dict(), indent=2, sort_keys=True))
        return
    click.echo(safe_line(f"exported {role} model {spec.name} -> {manifest.directory}"))
    click.echo(
        f"  task {manifest.task}, opset {manifest.opset}, quantization {manifest.quantization}"
    )
    for key, block in manifest.parity.items():
        if not key.endswith("_vs_torch"):
            continue
        for score, rep in block.items():
            status = "ok" if rep["passed"] else "FAIL"
            # Score names carry the model config's label names (someone else's text): one
            # safe line, as the progress lines.
            click.echo(
                safe_line(
                    f"  {key:<22} {score:<20} mean|d| {_figure(rep['mean_abs_diff'], 5)}  "
                    f"max|d| {_figure(rep['max_abs_diff'], 5)}  "
                    f"agree {_figure(rep['rank_agreement'], 3)}  "
                    f"cons {_figure(rep['consistency_ref'], 3)}->"
                    f"{_figure(rep['consistency_new'], 3)}  {status}"
                )
            )
    sizes = manifest.parity.get("file_bytes", {})
    if sizes:
        click.echo(
            "  file size: "
            + ", ".join(f"{mode} {size / 2**20:.1f} MiB" for mode, size in sizes.items())
        )
    this_run = manifest.parity.get("this_run")
    if this_run:  # the export was refused and the earlier one kept
        click.echo(
            safe_line(
                f"  this export ({this_run['asked']}) refused by the parity gate: "
                f"{this_run['refused']}; kept the earlier {manifest.quantization} export"
            )
        )
    elif manifest.parity.get("refused"):
        click.echo(
            safe_line(
                f"  refused by the parity gate: {manifest.parity['refused']}; "
                f"kept: {manifest.quantization}"
            )
        )


def _figure(value: float | None, digits: int) -> str:
    """A parity figure; a non-finite one is null in the manifest (``ParityReport.to_dict``)."""
    return "nan" if value is None else f"{value:.{digits}f}"
