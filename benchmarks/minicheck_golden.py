"""Golden values for the minicheck parity tests: MiniCheck's released inference code run on the
tiny random-weight models of tests/minicheck_models.py (RoBERTa, DeBERTa-v3, Flan-T5 shapes
with their real tokenizer classes).

MiniCheck (github.com/Liyan06/MiniCheck) is not on PyPI and its code is not part of this
repository: fetch it yourself and pass the directory that holds its ``minicheck/`` package::

    git clone https://github.com/Liyan06/MiniCheck /tmp/minicheck-ref   # commit b58b9fa used
    python benchmarks/minicheck_golden.py --reference /tmp/minicheck-ref \\
        --out tests/minicheck_golden.json

The reference is run unchanged except for three things the offline machine needs, recorded in
the JSON: its hub ids are redirected to the tiny local directories; NLTK's pretrained Punkt
data (a download) is replaced by NLTK's untrained ``PunktSentenceTokenizer``, which splits the
test documents at the same places; ``chunk_size`` and ``max_model_len`` are small (the tiny
models' window is 128 tokens) so that the documents span several chunks.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SEED = 0
# (reference model name, tiny model, chunk_size): tokens for the classifiers, words for T5.
CASES = (
    ("roberta-large", "roberta", 24),
    ("deberta-v3-large", "deberta", 24),
    ("flan-t5-large", "t5", 16),
)
MAX_MODEL_LEN = 128


def weights_digest(directory: Path) -> str:
    """SHA-256 over the model's parameters (names and float32 bytes), so a test can tell a
    rebuilt model from the one the golden values came from."""
    import torch
    from safetensors.torch import load_file

    state = load_file(str(directory / "model.safetensors"))
    h = hashlib.sha256()
    for name in sorted(state):
        h.update(name.encode())
        h.update(state[name].to(torch.float32).contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def build_models(root: Path) -> dict[str, Path]:
    import torch

    sys.path.insert(0, str(REPO / "tests"))
    from minicheck_models import save_minicheck_models

    torch.manual_seed(SEED)
    return save_minicheck_models(root)


class _Redirect:
    """A transformers Auto class whose ``from_pretrained`` reads a local directory instead of
    MiniCheck's hub id."""

    def __init__(self, cls, mapping: dict[str, str]) -> None:
        self.cls, self.mapping = cls, mapping

    def from_pretrained(self, name, *args, **kwargs):
        kwargs.pop("device_map", None)  # CPU only; no accelerate dispatch
        return self.cls.from_pretrained(self.mapping.get(name, name), *args, **kwargs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference", type=Path, required=True, help="holds minicheck/")
    parser.add_argument("--out", type=Path, default=REPO / "tests" / "minicheck_golden.json")
    args = parser.parse_args()
    sys.path.insert(0, str(args.reference))
    import transformers
    from minicheck import inference  # the reference code
    from minicheck.minicheck import MiniCheck
    from nltk.tokenize.punkt import PunktSentenceTokenizer

    sys.path.insert(0, str(REPO / "tests"))
    from minicheck_models import CLAIMS, DOCS

    inference.sent_tokenize = PunktSentenceTokenizer().tokenize
    out: dict = {
        "reference": "github.com/Liyan06/MiniCheck minicheck/inference.py (Inferencer)",
        "seed": SEED,
        "max_model_len": MAX_MODEL_LEN,
        "sentence_splitter": "nltk PunktSentenceTokenizer() (untrained)",
        "versions": {"transformers": transformers.__version__},
        "cases": {},
    }
    with tempfile.TemporaryDirectory() as tmp:
        dirs = build_models(Path(tmp))
        hub = {
            "lytang/MiniCheck-RoBERTa-Large": str(dirs["roberta"]),
            "lytang/MiniCheck-DeBERTa-v3-Large": str(dirs["deberta"]),
            "lytang/MiniCheck-Flan-T5-Large": str(dirs["t5"]),
        }
        for attr in ("AutoConfig", "AutoTokenizer", "AutoModelForSeq2SeqLM",
                     "AutoModelForSequenceClassification"):  # fmt: skip
            setattr(inference, attr, _Redirect(getattr(transformers, attr), hub))
        for ref_name, tiny, chunk_size in CASES:
            scorer = MiniCheck(model_name=ref_name, max_model_len=MAX_MODEL_LEN, batch_size=4)
            docs = [d for d, cs in zip(DOCS, CLAIMS, strict=True) for _ in cs]
            claims = [c for cs in CLAIMS for c in cs]
            _, probs, chunks, per_chunk = scorer.score(docs, claims, chunk_size=chunk_size)
            out["cases"][tiny] = {
                "model_name": ref_name,
                "chunk_size": chunk_size,
                "weights": weights_digest(dirs[tiny]),
                "items": [
                    {
                        "doc": d,
                        "claim": c,
                        "max_support_prob": float(p),
                        "chunks": list(ch),
                        "support_prob_per_chunk": [float(x) for x in pc],
                    }
                    for d, c, p, ch, pc in zip(docs, claims, probs, chunks, per_chunk, strict=True)
                ],
            }
            print(tiny, [round(float(p), 6) for p in probs], file=sys.stderr)
    args.out.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
