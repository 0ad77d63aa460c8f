"""``combined``: a learned linear combination of other metrics; ``ensemble``: the shipped one.

Scores with the component metrics named in a weights file written by
``faithgate bench --combine TRAIN.jsonl --save-weights W.json`` and returns the fitted logistic
regression's probability of "faithful":

    value = sigmoid(b + sum_i w_i * (s_i - mu_i) / sigma_i)

where ``s_i`` is component ``i``'s score and ``mu_i``, ``sigma_i`` its mean and standard
deviation on the training set. Range [0, 1], higher = more faithful. An example that a
component cannot score cannot be combined and gets ``Score.failed``.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from faithgate.errors import InputError
from faithgate.metrics.base import Metric, ScoringContext, get_metric, hash_digest, register
from faithgate.numbers import is_finite_number
from faithgate.safety.userjson import parse_json
from faithgate.types import Example, Score

COMBINATION_FORMAT = "faithgate-combination/1"
# ``ensemble``'s weights: written by benchmarks/fit_ensemble.py (data and figures inside).
SHIPPED_ENSEMBLE = Path(__file__).resolve().parent.parent / "data" / "ensemble.json"


def load_weights(path: str | Path) -> dict[str, Any]:
    """Read and check a weights file written by ``faithgate bench --combine``."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{p}: no such weights file") from None
    except ValueError as exc:  # not UTF-8
        raise InputError(f"{p}: not valid JSON ({exc})") from None
    except OSError as exc:  # a directory, no permission
        raise InputError(f"{p}: cannot read the weights file ({exc.strerror or exc})") from None
    data = parse_json(text, p, "not valid JSON")  # nested too deeply, too many digits: exit 2
    if not isinstance(data, dict) or data.get("format") != COMBINATION_FORMAT:
        raise InputError(f"{p}: not a faithgate combination file (format {COMBINATION_FORMAT})")
    for key in ("metrics", "mean", "scale", "coef", "intercept"):
        if key not in data:
            raise InputError(f"{p}: combination file lacks {key!r}")
    metrics = data["metrics"]
    if not isinstance(metrics, list) or not metrics or not all(isinstance(m, str) for m in metrics):
        raise InputError(f"{p}: metrics must be a non-empty list of metric names")
    if len(set(metrics)) != len(metrics):  # each vote is keyed by its metric: one would be lost
        raise InputError(f"{p}: metrics names a metric twice")
    # A NaN mean made every score 1.0 (min(700, nan) is 700); a zero scale divides by zero.
    for key in ("mean", "scale", "coef"):
        values = data[key]
        if not isinstance(values, list) or len(values) != len(metrics):
            raise InputError(f"{p}: {key} must be a list with one number per metric")
        if not all(is_finite_number(v) for v in values):
            raise InputError(f"{p}: {key} must hold finite numbers, got {values!r}"[:200])
    if not all(v > 0 for v in data["scale"]):
        raise InputError(f"{p}: every scale must be above 0, got {data['scale']!r}"[:200])
    if not is_finite_number(data["intercept"]):
        raise InputError(f"{p}: intercept must be a finite number, got {data['intercept']!r}")
    # Each component is made with its own settings from here: a list or a string was a
    # TypeError / AttributeError deep inside (an internal error).
    settings = data.get("metric_settings")
    if settings is not None:
        if not isinstance(settings, dict):
            raise InputError(
                f"{p}: metric_settings must be an object of settings per metric, "
                f"got {type(settings).__name__}"
            )
        for name, value in settings.items():
            if name not in metrics:
                raise InputError(
                    f"{p}: metric_settings names {name!r}, which is not one of its metrics"[:300]
                )
            if value is not None and not isinstance(value, dict):
                raise InputError(
                    f"{p}: metric_settings.{name} must be an object of settings, "
                    f"got {type(value).__name__}"
                )
    return data


def weights_digest(data: Mapping[str, Any]) -> str:
    """Short digest of a weights document: its content identifies the formula."""
    blob = json.dumps(data, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


@register
class Combined(Metric):
    """Logistic combination of component metrics (weights from ``faithgate bench --combine``)."""

    name = "combined"
    description = (
        "learned logistic combination of other metrics (weights file from bench --combine)"
    )
    family = "combination"
    version = "2"  # 2: details carry each component's vote (its term of the logit)
    roles: dict[str, str] = {}
    defaults = {"weights": None}
    # A sigmoid of a logit clamped to [-700, 700]: above 0 (about 1e-304 at the clamp), at most
    # 1. A threshold at or below 0 passes every scored example; one above 1 none.
    bounds = (0.0, 1.0)
    scale = "probability of faithful from a fitted logistic combination, 0..1"

    @classmethod
    def details_line(cls, details: Mapping[str, Any]) -> str:
        """Each component's vote (its term of the logit), lowest first: the view of support
        that pulled the score down leads."""
        if not isinstance(details.get("votes"), dict):
            return super().details_line(details)
        votes = sorted(details["votes"].items(), key=lambda kv: kv[1])
        return "votes (terms of the logit; lowest first): " + ", ".join(
            f"{name} {value:+.2f}" for name, value in votes
        )

    def validate_settings(self) -> None:
        path = self.settings["weights"]
        if not path:
            raise InputError(
                "metric 'combined' needs a weights file: set weights = \"PATH\" "
                "(written by faithgate bench --combine ... --save-weights PATH)"
            )
        self._weights = load_weights(path)
        settings = self._weights.get("metric_settings") or {}
        if "combined" in self._weights["metrics"]:
            raise InputError("metric 'combined' cannot contain itself")
        self._components = [
            get_metric(n, **(settings.get(n) or {})) for n in self._weights["metrics"]
        ]

    def compute_settings_hash(self, ctx: ScoringContext) -> str:
        # The weights file's content, not its path, identifies the formula; component hashes
        # carry their models and settings. Readable: ``combined|<components>|<digest>``.
        payload = {
            "weights": weights_digest(self._weights),
            "components": [m.settings_hash(ctx) for m in self._components],
            "version": self.version,
        }
        components = "+".join(m.name for m in self._components)
        return f"{self.name}|{components}|{hash_digest(payload)}"

    def model_roles(self, ctx: ScoringContext) -> dict[str, str]:
        """Its components' models (it loads none of its own), so a score names them."""
        roles: dict[str, str] = {}
        for m in self._components:
            roles.update(m.model_roles(ctx))
        return roles

    def prepare(self, examples: Sequence[Example], ctx: ScoringContext) -> None:
        for m in self._components:
            m.prepare(examples, ctx)

    @property
    def components(self) -> Sequence[Metric]:
        return tuple(self._components)

    def score_batch(self, examples: Sequence[Example], ctx: ScoringContext) -> list[Score]:
        return self.combine(examples, [m.score_batch(examples, ctx) for m in self._components], ctx)

    def combine(
        self,
        examples: Sequence[Example],
        component_scores: Sequence[Sequence[Score]],
        ctx: ScoringContext,
    ) -> list[Score]:
        w = self._weights
        shash = self.settings_hash(ctx)
        out = []
        for i, ex in enumerate(examples):
            parts = [cs[i] for cs in component_scores]
            bad = [p for p in parts if not p.ok]
            if bad:
                out.append(
                    Score.failed(
                        self.name,
                        shash,
                        ex.id,
                        f"component {bad[0].metric} failed: {bad[0].error or 'no score'}",
                    )
                )
                continue
            # Each component's vote is its term of the logit, so a reader sees which view of
            # support pulled the score down.
            votes = {
                p.metric: coef * (p.value - mu) / sd
                for p, mu, sd, coef in zip(parts, w["mean"], w["scale"], w["coef"], strict=True)
            }
            logit = float(w["intercept"]) + sum(votes.values())
            value = 1.0 / (1.0 + math.exp(-max(-700.0, min(700.0, logit))))
            details: dict[str, Any] = {
                "components": {p.metric: p.value for p in parts},
                "votes": votes,
                "logit": logit,
            }
            out.append(Score(self.name, value, shash, ex.id, details=details))
        return out


@register
class Ensemble(Combined):
    """Equal-weight mean of the z-scores of ``sentsim``, ``overlap``, ``harim_plus`` and ``ner``.

    value = sigmoid(mean_i z_i), z_i = (s_i - mu_i) / sigma_i, with mu_i, sigma_i each
    component's mean and standard deviation over the six development sets of faithgate's
    benchmark data (BUMP excluded). Nothing but those scales is fitted: an embedding view
    (Reimers & Gurevych 2019), a lexical one (Lin 2004, ROUGE-2 precision), a likelihood one
    (Son et al. 2022, HaRiM+) and an entity one (Nan et al. 2021, entity precision against the
    source) vote with equal weight, so no benchmark's error taxonomy is learned. ``weights``
    may name another file of the same format.
    """

    name = "ensemble"
    description = "mean z-score of sentsim, overlap, harim_plus and ner (shipped scales)"
    scale = (
        "sigmoid of the mean z-score of sentsim, overlap, harim_plus and ner, 0..1 (0.5 = typical)"
    )

    def validate_settings(self) -> None:
        if not self.settings["weights"]:
            self.settings["weights"] = str(SHIPPED_ENSEMBLE)
        super().validate_settings()
        if self.settings["weights"] == str(SHIPPED_ENSEMBLE):
            # Its scales were fitted on the lm role's likelihood scores (SmolLM2): model "auto"
            # must not move a component to a seq2seq model configured for other metrics.
            self._components = [
                get_metric(m.name, **{**m.settings, "model": "lm"})
                if m.settings.get("model") == "auto"
                else m
                for m in self._components
            ]
