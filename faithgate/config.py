"""Gate configuration: ``[tool.faithgate]`` in ``pyproject.toml`` or a ``faithgate.toml``.

The configuration is parsed once into typed objects (``GateConfig``); nothing below this module
reads configuration files. CLI flags and pytest options override it through
``GateConfig.override``. Unknown keys and wrong types raise ``ConfigError`` naming the key.

Format (``faithgate.toml`` takes the same keys at top level, without ``tool.faithgate``)::

    [tool.faithgate]
    metrics = ["ensemble"]           # metric names (a single string is accepted too; default ensemble)
    backend = "auto"                 # auto | torch | onnx
    outputs = "outputs.jsonl"        # outputs to gate, or:
    # summarizer = "pkg.mod:fn"      #   a callable run over ...
    # data = "sources.jsonl"         #   ... this dataset of sources
    baseline = "faithgate-baseline.json"  # enables the regression rule (see rules.regression)
    cache_dir = ".faithgate"         # score cache and last results (this is the default)
    allow_download = false           # let model roles download from a hub (off by default)

    [tool.faithgate.models]          # role -> hub id (org/name, org/name@revision) or local path
    nli = "path/or/hub-id"
    [tool.faithgate.model_options.nli]   # role -> loader options (passed to the backend)
    max_length = 512
    [tool.faithgate.metric_settings.bertscore]
    layer = 4
    [tool.faithgate.thresholds]      # per-example threshold: an example passes when score >= it
    bertscore = 0.55
    [tool.faithgate.calibration.bertscore]  # provenance from `faithgate calibrate` (kept as is)
    threshold = 0.55
    ci95 = [0.51, 0.58]

    [tool.faithgate.rules]
    min_pass_rate = 0.9              # share of examples that pass (default 1.0)
    min_mean = { bertscore = 0.6 }   # or one number for every metric
    pair_consistency = { min_rate = 0.9, per_error_type = false, generate = false }
    regression = { tolerance = 0.01, confidence = 0.95, require_baseline = false }
    # per output too: its own threshold = its baseline score - the allowed drop, for outputs
    # that are minimal edits (<= max_changed_words words) of the baseline's output
    # regression = { per_example_drop = { harim_plus = 0.05 }, max_changed_words = 6 }

    [tool.faithgate.reports]         # paths, relative to the configuration file
    junit = "reports/faithgate.xml"
    markdown = "reports/faithgate.md"
    json = "reports/faithgate.json"
    html = "reports/faithgate.html"

    [tool.faithgate.execution]       # where scoring runs (docs/scale-out.md)
    executor = "local"               # local | ray (needs faithgate[ray])
    address = "auto"                 # ray: auto | ray://host:10001 | host:port (default: RAY_ADDRESS, else local)
    num_workers = 4                  # ray: actors (default: as many as free CPUs/GPUs allow)
    batch_size = 16                  # ray: examples per task, summaries of one source together
    num_cpus = 1                     # ray: per worker
    num_gpus = 0                     # ray: per worker

Relative paths in a file are resolved against that file's directory; paths given as overrides
(CLI flags) are resolved against the current directory.
"""

from __future__ import annotations

import contextlib
import dataclasses
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import BeforeValidator, PlainValidator, ValidationInfo
from pydantic_core import PydanticCustomError

from faithgate.backends import BACKEND_CHOICES
from faithgate.errors import ConfigError
from faithgate.formats import file_report_kinds
from faithgate.numbers import is_finite_number
from faithgate.safety.escape import utf8_text
from faithgate.safety.paths import input_mode, refuse_not_a_file
from faithgate.safety.userjson import parse_problem
from faithgate.schema import ValidationError, adapter, first_error
from faithgate.scoring.execution import ExecutionSettings
from faithgate.scoring.scorer import DEFAULT_METRICS

# Report files a configuration can ask for: every file format of the registry.
REPORT_KINDS = file_report_kinds()
CONFIG_FILES = ("faithgate.toml", "pyproject.toml")


@dataclass(frozen=True)
class PairConsistencyRule:
    """Minimal-pair consistency (BUMP, Ma et al. 2023): share of pairs in which the faithful
    member scores strictly higher than its unfaithful edit (ties fail).

    Pairs come from the outputs (rows sharing ``pair_id`` with ``role`` reference/edited or
    correct/incorrect, as in BUMP and Falke et al. 2019) and, with ``generate``, from
    ``faithgate.perturb`` edits of every output summary (``types``, ``seed``,
    ``per_example`` variants at most). ``metrics`` limits the rule to some metrics (default:
    the selected ones that rank pairs, ``Metric.ranks_pairs``). ``per_error_type`` adds one rule per error type with the same ``min_rate``.
    """

    min_rate: Annotated[float, _check("rate")] = 1.0
    per_error_type: Annotated[bool, _check("boolean")] = False
    generate: Annotated[bool, _check("boolean")] = False
    types: Annotated[tuple[str, ...] | None, _check("string_list")] = None
    seed: Annotated[int, _check("integer")] = 0
    per_example: Annotated[int, _check("integer", 1)] = 3
    metrics: Annotated[tuple[str, ...] | None, _check("string_list")] = None


# The most bootstrap resamples ``rules.regression.resamples`` takes (documented in docs/gate.md).
MAX_RESAMPLES = 1_000_000


@dataclass(frozen=True)
class RegressionRule:
    """Regression against a baseline (a previous ``GateResult`` JSON), by example id: fails when
    the mean drops by more than ``tolerance`` AND a paired bootstrap (``resamples`` resamples of
    the per-example differences, ``seed``) puts the one-sided lower bound of the drop at
    ``confidence`` above zero.

    ``per_example_drop`` (metric -> allowed drop, ``"*"`` for every rule metric) also gives each
    output its own threshold, its baseline score minus the drop, when the output is a minimal
    edit of the baseline's output for the same id (at most ``max_changed_words`` words changed):
    the baseline output is then the trusted member of a minimal pair, the setting in which the
    metrics separate (BUMP consistency), unlike a threshold shared by every article."""

    tolerance: Annotated[float, _check("drop")] = 0.01
    confidence: Annotated[float, _check("confidence")] = 0.95
    resamples: Annotated[int, _check("resamples")] = 2000
    seed: Annotated[int, _check("integer")] = 0
    metrics: Annotated[tuple[str, ...] | None, _check("string_list")] = None
    # A first run has no baseline yet: by default the rule is skipped with a warning (like a
    # snapshot tool's first run); ``true`` makes a missing baseline file fail the gate (CI that
    # must never run without its reference).
    require_baseline: Annotated[bool, _check("boolean")] = False
    per_example_drop: Annotated[
        dict[str, Annotated[float, _check("drop")]], BeforeValidator(_every_metric)
    ] = field(default_factory=dict)
    max_changed_words: Annotated[int, _check("integer", 1)] = 6


@dataclass(frozen=True)
class Rules:
    """Decision rules of a gate. ``min_pass_rate`` defaults to 1.0: every example must pass
    (be scored by every metric, at or above each configured threshold)."""

    min_pass_rate: Annotated[float, _check("rate")] = 1.0
    min_mean: Annotated[
        dict[str, Annotated[float, _check("number")]], BeforeValidator(_every_metric)
    ] = field(default_factory=dict)
    # One number: the minimum rate; ``true``: the rule with its defaults.
    pair_consistency: Annotated[
        PairConsistencyRule | None,
        _check("keys", _fields(PairConsistencyRule)),
        BeforeValidator(_min_rate_only),
    ] = None
    regression: Annotated[
        RegressionRule | None,
        _check("keys", _fields(RegressionRule)),
        BeforeValidator(lambda v: {} if v is True else v),
    ] = None


def per_metric(table: Mapping[str, float], metrics: Sequence[str]) -> dict[str, float]:
    """A rule's ``{metric: value}`` table with ``"*"`` expanded to every metric in ``metrics``
    (a metric named explicitly keeps its own value)."""
    values = dict(table)
    star = values.pop("*", None)
    return {**dict.fromkeys(metrics, star), **values} if star is not None else values


class Reports:
    """Where to write reports: report kind (a file format of ``faithgate.formats``) -> path.
    Read one as an attribute (``reports.json``; ``None`` = not written)."""

    __slots__ = ("paths",)

    def __init__(self, **paths: str | Path | None) -> None:
        unknown = set(paths) - set(REPORT_KINDS)
        if unknown:
            raise TypeError(f"unknown report kind(s): {', '.join(sorted(unknown))}")
        object.__setattr__(self, "paths", {k: Path(v) for k, v in paths.items() if v is not None})

    def __getattr__(self, name: str) -> Path | None:
        if name in REPORT_KINDS:
            return self.paths.get(name)
        raise AttributeError(name)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Reports is immutable; use with_path")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Reports) and self.paths == other.paths

    def __hash__(self) -> int:
        return hash(tuple(sorted(self.paths.items())))

    def __repr__(self) -> str:
        return f"Reports({', '.join(f'{k}={v!r}' for k, v in self.items())})"

    def with_path(self, kind: str, path: str | Path | None) -> Reports:
        """A copy with ``kind`` written to ``path`` (``None``: not written)."""
        return Reports(**{**self.paths, kind: path})

    def items(self) -> list[tuple[str, Path]]:
        return [(k, self.paths[k]) for k in REPORT_KINDS if k in self.paths]


@dataclass(frozen=True)
class GateConfig:
    """A parsed gate configuration. Build one with ``load_config`` or ``GateConfig.from_dict``;
    change it with ``override`` (returns a new object)."""

    metrics: Annotated[tuple[str, ...], _check("metric_list")] = DEFAULT_METRICS
    backend: Annotated[str, _check("choice", BACKEND_CHOICES)] = "auto"
    outputs: Annotated[Path | None, _check("path")] = None
    summarizer: Annotated[str | None, _check("callable_ref")] = None
    data: Annotated[Path | None, _check("path")] = None
    baseline: Annotated[Path | None, _check("path")] = None
    cache_dir: Annotated[Path | None, _check("path")] = None
    allow_download: Annotated[bool, _check("boolean")] = False
    models: Annotated[dict[str, Annotated[str, _check("model")]], _check("table")] = field(
        default_factory=dict
    )
    model_options: _Tables = field(default_factory=dict)
    metric_settings: _Tables = field(default_factory=dict)
    thresholds: Annotated[dict[str, Annotated[float, _check("number")]], _check("table")] = field(
        default_factory=dict
    )
    calibration: Annotated[dict[str, Any], _check("table")] = field(default_factory=dict)
    rules: Annotated[Rules, _check("keys", _fields(Rules))] = field(default_factory=Rules)
    reports: Annotated[Reports, PlainValidator(_reports)] = field(default_factory=Reports)
    # Where scoring runs ([tool.faithgate.execution]; faithgate.scoring.execution).
    execution: Annotated[ExecutionSettings, _check("execution")] = field(
        default_factory=ExecutionSettings
    )
    # Directory relative paths were resolved against, and the file read (None: defaults only).
    root: Path = field(default_factory=Path.cwd)
    source: Path | None = None
    # Whether ``metrics`` is the default because neither a ``metrics`` key nor --metric chose
    # it, and the --threshold X given for every metric: a limit for "every metric" then lands on
    # whatever the default is now (``faithgate.gate.checks.default_metric_limits`` warns). Not
    # recorded in results (``to_dict``).
    default_metrics: bool = False
    threshold_for_all: float | None = None

    # ---------------------------------------------------------------- construction
    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any], root: str | Path | None = None, where: str = "config"
    ) -> GateConfig:
        """Validate a mapping of configuration keys (the ``[tool.faithgate]`` table).

        ``where`` prefixes error messages (e.g. ``"pyproject.toml: tool.faithgate"``).
        """
        root = Path(root) if root is not None else Path.cwd()
        try:
            config = adapter(_File).validate_python(data, context=_Parser(where, root))
        except ValidationError as exc:
            raise _config_error(exc, where) from None
        config = dataclasses.replace(config, root=root, default_metrics="metrics" not in data)
        if config.outputs is not None and (config.summarizer, config.data) != (None, None):
            # The outputs file would be gated and the summarizer never run (a project that
            # added summarizer + data and kept its old outputs key gated stale summaries).
            other = " + ".join(repr(k) for k in ("summarizer", "data") if k in data)
            raise ConfigError(
                f"{where}: both 'outputs' and {other} are set: set either 'outputs' (a JSONL "
                "of summaries) or 'summarizer' + 'data' (a summarizer run over sources), not both"
            )
        if config.summarizer is not None and config.data is None:
            raise ConfigError(f"{where}: 'summarizer' needs 'data' (a JSONL of sources)")
        return config

    def override(self, **changes: Any) -> GateConfig:
        """A copy with CLI / plugin overrides applied. ``None`` values are ignored.

        Accepted keys: any ``from_dict`` top-level key (paths resolved against the current
        directory), ``threshold`` (one number for every selected metric), ``min_pass_rate``,
        ``min_mean`` (number or mapping), and ``junit`` / ``markdown`` / ``json`` / ``html``
        report paths. Choosing ``outputs`` clears a configured summarizer and vice versa.
        """
        changes = {k: v for k, v in changes.items() if v is not None}
        if not changes:
            return self
        p = _Parser("option", Path.cwd(), lenient=True)
        new: dict[str, Any] = {}
        rules = self.rules
        reports = self.reports
        for key, value in changes.items():
            if key == "metrics":
                new["metrics"] = p.metric_list(value, "--metric")
                new["default_metrics"] = False
            elif key == "backend":
                new["backend"] = p.choice(value, "--backend", BACKEND_CHOICES)
            elif key in ("outputs", "data", "baseline", "cache_dir"):
                new[key] = p.path(str(value), f"--{key.replace('_', '-')}")
            elif key == "summarizer":
                new["summarizer"] = p.callable_ref(value, "--summarizer")
            elif key == "allow_download":
                new["allow_download"] = p.boolean(value, "--allow-download")
            elif key in ("models", "model_options", "metric_settings", "calibration"):
                merged = dict(getattr(self, key))
                merged.update(p.table(value, f"--{key}"))
                new[key] = merged
            elif key == "thresholds":
                merged = dict(self.thresholds)
                merged.update({k: p.number(v, "--threshold") for k, v in value.items()})
                new["thresholds"] = merged
            elif key == "threshold":
                new["_threshold"] = new["threshold_for_all"] = p.number(value, "--threshold")
            elif key == "min_pass_rate":
                rules = dataclasses.replace(rules, min_pass_rate=p.rate(value, "--min-pass-rate"))
            elif key == "min_mean":
                rules = dataclasses.replace(rules, min_mean=p.min_mean(value, "--min-mean"))
            elif key in REPORT_KINDS:
                reports = reports.with_path(key, p.report_path(str(value), f"--{key}"))
            elif key == "execution":  # {executor, address, num_workers, ...} from flags
                new["execution"] = self.execution.with_overrides(value)
            else:
                raise ConfigError(f"unknown configuration override {key!r}")
        if "outputs" in new:
            new.setdefault("summarizer", None)
            new.setdefault("data", None)
        elif "summarizer" in new:
            new["outputs"] = None
        threshold = new.pop("_threshold", None)
        config = dataclasses.replace(self, rules=rules, reports=reports, **new)
        if threshold is not None:
            config = dataclasses.replace(
                config,
                thresholds={**config.thresholds, **dict.fromkeys(config.metrics, threshold)},
            )
        if config.summarizer is not None and config.data is None:
            raise ConfigError("option --summarizer needs --data (a JSONL of sources)")
        return config

    # ---------------------------------------------------------------- views
    @property
    def cache_path(self) -> Path:
        """The cache directory: ``cache_dir``, by default ``.faithgate`` next to the
        configuration (the pytest plugin uses the same default, so both share scores)."""
        return self.cache_dir if self.cache_dir is not None else self.root / ".faithgate"

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly view recorded with gate results. Paths are written relative to the
        configuration's directory when inside it (a committed baseline then carries no
        machine-specific paths); ``root`` itself is left out."""

        def conv(value: Any) -> Any:
            if isinstance(value, Path):
                return self.display_path(value)
            if isinstance(value, Reports):  # every file kind, None when not written
                return {k: conv(getattr(value, k)) for k in REPORT_KINDS}
            if dataclasses.is_dataclass(value) and not isinstance(value, type):
                return {f.name: conv(getattr(value, f.name)) for f in dataclasses.fields(value)}
            if isinstance(value, dict):
                return {k: conv(v) for k, v in value.items()}
            if isinstance(value, list | tuple):
                return [conv(v) for v in value]
            return value

        data = conv(self)
        # Model paths of the file were made absolute (``_Parser.model``): shown relative too.
        data["models"] = {
            k: self.display_path(v) if Path(v).is_absolute() else v for k, v in self.models.items()
        }
        data.pop("root", None)
        # How the metrics were chosen is said as a warning, not part of the result.
        data.pop("default_metrics", None)
        data.pop("threshold_for_all", None)
        # Where scores were computed does not change them (executors are bit-identical), and a
        # cluster address does not belong in a committed baseline.
        data.pop("execution", None)
        return data

    def display_path(self, path: str | Path) -> str:
        """``path`` relative to ``root`` when it lies inside it, else as given; as text UTF-8
        can hold (``escape.utf8_text``: a name's bytes that are not UTF-8 as ``\\xNN``), since
        it is written into results and reports."""
        path = Path(path)
        try:
            return utf8_text(path.resolve().relative_to(self.root.resolve()).as_posix())
        except ValueError:
            return utf8_text(path)


# ---------------------------------------------------------------------- loading


def load_config(path: str | Path | None = None, *, start: str | Path | None = None) -> GateConfig:
    """Load the gate configuration.

    With ``path``: that file (``pyproject.toml`` -> its ``[tool.faithgate]`` table; any other
    ``.toml`` -> its top level, or its ``[tool.faithgate]`` table when it has one). Without:
    search ``start`` (default: the current directory) and its parents for a ``faithgate.toml``
    or a ``pyproject.toml`` with a ``[tool.faithgate]`` table; the first found wins (in one
    directory ``faithgate.toml`` first). Nothing found: the defaults, rooted at ``start``.
    """
    if path is not None:
        file = Path(path)
        mode = input_mode(file, file, f"{file}: configuration file not found", ConfigError)
        refuse_not_a_file(  # a pipe too: its relative paths need the file's directory
            file, mode, advice="give the configuration file (faithgate.toml or pyproject.toml)"
        )
        table, where = _table_of(file, required=True)
        assert table is not None
        return _from_file(table, file, where)
    here = (Path(start) if start is not None else Path.cwd()).resolve()
    found = _find(here)
    if found is None:
        return GateConfig(root=here, default_metrics=True)
    return _from_file(*found)


def find_config_file(start: str | Path | None = None) -> Path | None:
    """The file ``load_config()`` reads when given no path (the one rule for finding the
    configuration; ``faithgate calibrate`` writes its threshold there): ``start`` (default: the
    current directory) and then its parents, in each a ``faithgate.toml`` first, then a
    ``pyproject.toml`` with a ``[tool.faithgate]`` table. None when there is none."""
    found = _find((Path(start) if start is not None else Path.cwd()).resolve())
    return found[1] if found is not None else None


def _find(here: Path) -> tuple[Mapping[str, Any], Path, str] | None:
    for directory in (here, *here.parents):
        for name in CONFIG_FILES:
            file = directory / name
            if file.is_file():
                table, where = _table_of(file, required=False)
                if table is not None:
                    return table, file, where
    return None


def _from_file(table: Mapping[str, Any], file: Path, where: str) -> GateConfig:
    config = GateConfig.from_dict(table, root=file.resolve().parent, where=where)
    return dataclasses.replace(config, source=file.resolve())


def _table_of(file: Path, required: bool) -> tuple[Mapping[str, Any] | None, str]:
    try:
        # utf-8-sig: a BOM (as Windows editors write) is read past, as in JSONL and CSV files.
        data = tomllib.loads(file.read_text(encoding="utf-8-sig"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file}: invalid TOML ({exc})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{file}: cannot read ({exc})") from None
    except (ValueError, RecursionError) as exc:  # an integer of more than 4300 digits
        raise ConfigError(f"{file}: invalid TOML ({parse_problem(exc)})") from None
    tool = data.get("tool")
    if isinstance(tool, dict) and "faithgate" in tool:
        table = tool["faithgate"]
        if not isinstance(table, dict):
            raise ConfigError(f"{file}: tool.faithgate must be a table")
        if file.name != "pyproject.toml":
            # faithgate.toml holding both forms: the top-level keys would be dropped unread.
            other = sorted(k for k in data if k != "tool")
            if other:
                raise ConfigError(
                    f"{file}: has both [tool.faithgate] and top-level settings "
                    f"({', '.join(other)}), which would be ignored: keep one form"
                )
        return table, f"{file}: tool.faithgate"
    if file.name == "pyproject.toml":
        if required:
            raise ConfigError(f"{file}: no [tool.faithgate] table")
        return None, str(file)
    return data, str(file)


# ---------------------------------------------------------------------- validation

_TOP_KEYS = (
    "metrics",
    "backend",
    "outputs",
    "summarizer",
    "data",
    "baseline",
    "cache_dir",
    "allow_download",
    "models",
    "model_options",
    "metric_settings",
    "thresholds",
    "calibration",
    "rules",
    "reports",
    "execution",
)


class _Parser:
    """The checks of single values: each names its key (``where: key: problem``), or, as a
    validator of the schema, leaves the key to the error's location (``key`` is None).

    The shapes (which keys a table takes, the type of each) are the annotated fields of the
    configuration's dataclasses (``faithgate.schema``: pydantic checks them)."""

    def __init__(self, where: str, root: Path, lenient: bool = False) -> None:
        self.where = where
        self.root = root
        # Command-line values arrive as text: only overrides accept numbers written as strings.
        self.lenient = lenient

    def fail(self, key: str | None, problem: str) -> Exception:
        """The error of a check; without ``key``, one the schema names by its location."""
        if key is None:
            return PydanticCustomError("config", problem)
        return ConfigError(f"{self.where}: {key}: {problem}")

    def table(self, value: Any, key: str | None) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise self.fail(key, f"expected a table, got {_kind(value)}")
        return value

    def string(self, value: Any, key: str | None) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.fail(key, f"expected a non-empty string, got {_kind(value)}")
        return value

    def boolean(self, value: Any, key: str | None) -> bool:
        if not isinstance(value, bool):
            raise self.fail(key, f"expected true or false, got {_kind(value)}")
        return value

    def number(self, value: Any, key: str | None) -> float:
        if isinstance(value, str) and self.lenient:
            with contextlib.suppress(ValueError):
                value = float(value)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(key, f"expected a number, got {_kind(value)}")
        # NaN and the infinities would make a rule that every score passes (-inf) or none
        # does (inf, NaN): a configuration that fails open is refused. So is an integer beyond
        # float range (TOML has them), which math.isfinite and float() raise OverflowError on.
        if not is_finite_number(value):
            shown = "an integer too large for a float" if isinstance(value, int) else value
            raise self.fail(key, f"expected a finite number, got {shown}")
        return float(value)

    def rate(self, value: Any, key: str | None) -> float:
        x = self.number(value, key)
        if not 0.0 <= x <= 1.0:
            raise self.fail(key, f"expected a number between 0 and 1, got {x:g}")
        return x

    def integer(self, value: Any, key: str | None, minimum: int = 0) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(key, f"expected an integer, got {_kind(value)}")
        if value < minimum:
            raise self.fail(key, f"expected an integer >= {minimum}, got {value}")
        return value

    def choice(self, value: Any, key: str | None, choices: tuple[str, ...]) -> str:
        if value not in choices:
            raise self.fail(key, f"expected one of {', '.join(choices)}, got {value!r}")
        return value

    def path(self, value: Any, key: str | None) -> Path:
        path = Path(self.string(value, key)).expanduser()
        return path if path.is_absolute() else self.root / path

    def report_path(self, value: Any, key: str | None) -> Path:
        """A report's path: ``-`` is refused (a report is a file; standard output holds the
        verdict table, and ``-`` was a file named "-"); ``./-`` names that file."""
        if value == "-":
            raise self.fail(
                key,
                "reports are written to files, not to standard output; give a path "
                "(./- for a file named '-')",
            )
        return self.path(value, key)

    def model(self, value: Any, key: str | None) -> str:
        """A model role's hub id (``org/name``, ``org/name@rev``) or local path. A path relative
        to the configuration's directory is made absolute against it, as every path of the file
        is: one that exists there, or one written as a path (``./``, ``../``; a missing one is
        then an error naming it, not a hub id). Anything else is left as written (a hub id, an
        absolute or ``~`` path); ``models.resolve`` reads it."""
        text = self.string(value, key)
        if Path(text).expanduser().is_absolute():
            return text
        local = self.root / text
        written_as_path = text in (".", "..") or text.startswith(("./", "../", ".\\", "..\\"))
        return str(local) if written_as_path or local.exists() else text

    def callable_ref(self, value: Any, key: str | None) -> str:
        text = self.string(value, key)
        module, sep, attr = text.partition(":")
        if not sep or not module or not attr:
            raise self.fail(key, f"expected 'module:function', got {text!r}")
        return text

    def string_list(self, value: Any, key: str | None) -> tuple[str, ...]:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list | tuple) or not value:
            raise self.fail(key, f"expected a non-empty list of strings, got {_kind(value)}")
        return tuple(self.string(v, key) for v in value)

    def metric_list(self, value: Any, key: str | None) -> tuple[str, ...]:
        names = self.string_list(value, key)
        if len(set(names)) != len(names):
            raise self.fail(key, f"a metric is listed twice: {', '.join(names)}")
        return names

    def min_mean(self, value: Any, key: str) -> dict[str, float]:
        if isinstance(value, Mapping):
            return {k: self.number(v, f"{key}.{k}") for k, v in value.items()}
        # One number: the same minimum for every selected metric ("*" is expanded by the gate).
        return {"*": self.number(value, key)}

    def keys(self, value: Any, key: None, allowed: tuple[str, ...]) -> Mapping[str, Any]:
        """A table of the ``allowed`` keys only (a check of the schema's: named by location)."""
        table = self.table(value, key)
        for name in table:
            if name not in allowed:
                ctx = {"key": name, "allowed": ", ".join(allowed)}
                raise PydanticCustomError("unknown_key", "unknown key", ctx)
        return table

    def drop(self, value: Any, key: str | None) -> float:
        x = self.number(value, key)
        if x < 0:
            raise self.fail(key, f"expected a number >= 0, got {x:g}")
        return x

    def confidence(self, value: Any, key: str | None) -> float:
        x = self.number(value, key)
        if not 0.5 <= x < 1.0:
            raise self.fail(key, f"expected a number in [0.5, 1), got {x:g}")
        return x

    def resamples(self, value: Any, key: str | None) -> int:
        n = self.integer(value, key, minimum=100)
        # A bootstrap of more resamples than this tells nothing more, and a huge value failed
        # with a MemoryError after the whole scoring run.
        if n > MAX_RESAMPLES:
            shown = f"{n:,}" if n < 10**15 else "more than 10^15"  # never 400 digits
            raise self.fail(key, f"expected an integer <= {MAX_RESAMPLES:,}, got {shown}")
        return n

    def execution(self, value: Any, key: str | None) -> ExecutionSettings:
        return ExecutionSettings.from_dict(self.table(value, key), self.where)


def _check(check: str, *args: Any) -> BeforeValidator:
    """A ``_Parser`` check as a validator of the configuration's schema (the parser is the
    validation's context); its error is named by the key it lies at (``_config_error``)."""
    return BeforeValidator(lambda value, info: getattr(info.context, check)(value, None, *args))


def _reports(value: Any, info: ValidationInfo) -> Reports:
    table = info.context.keys(value, None, REPORT_KINDS)
    return Reports(**adapter(_ReportPaths).validate_python(table, context=info.context))


def _min_rate_only(value: Any, info: ValidationInfo) -> Any:
    """``pair_consistency = 0.9``: the rule with that minimum rate (named as the rule's key)."""
    if isinstance(value, bool | Mapping):
        return value
    return {"min_rate": info.context.rate(value, None)}


def _every_metric(value: Any) -> Any:
    """A number where a table of metric -> number is expected: the same for every metric."""
    return value if isinstance(value, Mapping) else {"*": value}


def _fields(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


_Tables = Annotated[dict[str, Annotated[dict[str, Any], _check("table")]], _check("table")]
_ReportPaths = dict[str, Annotated[Path, _check("report_path")]]
# A configuration table: its keys, then GateConfig's fields (root and the rest are not keys).
_File = Annotated[GateConfig, _check("keys", _TOP_KEYS)]


def _config_error(exc: ValidationError, where: str) -> ConfigError:
    """The one-line message of a configuration's first error: ``where: key: problem``, the
    key dotted as written (``"*"``, a number for every metric, left out)."""
    error = first_error(exc)
    key = ".".join(str(k) for k in error["loc"] if k != "*")
    if error["type"] == "unknown_key":
        ctx = error.get("ctx") or {}
        prefix = f"{key}." if key else ""
        return ConfigError(
            f"{where}: unknown key {prefix}{ctx['key']!r}; allowed: {ctx['allowed']}"
        )
    return ConfigError(f"{where}: {key}: {error['msg']}")


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return f"boolean {value!r}".lower()
    if isinstance(value, str):
        return f"string {value!r}"
    if isinstance(value, int | float):
        return f"number {value!r}"
    if isinstance(value, Mapping):
        return "a table"
    if isinstance(value, list | tuple):
        return "a list"
    return type(value).__name__
