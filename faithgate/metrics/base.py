"""The ``Metric`` interface, the registry, and the context metrics score in.

A metric is a formula over model outputs. It names the model *roles* it needs, gets loaded
models from the ``ScoringContext`` (never from torch or onnxruntime directly) and returns one
``Score`` per example, oriented so that higher means more faithful.

Metric modules in ``faithgate/metrics/`` are discovered automatically: a class decorated with
``@register`` is available by its ``name`` to the API, the CLI, the plugin and the Action.
Metric modules must not import torch at module level (the runtime install has none).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import json
import math
import pkgutil
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, TypeVar

from faithgate.backends import ModelPool, precision_label
from faithgate.errors import InputError, did_you_mean
from faithgate.types import Example, Score

_REGISTRY: dict[str, type[Metric]] = {}
_DISCOVERED = False


class ScoringContext:
    """What a metric may use while scoring: the model pool and shared per-run engines.

    ``shared(key, factory)`` lets several metrics share one engine (e.g. the likelihood engine
    that runs each distinct forward pass once for five metrics, or an NLI cache), created on
    first use and kept for the life of the context.
    """

    def __init__(self, pool: ModelPool | None = None) -> None:
        self.pool = pool or ModelPool()
        self._shared: dict[str, Any] = {}
        # Settings hashes of this run, by metric (``settings_hash``): computed once, not per
        # batch (model identities fingerprint the weight files); dropped by ``release``.
        self._hashes: dict[int, tuple[Metric, str]] = {}
        # The run's score cache, when it has one (``Scorer`` sets it): a metric whose answers
        # cost requests (``llm_judge``) keeps them there too. False: a run that must write no
        # cache (a Ray worker: the driver's cache serves it).
        self.cache: Any = None

    def model(self, role: str, task: str, **options: Any) -> Any:
        return self.pool.get(role, task, **options)

    def shared(self, key: str, factory: Callable[[], Any]) -> Any:
        """The engine under ``key``, made by ``factory`` on first use."""
        if key not in self._shared:
            self._shared[key] = factory()
        return self._shared[key]

    def settings_hash(self, metric: Metric) -> str:
        """``metric``'s settings hash for this run: computed on first use, then reused until
        ``release`` (the end of the run)."""
        entry = self._hashes.get(id(metric))
        if entry is None or entry[0] is not metric:
            entry = (metric, metric.compute_settings_hash(self))
            self._hashes[id(metric)] = entry
        return entry[1]

    def release(self) -> None:
        """Drop what shared engines hold per input (``Scorer.release``, at the end of a run): an
        engine with ``release_all()`` empties itself and keeps its counters; any other is
        dropped and made afresh on next use (its models stay loaded in the pool). The run's
        settings hashes are dropped too: the next run computes them afresh."""
        self._hashes.clear()
        for key, engine in list(self._shared.items()):
            release_all = getattr(engine, "release_all", None)
            if callable(release_all):
                release_all()
            else:
                del self._shared[key]

    @property
    def spacy_model(self) -> str | None:
        """The configured spaCy pipeline (``--model spacy=...``), None for the default; pass it
        to ``faithgate.text`` so sentence splitting and NER use the configured pipeline."""
        return self.pool.model_names.get("spacy")

    def model_identity(self, role: str, task: str) -> dict[str, Any]:
        """Identity of a role's model without loading it (for settings hashes); the backends
        say what identifies their models (``ModelPool.identity``)."""
        return self.pool.identity(role, task)


class Metric(ABC):
    """Base class of all metrics.

    Subclasses set ``name`` (registry key), ``description`` (one line for ``faithgate
    metrics``), ``roles`` (model role -> task it loads) and ``defaults`` (settings with their
    default values), and implement ``score_batch``. ``version`` is bumped when a formula
    changes so cached scores are not reused across the change.

    How to read the numbers is part of the metric too, so ``faithgate score`` and the reports
    ask the metric instead of keeping tables of their own: ``bounds`` / ``value_range`` (the
    range), ``scale`` and ``sentence_value`` (what a score and a per-sentence value are), and
    ``details_line`` / ``detail_lines`` / ``evidence_hint`` (how its details print). Every
    score is oriented so that higher = more faithful.
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    family: ClassVar[str] = ""
    version: ClassVar[str] = "1"
    roles: ClassVar[dict[str, str]] = {}  # role -> task, e.g. {"embedder": "text-encoder"}
    defaults: ClassVar[dict[str, Any]] = {}
    # The lowest and highest value a score can take (None: unbounded), from the formula.
    bounds: ClassVar[tuple[float | None, float | None]] = (None, None)
    # What a score is, with its range in words and what its ends mean, e.g. "share of the
    # summary's named entities found in the source, 0..1": a ``str.format`` template over the
    # settings ("BERTScore {component}: ..."). Shown beside every value ``faithgate score``
    # prints, so a -3.62 is not read on a 0..1 scale.
    scale: ClassVar[str] = ""
    # What a per-sentence value (``Score.sentences``) is, when it is another quantity than the
    # headline (``harim_plus``: the sentence's mean log p); "" for a metric that gives none.
    sentence_value: ClassVar[str] = ""
    # Whether the score grades support finely enough to rank a faithful summary above its
    # minimal edit. A pass/fail check (``facts``: 1.0 unless a fact is unsupported) ties on
    # most edits by design, so ``pair_consistency`` leaves it out unless named.
    ranks_pairs: ClassVar[bool] = True

    def __init__(self, **settings: Any) -> None:
        unknown = set(settings) - set(self.defaults)
        if unknown:
            allowed = ", ".join(sorted(self.defaults)) or "none"
            raise InputError(
                f"metric {self.name!r} has no setting(s) {', '.join(sorted(unknown))}; "
                f"settings: {allowed}"
            )
        self.settings: dict[str, Any] = {**self.defaults, **settings}
        self.validate_settings()

    def validate_settings(self) -> None:
        """Raise ``InputError`` for an invalid setting value (override when needed)."""
        return None

    @classmethod
    def value_range(cls, settings: Mapping[str, Any]) -> tuple[float | None, float | None]:
        """The lowest and highest value a score of this metric can take under ``settings``
        (None: unbounded); a class method, so a gate learns it without making a metric. A
        threshold at or below the lowest can never fail: the gate does not count it as a
        criterion (``faithgate.gate.checks.check_has_criterion``)."""
        return cls.bounds

    def how_to_read(self) -> tuple[str, str]:
        """(``scale``, ``sentence_value``) filled in with this metric's settings."""
        return _fill(self.scale, self.settings), _fill(self.sentence_value, self.settings)

    @classmethod
    def details_line(cls, details: Mapping[str, Any]) -> str:
        """One short line of a score's most telling details, for ``faithgate score``: the
        metric's own account (``details["summary"]``, a text) when it gives one, else its
        first four numbers. Override for details that read better another way."""
        if isinstance(details.get("summary"), str):
            return str(details["summary"])
        return ", ".join(scalar_details(details)[:4])

    @classmethod
    def detail_lines(cls, details: Mapping[str, Any]) -> list[str]:
        """Lines printed under ``details_line`` (``llm_judge``: one per judged claim, so a
        failing gate says which claim failed and why); none by default."""
        return []

    @classmethod
    def evidence_hint(cls, evidence: str) -> str:
        """Why a sentence ranked least supported, from its evidence (``SentenceScore.evidence``,
        as printed: escaped and clipped): evidence saying what the source lacks is quoted as
        it is; any other is the closest source text."""
        if evidence.startswith("not in the source"):
            return evidence
        return f"closest source text: {evidence}"

    def prepare(self, examples: Sequence[Example], ctx: ScoringContext) -> None:
        """Optional: announce upcoming work to shared engines so passes can be planned once
        for every metric of a run (called for all metrics before any ``score_batch``)."""
        return None

    @abstractmethod
    def score_batch(self, examples: Sequence[Example], ctx: ScoringContext) -> list[Score]:
        """One ``Score`` per example, in order; ``Score.failed`` for one that cannot be scored."""

    @property
    def components(self) -> Sequence[Metric]:
        """The metrics this one combines (``combined``, ``ensemble``), else none. A ``Scorer``
        scores them first, as metrics of their own (through its score cache, once per distinct
        settings hash in a run), and hands their scores to ``combine``."""
        return ()

    def combine(
        self,
        examples: Sequence[Example],
        component_scores: Sequence[Sequence[Score]],
        ctx: ScoringContext,
    ) -> list[Score]:
        """This metric's scores from its components' (one list per component, aligned with
        ``examples``); only a metric with ``components`` implements it."""
        raise NotImplementedError(f"metric {self.name!r} combines no other metric")

    def model_roles(self, ctx: ScoringContext) -> dict[str, str]:
        """The roles (role -> task) whose models this metric scores with under ``ctx``:
        ``roles``, unless they depend on what is configured (the QA metrics override it)."""
        return dict(self.roles)

    def hashed_settings(self, ctx: ScoringContext) -> Mapping[str, Any]:
        """The settings the settings hash records under ``ctx``: all of them, unless what
        they mean depends on what is configured (the likelihood metrics' ``model = "auto"``)."""
        return self.settings

    def settings_hash(self, ctx: ScoringContext) -> str:
        """What the scores of this metric under ``ctx`` depend on (it keys the score cache and
        is compared with baselines and calibrations), e.g.
        ``bertscore|all-MiniLM-L6-v2@3f2a1b|torch|fp32|tf4.57.1|9c0e5d1a2b3f``: a readable
        prefix, then a digest of everything. Computed once per run (``ScoringContext``)."""
        return ctx.settings_hash(self)

    def compute_settings_hash(self, ctx: ScoringContext) -> str:
        """Hash of faithgate version, metric, formula version, settings and model identities
        (name, fingerprint, backend, quantization, library versions), with a readable prefix
        (``readable_hash``). Override to hash something else; callers use ``settings_hash``."""
        from faithgate import __version__

        identities = [ctx.model_identity(r, t) for r, t in sorted(self.model_roles(ctx).items())]
        payload = {
            "faithgate": __version__,
            "metric": self.name,
            "version": self.version,
            # 7 and 7.0 for a float setting are one setting (TOML writes either): one hash.
            "settings": {
                k: float(v) if isinstance(self.defaults.get(k), float) and type(v) is int else v
                for k, v in self.hashed_settings(ctx).items()
            },
            "models": [hashed(i) for i in identities],
        }
        return readable_hash(self.name, identities, payload)


def _fill(template: str, settings: Mapping[str, Any]) -> str:
    try:
        return template.format(**settings)
    except (KeyError, IndexError, ValueError):
        return template  # a template naming a setting the metric lacks: show it unformatted


def fmt_detail(value: Any, digits: int = 4) -> str:
    """A detail's value as ``details_line`` prints it: ``-`` for none or NaN, floats rounded."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def scalar_details(details: Mapping[str, Any]) -> list[str]:
    """``"name value"`` for each number of ``details`` (booleans are no numbers), in order."""
    return [
        f"{k} {fmt_detail(v)}"
        for k, v in details.items()
        if isinstance(v, int | float) and not isinstance(v, bool)
    ]


# Libraries named in the readable prefix of a settings hash, by short tag; the versions of every
# library a model runs on (torch, tokenizers, spaCy too) are in the digest.
PREFIX_LIBRARIES = {"transformers": "tf", "onnxruntime": "ort"}


def hash_digest(payload: Any) -> str:
    """The digest part of a settings hash: 12 hex digits of the payload's SHA-256."""
    blob = json.dumps(payload, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


def _segment(text: Any) -> str:
    """One readable field: no separator, no whitespace; a path or hub id by its last part."""
    last = str(text).replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    return "".join("_" if c == "|" or c.isspace() else c for c in last) or "-"


def hashed(identity: dict[str, Any]) -> dict[str, Any]:
    """What of a model's identity a settings hash holds: all of it, except the name of a
    directory the user gave (``origin`` "path"), which its content fingerprint identifies.
    Renaming ``checkpoints/run-42`` to ``checkpoints/best`` keeps every cached score and
    baseline; reports still show the name (``identity["model"]``)."""
    if identity.get("origin") != "path":
        return identity
    return {k: v for k, v in identity.items() if k != "model"}


def _model_label(identity: dict[str, Any]) -> str:
    """A model as the readable prefix names it: its name, or ``local`` for a directory the
    user gave (the name is left out of the hash, see ``hashed``)."""
    return "local" if identity.get("origin") == "path" else _segment(identity["model"])


def readable_hash(metric: str, identities: Sequence[dict[str, Any]], payload: Any) -> str:
    """``metric|model@fingerprint|backend|quantization|tf<version>|ort<version>|digest``.

    Fields of several models are joined with ``+`` (one entry per distinct value); the
    library tags are those of ``PREFIX_LIBRARIES`` that the models run on (a torch model:
    transformers; an ONNX export: onnxruntime). The spaCy pipeline is named only when it is
    the one model (``ner``); a metric without models: ``metric|digest``. A local directory is
    named ``local`` (its fingerprint tells it; its name may change, ``hashed``).
    Only the digest decides equality; the prefix is for people reading a cache key, a report
    or a baseline."""
    parts = [_segment(metric)]
    # The spaCy pipeline (sentences, entities) is named only when it is the metric's one model.
    identities = [i for i in identities if i.get("role") != "spacy"] or list(identities)
    if identities:

        def joined(values: Sequence[str]) -> str:
            return "+".join(dict.fromkeys(values))

        parts.append(joined([f"{_model_label(i)}@{str(i['fingerprint'])[:6]}" for i in identities]))
        parts.append(joined([_segment(i.get("backend") or i["role"]) for i in identities]))
        parts.append(joined([precision_label(i) for i in identities]))
        libraries: dict[str, str] = {}
        for identity in identities:
            libraries.update({k: v for k, v in (identity.get("libraries") or {}).items() if v})
        parts += [
            f"{tag}{libraries[lib]}" for lib, tag in PREFIX_LIBRARIES.items() if lib in libraries
        ]
    parts.append(hash_digest(payload))
    return "|".join(parts)


M = TypeVar("M", bound=type[Metric])


def register(cls: M) -> M:
    """Class decorator adding a metric to the registry under ``cls.name``."""
    if not cls.name:
        raise TypeError(f"{cls.__qualname__} has no name")
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise TypeError(f"metric name {cls.name!r} registered twice")
    _REGISTRY[cls.name] = cls
    return cls


# Installed packages add metrics through this entry-point group (pyproject.toml):
#   [project.entry-points."faithgate.metrics"]
#   my_metric = "my_package.metrics:MyMetric"     # a Metric subclass, or a module that
#                                                 # registers its metrics with @register
ENTRY_POINT_GROUP = "faithgate.metrics"


def _discover() -> None:
    """Import every module of ``faithgate.metrics`` once so their metrics register, then the
    metrics of installed packages (entry-point group ``faithgate.metrics``)."""
    global _DISCOVERED
    if _DISCOVERED:
        return
    import faithgate.metrics as package

    for info in pkgutil.iter_modules(package.__path__):
        if info.name != "base" and not info.name.startswith("_"):
            importlib.import_module(f"{package.__name__}.{info.name}")
    _DISCOVERED = True
    for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        _load_entry_point(entry)


def _load_entry_point(entry: importlib.metadata.EntryPoint) -> None:
    """Register the metric(s) of one entry point. A broken third-party package is reported
    and skipped, so it cannot take the built-in metrics down with it."""
    try:
        loaded = entry.load()
    except Exception as exc:  # noqa: BLE001 - any error of a foreign package's import
        warnings.warn(
            f"faithgate: metric entry point {entry.name!r} ({entry.value}) failed to load: "
            f"{type(exc).__name__}: {exc}",
            stacklevel=3,
        )
        return
    if isinstance(loaded, type) and issubclass(loaded, Metric):
        try:
            register(loaded)
        except TypeError as exc:  # no name, or a name already taken (built-ins win)
            warnings.warn(f"faithgate: metric entry point {entry.name!r}: {exc}", stacklevel=3)


def metric_names() -> list[str]:
    _discover()
    return sorted(_REGISTRY)


def metric_class(name: str) -> type[Metric]:
    _discover()
    try:
        return _REGISTRY[name]
    except KeyError:
        close = did_you_mean(name, sorted(_REGISTRY))
        hint = f" ({close})" if close else ""
        raise InputError(
            f"unknown metric {name!r}{hint}; available: {', '.join(sorted(_REGISTRY))}"
        ) from None


def get_metric(name: str, **settings: Any) -> Metric:
    """An instance of the metric registered as ``name`` with the given settings."""
    return metric_class(name)(**settings)
