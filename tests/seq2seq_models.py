"""Tiny random BART, PEGASUS and T5 checkpoints with their real tokenizer classes
(``BartTokenizer(Fast)``, ``PegasusTokenizerFast``, ``T5TokenizerFast``), for the likelihood
metrics' reference-parity tests and ``benchmarks/seq2seq_reference.py``, which records the
reference scorers' outputs on these very models.

The vocabularies come from ``CORPUS`` (byte-level BPE trained for BART; for PEGASUS and T5 a
Unigram over its words and characters, the Metaspace pre-tokenizer and a ``$A </s>``
template), laid out as the hub
tokenizers are: BART ``<s> <pad> </s> <unk>`` first, T5 ``<pad> </s> <unk>``, PEGASUS
``<pad> </s> <mask_1> <mask_2> <unk_2>..<unk_102>``); the weights are drawn after
``torch.manual_seed(SEED)``. ``fingerprint`` digests weights and tokenizer, so a test can tell
"these are not the models the golden values were recorded on" from a parity failure. Needs
torch and transformers (no sentencepiece: the Unigram models are trained with ``tokenizers``).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

SEED = 20261129
CORPUS = [
    "The council voted on Monday to build a new library in the city park.",
    "Police said two men were arrested after the fire at the old school.",
    "Profits fell by ten percent in March, the minister told reporters.",
    "The river flooded three bridges and closed the harbour for two days.",
    "Residents asked the mayor for more trees and a safer road to the station.",
]
# (source, summary) pairs the parity tests score: faithful, unfaithful, a number, one word.
PAIRS = [
    (CORPUS[0] + " " + CORPUS[4], "The council voted to build a library in the park."),
    (CORPUS[0] + " " + CORPUS[4], "The mayor closed the library on Sunday."),
    (CORPUS[2] + " " + CORPUS[1], "Profits fell by ten percent in March."),
    (CORPUS[3], "Floods."),
]
ARCHITECTURES = ("bart", "pegasus", "t5")

# Wider random weights than the default init: peaked token distributions, so log p and the
# HaRiM term vary from token to token (at the default every p is about 1/vocabulary).
_SMALL = dict(
    d_model=32, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=128, init_std=0.5
)
_LAYERS = dict(encoder_layers=1, decoder_layers=1, encoder_attention_heads=2)


def _training_text() -> list[str]:
    words = sorted({w.strip(".,").lower() for line in CORPUS for w in line.split()})
    return CORPUS * 3 + [" ".join(words)]


def _bart_tokenizer(directory: Path) -> Any:
    import transformers
    from tokenizers import Tokenizer, decoders, pre_tokenizers, trainers
    from tokenizers import models as tmodels

    tok = Tokenizer(tmodels.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=420,
        special_tokens=["<s>", "<pad>", "</s>", "<unk>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_training_text(), trainer)
    raw = directory / "bpe"
    raw.mkdir(parents=True, exist_ok=True)
    vocab_file, merges_file = tok.model.save(str(raw))
    vocab = json.loads(Path(vocab_file).read_text())
    vocab["<mask>"] = len(vocab)  # BART's last id, as on the hub
    Path(vocab_file).write_text(json.dumps(vocab))
    fast = transformers.BartTokenizerFast(vocab_file=vocab_file, merges_file=merges_file)
    fast.save_pretrained(directory)  # tokenizer.json, vocab.json and merges.txt
    return fast


def _unigram_tokenizer(specials: list[str]) -> Any:
    """A Unigram (SentencePiece-style) tokenizer over the corpus words and single characters,
    with fixed scores: written out, not trained (``UnigramTrainer`` is not deterministic)."""
    from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers, processors
    from tokenizers import models as tmodels

    words = sorted({w.strip(".,") for line in CORPUS for w in line.split()} - {""})
    chars = sorted(set("".join(CORPUS)) - {" "}) + list("abcdefghijklmnopqrstuvwxyz")
    chars += list("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
    pieces: list[tuple[str, float]] = [(t, 0.0) for t in specials]
    pieces += [("\u2581" + w, -5.0 - 0.01 * i) for i, w in enumerate(words)]
    pieces += [("\u2581", -8.0)] + [(c, -10.0 - 0.01 * i) for i, c in enumerate(chars)]
    pieces = list({p: (p, v) for p, v in pieces}.values())  # first entry of a piece wins
    tok = Tokenizer(tmodels.Unigram(pieces, unk_id=specials.index("<unk>"), byte_fallback=False))
    tok.normalizer = normalizers.Replace(" {2,}", " ")
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
    eos = tok.token_to_id("</s>")
    tok.post_processor = processors.TemplateProcessing(
        single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", eos)]
    )
    for special in specials:
        tok.add_special_tokens([special])
    return tok


def _t5_tokenizer(directory: Path) -> Any:
    import transformers

    tok = _unigram_tokenizer(["<pad>", "</s>", "<unk>"])
    directory.mkdir(parents=True, exist_ok=True)
    tok.save(str(directory / "raw_tokenizer.json"))
    fast = transformers.T5TokenizerFast(
        tokenizer_file=str(directory / "raw_tokenizer.json"), extra_ids=0
    )
    (directory / "raw_tokenizer.json").unlink()
    fast.model_max_length = 128
    fast.save_pretrained(directory)
    return fast


def _pegasus_tokenizer(directory: Path) -> Any:
    import transformers

    specials = ["<pad>", "</s>", "<mask_1>", "<mask_2>"] + [f"<unk_{i}>" for i in range(2, 103)]
    tok = _unigram_tokenizer([*specials, "<unk>"])
    directory.mkdir(parents=True, exist_ok=True)
    tok.save(str(directory / "raw_tokenizer.json"))
    fast = transformers.PegasusTokenizerFast(tokenizer_file=str(directory / "raw_tokenizer.json"))
    (directory / "raw_tokenizer.json").unlink()
    fast.model_max_length = 128
    fast.save_pretrained(directory)
    return fast


def save_seq2seq_model(arch: str, directory: Path, seed: int = SEED, positions: int = 128) -> Path:
    """Save the tiny ``arch`` model ("bart", "pegasus" or "t5") with its tokenizer in
    ``directory``; returns it. ``positions``: its window (BART, PEGASUS), 128 tokens by
    default (the golden values' models); a benchmark takes a longer one."""
    import torch
    import transformers

    if arch == "bart":
        tok = _bart_tokenizer(directory)
        cfg: Any = transformers.BartConfig(
            vocab_size=len(tok),
            decoder_attention_heads=2,
            pad_token_id=tok.pad_token_id,
            bos_token_id=tok.bos_token_id,
            eos_token_id=tok.eos_token_id,
            decoder_start_token_id=tok.eos_token_id,  # as facebook/bart-large-cnn
            forced_eos_token_id=tok.eos_token_id,
            **{**_SMALL, "max_position_embeddings": positions},
            **_LAYERS,
        )
        cls: Any = transformers.BartForConditionalGeneration
    elif arch == "pegasus":
        tok = _pegasus_tokenizer(directory)
        cfg = transformers.PegasusConfig(
            vocab_size=len(tok),
            decoder_attention_heads=2,
            pad_token_id=tok.pad_token_id,
            eos_token_id=tok.eos_token_id,
            decoder_start_token_id=tok.pad_token_id,
            forced_eos_token_id=tok.eos_token_id,
            **{**_SMALL, "max_position_embeddings": positions},
            **_LAYERS,
        )
        cls = transformers.PegasusForConditionalGeneration
    elif arch == "t5":
        tok = _t5_tokenizer(directory)
        cfg = transformers.T5Config(
            vocab_size=len(tok),
            d_model=32,
            d_kv=16,
            d_ff=64,
            num_layers=1,
            num_decoder_layers=1,
            num_heads=2,
            initializer_factor=2.0,
            pad_token_id=tok.pad_token_id,
            eos_token_id=tok.eos_token_id,
            decoder_start_token_id=tok.pad_token_id,
        )
        cls = transformers.T5ForConditionalGeneration
    else:
        raise ValueError(f"unknown architecture {arch!r}")
    torch.manual_seed(seed)
    cls(cfg).save_pretrained(directory)
    return directory


def fingerprint(directory: Path) -> str:
    """Digest of the saved weights (as float32 values, by name) and of how the tokenizer
    encodes the pairs: equal on any machine that built the same models."""
    import torch
    import transformers

    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(directory)
    tok = transformers.AutoTokenizer.from_pretrained(directory)
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().to(torch.float32).contiguous().numpy().tobytes())
    for source, summary in PAIRS:
        digest.update(json.dumps([tok(source)["input_ids"], tok(summary)["input_ids"]]).encode())
    return digest.hexdigest()[:16]
