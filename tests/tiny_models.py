"""Tiny random transformers checkpoints, saved like local ones, for the backend tests (ONNX
export parity, backend conformance): a BERT encoder, a BERT NLI classifier and a Llama causal
LM over a small vocabulary built from the test's own corpus. Needs torch and transformers."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

BERT = dict(
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=64,
    max_position_embeddings=64,
)
# The size of the random BERTs built over MiniLM's real tokenizer (``save_minilm_bert``, the
# QA model): small enough to build in a test, the same in every test that uses one.
MINILM_SIZED = dict(
    hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37
)
NLI_LABELS = {0: "ENTAILMENT", 1: "NEUTRAL", 2: "CONTRADICTION"}
# A hand-made news paragraph: the documents the training tests synthesise pairs from.
MAYOR_TEXT = (
    "The mayor of Springfield, John Carter, opened a new public library on Monday. "
    "The building cost 4 million dollars and holds 20,000 books. "
    "Carter said the library would stay open until 9 pm every weekday. "
    "Local students had campaigned for the library since 2015. "
    "The old library, which was built in 1952, will become a museum."
)


def corpus_words(corpus: Sequence[str]) -> list[str]:
    return sorted({w.strip(".,").lower() for line in corpus for w in line.split()})


def bert_tokenizer(directory: Path, corpus: Sequence[str]) -> Any:
    """A WordPiece tokenizer: the corpus words, then letters and word pieces for the rest."""
    import transformers

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", "'"]
    vocab += corpus_words(corpus) + list("abcdefghijklmnopqrstuvwxyz0123456789")
    vocab += [f"##{c}" for c in "abcdefghijklmnopqrstuvwxyz"]
    vocab = list(dict.fromkeys(vocab))  # "a" is a word and a letter: no duplicate ids
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tok = transformers.BertTokenizerFast(vocab_file=str(directory / "vocab.txt"))
    tok.model_max_length = 64
    return tok


def bpe_tokenizer(corpus: Sequence[str]) -> Any:
    """A byte-level BPE tokenizer trained on the corpus, with <pad>, <s> and </s>."""
    import transformers
    from tokenizers import Tokenizer, decoders, pre_tokenizers, trainers
    from tokenizers import models as tmodels

    tok = Tokenizer(tmodels.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<pad>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(list(corpus) * 3 + [" ".join(corpus_words(corpus))], trainer)
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>"
    )


def save_tiny_models(root: Path, corpus: Sequence[str]) -> tuple[dict[str, Path], Any]:
    """Saves the three models under ``root`` (call ``torch.manual_seed`` first); returns their
    directories (``bert``, ``nli``, ``llama``) and the BPE tokenizer, for more decoder models."""
    import transformers

    out: dict[str, Path] = {}
    d = root / "bert"
    tok = bert_tokenizer(d, corpus)
    transformers.BertModel(transformers.BertConfig(vocab_size=len(tok), **BERT)).save_pretrained(d)
    tok.save_pretrained(d)
    out["bert"] = d
    d = root / "bert_nli"
    tok = bert_tokenizer(d, corpus)
    cfg = transformers.BertConfig(
        vocab_size=len(tok),
        id2label=NLI_LABELS,
        label2id={v: k for k, v in NLI_LABELS.items()},
        **BERT,
    )
    transformers.BertForSequenceClassification(cfg).save_pretrained(d)
    tok.save_pretrained(d)
    out["nli"] = d
    bpe = bpe_tokenizer(corpus)
    d = root / "llama"
    transformers.LlamaForCausalLM(tiny_llama_config(bpe)).save_pretrained(d)
    bpe.save_pretrained(d)
    out["llama"] = d
    return out, bpe


def tiny_llama_config(bpe: Any) -> Any:
    """The config of a tiny random Llama (2 layers, 32 wide) over the byte-level BPE ``bpe``
    (``bpe_tokenizer``)."""
    import transformers

    return transformers.LlamaConfig(
        vocab_size=len(bpe),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        bos_token_id=bpe.bos_token_id,
        eos_token_id=bpe.eos_token_id,
        pad_token_id=bpe.pad_token_id,
    )


def save_tiny_bart(directory: Path, bpe: Any) -> Path:
    """A tiny random BART (seq2seq) over ``bpe`` (from ``save_tiny_models``), saved with its
    tokenizer in ``directory``; returns it."""
    import transformers

    cfg = transformers.BartConfig(
        vocab_size=len(bpe),
        d_model=32,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_position_embeddings=128,
        pad_token_id=bpe.pad_token_id,
        bos_token_id=bpe.bos_token_id,
        eos_token_id=bpe.eos_token_id,
        decoder_start_token_id=bpe.eos_token_id,
        forced_eos_token_id=None,
    )
    transformers.BartForConditionalGeneration(cfg).save_pretrained(directory)
    bpe.save_pretrained(directory)
    return directory


def save_minilm_bert(
    path: Path, model_class: str, *, max_length: int | None = None, **config: Any
) -> tuple[Path, Any, Any]:
    """A random BERT (``model_class`` of transformers, e.g. ``BertModel``) sized by ``config``,
    with the offline embedder's (MiniLM's) tokenizer, saved at ``path`` like a hub checkpoint;
    ``max_length`` sets the saved tokenizer's ``model_max_length``. Seed torch first for fixed
    weights. Returns the path, the model and the tokenizer."""
    import transformers

    from faithgate import models

    tokenizer = transformers.AutoTokenizer.from_pretrained(models.resolve("embedder").location)
    if max_length is not None:
        tokenizer.model_max_length = max_length
    bert_config = transformers.BertConfig(vocab_size=tokenizer.vocab_size, **config)
    model = getattr(transformers, model_class)(bert_config).eval()
    model.save_pretrained(path, safe_serialization=True)
    tokenizer.save_pretrained(path)
    return path, model, tokenizer


def tiny_train_config(out: Path, base: Path, docs: Path, **overrides: Any) -> Any:
    """A `faithgate train` recipe for the training tests: the tiny base, the given documents
    (three claims each, seed 0), no SNLI, nothing held out, batches of 4 pairs of at most 96
    tokens, 4 steps with a checkpoint after each; ``overrides`` replace any of these."""
    from faithgate.training import synth
    from faithgate.training.recipe import TrainConfig

    settings = {
        "output": str(out),
        "base_model": str(base),
        "documents": [str(docs)],
        "snli_pairs": 0,
        "synth": synth.SynthConfig(claims_per_document=3, seed=0),
        "dev_fraction": 0.0,
        "batch_size": 4,
        "max_length": 96,
        "max_steps": 4,
        "checkpoint_every": 1,
    }
    return TrainConfig(**{**settings, **overrides})
