"""Gate configuration: [tool.faithgate] / faithgate.toml, typed values, errors naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from faithgate.config import GateConfig, PairConsistencyRule, RegressionRule, load_config
from faithgate.errors import ConfigError
from faithgate.scoring.scorer import DEFAULT_METRICS, Scorer

FULL = """
[project]
name = "demo"

[tool.faithgate]
metrics = ["bertscore", "ner"]
backend = "onnx"
outputs = "data/outputs.jsonl"
baseline = "faithgate-baseline.json"
cache_dir = ".faithgate"
[tool.faithgate.models]
nli = "some/hub-id"
[tool.faithgate.metric_settings.bertscore]
layer = 4
[tool.faithgate.thresholds]
bertscore = 0.55
ner = 1
[tool.faithgate.calibration.bertscore]
threshold = 0.55
ci95 = [0.51, 0.58]
[tool.faithgate.rules]
min_pass_rate = 0.9
min_mean = { bertscore = 0.6 }
pair_consistency = { min_rate = 0.9, per_error_type = true, generate = false }
regression = { tolerance = 0.01, confidence = 0.95 }
[tool.faithgate.reports]
junit = "reports/faithgate.xml"
markdown = "reports/faithgate.md"
json = "reports/faithgate.json"
html = "reports/faithgate.html"
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_pyproject_full_example_is_typed_and_paths_are_relative_to_the_file(tmp_path):
    write(tmp_path / "pyproject.toml", FULL)
    cfg = load_config(start=tmp_path)
    assert cfg.metrics == ("bertscore", "ner")
    assert cfg.backend == "onnx"
    assert cfg.outputs == tmp_path / "data" / "outputs.jsonl"
    assert cfg.baseline == tmp_path / "faithgate-baseline.json"
    assert cfg.cache_dir == tmp_path / ".faithgate"
    assert cfg.models == {"nli": "some/hub-id"}
    assert cfg.metric_settings == {"bertscore": {"layer": 4}}
    assert cfg.thresholds == {"bertscore": 0.55, "ner": 1.0}
    assert isinstance(cfg.thresholds["ner"], float)
    assert cfg.calibration["bertscore"]["ci95"] == [0.51, 0.58]
    assert cfg.rules.min_pass_rate == 0.9
    assert cfg.rules.min_mean == {"bertscore": 0.6}
    assert cfg.rules.pair_consistency == PairConsistencyRule(min_rate=0.9, per_error_type=True)
    assert cfg.rules.regression == RegressionRule(tolerance=0.01, confidence=0.95)
    assert cfg.reports.junit == tmp_path / "reports" / "faithgate.xml"
    assert [k for k, _ in cfg.reports.items()] == ["junit", "markdown", "json", "html"]
    assert cfg.source == (tmp_path / "pyproject.toml").resolve()


def test_faithgate_toml_top_level_and_search_upwards(tmp_path):
    write(tmp_path / "faithgate.toml", 'metrics = "overlap"\n[thresholds]\noverlap = 0.3\n')
    # a pyproject without [tool.faithgate] in a subdirectory does not stop the search
    write(tmp_path / "a" / "b" / "pyproject.toml", '[project]\nname = "x"\n')
    cfg = load_config(start=tmp_path / "a" / "b")
    assert cfg.metrics == ("overlap",)
    assert cfg.thresholds == {"overlap": 0.3}
    assert cfg.root == tmp_path.resolve()


def test_faithgate_toml_wins_over_pyproject_in_the_same_directory(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.faithgate]\nmetrics = ["ner"]\n')
    write(tmp_path / "faithgate.toml", 'metrics = ["overlap"]\n')
    assert load_config(start=tmp_path).metrics == ("overlap",)
    assert load_config(tmp_path / "pyproject.toml").metrics == ("ner",)


def test_no_configuration_gives_defaults(tmp_path):
    cfg = load_config(start=tmp_path)
    assert cfg.source is None
    assert cfg.rules.min_pass_rate == 1.0
    assert cfg.outputs is None
    # One default selection for the library, the gate and the pytest plugin
    # (scorer.DEFAULT_METRICS): ensemble, measured best per summary on ../shared/data, and facts,
    # the fast precise check of numbers, dates and names (issue 47). The plugin's fixture uses
    # the first, ensemble.
    assert cfg.metrics == DEFAULT_METRICS == ("ensemble", "facts")
    assert [m.name for m in Scorer().metrics] == list(DEFAULT_METRICS)


@pytest.mark.parametrize(
    ("toml", "key"),
    [
        ('metricz = ["x"]', "'metricz'"),
        ("metrics = 3", "metrics"),
        ('backend = "cuda"', "backend"),
        ("outputs = 5", "outputs"),
        ('summarizer = "nocolon"', "summarizer"),
        ('[thresholds]\nbertscore = "high"', "thresholds.bertscore"),
        ("[rules]\nmin_pass_rate = 1.5", "rules.min_pass_rate"),
        ('[rules]\nmin_pass_rate = "0.9"', "rules.min_pass_rate"),
        ("[rules]\nmax_fail = 2", "'max_fail'"),
        ("[rules]\npair_consistency = { min_rate = 0.9, typo = 1 }", "'typo'"),
        ("[rules]\npair_consistency = { generate = 1 }", "rules.pair_consistency.generate"),
        ("[rules]\nregression = { confidence = 1.5 }", "rules.regression.confidence"),
        ("[rules]\nregression = { tolerance = -0.1 }", "rules.regression.tolerance"),
        (
            '[rules]\nregression = { per_example_drop = { lm = "x" } }',
            "rules.regression.per_example_drop.lm",
        ),
        ("[rules]\nregression = { per_example_drop = -1 }", "rules.regression.per_example_drop"),
        ("[rules]\nregression = { max_changed_words = 0 }", "rules.regression.max_changed_words"),
        ('[rules]\nmin_mean = { bertscore = "x" }', "rules.min_mean.bertscore"),
        ('[reports]\npdf = "x.pdf"', "'pdf'"),
        ("models = 3", "models"),
        ("allow_download = 1", "allow_download"),
    ],
)
def test_errors_name_the_key(tmp_path, toml, key):
    write(tmp_path / "faithgate.toml", toml + "\n")
    with pytest.raises(ConfigError) as err:
        load_config(start=tmp_path)
    message = str(err.value)
    assert key in message
    assert "faithgate.toml" in message
    assert "\n" not in message


def test_pyproject_errors_name_the_table(tmp_path):
    write(tmp_path / "pyproject.toml", "[tool.faithgate.rules]\nmin_pass_rate = true\n")
    with pytest.raises(ConfigError, match=r"tool\.faithgate: rules\.min_pass_rate"):
        load_config(start=tmp_path)


def test_invalid_toml_and_missing_file(tmp_path):
    write(tmp_path / "faithgate.toml", "metrics = [\n")
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_config(start=tmp_path)
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.toml")
    write(tmp_path / "p" / "pyproject.toml", '[project]\nname = "x"\n')
    with pytest.raises(ConfigError, match=r"no \[tool.faithgate\]"):
        load_config(tmp_path / "p" / "pyproject.toml")


def test_summarizer_needs_data(tmp_path):
    write(tmp_path / "faithgate.toml", 'summarizer = "pkg.mod:fn"\n')
    with pytest.raises(ConfigError, match="'summarizer' needs 'data'"):
        load_config(start=tmp_path)


@pytest.mark.parametrize(
    ("toml", "keys"),
    [
        ('summarizer = "nosuchmod:fn"\ndata = "nosuch.jsonl"\n', "'summarizer' + 'data'"),
        ('data = "sources.jsonl"\n', "'data'"),
        ('summarizer = "pkg.mod:fn"\n', "'summarizer'"),
    ],
)
def test_outputs_with_a_summarizer_or_data_is_refused(tmp_path, toml, keys):
    """A configuration with outputs and summarizer + data gated the outputs file, silently: the
    summarizer never ran (its module and data file were not even looked for)."""
    write(tmp_path / "faithgate.toml", 'outputs = "outputs.jsonl"\n' + toml)
    with pytest.raises(ConfigError) as err:
        load_config(start=tmp_path)
    message = str(err.value)
    assert f"both 'outputs' and {keys} are set" in message and "not both" in message
    assert "faithgate.toml" in message and "\n" not in message
    # A flag still chooses between the two (cli check: --outputs replaces a configured
    # summarizer, --summarizer with --data a configured outputs file).
    write(tmp_path / "faithgate.toml", 'summarizer = "m:f"\ndata = "d.jsonl"\n')
    assert load_config(start=tmp_path).override(outputs="o.jsonl").summarizer is None


@pytest.mark.parametrize(
    ("toml", "key"),
    [
        ("[thresholds]\nbertscore = {big}", "thresholds.bertscore"),
        ("[rules]\nmin_pass_rate = {big}", "rules.min_pass_rate"),
        ("[rules]\nmin_mean = -{big}", "rules.min_mean"),
        ("[rules]\nregression = {{ tolerance = {big} }}", "rules.regression.tolerance"),
        (
            "[rules]\nregression = {{ per_example_drop = {{ m = {big} }} }}",
            "rules.regression.per_example_drop.m",
        ),
        ("[execution]\nnum_workers = {big}", "execution.num_workers"),
        ("[execution]\nnum_gpus = {big}", "execution.num_gpus"),
    ],
)
def test_an_integer_beyond_float_range_is_a_config_error(tmp_path, toml, key):
    """math.isfinite raised OverflowError on such an integer: "internal error", exit 1 (the
    gate-failed code) instead of a configuration error naming the key."""
    write(tmp_path / "faithgate.toml", toml.format(big="1" + "0" * 400) + "\n")
    with pytest.raises(ConfigError) as err:
        load_config(start=tmp_path)
    message = str(err.value)
    assert key in message and "expected a finite number" in message
    assert "too large for a float" in message and len(message) < 200


def test_overrides(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = GateConfig.from_dict(
        {"metrics": ["a", "b"], "summarizer": "m:f", "data": "d.jsonl", "thresholds": {"a": 0.1}},
        root=tmp_path / "proj",
    )
    assert cfg.data == tmp_path / "proj" / "d.jsonl"
    new = cfg.override(threshold="0.7", outputs="out.jsonl", min_pass_rate=0.5, markdown="r.md")
    assert new.thresholds == {"a": 0.7, "b": 0.7}
    assert new.outputs == tmp_path / "out.jsonl"  # flags resolve against the cwd
    assert new.summarizer is None and new.data is None
    assert new.rules.min_pass_rate == 0.5
    assert new.reports.markdown == tmp_path / "r.md"
    assert cfg.thresholds == {"a": 0.1}  # the original is unchanged
    assert cfg.override(metrics=None, threshold=None) is cfg
    named = cfg.override(thresholds={"b": 0.2})
    assert named.thresholds == {"a": 0.1, "b": 0.2}
    with pytest.raises(ConfigError, match="--min-pass-rate"):
        cfg.override(min_pass_rate=2)
    with pytest.raises(ConfigError, match="--threshold"):
        cfg.override(threshold="high")
    with pytest.raises(ConfigError, match="--summarizer needs --data"):
        GateConfig().override(summarizer="m:f")


def test_min_mean_single_number_and_shorthands():
    cfg = GateConfig.from_dict(
        {"rules": {"min_mean": 0.4, "pair_consistency": 0.8, "regression": True}}
    )
    assert cfg.rules.min_mean == {"*": 0.4}
    assert cfg.rules.pair_consistency == PairConsistencyRule(min_rate=0.8)
    assert cfg.rules.regression == RegressionRule()


def test_to_dict_is_json_friendly(tmp_path):
    import json

    write(tmp_path / "pyproject.toml", FULL)
    data = load_config(start=tmp_path).to_dict()
    text = json.dumps(data)
    assert data["outputs"] == "data/outputs.jsonl"
    assert "root" not in data and str(tmp_path) not in text
    assert data["rules"]["pair_consistency"]["min_rate"] == 0.9
    assert "Path(" not in text


def test_per_example_drop_reads_one_number_or_a_table(tmp_path):
    write(tmp_path / "faithgate.toml", "[rules]\nregression = { per_example_drop = 0.02 }\n")
    assert load_config(start=tmp_path).rules.regression.per_example_drop == {"*": 0.02}
    write(
        tmp_path / "faithgate.toml",
        "[rules]\nregression = { per_example_drop = { harim_plus = 0.05 }, max_changed_words = 3 }\n",
    )
    rule = load_config(start=tmp_path).rules.regression
    assert rule.per_example_drop == {"harim_plus": 0.05} and rule.max_changed_words == 3


def test_regression_resamples_has_a_maximum(tmp_path):
    """resamples = 100000000000000 was accepted and the bootstrap raised MemoryError after the
    whole scoring run (an internal error, exit 1): refused when the file is read (exit 2)."""
    write(tmp_path / "faithgate.toml", "[rules]\nregression = { resamples = 1000000 }\n")
    assert load_config(start=tmp_path).rules.regression.resamples == 1_000_000
    for value, shown in (("1000001", "1,000,001"), ("100000000000000000", "more than 10^15")):
        write(tmp_path / "faithgate.toml", f"[rules]\nregression = {{ resamples = {value} }}\n")
        with pytest.raises(ConfigError) as err:
            load_config(start=tmp_path)
        assert str(err.value).endswith(
            f"rules.regression.resamples: expected an integer <= 1,000,000, got {shown}"
        )
        assert err.value.exit_code == 2


def test_a_faithgate_toml_with_both_forms_is_refused(tmp_path):
    """Its top-level keys (a 0.99 threshold) were dropped unread beside [tool.faithgate]."""
    path = tmp_path / "faithgate.toml"
    path.write_text(
        'metrics = ["overlap"]\n[thresholds]\noverlap = 0.99\n'
        '[tool.faithgate]\nmetrics = ["overlap"]\n'
    )
    with pytest.raises(
        ConfigError,
        match=r"both \[tool.faithgate\] and top-level settings "
        r"\(metrics, thresholds\), which would be ignored",
    ):
        load_config(path)


def test_model_paths_are_relative_to_the_file_hub_ids_are_left_alone(tmp_path, monkeypatch):
    """``models.<role>`` paths resolved against the current directory: run from elsewhere
    (``--config``, the Action's ``config`` input, ``pytest --faithgate`` from a subdirectory),
    another directory of the same name was used silently, or the path was asked of the hub as a
    repo name (review s19, finding 4). The CLI, the plugin and the Action all load through
    ``load_config``."""
    import json

    from faithgate.backends import ModelPool
    from faithgate.errors import ModelNotFoundError

    monkeypatch.setenv("FAITHGATE_HOME", str(tmp_path / "home"))
    project, elsewhere = tmp_path / "proj", tmp_path / "work"
    for directory in (project / "emb", project / "models" / "nli", elsewhere / "emb"):
        write(directory / "config.json", json.dumps({"model_type": "bert", "at": str(directory)}))
    config_file = write(
        project / "faithgate.toml",
        "[models]\n"
        'embedder = "emb"\n'
        'nli = "./models/nli/"\n'
        'lm = "../proj/absent"\n'
        'qa = "org/qa@v1"\n'
        'qg = "~/somewhere/qg"\n'
        f'seq2seq = "{elsewhere / "emb"}"\n',
    )
    monkeypatch.chdir(elsewhere)
    cfg = load_config(config_file)
    assert cfg.models == {
        "embedder": str(project / "emb"),
        "nli": str(project / "models" / "nli"),
        "lm": str(project / ".." / "proj" / "absent"),  # written as a path: one
        "qa": "org/qa@v1",
        "qg": "~/somewhere/qg",
        "seq2seq": str(elsewhere / "emb"),
    }
    pool = ModelPool(cfg.models)
    assert pool.spec("embedder").location == str((project / "emb").resolve())
    assert pool.spec("nli").location == str((project / "models" / "nli").resolve())
    with pytest.raises(ModelNotFoundError, match="does not exist"):
        pool.spec("lm")
    # The result JSON (a committed baseline) records them relative to the file, as other paths.
    recorded = cfg.to_dict()["models"]
    assert recorded["embedder"] == "emb" and recorded["nli"] == "models/nli"
    assert recorded["qa"] == "org/qa@v1"
    # The same file found by searching upwards from the project gives the same models.
    monkeypatch.chdir(project / "models")
    assert load_config().models == cfg.models
    # A command-line override is the user's own path: relative to the current directory.
    assert cfg.override(models={"embedder": "emb"}).models["embedder"] == "emb"


def test_a_report_at_dash_is_refused_in_the_file_and_as_an_override(tmp_path):
    """``json = "-"`` (or ``--faithgate-json -``) wrote a file named "-"; "./-" still does."""
    with pytest.raises(ConfigError, match=r"reports\.json: reports are written to files"):
        GateConfig.from_dict({"metrics": ["overlap"], "reports": {"json": "-"}}, root=tmp_path)
    config = GateConfig.from_dict({"metrics": ["overlap"]}, root=tmp_path)
    with pytest.raises(ConfigError, match="--markdown: reports are written to files"):
        config.override(markdown="-")
    assert config.override(json="./-").reports.json == Path.cwd() / "-"  # the flag: from cwd
