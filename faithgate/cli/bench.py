"""``faithgate bench``, ``faithgate calibrate`` and ``faithgate perturb``.

Argument handling and printing only: the work is in ``faithgate.evaluation.bench``,
``faithgate.evaluation.calibrate`` and ``faithgate.perturb``.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click

from faithgate.backends import BACKEND_CHOICES
from faithgate.cli.execution_options import execution_options, execution_settings
from faithgate.cli.params import FiniteFloatRange
from faithgate.cli.score import parse_assignments, parse_settings, read_source_and_summary
from faithgate.errors import InputError
from faithgate.safety.escape import (
    defuse_workflow_commands,
    json_for_terminal,
    printable,
    safe_line,
)
from faithgate.safety.paths import lies_inside, refuse_overwriting_inputs, same_file

_metric_option = click.option(
    "--metric",
    "metric_names",
    multiple=True,
    metavar="NAME",
    help="Metric to evaluate (repeatable).",
)
_set_option = click.option(
    "--set",
    "settings",
    multiple=True,
    metavar="METRIC.KEY=VALUE",
    help="Metric setting, e.g. --set overlap.component=rouge1 (repeatable).",
)
_model_option = click.option(
    "--model",
    "model_args",
    multiple=True,
    metavar="ROLE=ID_OR_PATH",
    help="Model for a role (embedder, lm, spacy, nli, ...); repeatable.",
)
_backend_option = click.option(
    "--backend", type=click.Choice(BACKEND_CHOICES), default="auto", show_default=True
)
_cache_option = click.option(
    "--cache",
    "cache_path",
    metavar="FILE",
    help="Score cache (SQLite); default: $FAITHGATE_HOME/bench/scores.sqlite.",
)
_no_cache_option = click.option("--no-cache", is_flag=True, help="Score without the cache.")
# numpy's generators take seeds in [0, 2**32 - 1]; outside it they raise a ValueError.
_seed_type = click.IntRange(0, 2**32 - 1)


def _cache_arg(cache_path: str | None, no_cache: bool) -> str | None:
    if no_cache:
        return None
    return cache_path or "default"


def _cache_outputs(cache_path: str | None, no_cache: bool) -> list[tuple[str, Path | None]]:
    """The files the score cache writes (the SQLite file and its timings beside it), to be
    checked against the run's inputs and other outputs: ``--output c.sqlite`` would replace
    the cache with JSON, and ``--cache data.jsonl`` move the data aside as a corrupt cache."""
    if no_cache:
        return []
    from faithgate.evaluation.bench.scoring import default_cache_path

    cache = Path(cache_path) if cache_path else default_cache_path()
    if cache.name in ("", ".", ".."):  # no file name (refused below as a directory)
        return [("score cache", cache)]
    return [
        ("score cache", cache),
        ("score cache's timings file", cache.with_suffix(".timings.json")),
    ]


def _read_paths(
    settings: dict[str, dict[str, Any]], models: dict[str, str]
) -> list[tuple[str, Path]]:
    """The local files and directories a run reads through ``--set METRIC.KEY=FILE`` (a
    combination's weights) and ``--model ROLE=PATH``, as ``(what, path)``: the inputs
    ``faithgate check`` lists from its ``metric_settings`` (``gate.input_files``), and models."""
    found: list[tuple[str, Path]] = []

    def add(what: str, value: Any, dirs: bool) -> None:
        if isinstance(value, list):
            for v in value:
                add(what, v, dirs)
            return
        if not isinstance(value, str) or not value.strip():
            return
        path = Path(value)
        try:
            if path.is_file():
                found.append((f"{what} file", path))
            elif dirs and path.is_dir():
                found.append((f"{what} directory", path))
        except OSError:  # a name too long, a loop of links: not a path this run reads
            return

    for metric, values in settings.items():
        for key, value in values.items():  # files only, as `check` lists them: a setting
            add(f"--set {metric}.{key}", value, dirs=False)  # may happen to name a folder
    for role, location in models.items():
        add(f"--model {role}", location, dirs=True)
    return found


def _refuse_overwriting(
    outputs: Sequence[tuple[str, str | Path | None]],
    inputs: Sequence[tuple[str, str | Path | None]],
    settings: dict[str, dict[str, Any]],
    models: dict[str, str],
) -> None:
    """``refuse_overwriting_inputs`` with the files named by ``--set`` and ``--model`` among
    the inputs; an output inside a directory so named (a model's) is refused too."""
    read = _read_paths(settings, models)
    refuse_overwriting_inputs(outputs, [*inputs, *((w, p) for w, p in read if p.is_file())])
    for what, path in outputs:
        if path is None or str(path) == "-":
            continue
        for in_what, directory in read:
            if directory.is_dir() and lies_inside(Path(path), directory):
                raise InputError(
                    f"the {what} ({printable(path)}) lies inside the {in_what} "
                    f"({printable(directory)}) this run reads; refusing to write there: "
                    "choose another path"
                )


def _refuse_plots_directory(plots: Path, files: Mapping[str, str | None]) -> None:
    """Before scoring: ``--plots`` names a directory, so a file there (or an output file of
    this run at that very path) would only fail once every score was computed."""
    if os.path.lexists(plots) and not plots.is_dir():
        raise InputError(
            f"--plots {printable(plots)} is a file, not a directory (figures are written into "
            "one); choose another path"
        )
    for option, path in files.items():
        if path and path != "-" and same_file(path, plots):
            raise InputError(
                f"the {option} ({printable(path)}) is also the --plots directory; choose "
                "another path"
            )


@click.command("bench")
@click.option(
    "--data",
    "data",
    multiple=True,
    required=True,
    metavar="FILE_OR_DIR",
    help="Benchmark .jsonl / .csv file, or a directory of them (repeatable).",
)
@_metric_option
@_set_option
@_model_option
@_backend_option
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    metavar="N",
    help="Score a reproducible sample of ~N rows per file (pairs kept whole).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the full result as JSON.")
@click.option("--output", metavar="FILE", help="Also write the JSON result to FILE.")
@click.option("--plots", metavar="DIR", help="Write PNG figures (ROC curves, histograms) to DIR.")
@click.option(
    "--combine",
    metavar="TRAIN.jsonl",
    help="Fit a logistic combination of the metrics on this labelled file (cross-validated) "
    "and report it on the --data files.",
)
@click.option("--save-weights", metavar="FILE.json", help="Where to save the --combine weights.")
@click.option(
    "--combine-limit",
    type=click.IntRange(min=0),
    metavar="N",
    help="Rows of the --combine file to fit on (default: --limit; 0 = all).",
)
@click.option(
    "--resamples",
    type=click.IntRange(min=0),
    default=1000,
    show_default=True,
    help="Bootstrap resamples (0: no confidence intervals or tests).",
)
@click.option("--seed", type=_seed_type, default=0, show_default=True)
@_cache_option
@_no_cache_option
@click.option("--quiet", "-q", is_flag=True, help="No progress on stderr.")
@execution_options
def bench_command(
    data: tuple[str, ...],
    metric_names: tuple[str, ...],
    settings: tuple[str, ...],
    model_args: tuple[str, ...],
    backend: str,
    limit: int | None,
    as_json: bool,
    output: str | None,
    plots: str | None,
    combine: str | None,
    save_weights: str | None,
    combine_limit: int | None,
    resamples: int,
    seed: int,
    cache_path: str | None,
    no_cache: bool,
    quiet: bool,
    executor: str | None,
    address: str | None,
    num_workers: int | None,
) -> None:
    """Meta-evaluate metrics on labelled benchmark files (Markdown table, or --json).

    Balanced accuracy is held out, by the method of SummaC (Laban et al. 2022) on a seeded
    50/50 split of each file's distinct items (by item, stratified by label): the threshold is
    chosen on one half and balanced accuracy measured on the other, about half of the n shown.
    Its CI resamples both halves and re-chooses the threshold in each resample.

    A 95% confidence interval needs at least 3 pairs (consistency) or 3 items of each class
    (ROC AUC; balanced accuracy: in each half), and a zero-width one at least 10; below that
    it is shown as "n too small" (null in --json, listed under ci_n_too_small) with a warning.
    Two --data files with the same name (a/d.jsonl, b/d.jsonl) are refused: results and
    --plots files are named after the file. A file with only one class, or with neither labels
    nor human `score`s, gets a warning that no label-based figure can be computed (still exit
    0: its timing, scores and any correlations are reported)."""
    from faithgate.evaluation.bench.files import benchmark_files, refuse_same_names
    from faithgate.evaluation.bench.report import json_ready, markdown_report
    from faithgate.evaluation.bench.run import run_bench

    if not metric_names:
        raise InputError("no metric selected: pass --metric NAME (repeatable)")
    if save_weights and not combine:
        raise InputError("--save-weights needs --combine TRAIN.jsonl")
    # A directory's files are inputs too; run_bench lists them again and warns of skipped ones.
    files = [f for d in data for f in benchmark_files(d, warn=False)]
    refuse_same_names(files)
    plot_files: list[tuple[str, Path | None]] = []
    if plots:  # every figure bench may draw, by its name (evaluation.bench.plots)
        _refuse_plots_directory(
            Path(plots),
            {"--output": output, "--save-weights": save_weights}
            | {what: str(path) for what, path in _cache_outputs(cache_path, no_cache)},
        )
        names = [*metric_names, *(["combined"] if combine else [])]
        plot_files = [
            ("--plots file", Path(plots) / f"{f.stem}__{m}__{kind}.png")
            for f in files
            for m in names
            for kind in ("roc", "hist")
        ]
    models = parse_assignments(model_args, "--model")
    metric_settings = parse_settings(settings)
    _refuse_overwriting(
        [("--output file", output), ("--save-weights file", save_weights)]
        + _cache_outputs(cache_path, no_cache)
        + plot_files,
        [("--data file", f) for f in files] + [("--combine file", combine)],
        metric_settings,
        models,
    )
    result = run_bench(
        data,
        list(metric_names),
        limit=limit,
        seed=seed,
        n_resamples=resamples,
        cache=_cache_arg(cache_path, no_cache),
        backend=backend,
        models=models,
        metric_settings=metric_settings,
        plots=plots,
        combine=combine,
        save_weights=save_weights,
        combine_limit=-1 if combine_limit is None else (combine_limit or None),
        progress=not quiet,
        execution=execution_settings(executor, address, num_workers),
    )
    doc = json_ready(result)
    if output:
        from faithgate.safety.atomic import atomic_write_text

        atomic_write_text(output, json.dumps(doc, indent=1))
    if as_json:
        click.echo(json_for_terminal(doc, indent=1))
    else:
        click.echo(defuse_workflow_commands(markdown_report(result)))


@click.command("calibrate")
@click.option("--data", required=True, metavar="FILE.jsonl", help="Labelled examples (label 1/0).")
@click.option("--metric", "metric_name", required=True, metavar="NAME")
@click.option(
    "--target-precision",
    # Checked here, before any example is scored (NaN, inf, 1.5 were refused after scoring).
    type=FiniteFloatRange(min=0, max=1, min_open=True),
    metavar="P",
    help="Instead of maximising balanced accuracy, reach precision P for 'unfaithful': the "
    "highest threshold that does so and passes at least one summary (refused when none does).",
)
@click.option(
    "--config",
    "config_path",
    metavar="FILE",
    help="Configuration to write (default: the one `faithgate check` reads from here, parents "
    "searched; without one ./pyproject.toml, else a new ./faithgate.toml).",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print the calibration and the file it would write (checked as for a real run); "
    "write nothing.",
)
@_set_option
@_model_option
@_backend_option
@click.option("--limit", type=click.IntRange(min=1), metavar="N")
@click.option(
    "--resamples",
    type=click.IntRange(min=0),
    default=1000,
    show_default=True,
    help="Bootstrap resamples for the threshold's 95% CI (0: no CI).",
)
@click.option("--seed", type=_seed_type, default=0, show_default=True)
@_cache_option
@_no_cache_option
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@execution_options
def calibrate_command(
    data: str,
    metric_name: str,
    target_precision: float | None,
    config_path: str | None,
    dry_run: bool,
    settings: tuple[str, ...],
    model_args: tuple[str, ...],
    backend: str,
    limit: int | None,
    resamples: int,
    seed: int,
    cache_path: str | None,
    no_cache: bool,
    fmt: str,
    executor: str | None,
    address: str | None,
    num_workers: int | None,
) -> None:
    """Pick a threshold for METRIC on labelled data and write it to the gate configuration.

    Needs at least 3 scored faithful (label 1) and 3 unfaithful (label 0) examples: fewer is
    refused (exit 2), as a threshold between one or two scores would be noise. Rows are
    deduplicated by (source, summary) as in `faithgate bench` (a reference repeated per edit
    counts once; one labelled both ways is left out), and the counts are shown.

    Balanced accuracy, precision and recall are in-sample (the threshold is chosen and scored
    on the same items, which flatters it); the cross-validated balanced accuracy (seeded
    stratified 5-fold, fewer folds when a class is small: each fold scored at the threshold
    chosen on the others) estimates how the threshold does on new data. The written threshold
    classifies these items exactly as reported."""
    from faithgate.evaluation.bench.files import limit_examples
    from faithgate.evaluation.bench.report import json_ready
    from faithgate.evaluation.bench.scoring import Bench
    from faithgate.evaluation.calibrate import (
        MIN_PER_CLASS,
        calibrate,
        chance_warning,
        check_calibration_target,
        decimal_places,
        default_config_path,
        distinct_rows,
        write_calibration,
    )
    from faithgate.io import load_examples

    # The file it writes, or with --dry-run would write: checked the same way either way, so
    # a dry run says what the real one would do (a file it cannot write into, before scoring).
    target = Path(config_path) if config_path else default_config_path()
    models = parse_assignments(model_args, "--model")
    metric_settings = parse_settings(settings)
    _refuse_overwriting(
        [("configuration to write", target)] + _cache_outputs(cache_path, no_cache),
        [("--data file", data)],
        metric_settings,
        models,
    )
    check_calibration_target(target, metric_name)
    examples = limit_examples(load_examples(data), limit, seed)
    labelled = [ex for ex in examples if ex.label is not None]
    if not labelled:
        raise InputError(f"{data}: no labelled examples (label 1 = faithful, 0 = unfaithful)")
    keys = [(ex.source, ex.summary) for ex in labelled]
    kept, _, _ = distinct_rows(keys, [ex.label for ex in labelled])
    n1 = sum(labelled[i].label == 1 for i in kept)
    if min(n1, len(kept) - n1) < MIN_PER_CLASS:  # before scoring: nothing to wait for
        raise InputError(
            f"{data}: calibration needs at least {MIN_PER_CLASS} faithful (label 1) "
            f"and {MIN_PER_CLASS} unfaithful (label 0) distinct examples; got {n1} faithful and "
            f"{len(kept) - n1} unfaithful"
        )
    bench = Bench(
        [metric_name],
        cache=_cache_arg(cache_path, no_cache),
        backend=backend,
        models=models,
        metric_settings=metric_settings,
        execution=execution_settings(executor, address, num_workers, config_path),
    )
    run = bench.score(labelled)[metric_name]
    cal = calibrate(
        run.scores,
        [ex.label for ex in labelled],
        metric=metric_name,
        target_precision=target_precision,
        n_resamples=resamples,
        seed=seed,
        min_per_class=MIN_PER_CLASS,
        keys=keys,
    )
    cal.data = data
    cal.settings_hash = run.settings_hash
    if not dry_run:
        target = write_calibration(target, cal)
    warning = chance_warning(cal)
    if fmt == "json":
        if warning:
            click.echo(f"faithgate: warning: {safe_line(warning)}", err=True)
        click.echo(
            json_for_terminal(
                json_ready(
                    {
                        **cal.to_dict(),
                        "written_to": None if dry_run else str(target),
                        **({"would_write_to": str(target)} if dry_run else {}),
                    }
                ),
                indent=1,
            )
        )
        return
    # Shown as written: 4 places, or the few more that keep the reported classification; the
    # CI (rounded outward by calibrate) at the same places, so it reads as it is written.
    places = decimal_places(cal.threshold)
    ci = (
        f"95% CI {cal.ci95[0]:.{places}f}-{cal.ci95[1]:.{places}f}"
        if all(math.isfinite(v) for v in cal.ci95)
        else "no 95% CI: --resamples 0"
        if resamples == 0
        else "no 95% CI: too few examples"
    )
    shown = f"{cal.threshold:.{places}f}"
    click.echo(f"{safe_line(metric_name)}: threshold {shown} ({ci}), objective {cal.objective}")
    cv = (
        f"cross-validated ({cal.cv_folds}-fold) {cal.cv_balanced_accuracy:.3f}"
        if cal.cv_folds
        else "not cross-validated"
    )
    counts = [f"{cal.n_merged} repeated rows merged"] if cal.n_merged else []
    left_out = [
        f"{k} {what}"
        for k, what in ((cal.n_conflicting, "labelled both ways"), (cal.n_unscored, "unscored"))
        if k
    ]
    if left_out:
        counts.append(" and ".join(left_out) + " left out")
    click.echo(
        f"  balanced accuracy {cal.balanced_accuracy:.3f} in-sample, {cv}; in-sample "
        f"'unfaithful' precision {cal.precision_unfaithful:.3f}, recall "
        f"{cal.recall_unfaithful:.3f}; n={cal.n} distinct ({cal.n_faithful} faithful, "
        f"{cal.n_unfaithful} unfaithful" + "".join(f"; {c}" for c in counts) + ")"
    )
    if warning:  # before "written to", which reads as a recommendation
        click.echo(f"faithgate: warning: {safe_line(warning)}", err=True)
    if dry_run:  # a path is user text
        click.echo(f"  not written (--dry-run): would write to {safe_line(target)}")
    else:
        click.echo(f"  written to {safe_line(target)}")


@click.command("perturb")
@click.option("--source", metavar="FILE|-", help="Source document (- = stdin).")
@click.option(
    "--summary",
    metavar="TEXT|@FILE",
    help="Faithful summary text, or @FILE (@- = stdin, when --source is a file).",
)
@click.option(
    "--input",
    "input_path",
    metavar="FILE.jsonl",
    help="Perturb every (source, summary) row of a JSONL/CSV file instead (rows labelled 0 "
    "are skipped with a warning).",
)
@click.option(
    "--output",
    metavar="FILE.jsonl",
    help="With --input: write benchmark-format rows (originals label 1 + edits label 0, "
    "paired) for faithgate bench. Input rows labelled 0 (unfaithful) are skipped, with a "
    "warning counting them: an unfaithful summary cannot be a pair's faithful half.",
)
@click.option(
    "--types",
    "type_names",
    multiple=True,
    metavar="TYPE",
    help="Perturbation types or families (repeatable or comma-separated): predicate, entity, "
    "circumstance, coreference, number, or full names such as entity_intrinsic.",
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--per-type", type=int, default=1, show_default=True, help="Variants per type (0 = all)."
)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
def perturb_command(
    source: str | None,
    summary: str | None,
    input_path: str | None,
    output: str | None,
    type_names: tuple[str, ...],
    seed: int,
    per_type: int,
    fmt: str,
) -> None:
    """Minimal unfaithful edits of a faithful summary (BUMP taxonomy)."""
    from faithgate.perturb import perturb, reads_as_english, resolve_types

    types: list[str] | None = None
    if type_names:  # given but naming nothing ("", ","): an error, not "every type"
        types = [t for name in type_names for t in name.split(",") if t.strip()]
        if not types:
            raise InputError("--types names no perturbation type (give TYPE[,TYPE...])")
    resolve_types(types)  # unknown type names fail before any parsing
    if per_type < 0:
        raise InputError("--per-type must be >= 0")
    max_per_type = per_type or None
    if input_path:
        if source or summary:
            raise InputError("use either --input FILE or --source/--summary, not both")
        _perturb_file(input_path, output, types, seed, max_per_type, fmt)
        return
    if not source or not summary:
        raise InputError("pass --source FILE and --summary TEXT (or --input FILE.jsonl)")
    if output:
        raise InputError("--output needs --input FILE.jsonl")
    src, summ = read_source_and_summary(source, summary)

    variants = perturb(src, summ, types=types, seed=seed, max_per_type=max_per_type)
    if fmt == "json":
        click.echo(json_for_terminal([v.to_dict() for v in variants], indent=1))
        return
    if not variants:
        click.echo(
            "no safe edit found for the requested types"
            if reads_as_english(src)
            else "no edit: the source does not read as English, and perturb's rules are English"
        )
    for v in variants:
        click.echo(safe_line(f"[{v.type} | {v.error_type}] {v.original!r} -> {v.replacement!r}"))
        click.echo(f"  {safe_line(v.summary)}")  # user text: one line, no escape sequences


def _perturb_file(
    input_path: str,
    output: str | None,
    types: list[str] | None,
    seed: int,
    max_per_type: int | None,
    fmt: str,
) -> None:
    from faithgate.io import load_examples, write_jsonl
    from faithgate.perturb import perturb, reads_as_english

    refuse_overwriting_inputs([("--output file", output)], [("--input file", input_path)])

    rows = []
    unfaithful = not_english = 0
    for ex in load_examples(input_path):
        if ex.label == 0:
            # Its original would be written as the faithful (label 1) half of a pair.
            unfaithful += 1
            continue
        variants = perturb(ex.source, ex.summary, types=types, seed=seed, max_per_type=max_per_type)
        if not variants:
            not_english += not reads_as_english(ex.source)
            continue
        pair = f"{ex.id}"
        base = {"source": ex.source, "pair_id": pair, "origin": ex.meta.get("origin")}
        rows.append(
            {
                "id": f"{ex.id}-orig",
                "summary": ex.summary,
                "label": 1,
                "role": "reference",
                "error_type": None,
                **base,
            }
        )
        for k, v in enumerate(variants):
            rows.append(
                {
                    "id": f"{ex.id}-{v.type}-{k}",
                    "summary": v.summary,
                    "label": 0,
                    "role": "edited",
                    "error_type": v.error_type,
                    **base,
                    "meta": {"perturbation": v.to_dict() | {"summary": None}},
                }
            )
    if unfaithful:
        click.echo(
            f"faithgate: warning: skipped {unfaithful} input row(s) labelled 0 (unfaithful): "
            "only faithful summaries are perturbed into pairs",
            err=True,
        )
    if not_english:
        click.echo(
            f"faithgate: warning: {not_english} input row(s) got no edit: their source does not "
            "read as English, and perturb's rules are English",
            err=True,
        )
    if output:
        write_jsonl(rows, output)
        click.echo(f"wrote {len(rows)} rows to {safe_line(output)}", err=True)
    elif fmt == "json":
        click.echo(json_for_terminal(rows, indent=1))
    else:
        for r in rows:
            click.echo(json_for_terminal(r))
