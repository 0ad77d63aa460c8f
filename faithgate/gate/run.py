"""The run: check -> load outputs -> find pairs -> score through an executor -> evaluate.

This module only orchestrates: the checks of a configuration are ``faithgate.gate.checks``,
the pairs ``faithgate.gate.pairs``, the rules ``faithgate.gate.evaluate`` and the baseline
``faithgate.gate.baseline``; scoring runs through ``faithgate.scoring.execution`` (in process by
default, or on a Ray cluster) with the score cache on the driver, and reports are written by
the callers (``faithgate.report``), so the gate never imports a report.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

from faithgate.cache import ScoreCache
from faithgate.config import GateConfig
from faithgate.errors import InputError
from faithgate.gate.baseline import (
    BaselinePolicy,
    baseline_notes,
    load_baseline,
    missing_baseline_warning,
    record_baseline,
    replaced_metrics,
)
from faithgate.gate.checks import CACHE_FILE, LAST_RESULT, check_config, stale_calibrations
from faithgate.gate.evaluate import evaluate, usage_totals
from faithgate.gate.last_result import save_last_result
from faithgate.gate.pairs import generate_pairs, given_pairs, ignored_pair_fields
from faithgate.io import load_examples
from faithgate.progress import terminal_progress
from faithgate.result import GateResult
from faithgate.safety.escape import printable
from faithgate.scoring.execution import Executor, Progress, ScorerRecipe, make_executor
from faithgate.scoring.scorer import Scorer, refuse_oversized
from faithgate.summarize import run_summarizer
from faithgate.types import Example, Score

# Runs with more examples than this show a progress bar on a terminal.
PROGRESS_MIN_EXAMPLES = 50
SCORE_CHUNK = 16


class Gate:
    """A configured gate: loads its examples, scores them (cached) and evaluates the rules.

    ``scorer`` may be given to share loaded models (the pytest plugin keeps one per session);
    otherwise one is built from the configuration. Scores are cached in ``cache`` (given, or a
    ``ScoreCache`` at ``<cache_dir>/scores.sqlite``; ``cache_dir`` defaults to ``.faithgate``
    next to the configuration; ``use_cache=False`` scores every selected metric afresh and
    writes nothing there). Only the gate's cache is looked up for the selected metrics, also
    with a ``scorer`` that carries a cache of its own: that one serves only what
    ``Scorer.compute`` keeps there, a combination's components (``ensemble``'s).

    ``progress`` is a callback given the number of examples scored since its last call, or
    ``True`` / ``False`` for a terminal bar on stderr, or ``None`` (default) for a bar on a
    terminal when the run has more than ``PROGRESS_MIN_EXAMPLES`` examples. ``baseline`` says
    how the run reads and replaces its baseline (``BaselinePolicy``).
    """

    def __init__(
        self,
        config: GateConfig,
        *,
        scorer: Scorer | None = None,
        cache: ScoreCache | None = None,
        progress: bool | Progress | None = None,
        baseline: BaselinePolicy | None = None,
        use_cache: bool = True,
    ) -> None:
        self.config = config
        self.baseline_policy = baseline or BaselinePolicy()
        self.use_cache = use_cache
        self.progress = progress
        self._scorer = scorer
        self._cache = cache
        self._executor: Executor | None = None
        # After ``run`` with ``BaselinePolicy.defer``: where the caller writes the result as
        # the new baseline (None: not to be replaced).
        self.baseline_to_write: Path | None = None
        # After ``run`` with ``BaselinePolicy.update``: one line saying whether the baseline
        # was written or refused (and why), for the entry points to print.
        self.baseline_note: str | None = None
        # After ``run``: the reports to write. ``--json`` at the baseline path is the baseline,
        # so it is withheld with the baseline when a failing run may not replace it.
        self.reports = config.reports
        # After ``run``: warnings for the entry points to print.
        self.warnings: list[str] = []

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
        """Where scoring runs (``faithgate.scoring.execution``), built on first use, with the cache
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

    # -- running ---------------------------------------------------------------------------
    def run(self, examples: Sequence[Example] | None = None) -> GateResult:
        """Check, load (unless given), score and evaluate; also writes the baseline when asked
        (unless ``BaselinePolicy.defer``: then the caller does, with the reports).
        Reports are written by the caller (``faithgate.report.write_reports``)."""
        start = time.perf_counter()
        cfg, policy = self.config, self.baseline_policy
        checks = check_config(cfg, policy, use_cache=self.use_cache)
        checks.raise_errors()  # before anything is read, summarized or scored
        # The baseline is read before scoring: a broken one must not cost a scoring run.
        read = load_baseline(cfg, policy)
        examples = list(self.load_examples() if examples is None else examples)
        if not examples:
            raise InputError("no examples to gate")
        _refuse_duplicate_ids(examples)  # a file's are refused as it is read; a caller's here
        pairs = given_pairs(cfg, examples)  # none without a pair rule
        rule = cfg.rules.pair_consistency
        generation_notes: list[str] = []
        if rule is not None and rule.generate:
            variants, generated, generation_notes = generate_pairs(examples, rule)
            examples, pairs = examples + variants, pairs + generated
        cache = self.cache
        hits0, misses0 = (cache.hits, cache.misses) if cache is not None else (0, 0)
        try:
            hashes = self.executor.settings_hashes()  # once per run; they key the cache
            self.warnings = [
                *checks.warnings,
                *ignored_pair_fields(cfg, examples, pairs),
                *stale_calibrations(cfg, hashes),
                *generation_notes,
            ]
            missing = missing_baseline_warning(cfg, read)
            if missing is not None:
                self.warnings.append(missing)
            # After the inputs are read and the metrics resolved (their errors name the bad
            # input first), before scoring: a gate that cannot fail must not pass a build.
            if checks.no_criterion is not None:
                raise checks.no_criterion
            scores = self.score(examples)
        finally:
            self.close()  # a Ray run's actors (and a Ray runtime it started) end with scoring
        if policy.update and read.result is not None:
            read = dataclasses.replace(read, replaced=replaced_metrics(cfg, read.result, hashes))
        result = evaluate(cfg, examples, scores, hashes, pairs=pairs, baseline=read)
        # Outputs whose ids name other sources in the baseline, or a baseline too old to tell
        # (not said to a run that replaces it: that is what the note asks for; nor where no
        # metric is compared with it).
        old = read.result
        replaced = policy.update and old is not None and not old.records_sources
        replaced = replaced or set(read.replaced) >= set(cfg.metrics)
        if old is not None and cfg.baseline is not None and not replaced:
            self.warnings += baseline_notes(result, old, cfg.display_path(cfg.baseline))
        if cfg.outputs is not None:
            result.input = cfg.display_path(cfg.outputs)
        elif cfg.summarizer and cfg.data is not None:
            result.input = f"{cfg.summarizer} over {cfg.display_path(cfg.data)}"
        if cache is not None:
            result.cache = {"hits": cache.hits - hits0, "misses": cache.misses - misses0}
        result.usage = usage_totals(cfg.metrics, scores)
        result.seconds = round(time.perf_counter() - start, 3)
        written = record_baseline(result, cfg, policy)
        self.baseline_note, self.reports = written.note, written.reports
        self.baseline_to_write = written.to_write
        if self.use_cache:
            self.warnings += save_last_result(result, cfg.cache_path / LAST_RESULT)
        return result


def _refuse_duplicate_ids(examples: Sequence[Example]) -> None:
    """Raise ``InputError`` for two examples with one id: results, pairs and the regression
    rule are keyed by id, so a later example would silently stand in for an earlier one."""
    seen: set[str] = set()
    for ex in examples:
        if ex.id in seen:
            raise InputError(f"duplicate example id {printable(repr(ex.id))}: ids must be unique")
        seen.add(ex.id)
