"""Likelihood engine and metrics: every metric equals a hand loop over token probabilities.

Tiny randomly initialised models (a 2-layer Llama and a 1-layer BART over a word-level
vocabulary) are saved to a temporary directory, so the tests need no downloaded weights.
The hand loops run one full forward pass per sequence and apply the formulas token by token
in plain Python; the engine batches, pads, caches prefixes and shares passes across metrics.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from faithgate.engines.likelihood import LikelihoodConfig, LikelihoodEngine
from faithgate.errors import InputError
from faithgate.models import resolve
from faithgate.scoring.scorer import Scorer
from faithgate.types import Example

pytestmark = pytest.mark.xdist_group("likelihood")

SOURCE_A = (
    "the council approved a new park on monday . the mayor said work starts in june . "
    "residents asked for more trees"
)
SOURCE_B = "a storm closed the harbour on friday . ships waited outside for two days"
EXAMPLES = [
    Example("a1", SOURCE_A, "the council approved a new park ."),
    Example("a2", SOURCE_A, "the mayor approved a new harbour on friday ."),
    Example("a3", SOURCE_A, "residents said work starts in june"),
    Example("b1", SOURCE_B, "a storm closed the harbour ."),
]
METRICS = ["loglik", "harim", "harim_plus", "cop", "fflm", "pmi_mink"]
SEP, XSEP = "\nTL;DR:\n", "\n"


def _vocab() -> list[str]:
    words = set()
    for ex in EXAMPLES:
        words.update(ex.source.split())
        words.update(ex.summary.split())
    return ["[PAD]", "[BOS]", "[EOS]", "[UNK]", "TL", ";", "DR", ":", *sorted(words)]


def _save_tokenizer(path: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(_vocab())}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="[BOS]",
        eos_token="[EOS]",
        pad_token="[PAD]",
        unk_token="[UNK]",
    ).save_pretrained(path)


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory: pytest.TempPathFactory, torch, transformers) -> Path:
    path = tmp_path_factory.mktemp("tiny-llama")
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=len(_vocab()),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    model = transformers.LlamaForCausalLM(config)
    with torch.no_grad():  # random init is near-uniform: sharpen so the scores differ
        model.lm_head.weight.mul_(20)
    model.save_pretrained(path, safe_serialization=True)
    _save_tokenizer(path)
    return path


@pytest.fixture(scope="module")
def tiny_bart(tmp_path_factory: pytest.TempPathFactory, torch, transformers) -> Path:
    path = tmp_path_factory.mktemp("tiny-bart")
    torch.manual_seed(1)
    config = transformers.BartConfig(
        vocab_size=len(_vocab()),
        d_model=32,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_position_embeddings=128,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        decoder_start_token_id=2,
        forced_bos_token_id=None,
        init_std=0.3,
    )
    model = transformers.BartForConditionalGeneration(config)
    model.save_pretrained(path, safe_serialization=True)
    _save_tokenizer(path)
    return path


# --- hand loops -----------------------------------------------------------------------------
class Hand:
    """One unbatched full-logits forward pass per sequence; formulas token by token."""

    def __init__(self, path: Path, seq2seq: bool = False) -> None:
        import transformers

        self.tok = transformers.AutoTokenizer.from_pretrained(path)
        cls = transformers.AutoModelForSeq2SeqLM if seq2seq else transformers.AutoModelForCausalLM
        self.model = cls.from_pretrained(path).eval()
        self.seq2seq = seq2seq

    def ids(self, text: str) -> list[int]:
        return self.tok(text, add_special_tokens=False)["input_ids"] if text else []

    def causal(self, context: list[int], target: list[int]) -> list[float]:
        """log p(target_j | context + target_<j) for a decoder-only model."""
        import torch

        seq = context + target
        with torch.no_grad():
            logits = self.model(torch.tensor([seq])).logits[0].double()
        out = []
        for j in range(len(context), len(seq)):
            row = logits[j - 1]
            out.append(float(row[seq[j]] - torch.logsumexp(row, 0)))
        return out

    def s2s(self, encoder: list[int], target: list[int]) -> list[float]:
        import torch

        start = self.model.config.decoder_start_token_id
        with torch.no_grad():
            logits = (
                self.model(
                    input_ids=torch.tensor([encoder]),
                    decoder_input_ids=torch.tensor([[start, *target[:-1]]]),
                )
                .logits[0]
                .double()
            )
        return [float(logits[j, t] - torch.logsumexp(logits[j], 0)) for j, t in enumerate(target)]

    def quantities(self, source: str, summary: str) -> dict[str, list[float]]:
        x, y = self.ids(source), self.ids(summary)
        if self.seq2seq:
            bos, eos = [1], [2]
            return {
                "y_s2s": self.s2s(bos + x + eos, y),
                "y_lm": self.s2s(bos + eos, y),  # HaRiM+'s empty source: BOS EOS
                "y_pref": self.s2s(bos + y + self.ids(XSEP) + x + eos, y),
                "x_s2s": self.s2s(bos + y + eos, x),
                "x_lm": self.s2s(bos + eos, x),
            }
        sep, xsep = self.ids(SEP), self.ids(XSEP)
        return {
            "y_s2s": self.causal([1] + x + sep, y),
            "y_lm": self.causal([1] + sep, y),
            "y_pref": self.causal([1] + y + xsep + x + sep, y),
            "x_s2s": self.causal([1] + y + xsep, x),
            "x_lm": self.causal([1], x),
        }

    def metrics(self, source: str, summary: str) -> dict[str, float]:
        q = self.quantities(source, summary)
        m = len(q["y_s2s"])
        n = len(q["x_s2s"])
        loglik = sum(q["y_s2s"]) / m
        harim = 0.0
        for ls, ll in zip(q["y_s2s"], q["y_lm"], strict=True):
            ps, pl = math.exp(ls), math.exp(ll)
            harim += (1 - ps) * (1 - (ps - pl))
        harim /= m
        cop = sum(a - b for a, b in zip(q["y_s2s"], q["y_pref"], strict=True)) / m
        dy_prior = dy_cond = dx_prior = 0.0
        for ls, ll, lp in zip(q["y_s2s"], q["y_lm"], q["y_pref"], strict=True):
            w = math.exp(math.exp(ls))
            dy_prior += w * (ls - ll) / m
            dy_cond += w * (ls - lp) / m
        for ls, ll in zip(q["x_s2s"], q["x_lm"], strict=True):
            dx_prior += math.exp(math.exp(ls)) * (ls - ll) / n
        return {
            "loglik": loglik,
            "harim": -harim,
            "harim_plus": loglik - 7 * harim,
            "cop": cop,
            "fflm": 0.25 * dy_prior + 0.25 * dx_prior + 0.5 * dy_cond,
            "pmi_mink": sum(sorted(a - b for a, b in zip(q["y_s2s"], q["y_lm"], strict=True))[:3])
            / min(3, m),
        }


def _scores(path: Path, role: str, **settings) -> list[dict]:
    metric_settings = {m: {"model": role, **settings} for m in METRICS}
    scorer = Scorer(METRICS, models={role: str(path)}, metric_settings=metric_settings)
    return scorer.score(EXAMPLES), scorer


# --- tests ------------------------------------------------------------------------------------
def test_decoder_only_metrics_match_hand_loop(tiny_llama: Path) -> None:
    results, scorer = _scores(tiny_llama, "lm")
    hand = Hand(tiny_llama)
    for ex, got in zip(EXAMPLES, results, strict=True):
        want = hand.metrics(ex.source, ex.summary)
        for name in METRICS:
            assert got[name].ok, got[name].error
            assert got[name].value == pytest.approx(want[name], abs=1e-5), (ex.id, name)
    # Five metrics shared one engine: the pass plan ran once for the whole batch.
    engines = [v for k, v in scorer.context._shared.items() if k.startswith("likelihood:")]
    assert len(engines) == 1 and engines[0].stats["passes"] == 4  # 2 sources + lm + pref
    # Scores differ between summaries (the test can fail).
    assert len({round(r["loglik"].value, 6) for r in results}) == len(EXAMPLES)


def test_decoder_only_details(tiny_llama: Path) -> None:
    results, _ = _scores(tiny_llama, "lm")
    hand = Hand(tiny_llama)
    q = hand.quantities(EXAMPLES[1].source, EXAMPLES[1].summary)
    fflm = results[1]["fflm"]
    rows = fflm.details["tokens"]
    assert [r["token"] for r in rows] == EXAMPLES[1].summary.split()
    assert [r["s2s"] for r in rows] == pytest.approx(q["y_s2s"], abs=1e-5)
    assert [r["lm"] for r in rows] == pytest.approx(q["y_lm"], abs=1e-5)
    assert [r["pref"] for r in rows] == pytest.approx(q["y_pref"], abs=1e-5)
    assert set(fflm.details) >= {"dY_prior", "dX_prior", "dY_cond", "context"}
    assert results[1]["harim_plus"].details["harim"] == pytest.approx(-results[1]["harim"].value)
    ctx = fflm.details["context"]
    assert ctx["cut"] is False and ctx["source_kept"] == len(EXAMPLES[1].source.split())


def test_seq2seq_metrics_match_hand_loop(tiny_bart: Path) -> None:
    results, _ = _scores(tiny_bart, "seq2seq")
    hand = Hand(tiny_bart, seq2seq=True)
    for ex, got in zip(EXAMPLES, results, strict=True):
        want = hand.metrics(ex.source, ex.summary)
        for name in METRICS:
            assert got[name].ok, got[name].error
            assert got[name].value == pytest.approx(want[name], abs=1e-5), (ex.id, name)


def test_seq2seq_empty_source_is_bos_eos(tiny_bart: Path) -> None:
    model = Scorer(
        ["loglik"],
        models={"seq2seq": str(tiny_bart)},
        metric_settings={"loglik": {"model": "seq2seq"}},  # a model no metric uses is refused
    ).pool.get("seq2seq", "seq2seq-lm")
    engine = LikelihoodEngine(model, LikelihoodConfig(role="seq2seq"))
    ex = EXAMPLES[0]
    engine.request([(ex.source, ex.summary)], ["y_lm"])
    got = engine.get(ex.source, ex.summary)["y_lm"]
    hand = Hand(tiny_bart, seq2seq=True)
    y = hand.ids(ex.summary)
    assert got == pytest.approx(hand.s2s([1, 2], y), abs=1e-5)
    # ...and it is not what an encoder input of EOS alone would give.
    assert not np.allclose(got, hand.s2s([2], y), atol=1e-4)
    # An empty source scores like the empty-source prior.
    engine.request([("", ex.summary)], ["y_s2s"])
    assert engine.get("", ex.summary)["y_s2s"] == pytest.approx(got, abs=1e-5)


def test_prefix_cache_and_batching_equal_one_at_a_time(tiny_llama: Path) -> None:
    model = Scorer(["loglik"], models={"lm": str(tiny_llama)}).pool.get("lm", "causal-lm")
    quantities = ["y_s2s", "y_lm", "y_pref", "x_s2s", "x_lm"]
    batched = LikelihoodEngine(model, LikelihoodConfig(prefix_cache=True))
    batched.request([(e.source, e.summary) for e in EXAMPLES], quantities)
    for ex in EXAMPLES:
        alone = LikelihoodEngine(model, LikelihoodConfig(prefix_cache=False))
        alone.request([(ex.source, ex.summary)], quantities)
        a, b = alone.get(ex.source, ex.summary), batched.get(ex.source, ex.summary)
        for q in quantities:
            assert b[q] == pytest.approx(a[q], abs=1e-5, nan_ok=True), (ex.id, q)
    # The cached plan ran fewer tokens: each distinct source prefix once, not per summary.
    uncached = LikelihoodEngine(model, LikelihoodConfig(prefix_cache=False))
    uncached.request([(e.source, e.summary) for e in EXAMPLES], ["y_s2s"])
    cached = LikelihoodEngine(model, LikelihoodConfig(prefix_cache=True))
    cached.request([(e.source, e.summary) for e in EXAMPLES], ["y_s2s"])
    uncached.run()
    cached.run()
    n_a = len(cached._ids(SOURCE_A)) + 5  # [bos] + source + 4 separator tokens
    assert uncached.stats["tokens"] - cached.stats["tokens"] == 2 * n_a


def test_backend_padding_does_not_change_scores(tiny_llama: Path) -> None:
    model = Scorer(["loglik"], models={"lm": str(tiny_llama)}).pool.get("lm", "causal-lm")
    seqs = [[[1, 5, 9], [10, 11, 12, 13, 14]], [[1, 7]], [[1, 20, 21, 22], [23]]]
    batched = model.segment_logprobs(seqs)
    for seq, got in zip(seqs, batched, strict=True):
        alone = model.segment_logprobs([seq])[0]
        for g, a in zip(got, alone, strict=True):
            assert g == pytest.approx(a, abs=1e-6, nan_ok=True)
    assert math.isnan(batched[0][0][0])  # the first token has no context
    # Prefix reuse (cache repeated over a padded batch) equals the full sequences.
    prefix = [1, 5, 9, 30]
    conts = [[[10, 11, 12]], [[13]], [[14, 15], [16, 17, 18, 19]]]
    pre_lp, got = model.prefix_logprobs(prefix, conts)
    full = model.segment_logprobs([[prefix, *c] for c in conts])
    assert pre_lp == pytest.approx(full[0][0], abs=1e-6, nan_ok=True)
    for g, f in zip(got, full, strict=True):
        for gs, fs in zip(g, f[1:], strict=True):
            assert gs == pytest.approx(fs, abs=1e-5)
    # The chunked head equals the model's own logits path.
    model._head_here = False
    try:
        slow = model.segment_logprobs(seqs)
    finally:
        model._head_here = True
    for s, b in zip(slow, batched, strict=True):
        for ss, bs in zip(s, b, strict=True):
            assert ss == pytest.approx(bs, abs=1e-5, nan_ok=True)


def test_target_logprobs_string_api(tiny_llama: Path) -> None:
    model = Scorer(["loglik"], models={"lm": str(tiny_llama)}).pool.get("lm", "causal-lm")
    out = model.target_logprobs([("the council", "approved a new park")])[0]
    hand = Hand(tiny_llama)
    assert out.tokens == ["approved", "a", "new", "park"]
    want = hand.causal([1] + hand.ids("the council"), hand.ids("approved a new park"))
    assert out.logprobs == pytest.approx(want, abs=1e-5)


@pytest.mark.parametrize("cut", ["keep_start", "keep_end"])
def test_cut_policy_is_recorded_and_window_respected(tiny_llama: Path, cut: str) -> None:
    model = Scorer(["loglik"], models={"lm": str(tiny_llama)}).pool.get("lm", "causal-lm")
    engine = LikelihoodEngine(model, LikelihoodConfig(max_length=36, cut=cut))
    ex = EXAMPLES[0]
    engine.request([(ex.source, ex.summary)], ["y_s2s", "y_pref", "x_lm"])
    res = engine.get(ex.source, ex.summary)
    ctx = res.context
    x_words = ex.source.split()
    y_len = len(ex.summary.split())
    # Largest pass [bos Y sep_x X sep_y Y] fits in 36 tokens: 1 + 7 + 0 + n + 4 + 7 <= 36.
    assert ctx["cut"] is True and ctx["policy"] == cut and ctx["window"] == 36
    assert ctx["summary_kept"] == y_len == 7
    assert ctx["source_kept"] == 36 - 1 - 4 - 2 * y_len == 17
    kept = x_words[: ctx["source_kept"]] if cut == "keep_start" else x_words[-ctx["source_kept"] :]
    assert res.x_tokens == kept
    hand = Hand(tiny_llama)
    x = hand.ids(" ".join(kept))
    want = hand.causal([1] + x + hand.ids(SEP), hand.ids(ex.summary))
    assert res["y_s2s"] == pytest.approx(want, abs=1e-5)


def test_select_cut_keeps_the_sentences_the_summary_needs(tiny_llama: Path) -> None:
    model = Scorer(["loglik"], models={"lm": str(tiny_llama)}).pool.get("lm", "causal-lm")
    engine = LikelihoodEngine(model, LikelihoodConfig(max_length=36, cut="select"))
    summary = "residents asked for more trees"
    engine.request([(SOURCE_A, summary)], ["y_s2s", "y_pref", "x_lm"])
    res = engine.get(SOURCE_A, summary)
    ctx = res.context
    # Budget 36 - 1 - 4 - 2 * 5 = 21 source tokens of 22: the third sentence is the evidence,
    # the second comes with it, and the first (9 words) no longer fits.
    assert ctx["policy"] == "select" and ctx["cut"] is True
    assert ctx["sentences"] == 3 and ctx["sentences_kept"] == 2
    kept = "the mayor said work starts in june . residents asked for more trees"
    assert res.x_tokens == kept.split() and ctx["source_kept"] == len(kept.split())
    hand = Hand(tiny_llama)
    want = hand.causal([1] + hand.ids(kept) + hand.ids(SEP), hand.ids(summary))
    assert res["y_s2s"] == pytest.approx(want, abs=1e-5)
    # keep_start, for contrast, keeps the first 21 tokens.
    start = LikelihoodEngine(model, LikelihoodConfig(max_length=36, cut="keep_start"))
    start.request([(SOURCE_A, summary)], ["y_s2s"])
    assert start.get(SOURCE_A, summary).x_tokens == SOURCE_A.split()[:21]


def test_a_source_within_the_window_is_never_cut(tiny_llama: Path) -> None:
    model = Scorer(["loglik"], models={"lm": str(tiny_llama)}).pool.get("lm", "causal-lm")
    engine = LikelihoodEngine(model, LikelihoodConfig())  # select, the model's 128 tokens
    engine.request([(SOURCE_A, "residents asked for more trees")], ["y_s2s"])
    res = engine.get(SOURCE_A, "residents asked for more trees")
    assert res.context["cut"] is False and "sentences" not in res.context
    assert res.x_tokens == SOURCE_A.split()


def test_bad_settings_and_empty_summary(tiny_llama: Path) -> None:
    with pytest.raises(InputError):
        Scorer(["loglik"], metric_settings={"loglik": {"cut": "middle"}})
    with pytest.raises(InputError):
        Scorer(["loglik"], metric_settings={"loglik": {"model": "nli"}})
    with pytest.raises(InputError):
        Scorer(["fflm"], metric_settings={"fflm": {"weights": (1, 2)}})
    # Values that made every example unscorable, or were read as something else, are refused.
    for metric, bad in (
        ("harim_plus", {"lambda": float("inf")}),
        ("harim_plus", {"lambda": float("nan")}),
        ("harim_plus", {"lambda": True}),
        ("fflm", {"weights": (float("nan"), 0, 0)}),
        ("loglik", {"prefix_cache": "no"}),
    ):
        with pytest.raises(InputError):
            Scorer([metric], metric_settings={metric: bad})
    scorer = Scorer(["loglik", "fflm"], models={"lm": str(tiny_llama)})
    res = scorer.score([Example("e", SOURCE_A, ""), Example("s", "", "the park .")])
    assert not res[0]["loglik"].ok and "empty summary" in res[0]["loglik"].error
    # An empty source fails every metric (the scorer's blank_text), as fflm's formula always
    # did: scored with the bare prompt it gave pmi_mink 0.0, above most faithful summaries.
    assert not res[1]["loglik"].ok and res[1]["loglik"].error == "empty source"
    assert not res[1]["fflm"].ok and "empty source" in res[1]["fflm"].error


def test_model_role_in_settings_hash(tiny_llama: Path, tiny_bart: Path) -> None:
    scorer = Scorer(
        ["loglik", "cop"],
        models={"lm": str(tiny_llama), "seq2seq": str(tiny_bart)},
        metric_settings={"cop": {"model": "seq2seq"}},
    )
    # spaCy splits sentences (a long source's, for the select cut), so its model is named too.
    assert scorer.metrics[0].roles == {"lm": "causal-lm", "spacy": "pipeline"}
    assert scorer.metrics[1].roles == {"seq2seq": "seq2seq-lm", "spacy": "pipeline"}
    res = scorer.score(EXAMPLES[:1])[0]
    assert res["loglik"].ok and res["cop"].ok


def test_resolve_accepts_local_dirs(tiny_llama: Path) -> None:
    assert resolve("lm", str(tiny_llama)).origin == "path"


@pytest.mark.slow
@pytest.mark.usefixtures("transformers")  # the GGUF checkpoint loads through transformers
def test_smollm2_on_a_bump_pair(bump_rows: list[dict]) -> None:
    """Real default model on BUMP pair 0: caching changes nothing, the reference wins."""
    pair = [r for r in bump_rows if r["pair_id"] == bump_rows[0]["pair_id"]]
    ref = next(r for r in pair if r["role"] == "reference")
    edit = next(r for r in pair if r["role"] == "edited")
    exs = [
        Example("ref", ref["source"], ref["summary"]),
        Example("ed", edit["source"], edit["summary"]),
    ]
    scorer = Scorer(["loglik", "harim_plus"])
    cached = scorer.score(exs)
    plain = Scorer(
        ["loglik"], metric_settings={"loglik": {"prefix_cache": False}}, pool=scorer.pool
    ).score(exs)
    for c, p in zip(cached, plain, strict=True):
        assert c["loglik"].value == pytest.approx(p["loglik"].value, abs=1e-4)
    assert cached[0]["loglik"].value > cached[1]["loglik"].value
    assert cached[0]["harim_plus"].value > cached[1]["harim_plus"].value


def test_sentence_support_aligns_tokens_with_sentences() -> None:
    """Byte-level BPE tokens (leading spaces, 'Ġ'-free text) map onto spaCy sentences."""
    from faithgate.metrics.likelihood import sentence_support

    text = "Keefe died at 92.  She posed in 1943."
    sentences = ["Keefe died at 92.", "She posed in 1943."]
    tokens = ["Ke", "efe", " died", " at", " 92", ".", "  She", " posed", " in", " 1943", "."]
    offsets, at = [], 0
    for tok in tokens:
        offsets.append((at, at + len(tok)))
        at += len(tok)
    s2s = np.array([-1.0, -1.0, -2.0, -2.0, -4.0, -2.0, -1.0, -3.0, -1.0, -7.0, float("nan")])
    support = sentence_support(sentences, text, offsets, s2s)
    assert [s.index for s in support] == [0, 1]
    assert support[0].value == pytest.approx(-12.0 / 6)
    assert support[1].value == pytest.approx(-12.0 / 4)  # NaN token skipped; "  She" is in it
    assert support[1].text == "She posed in 1943."


@pytest.fixture(scope="module")
def byte_llama(tmp_path_factory: pytest.TempPathFactory, torch, transformers) -> Path:
    """A tiny random Llama over a byte-level BPE tokenizer: an emoji or a Cyrillic letter
    outside its small vocabulary is several byte tokens, as in SmolLM2."""
    from tiny_models import bpe_tokenizer, tiny_llama_config

    path = tmp_path_factory.mktemp("byte-llama")
    bpe = bpe_tokenizer([SOURCE_A, SOURCE_B, *(ex.summary for ex in EXAMPLES)])
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(tiny_llama_config(bpe))
    with torch.no_grad():  # sharpen the near-uniform random init so token values differ
        model.lm_head.weight.mul_(20)
    model.save_pretrained(path, safe_serialization=True)
    bpe.save_pretrained(path)
    return path


@pytest.mark.parametrize(
    "summary",
    [
        "\U0001f622\U0001f622\U0001f622\U0001f622 The council approved. The mayor said so.",
        "Совет одобрил парк. Мэр сказал, что работа начнётся в июне.",
    ],
    ids=["emoji", "cyrillic"],
)
def test_sentence_support_places_byte_tokens_of_a_character(byte_llama: Path, summary) -> None:
    """Tokens were placed by adding up the lengths of their texts, and each byte piece of an
    emoji or a Cyrillic letter reads as one U+FFFD: the count ran ahead of the text and later
    tokens were counted in the wrong sentence (issue s20, metrics review finding 1)."""
    import transformers

    from faithgate import text as textmod

    score = Scorer(["loglik"], models={"lm": str(byte_llama)}).score(
        [Example("e", SOURCE_A, summary)]
    )[0]["loglik"]
    assert score.ok, score.error
    values = [row["s2s"] for row in score.details["tokens"]]
    tok = transformers.AutoTokenizer.from_pretrained(byte_llama)
    enc = tok(summary, add_special_tokens=False, return_offsets_mapping=True)
    assert len(enc["input_ids"]) > len(summary.split()) + 8  # byte pieces: the case at issue
    starts, at = [], 0
    for sentence in textmod.split_sentences(summary):
        at = summary.index(sentence, at)
        starts.append(at)
    assert len(starts) >= 2
    want: dict[int, list[float]] = {}
    for (a, b), v in zip(enc["offset_mapping"], values, strict=True):
        first_char = a + len(summary[a:b]) - len(summary[a:b].lstrip())  # " The" is in "The"
        if v is not None:
            owner = int(np.searchsorted(starts, first_char, side="right")) - 1
            want.setdefault(owner, []).append(v)
    assert {s.index: s.value for s in score.sentences} == {
        k: pytest.approx(np.mean(v)) for k, v in want.items()
    }


def test_offsets_by_decoding_agree_with_a_fast_tokenizers_offsets(byte_llama: Path) -> None:
    """The fallback for a tokenizer without offsets (a slow one) starts each token where the
    fast tokenizer's offsets do (at its first non-space character), byte pieces included."""
    import transformers

    from faithgate.backends.base import offsets_by_decoding

    tok = transformers.AutoTokenizer.from_pretrained(byte_llama)
    for text in ["\U0001f622\U0001f622 The council. Мэр сказал.", "Dvořák met Łódź in Brno."]:
        enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
        spans = offsets_by_decoding(text, enc["input_ids"], tok.decode)
        want = [a + len(text[a:b]) - len(text[a:b].lstrip()) for a, b in enc["offset_mapping"]]
        assert [a for a, _ in spans] == want


def test_bench_shares_likelihood_passes_between_metrics(tiny_llama: Path, tmp_path: Path) -> None:
    """``Bench`` scores several likelihood metrics through one engine: every token sequence
    reaches the model once for all of them (the shared-pass guarantee), exactly the sequences
    one ``Scorer`` over the same metrics runs, and the scores are the Scorer's."""
    from faithgate.evaluation.bench.scoring import Bench

    metrics = ["loglik", "harim_plus", "cop"]

    def record(model) -> list[tuple[int, ...]]:
        seen: list[tuple[int, ...]] = []
        prefix_logprobs, segment_logprobs = model.prefix_logprobs, model.segment_logprobs

        def prefix(prefix_ids, continuations, score_prefix=True):
            seen.extend(tuple(prefix_ids) + tuple(c[0]) for c in continuations)
            return prefix_logprobs(prefix_ids, continuations, score_prefix=score_prefix)

        def segments(seqs):
            seen.extend(tuple(t for seg in seq for t in seg) for seq in seqs)
            return segment_logprobs(seqs)

        model.prefix_logprobs, model.segment_logprobs = prefix, segments
        return seen

    reference = Scorer(metrics, models={"lm": str(tiny_llama)})
    want_seqs = record(reference.pool.get("lm", "causal-lm"))
    want = reference.score(EXAMPLES)
    assert len(want_seqs) == len(set(want_seqs))

    bench = Bench(metrics, cache=tmp_path / "c.sqlite", models={"lm": str(tiny_llama)})
    seqs = record(bench.pool.get("lm", "causal-lm"))
    runs = bench.score(EXAMPLES)
    # One pass per distinct input across the three metrics (a Scorer per metric would run
    # the source-conditioned summary three times), and nothing the Scorer did not need.
    assert len(seqs) == len(set(seqs)), "a sequence was run twice"
    assert sorted(seqs) == sorted(want_seqs)
    for name in metrics:
        assert runs[name].computed == len(EXAMPLES) and runs[name].cached == 0
        for i, row in enumerate(want):
            assert runs[name].scores[i] == pytest.approx(row[name].value, abs=1e-5)
    # A rerun is read from the cache: no pass at all.
    seqs.clear()
    again = bench.score(EXAMPLES)
    assert seqs == [] and all(again[m].cached == len(EXAMPLES) for m in metrics)


def test_pmi_mink_names_its_lowest_tokens_and_validates_k(tiny_llama: Path) -> None:
    settings = {"model": "lm", "k": 2}
    scorer = Scorer(
        ["pmi_mink"], models={"lm": str(tiny_llama)}, metric_settings={"pmi_mink": settings}
    )
    score = scorer.score(EXAMPLES[:1])[0]["pmi_mink"]
    lowest = score.details["lowest"]
    assert len(lowest) == 2 and lowest[0]["pmi"] <= lowest[1]["pmi"]
    assert score.value == pytest.approx((lowest[0]["pmi"] + lowest[1]["pmi"]) / 2)
    with pytest.raises(InputError, match="k must be an integer >= 1"):
        Scorer(["pmi_mink"], metric_settings={"pmi_mink": {"k": 0}})


def test_a_summary_cut_to_fit_the_window_is_failed_not_scored_in_part(tiny_llama: Path) -> None:
    """Window 36: the 22-token source and a 9-token summary do not fit [bos Y X sep Y], and the
    summary keeps at most (36 - 5) // 4 = 7 tokens. Its last two tokens were never scored, so
    every likelihood metric fails it (it used to score the first 7 and pass); a 7-token summary
    beside the same source is scored whole (only the source is cut)."""
    settings = {m: {"model": "lm", "max_length": 36} for m in METRICS}
    scorer = Scorer(METRICS, models={"lm": str(tiny_llama)}, metric_settings=settings)
    too_long, fits = scorer.score([EXAMPLES[1], EXAMPLES[0]])
    for name in METRICS:
        assert not too_long[name].ok, name
        assert too_long[name].error.startswith(
            "summary too long for the LM window: 7 of 9 tokens could be scored"
        )
        context = too_long[name].details["context"]
        assert context["summary_kept"] == 7 and context["summary_tokens"] == 9
        assert fits[name].ok, fits[name].error
        context = fits[name].details["context"]
        assert context["cut"] is True and context["summary_kept"] == context["summary_tokens"]
