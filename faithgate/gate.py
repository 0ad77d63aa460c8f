"""The gate: load outputs -> find pairs -> score through an executor -> evaluate -> baseline.

One engine for every entry point (``faithgate check``, ``pytest --faithgate``, the Action)::

    from faithgate import Gate, load_config
    from faithgate.report import write_reports
    config = load_config()                # [tool.faithgate] / faithgate.toml
    result = Gate(config).run()           # loads outputs, scores (cached), evaluates
    write_reports(result, config.reports) # JUnit / Markdown / JSON / HTML as configured
    raise SystemExit(0 if result.passed else 1)

This module only orchestrates. The result data model is ``faithgate.result``, the rules (pure:
pairs, thresholds, pass rate, pair consistency, regression) are ``faithgate.rules``, scoring
runs through ``faithgate.execution`` (in process by default, or on a Ray cluster) with the
score cache on the driver, and reports are written by the callers (``faithgate.report``), so
the gate never imports a report. Their names are re-exported here for older imports.

``Gate.run`` with ``update_baseline`` writes the result as the new baseline only when the gate
passed (a failing run must not become the next release's reference) or when ``force_baseline``
says so; ``Gate.baseline_note`` says what happened.
"""

from __future__ import annotations

import importlib
import os
import random
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from faithgate.cache import ScoreCache
from faithgate.config import GateConfig
from faithgate.errors import ConfigError, InputError, WriteError
from faithgate.escape import printable
from faithgate.execution import Executor, Progress, ScorerRecipe, make_executor
from faithgate.io import load_examples
from faithgate.metrics.base import metric_class, metric_names
from faithgate.paths import refuse_not_a_file, refuse_overwriting_inputs, same_file
from faithgate.progress import terminal_progress
from faithgate.result import (
    RESULT_SCHEMA,
    ExampleResult,
    GateResult,
    MetricResult,
    PairResult,
    RuleResult,
    SentenceRef,
)
from faithgate.rules import (
    FAITHFUL_ROLES,
    UNFAITHFUL_ROLES,
    Pair,
    baseline_notes,
    check_has_criterion,
    check_rule_metrics,
    describe_edit,
    evaluate,
    find_pairs,
    given_pairs,
    ignored_pair_fields,
    limits_outside_range,
    paired_bootstrap_drop,
    stale_calibrations,
    unused_thresholds,
)
from faithgate.scorer import Scorer, refuse_oversized
from faithgate.summarize import run_summarizer
from faithgate.types import Example, Score, is_blank

__all__ = [
    "FAITHFUL_ROLES",
    "RESULT_SCHEMA",
    "UNFAITHFUL_ROLES",
    "ExampleResult",
    "Gate",
    "GateResult",
    "MetricResult",
    "Pair",
    "PairResult",
    "RuleResult",
    "SentenceRef",
    "check_has_criterion",
    "check_rule_metrics",
    "describe_edit",
    "evaluate",
    "find_pairs",
    "paired_bootstrap_drop",
    "stale_calibrations",
    "unused_thresholds",
    "usage_totals",
]

# Runs with more examples than this show a progress bar on a terminal.
PROGRESS_MIN_EXAMPLES = 50
SCORE_CHUNK = 16
# The score cache's file in ``cache_dir`` (shared with `pytest --faithgate`).
CACHE_FILE = "scores.sqlite"
# The result of the last run with a cache, beside it: a convenience, faithgate's own file.
LAST_RESULT = "last-result.json"


def is_own_result(path: Path) -> bool:
    """Whether ``path`` is free for the last run's result: absent, or a file that a run wrote
    (a JSON object whose first keys include ``schema`` or ``verdict``, as ``GateResult.save``
    writes them, in its first 4 KiB). A user's file of that name, or anything else there, is
    never replaced or removed."""
    if not os.path.lexists(path):
        return True
    if not path.is_file():  # follows a symlink: the atomic write replaces what it points to
        return True  # not a regular file: the atomic write refuses it, with its own reason
    try:
        with path.open("rb") as handle:
            head = handle.read(4096)
    except OSError:
        return True  # unreadable: the write reports what is wrong
    return (
        head.lstrip().startswith(b"{") and re.search(rb'"(schema|verdict)"\s*:', head) is not None
    )


class Gate:
    """A configured gate: loads its examples, scores them (cached) and evaluates the rules.

    ``scorer`` may be given to share loaded models (the pytest plugin keeps one per session);
    otherwise one is built from the configuration. Scores are cached in ``cache`` (given, or a
    ``ScoreCache`` at ``<cache_dir>/scores.sqlite``; ``cache_dir`` defaults to ``.faithgate``
    next to the configuration; ``use_cache=False`` scores every selected metric afresh and
    writes nothing there). Only the gate's cache is looked up for the selected metrics, also
    with a ``scorer`` that carries a cache of its own, ``use_cache=False`` or not: that one
    serves only what ``Scorer.compute`` keeps there, a combination's components (``ensemble``'s).
    Scoring runs through the executor of ``config.execution``
    (``faithgate.execution``: in process by default, or on a Ray cluster), with the cache
    wrapped around it here on the driver (``CachedExecutor``).

    ``progress`` is a callback given the number of examples scored since its last call, or
    ``True`` / ``False`` for a terminal bar on stderr, or ``None`` (default) for a bar on a
    terminal when the run has more than ``PROGRESS_MIN_EXAMPLES`` examples.

    ``explicit_baseline`` says the baseline path was named for this run (``--baseline``): a
    file that does not exist is then an ``InputError`` (exit 2; most likely a typo) unless this
    run creates it (``update_baseline``). A configured baseline that does not exist yet is a
    first run: the regression rule is skipped with a warning.

    ``defer_baseline`` (with ``update_baseline``) leaves the baseline write to the caller:
    ``run`` sets ``baseline_to_write`` instead, for ``write_reports(..., baseline=...)`` to
    write with the reports as one set, so a report that cannot be written leaves the baseline
    as it was (``baseline_note`` then says what happens once that write succeeds).
    """

    def __init__(
        self,
        config: GateConfig,
        *,
        scorer: Scorer | None = None,
        cache: ScoreCache | None = None,
        progress: bool | Progress | None = None,
        update_baseline: bool = False,
        force_baseline: bool = False,
        use_cache: bool = True,
        explicit_baseline: bool = False,
        defer_baseline: bool = False,
    ) -> None:
        self.config = config
        self.explicit_baseline = explicit_baseline
        self.use_cache = use_cache
        self._scorer = scorer
        self._cache = cache
        self._executor: Executor | None = None
        self.progress = progress
        self.update_baseline = update_baseline
        self.force_baseline = force_baseline
        self.defer_baseline = defer_baseline
        # After ``run`` with ``defer_baseline``: where the caller writes the result as the new
        # baseline (None: not to be replaced).
        self.baseline_to_write: Path | None = None
        # After ``run`` with ``update_baseline``: one line saying whether the baseline was
        # written or refused (and why), for the entry points to print.
        self.baseline_note: str | None = None
        # After ``run``: the reports to write. ``--json`` at the baseline path is the baseline,
        # so it is withheld with the baseline when a failing run may not replace it.
        self.reports = config.reports
        # After ``run``: warnings for the entry points to print (e.g. a threshold calibrated
        # under other settings than this run's).
        self.warnings: list[str] = []
        # Warnings of the last generate_pairs (outputs that got no generated pair, and why).
        self.generation_notes: list[str] = []

    # -- scoring ---------------------------------------------------------------------------
    @property
    def scorer(self) -> Scorer:
        """The in-process ``Scorer`` (models loaded once). It is given the cache for a
        combination's components only (``ensemble``'s, read and written in ``compute``): the
        selected metrics' cells are looked up and written by the executor's cache wrapper."""
        if self._scorer is None:
            self._scorer = ScorerRecipe.from_config(self.config).build(cache=self.cache)
        return self._scorer

    @property
    def cache(self) -> ScoreCache | None:
        """The score cache of this gate (``None`` with ``use_cache=False``)."""
        if not self.use_cache:
            return None
        if self._cache is None:
            self._cache = ScoreCache(self.config.cache_path / CACHE_FILE)
        return self._cache

    @property
    def executor(self) -> Executor:
        """Where scoring runs (``faithgate.execution``), built on first use, with the cache
        around it on the driver; the local one scores with ``self.scorer``."""
        if self._executor is None:
            self._executor = make_executor(
                self.config.execution,
                ScorerRecipe.from_config(self.config),
                scorer=self.scorer,
                cache=self.cache,
            )
        return self._executor

    def close(self) -> None:
        """End of the run: release the executor's workers (a Ray actor pool) and what the
        scorer's engines hold per input (its models stay loaded for the next run)."""
        if self._executor is not None:
            self._executor.close()
            self._executor = None
        if self._scorer is not None:
            self._scorer.release()

    def load_examples(self) -> list[Example]:
        """The outputs to gate: the ``outputs`` file, or the summarizer run over ``data``."""
        cfg = self.config
        if cfg.outputs is not None:
            # An empty summary is a bad output, not bad input: it fails its own example.
            return load_examples(cfg.outputs, allow_empty_summary=True)
        if cfg.summarizer is not None and cfg.data is not None:
            return run_summarizer(cfg.summarizer, cfg.data, search_path=[cfg.root])
        raise InputError(
            "nothing to gate: set 'outputs' (a JSONL of summaries) or 'summarizer' + 'data' "
            "in [tool.faithgate], or pass --outputs / --summarizer and --data"
        )

    def value_ranges(self) -> dict[str, tuple[float | None, float | None]]:
        """Metric -> the range its scores can take under the configured settings (none
        loads a model); a threshold outside it judges nothing or fails every run."""
        return {
            m: metric_class(m).value_range(self.config.metric_settings.get(m, {}))
            for m in self.config.metrics
        }

    def score(self, examples: Sequence[Example]) -> list[dict[str, Score]]:
        """Scores of every metric for every example, through the executor, in chunks so
        progress is reported as they finish (see ``progress`` on the class)."""
        examples = list(examples)
        refuse_oversized(examples)  # here too: a Ray worker would raise it far from the user
        executor = self.executor
        with self._progress(len(examples)) as advance:
            if advance is None:
                return executor.score(examples)
            if executor.parallel:
                # One call keeps every worker busy; progress moves as batches come back.
                return executor.score(examples, progress=advance)
            out: list[dict[str, Score]] = []
            for start in range(0, len(examples), SCORE_CHUNK):
                chunk = examples[start : start + SCORE_CHUNK]
                out.extend(executor.score(chunk))
                advance(len(chunk))
            return out

    def _progress(self, total: int) -> AbstractContextManager[Progress | None]:
        """The callback that reports scored examples: the caller's, a terminal bar (auto: a
        terminal and more than ``PROGRESS_MIN_EXAMPLES`` examples), or none."""
        show = self.progress
        if callable(show):
            return nullcontext(show)
        if show is None:
            show = total > PROGRESS_MIN_EXAMPLES and sys.stderr.isatty()
        return terminal_progress(total, "scoring") if show else nullcontext(None)

    def generate_pairs(self, examples: Sequence[Example]) -> tuple[list[Example], list[Pair]]:
        """Perturbed variants of every output (``faithgate.perturb``) as extra examples and
        the pairs linking them to their originals (indices offset by ``len(examples)``)."""
        rule = self.config.rules.pair_consistency
        assert rule is not None
        try:
            # import_module, not ``from faithgate import perturb``: the package's lazy public
            # API maps that name to the function, not the module. Imported on use: perturb
            # loads word lists and spaCy, which only pair generation needs.
            perturb_module = importlib.import_module("faithgate.perturb")
        except ImportError as exc:
            raise InputError(
                f"pair_consistency.generate needs faithgate.perturb, which cannot be imported ({exc})"
            ) from None
        variants: list[Example] = []
        pairs: list[Pair] = []
        base = len(examples)
        taken = {ex.id for ex in examples}  # a user's id may look like a variant's ("a~0")
        not_english = 0
        for i, ex in enumerate(examples):
            role = str(ex.meta.get("role") or "").strip().casefold()  # as rules.pair_role
            if role in UNFAITHFUL_ROLES or is_blank(ex.summary):  # nothing to edit
                continue
            made = _call_perturb(perturb_module, ex, rule)
            english = getattr(perturb_module, "reads_as_english", None)
            if not made and english is not None and not english(ex.source):
                not_english += 1
            for k, (text, etype) in enumerate(made[: rule.per_example]):
                vid = f"{ex.id}~{k}"
                while vid in taken:
                    vid += "~"
                taken.add(vid)
                variants.append(
                    Example(
                        vid,
                        ex.source,
                        text,
                        meta={
                            "pair_id": f"gen:{vid}",
                            "role": "edited",
                            "error_type": etype,
                            "generated": True,
                        },
                    )
                )
                pairs.append(Pair(i, base + len(variants) - 1, f"gen:{vid}", etype, True))
        self.generation_notes = (
            [
                f"{not_english} output(s) got no generated minimal pair: their source does not "
                "read as English, and faithgate.perturb's edit rules are English (they would make "
                "garbage edits that flatter a metric)"
            ]
            if not_english
            else []
        )
        return variants, pairs

    # -- running ---------------------------------------------------------------------------
    def run(self, examples: Sequence[Example] | None = None) -> GateResult:
        """Load (unless given), score and evaluate; also writes the baseline when asked (unless
        ``defer_baseline``: then the caller does, with the reports).
        Reports are written by the caller (``faithgate.report.write_reports``)."""
        start = time.perf_counter()
        check_rule_metrics(self.config)  # before any model loads: fail fast on a typo
        check_regression_baseline(self.config)  # likewise: not a gate failure after scoring
        self.config.check_metric_keys(metric_names())  # a threshold for no metric: a typo
        self.check_paths()
        # The baseline is read before scoring: a broken one must not cost a scoring run.
        baseline, baseline_error, baseline_missing = self._load_baseline()
        examples = list(self.load_examples() if examples is None else examples)
        if not examples:
            raise InputError("no examples to gate")
        _refuse_duplicate_ids(examples)  # a file's are refused as it is read; a caller's here
        pairs = given_pairs(self.config, examples)  # none without a pair rule
        rule = self.config.rules.pair_consistency
        self.generation_notes = []
        if rule is not None and rule.generate:
            variants, generated = self.generate_pairs(examples)
            examples = examples + variants
            pairs = pairs + generated
        cache = self.cache
        hits0, misses0 = (cache.hits, cache.misses) if cache is not None else (0, 0)
        try:
            hashes = self.executor.settings_hashes()  # once per run; they key the cache
            ranges = self.value_ranges()
            self.warnings = (
                unused_thresholds(self.config)
                + ignored_pair_fields(self.config, examples, pairs)
                + limits_outside_range(self.config, ranges)
                + stale_calibrations(self.config, hashes)
                + self.generation_notes
            )
            regression = self.config.rules.regression
            required = regression is not None and regression.require_baseline
            if baseline_missing and not self.update_baseline and not required:
                # Said on stderr too (so the Action annotates it): a mistyped baseline path
                # reads exactly as a first run does.
                self.warnings.append(f"{baseline_error}; {self._skipped_by_missing_baseline()}")
            # After the inputs are read and the metrics resolved (their errors name the bad
            # input first), before scoring: a gate that cannot fail must not pass a build.
            check_has_criterion(self.config, ranges)
            scores = self.score(examples)
        finally:
            self.close()  # a Ray run's actors (and a Ray runtime it started) end with scoring
        stale: dict[str, str] = {}
        if self.update_baseline and baseline is not None:
            # The regression rule says "update it with --update-baseline" for scores made
            # with other settings, or for a metric the baseline lacks (newly selected); that
            # run must not be refused for the same mismatch. Only those metrics: the others
            # are still compared, or a run that regressed on them would pass and become the
            # reference because another metric was added or re-configured.
            where = self.config.display_path(self.config.baseline)  # type: ignore[arg-type]
            stale = {
                m: f"the baseline at {where} holds no {m} scores made with these settings "
                "(this run replaces it)"
                for m in self.config.metrics
                if m not in baseline.metrics or baseline.settings_hashes.get(m) != hashes.get(m)
            }
        result = evaluate(
            self.config,
            examples,
            scores,
            hashes,
            pairs=pairs,
            baseline=baseline,
            baseline_error=baseline_error,
            baseline_created=baseline is None and self.update_baseline,
            baseline_missing=baseline_missing,
            baseline_replaced=stale,
        )
        cfg = self.config
        # Outputs whose ids name other sources in the baseline, or a baseline too old to tell
        # (not said to a run that replaces it: that is what the note asks for; nor where no
        # metric is compared with it).
        replaced = self.update_baseline and baseline is not None and not baseline.records_sources
        replaced = replaced or set(stale) >= set(cfg.metrics)
        if baseline is not None and cfg.baseline is not None and not replaced:
            self.warnings += baseline_notes(result, baseline, cfg.display_path(cfg.baseline))
        if cfg.outputs is not None:
            result.input = cfg.display_path(cfg.outputs)
        elif cfg.summarizer and cfg.data is not None:
            result.input = f"{cfg.summarizer} over {cfg.display_path(cfg.data)}"
        if cache is not None:
            result.cache = {"hits": cache.hits - hits0, "misses": cache.misses - misses0}
        result.usage = usage_totals(self.config.metrics, scores)
        result.seconds = round(time.perf_counter() - start, 3)
        if self.update_baseline:
            if self.config.baseline is None:
                raise InputError(
                    "--update-baseline needs a baseline path (--baseline or 'baseline')"
                )
            where = cfg.display_path(self.config.baseline)
            if result.passed or self.force_baseline:
                if self.defer_baseline:
                    self.baseline_to_write = self.config.baseline
                else:
                    result.save(self.config.baseline)
                self.baseline_note = f"baseline updated: {where}" + (
                    " (forced: this run FAILED the gate, and is now the reference)"
                    if not result.passed
                    else ""
                )
            else:
                # A failing run must not silently become the next release's reference.
                self.baseline_note = (
                    f"baseline NOT updated: the gate failed, so {where} keeps its previous "
                    "content; fix the failures, or pass --force to record this failing run "
                    "as the baseline"
                )
                json_report = cfg.reports.json
                if json_report is not None and same_file(json_report, cfg.baseline):
                    self.reports = cfg.reports.with_path("json", None)
                    self.baseline_note += " (the json report is that file: not written either)"
        if self.use_cache:
            # A convenience beside the cache, like the cache itself: a full disk or a
            # read-only cache directory costs it, with a warning, never the verdict or reports.
            # A directory, FIFO or device there is not faithgate's: never written into,
            # replaced or removed (the atomic write refuses it), only warned about.
            last = self.config.cache_path / LAST_RESULT
            try:
                if not is_own_result(last):
                    raise WriteError(last, "a file that faithgate did not write is there")
                result.save(last)
            except WriteError as exc:
                # The previous run's file would read as this run's result: removed if it can be.
                stale = ""
                try:
                    if last.is_file() and is_own_result(last):
                        last.unlink()
                        stale = "; the previous run's file there is removed"
                    elif os.path.lexists(last):
                        stale = " (left as it was)"
                except OSError:
                    stale = "; it still holds the previous run's result"
                self.warnings.append(
                    f"cannot write {printable(last)}: {exc.reason}{stale}; the verdict and "
                    "reports of this run stand"
                )
        return result

    def check_paths(self) -> None:
        """Refuse (``InputError``, exit 2) a report or baseline path that is one of this run's
        inputs (outputs, data, configuration, a baseline only read), before anything runs."""
        cfg = self.config
        writes = output_files(cfg, update_baseline=self.update_baseline)
        # Every run with a cache writes its result there too (a cache "directory" that is a
        # file has its own error, from the cache): never over an input or a report, but as
        # faithgate's own bookkeeping, a directory or FIFO in its place does not stop the run
        # (``run`` warns that it cannot be written, and leaves it as it is).
        own: list[tuple[str, Any]] = []
        inputs = input_files(cfg, baseline=not self.update_baseline)
        if self.use_cache and not cfg.cache_path.is_file():
            own.append(("last result in the cache directory", cfg.cache_path / LAST_RESULT))
            # Read and written by the run in place: a report there would replace it.
            inputs.append(("score cache", cfg.cache_path / CACHE_FILE))
        refuse_overwriting_inputs(writes, inputs, bookkeeping=own)

    def _skipped_by_missing_baseline(self) -> str:
        """What a missing baseline turns off: the regression rule, and the per-example
        thresholds when they are configured (the check that catches single-fact edits)."""
        regression = self.config.rules.regression
        if regression is not None and regression.per_example_drop:
            return (
                "the regression rule is skipped and the per-example thresholds "
                "(rules.regression.per_example_drop) are off"
            )
        return "the regression rule is skipped"

    def _load_baseline(self) -> tuple[GateResult | None, str | None, bool]:
        """(baseline, why there is none, whether the file is simply missing)."""
        path = self.config.baseline
        if path is None:
            return None, None, False
        try:
            mode: int | None = path.stat().st_mode
        except (FileNotFoundError, NotADirectoryError):  # nothing there: no baseline yet
            mode = None
        except OSError as exc:
            # Unreadable is not missing: taken for a missing baseline, it skipped the
            # regression rule (fail-open) for, e.g., a directory the runner cannot search.
            raise InputError(
                f"cannot read baseline {printable(str(self.config.display_path(path)))}: "
                f"{printable(exc.strerror or type(exc).__name__)}"
            ) from None
        if mode is not None:
            # A pipe (``--baseline <(git show main:base.json)``) is read like a file; a
            # directory, device or socket is refused (it was taken for a missing baseline,
            # and the regression rule skipped).
            refuse_not_a_file(self.config.display_path(path), mode, "baseline", pipe=True)
        else:
            where = self.config.display_path(path)
            if self.update_baseline:
                return None, f"no previous baseline at {where} (this run creates it)", True
            if self.explicit_baseline:
                check_baseline_exists(self.config)
            return (
                None,
                f"no baseline yet at {where}; create it from a passing run with "
                "`faithgate check --update-baseline`",
                True,
            )
        return GateResult.load(path), None, False


def check_baseline_exists(config: GateConfig) -> None:
    """Raise ``InputError`` when ``config.baseline`` names no file: for a path named for this
    run (``--baseline``), which is far more likely a typo than a first run; skipping the
    comparison would pass what it should have caught (the per-example thresholds too)."""
    path = config.baseline
    if path is not None and not path.exists():
        raise InputError(
            f"no baseline at {config.display_path(path)} (given with --baseline); check the "
            "path, or run with --update-baseline to create it"
        )


def check_regression_baseline(config: GateConfig) -> None:
    """Raise ``ConfigError`` when ``rules.regression`` is configured with no baseline path
    (``baseline`` in the configuration, ``--baseline``): the rule could only fail, after a
    full scoring run, as a failed gate. A path whose file does not exist yet is a first run
    (``_load_baseline``), not this."""
    if config.rules.regression is not None and config.baseline is None:
        raise ConfigError(
            "rules.regression needs a baseline to compare with: set 'baseline' (the path of a "
            "previous result JSON) in the configuration, or pass --baseline"
        )


def output_files(config: GateConfig, *, update_baseline: bool) -> list[tuple[str, Any]]:
    """The reports a gate run of ``config`` writes and, with ``update_baseline``, the baseline,
    as ``(what, path)`` for ``faithgate.paths.refuse_overwriting_inputs``. A json report at
    the baseline path writes the same result twice: allowed, so the baseline is not listed."""
    files: list[tuple[str, Any]] = [
        (f"{kind} report", path) for kind, path in config.reports.items()
    ]
    if update_baseline and config.baseline is not None:
        json_report = config.reports.json
        if json_report is None or not same_file(json_report, config.baseline):
            files.append(("baseline", config.baseline))
    return files


def input_files(config: GateConfig, *, baseline: bool = True) -> list[tuple[str, Any]]:
    """The files a gate run of ``config`` reads, as ``(what, path or None)`` for
    ``faithgate.paths.refuse_overwriting_inputs``: the outputs, data and configuration files,
    and (``baseline``) the baseline, which a run reads unless it updates it."""
    files: list[tuple[str, Any]] = [
        ("outputs file", config.outputs),
        ("data file", config.data),
        ("configuration file", config.source),
    ]
    if config.summarizer:
        files += [("summarizer's module", path) for path in _module_files(config)]
    for metric, settings in config.metric_settings.items():
        for key, value in settings.items():  # e.g. a combination's weights file
            if isinstance(value, str):
                for base in (Path.cwd(), config.root):
                    if (base / value).is_file():
                        files.append((f"metric_settings.{metric}.{key} file", base / value))
    return files + ([("baseline", config.baseline)] if baseline else [])


def _module_files(config: GateConfig) -> list[Path]:
    """The source file of the summarizer's module where ``run_summarizer`` would find it
    first (the configuration's directory, then the current one), without importing it."""
    module = str(config.summarizer).partition(":")[0].replace(".", "/")
    found = []
    for base in (config.root, Path.cwd()):
        for candidate in (base / f"{module}.py", base / module / "__init__.py"):
            if module and candidate.is_file():
                found.append(candidate)
    return found


def usage_totals(
    metrics: Sequence[str], scores: Sequence[Mapping[str, Score]]
) -> dict[str, dict[str, int]]:
    """Per metric (in ``metrics``' order), the sum of each counter its scores report in
    ``details["usage"]`` (a mapping of counter -> whole number, e.g. ``requests``,
    ``cached_answers``, ``prompt_tokens``, ``completion_tokens``): what a metric that calls a
    paid model spent on this run. Failed scores count (their requests were sent); a score read
    from the score cache carries none (``faithgate.cache``), as it cost nothing. A metric
    without usage is left out; a counter that is not a whole number of at least 0 is not added."""
    totals: dict[str, dict[str, int]] = {}
    for row in scores:
        for metric, score in row.items():
            usage = score.details.get("usage") if isinstance(score.details, Mapping) else None
            if not isinstance(usage, Mapping):
                continue
            into = totals.setdefault(metric, {})
            for key, n in usage.items():
                if isinstance(n, int) and not isinstance(n, bool) and n >= 0:
                    into[str(key)] = into.get(str(key), 0) + n
    order = {m: i for i, m in enumerate(metrics)}
    ranked = sorted(totals, key=lambda m: (order.get(m, len(order)), m))
    return {m: totals[m] for m in ranked if totals[m]}


def _refuse_duplicate_ids(examples: Sequence[Example]) -> None:
    """Raise ``InputError`` for two examples with one id: results, pairs and the regression
    rule are keyed by id, so a later example would silently stand in for an earlier one."""
    seen: set[str] = set()
    for ex in examples:
        if ex.id in seen:
            raise InputError(f"duplicate example id {printable(repr(ex.id))}: ids must be unique")
        seen.add(ex.id)


def _call_perturb(module: Any, ex: Example, rule: Any) -> list[tuple[str, str | None]]:
    """Adapter over ``faithgate.perturb.perturb``: variants as (text, error type)."""
    func: Callable[..., Any] = module.perturb
    kwargs: dict[str, Any] = {"seed": rule.seed}
    if rule.types:
        kwargs["types"] = tuple(rule.types)  # hashable: perturb caches type resolution
    made = list(func(ex.source, ex.summary, **kwargs))
    # One variant per type comes back in a fixed type order; shuffle (seeded per example) so
    # ``per_example`` keeps a mix of error types rather than always the first types.
    random.Random(f"{rule.seed}:{ex.id}").shuffle(made)
    out: list[tuple[str, str | None]] = []
    for v in made:
        if isinstance(v, str):
            out.append((v, None))
        elif isinstance(v, Mapping):
            out.append((v.get("summary") or v.get("text"), v.get("error_type") or v.get("type")))
        else:
            text = getattr(v, "summary", None) or getattr(v, "text", None)
            etype = getattr(v, "error_type", None) or getattr(v, "type", None)
            out.append((text, etype))
    return [(t, e) for t, e in out if isinstance(t, str) and t.strip() and t != ex.summary]
