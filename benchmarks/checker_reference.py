"""Golden values of the reference checker code on tiny random weights, for the parity tests
(tests/unit/metrics/test_checker_parity.py).

Builds the tiny AlignScore checkpoint and HHEM-2 directory of ``tests/tiny_checkers.py`` (seed
45, numpy draws, hand-written vocabularies) and scores ``tiny_checkers.PAIRS`` with:

- AlignScore: the ``alignscore-speedofmagic`` 0.1.4 package (``AlignScore(...).score``, modes
  ``nli_sp``, the default, and ``bin_sp``). It needs pytorch-lightning, NLTK's punkt data and
  spaCy's ``en_core_web_sm``; here its sentence splitter is faithgate's (so the comparison is
  of the model, chunking and aggregation; docs/metrics/alignscore.md says where the splitters
  differ) and its unused spaCy pipeline is not loaded;
- HHEM: ``HHEMv2ForSequenceClassification.predict`` of ``modeling_hhem_v2.py`` from the hub
  repository ``vectara/hallucination_evaluation_model``, loaded from a local copy.

Neither reference is part of this repository. Run, with the reference code outside it::

    pip install --no-deps --target /tmp/alignref alignscore-speedofmagic==0.1.4
    pip install --no-deps --target /tmp/pldeps pytorch-lightning lightning-utilities torchmetrics
    PYTHONPATH=.:tests:/tmp/pldeps:/tmp/alignref python3 benchmarks/checker_reference.py \\
        --hhem-code /path/to/modeling_hhem_v2.py --out tests/golden/checker_reference.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
import types
from pathlib import Path
from typing import Any


def alignscore_reference(base: Path, ckpt: Path, mode: str) -> list[float]:
    import alignscore.inference as inference
    from alignscore import AlignScore

    from faithgate.text import split_sentences

    inference.sent_tokenize = lambda text: split_sentences(text)
    # Its spaCy pipeline serves only the SMART modes: not loaded (en_core_web_sm is absent).
    inference.spacy = types.SimpleNamespace(load=lambda name: None)
    scorer = AlignScore(
        model=str(base),
        batch_size=4,
        device="cpu",
        ckpt_path=str(ckpt),
        evaluation_mode=mode,
        verbose=False,
    )
    import tiny_checkers as tc

    return scorer.score([s for s, _ in tc.PAIRS], [c for _, c in tc.PAIRS])


def hhem_reference(code: Path, hhem: Path) -> list[float]:
    import tiny_checkers as tc

    spec = importlib.util.spec_from_file_location("modeling_hhem_v2", code)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = module.HHEMv2ForSequenceClassification.from_pretrained(str(hhem))
    return [float(x) for x in model.predict(tc.PAIRS)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hhem-code", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    import tiny_checkers as tc
    import torch
    import transformers

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        base, ckpt = tc.save_alignscore(root)
        foundation, hhem = tc.save_hhem(root)
        golden: dict[str, Any] = {
            "seed": tc.SEED,
            "pairs": len(tc.PAIRS),
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "alignscore_nli": alignscore_reference(base, ckpt, "nli_sp"),
            "alignscore_bin": alignscore_reference(base, ckpt, "bin_sp"),
            "hhem": hhem_reference(args.hhem_code, hhem),
        }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(golden, indent=2) + "\n")
    json.dump(golden, sys.stdout, indent=2)


if __name__ == "__main__":
    main()
