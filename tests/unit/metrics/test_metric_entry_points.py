"""Third-party metrics through the ``faithgate.metrics`` entry-point group: an installed package
(here a fake distribution on ``sys.path``) adds a metric that ``faithgate check`` can gate on."""

from __future__ import annotations

import json
import textwrap

import pytest
from click.testing import CliRunner

from faithgate.cli import cli
from faithgate.metrics import base

METRIC_MODULE = '''
from faithgate.metrics.base import Metric
from faithgate.types import Score


class WordCount(Metric):
    """Test metric: 1 / number of summary words (nothing registers it but the entry point)."""

    name = "ext_wordcount"
    description = "third-party test metric"

    def score_batch(self, examples, ctx):
        return [
            Score(self.name, 1.0 / len(ex.summary.split()), self.settings_hash(ctx), ex.id)
            for ex in examples
        ]
'''


@pytest.fixture
def installed_plugin(tmp_path, monkeypatch):
    """A distribution ``fg-ext`` declaring ``ext_wordcount = fg_ext:WordCount``."""
    # The built-ins register first, before the fake distribution is on the path: a module
    # imports once per process, so a built-in first imported inside this test would register
    # only in the registry copy thrown away after it.
    base._discover()
    site = tmp_path / "site"
    site.mkdir()
    (site / "fg_ext.py").write_text(textwrap.dedent(METRIC_MODULE))
    dist = site / "fg_ext-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fg-ext\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[faithgate.metrics]\next_wordcount = fg_ext:WordCount\nbroken = fg_ext_missing:Nope\n"
    )
    monkeypatch.syspath_prepend(str(site))
    # Discovery runs once per process: start it afresh, and forget the metric afterwards.
    monkeypatch.setattr(base, "_DISCOVERED", False)
    monkeypatch.setattr(base, "_REGISTRY", dict(base._REGISTRY))
    return site


def test_entry_point_metric_is_registered_and_a_broken_one_is_skipped(installed_plugin):
    with pytest.warns(UserWarning, match="broken"):
        names = base.metric_names()
    assert "ext_wordcount" in names and "bertscore" in names
    metric = base.get_metric("ext_wordcount")
    assert type(metric).__module__ == "fg_ext"


def test_faithgate_check_gates_on_an_entry_point_metric(installed_plugin, tmp_path, monkeypatch):
    rows = [
        {"id": "short", "source": "The cat sat on the mat.", "summary": "Cat sat."},
        {"id": "long", "source": "The cat sat on the mat.", "summary": "A cat sat on a mat."},
    ]
    outputs = tmp_path / "outputs.jsonl"
    outputs.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "faithgate.toml").write_text(
        'metrics = ["ext_wordcount"]\noutputs = "outputs.jsonl"\n'
        "[thresholds]\next_wordcount = 0.4\n"
    )
    monkeypatch.chdir(tmp_path)
    with pytest.warns(UserWarning, match="broken"):
        result = CliRunner().invoke(cli, ["check", "--json", "r.json"], catch_exceptions=False)
    assert result.exit_code == 1, result.output  # "long" has 6 words: 1/6 < 0.4
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["metrics"] == ["ext_wordcount"]
    assert {e["id"]: e["passed"] for e in data["examples"]} == {"short": True, "long": False}
