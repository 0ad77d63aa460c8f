"""Span-level unsupported-content detector (issue 11): word features, synthetic training, eval.

    python benchmarks/span_support.py synth --out DIR [--minutes 25] [--seed 0]
    python benchmarks/span_support.py fit --work DIR [--seed 0]
    python benchmarks/span_support.py eval --work DIR --data FILE [--limit N] [--out JSON]
    python benchmarks/span_support.py pairs --work DIR [--out JSON]    # BUMP word diagnosis

Every word of a summary (spaCy token, punctuation excluded) gets cheap evidence features:
exact / lemma / canonical presence in the source; best-match cosine of its MiniLM wordpieces
(the ``embedder`` role, as ``bertscore`` uses it) to the source's wordpieces, overall and within
the source sentences that best support the rest of its sentence; whether it occurs in those
sentences; whether its left / right word bigram occurs in the source; whether it and its
syntactic neighbours co-occur in a source sentence; entity / number / date found in the source
text; negator against the polarity of the aligned source sentence; part of speech. A logistic
regression (scikit-learn, fixed seed) predicts P(word unsupported); a summary's score is an
aggregate of its words' probabilities, negated (higher = more faithful).

Training data is synthetic only (``synth``): documents of the Lee news corpus and the Wikipedia
sample in the gensim 4.4.0 wheel (``faithgate.training.corpora``). A summary is 1-3 sentences
of the document (each compressed with probability 0.6, ``synth.compress``); its unfaithful
twins are ``faithgate.perturb`` edits against the whole document, whose edited span is known,
so word labels are free (1 inside the replacement, 0 elsewhere). Documents whose seeded hash
falls under 15% are held out and used to choose the aggregate and C; ``../shared/data`` is
never read by ``synth`` or ``fit``.

Measured result (docs/models/checker.md, "Tried and not shipped: a span-level ..."): BUMP task 1
pooled ROC AUC 0.592, consistency 0.592; below the best current metric on the other shared
sets. Not shipped as a metric.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import random
import sys
import time
import unicodedata
from pathlib import Path
from typing import Any

import numpy as np

NEGATORS = {"not", "n't", "no", "never", "nobody", "none", "nothing", "neither", "nor", "nowhere"}
PARTICIPANT = {"PERSON", "ORG", "NORP", "GPE", "LOC", "FAC", "PRODUCT", "EVENT", "WORK_OF_ART"}
TIME = {"DATE", "TIME"}
NUMBER = {"CARDINAL", "MONEY", "PERCENT", "QUANTITY", "ORDINAL"}
POS = ("PROPN", "NOUN", "VERB", "ADJ", "NUM", "ADV", "PRON", "AUX", "ADP", "DET")
FEATURES = (
    "bias_content",
    "exact",
    "lemma",
    "canon",
    "log_src_count",
    "emb_best",
    "emb_aligned",
    "in_aligned",
    "in_aligned2",
    "bigram_left",
    "bigram_right",
    "cooc_nbrs",
    "no_nbrs",
    "is_entity",
    "entity_found",
    "is_time",
    "time_found",
    "is_number",
    "number_found",
    "is_negator",
    "negation_mismatch",
    "is_stop",
    "capital_mid",
    *(f"pos_{p}" for p in POS),
    "absent_x_propn",
    "absent_x_num",
    "absent_x_emb",
    "aligned_absent_x_entity",
)


def _fold(text: str) -> str:
    """Lower case with accents stripped, one output character per input character."""
    out = []
    for ch in text.lower():
        base = unicodedata.normalize("NFD", ch)
        base = "".join(c for c in base if not unicodedata.combining(c))
        out.append(base[:1] if base else ch)
    return "".join(out)


def piece_spans(text: str, pieces: list[str]) -> list[tuple[int, int]]:
    """Character span of each WordPiece in ``text`` (found left to right; (-1, -1) if lost)."""
    folded = _fold(text)
    cur, spans = 0, []
    for p in pieces:
        p = p[2:] if p.startswith("##") else p
        at = folded.find(p, cur) if p and p != "[unk]" else -1
        if at < 0 or at - cur > 40:
            spans.append((-1, -1))
            continue
        spans.append((at, at + len(p)))
        cur = at + len(p)
    return spans


def _unit(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, dtype=np.float32)
    return v / np.clip(np.linalg.norm(v, axis=1, keepdims=True), 1e-12, None)


class Source:
    """What every summary of one source needs, computed once."""

    def __init__(self, text: str, emb: Any, spacy_model: str | None) -> None:
        from faithgate.metrics.ner import SourceText, canonical_word
        from faithgate.text import parse

        self.text = text
        self.doc = parse(text, spacy_model)
        self.found = SourceText(text)
        toks = [t for t in self.doc if not t.is_space]
        self.words = {t.lower_ for t in toks}
        self.lemmas = {t.lemma_.lower() for t in toks}
        self.canon = {canonical_word(t.text) for t in toks}
        self.lemma_count: dict[str, int] = {}
        for t in toks:
            self.lemma_count[t.lemma_.lower()] = self.lemma_count.get(t.lemma_.lower(), 0) + 1
        low = [t.lower_ for t in toks if not t.is_punct]
        self.bigrams = set(zip(low, low[1:], strict=False))
        self.sents = [s for s in self.doc.sents if s.text.strip()]
        self.sent_keys = [
            {t.lemma_.lower() for t in s if not t.is_space} | {t.lower_ for t in s}
            for s in self.sents
        ]
        self.sent_neg = [
            sum(t.dep_ == "neg" or t.lower_ in NEGATORS for t in s) % 2 == 1 for s in self.sents
        ]
        # wordpieces: unit vectors and the sentence owning each
        self.vec = _unit(emb.vectors) if len(emb.tokens) else np.zeros((0, 384), np.float32)
        spans = piece_spans(text, emb.tokens)
        starts = np.array([s.start_char for s in self.sents])
        owner = []
        for a, _ in spans:
            owner.append(int(np.searchsorted(starts, a, side="right") - 1) if a >= 0 else -1)
        self.owner = np.array(owner, dtype=np.int64)


def featurize(src: Source, summary: str, emb: Any, spacy_model: str | None):  # type: ignore[no-untyped-def]
    """(words [(text, start, end)], X (n_words, len(FEATURES))) for one summary."""
    from faithgate.metrics.ner import canonical_word
    from faithgate.text import parse

    doc = parse(summary, spacy_model)
    vec = _unit(emb.vectors) if len(emb.tokens) else np.zeros((0, 384), np.float32)
    spans = piece_spans(summary, emb.tokens)
    sim = vec @ src.vec.T if len(vec) and len(src.vec) else np.zeros((len(vec), len(src.vec)))
    best_piece = sim.max(axis=1) if sim.size else np.zeros(len(vec))
    ent_found: dict[int, bool] = {}
    ent_label: dict[int, str] = {}
    for ent in doc.ents:
        ok = src.found.find(ent.text) is not None
        for t in ent:
            ent_found[t.i] = ok
            ent_label[t.i] = ent.label_
    n_src = len(src.sents)
    words, rows = [], []
    for sent in doc.sents:
        toks = [t for t in sent if not (t.is_punct or t.is_space)]
        if not toks:
            continue
        content = [t for t in toks if not t.is_stop]
        keys = [t.lemma_.lower() for t in content]
        # M[k, j]: content lemma k (or its word) occurs in source sentence j
        M = np.array(
            [
                [(k in sk or t.lower_ in sk) for sk in src.sent_keys]
                for k, t in zip(keys, content, strict=False)
            ],
            dtype=float,
        ).reshape(len(content), n_src)
        total = M.sum(axis=0) if len(content) else np.zeros(n_src)
        pol = sum(t.dep_ == "neg" or t.lower_ in NEGATORS for t in sent) % 2 == 1
        top_all = np.argsort(-total, kind="stable")[:2] if n_src else np.array([], int)
        for t in toks:
            lem = t.lemma_.lower()
            mine = np.array([(lem in sk or t.lower_ in sk) for sk in src.sent_keys], dtype=float)
            rest = total - (mine if not t.is_stop else 0)
            top = np.argsort(-rest, kind="stable")[:2] if n_src else np.array([], int)
            in1 = float(mine[top[:1]].max()) if len(top) else 0.0
            in2 = float(mine[top].max()) if len(top) else 0.0
            # wordpieces of this word
            idx = [
                k for k, (a, b) in enumerate(spans) if a >= 0 and a < t.idx + len(t) and b > t.idx
            ]
            if idx and sim.size:
                eb = float(best_piece[idx].min())
                mask = np.isin(src.owner, top)
                ea = (
                    float(sim[np.ix_(idx, np.where(mask)[0])].max(axis=1).min())
                    if mask.any()
                    else 0.0
                )
            else:
                eb = ea = 1.0
            prev = t.nbor(-1) if t.i > sent.start else None
            nxt = t.nbor(1) if t.i + 1 < sent.end else None
            bl = (
                float(prev is not None and (prev.lower_, t.lower_) in src.bigrams)
                if prev is not None and not prev.is_punct
                else 0.5
            )
            br = (
                float((t.lower_, nxt.lower_) in src.bigrams)
                if nxt is not None and not nxt.is_punct
                else 0.5
            )
            nbrs = [
                n
                for n in [t.head, *t.children]
                if n.i != t.i and not (n.is_stop or n.is_punct or n.is_space)
            ]
            if nbrs:
                co = []
                for n in nbrs:
                    nl = n.lemma_.lower()
                    co.append(
                        any(
                            (lem in sk or t.lower_ in sk) and (nl in sk or n.lower_ in sk)
                            for sk in src.sent_keys
                        )
                    )
                cooc, no_n = float(np.mean(co)), 0.0
            else:
                cooc, no_n = 1.0, 1.0
            label = ent_label.get(t.i, "")
            is_ent = float(label in PARTICIPANT)
            is_time = float(label in TIME)
            is_num = float(label in NUMBER or t.like_num)
            found = ent_found.get(t.i, True)
            exact = float(t.lower_ in src.words)
            lemma = float(lem in src.lemmas)
            canon = float(canonical_word(t.text) in src.canon)
            is_neg = float(t.dep_ == "neg" or t.lower_ in NEGATORS)
            neg_mis = 0.0
            if is_neg and len(top_all):
                neg_mis = float(pol != src.sent_neg[int(top_all[0])])
            absent = 1.0 - max(exact, lemma, canon)
            f = {
                "bias_content": float(not t.is_stop),
                "exact": exact,
                "lemma": lemma,
                "canon": canon,
                "log_src_count": math.log1p(src.lemma_count.get(lem, 0)),
                "emb_best": eb,
                "emb_aligned": ea,
                "in_aligned": in1,
                "in_aligned2": in2,
                "bigram_left": bl,
                "bigram_right": br,
                "cooc_nbrs": cooc,
                "no_nbrs": no_n,
                "is_entity": is_ent,
                "entity_found": float(is_ent and found),
                "is_time": is_time,
                "time_found": float(is_time and found),
                "is_number": is_num,
                "number_found": float(is_num and (found and exact)),
                "is_negator": is_neg,
                "negation_mismatch": neg_mis,
                "is_stop": float(t.is_stop),
                "capital_mid": float(t.i > sent.start and t.text[:1].isupper()),
                **{f"pos_{p}": float(t.pos_ == p) for p in POS},
                "absent_x_propn": absent * float(t.pos_ == "PROPN"),
                "absent_x_num": absent * is_num,
                "absent_x_emb": absent * eb,
                "aligned_absent_x_entity": (1.0 - in2) * max(is_ent, is_time, is_num),
            }
            words.append((t.text, t.idx, t.idx + len(t)))
            rows.append([f[k] for k in FEATURES])
    X = np.array(rows, dtype=np.float32).reshape(len(rows), len(FEATURES))
    return words, X


class Featurizer:
    def __init__(self, backend: str = "auto", spacy_model: str | None = None) -> None:
        from faithgate.backends import ModelPool
        from faithgate.metrics.base import ScoringContext

        self.ctx = ScoringContext(ModelPool(backend=backend))
        self.encoder = self.ctx.model("embedder", "text-encoder")
        self.spacy_model = spacy_model
        self._sources: dict[str, Source] = {}

    def source(self, text: str) -> Source:
        if text not in self._sources:
            if len(self._sources) > 64:
                self._sources.clear()
            emb = self.encoder.token_embeddings([text])[0]
            self._sources[text] = Source(text, emb, self.spacy_model)
        return self._sources[text]

    def many(self, source: str, summaries: list[str]):  # type: ignore[no-untyped-def]
        src = self.source(source)
        embs = self.encoder.token_embeddings(summaries) if summaries else []
        return [
            featurize(src, s, e, self.spacy_model) for s, e in zip(summaries, embs, strict=True)
        ]


# ------------------------------------------------------------------ synthetic data


def held_out(doc_id: str, seed: int) -> bool:
    return int(hashlib.sha256(f"{seed}:{doc_id}".encode()).hexdigest()[:8], 16) % 100 < 15


def _summaries(doc, rng: random.Random, n: int, spacy_model: str | None) -> list[str]:  # type: ignore[no-untyped-def]
    from faithgate.text import parse
    from faithgate.training.synth import compress

    sents = [s for s in parse(doc.text, spacy_model).sents if 6 <= len(s.text.split()) <= 45]
    out = []
    for _ in range(n):
        if not sents:
            break
        k = rng.randint(1, min(3, len(sents)))
        # lead-biased like news highlights: draw from the first half more often
        pool = sents[: max(k, len(sents) // 2)] if rng.random() < 0.6 else sents
        chosen = sorted(rng.sample(pool, min(k, len(pool))), key=lambda s: s.start)
        parts = [compress(s, rng) if rng.random() < 0.6 else s.text.strip() for s in chosen]
        out.append(" ".join(parts))
    return list(dict.fromkeys(out))


def paraphrase(summary: str, rng: random.Random, spacy_model: str | None) -> str:
    """A faithful rewording of ``summary`` of the kinds summarizers make, so that positives are
    not all copies: a verb replaced by a synonym (``data/synonyms.json``, same inflection),
    a full person name shortened to the surname, a pronoun replaced by its antecedent."""
    from faithgate.engines.spans import resolve_pronoun
    from faithgate.perturb.lexicon import synonym_groups, verb_form
    from faithgate.text import parse

    doc = parse(summary, spacy_model)
    groups = synonym_groups()
    edits: list[tuple[int, int, str]] = []
    for t in doc:
        if t.pos_ == "VERB" and t.lemma_.lower() in groups:
            others = sorted(groups[t.lemma_.lower()] - {t.lemma_.lower()})
            if others:
                form = verb_form(rng.choice(others), t.tag_)
                if form and form.isalpha():
                    edits.append((t.idx, t.idx + len(t), form))
        elif t.lower_ in ("he", "she", "they") and t.i > 0:
            ante = resolve_pronoun(t)
            if ante:
                text = ante if t.i != t.sent.start else ante[:1].upper() + ante[1:]
                edits.append((t.idx, t.idx + len(t), text))
    for ent in doc.ents:
        if ent.label_ == "PERSON" and len(ent) >= 2 and ent[-1].text.isalpha():
            edits.append((ent.start_char, ent.end_char, ent[-1].text))
    rng.shuffle(edits)
    chosen: list[tuple[int, int, str]] = []
    for e in edits:
        if len(chosen) < 2 and all(e[1] <= c[0] or e[0] >= c[1] for c in chosen):
            chosen.append(e)
    for a, b, rep in sorted(chosen, reverse=True):
        summary = summary[:a] + rep + summary[b:]
    return summary


def cmd_synth(args: argparse.Namespace) -> None:
    from faithgate.perturb import perturb
    from faithgate.training import corpora

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    gensim = corpora.fetch(corpora.GENSIM_DIST, sdist=False)
    docs = corpora.lee_news(gensim) + corpora.wikipedia(gensim)
    random.Random(args.seed).shuffle(docs)
    items_path = out / "items.jsonl"
    done = set()
    if items_path.exists():
        for line in items_path.read_text().splitlines():
            with contextlib.suppress(ValueError, KeyError):
                done.add(json.loads(line)["doc"])
    fz = Featurizer(args.backend)
    t0 = time.time()
    n_items = 0
    with items_path.open("a") as fh:
        for k, doc in enumerate(docs):
            if time.time() - t0 > args.minutes * 60:
                print(f"time box reached after {k} documents", flush=True)
                break
            if doc.id in done:
                continue
            rng = random.Random(f"{args.seed}:{doc.id}")
            rows = []
            for summ in _summaries(doc, rng, args.summaries_per_doc, None):
                if rng.random() < args.paraphrase:
                    summ = paraphrase(summ, rng, None)
                try:
                    edits = perturb(doc.text, summ, seed=rng.randrange(1 << 30), max_per_type=1)
                except Exception:  # noqa: BLE001 - a parse corner case costs one summary
                    edits = []
                rng.shuffle(edits)
                variants = [(summ, None, None, "faithful")]
                variants += [(e.summary, e.start, e.new_end, e.type) for e in edits[: args.edits]]
                feats = fz.many(doc.text, [v[0] for v in variants])
                for (text, a, b, kind), (words, X) in zip(variants, feats, strict=True):
                    y = [int(a is not None and ws < b and we > a) for _, ws, we in words]
                    rows.append(
                        {
                            "doc": doc.id,
                            "corpus": doc.corpus,
                            "held_out": held_out(doc.id, args.seed),
                            "summary": text,
                            "base": summ,
                            "kind": kind,
                            "faithful": a is None,
                            "words": [w for w, _, _ in words],
                            "y": y,
                            "X": np.round(X, 4).tolist(),
                        }
                    )
            if not rows:
                rows.append({"doc": doc.id, "empty": True})
            for r in rows:
                fh.write(json.dumps(r) + "\n")
            fh.flush()
            n_items += len(rows)
            if (k + 1) % 10 == 0:
                print(f"{k + 1} docs, {n_items} items, {time.time() - t0:.0f}s", flush=True)


# ------------------------------------------------------------------ fit and aggregate

AGGREGATES = ("max", "noisy_or", "top2", "top3", "sum_logit_top2", "mean", "max_mean")


def aggregate(p: np.ndarray, how: str) -> float:
    """Summary-level 'unsupported' from word probabilities (higher = less faithful)."""
    if p.size == 0:
        return 0.0
    s = np.sort(p)[::-1]
    if how == "max":
        return float(s[0])
    if how == "mean":
        return float(p.mean())
    if how == "max_mean":  # max, ties broken by the mean (a minimal pair often shares its max)
        return float(s[0] + 0.01 * p.mean())
    if how == "noisy_or":
        return float(1.0 - np.exp(np.sum(np.log1p(-np.clip(p, 0, 1 - 1e-9)))))
    if how.startswith("top"):
        return float(s[: int(how[3:])].mean())
    if how == "sum_logit_top2":
        z = np.log(np.clip(s[:2], 1e-9, 1)) - np.log1p(-np.clip(s[:2], 0, 1 - 1e-9))
        return float(z.mean())
    raise ValueError(how)


def load_items(work: Path) -> list[dict]:
    rows = []
    for line in (work / "items.jsonl").read_text().splitlines():
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if not r.get("empty"):
            rows.append(r)
    return rows


def predict(model: dict, X: np.ndarray) -> np.ndarray:
    if len(X) == 0:
        return np.zeros(0)
    z = ((X - np.array(model["mean"])) / np.array(model["scale"])) @ np.array(model["coef"])
    return 1.0 / (1.0 + np.exp(-(z + model["intercept"])))


def summary_metrics(items: list[dict], values: np.ndarray) -> dict[str, float]:
    """Pooled ROC AUC (faithful vs edited) and pair consistency on synthetic items."""
    from faithgate.evaluation.meta import roc_auc

    y = np.array([int(r["faithful"]) for r in items])
    auc = float(roc_auc(values, y))
    by_base: dict[tuple[str, str], dict[str, list[float]]] = {}
    for r, v in zip(items, values, strict=True):
        g = by_base.setdefault((r["doc"], r["base"]), {"f": [], "u": []})
        g["f" if r["faithful"] else "u"].append(v)
    wins = [f > u for g in by_base.values() for f in g["f"] for u in g["u"]]
    return {"roc_auc": round(auc, 4), "consistency": round(float(np.mean(wins)), 4)}


def fit_model(X: np.ndarray, y: np.ndarray, C: float, seed: int) -> dict:
    from sklearn.linear_model import LogisticRegression

    mean = X.mean(axis=0)
    scale = X.std(axis=0)
    scale[scale < 1e-6] = 1.0
    lr = LogisticRegression(C=C, class_weight="balanced", max_iter=2000, random_state=seed)
    lr.fit((X - mean) / scale, y)
    return {
        "features": list(FEATURES),
        "mean": mean.round(6).tolist(),
        "scale": scale.round(6).tolist(),
        "coef": lr.coef_[0].round(6).tolist(),
        "intercept": round(float(lr.intercept_[0]), 6),
        "C": C,
    }


def cmd_fit(args: argparse.Namespace) -> None:
    from faithgate.evaluation.meta import roc_auc

    work = Path(args.work)
    items = load_items(work)
    train = [r for r in items if not r["held_out"]]
    dev = [r for r in items if r["held_out"]]
    print(
        f"items: {len(items)} ({len(train)} train, {len(dev)} held out); docs "
        f"{len({r['doc'] for r in train})} / {len({r['doc'] for r in dev})}"
    )
    Xtr = np.array([x for r in train for x in r["X"]], dtype=np.float32)
    ytr = np.array([v for r in train for v in r["y"]])
    Xdv = np.array([x for r in dev for x in r["X"]], dtype=np.float32)
    ydv = np.array([v for r in dev for v in r["y"]])
    print(
        f"words: train {len(ytr)} ({int(ytr.sum())} unsupported), dev {len(ydv)} ({int(ydv.sum())})"
    )
    results = []
    for C in (0.01, 0.1, 1.0):
        model = fit_model(Xtr, ytr, C, args.seed)
        word_auc = float(roc_auc(predict(model, Xdv), ydv))
        for how in AGGREGATES:
            vals = np.array(
                [-aggregate(predict(model, np.array(r["X"], np.float32)), how) for r in dev]
            )
            m = summary_metrics(dev, vals)
            results.append({"C": C, "aggregate": how, "word_auc": round(word_auc, 4), **m})
            print(json.dumps(results[-1]), flush=True)
    # Reference only (not shippable as JSON coefficients): does a non-linear model gain much?
    from sklearn.ensemble import HistGradientBoostingClassifier

    hgb = HistGradientBoostingClassifier(
        max_iter=200, learning_rate=0.1, class_weight="balanced", random_state=args.seed
    ).fit(Xtr, ytr)
    print("hgb word auc", round(float(roc_auc(hgb.predict_proba(Xdv)[:, 1], ydv)), 4))
    for how in AGGREGATES:
        vals = np.array(
            [-aggregate(hgb.predict_proba(np.array(r["X"], np.float32))[:, 1], how) for r in dev]
        )
        print("hgb", how, summary_metrics(dev, vals), flush=True)
    best = max(results, key=lambda r: (r["roc_auc"], r["consistency"]))
    model = fit_model(np.concatenate([Xtr, Xdv]), np.concatenate([ytr, ydv]), best["C"], args.seed)
    model.update(
        format="faithgate-span-support/1",
        aggregate=best["aggregate"],
        seed=args.seed,
        selection=best,
        trained_on={
            "documents": sorted({r["doc"] for r in items}),
            "corpora": "gensim 4.4.0 wheel: lee_background.cor, enwiki sample",
            "items": len(items),
            "words": int(len(ytr) + len(ydv)),
        },
        dev_results=results,
    )
    (work / "weights.json").write_text(json.dumps(model))
    print("chosen:", best)
    for k, c in sorted(zip(FEATURES, model["coef"], strict=True), key=lambda kc: -abs(kc[1])):
        print(f"  {k:26s} {c:+.3f}")


# ------------------------------------------------------------------ evaluation


def cmd_eval(args: argparse.Namespace) -> None:
    from faithgate.evaluation.bench.files import limit_examples
    from faithgate.evaluation.meta import evaluate, items_from_examples
    from faithgate.io import load_examples

    model = json.loads(Path(args.weights or Path(args.work) / "weights.json").read_text())
    hows = (
        [args.aggregate]
        if args.aggregate
        else [model["aggregate"], *[a for a in AGGREGATES if a != model["aggregate"]]]
    )
    score = lambda X: predict(model, X)  # noqa: E731
    if args.hgb:
        # Exploratory, not shippable as coefficients: gradient-boosted trees on the same
        # synthetic words (all documents), to see whether model capacity is what limits transfer.
        from sklearn.ensemble import HistGradientBoostingClassifier

        items = load_items(Path(args.work))
        hgb = HistGradientBoostingClassifier(
            max_iter=200, learning_rate=0.1, class_weight="balanced", random_state=0
        ).fit(
            np.array([x for r in items for x in r["X"]], dtype=np.float32),
            np.array([v for r in items for v in r["y"]]),
        )
        score = lambda X: hgb.predict_proba(X)[:, 1] if len(X) else np.zeros(0)  # noqa: E731
    fz = Featurizer(args.backend)
    results = {}
    for path in args.data:
        exs = limit_examples(load_examples(path), args.limit, 0)
        by_source: dict[str, list[int]] = {}
        for i, ex in enumerate(exs):
            by_source.setdefault(ex.source, []).append(i)
        probs: list[np.ndarray | None] = [None] * len(exs)
        cpu0, t0 = time.process_time(), time.perf_counter()
        memo: dict[tuple[str, str], np.ndarray] = {}
        for source, idx in by_source.items():
            todo = list(
                dict.fromkeys(exs[i].summary for i in idx if (source, exs[i].summary) not in memo)
            )
            for s, (_, X) in zip(todo, fz.many(source, todo), strict=True):
                memo[(source, s)] = score(X)
            for i in idx:
                probs[i] = memo[(source, exs[i].summary)]
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
        items = items_from_examples(exs)
        name = Path(path).stem
        results[name] = {
            "n": len(exs),
            "cpu_s_per_item": round(cpu / len(exs), 4),
            "wall_s_per_item": round(wall / len(exs), 4),
            "aggregates": {},
        }
        for how in hows:
            vals = [-aggregate(p, how) for p in probs]
            ev = evaluate(items, vals, n_resamples=1000, seed=0)
            o = ev["overall"]
            results[name]["aggregates"][how] = {
                k: o.get(k)
                for k in (
                    "n_unique",
                    "roc_auc",
                    "roc_auc_ci95",
                    "balanced_accuracy",
                    "balanced_accuracy_ci95",
                    "consistency",
                    "consistency_ci95",
                    "n_pairs",
                    "spearman",
                    "kendall",
                )
            }
            if how == hows[0]:
                results[name]["by_error_type"] = {
                    t: {"consistency": g.get("consistency"), "roc_auc": g.get("roc_auc")}
                    for t, g in ev.get("by_error_type", {}).items()
                }
            print(name, how, json.dumps(results[name]["aggregates"][how]), flush=True)
        print(name, "cpu s/item", results[name]["cpu_s_per_item"], flush=True)
        if args.out:
            Path(args.out).write_text(json.dumps(results, indent=1))


def cmd_pairs(args: argparse.Namespace) -> None:
    """BUMP minimal pairs, diagnosed word by word: does the most 'unsupported' word of the
    edited summary fall on the edit (the words that differ from the reference), how often do
    the two summaries tie, and how high is the reference's own worst word."""
    import difflib

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bump_data import data_dir, load_pairs

    model = json.loads(Path(args.weights or Path(args.work) / "weights.json").read_text())
    fz = Featurizer(args.backend)
    pairs = load_pairs(data_dir(args.data), args.limit)
    rows = []
    cpu0 = time.process_time()
    for ref, edit in pairs:
        (wr, Xr), (we, Xe) = fz.many(ref["source"], [ref["summary"], edit["summary"]])
        pr, pe = predict(model, Xr), predict(model, Xe)
        a, b = [w for w, _, _ in wr], [w for w, _, _ in we]
        changed = set()
        for tag, _, _, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
            if tag != "equal":
                changed.update(range(j1, j2))
        top = int(np.argmax(pe)) if len(pe) else -1
        rows.append(
            {
                "type": edit.get("error_type"),
                "ref_max": float(pr.max()) if len(pr) else 0.0,
                "edit_max": float(pe.max()) if len(pe) else 0.0,
                "edit_changed_max": float(pe[sorted(changed)].max()) if changed else None,
                "top_on_edit": top in changed,
                "ref_top_word": a[int(np.argmax(pr))] if len(pr) else "",
            }
        )
    cpu = (time.process_time() - cpu0) / len(pairs)
    ties = float(np.mean([r["ref_max"] == r["edit_max"] for r in rows]))
    out = {
        "pairs": len(rows),
        "cpu_s_per_pair": round(cpu, 4),
        "top_word_on_edit": round(float(np.mean([r["top_on_edit"] for r in rows])), 4),
        "ties_max": round(ties, 4),
        "mean_ref_max": round(float(np.mean([r["ref_max"] for r in rows])), 4),
        "mean_edit_max": round(float(np.mean([r["edit_max"] for r in rows])), 4),
        "mean_edited_words_max": round(
            float(
                np.mean([r["edit_changed_max"] for r in rows if r["edit_changed_max"] is not None])
            ),
            4,
        ),
        "share_ref_max_over_0.5": round(float(np.mean([r["ref_max"] > 0.5 for r in rows])), 4),
        "top_word_on_edit_by_type": {
            t: round(float(np.mean([r["top_on_edit"] for r in rows if r["type"] == t])), 3)
            for t in sorted({r["type"] for r in rows})
        },
    }
    print(json.dumps(out, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps({"summary": out, "pairs": rows}, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("synth")
    s.add_argument("--out", required=True)
    s.add_argument("--minutes", type=float, default=25)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--summaries-per-doc", type=int, default=3)
    s.add_argument("--edits", type=int, default=3)
    s.add_argument("--paraphrase", type=float, default=0.5)
    s.add_argument("--backend", default="auto")
    f = sub.add_parser("fit")
    f.add_argument("--work", required=True)
    f.add_argument("--seed", type=int, default=0)
    e = sub.add_parser("eval")
    e.add_argument("--work")
    e.add_argument("--weights")
    e.add_argument("--data", action="append", required=True)
    e.add_argument("--limit", type=int)
    e.add_argument("--aggregate")
    e.add_argument("--backend", default="auto")
    e.add_argument("--out")
    e.add_argument("--hgb", action="store_true", help="exploratory: boosted trees, not the LR")
    d = sub.add_parser("pairs")
    d.add_argument("--work")
    d.add_argument("--weights")
    d.add_argument("--data")
    d.add_argument("--limit", type=int)
    d.add_argument("--backend", default="auto")
    d.add_argument("--out")
    args = ap.parse_args()
    {"synth": cmd_synth, "fit": cmd_fit, "eval": cmd_eval, "pairs": cmd_pairs}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
