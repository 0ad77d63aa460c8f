"""``faithgate score`` (spot-check one summary) and ``faithgate metrics`` (list the registry).

Only argument handling and printing live here; scores come from ``faithgate.scoring.scorer.Scorer``.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from faithgate.backends import BACKEND_CHOICES
from faithgate.errors import InputError
from faithgate.io import check_text, read_stdin_bytes
from faithgate.metrics.base import Metric, fmt_detail, metric_class
from faithgate.numbers import at_least
from faithgate.safety.escape import (
    defuse_workflow_commands,
    json_for_terminal,
    printable,
    safe_line,
)
from faithgate.safety.paths import refuse_not_a_file
from faithgate.safety.userjson import parse_problem, unique_object
from faithgate.types import Score, is_blank, json_safe

if TYPE_CHECKING:
    from faithgate.config import GateConfig

# Fast, offline, no configuration needed: the default set of ``faithgate score``.
DEFAULT_SCORE_METRICS = ("bertscore", "sentsim", "ner", "overlap")


def read_text_arg(value: str, what: str, allow_stdin: bool = True) -> str:
    """Text from a file path (``-`` = standard input); errors are one line naming the file."""
    if value == "-" and allow_stdin:
        data = read_stdin_bytes()  # closed stdin (<&-) is bad input, exit 2
        name = "<stdin>"
    else:
        data, name = _read_path(Path(value).expanduser(), value, what), value
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise InputError(f"{what} {name}: not valid UTF-8 (byte {exc.start})") from None
    check_text(data, f"{what} {name}")  # NUL bytes (a binary file) are not a document
    if is_blank(data):  # invisible characters only (U+200B) are empty too, as in data files
        raise InputError(f"{what} {name} is empty")
    return data.strip()


def _read_path(path: Path, value: str, what: str) -> bytes:
    """The bytes of a regular file or a pipe (``--source <(cmd)`` gives ``/dev/fd/N``, a pipe:
    readable, though no regular file); a directory, a device or a missing path is refused in
    one line."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise InputError(f"{what} file {value!r} does not exist") from None
    except OSError as exc:
        raise InputError(f"{what} {value!r}: cannot read it ({exc.strerror or exc})") from None
    # /dev/zero would never end
    refuse_not_a_file(value, mode, what, pipe=True, advice="give a text file (or - for stdin)")
    try:
        return path.read_bytes()
    except OSError as exc:  # no permission
        raise InputError(f"{what} {value!r}: cannot read it ({exc.strerror or exc})") from None


def read_source_and_summary(source: str, summary: str) -> tuple[str, str]:
    """The texts of ``--source FILE|-`` and ``--summary TEXT|@FILE|@-`` (one line errors)."""
    if source == "-" and summary == "@-":  # else "summary file '-' does not exist"
        raise InputError(
            "--source - and --summary @- both read standard input; give one of them as a file"
        )
    source_text = read_text_arg(source, "source")
    if summary == "@":  # Path("") is the current directory: "is a directory" would mislead
        raise InputError("--summary @: a file name must follow '@' (@FILE, or @- for stdin)")
    if summary.startswith("@"):
        return source_text, read_text_arg(summary[1:], "summary", allow_stdin=source != "-")
    # Command-line bytes that are not UTF-8 arrive as lone surrogates: refuse them here.
    summary_text = check_text(summary, "the --summary text").strip()
    if is_blank(summary_text):  # a lone U+200B was "could not score" (exit 1)
        raise InputError("the summary is empty")
    return source_text, summary_text


def parse_assignments(items: Sequence[str], option: str, form: str = "KEY=VALUE") -> dict[str, str]:
    """``KEY=VALUE`` options into a dict (one line error naming ``form``, the option's own
    shape, on a malformed item)."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise InputError(f"{option} expects {form}, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def parse_settings(items: Sequence[str]) -> dict[str, dict[str, Any]]:
    """``--set METRIC.KEY=VALUE``; VALUE is read as JSON when it parses (numbers, true, null,
    lists), else kept as a string."""
    settings: dict[str, dict[str, Any]] = {}
    for key, raw in parse_assignments(items, "--set", "METRIC.KEY=VALUE").items():
        metric, dot, name = key.partition(".")
        if not dot or not metric or not name:
            raise InputError(f"--set expects METRIC.KEY=VALUE, got {key}={raw}")
        try:
            value: Any = json.loads(raw, object_pairs_hook=unique_object)
        except json.JSONDecodeError:
            value = raw  # not JSON: the text itself
        except (ValueError, RecursionError) as exc:  # JSON, but not one faithgate can read
            raise InputError(f"--set {key}: {printable(parse_problem(exc))}"[:300]) from None
        settings.setdefault(metric, {})[name] = value
    return settings


def split_role_settings(
    settings: dict[str, dict[str, Any]],
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """``--set`` settings into (metric settings, model options): ``--set ROLE.KEY=VALUE``
    with ROLE a model role (``nli``, ``lm``, ...) is that role's loader option, as
    ``model_options.ROLE.KEY`` in a configuration (no metric is named like a role)."""
    from faithgate.models import ROLES

    metrics = {k: v for k, v in settings.items() if k not in ROLES}
    options = {k: v for k, v in settings.items() if k in ROLES}
    return metrics, options


def reader_of(name: str) -> type[Metric]:
    """The registered class of metric ``name``: it says how to read its scores' details (the
    base class, which prints their numbers, for a name not registered)."""
    try:
        return metric_class(name)
    except InputError:
        return Metric


def summarize_details(score: Score, reader: type[Metric] | None = None) -> str:
    """One short line of a score's most telling details, as its metric reads them
    (``Metric.details_line``), or why it could not be scored."""
    if score.failure:
        return f"FAILED: {score.failure}"
    return (reader or reader_of(score.metric)).details_line(score.details)


# Below this many words, similarity and n-gram metrics have little to match, so a faithful
# short sentence often ranks lowest; the least supported hint says so.
SHORT_SENTENCE_WORDS = 6
_PRONOUNS = {"it", "its", "he", "him", "his", "she", "her", "they", "them", "their", "this"}


def _models_text(identities: list[dict[str, Any]]) -> str:
    parts = []
    for ident in identities:
        how = ", ".join(
            str(x) for x in (ident.get("backend"), ident.get("quantization")) if x and x != "none"
        )
        parts.append(
            f"{ident['role']}={ident['model']}"
            + (f" [{how}]" if how else "")
            + f" #{ident.get('fingerprint', '?')}"
        )
    return "; ".join(parts) or "(no model)"


def sentence_rows(sentences: list[str], scores: dict[str, Score]) -> list[dict[str, Any]]:
    """Per summary sentence: each metric's value and which metrics rank it least supported."""
    rows = [
        {"index": i, "text": s, "values": {}, "least_supported_by": []}
        for i, s in enumerate(sentences)
    ]
    for name, score in scores.items():
        by_index = {s.index: s for s in score.sentences}
        for row in rows:
            s = by_index.get(row["index"])
            row["values"][name] = None if s is None or math.isnan(s.value) else s.value
            if s is not None and s.evidence:
                row.setdefault("evidence", {})[name] = s.evidence
        least = score.least_supported()
        scored = [x.value for x in score.sentences if not math.isnan(x.value)]
        # A tie is not "least supported": mark a sentence only when another scores higher.
        if (
            least is not None
            and len(scored) > 1
            and least.value < max(scored)
            and least.index < len(rows)
        ):
            rows[least.index]["least_supported_by"].append(name)
    return rows


def threshold_verdicts(
    scores: dict[str, Score], thresholds: dict[str, float]
) -> dict[str, bool | None]:
    """Per metric: True/False against its threshold, None without one. A metric with a
    threshold that could not score fails it, as in the gate: nothing unscored passes."""
    out: dict[str, bool | None] = {}
    for name, score in scores.items():
        limit = thresholds.get(name)
        # at_least: the gate's comparison (float noise at the limit is the limit)
        out[name] = None if limit is None else score.ok and at_least(float(score.value), limit)
    return out


def _why_least_supported(row: dict[str, Any], readers: Mapping[str, type[Metric]]) -> list[str]:
    """Hints for the flagged sentence: each flagging metric's evidence, as the metric reads it
    (``Metric.evidence_hint``), and the short-sentence effect that makes a faithful closing
    line ("It will open in 2027.") rank last."""
    hints = []
    n_words = len(row["text"].split())
    if n_words < SHORT_SENTENCE_WORDS:
        hints.append(
            f"a short sentence ({n_words} words): similarity and n-gram metrics have few words "
            "to match, so short sentences score low even when faithful"
        )
    pronouns = sorted({w.strip(".,;:!?").lower() for w in row["text"].split()} & _PRONOUNS)
    if pronouns:
        hints.append(
            f"it refers back with {', '.join(repr(p) for p in pronouns)}: the metrics compare "
            "words, not what a pronoun stands for"
        )
    for name in row["least_supported_by"]:
        evidence = row.get("evidence", {}).get(name)
        if evidence:
            hints.append(f"{name}: {readers[name].evidence_hint(printable(evidence)[:160])}")
    return hints


def render_text(
    scores: dict[str, Score],
    identities: dict[str, list[dict[str, Any]]],
    rows: list[dict[str, Any]],
    metrics: Mapping[str, Metric] | None = None,
    thresholds: dict[str, float] | None = None,
    threshold_source: str | None = None,
    vote_of: dict[str, str] | None = None,
) -> str:
    """The text report: per metric its value, threshold, verdict and scale; then per summary
    sentence each metric's per-sentence quantity, with the least supported sentence and why.
    ``metrics`` (by name) say how to read their numbers (``Metric.how_to_read``); ``vote_of``
    names the metrics shown only as a combination's components."""
    metrics = metrics or {}
    reading = {name: metric.how_to_read() for name, metric in metrics.items()}
    readers = {
        name: type(metrics[name]) if name in metrics else reader_of(score.metric)
        for name, score in scores.items()
    }
    thresholds = thresholds or {}
    vote_of = vote_of or {}
    verdicts = threshold_verdicts(scores, thresholds)
    names = list(scores)
    w = max(len(n) for n in names) + 2
    lines = [
        "every metric: higher = more faithful",
        f"{'metric':<{w}}{'value':>8}  {'threshold':>9}  verdict  scale",
    ]
    for name, score in scores.items():
        limit = thresholds.get(name)
        verdict = {True: "pass", False: "FAIL", None: "-"}[verdicts[name]]
        scale = reading.get(name, ("", ""))[0] or "-"
        if name in vote_of:
            scale = f"(a vote of {vote_of[name]}) {scale}"
        lines.append(
            f"{name:<{w}}{fmt_detail(score.value):>8}  {fmt_detail(limit):>9}  {verdict:<7}  {scale}"
        )
        pad = " " * (w + 8 + 2)
        lines.append(f"{pad}{printable(summarize_details(score, readers[name]))}")
        lines.extend(
            f"{pad}  {printable(line)}" for line in readers[name].detail_lines(score.details)
        )
        # A model's name is a user's path (or hub id): it may hold line breaks or ESC.
        models = _models_text(identities[name])
        lines.append(f"{pad}{printable(f'hash {score.settings_hash}  models {models}')}")
    judged = {n: v for n, v in verdicts.items() if v is not None}
    if judged:
        failed = [n for n, v in judged.items() if not v]
        where = f" (thresholds from {printable(threshold_source)})" if threshold_source else ""
        if failed:
            detail = ", ".join(
                f"{n} {fmt_detail(scores[n].value)} < {fmt_detail(thresholds[n])}"
                if scores[n].ok
                else f"{n} could not be scored"
                for n in failed
            )
            lines.append(f"verdict: FAIL: {detail}{where}")
        else:
            lines.append(f"verdict: PASS: {', '.join(judged)} at or above threshold{where}")
    else:
        lines.append(
            "verdict: none (no threshold for these metrics: give --threshold NAME=X, or run "
            "in a project whose [tool.faithgate] sets thresholds)"
        )
        lines.append(_threshold_hint(names))
    if rows:
        lines.append("")
        lines.append("per summary sentence (* = the sentence that metric supports least):")
        for name in names:
            quantity = reading.get(name, ("", ""))[1]
            if quantity:
                lines.append(f"  {name}: {quantity}")
        cols = [max(len(n), 7) for n in names]
        header = f"{'#':>3}  " + "  ".join(f"{n:>{c}}" for n, c in zip(names, cols, strict=True))
        lines.append(header + "  sentence")
        worst = max((len(r["least_supported_by"]) for r in rows), default=0)
        flagged = []
        for row in rows:
            cells = []
            for n, c in zip(names, cols, strict=True):
                v = row["values"].get(n)
                mark = "*" if n in row["least_supported_by"] else " "
                cells.append(f"{fmt_detail(v, 3) + mark:>{c + 1}}")
            text = printable(row["text"])  # user text: no line breaks or escape sequences
            text = text if len(text) <= 90 else text[:87] + "..."
            is_worst = worst and len(row["least_supported_by"]) == worst
            flag = (
                f"   <- least supported ({len(row['least_supported_by'])}/{len(names)} metrics)"
                if is_worst
                else ""
            )
            if is_worst:
                flagged.append(row)
            lines.append(f"{row['index'] + 1:>3} " + " ".join(cells) + f"  {text}{flag}")
        for row in flagged:
            hints = _why_least_supported(row, readers)
            if hints:
                lines.append(f"why sentence {row['index'] + 1} may rank last:")
                lines.extend(f"  - {h}" for h in hints)
    from faithgate.report.format import fit_lines

    # A metric's row wraps its scale under the scale column; other lines under themselves.
    scale_at = w + 8 + 2 + 9 + 2 + 7 + 2
    rows_of_metrics = {i for i, line in enumerate(lines) if line.split(" ", 1)[0] in scores}
    out: list[str] = []
    for i, line in enumerate(lines):
        out.extend(fit_lines([line], indent=scale_at if i in rows_of_metrics else None))
    return "\n".join(out)


def _threshold_hint(names: list[str]) -> str:
    """Where a first threshold comes from: the documented starting values of `faithgate
    init` for the metrics shown that have one, and `faithgate calibrate` for any metric."""
    from faithgate.cli.init import STARTING_THRESHOLDS

    known = [f"{n}={STARTING_THRESHOLDS[n]:g}" for n in names if n in STARTING_THRESHOLDS]
    start = f"starting values: --threshold {' --threshold '.join(known)}; " if known else ""
    return (
        f"hint: {start}`faithgate calibrate --data labelled.jsonl --metric NAME` picks one "
        "from your labelled outputs (docs/gate.md)"
    )


@click.command("score")
@click.option("--source", required=True, metavar="FILE|-", help="Source document (- = stdin).")
@click.option(
    "--summary",
    required=True,
    metavar="TEXT|@FILE",
    help="Summary text, or @FILE to read it (@- = stdin, when --source is a file).",
)
@click.option(
    "--metric",
    "metric_names",
    multiple=True,
    metavar="NAME",
    help=f"Metric to run (repeatable; default: {', '.join(DEFAULT_SCORE_METRICS)}).",
)
@click.option(
    "--set",
    "settings",
    multiple=True,
    metavar="METRIC.KEY=VALUE",
    help="Metric setting, e.g. --set bertscore.idf=true, or a model role's loader option, "
    "e.g. --set nli.supported_label=LABEL_1 (repeatable).",
)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@click.option(
    "--model",
    "model_args",
    multiple=True,
    metavar="ROLE=ID_OR_PATH",
    help="Model for a role (embedder, lm, spacy, nli, seq2seq, qa, qg, alignscore, hhem); "
    "repeatable.",
)
@click.option(
    "--backend",
    type=click.Choice(BACKEND_CHOICES),
    help="Model backend (default: the configuration's, when its thresholds are shown; else auto).",
)
@click.option(
    "--allow-download",
    is_flag=True,
    help="Let a hub id be downloaded (never when HF_HUB_OFFLINE is set).",
)
@click.option(
    "--threshold",
    "threshold_args",
    multiple=True,
    metavar="X|NAME=X",
    help="Threshold to show a verdict against, for every metric or one (default: the "
    "thresholds of the [tool.faithgate] configuration found from here, if any).",
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    help="Configuration whose thresholds to show, scored with its backend, models and metric "
    "settings (default: search from the current directory).",
)
def score_command(
    source: str,
    summary: str,
    metric_names: tuple[str, ...],
    settings: tuple[str, ...],
    fmt: str,
    model_args: tuple[str, ...],
    backend: str | None,
    allow_download: bool,
    threshold_args: tuple[str, ...],
    config_path: str | None,
) -> None:
    """Score one summary against its source and show the least supported sentences.

    Shows each metric's scale, and a verdict against the thresholds given or configured; the
    exit code does not depend on it (gate with ``faithgate check``): exit 0 when every metric
    scored, 1 when one could not, 2 on bad usage or input. A configuration's thresholds are
    judged with that configuration's backend, models, model options and metric settings (the
    command line's ``--backend``, ``--model`` and ``--set`` win), as ``faithgate check`` scores.
    """
    from faithgate import text as textmod
    from faithgate.scoring.scorer import Scorer, check_models_used, resolve_metrics
    from faithgate.types import Example

    source_text, summary_text = read_source_and_summary(source, summary)
    models = parse_assignments(model_args, "--model")
    metric_settings, set_options = split_role_settings(parse_settings(settings))
    names = list(dict.fromkeys(metric_names or DEFAULT_SCORE_METRICS))
    thresholds, threshold_source, config = _thresholds(threshold_args, config_path, names)
    model_options: dict[str, dict[str, Any]] = {}
    if config is not None:
        # A threshold holds for the settings it was set under: score as the gate would.
        backend = backend or config.backend
        models = {**config.models, **models}
        model_options = config.model_options
        allow_download = allow_download or config.allow_download
        # The configuration's settings of the metrics run, as the gate passes them on.
        configured = {
            m: v for m, v in config.metric_settings.items() if m in names and m in config.metrics
        }
        metric_settings = {
            m: {**configured.get(m, {}), **metric_settings.get(m, {})}
            for m in {*configured, *metric_settings}
        }
    model_options = {
        role: {**model_options.get(role, {}), **set_options.get(role, {})}
        for role in {*model_options, *set_options}
    }
    selected = resolve_metrics(names, metric_settings)
    for warning in range_warnings(selected, thresholds):
        click.echo(f"faithgate: warning: {safe_line(warning)}", err=True)
    # A combination's components are scored beside it (the scorer runs each once) and shown
    # under it, so a reader sees which view of support pulled it down and why.
    vote_of: dict[str, str] = {}
    shown = list(selected)
    for metric in selected:
        for part in metric.components:
            if part.name not in names and part.name not in vote_of:
                vote_of[part.name] = metric.name
                shown.append(part)
    scorer = Scorer(
        shown,
        models=models,
        backend=backend or "auto",
        allow_download=allow_download,
        model_options=model_options,
        check_roles=False,
    )
    # A --model for a role no selected metric uses is an error; a configuration's models
    # serve its own metrics, which may not be the ones selected here.
    check_models_used(scorer.metrics, scorer.context, parse_assignments(model_args, "--model"))
    example = Example("0", source_text, summary_text)
    scores = scorer.score([example])[0]
    identities = {
        m.name: [
            scorer.context.model_identity(r, t)
            for r, t in sorted(m.model_roles(scorer.context).items())
        ]
        for m in scorer.metrics
    }
    # The sentences the metrics scored: those of the summary in its scored form (normalized).
    sentences = textmod.split_sentences(example.summary, scorer.context.spacy_model)
    rows = sentence_rows(sentences, scores)
    reading = {m.name: m.how_to_read() for m in scorer.metrics}
    verdicts = threshold_verdicts(scores, thresholds)
    if fmt == "json":
        payload = {
            "source": "<stdin>" if source == "-" else source,
            "summary": summary_text,
            "metrics": {
                name: {
                    **score.to_dict(),
                    "models": identities[name],
                    "scale": reading[name][0],
                    "sentence_value": reading[name][1],
                    "threshold": thresholds.get(name),
                    "passed": verdicts[name],
                    **({"vote_of": vote_of[name]} if name in vote_of else {}),
                }
                for name, score in scores.items()
            },
            "sentences": rows,
        }
        click.echo(json_for_terminal(json_safe(payload), indent=2, allow_nan=False))
    else:
        metrics = {m.name: m for m in scorer.metrics}
        text = render_text(scores, identities, rows, metrics, thresholds, threshold_source, vote_of)
        click.echo(defuse_workflow_commands(text))
    # ``failure``, not ``error``: a metric may return NaN or inf without one (exit 1 all the same).
    failed = [f"{n}: {s.failure}" for n, s in scores.items() if s.failure]
    if failed:
        click.echo(f"faithgate: could not score with {safe_line('; '.join(failed))}", err=True)
        sys.exit(1)


def range_warnings(metrics: Sequence[Any], thresholds: dict[str, float]) -> list[str]:
    """The gate's warnings (``faithgate.gate.checks.limits_outside_range``) for ``thresholds`` outside
    the range their metric's scores can take under its settings: ``sentsim=60`` can never be
    met, ``overlap=0`` never fails."""
    from faithgate.config import GateConfig
    from faithgate.gate.checks import limits_outside_range

    if not thresholds:
        return []
    ranges = {m.name: type(m).value_range(m.settings) for m in metrics}
    config = GateConfig(metrics=tuple(ranges), thresholds=dict(thresholds))
    return limits_outside_range(config, ranges)


def _thresholds(
    args: tuple[str, ...], config_path: str | None, names: list[str]
) -> tuple[dict[str, float], str | None, GateConfig | None]:
    """Thresholds to judge against, where they come from, and the configuration they come
    from (None for ``--threshold`` or none): ``--threshold`` wins, else the configuration's
    (given by ``--config`` or found from the current directory), restricted to the metrics
    run."""
    from faithgate.cli.check import _parse_thresholds

    common, named = _parse_thresholds(args)
    if common is not None or named:
        unknown = set(named) - set(names)
        if unknown:
            raise InputError(
                f"--threshold names metric(s) not scored: {', '.join(sorted(unknown))}"
            )
        base = dict.fromkeys(names, common) if common is not None else {}
        return {**base, **named}, "--threshold", None
    from faithgate.config import load_config

    config = load_config(config_path)
    found = {m: t for m, t in config.thresholds.items() if m in names}
    if not found or config.source is None:
        return {}, None, None
    return found, str(config.display_path(config.source)), config


def _listed_roles(name: str) -> set[str]:
    """The model roles a metric uses; a combination's are its components' (``combined`` has
    none until a weights file names them)."""
    from faithgate.errors import InputError
    from faithgate.metrics.base import ScoringContext, get_metric, metric_class

    cls = metric_class(name)
    if cls.roles or cls.family != "combination":
        return set(cls.roles)
    try:
        return set(get_metric(name).model_roles(ScoringContext()))
    except InputError:
        return set()


@click.command("metrics")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
def metrics_command(fmt: str) -> None:
    """List the available metrics, one line each."""
    from faithgate.metrics.base import metric_class, metric_names
    from faithgate.scoring.scorer import DEFAULT_METRICS

    entries = []
    for name in metric_names():
        cls = metric_class(name)
        entries.append(
            {
                "name": name,
                "family": cls.family,
                "roles": sorted(_listed_roles(name)),
                "description": cls.description
                + (" [a default metric of check and the gate]" if name in DEFAULT_METRICS else ""),
                "default": name in DEFAULT_METRICS,
                "settings": cls.defaults,
            }
        )
    if fmt == "json":
        click.echo(json_for_terminal(json_safe(entries), indent=2))
        return
    width = max((len(e["name"]) for e in entries), default=4) + 2
    fam = max((len(e["family"]) for e in entries), default=6) + 2
    role_w = max((len(",".join(e["roles"])) for e in entries), default=1) + 2
    for e in entries:
        roles = ",".join(e["roles"]) or "-"
        click.echo(f"{e['name']:<{width}}{e['family']:<{fam}}{roles:<{role_w}}{e['description']}")
