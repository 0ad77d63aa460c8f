"""A gate run end to end with a fake metric: the score cache, the baseline it updates, the
last result beside the cache, summarizers, and the result JSON."""

from __future__ import annotations

import json

import pytest
from gate_cases import (
    H,
    M,
    gate,
    pair_gate,
    rule,
    write_outputs,
)
from gate_fakes import NAME, FakeMetric, summary

from faithgate.config import GateConfig
from faithgate.errors import InputError
from faithgate.gate import BaselinePolicy, Gate
from faithgate.result import GateResult
from faithgate.summarize import run_summarizer
from faithgate.types import Example


def test_the_result_json_reference_in_gate_md_names_every_key():
    # docs/gate.md shows the result JSON a user's CI reads: the same keys, at every level.
    import re
    from pathlib import Path

    page = (Path(__file__).parents[3] / "docs" / "gate.md").read_text(encoding="utf-8")
    block = re.search(r"## Result JSON.*?```json\n(.*?)```", page, re.S)
    assert block is not None
    doc = json.loads(block.group(1))
    r = pair_gate([(0.9, 0.1)], {"thresholds": {M: 0.5}, "rules": {"pair_consistency": 1.0}})
    real = json.loads(json.dumps(r.to_dict()))

    def keys(data: dict) -> list:
        return sorted(data)

    assert keys(doc) == keys(real)
    assert keys(doc["rules"][0]) == keys(real["rules"][0])
    assert keys(doc["examples"][0]) == keys(real["examples"][0])
    assert keys(doc["examples"][0]["scores"]["bertscore"]) == keys(real["examples"][0]["scores"][M])
    assert keys(doc["pairs"][0]) == keys(real["pairs"][0])


def test_result_json_round_trip_and_save(tmp_path):
    r = pair_gate([(0.9, 0.1)], {"thresholds": {M: 0.5}, "rules": {"pair_consistency": 1.0}})
    data = json.loads(json.dumps(r.to_dict()))
    back = GateResult.from_dict(data)
    assert back.to_dict() == r.to_dict()
    assert data["verdict"] == "pass" and data["pass_rate"] == 1.0
    assert data["settings_hashes"] == H and data["means"] == {M: 0.9}
    path = r.save(tmp_path / "x" / "result.json")
    assert GateResult.load(path).to_dict() == r.to_dict()
    (tmp_path / "bad.json").write_text("[1, 2]")
    with pytest.raises(InputError, match="bad.json"):
        GateResult.load(tmp_path / "bad.json")


def test_gate_run_uses_the_cache_so_unchanged_examples_are_not_rescored(tmp_path):
    rows = [{"id": f"e{i}", "source": "src", "summary": summary(0.5 + i / 10)} for i in range(4)]
    out = write_outputs(tmp_path / "outputs.jsonl", rows)
    cfg = GateConfig.from_dict(
        {"metrics": [NAME], "outputs": str(out), "cache_dir": ".fg", "thresholds": {NAME: 0.55}},
        root=tmp_path,
    )
    FakeMetric.calls.clear()
    first = Gate(cfg).run()
    assert sorted(FakeMetric.calls) == ["e0", "e1", "e2", "e3"]
    assert first.cache == {"hits": 0, "misses": 4}
    assert [e.passed for e in first.examples] == [False, True, True, True]
    FakeMetric.calls.clear()
    second = Gate(cfg).run()  # a new Gate and Scorer: only the on-disk cache is shared
    assert FakeMetric.calls == []
    assert second.cache == {"hits": 4, "misses": 0}
    assert [e.to_dict() for e in second.examples] == [e.to_dict() for e in first.examples]
    # one changed summary is the only one rescored
    rows[2]["summary"] = summary(0.95)
    write_outputs(out, rows)
    FakeMetric.calls.clear()
    third = Gate(cfg).run()
    assert FakeMetric.calls == ["e2"]
    assert (tmp_path / ".fg" / "last-result.json").is_file()
    assert third.examples[2].scores[NAME].value == pytest.approx(0.95)


def test_gate_run_unscorable_and_update_baseline(tmp_path):
    rows = [
        {"id": "ok", "source": "src", "summary": summary(0.9)},
        {"id": "bad", "source": "src", "summary": "UNSCORABLE 0.9 x."},
    ]
    out = write_outputs(tmp_path / "o.jsonl", rows)
    cfg = GateConfig.from_dict(
        {"metrics": [NAME], "outputs": str(out), "baseline": "base.json"}, root=tmp_path
    )
    gate = Gate(cfg, baseline=BaselinePolicy(update=True))
    result = gate.run()
    assert not result.passed
    assert result.examples[1].message.startswith(f"{NAME}: could not score (ValueError")
    # A failing run is not written as the baseline unless forced (issue 16).
    assert not (tmp_path / "base.json").exists()
    assert gate.baseline_note.startswith("baseline NOT updated: the gate failed")
    forced = Gate(cfg, baseline=BaselinePolicy(update=True, force=True))
    forced.run()
    assert "forced" in forced.baseline_note
    base = GateResult.load(tmp_path / "base.json")
    assert base.values(NAME) == {"ok": pytest.approx(0.9)}
    # without --update-baseline a missing baseline file skips the regression rule, saying how
    # to create the file; require_baseline makes it fail instead.
    cfg2 = cfg.override(baseline=str(tmp_path / "missing.json"), outputs=str(out))
    r2 = Gate(cfg2).run()
    reg = rule(r2, f"regression[{NAME}]")
    assert reg.passed and reg.skipped and "update-baseline" in reg.message
    strict = GateConfig.from_dict(
        {
            "metrics": [NAME],
            "outputs": str(out),
            "baseline": "missing.json",
            "rules": {"regression": {"require_baseline": True}},
        },
        root=tmp_path,
    )
    reg = rule(Gate(strict).run(), f"regression[{NAME}]")
    assert not reg.passed and not reg.skipped and "update-baseline" in reg.message


def test_update_baseline_adds_a_newly_selected_metric(tmp_path):
    """A baseline without a selected metric's scores (the metric was added since) is replaced
    by --update-baseline, as one made with other settings is, instead of failing the run."""
    out = write_outputs(tmp_path / "o.jsonl", [{"id": "a", "source": "s", "summary": summary(0.9)}])
    cfg = GateConfig.from_dict(
        {"metrics": [NAME], "outputs": str(out), "baseline": "base.json"}, root=tmp_path
    )
    Gate(cfg, baseline=BaselinePolicy(update=True)).run()
    data = json.loads((tmp_path / "base.json").read_text())
    data["metrics"], data["settings_hashes"] = [], {}
    for e in data["examples"]:
        e["scores"] = {}
    (tmp_path / "base.json").write_text(json.dumps(data))
    assert not Gate(cfg).run().passed  # "the baseline has no ... scores"
    gate = Gate(cfg, baseline=BaselinePolicy(update=True))
    assert gate.run().passed
    assert GateResult.load(tmp_path / "base.json").values(NAME) == {"a": pytest.approx(0.9)}


def test_update_baseline_replaces_only_the_metrics_it_cannot_compare(tmp_path):
    """One re-configured (or newly selected) metric dropped the whole baseline under
    --update-baseline: the regression of every other metric was skipped, and a run that
    regressed on them passed and became the reference."""
    rows = [{"id": f"e{i}", "source": f"src {i}", "summary": summary(0.9)} for i in range(8)]
    out = write_outputs(tmp_path / "o.jsonl", rows)
    table = {
        "metrics": [NAME, "repetition"],
        "outputs": str(out),
        "baseline": "base.json",
        "thresholds": {NAME: 0.1},
    }
    assert (
        Gate(GateConfig.from_dict(table, root=tmp_path), baseline=BaselinePolicy(update=True))
        .run()
        .passed
    )
    base = tmp_path / "base.json"
    recorded = base.read_text()
    # repetition re-configured: its baseline scores are no longer comparable; gate_fake's are.
    table["metric_settings"] = {"repetition": {"n": 3}}
    cfg = GateConfig.from_dict(table, root=tmp_path)
    write_outputs(out, [{**row, "summary": summary(0.5)} for row in rows])
    gate = Gate(cfg, baseline=BaselinePolicy(update=True))
    result = gate.run()
    reg = rule(result, f"regression[{NAME}]")
    assert not reg.passed and not reg.skipped and "dropped by 0.4000" in reg.message
    replaced = rule(result, "regression[repetition]")
    assert replaced.passed and replaced.skipped
    assert replaced.message == (
        "the baseline at base.json holds no repetition scores made with these settings (this "
        "run replaces it): nothing to compare yet"
    )
    assert not result.passed
    assert gate.baseline_note.startswith("baseline NOT updated: the gate failed")
    assert base.read_text() == recorded  # the regressed run is not the reference
    # A run that did not regress replaces it, the re-configured metric's scores with it ...
    write_outputs(out, rows)
    result = Gate(cfg, baseline=BaselinePolicy(update=True)).run()
    assert result.passed and not rule(result, f"regression[{NAME}]").skipped
    assert rule(result, "regression[repetition]").skipped
    assert GateResult.load(base).settings_hashes == result.settings_hashes
    # ... which the next run compares, every metric of it.
    again = Gate(cfg).run()
    assert again.passed and not any(r.skipped for r in again.rules)


def test_scores_made_under_other_settings_are_refused_before_anything_is_written(
    tmp_path, monkeypatch
):
    """A run whose scores carried another settings hash than it records was gated and written
    (baseline, result JSON), and every later run refused that file as a baseline."""
    original = FakeMetric.score_batch

    def elsewhere(self, examples, ctx):
        scores = original(self, examples, ctx)
        for score in scores:
            score.settings_hash += "-elsewhere"
        return scores

    monkeypatch.setattr(FakeMetric, "score_batch", elsewhere)
    out = write_outputs(tmp_path / "o.jsonl", [{"id": "a", "source": "s", "summary": summary(0.9)}])
    cfg = GateConfig.from_dict(
        {"metrics": [NAME], "outputs": str(out), "baseline": "base.json"}, root=tmp_path
    )
    with pytest.raises(InputError, match=r"example 'a': its gate_fake score was made with .*-else"):
        Gate(cfg, baseline=BaselinePolicy(update=True), use_cache=False).run()
    assert not (tmp_path / "base.json").exists()
    # Nor is a result saved whose scores were changed after it was made.
    result = gate([0.9])
    result.examples[0].scores[M].settings_hash = "m:other"
    with pytest.raises(InputError, match="this result's m scores with m:abc"):
        result.save(tmp_path / "r.json")
    assert not (tmp_path / "r.json").exists()
    # Nor as a baseline written with the reports, a json report at its path included.
    from faithgate.config import Reports
    from faithgate.report import write_reports

    base = tmp_path / "base.json"
    for reports in (Reports(json=base), Reports(markdown=tmp_path / "r.md")):
        with pytest.raises(InputError, match="this result's m scores with m:abc"):
            write_reports(result, reports, baseline=base)
        assert not base.exists() and not (tmp_path / "r.md").exists()


def test_a_last_result_that_cannot_be_written_is_a_warning(tmp_path, monkeypatch):
    """A full cache directory failed a passing gate with exit 2 (no reports) when
    last-result.json, a convenience beside the cache, could not be written."""
    from faithgate import result as result_module
    from faithgate.errors import WriteError

    write = result_module.atomic_write_text

    def disk_full(path, text):
        if path.name == "last-result.json":
            raise WriteError(path, "No space left on device")
        return write(path, text)

    monkeypatch.setattr(result_module, "atomic_write_text", disk_full)
    out = write_outputs(tmp_path / "o.jsonl", [{"id": "a", "source": "s", "summary": summary(0.9)}])
    cfg = GateConfig.from_dict(
        {"metrics": [NAME], "outputs": str(out), "cache_dir": ".fg", "thresholds": {NAME: 0.5}},
        root=tmp_path,
    )
    stale = tmp_path / ".fg" / "last-result.json"
    stale.parent.mkdir()
    stale.write_text('{"verdict": "pass", "from": "the previous run"}')
    gate = Gate(cfg)
    result = gate.run()
    assert result.passed
    [warning] = [w for w in gate.warnings if "last-result.json" in w]
    assert warning.startswith("cannot write ") and "the verdict and reports of this run stand" in (
        warning
    )
    # The previous run's file would read as this run's result: it is gone, and the warning says so.
    assert not stale.exists() and "the previous run's file there is removed" in warning
    assert "left unchanged" not in warning  # it is not: the old file went


def test_no_cache_scores_afresh_with_a_scorer_that_has_its_own_cache(tmp_path):
    """Gate(use_cache=False) with a scorer carrying its own cache was served from that cache
    on the second run (and reported no cache use)."""
    from faithgate.cache import ScoreCache
    from faithgate.scoring.scorer import Scorer

    out = write_outputs(tmp_path / "o.jsonl", [{"id": "a", "source": "s", "summary": summary(0.9)}])
    cfg = GateConfig.from_dict(
        {"metrics": [NAME], "outputs": str(out), "thresholds": {NAME: 0.5}}, root=tmp_path
    )
    own = ScoreCache(tmp_path / "own.sqlite")
    scorer = Scorer([NAME], cache=own)
    FakeMetric.calls.clear()
    for _ in range(2):
        assert Gate(cfg, scorer=scorer, use_cache=False).run().cache == {}
    assert FakeMetric.calls == ["a", "a"]
    assert (own.hits, own.misses) == (0, 0)
    assert not (tmp_path / ".faithgate").exists()


def test_duplicate_ids_given_to_run_are_refused(tmp_path):
    """load_examples refuses them in a file; a caller's list used to be gated with the last
    example of an id standing in for the others (a failing summary hidden by a good twin)."""
    cfg = GateConfig.from_dict({"metrics": [NAME], "thresholds": {NAME: 0.5}}, root=tmp_path)
    rows = [Example("1", "s", summary(0.1)), Example("1", "s", summary(0.9))]
    with pytest.raises(InputError, match="duplicate example id '1': ids must be unique"):
        Gate(cfg).run(rows)


def test_gate_needs_something_to_gate(tmp_path):
    with pytest.raises(InputError, match="nothing to gate"):
        Gate(GateConfig.from_dict({"metrics": [NAME]}, root=tmp_path)).run()


def test_run_summarizer_and_its_errors(tmp_path):
    (tmp_path / "mysumm.py").write_text(
        "def lead(source):\n    return source.split('.')[0] + '.'\n"
        "def bad(source):\n    return 3\n"
        "def boom(source):\n    raise RuntimeError('no GPU')\n"
        "def bye(source):\n    import sys; sys.exit()\n"
        "def skips(source):\n    import pytest; pytest.importorskip('no_such_module_xyz')\n"
        "NOT_CALLABLE = 1\n"
    )
    (tmp_path / "exits_on_import.py").write_text("import sys\nsys.exit(0)\n")
    (tmp_path / "skips_on_import.py").write_text("import pytest\npytest.skip('later')\n")
    data = write_outputs(
        tmp_path / "sources.jsonl",
        [{"id": "a", "source": "First. Second."}, {"source": "Only one.", "label": 1}],
    )
    exs = run_summarizer("mysumm:lead", data, search_path=[tmp_path])
    assert [(e.id, e.summary) for e in exs] == [("a", "First."), ("2", "Only one.")]
    assert exs[1].label == 1
    with pytest.raises(InputError, match="returned int for record 'a'"):
        run_summarizer("mysumm:bad", data, search_path=[tmp_path])
    with pytest.raises(InputError, match="raised RuntimeError on record 'a': no GPU"):
        run_summarizer("mysumm:boom", data, search_path=[tmp_path])
    # sys.exit() in a summarizer ended the gate with exit 0 and no verdict: a passing build.
    with pytest.raises(InputError, match=r"called sys.exit\(None\) on record 'a'"):
        run_summarizer("mysumm:bye", data, search_path=[tmp_path])
    with pytest.raises(InputError, match=r"importing 'exits_on_import' called sys.exit\(0\)"):
        run_summarizer("exits_on_import:f", data, search_path=[tmp_path])
    # pytest.skip() (a BaseException) skipped the gate item under the plugin: a passing build.
    with pytest.raises(InputError, match="raised Skipped on record 'a': could not import 'no_"):
        run_summarizer("mysumm:skips", data, search_path=[tmp_path])
    with pytest.raises(InputError, match="importing 'skips_on_import' raised Skipped: later"):
        run_summarizer("skips_on_import:f", data, search_path=[tmp_path])
    with pytest.raises(InputError, match="is not callable"):
        run_summarizer("mysumm:NOT_CALLABLE", data, search_path=[tmp_path])
    with pytest.raises(InputError, match="has no 'nope'"):
        run_summarizer("mysumm:nope", data, search_path=[tmp_path])
    with pytest.raises(InputError, match="cannot import 'no_such_module_xyz'"):
        run_summarizer("no_such_module_xyz:f", data)
    with pytest.raises(InputError, match="sources.jsonl:1: missing required field 'source'"):
        run_summarizer(
            "mysumm:lead",
            write_outputs(tmp_path / "sources.jsonl", [{"id": 1}]),
            search_path=[tmp_path],
        )


def test_default_cache_dir_no_cache_and_progress_bar(tmp_path, capsys):
    rows = [
        {"id": f"e{i}", "source": "src", "summary": summary(0.9, words=f"w{i}")} for i in range(40)
    ]
    out = write_outputs(tmp_path / "o.jsonl", rows)
    cfg = GateConfig.from_dict(
        {"metrics": [NAME], "outputs": str(out), "thresholds": {NAME: 0.5}}, root=tmp_path
    )
    assert cfg.cache_path == tmp_path / ".faithgate"
    FakeMetric.calls.clear()
    r = Gate(cfg, progress=True).run()  # scored in chunks behind a tqdm bar
    assert r.passed and r.n_examples == 40 and len(FakeMetric.calls) == 40
    assert "scoring" in capsys.readouterr().err
    assert (tmp_path / ".faithgate" / "scores.sqlite").is_file()
    FakeMetric.calls.clear()
    r = Gate(cfg, use_cache=False).run()
    assert len(FakeMetric.calls) == 40 and r.cache == {}
