"""Record the reference scorers' outputs on tiny random BART, PEGASUS and T5 models: the golden
values of ``tests/unit/metrics/test_seq2seq_parity.py``.

References (fetched by you, never committed to this repository):

- BARTScore (Yuan et al. 2021), ``bart_score.py`` of a github.com/neulab/BARTScore checkout
  (``--bartscore DIR``): ``BARTScorer(checkpoint=DIR).score(sources, summaries)``. It loads
  ``BartTokenizer`` (the slow Python tokenizer) and ``BartForConditionalGeneration`` by name;
  for PEGASUS and T5 this script points those two names of the imported module at
  ``AutoTokenizer`` and ``AutoModelForSeq2SeqLM`` (its scoring code runs unchanged).
- HaRiM+ (Son et al. 2022), ``harim_plus.py`` of the Hugging Face ``evaluate`` metric
  NCSOFT/harim_plus (``--harim FILE``; the same ``Harimplus_Scorer`` as the authors' GitHub
  ``harim_scorer.py``): ``Harimplus_Scorer(pretrained_name=DIR, mixing_factor=7)
  .compute(summaries, sources, return_details=True)``. Its module imports ``evaluate`` and
  ``datasets`` only for the ``evaluate.Metric`` wrapper class; where they are not installed,
  empty stand-ins are put in ``sys.modules`` so the file imports (the scorer never uses them).

The models are built by ``tests/seq2seq_models.py`` with its seed (``SEED``), on CPU, and
identified by its ``fingerprint``; the pairs are its ``PAIRS``: BARTScore scores them in one
batch, HaRiM+ each in a batch of two copies of itself (see ``main``; the one-batch values
are recorded too, as ``harim_plus_one_padded_batch``).

    python benchmarks/seq2seq_reference.py --bartscore /path/to/BARTScore \\
        --harim /path/to/harim_plus.py --out tests/unit/metrics/data/seq2seq_reference.json
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import seq2seq_models  # noqa: E402


def _load_module(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _stand_ins() -> None:
    """Import-only stand-ins for ``evaluate`` and ``datasets`` (see the module docstring)."""
    if importlib.util.find_spec("evaluate") is None:
        evaluate = types.ModuleType("evaluate")
        evaluate.logging = types.SimpleNamespace(  # type: ignore[attr-defined]
            get_logger=lambda name: types.SimpleNamespace(warning=print)
        )
        evaluate.utils = types.SimpleNamespace(  # type: ignore[attr-defined]
            file_utils=types.SimpleNamespace(add_start_docstrings=lambda *a: lambda cls: cls)
        )
        evaluate.Metric = object  # type: ignore[attr-defined]
        sys.modules["evaluate"] = evaluate
    if importlib.util.find_spec("datasets") is None:
        sys.modules["datasets"] = types.ModuleType("datasets")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bartscore", type=Path, required=True, help="BARTScore checkout")
    parser.add_argument("--harim", type=Path, required=True, help="harim_plus.py")
    parser.add_argument("--bartscore-commit", default="", help="recorded as given")
    parser.add_argument("--harim-source", default="", help="recorded as given")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    import torch
    import transformers

    torch.set_num_threads(1)
    bart_score = _load_module("bart_score", args.bartscore / "bart_score.py")
    _stand_ins()
    harim = _load_module("harim_plus", args.harim)

    sources = [s for s, _ in seq2seq_models.PAIRS]
    summaries = [y for _, y in seq2seq_models.PAIRS]
    record: dict[str, Any] = {
        "made_by": "benchmarks/seq2seq_reference.py",
        "seed": seq2seq_models.SEED,
        "pairs": "tests/seq2seq_models.py PAIRS",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "bartscore": {"file": "bart_score.py", "commit": args.bartscore_commit},
        "harim": {"file": args.harim.name, "source": args.harim_source, "lambda": 7.0},
        "models": {},
    }
    with tempfile.TemporaryDirectory() as tmp:
        for arch in seq2seq_models.ARCHITECTURES:
            directory = seq2seq_models.save_seq2seq_model(arch, Path(tmp) / arch)
            loader = "BartTokenizer (slow), BartForConditionalGeneration"
            if arch != "bart":
                bart_score.BartTokenizer = transformers.AutoTokenizer
                bart_score.BartForConditionalGeneration = transformers.AutoModelForSeq2SeqLM
                loader = "AutoTokenizer, AutoModelForSeq2SeqLM (names patched)"
            scorer = bart_score.BARTScorer(device="cpu", checkpoint=str(directory))
            bart = scorer.score(sources, summaries, batch_size=len(sources))
            h = harim.Harimplus_Scorer(pretrained_name=str(directory), mixing_factor=7.0)
            res: dict[str, list[float]] = {"harim+": [], "harim": [], "log_ppl": []}
            for source, summary in seq2seq_models.PAIRS:
                # Each pair in a batch of two copies of itself: the scorer adds 0.5 to its
                # HaRiM sum per padding position of a target (p_s2s and p_lm are masked to 0
                # there, the term is not), so in a mixed batch a short summary's score depends
                # on its batch-mates; alone (bsz=1) its squeeze() fails its shape assertion.
                one = h.compute(
                    predictions=[summary] * 2, references=[source] * 2, bsz=2, return_details=True
                )
                for key in res:
                    res[key].append(float(one[key][0]))
            mixed = h.compute(predictions=summaries, references=sources, bsz=len(sources))
            record["models"][arch] = {
                "fingerprint": seq2seq_models.fingerprint(directory),
                "bartscore_loader": loader,
                "bartscore": [float(v) for v in bart],
                "harim_plus": [float(v) for v in res["harim+"]],
                "harim_released": [float(v) for v in res["harim"]],
                "log_ppl": [float(v) for v in res["log_ppl"]],
                "harim_plus_one_padded_batch": [float(v) for v in mixed],
            }
            print(arch, json.dumps(record["models"][arch]))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
