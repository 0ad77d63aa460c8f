"""Per-process state of the plugin: settings resolved once, models and scorers loaded once.

One ``PluginSession`` lives in ``config.stash`` for the whole pytest run. Every fixture call and
every gate item scores through it, so a model is loaded once per process (once per xdist
worker) and shared by all tests. The score cache is the SQLite ``ScoreCache``, which is safe to
write from several worker processes at once.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from faithgate.config import GateConfig, load_config
from faithgate.errors import ConfigError
from faithgate.formats import file_report_kinds

# Keys a ``@pytest.mark.faithgate(...)`` marker accepts.
MARKER_KEYS = (
    "metric",
    "threshold",
    "margin",
    "min_rate",
    "types",
    "settings",
    "models",
    "backend",
)


@dataclass(frozen=True)
class Options:
    """The ``--faithgate-*`` command-line options, as given (None = not given)."""

    enabled: bool = False
    config: str | None = None
    metric: str | None = None
    threshold: float | None = None
    min_pass_rate: float | None = None
    baseline: str | None = None
    update_baseline: bool = False
    force_baseline: bool = False
    backend: str | None = None
    executor: str | None = None
    reports: dict[str, str] = field(default_factory=dict)  # report kind -> path given
    cache: str | None = None
    no_cache: bool = False

    @classmethod
    def from_config(cls, config: pytest.Config) -> Options:
        get = config.getoption
        return cls(
            enabled=bool(get("faithgate")),
            config=get("faithgate_config"),
            metric=get("faithgate_metric"),
            threshold=get("faithgate_threshold"),
            min_pass_rate=get("faithgate_min_pass_rate"),
            baseline=get("faithgate_baseline"),
            update_baseline=bool(get("faithgate_update_baseline")),
            force_baseline=bool(get("faithgate_force_baseline")),
            backend=get("faithgate_backend"),
            executor=get("faithgate_executor"),
            reports={
                kind: path
                for kind in file_report_kinds()
                if (path := get(f"faithgate_{kind}")) is not None
            },
            cache=get("faithgate_cache"),
            no_cache=bool(get("faithgate_no_cache")),
        )

    def baseline_policy(self) -> Any:
        """How the gate treats its baseline under these options (a ``BaselinePolicy``)."""
        from faithgate.gate import BaselinePolicy

        return BaselinePolicy(
            update=self.update_baseline,
            force=self.force_baseline,
            # A --faithgate-baseline that does not exist is an error (a typo), not a first run.
            explicit=self.baseline is not None,
            # Written with the reports at session end: a report that cannot be written must
            # not leave the baseline replaced (the gate item had replaced it before).
            defer=True,
        )

    def blank_given(self) -> list[str]:
        """The text options given empty (``--faithgate-metric=``): each fell back to its
        default (the configured metric, a configuration found by search, the default cache)
        where the command line asked for something; ``faithgate check`` refuses them too."""
        given = {
            "--faithgate-config": self.config,
            "--faithgate-metric": self.metric,
            "--faithgate-baseline": self.baseline,
            "--faithgate-cache": self.cache,
            **{f"--faithgate-{kind}": path for kind, path in self.reports.items()},
        }
        return [name for name, value in given.items() if value is not None and not value.strip()]

    def gate_only_given(self) -> list[str]:
        """The options given that only the gate uses (``--faithgate``): without the flag they
        change nothing (the fixture uses the others: metric, threshold, backend, cache ...)."""
        given = [
            ("--faithgate-min-pass-rate", self.min_pass_rate is not None),
            ("--faithgate-baseline", self.baseline is not None),
            ("--faithgate-update-baseline", self.update_baseline),
            ("--faithgate-force-baseline", self.force_baseline),
            ("--faithgate-executor", self.executor is not None),
        ]
        given += [(f"--faithgate-{kind}", True) for kind in self.reports]
        return [name for name, on in given if on]


def _freeze(value: Any) -> str:
    """A hashable, order-independent key for settings dicts."""
    return json.dumps(value, sort_keys=True, default=str)


class PluginSession:
    """Shared scorers, model pools and score cache for one pytest process."""

    def __init__(self, rootdir: Path, options: Options, gate_config: GateConfig) -> None:
        self.rootdir = rootdir
        self.options = options
        # The project configuration with the command-line overrides already applied.
        self.gate_config = gate_config
        self._pools: dict[str, Any] = {}
        self._scorers: dict[str, Any] = {}
        self._cache: Any = None
        self._cache_opened = False
        # How many Scorers this process built (tests check models load once).
        self.scorers_built = 0

    # -- shared resources ----------------------------------------------------------------
    @property
    def cache(self) -> Any:
        """The process's ``ScoreCache`` (SQLite), or None when caching is off."""
        if not self._cache_opened:
            if not self.options.no_cache:
                from faithgate.cache import ScoreCache

                # Marked opened only once it is: a cache that cannot be opened fails every
                # check that asks for it, not the first one only (the rest ran uncached).
                self._cache = ScoreCache(self.cache_path())
            self._cache_opened = True
        return self._cache

    def cache_path(self) -> Path:
        """``--faithgate-cache``, else ``<cache dir>/scores.sqlite`` of the configuration
        (``cache_dir``, default ``.faithgate`` next to the configuration file): the file
        ``faithgate check`` uses, so the CLI and the plugin share scores."""
        if self.options.cache:
            return Path(self.options.cache).resolve()
        return Path(self.gate_config.cache_path) / "scores.sqlite"

    def pool(self, models: Mapping[str, str] | None = None, backend: str | None = None) -> Any:
        """One ``ModelPool`` per distinct (models, backend): models load once per process."""
        from faithgate.backends import ModelPool

        cfg = self.gate_config
        names = {**cfg.models, **(models or {})}
        chosen = backend or cfg.backend
        key = _freeze([names, chosen])
        if key not in self._pools:
            self._pools[key] = ModelPool(
                dict(names),
                backend=chosen,
                allow_download=cfg.allow_download,
                model_options={k: dict(v) for k, v in cfg.model_options.items()},
            )
        return self._pools[key]

    def scorer(
        self,
        metrics: Sequence[str],
        settings: Mapping[str, Mapping[str, Any]] | None = None,
        models: Mapping[str, str] | None = None,
        backend: str | None = None,
    ) -> Any:
        """The session's ``Scorer`` for these metrics and settings, built once per process.

        ``settings`` (metric -> settings) are laid over the configured ``metric_settings``.
        The gate item and a fixture call with the same metric and settings share one scorer.
        """
        from faithgate.scoring.scorer import Scorer

        names = list(metrics)
        extra = settings or {}
        merged = {
            m: {**self.gate_config.metric_settings.get(m, {}), **extra.get(m, {})} for m in names
        }
        key = _freeze([names, merged, models or {}, backend])
        scorer = self._scorers.get(key)
        if scorer is None:
            # No cache inside the scorer: the session's executors put the cache around it.
            scorer = Scorer(
                names,
                metric_settings={m: v for m, v in merged.items() if v} or None,
                pool=self.pool(models, backend),
                cache=self.cache,  # for a combination's components (Scorer.compute)
            )
            self._scorers[key] = scorer
            self.scorers_built += 1
        return scorer

    def executor(
        self,
        metrics: Sequence[str],
        settings: Mapping[str, Mapping[str, Any]] | None = None,
        models: Mapping[str, str] | None = None,
        backend: str | None = None,
    ) -> Any:
        """Scores with the session's ``scorer`` for these arguments, in this process, through
        the execution seam (``faithgate.scoring.execution``) with the session's cache around it."""
        from faithgate.scoring.execution import make_executor

        scorer = self.scorer(metrics, settings, models, backend)
        return make_executor(None, scorer=scorer, cache=self.cache)

    def gate_scorer(self) -> Any:
        """The ``Scorer`` of the configured gate (all configured metrics), sharing the model
        pool and the cache with the fixture's scorers."""
        return self.scorer(self.gate_config.metrics)

    # -- resolution order: call argument > marker > command line > configuration ----------
    # (command-line options are already folded into ``gate_config`` by ``load_session_config``)
    def metric_for(self, call: str | None, marker: Mapping[str, Any]) -> str:
        return call or marker.get("metric") or self.gate_config.metrics[0]

    def threshold_for(self, metric: str, call: Any, markers: Sequence[Mapping[str, Any]]) -> Any:
        """The first threshold given, as given (the fixture checks that it is a finite
        number: a marker's value is not validated anywhere else). ``markers`` are the test's
        markers, each on its own, closest first: a marker's threshold is its metric's (as its
        ``settings`` are), so a call on another metric does not get it, whichever marker names
        that other metric (``scoped_value``). ``--faithgate-threshold`` is in
        ``gate_config.thresholds`` for the selected metrics."""
        if call is not None:
            return call
        given = scoped_value(markers, "threshold", metric)
        if given is not None:
            return given
        return self.gate_config.thresholds.get(metric)

    def close(self) -> None:
        if self._cache is not None:
            self._cache.close()


def load_session_config(rootdir: Path, options: Options) -> GateConfig:
    """The project configuration (``--faithgate-config`` or the nearest ``faithgate.toml`` /
    ``[tool.faithgate]`` from the rootdir up) with the ``--faithgate-*`` options applied."""
    config = load_config(options.config) if options.config else load_config(start=rootdir)
    return config.override(
        metrics=[options.metric] if options.metric else None,
        threshold=options.threshold,
        min_pass_rate=options.min_pass_rate,
        baseline=options.baseline,
        backend=options.backend,
        execution={"executor": options.executor} if options.executor else None,
        **options.reports,
    )


def marker_names(marker: Mapping[str, Any], metric: str) -> bool:
    """Whether the marker's ``threshold`` and ``settings`` belong to ``metric``: the marker
    names that metric, or none (then they are the default metric's, whichever it is)."""
    named = marker.get("metric")
    return named is None or named == metric


def scoped_value(markers: Sequence[Mapping[str, Any]], key: str, metric: str) -> Any:
    """``key`` (``threshold`` or ``settings``) of the closest marker that gives it and names
    ``metric`` or no metric, or None. Markers are taken one by one, not merged: a class's
    ``(metric="a", threshold=X)`` with a test's ``(metric="b")`` gives ``b`` no threshold
    from the markers (merged, ``b`` would have taken ``a``'s X)."""
    for marker in markers:
        if marker.get(key) is not None and marker_names(marker, metric):
            return marker[key]
    return None


def is_type_list(value: Any) -> bool:
    """Perturbation ``types``: one name, or a list / tuple of names."""
    return isinstance(value, str) or (
        isinstance(value, list | tuple) and all(isinstance(v, str) for v in value)
    )


def _is_str_map(value: Any) -> bool:
    return isinstance(value, Mapping) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    )


# Marker key -> (check, what it must be). Numbers (threshold, margin, min_rate) are checked
# where they are used, with their ranges.
_MARKER_TYPES = {
    "metric": (lambda v: isinstance(v, str) and bool(v.strip()), "a metric name (str)"),
    "backend": (lambda v: isinstance(v, str), "a backend name (str)"),
    "types": (is_type_list, "a perturbation type name or a list of them (str)"),
    "settings": (lambda v: isinstance(v, Mapping), "a dict of the metric's settings"),
    "models": (_is_str_map, "a dict of model role (str) -> model name (str)"),
}


def check_marker_kwargs(kwargs: Mapping[str, Any], where: str) -> None:
    """Unknown marker keys are an error naming the key (a typo must not be ignored); so is a
    value of the wrong type, naming the key and the type it takes."""
    unknown = sorted(set(kwargs) - set(MARKER_KEYS))
    if unknown:
        raise ConfigError(
            f"{where}: @pytest.mark.faithgate got unknown argument(s) {', '.join(unknown)}; "
            f"allowed: {', '.join(MARKER_KEYS)}"
        )
    for key, (ok, what) in _MARKER_TYPES.items():
        value = kwargs.get(key)
        if value is not None and not ok(value):
            raise ConfigError(
                f"{where}: @pytest.mark.faithgate {key}= must be {what}, "
                f"got {type(value).__name__} {value!r}"
            )
