"""Tiny random-weight models of MiniCheck's architectures, with their real tokenizer classes:
RoBERTa (``RobertaTokenizerFast``, byte-level BPE), DeBERTa-v3 (``DebertaV2TokenizerFast``,
unigram with ``[CLS]``/``[SEP]``) and Flan-T5 (``T5TokenizerFast``, unigram with ``</s>``).
Two-way heads keep the hub's default class names, LABEL_0 / LABEL_1, as MiniCheck's do.

The T5 vocabulary puts ``▁`` at id 3 and ``▁1`` at id 209, and has no ``▁0``: as in T5's real
vocabulary, ``"0"`` is ``▁`` + ``0`` and ``"1"`` is ``▁1``, the ids MiniCheck's reference code
reads (3: unsupported, 209: supported). Needs torch, transformers and tokenizers; builds in a
few seconds (``torch.manual_seed`` decides the weights).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

TWO_WAY = {0: "LABEL_0", 1: "LABEL_1"}
SIZE = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
# Wider random weights than the hub's 0.02: support probabilities spread over (0, 1), so the
# parity tests tell one chunking or tokenization from another.
INIT_RANGE = 0.4
T5_INIT_FACTOR = 0.3
WINDOW = 128  # tokens: small enough to make chunking matter in the tests

# The documents and claims the parity tests score (golden values: tests/minicheck_golden.json).
DOCS = (
    "The mayor of Springfield opened a new library on Monday. The building cost four million "
    "dollars. It holds twenty thousand books. Students had asked for it since 2015. The old "
    "library will become a museum. Carter said it would stay open until nine every weekday.",
    "Heavy rain closed the coast road on Tuesday.\nThe council said repairs would take a week. "
    "Buses will run on the hill road instead.\n\nSchools stay open.",
    "A short note.",
)
CLAIMS = (
    ("The library cost four million dollars.", "The library was closed on Monday."),
    ("The coast road is closed.", "Repairs take a week and schools stay open."),
    ("A note.",),
)


def _words(corpus: Sequence[str]) -> list[str]:
    return sorted({w for text in corpus for w in text.replace("\n", " ").split()})


def roberta_tokenizer(directory: Path, corpus: Sequence[str]) -> Any:
    """A ``RobertaTokenizerFast`` over a byte-level BPE trained on ``corpus``."""
    import transformers
    from tokenizers import ByteLevelBPETokenizer

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(
        list(corpus) * 3,
        vocab_size=500,
        special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
    )
    directory.mkdir(parents=True, exist_ok=True)
    bpe.save_model(str(directory))
    tok = transformers.RobertaTokenizerFast(
        vocab_file=str(directory / "vocab.json"), merges_file=str(directory / "merges.txt")
    )
    tok.model_max_length = WINDOW
    return tok


def _unigram(pieces: list[str], unk_id: int) -> Any:
    from tokenizers import Tokenizer, decoders, pre_tokenizers
    from tokenizers import models as tmodels

    # Specials score 0; longer pieces score higher, so whole words win over letters.
    vocab = [(p, 0.0 if p[0] in "<[" else -10.0 / (1 + len(p))) for p in pieces]
    tok = Tokenizer(tmodels.Unigram(vocab, unk_id=unk_id, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    return tok


def _unigram_pieces(corpus: Sequence[str], specials: list[str]) -> list[str]:
    chars = sorted({c for text in corpus for c in text if not c.isspace()})
    words = ["▁" + w for w in _words(corpus)] + [w for w in _words(corpus)]
    return list(dict.fromkeys(specials + ["▁"] + chars + words))


def deberta_tokenizer(directory: Path, corpus: Sequence[str]) -> Any:
    """A ``DebertaV2TokenizerFast`` (DeBERTa-v3's class): unigram pieces, [CLS] a [SEP] b [SEP]."""
    import transformers
    from tokenizers import processors

    specials = ["[PAD]", "[CLS]", "[SEP]", "[UNK]"]
    pieces = _unigram_pieces(corpus, specials) + ["[MASK]"]
    tok = _unigram(pieces, unk_id=3)
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0",
        pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 1), ("[SEP]", 2)],
    )
    fast = transformers.DebertaV2TokenizerFast(tokenizer_object=tok)
    fast.model_max_length = WINDOW
    directory.mkdir(parents=True, exist_ok=True)
    return fast


def t5_tokenizer(directory: Path, corpus: Sequence[str]) -> Any:
    """A ``T5TokenizerFast``: <pad>=0, </s>=1, <unk>=2, ``▁``=3, ``▁1``=209, no ``▁0``."""
    import transformers
    from tokenizers import processors

    specials = ["<pad>", "</s>", "<unk>"]
    pieces = [p for p in _unigram_pieces(corpus + ("predict: 0 1",), specials) if p != "▁0"]
    pieces = [p for p in pieces if p != "▁1"]
    filler = [f"▁x{i}" for i in range(max(0, 209 - len(pieces)))]
    pieces = pieces[:209] + filler + ["▁1"] + pieces[209:]
    assert pieces[3] == "▁" and pieces[209] == "▁1"
    tok = _unigram(pieces, unk_id=2)
    tok.post_processor = processors.TemplateProcessing(
        single="$A:0 </s>:0", pair="$A:0 </s>:0 $B:1 </s>:1", special_tokens=[("</s>", 1)]
    )
    fast = transformers.T5TokenizerFast(
        tokenizer_object=tok, eos_token="</s>", unk_token="<unk>", pad_token="<pad>", extra_ids=0
    )
    fast.model_max_length = WINDOW
    directory.mkdir(parents=True, exist_ok=True)
    return fast


def save_minicheck_models(root: Path) -> dict[str, Path]:
    """The three tiny MiniCheck-shaped models under ``root``: ``roberta``, ``deberta``, ``t5``
    (call ``torch.manual_seed`` first)."""
    import transformers

    corpus = DOCS + tuple(c for cs in CLAIMS for c in cs)
    out: dict[str, Path] = {}
    d = root / "roberta"
    tok = roberta_tokenizer(d, corpus)
    cfg = transformers.RobertaConfig(
        vocab_size=len(tok),
        max_position_embeddings=WINDOW + 2,
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        id2label=TWO_WAY,
        label2id={v: k for k, v in TWO_WAY.items()},
        initializer_range=INIT_RANGE,
        **SIZE,
    )
    transformers.RobertaForSequenceClassification(cfg).save_pretrained(d)
    tok.save_pretrained(d)
    out["roberta"] = d
    d = root / "deberta"
    tok = deberta_tokenizer(d, corpus)
    cfg = transformers.DebertaV2Config(
        vocab_size=len(tok),
        max_position_embeddings=WINDOW,
        relative_attention=True,
        position_buckets=32,
        pos_att_type=["p2c", "c2p"],
        position_biased_input=False,
        type_vocab_size=0,
        pad_token_id=0,
        id2label=TWO_WAY,
        label2id={v: k for k, v in TWO_WAY.items()},
        initializer_range=INIT_RANGE,
        **SIZE,
    )
    transformers.DebertaV2ForSequenceClassification(cfg).save_pretrained(d)
    tok.save_pretrained(d)
    out["deberta"] = d
    d = root / "t5"
    tok = t5_tokenizer(d, corpus)
    cfg = transformers.T5Config(
        vocab_size=len(tok),
        d_model=32,
        d_kv=16,
        d_ff=64,
        num_layers=2,
        num_decoder_layers=2,
        num_heads=2,
        feed_forward_proj="gated-gelu",
        tie_word_embeddings=False,
        pad_token_id=0,
        eos_token_id=1,
        decoder_start_token_id=0,
        n_positions=WINDOW,
        initializer_factor=T5_INIT_FACTOR,
    )
    transformers.T5ForConditionalGeneration(cfg).save_pretrained(d)
    tok.save_pretrained(d)
    out["t5"] = d
    return out
