"""Tiny random checkers of the published architectures, built the same on every machine: an
AlignScore ``.ckpt`` (RoBERTa + tri/bin/reg heads, with a real ``RobertaTokenizerFast``) and an
HHEM-2 directory (Flan-T5 ``T5ForTokenClassification`` weights under ``t5.``, a real
``T5TokenizerFast``). Vocabularies are written by hand and weights drawn from numpy's seeded
generator, not trained or initialised by torch, so the golden values
``benchmarks/checker_reference.py`` records from the reference code hold wherever the tests
run. Needs torch and transformers."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

SEED = 45
# Texts the golden values were recorded on (benchmarks/checker_reference.py): a short source,
# a long one (over 350 words: AlignScore cuts it into chunks), summaries of one to three
# sentences, faithful and not.
SHORT = (
    "The mayor of Springfield opened a new library on Monday. The building cost four "
    "million dollars. Students had asked for it since 2015."
)
LONG = " ".join(
    f"Report {i} says the river rose by {i} metres near the old mill on day {i}. "
    f"Farmers moved {i * 10} sheep to the hills before the storm."
    for i in range(1, 26)
)
PAIRS: list[tuple[str, str]] = [
    (SHORT, "The mayor opened a library on Monday."),
    (SHORT, "The mayor closed the library. It cost ten dollars."),
    (SHORT, "The library cost four million dollars. Students asked for it. It opened Monday."),
    (LONG, "The river rose by 3 metres near the old mill."),
    (LONG, "Farmers moved 250 sheep to the hills. The storm destroyed the mill."),
]


def _words(texts: Sequence[str]) -> list[str]:
    words: set[str] = set()
    for text in texts:
        for word in text.replace(".", " . ").replace(",", " , ").split():
            words.add(word)
    return sorted(words)


CORPUS_WORDS = _words([t for pair in PAIRS for t in pair])


def _fill(module: Any, seed: int) -> None:
    """Every parameter drawn from numpy (normal, sd 0.2; layer-norm scales around 1)."""
    import torch

    rng = np.random.RandomState(seed)
    with torch.no_grad():
        for name, param in sorted(module.named_parameters()):
            values = rng.normal(0.0, 0.2, size=tuple(param.shape)).astype(np.float32)
            if name.endswith("LayerNorm.weight") or name.endswith("layer_norm.weight"):
                values = 1.0 + values
            param.copy_(torch.from_numpy(values))


# --- RoBERTa / AlignScore ---------------------------------------------------------------------

ROBERTA = dict(
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=37,
    max_position_embeddings=130,  # 128 tokens + RoBERTa's padding offset
    type_vocab_size=1,
    pad_token_id=1,
    bos_token_id=0,
    eos_token_id=2,
    layer_norm_eps=1e-5,
)


def roberta_tokenizer(directory: Path) -> Any:
    """A byte-level BPE ``RobertaTokenizerFast``: the byte alphabet, then merges that make each
    corpus word (with and without its leading space) one token."""
    from transformers import RobertaTokenizerFast
    from transformers.models.gpt2.tokenization_gpt2 import bytes_to_unicode

    vocab = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    vocab += sorted(set(bytes_to_unicode().values()))
    merges: list[str] = []
    for word in CORPUS_WORDS:
        for form in (word, "\u0120" + word):
            current = form[0]
            for ch in form[1:]:
                merges.append(f"{current} {ch}")
                current += ch
                vocab.append(current)
    vocab = list(dict.fromkeys(vocab))
    merges = list(dict.fromkeys(merges))
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "vocab.json").write_text(json.dumps({t: i for i, t in enumerate(vocab)}))
    (directory / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n")
    tok = RobertaTokenizerFast(
        vocab_file=str(directory / "vocab.json"), merges_file=str(directory / "merges.txt")
    )
    tok.model_max_length = 128
    return tok


# Real checkers' sizes over the same vocabularies (random weights): for speed measurements
# (benchmarks/checker_align_speed.py --size base), not for the tests.
ROBERTA_BASE = dict(
    ROBERTA,
    hidden_size=768,
    num_hidden_layers=12,
    num_attention_heads=12,
    intermediate_size=3072,
    max_position_embeddings=514,
)


def save_alignscore(root: Path, dims: dict[str, Any] | None = None) -> tuple[Path, Path]:
    """A RoBERTa base directory (named ``tiny-roberta``: the reference picks its model class
    by ``'roberta' in name``) and an AlignScore-style Lightning ``.ckpt`` of random weights
    (keys as ``BERTAlignModel`` saves them). Returns (base, ckpt)."""
    import torch
    from transformers import RobertaConfig, RobertaForMaskedLM, RobertaModel

    base = root / "tiny-roberta"
    tok = roberta_tokenizer(base)
    dims = dims or ROBERTA
    tok.model_max_length = dims["max_position_embeddings"] - 2
    config = RobertaConfig(vocab_size=len(tok), **dims)
    mlm = RobertaForMaskedLM(config)
    _fill(mlm, SEED)
    mlm.save_pretrained(base)
    tok.save_pretrained(base)
    encoder = RobertaModel(config)  # with its pooler, as BERTAlignModel's base_model
    _fill(encoder, SEED + 1)
    heads = {
        "bin_layer": torch.nn.Linear(config.hidden_size, 2),
        "tri_layer": torch.nn.Linear(config.hidden_size, 3),
        "reg_layer": torch.nn.Linear(config.hidden_size, 1),
    }
    state: dict[str, Any] = {f"base_model.{k}": v for k, v in encoder.state_dict().items()}
    state.update({f"mlm_head.{k}": v for k, v in mlm.lm_head.state_dict().items()})
    for i, (name, layer) in enumerate(heads.items()):
        _fill(layer, SEED + 2 + i)
        state.update({f"{name}.{k}": v for k, v in layer.state_dict().items()})
    ckpt = root / "AlignScore-tiny.ckpt"
    torch.save(
        {
            "epoch": 0,
            "global_step": 0,
            "pytorch-lightning_version": "1.7.7",
            "state_dict": {k: v.clone() for k, v in state.items()},
            "hyper_parameters": {"model": str(base), "using_pretrained": True},
        },
        ckpt,
    )
    return base, ckpt


# --- Flan-T5 / HHEM ---------------------------------------------------------------------------

T5 = dict(
    d_model=32,
    d_kv=8,
    d_ff=48,
    num_layers=2,
    num_decoder_layers=2,
    num_heads=4,
    relative_attention_num_buckets=8,
    relative_attention_max_distance=32,
    feed_forward_proj="gated-gelu",
    dropout_rate=0.0,
    pad_token_id=0,
    eos_token_id=1,
    decoder_start_token_id=0,
    tie_word_embeddings=False,
)
# Flan-T5-base's encoder size (speed measurements only, as ROBERTA_BASE).
T5_BASE = dict(
    T5,
    d_model=768,
    d_kv=64,
    d_ff=2048,
    num_layers=12,
    num_decoder_layers=12,
    num_heads=12,
    relative_attention_num_buckets=32,
    relative_attention_max_distance=128,
)


def t5_tokenizer() -> Any:
    """A Unigram ``T5TokenizerFast`` (``<pad>`` 0, ``</s>`` 1, ``<unk>`` 2, ``</s>`` appended),
    over the corpus words and single characters."""
    from tokenizers import Tokenizer, decoders, pre_tokenizers, processors
    from tokenizers import models as tmodels
    from transformers import T5TokenizerFast

    pieces = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)]
    words = CORPUS_WORDS + ["Determine", "if", "the", "hypothesis", "is", "true", "given"]
    words += ["premise?", "Premise:", "Hypothesis:"]
    pieces += [("\u2581" + w, -1.0) for w in dict.fromkeys(words)]
    chars = sorted({c for w in words for c in w} | set("abcdefghijklmnopqrstuvwxyz0123456789"))
    pieces += [("\u2581", -2.0)] + [(c, -3.0) for c in chars]
    tok = Tokenizer(tmodels.Unigram(pieces, unk_id=2, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tok.post_processor = processors.TemplateProcessing(
        single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", 1)]
    )
    out = T5TokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="<unk>", extra_ids=0
    )
    out.model_max_length = 512
    return out


def save_hhem(root: Path, dims: dict[str, Any] | None = None) -> tuple[Path, Path]:
    """A Flan-T5 foundation directory (config and tokenizer) and an HHEM-2 directory beside it
    (``config.json`` of ``HHEMv2`` naming that foundation, weights under ``t5.``). Returns
    (foundation, hhem)."""
    from safetensors.torch import save_file
    from transformers import T5Config, T5ForTokenClassification

    from faithgate.convert import HHEM_PROMPT

    foundation = root / "tiny-flan-t5"
    tok = t5_tokenizer()
    config = T5Config(vocab_size=len(tok), **(dims or T5))
    config.save_pretrained(foundation)
    tok.save_pretrained(foundation)
    config.num_labels = 2
    model = T5ForTokenClassification(config)
    _fill(model, SEED + 10)
    hhem = root / "tiny-hhem"
    hhem.mkdir(parents=True, exist_ok=True)
    state = {f"t5.{k}": v.clone().contiguous() for k, v in model.state_dict().items()}
    state.pop("t5.transformer.encoder.embed_tokens.weight", None)  # tied: saved once
    save_file(state, str(hhem / "model.safetensors"))
    hhem_config = {
        "architectures": ["HHEMv2ForSequenceClassification"],
        "model_type": "HHEMv2",
        "foundation": str(foundation),
        "prompt": HHEM_PROMPT,
        "id2label": {"0": "hallucinated", "1": "consistent"},
    }
    (hhem / "config.json").write_text(json.dumps(hhem_config, indent=2))
    return foundation, hhem
