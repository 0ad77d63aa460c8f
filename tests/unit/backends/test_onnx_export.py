"""ONNX export of tiny random models of each architecture, parity with torch, the parity gate,
manifests, backend auto-choice and the ``faithgate export`` command.

The models are built here (random weights, tiny configs, tokenizers made from a word list), so
the tests need no downloads and run in seconds.
"""

from __future__ import annotations

import json
import math
import shutil
import stat
import sys
from pathlib import Path

import numpy as np
import pytest

# Every test runs onnxruntime; the tiny models (and the exports made from them) need torch,
# transformers and optimum, asked for by the ``tiny`` fixture: the quantization tests without
# them run in a torch-free install too.
pytest.importorskip("onnxruntime")

from tiny_models import save_tiny_bart, save_tiny_models  # noqa: E402

from faithgate import models  # noqa: E402
from faithgate.backends import ModelPool, choose_backend, onnx_backend, onnx_session  # noqa: E402
from faithgate.backends.export import (  # noqa: E402
    MANIFEST_NAME,
    ExportManifest,
    default_export_dir,
    export_model,
    find_export,
    forget_manifest,
    load_manifest,
    probe_scores,
)
from faithgate.backends.onnx_backend import OnnxBackend  # noqa: E402
from faithgate.backends.quantize.parity import Tolerance  # noqa: E402
from faithgate.backends.torch_backend import TorchBackend  # noqa: E402
from faithgate.errors import BackendError, ConfigError, InputError, ModelFileError  # noqa: E402
from faithgate.safety.atomic import current_umask  # noqa: E402

pytestmark = pytest.mark.xdist_group("onnx")

CORPUS = [
    "The council voted to build a new library in the city park.",
    "Police said two men were arrested after the fire.",
    "Profits fell by ten percent in March, the minister told reporters.",
    "The river flooded three bridges and the old school on Sunday.",
]
TEXTS = [
    "The council voted to build a library.",
    "Two men were arrested by police after a fire in the old house.",
    " ".join(CORPUS * 6),  # longer than the tiny encoder's 64-token window: windowed
]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory, torch, transformers) -> dict[str, Path]:
    """Tiny random models: BERT encoder, BERT NLI classifier, Llama, BART."""
    pytest.importorskip("optimum.exporters.onnx", reason="exports need faithgate[full]")
    torch.manual_seed(0)
    root = tmp_path_factory.mktemp("tiny")
    out, bpe = save_tiny_models(root, CORPUS)
    out["bart"] = save_tiny_bart(root / "bart", bpe)
    return out


@pytest.fixture(scope="module")
def exports(tiny: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """fp32 exports of every tiny model (to --out directories)."""
    root = tmp_path_factory.mktemp("exports")
    plan = {
        "bert": ("embedder", "text-encoder", True),
        "nli": ("nli", "pair-classifier", True),
        "llama": ("lm", "causal-lm", True),
        "llama_nocache": ("lm", "causal-lm", False),
        "bart": ("seq2seq", "seq2seq-lm", True),
    }
    out = {}
    for key, (role, task, cache) in plan.items():
        spec = models.resolve(role, str(tiny[key.split("_")[0]]))
        out[key] = export_model(
            spec, task, out=root / key, quantize="none", use_cache=cache
        ).directory
    return out


@pytest.fixture(autouse=True)
def _built_in_calibration(monkeypatch: pytest.MonkeyPatch) -> None:
    """The export command's parity gate reads ``$FAITHGATE_CALIBRATION`` when no
    ``--calibration`` is given, and .ci/run points it at BUMP task 1: each command here then
    ran 100 long pairs through torch and ONNX (45-120 s a test under ``make test``, 1-2 s
    without). These tiny random models calibrate on the built-in pairs wherever the suite runs,
    as the library calls here do; test_the_export_command_calibrates_on_the_environments_file
    covers the variable."""
    monkeypatch.delenv("FAITHGATE_CALIBRATION", raising=False)


def _pair(tiny: dict[str, Path], exports: dict[str, Path], key: str, role: str, task: str):
    spec = models.resolve(role, str(tiny[key.split("_")[0]]))
    ref = TorchBackend().load(spec, task)
    onnx_spec = models.resolve(role, str(exports[key]))
    assert find_export(onnx_spec, task) is not None
    return ref, OnnxBackend().load(onnx_spec, task)


# --- parity with torch (fp32) -----------------------------------------------------------------


def test_encoder_parity(tiny, exports):
    ref, onx = _pair(tiny, exports, "bert", "embedder", "text-encoder")
    assert onx.max_length == ref.max_length == 64
    assert [onx.count_tokens(t) for t in TEXTS] == [ref.count_tokens(t) for t in TEXTS]
    for layer in (None, 1, -2):
        a = ref.token_embeddings(TEXTS, layer=layer)
        b = onx.token_embeddings(TEXTS, layer=layer)
        for x, y in zip(a, b, strict=True):
            assert x.tokens == y.tokens
            assert x.windowed == y.windowed
            np.testing.assert_allclose(x.vectors, y.vectors, atol=1e-4)
    assert b[2].windowed  # the long text went through the window path
    np.testing.assert_allclose(
        ref.sentence_embeddings(TEXTS), onx.sentence_embeddings(TEXTS), atol=1e-5
    )
    assert onx.identity["backend"] == "onnx" and onx.identity["quantization"] == "none"


def test_classifier_parity(tiny, exports):
    ref, onx = _pair(tiny, exports, "nli", "nli", "pair-classifier")
    assert onx.labels == ["entailment", "neutral", "contradiction"]
    prem = [TEXTS[0], TEXTS[2], TEXTS[1]]  # the long premise is truncated (only_first)
    hyp = ["A library will be built.", "Rain fell.", "Nobody was arrested."]
    p_ref, p_onx = ref.predict_proba(prem, hyp), onx.predict_proba(prem, hyp)
    np.testing.assert_allclose(p_onx.sum(axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(p_ref, p_onx, atol=1e-5)


@pytest.mark.parametrize("key", ["llama", "llama_nocache"])
def test_causal_lm_parity(tiny, exports, key):
    ref, onx = _pair(tiny, exports, key, "lm", "causal-lm")
    assert onx.with_past is (key == "llama")
    a, b = ref.tokenize(CORPUS[0]), ref.tokenize(CORPUS[1])
    assert onx.tokenize(CORPUS[0]) == a and onx.token_texts(a) == ref.token_texts(a)
    batch = [[a, b], [b], [a[:3], [], b[:5]]]
    for x_row, y_row in zip(ref.segment_logprobs(batch), onx.segment_logprobs(batch), strict=True):
        for x, y in zip(x_row, y_row, strict=True):
            np.testing.assert_allclose(x, y, atol=1e-4)  # NaN in the same places
    conts = [[b], [b[:4], a[:2]], [[]]]
    p_ref, c_ref = ref.prefix_logprobs(a, conts)
    p_onx, c_onx = onx.prefix_logprobs(a, conts)
    np.testing.assert_allclose(p_ref, p_onx, atol=1e-4)
    assert math.isnan(p_onx[0]) and len(p_onx) == len(a)
    for x_row, y_row in zip(c_ref, c_onx, strict=True):
        for x, y in zip(x_row, y_row, strict=True):
            np.testing.assert_allclose(x, y, atol=1e-4)
    # Prefix caching equals scoring prefix + continuation in one pass.
    full = onx.segment_logprobs([[a, b]])[0][1]
    np.testing.assert_allclose(c_onx[0][0], full, atol=1e-4)


@pytest.mark.parametrize("key", ["llama", "llama_nocache"])
def test_lm_exports_drop_the_softmax_nan_guards(exports, key):
    """optimum's SDPA export guards each attention softmax with Where(IsNaN(p), 0, p); the
    export masks with finfo.min instead and drops the guards (the parity tests above show the
    scores are unchanged)."""
    onnx = pytest.importorskip("onnx")
    graph = onnx.load(str(exports[key] / "model.onnx")).graph
    ops = [n.op_type for n in graph.node]
    assert "Softmax" in ops and "IsNaN" not in ops
    rewrites = load_manifest(exports[key]).config["graph_rewrites"]
    assert rewrites == {"softmax_nan_guards_dropped": ops.count("Softmax"), "score_from": True}


@pytest.mark.parametrize("key", ["llama", "llama_nocache"])
def test_causal_lm_prefix_run_for_its_cache_skips_the_lm_head(tiny, exports, key, monkeypatch):
    """``score_prefix=False``: the same continuation scores, an empty prefix array, and (with a
    cache) the prefix pass feeds ``score_from`` at its last position, so the LM head and the
    log-softmax see one source position instead of all."""
    _, onx = _pair(tiny, exports, key, "lm", "causal-lm")
    assert onx.takes_score_from
    a, b = onx.tokenize(CORPUS[0]), onx.tokenize(CORPUS[1])
    conts = [[b], [b[:4], a[:2]]]
    want_prefix, want = onx.prefix_logprobs(a, conts)
    runs = []
    original = onx.session.run

    def recording(names, feeds):
        outs = original(names, feeds)
        runs.append((int(feeds["score_from"][0]), feeds["input_ids"].shape, outs[0].shape))
        return outs

    monkeypatch.setattr(onx.session, "run", recording)
    got_prefix, got = onx.prefix_logprobs(a, conts, score_prefix=False)
    assert len(want_prefix) == len(a) and got_prefix.shape == (0,)
    for x_row, y_row in zip(want, got, strict=True):
        for x, y in zip(x_row, y_row, strict=True):
            np.testing.assert_array_equal(x, y)
    if key == "llama":
        start, ids_shape, out_shape = runs[0]
        assert start == ids_shape[1] - 1 == len(a) - 2 and out_shape == (1, 1)
        assert all(r[0] == 0 for r in runs[1:])
    else:  # no cache: whole rows, every position scored
        assert all(r[0] == 0 for r in runs)


def test_causal_lm_cache_kept_on_the_device_scores_as_through_the_host(tiny, exports, monkeypatch):
    """The IO-binding path CUDA takes (the prefix's key/value cache left where the session
    runs, repeated for a batch there by an Expand graph) gives the host path's values to the
    bit. Forced onto the CPU here, where it runs without a GPU; on CUDA only the device
    differs (``cache_device``)."""
    _, onx = _pair(tiny, exports, "llama", "lm", "causal-lm")
    assert onx.cache_device is None  # the CPU: numpy in and out, as before
    a, b = onx.tokenize(CORPUS[0]), onx.tokenize(CORPUS[1])
    # rows of equal length go in one batch (no padding): three rows on one cached prefix
    conts = [[b[:4], a[:2]], [a[:6]], [b[2:5], b[:3]], [b]]
    want_prefix, want = onx.prefix_logprobs(a, conts)
    monkeypatch.setattr(onx, "cache_device", "cpu")
    bound: list[str] = []
    original = onx._run_bound

    def recording(feeds, want_present):
        lp, present = original(feeds, want_present)
        bound.append(type(next(iter(present.values()), None)).__name__)
        return lp, present

    monkeypatch.setattr(onx, "_run_bound", recording)
    got_prefix, got = onx.prefix_logprobs(a, conts)
    assert bound and bound[0] == "OrtValue"  # the prefix's cache came back as device values
    np.testing.assert_array_equal(want_prefix, got_prefix)
    for x_row, y_row in zip(want, got, strict=True):
        for x, y in zip(x_row, y_row, strict=True):
            np.testing.assert_array_equal(x, y)
    assert onx._repeat_session is not None  # the batch of three was repeated by the graph


def test_causal_lm_cache_on_the_device_without_onnx_is_repeated_on_the_host(
    tiny, exports, monkeypatch
):
    """Without the onnx package (a runtime installed by hand) the repeat graph cannot be built:
    the batch's cache is repeated on the host instead, with the same values."""
    _, onx = _pair(tiny, exports, "llama", "lm", "causal-lm")
    a, b = onx.tokenize(CORPUS[0]), onx.tokenize(CORPUS[1])
    conts = [[b[:4], a[:2]], [a[:6]], [b[2:5], b[:3]]]
    want_prefix, want = onx.prefix_logprobs(a, conts)
    monkeypatch.setattr(onx, "cache_device", "cpu")

    def no_onnx(count: int):
        raise ModuleNotFoundError("No module named 'onnx'")

    monkeypatch.setattr(onx, "_repeat_graph", no_onnx)
    got_prefix, got = onx.prefix_logprobs(a, conts)
    np.testing.assert_array_equal(want_prefix, got_prefix)
    for x_row, y_row in zip(want, got, strict=True):
        for x, y in zip(x_row, y_row, strict=True):
            np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("key", ["llama", "llama_nocache"])
def test_causal_lm_probe_shares_each_source_pass(tiny, exports, key, monkeypatch):
    """The parity probe runs each source once for both summaries (prefix cache) and gives the
    mean log-probabilities of scoring each (source, summary) row whole."""
    _, onx = _pair(tiny, exports, key, "lm", "causal-lm")
    triples = [(CORPUS[0], CORPUS[1], CORPUS[2]), (CORPUS[3], TEXTS[0], TEXTS[1])]
    prefixes = []
    original = onx.prefix_logprobs

    def counting(prefix, continuations, score_prefix=True):
        prefixes.append(list(prefix))
        assert not score_prefix  # the probe needs only the summaries
        return original(prefix, continuations, score_prefix=score_prefix)

    monkeypatch.setattr(onx, "prefix_logprobs", counting)
    scores, bounded = probe_scores(onx, triples)["mean_logprob"]
    assert not bounded and scores.shape == (2, 2)
    assert prefixes == [onx.tokenize(t[0]) for t in triples]  # one pass per source
    for i, (source, *summaries) in enumerate(triples):
        rows = [[onx.tokenize(source), onx.tokenize(" " + s)] for s in summaries]
        whole = [float(np.mean(r[1])) for r in onx.segment_logprobs(rows)]
        np.testing.assert_allclose(scores[i], whole, atol=1e-4)


def test_seq2seq_parity(tiny, exports):
    ref, onx = _pair(tiny, exports, "bart", "seq2seq", "seq2seq-lm")
    assert onx.decoder_start_token_id == ref.decoder_start_token_id
    a, b, c = (ref.tokenize(t) for t in CORPUS[:3])
    batch = [(a, b), (c, a[:4]), (b, [])]
    for x, y in zip(ref.seq2seq_logprobs(batch), onx.seq2seq_logprobs(batch), strict=True):
        assert len(x) == len(y)
        np.testing.assert_allclose(x, y, atol=1e-4)


# --- manifest, gate, discovery ------------------------------------------------------------------


def test_manifest_round_trip(exports, tmp_path):
    manifest = load_manifest(exports["bert"])
    assert manifest.task == "text-encoder" and manifest.opset == 18
    assert manifest.quantization == "none"
    assert manifest.source["sha256"] and manifest.source["fingerprint"]
    assert "tokenizer.json" in manifest.tokenizer_files
    assert manifest.parity["onnx_fp32_vs_torch"]["sentsim_cosine"]["max_abs_diff"] < 1e-4
    again = ExportManifest.from_dict(json.loads(json.dumps(manifest.to_dict())), manifest.directory)
    assert again == manifest
    # Broken manifests are one clear InputError.
    bad = tmp_path / "bad"
    bad.mkdir()
    with pytest.raises(InputError, match="not a faithgate ONNX export"):
        load_manifest(bad)
    (bad / MANIFEST_NAME).write_text("{not json")
    with pytest.raises(InputError, match="not valid JSON"):
        load_manifest(bad)
    data = manifest.to_dict()
    data["files"] = {"model": "gone.onnx"}
    (bad / MANIFEST_NAME).write_text(json.dumps(data))
    with pytest.raises(InputError, match="gone.onnx"):
        load_manifest(bad)


def test_int8_kept_or_refused(tiny, tmp_path):
    spec = models.resolve("embedder", str(tiny["bert"]))
    # A zero tolerance refuses any change: fp32 is kept, the manifest says why...
    kept = export_model(spec, out=tmp_path / "a", quantize="int8", tolerance=Tolerance.zero())
    assert kept.quantization == "none"
    assert kept.parity["quantized"] is False and "max |diff|" in kept.parity["refused"]
    assert sorted(p.name for p in kept.directory.glob("*.onnx")) == ["model.onnx"]
    # ... or, when int8 is required, the export is refused and nothing is written.
    with pytest.raises(BackendError, match="refused by the parity gate"):
        export_model(
            spec,
            out=tmp_path / "b",
            quantize="int8",
            tolerance=Tolerance.zero(),
            require_quantized=True,
        )
    assert not (tmp_path / "b").exists()
    # A tolerance nothing fails keeps int8, and the int8 model loads with its quantization.
    loose = Tolerance(max_mean_abs_diff=1.0, min_rank_agreement=0.0, max_consistency_change=1.0)
    q = export_model(spec, out=tmp_path / "c", quantize="int8", tolerance=loose)
    assert q.quantization == "int8-dynamic" and q.files == {"model": "model.int8.onnx"}
    model = OnnxBackend().load(models.resolve("embedder", str(q.directory)), "text-encoder")
    assert model.quantization == "int8-dynamic"
    assert model.sentence_embeddings(TEXTS[:1]).shape == (1, 32)


def test_cache_discovery_and_settings_hash(tiny, tmp_path, monkeypatch):
    from faithgate.metrics.base import ScoringContext

    monkeypatch.setenv("FAITHGATE_HOME", str(tmp_path / "home"))
    spec = models.resolve("embedder", str(tiny["bert"]))
    assert find_export(spec, "text-encoder") is None
    assert choose_backend(spec, "text-encoder") == "torch"
    ctx = ScoringContext(ModelPool({"embedder": str(tiny["bert"])}))
    before = ctx.model_identity("embedder", "text-encoder")
    manifest = export_model(spec, quantize="none")  # into the cache
    # onnx/<name>-<fingerprint>/<task>
    assert manifest.directory == default_export_dir(spec, "text-encoder")
    assert manifest.directory.parent.parent == tmp_path / "home" / "onnx"
    assert manifest.directory.parent.name.startswith(f"{spec.name}-")
    assert find_export(spec, "text-encoder") is not None
    assert choose_backend(spec, "text-encoder") == "onnx"
    assert choose_backend(spec, "text-encoder", "torch") == "torch"
    after = ScoringContext(ModelPool({"embedder": str(tiny["bert"])})).model_identity(
        "embedder", "text-encoder"
    )
    assert before["backend"] == "torch" and after["backend"] == "onnx"
    assert after["quantization"] == "none"
    pool = ModelPool({"embedder": str(tiny["bert"])})
    assert pool.get("embedder", "text-encoder").backend == "onnx"
    # Changed weights: the stale export is ignored, never silently used.
    (tiny["bert"] / "config.json").write_text(
        (tiny["bert"] / "config.json").read_text().replace("}", ', "faithgate_test": 1}', 1)
    )
    try:
        assert find_export(models.resolve("embedder", str(tiny["bert"])), "text-encoder") is None
    finally:
        (tiny["bert"] / "config.json").write_text(
            (tiny["bert"] / "config.json").read_text().replace(', "faithgate_test": 1', "")
        )


def test_onnx_backend_without_export_says_what_to_do(tiny):
    spec = models.resolve("embedder", str(tiny["bert"]))
    with pytest.raises(BackendError, match="faithgate export embedder"):
        OnnxBackend().load(spec, "text-encoder")


def test_cli_export(tiny, tmp_path):
    from click.testing import CliRunner

    from faithgate.cli import cli

    runner = CliRunner()
    out = tmp_path / "cli"
    result = runner.invoke(
        cli,
        ["export", "nli", "--model", str(tiny["nli"]), "--quantize", "none", "--out", str(out)],
    )
    assert result.exit_code == 0, result.output
    assert "quantization none" in result.output
    assert load_manifest(out).task == "pair-classifier"
    bad = runner.invoke(cli, ["export", "qa"])
    assert bad.exit_code == 2


def test_cli_quantize_choices_are_the_library_modes():
    """The CLI lists its --quantize choices literally (importing quantize would load numpy at
    every `faithgate` start); they must be the library's names, the ``fp32`` alias aside."""
    from faithgate.backends.quantize.modes import QUANTIZATIONS
    from faithgate.cli.export import export_command

    option = next(p for p in export_command.params if p.name == "quantize")
    assert sorted(option.type.choices) == sorted(q for q in QUANTIZATIONS if q != "fp32")


# --- the torch-free runtime ---------------------------------------------------------------------

BLOCKER = '''
import importlib.abc, sys

class _Block(importlib.abc.MetaPathFinder):
    """Make torch, transformers and optimum look uninstalled (as in faithgate[runtime])."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"torch", "transformers", "optimum"}:
            raise ModuleNotFoundError(f"No module named {name!r} (blocked by the test)")
        return None

sys.meta_path.insert(0, _Block())
'''

TORCH_FREE_SCRIPT = """
import json, sys
import numpy as np
for name in ("torch", "transformers", "optimum"):
    try:
        __import__(name)
    except ImportError:
        pass
    else:
        raise SystemExit(f"{name} is importable: the blocker failed")
from faithgate import Example, Scorer
from faithgate.backends import ModelPool
paths, texts, pairs = json.loads(sys.argv[1])
pool = ModelPool(paths)  # backend auto: the exports are found from their manifests
enc = pool.get("embedder", "text-encoder")
nli = pool.get("nli", "pair-classifier")
lm = pool.get("lm", "causal-lm")
s2s = pool.get("seq2seq", "seq2seq-lm")
ids = [lm.tokenize(t) for t in texts]
out = {
    "backends": [m.backend for m in (enc, nli, lm, s2s)],
    "emb": enc.sentence_embeddings(texts).tolist(),
    "tok": enc.token_embeddings(texts[:2], layer=1)[1].vectors.tolist(),
    "nli": nli.predict_proba(texts, texts[1::-1] + texts[:1]).tolist(),
    "lm": np.nan_to_num(lm.segment_logprobs([[ids[0], ids[1]]])[0][1]).tolist(),
    "s2s": s2s.seq2seq_logprobs([(ids[0], ids[1])])[0].tolist(),
}
examples = [Example(str(i), s, y) for i, (s, y) in enumerate(pairs)]
scores = Scorer(["loglik", "entail_s2s", "sentsim"], models=paths).score(examples)
out["metrics"] = {k: [row[k].value for row in scores] for k in scores[0]}
out["errors"] = [row[k].error for row in scores for k in row if row[k].error]
out["leaked"] = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "transformers"))
print(json.dumps(out))
"""


def test_torch_free_runtime(tiny, exports, tmp_path):
    """With torch/transformers/optimum unimportable, exported models and the metrics over
    them run and give the torch backend's scores."""
    import os
    import subprocess
    import sys

    from faithgate import Example, Scorer

    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(BLOCKER)
    onnx_paths = {
        "embedder": str(exports["bert"]),
        "nli": str(exports["nli"]),
        "lm": str(exports["llama"]),
        "seq2seq": str(exports["bart"]),
    }
    torch_paths = {
        "embedder": str(tiny["bert"]),
        "nli": str(tiny["nli"]),
        "lm": str(tiny["llama"]),
        "seq2seq": str(tiny["bart"]),
    }
    pairs = [(CORPUS[0] + " " + CORPUS[1], "The council voted to build a library."),
             (CORPUS[2], "Profits rose in June.")]  # fmt: skip
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(blocker), os.environ.get("PYTHONPATH", "")]),
    }
    env["FAITHGATE_HOME"] = str(tmp_path / "home")
    proc = subprocess.run(
        [sys.executable, "-c", TORCH_FREE_SCRIPT, json.dumps([onnx_paths, TEXTS, pairs])],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["backends"] == ["onnx"] * 4
    assert got["leaked"] == [] and got["errors"] == []

    pool = ModelPool(torch_paths, backend="torch")
    enc = pool.get("embedder", "text-encoder")
    lm = pool.get("lm", "causal-lm")
    ids = [lm.tokenize(t) for t in TEXTS]
    np.testing.assert_allclose(got["emb"], enc.sentence_embeddings(TEXTS), atol=1e-5)
    np.testing.assert_allclose(
        got["tok"], enc.token_embeddings(TEXTS[:2], layer=1)[1].vectors, atol=1e-4
    )
    np.testing.assert_allclose(
        got["nli"],
        pool.get("nli", "pair-classifier").predict_proba(TEXTS, TEXTS[1::-1] + TEXTS[:1]),
        atol=1e-5,
    )
    np.testing.assert_allclose(
        got["lm"], np.nan_to_num(lm.segment_logprobs([[ids[0], ids[1]]])[0][1]), atol=1e-4
    )
    np.testing.assert_allclose(
        got["s2s"],
        pool.get("seq2seq", "seq2seq-lm").seq2seq_logprobs([(ids[0], ids[1])])[0],
        atol=1e-4,
    )
    examples = [Example(str(i), s, y) for i, (s, y) in enumerate(pairs)]
    ref = Scorer(["loglik", "entail_s2s", "sentsim"], models=torch_paths, backend="torch").score(
        examples
    )
    for name, values in got["metrics"].items():
        np.testing.assert_allclose(values, [row[name].value for row in ref], atol=1e-3)


# --- quantized forms (issue 13) -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "role", "mode", "kept"),
    [
        # On the tiny random models (12 built-in calibration pairs, default tolerance):
        # the encoder keeps every mode; the LM keeps w8 and fp16 but 4-bit weights flip a
        # quarter of its pair rankings - as w4 does on SmolLM2 and BUMP (issue 13).
        ("bert", "embedder", "w8", True),
        ("bert", "embedder", "w4", True),
        ("bert", "embedder", "fp16", True),
        ("llama", "lm", "w8", True),
        ("llama", "lm", "w4", False),
        ("llama", "lm", "fp16", True),
        ("bert", "embedder", "w8a8", True),
        ("llama", "lm", "w8a8", True),
        ("llama", "lm", "w8a32-ctx8", True),
    ],
)
def test_quantized_modes_pass_or_are_refused(tiny, tmp_path, key, role, mode, kept):
    spec = models.resolve(role, str(tiny[key]))
    manifest = export_model(spec, out=tmp_path / "q", quantize=mode)
    report = manifest.parity[f"{mode}_vs_torch"]
    assert manifest.parity["tried"] == [mode]
    assert manifest.parity["quantized"] is kept
    assert all(r["passed"] for r in report.values()) is kept
    sizes = manifest.parity["file_bytes"]
    assert sizes[mode] < sizes["none"]  # recorded, and smaller
    if kept:
        assert manifest.quantization == mode
        assert manifest.files == {"model": f"model.{mode}.onnx"}
        assert "recipes" in manifest.parity and mode in manifest.parity["recipes"]
        loaded = OnnxBackend().load(models.resolve(role, str(manifest.directory)), manifest.task)
        assert loaded.quantization == mode
    else:
        assert manifest.quantization == "none" and "pair ranking" in manifest.parity["refused"]
        assert sorted(p.name for p in manifest.directory.glob("*.onnx")) == ["model.onnx"]


def test_w8_lm_keeps_down_projections_fp32(tiny, tmp_path):
    """w8 quantizes every MatMul of the LM with int8 activations (accuracy_level 4) in blocks of
    64, except the MLP down projections, whose input activations carry outliers: they stay
    fp32 MatMuls (quantize.FP32_MATMULS), counted in the manifest's recipe."""
    onnx = pytest.importorskip("onnx")
    manifest = export_model(
        models.resolve("lm", str(tiny["llama"])), out=tmp_path / "q", quantize="w8"
    )
    assert manifest.quantization == "w8"
    graph = onnx.load(str(manifest.directory / manifest.files["model"])).graph
    quantized = {n.name: n for n in graph.node if n.op_type == "MatMulNBits"}
    plain = [n.name for n in graph.node if n.op_type == "MatMul"]
    assert quantized and not any("/mlp/down_proj/" in name for name in quantized)
    assert sum("/mlp/down_proj/" in name for name in plain) == 2  # one per tiny Llama layer
    for node in quantized.values():
        attrs = {a.name: a.i for a in node.attribute}
        assert attrs["accuracy_level"] == 4 and attrs["block_size"] == 64
    recipe = manifest.parity["recipes"]["w8"]["model"]
    assert recipe["matmuls_kept_fp32"] == 2 and recipe["block_size"] == 64


@pytest.mark.parametrize(("key", "role", "block"), [("llama", "lm", 32), ("nli", "nli", 16)])
def test_w8a32_block_size_by_task(tiny, tmp_path, key, role, block):
    """w8a32: blocks of 32 for causal LMs (SmolLM2 holds as well as with 16, smaller file),
    16 elsewhere (the shipped checker's close pairs)."""
    manifest = export_model(
        models.resolve(role, str(tiny[key])), out=tmp_path / key, quantize="w8a32"
    )
    assert manifest.quantization == "w8a32"
    recipe = manifest.parity["recipes"]["w8a32"]["model"]
    assert recipe["block_size"] == block and recipe["accuracy_level"] == 0


def test_w8a8_lm_smooths_and_quantizes_every_linear_layer(tiny, tmp_path):
    """w8a8 replaces every constant-weight MatMul of the LM (the down projections too) by
    MatMulInteger on per-token uint8 activations, smoothed with scales measured on the
    built-in sentences (not the parity sample); the tied head stays a float MatMul."""
    onnx = pytest.importorskip("onnx")
    from faithgate.backends.quantize.parity import BUILTIN_CALIBRATION

    manifest = export_model(
        models.resolve("lm", str(tiny["llama"])), out=tmp_path / "q", quantize="w8a8"
    )
    graph = onnx.load(str(manifest.directory / manifest.files["model"])).graph
    integer = [n.output[0] for n in graph.node if n.op_type == "MatMulInteger"]
    # Only the attention products (activations x activations) stay float MatMuls.
    assert not [n for n in graph.node if n.op_type == "MatMul" and "_proj/" in n.name]
    for layer in (0, 1):
        for proj in ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"):
            assert sum(f"layers.{layer}_" in o and f"_{proj}_" in o for o in integer) == 1
    recipe = manifest.parity["recipes"]["w8a8"]["model"]
    head = sum("lm_head" in o for o in integer)  # the tiny model's head is untied: a constant
    assert recipe["matmuls_quantized"] == len(integer) == 2 * 7 + head
    assert recipe["inputs_smoothed"] == 2 * 4 + head  # q/k/v share one input, gate/up another
    assert recipe["calibration_inputs"] == 3 * len(BUILTIN_CALIBRATION)


def test_w8a8_matmul_matches_fp32_within_int8_rounding(tmp_path):
    """One MatMul with an outlier input channel and an outlier token: the smoothed per-token
    int8 product stays within 2% of fp32 on every token (row max), where one int8 scale for
    the whole tensor (dynamic int8) is off by 8-65% on the ordinary tokens."""
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper

    from faithgate.backends import onnx_backend
    from faithgate.backends.quantize.smoothquant import quantize_w8a8

    rng = np.random.default_rng(0)
    w = rng.normal(size=(16, 8)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="/layer/proj/MatMul")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 8])],
        [numpy_helper.from_array(w, "w")],
    )
    src, dst = tmp_path / "m.onnx", tmp_path / "m.w8a8.onnx"
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)
    onnx.save(model, str(src))
    x = rng.normal(size=(5, 16)).astype(np.float32)
    x[:, 3] *= 40.0  # an outlier channel
    x[0] *= 25.0  # an outlier token
    recipe = quantize_w8a8(src, dst, [{"x": x}])
    assert recipe["matmuls_quantized"] == 1 and recipe["inputs_smoothed"] == 1
    # Loaded as the backend loads w8a8 files: int8 weights in this CPU's exact form.
    (y,) = onnx_backend.get_session(dst, graph="int8").run(None, {"x": x})
    ref = x @ w
    rel = np.abs(y - ref).max(axis=1) / np.abs(ref).max(axis=1)
    assert rel.max() < 0.02
    # The same product with one activation scale for the whole tensor, for contrast.
    w_scale = np.abs(w).max(axis=0) / 127
    x_scale = np.abs(x).max() / 127
    per_tensor = (np.round(x / x_scale) @ np.round(w / w_scale)) * x_scale * w_scale
    assert (np.abs(per_tensor - ref).max(axis=1) / np.abs(ref).max(axis=1))[1:].min() > 0.05


def _matmul_integer_file(tmp_path, w, w_zero=None):
    """A one-node ``MatMulInteger`` graph on disk: uint8 activations (zero point 128) times the
    constant int8 weight ``w`` (zero point ``w_zero`` when given), as w8a8 files multiply."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.uint8(128), "a0")]
    inputs = ["a", "w", "a0"]
    if w_zero is not None:
        inits.append(numpy_helper.from_array(w_zero, "w0"))
        inputs.append("w0")
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", inputs, ["y"], name="/proj/MatMulInteger")],
        "g",
        [helper.make_tensor_value_info("a", TensorProto.UINT8, [None, w.shape[0]])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, [None, w.shape[1]])],
        inits,
    )
    path = tmp_path / "mmi.onnx"
    onnx.save(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9), path
    )
    return path


@pytest.mark.parametrize("with_zero_point", [False, True])
def test_int8_weights_load_in_the_form_whose_products_are_exact(tmp_path, with_zero_point):
    """uint8 x int8 products saturate in onnxruntime's 16-bit kernel on x86 CPUs without VNNI
    (255 x 127, twice, overflows): the backend loads int8 weights in the form this CPU
    multiplies exactly (``int8_weights_form``), so a w8a8 graph gives the exact integers, and
    the same scores, everywhere. The uint8 rewrite itself is exact on every CPU."""
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from faithgate.backends import expand, onnx_backend

    rng = np.random.default_rng(0)
    w = rng.integers(-128, 128, size=(64, 16)).astype(np.int8)
    w[:, 0] = 127  # every pair of products saturates on the 16-bit kernel
    w_zero = rng.integers(-3, 4, size=16).astype(np.int8) if with_zero_point else None
    path = _matmul_integer_file(tmp_path, w, w_zero)
    a = rng.integers(0, 256, size=(9, 64)).astype(np.uint8)
    a[0] = 255
    exact = (a.astype(np.int64) - 128) @ (w.astype(np.int64) - (0 if w_zero is None else w_zero))
    (y,) = onnx_backend.get_session(path, graph="int8").run(None, {"a": a})
    np.testing.assert_array_equal(y, exact)
    # The rewrite by itself: uint8 weights and zero points, the same integers on any CPU.
    model = onnx.load(str(path))
    assert expand.unsigned_int8_weights(model) == 1
    node = model.graph.node[0]
    types = {t.name: t.data_type for t in model.graph.initializer}
    assert len(node.input) == 4 and types[node.input[1]] == types[node.input[3]] == 2  # UINT8
    assert "w" not in types  # the int8 weight is not kept beside its uint8 form
    (y_u8,) = ort.InferenceSession(model.SerializeToString()).run(None, {"a": a})
    np.testing.assert_array_equal(y_u8, exact)
    assert expand.unsigned_int8_weights(model) == 0  # nothing int8 is left


def test_int8_weights_form_is_probed_once_and_used_by_the_loader(tmp_path, monkeypatch):
    """Where the probe finds uint8 x int8 inexact, the loader reads the rewritten graph; where
    neither form is exact, loading an int8 graph is a one-line ``BackendError`` (never a
    silently wrong score), and fp32 graphs load as before."""
    pytest.importorskip("onnx")
    from faithgate.backends import onnx_backend, onnx_session

    assert onnx_backend.int8_weights_form() in ("int8", "uint8")
    w = np.full((8, 2), 127, np.int8)
    path = _matmul_integer_file(tmp_path, w)
    a = np.full((1, 8), 255, np.uint8)
    monkeypatch.setattr(onnx_session, "_INT8_WEIGHTS", ["uint8"])
    session = onnx_backend.get_session(path, threads=1, graph="int8")
    assert [i.name for i in session.get_inputs()] == ["a"]
    np.testing.assert_array_equal(session.run(None, {"a": a})[0], np.full((1, 2), 8 * 127 * 127))
    onnx_backend.drop_sessions(tmp_path)
    monkeypatch.setattr(onnx_session, "_INT8_WEIGHTS", [""])
    with pytest.raises(BackendError, match="int8 products are not exact on this CPU") as err:
        onnx_backend.get_session(path, threads=1, graph="int8")
    assert "\n" not in str(err.value)
    assert onnx_backend.get_session(path, threads=1, graph="stored") is not None


def test_int8_context_matmul_matches_fp32_within_int8_rounding():
    """The context graph's rewrite of one smoothed MatMul (an ``fg_ctx8_smooth`` Mul in front,
    as ``w8a32-ctx8`` exports carry): MatMulInteger on per-token uint8 activations, within 2%
    of fp32 on every token; a MatMul without the smoothing Mul is left alone."""
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper

    from faithgate.backends import expand, onnx_backend
    from faithgate.backends.expand import int8_context_graph

    rng = np.random.default_rng(0)
    w, w2 = rng.normal(size=(16, 8)).astype(np.float32), rng.normal(size=(16, 4))
    inv_s = np.ones(16, np.float32)
    inv_s[3] = 1.0 / 40.0  # the outlier channel, smoothed as SmoothQuant would
    graph = helper.make_graph(
        [
            helper.make_node("Mul", ["x", "inv_s"], ["xs"], name="fg_ctx8_smooth0"),
            helper.make_node("MatMul", ["xs", "w"], ["y"], name="/proj/MatMul"),
            helper.make_node("MatMul", ["x", "w2"], ["z"], name="/other/MatMul"),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 16])],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 8]),
            helper.make_tensor_value_info("z", TensorProto.FLOAT, [None, 4]),
        ],
        [
            numpy_helper.from_array(w, "w"),
            numpy_helper.from_array(w2.astype(np.float32), "w2"),
            numpy_helper.from_array(inv_s, "inv_s"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)
    assert int8_context_graph(model) == 1
    onnx.checker.check_model(model)
    ops = [n.op_type for n in model.graph.node]
    assert ops.count("MatMulInteger") == 1 and ops.count("MatMul") == 1  # /other/ untouched
    x = rng.normal(size=(5, 16)).astype(np.float32)
    x[:, 3] *= 40.0
    x[0] *= 25.0
    if onnx_backend.int8_weights_form() == "uint8":  # as context_model_bytes loads it here
        assert expand.unsigned_int8_weights(model) == 1
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    y, z = session.run(None, {"x": x})
    ref = (x * inv_s) @ w
    assert (np.abs(y - ref).max(axis=1) / np.abs(ref).max(axis=1)).max() < 0.02
    assert not np.allclose(y, ref, rtol=0, atol=1e-6)  # int8 arithmetic did run
    np.testing.assert_allclose(z, x @ w2, rtol=1e-5, atol=1e-4)
    plain = helper.make_model(
        helper.make_graph([graph.node[2]], "p", [], [], [graph.initializer[1]]),
        opset_imports=[helper.make_opsetid("", 18)],
    )
    assert int8_context_graph(plain) == 0


def test_w8a32_ctx8_fills_the_cache_in_int8_and_scores_in_fp32(tiny, tmp_path, monkeypatch):
    """w8a32-ctx8 (causal LMs): one w8a32 file whose MatMuls read SmoothQuant-smoothed inputs;
    loaded, an exact (expanded fp32) graph and an int8 context graph. A prefix run only for
    its cache goes to the context graph; a scored prefix and every continuation to the exact
    one. Scores stay close to the w8a32 form's; other tasks refuse the mode."""
    onnx = pytest.importorskip("onnx")
    from faithgate.backends import expand, onnx_session
    from faithgate.backends.quantize.parity import BUILTIN_CALIBRATION

    manifest = export_model(
        models.resolve("lm", str(tiny["llama"])), out=tmp_path / "ctx", quantize="w8a32-ctx8"
    )
    assert manifest.quantization == "w8a32-ctx8"
    recipe = manifest.parity["recipes"]["w8a32-ctx8"]["model"]
    assert recipe["accuracy_level"] == 0 and recipe["block_size"] == 32
    assert recipe["context"]["calibration_inputs"] == 3 * len(BUILTIN_CALIBRATION)
    path = manifest.path_of("model")
    stored = onnx.load(str(path)).graph
    smooth = [n for n in stored.node if n.name.startswith(expand.CONTEXT_SMOOTHING_PREFIX)]
    # q/k/v share one input, gate/up another, o and down one each; plus the tiny untied head.
    assert len(smooth) == recipe["context"]["inputs_smoothed"] == 2 * 4 + 1
    assert not [n for n in stored.node if n.op_type == "MatMulInteger"]

    lm = OnnxBackend().load(models.resolve("lm", str(manifest.directory)), "causal-lm")
    assert lm.context_session is not None and lm.context_session is not lm.session
    context_graph = onnx.load_from_string(expand.context_model_bytes(path)).graph
    ops = {n.op_type for n in context_graph.node}
    assert "MatMulInteger" in ops and "MatMulNBits" not in ops
    calls = []
    for name in ("session", "context_session"):
        original = getattr(lm, name).run
        monkeypatch.setattr(
            getattr(lm, name),
            "run",
            lambda names, feeds, _o=original, _n=name: calls.append(_n) or _o(names, feeds),
        )
    a, b = lm.tokenize(CORPUS[0]), lm.tokenize(CORPUS[1])
    _, fast = lm.prefix_logprobs(a, [[b], [a[:3]]], score_prefix=False)
    assert calls[0] == "context_session" and set(calls[1:]) == {"session"}
    calls.clear()
    scored_prefix, exact = lm.prefix_logprobs(a, [[b], [a[:3]]])
    assert set(calls) == {"session"} and len(scored_prefix) == len(a)
    # The int8 cache moves the continuation's log-probabilities a little, not much.
    for x, y in zip(fast, exact, strict=True):
        diff = np.abs(x[0] - y[0])
        assert diff.max() < 0.1 and diff.max() > 0

    with pytest.raises(InputError, match="causal LM"):  # refused before any work
        export_model(
            models.resolve("nli", str(tiny["nli"])), out=tmp_path / "n", quantize="w8a32-ctx8"
        )
    assert not (tmp_path / "n").exists()

    # The 2 GB protobuf limit is checked on each form's own size: the context graph stays about
    # the stored size, the expanded one grows by 3 bytes a weight.
    weights = sum(
        int(np.prod(t.dims)) for t in stored.initializer if t.data_type == onnx.TensorProto.UINT8
    )
    monkeypatch.setattr(expand, "MAX_REWRITTEN_BYTES", path.stat().st_size + 2 * weights)
    assert expand.expanded_model_bytes(path) is None
    assert expand.context_model_bytes(path) is not None

    # Without the onnx package the file loads as stored and every pass runs exactly.
    monkeypatch.setitem(sys.modules, "onnx", None)
    assert expand.context_model_bytes(path) is None
    monkeypatch.setattr(onnx_session, "_SESSIONS", {})
    plain = OnnxBackend().load(models.resolve("lm", str(manifest.directory)), "causal-lm")
    assert plain.context_session is None


def test_auto_keeps_the_smallest_form_that_passes(tiny, tmp_path):
    # Encoder: w4 is tried first and passes.
    enc = export_model(models.resolve("embedder", str(tiny["bert"])), out=tmp_path / "e")
    assert enc.quantization == "w4" and enc.parity["tried"] == ["w4"]
    # LM: 4-bit is not tried (it cannot pass on likelihoods); w8a8, the LM's first choice on
    # CPU (smaller and faster than w8 there), passes.
    lm = export_model(models.resolve("lm", str(tiny["llama"])), out=tmp_path / "l")
    assert lm.quantization == "w8a8" and lm.parity["tried"] == ["w8a8"]
    # Nothing passes a zero tolerance: fp32 is written and the manifest says why, per mode.
    none = export_model(
        models.resolve("embedder", str(tiny["bert"])),
        out=tmp_path / "z",
        tolerance=Tolerance.zero(),
    )
    assert none.quantization == "none" and none.parity["quantized"] is False
    assert none.parity["refused"].startswith("w4: ") and " | w8: " in none.parity["refused"]
    # A causal LM's order on CPU: w8a8, then w8a32 (its w8 keeps the down projections fp32, so
    # w8a32's file is the smaller), then w8; w8a32-ctx8 is asked for by name only.
    lm_none = export_model(
        models.resolve("lm", str(tiny["llama"])), out=tmp_path / "lz", tolerance=Tolerance.zero()
    )
    assert lm_none.parity["tried"] == ["w8a8", "w8a32", "w8"]


def test_refused_export_keeps_the_previous_good_one(tiny, tmp_path):
    spec = models.resolve("embedder", str(tiny["bert"]))
    out = tmp_path / "good"
    good = export_model(spec, out=out, quantize="w8")
    assert good.quantization == "w8"
    before = (out / "model.w8.onnx").read_bytes()
    # A re-export that fails the gate neither replaces the w8 export with fp32 ...
    again = export_model(spec, out=out, quantize="w4", tolerance=Tolerance.zero())
    assert again.quantization == "w8" and load_manifest(out).quantization == "w8"
    # ... and what this run refused is said beside the kept manifest, not written into it
    assert again.parity["this_run"]["asked"] == "w4"
    assert again.parity["this_run"]["refused"].startswith("w4: ")
    assert "this_run" not in load_manifest(out).parity
    assert (out / "model.w8.onnx").read_bytes() == before
    assert not (out / "model.onnx").exists()
    # ... nor, with --strict, touches it at all.
    with pytest.raises(BackendError, match="refused by the parity gate"):
        export_model(spec, out=out, quantize="w4", tolerance=Tolerance.zero(),
                     require_quantized=True)  # fmt: skip
    assert load_manifest(out) == good
    # An fp32 export in place is replaced, as before: it was no quantized form to protect.
    fp32_out = tmp_path / "fp32"
    export_model(spec, out=fp32_out, quantize="none")
    export_model(spec, out=fp32_out, quantize="w4", tolerance=Tolerance.zero())
    assert load_manifest(fp32_out).parity["refused"].startswith("w4: ")


def test_a_re_export_in_the_same_process_scores_the_new_model(tiny, tmp_path, torch, transformers):
    # A second BERT: the same tokenizer, other weights.
    other = tmp_path / "bert2"
    shutil.copytree(tiny["bert"], other)
    torch.manual_seed(123)
    config = transformers.BertConfig.from_pretrained(other)
    transformers.BertModel(config).save_pretrained(other)
    out = tmp_path / "same"

    def embed(model_dir: Path) -> np.ndarray:
        export_model(models.resolve("embedder", str(model_dir)), out=out, quantize="none")
        onx = OnnxBackend().load(models.resolve("embedder", str(out)), "text-encoder")
        return np.asarray(onx.sentence_embeddings(TEXTS[:2]))

    first, second = embed(tiny["bert"]), embed(other)
    # The same file names hold the other model's graph: its session, not the first one's.
    ref = TorchBackend().load(models.resolve("embedder", str(other)), "text-encoder")
    np.testing.assert_allclose(second, ref.sentence_embeddings(TEXTS[:2]), atol=1e-4)
    assert not np.allclose(first, second, atol=1e-3)


def test_a_file_replaced_under_its_name_gets_a_new_session(exports, tmp_path):
    path = tmp_path / "model.onnx"
    shutil.copyfile(exports["bert"] / "model.onnx", path)
    encoder = onnx_backend.get_session(path)
    assert onnx_backend.get_session(path) is encoder  # cached while it is the same file
    replacement = tmp_path / "new.onnx"
    shutil.copyfile(exports["nli"] / "model.onnx", replacement)
    replacement.replace(path)
    classifier = onnx_backend.get_session(path)
    assert classifier is not encoder
    assert [o.name for o in classifier.get_outputs()] != [o.name for o in encoder.get_outputs()]
    # The replaced file's session is dropped, not kept beside the new one.
    assert len([k for k in onnx_session._SESSIONS if k[0] == str(path)]) == 1
    assert encoder not in onnx_session._SESSIONS.values()
    onnx_backend.drop_sessions(tmp_path)
    assert not [k for k in onnx_session._SESSIONS if k[0].startswith(str(tmp_path))]


def test_export_releases_the_sessions_of_its_parity_runs(tiny, tmp_path):
    # The cache holds the only reference to a session: every candidate's (the fp32 one, each
    # quantized one) would stay in memory until exit, pointing at a deleted directory.
    out = tmp_path / "o"
    manifest = export_model(models.resolve("embedder", str(tiny["bert"])), out=out, quantize="w8")
    assert manifest.quantization == "w8"
    assert not [k[0] for k in onnx_session._SESSIONS if k[0].startswith(str(tmp_path))]
    # Published with a new directory's usual mode, not mkdtemp's 0700.
    assert stat.S_IMODE(out.stat().st_mode) == 0o777 & ~current_umask()


def _external_data_everywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every graph written with its tensors in ``<name>_data``, as past protobuf's 2 GB."""
    import onnx

    from faithgate.backends import export as export_module
    from faithgate.backends.quantize import forms, smoothquant

    def save(model, dst: Path) -> None:
        onnx.save(model, str(dst), save_as_external_data=True, location=dst.name + "_data")

    for writer in (forms, smoothquant, export_module):
        monkeypatch.setattr(writer, "save_onnx", save)


def test_external_data_files_are_counted_and_never_orphaned(tiny, tmp_path, monkeypatch):
    _external_data_everywhere(monkeypatch)
    spec = models.resolve("lm", str(tiny["llama"]))
    kept = export_model(spec, out=tmp_path / "kept", quantize="w8")
    names = sorted(p.name for p in kept.directory.iterdir() if "onnx" in p.name)
    assert kept.quantization == "w8"
    assert [n for n in names if n != "faithgate_onnx.json"] == [
        "model.w8.onnx",
        "model.w8.onnx_data",
    ]  # the fp32 graph's tensors went with it
    sizes = kept.parity["file_bytes"]
    d = kept.directory
    assert sizes["w8"] == sum(
        (d / n).stat().st_size for n in ("model.w8.onnx", "model.w8.onnx_data")
    )
    assert sizes["none"] > (d / "model.w8.onnx_data").stat().st_size
    refused = export_model(
        spec, out=tmp_path / "refused", quantize="w8", tolerance=Tolerance.zero()
    )
    assert refused.quantization == "none"
    names = sorted(p.name for p in refused.directory.iterdir() if p.name.startswith("model"))
    assert names == ["model.onnx", "model.onnx_data"]  # no refused form's tensors
    d = refused.directory
    assert refused.parity["file_bytes"]["none"] == sum(
        (d / n).stat().st_size for n in ("model.onnx", "model.onnx_data")
    )


def test_auto_refuses_a_form_that_cannot_be_made_and_tries_the_next(tiny, tmp_path, monkeypatch):
    from faithgate.backends import export as export_module

    real = export_module.quantize_file

    def quantize_file(mode, src, dst, *args, **kwargs):
        if mode == "w4":
            dst.write_bytes(b"half a graph")  # what a failed quantizer may leave
            raise InputError("w4 needs onnx-ir: pip install onnx-ir")
        return real(mode, src, dst, *args, **kwargs)

    monkeypatch.setattr(export_module, "quantize_file", quantize_file)
    spec = models.resolve("embedder", str(tiny["bert"]))
    manifest = export_model(spec, out=tmp_path / "auto")
    assert manifest.quantization == "w8" and manifest.parity["tried"] == ["w4", "w8"]
    assert (
        manifest.parity["refused"] == "w4: could not be made: w4 needs onnx-ir: pip install onnx-ir"
    )
    assert not list(manifest.directory.glob("model.w4.*"))
    # A mode asked for by name fails as before, and writes nothing.
    with pytest.raises(InputError, match="onnx-ir"):
        export_model(spec, out=tmp_path / "w4", quantize="w4")
    assert not (tmp_path / "w4").exists()
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith("w4.")]


def test_an_fp32_graph_that_disagrees_with_torch_is_refused(tiny, tmp_path, monkeypatch):
    """Every quantized form is measured against torch through the fp32 graph: one that
    disagrees (here its runtime config pools by cls where the model pools by mean, standing in
    for any mis-export) had them all refused, was then published as fp32 and picked by backend
    auto. It is refused, and the earlier export in the directory stays as it was."""
    from faithgate.backends import export as export_module

    spec = models.resolve("embedder", str(tiny["bert"]))
    out = tmp_path / "out"
    good = export_model(spec, out=out, quantize="none")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    real = export_module._export_fp32

    def cls_pooled(*args, **kwargs):
        files, config = real(*args, **kwargs)
        config["pooling"] = "cls"
        return files, config

    monkeypatch.setattr(export_module, "_export_fp32", cls_pooled)
    with pytest.raises(BackendError) as err:
        export_model(spec, out=out)
    message = str(err.value)
    assert "the fp32 ONNX graph disagrees with torch (sentsim_cosine: " in message
    assert "\n" not in message
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert load_manifest(out) == good
    # The command: one line, exit 1 (a BackendError), also for an fp32 export.
    res = _export_cli("embedder", "--model", str(tiny["bert"]), "--quantize", "none",
                      "--out", str(out))  # fmt: skip
    error = [line for line in res.output.splitlines() if line.startswith("faithgate: ")]
    assert res.exit_code == 1 and len(error) == 1, res.output
    assert "disagrees with torch" in error[0] and "internal error" not in res.output
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


@pytest.mark.parametrize("bits", [8, 4])
def test_quantized_gather_matches_its_dequantized_table(tmp_path, bits, monkeypatch):
    """GatherBlockQuantized rows equal the table rounded to ``bits`` per 32-value block."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    from faithgate.backends.quantize import forms as q

    rng = np.random.default_rng(0)
    table = rng.normal(size=(300, 64)).astype(np.float32)
    table[5, :32] = 0.0  # an all-zero block must not divide by zero
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "ids"], ["out"], axis=0)],
        "g",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, ["n"])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["n", 64])],
        [numpy_helper.from_array(table, "table")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 10  # what onnxruntime 1.31 reads (the onnx package writes newer)
    monkeypatch.setattr(q, "MIN_GATHER_ELEMENTS", 0)
    assert q.quantize_gathers(model, bits) == 1
    path = tmp_path / "g.onnx"
    onnx.save(model, str(path))
    ids = np.array([0, 5, 299, 5], np.int64)
    got = ort.InferenceSession(str(path)).run(None, {"ids": ids})[0]
    qmax = (1 << (bits - 1)) - 1
    blocks = table[ids].reshape(len(ids), 2, 32)
    scale = np.abs(blocks).max(axis=2, keepdims=True) / qmax
    scale[scale == 0] = 1.0
    want = (np.clip(np.rint(blocks / scale), -qmax, qmax) * scale).reshape(len(ids), 64)
    np.testing.assert_allclose(got, want, atol=1e-6)
    assert np.abs(got - table[ids]).max() <= np.abs(table).max() / qmax / 2 + 1e-6
    # Expanded at load (w8a32 exports): a plain Gather over the same dequantized rows.
    from faithgate.backends.expand import expand_weight_blocks

    assert expand_weight_blocks(model) == (1 if bits == 8 else 0)  # 4-bit tables stay packed
    if bits == 8:
        assert [n.op_type for n in model.graph.node] == ["Gather"]
        expanded = ort.InferenceSession(model.SerializeToString()).run(None, {"ids": ids})[0]
        np.testing.assert_allclose(expanded, got, atol=1e-6)
    # A table read by two nodes (tied weights) is left alone.
    tied = helper.make_model(
        helper.make_graph(
            [
                helper.make_node("Gather", ["t", "ids"], ["o"], axis=0),
                helper.make_node("Transpose", ["t"], ["tt"]),
            ],  # fmt: skip
            "tied",
            [helper.make_tensor_value_info("ids", TensorProto.INT64, ["n"])],
            [
                helper.make_tensor_value_info("o", TensorProto.FLOAT, ["n", 64]),
                helper.make_tensor_value_info("tt", TensorProto.FLOAT, [64, 300]),
            ],  # fmt: skip
            [numpy_helper.from_array(table, "t")],
        ),
        opset_imports=[helper.make_opsetid("", 18)],
    )
    assert q.quantize_gathers(tied, bits) == 0


def test_cli_w8_nli_export_quantizes_the_embeddings(tiny, tmp_path, monkeypatch):
    """The command that ships the nli model: w8 MatMuls and embedding tables."""
    import onnx
    from click.testing import CliRunner

    from faithgate.backends.quantize import forms as q
    from faithgate.cli import cli

    monkeypatch.setattr(q, "MIN_GATHER_ELEMENTS", 1024)  # the tiny tables are small
    out = tmp_path / "nli-w8"
    result = CliRunner().invoke(
        cli,
        [
            "export",
            "nli",
            "--model",
            str(tiny["nli"]),
            "--quantize",
            "w8",
            "--out",
            str(out),
            "--min-agreement",
            "0",
            "--max-consistency-change",
            "1",
        ],  # fmt: skip
    )
    assert result.exit_code == 0, result.output
    assert "quantization w8" in result.output and "file size: none" in result.output
    manifest = load_manifest(out)
    assert manifest.quantization == "w8" and manifest.files == {"model": "model.w8.onnx"}
    ops = {n.op_type for n in onnx.load(str(out / "model.w8.onnx")).graph.node}
    assert {"MatMulNBits", "GatherBlockQuantized"} <= ops
    recipe = manifest.parity["recipes"]["w8"]["model"]
    assert (
        recipe["bits"] == 8
        and recipe["block_size"] == 32
        and recipe["gather_block_size"] == 32
        and recipe["gathers_quantized"] >= 1
    )
    # The w8 model scores like torch within the gate's bounded tolerance.
    ref = TorchBackend().load(models.resolve("nli", str(tiny["nli"])), "pair-classifier")
    onx = OnnxBackend().load(models.resolve("nli", str(out)), "pair-classifier")
    prem, hyp = [TEXTS[0], TEXTS[1]], ["A library will be built.", "Nobody was arrested."]
    np.testing.assert_allclose(onx.predict_proba(prem, hyp), ref.predict_proba(prem, hyp),
                               atol=0.01)  # fmt: skip


def test_w8a32_loads_expanded_to_fp32_with_the_same_values(tiny, tmp_path, monkeypatch):
    """A w8a32 export (8-bit blocks, fp32 arithmetic) is loaded with its blocks dequantized
    once: no MatMulNBits left, the file untouched, the same outputs as the stored graph;
    without the onnx package the file is loaded as it is."""
    import onnx

    from faithgate.backends import expand, onnx_backend

    manifest = export_model(
        models.resolve("nli", str(tiny["nli"])), out=tmp_path / "nli", quantize="w8a32"
    )
    assert manifest.quantization == "w8a32"
    path = manifest.path_of("model")
    before = path.read_bytes()
    stored = onnx.load(str(path))
    n_blocks = sum(n.op_type in ("MatMulNBits", "GatherBlockQuantized") for n in stored.graph.node)
    assert n_blocks >= 6  # every projection (the tiny tables are below the Gather threshold)
    assert expand.expand_weight_blocks(stored) == n_blocks
    assert not {"MatMulNBits", "GatherBlockQuantized"} & {n.op_type for n in stored.graph.node}

    onx = OnnxBackend().load(models.resolve("nli", str(manifest.directory)), "pair-classifier")
    assert onx.sessions["model"] is onnx_backend.get_session(path, graph="expanded")
    as_stored = onnx_backend.get_session(path)
    feeds = onx._feeds([TEXTS[0], TEXTS[1]], ["A library.", "No arrest."])
    np.testing.assert_allclose(
        onx.sessions["model"].run(None, feeds)[0], as_stored.run(None, feeds)[0], atol=1e-5
    )
    assert path.read_bytes() == before

    monkeypatch.setitem(sys.modules, "onnx", None)  # the runtime extra without onnx
    assert expand.expanded_model_bytes(path) is None


def test_quantized_exports_in_the_torch_free_runtime(tiny, tmp_path):
    """Quantized exports (w8 embedder; w8a8 LM, and w8a32-ctx8 with its int8 context graph
    built at load) load and score with torch/transformers/optimum unimportable. One process
    scores both LM forms, each with a scorer of its own (a process per form started the
    runtime twice and exported the same w8 embedder twice)."""
    import os
    import subprocess
    import sys

    lm_modes = ("w8a8", "w8a32-ctx8")
    exported = {}
    for role, key, mode in (("embedder", "bert", "w8"), *(("lm", "llama", m) for m in lm_modes)):
        manifest = export_model(
            models.resolve(role, str(tiny[key])), out=tmp_path / f"{key}-{mode}", quantize=mode
        )
        assert manifest.quantization == mode
        exported[mode] = str(manifest.directory)
    runs = [{"embedder": exported["w8"], "lm": exported[mode]} for mode in lm_modes]
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(BLOCKER)
    script = """
import json, sys
from faithgate import Example, Scorer
for paths in json.loads(sys.argv[1]):
    scorer = Scorer(["sentsim", "loglik"], models=paths)
    rows = scorer.score([Example("1", sys.argv[2], sys.argv[3])])
    print(json.dumps({k: [v.value, v.error, v.settings_hash] for k, v in rows[0].items()}))
    lm = scorer.pool.get("lm", "causal-lm")
    print(json.dumps([lm.quantization, lm.context_session is not None]))
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "transformers"))))
"""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(blocker), os.environ.get("PYTHONPATH", "")]),
    }
    env["FAITHGATE_HOME"] = str(tmp_path / "home")
    proc = subprocess.run(
        [sys.executable, "-c", script, json.dumps(runs), CORPUS[0], "The council voted."],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    *per_form, leaked_line = proc.stdout.strip().splitlines()[-(2 * len(lm_modes) + 1) :]
    assert json.loads(leaked_line) == []
    for mode, scores_line, lm_line in zip(lm_modes, per_form[::2], per_form[1::2], strict=True):
        # the int8 context graph is built for w8a32-ctx8 only
        assert json.loads(lm_line) == [mode, mode == "w8a32-ctx8"]
        scores = json.loads(scores_line)
        assert set(scores) == {"sentsim", "loglik"}
        for value, error, _ in scores.values():
            assert error is None and math.isfinite(value)


# --- CUDA (runs only where onnxruntime-gpu sees a GPU) -------------------------------------------


def _cuda_available() -> bool:
    from faithgate.backends.onnx_backend import cuda_usable

    return cuda_usable()


@pytest.mark.skipif(
    not _cuda_available(),
    reason="no CUDA device: onnxruntime-gpu is not installed or sees no GPU (CPU-only machine)",
)
def test_fp16_export_on_cuda(tiny, tmp_path):
    spec = models.resolve("embedder", str(tiny["bert"]))
    manifest = export_model(spec, out=tmp_path / "gpu", quantize="auto", device="cuda")
    assert manifest.parity["tried"][0] == "fp16"
    assert manifest.quantization in ("fp16", "w8")
    model = OnnxBackend().load(
        models.resolve("embedder", str(manifest.directory)), "text-encoder", provider="cuda"
    )
    assert model.session.get_providers()[0] == "CUDAExecutionProvider"
    ref = TorchBackend().load(spec, "text-encoder")
    np.testing.assert_allclose(
        model.sentence_embeddings(TEXTS), ref.sentence_embeddings(TEXTS), atol=1e-2
    )


@pytest.mark.skipif(
    not _cuda_available(),
    reason="no CUDA device: onnxruntime-gpu is not installed or sees no GPU (CPU-only machine)",
)
def test_causal_lm_on_cuda_keeps_its_cache_on_the_gpu(tiny, exports):
    """On CUDA the prefix's key/value cache stays on the GPU (IO binding) and the scores are
    the CPU's within TF32 rounding (onnxruntime's CUDA default)."""
    spec = models.resolve("lm", str(exports["llama"]))
    cpu = OnnxBackend().load(spec, "causal-lm", provider="cpu")
    gpu = OnnxBackend().load(spec, "causal-lm", provider="cuda")
    assert gpu.cache_device == "cuda" and cpu.cache_device is None
    a, b = gpu.tokenize(CORPUS[0]), gpu.tokenize(CORPUS[1])
    conts = [[b[:4], a[:2]], [a[:6]], [b[2:5], b[:3]], [b]]
    want_prefix, want = cpu.prefix_logprobs(a, conts)
    got_prefix, got = gpu.prefix_logprobs(a, conts)
    np.testing.assert_allclose(got_prefix[1:], want_prefix[1:], atol=5e-3)
    for x_row, y_row in zip(want, got, strict=True):
        for x, y in zip(x_row, y_row, strict=True):
            np.testing.assert_allclose(y, x, atol=5e-3)


def test_cuda_provider_refused_cleanly_without_a_gpu(tiny, exports):
    if _cuda_available():
        pytest.skip("a CUDA device is present: the refusal path does not apply")
    with pytest.raises(BackendError, match="no CUDA device"):
        OnnxBackend().load(
            models.resolve("embedder", str(exports["bert"])), "text-encoder", provider="cuda"
        )


# --- what `faithgate export --out` must never do: delete the user's files or its input -------


def _export_cli(*args: str):
    from click.testing import CliRunner

    from faithgate.cli import cli

    return CliRunner().invoke(cli, ["export", *args])


def test_export_refuses_an_out_it_did_not_write_and_its_own_model(tiny, tmp_path):
    user = tmp_path / "userdir"
    user.mkdir()
    (user / "precious.txt").write_text("notes\n")
    model = ["nli", "--model", str(tiny["nli"]), "--quantize", "none"]
    res = _export_cli(*model, "--out", str(user))
    assert res.exit_code == 2 and "holds no faithgate_onnx.json" in res.output, res.output
    assert res.output.startswith("faithgate: --out ") and res.output.count("\n") == 1
    assert (user / "precious.txt").read_text() == "notes\n"
    # The model being exported, or a directory inside it, is never the output.
    before = sorted(p.name for p in tiny["nli"].iterdir())
    for out in (tiny["nli"], tiny["nli"] / "onnx"):
        res = _export_cli(*model, "--out", str(out))
        assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    assert "refusing to overwrite an input" in res.output
    assert sorted(p.name for p in tiny["nli"].iterdir()) == before
    spec = models.resolve("nli", str(tiny["nli"]))
    with pytest.raises(InputError, match="refusing to overwrite an input"):
        export_model(spec, out=tiny["nli"] / "onnx", quantize="none")
    # Nor is a directory holding the calibration file.
    old = tmp_path / "old"
    export_model(spec, out=old, quantize="none")
    calib = old / "calib.jsonl"
    calib.write_text(_bump_rows())
    res = _export_cli(*model, "--out", str(old), "--calibration", str(calib))
    assert res.exit_code == 2 and "--calibration file" in res.output, res.output
    assert calib.is_file()
    # Not given as an input, it is still a file of the user's in an earlier export: the
    # directory is no longer only faithgate's, and replacing it would delete the file.
    res = _export_cli(*model, "--out", str(old))
    assert res.exit_code == 2 and "but also calib.jsonl" in res.output, res.output
    assert calib.read_text() == _bump_rows()
    calib.unlink()
    # An earlier export is replaced as a whole, and an empty directory is fine.
    empty = tmp_path / "empty"
    empty.mkdir()
    for out in (old, empty):
        res = _export_cli(*model, "--out", str(out))
        assert res.exit_code == 0, res.output
        assert load_manifest(out).task == "pair-classifier"
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_an_export_holds_only_what_an_export_may_replace(exports):
    """Every file an export writes is one ``models.refuse_foreign_dir`` lets a later export
    replace (and nothing else is: tests/unit/backends/test_export_out_dir.py)."""
    for key, directory in exports.items():
        assert models.foreign_entries(directory, MANIFEST_NAME) == [], key


def test_export_to_the_current_directory_is_refused(tiny, tmp_path, monkeypatch):
    # ``--out .`` once exported into the current directory (replacing it whole: an earlier
    # export there, with the user's files added since, lost them); it is refused, as for
    # ``faithgate train`` (tests/unit/backends/test_export_out_dir.py has the cases). A new
    # directory below it, named relative to it, is fine.
    here = tmp_path / "here"
    here.mkdir()
    model = ["nli", "--model", str(tiny["nli"]), "--quantize", "none"]
    monkeypatch.chdir(here)
    for out in (".", "../here"):
        res = _export_cli(*model, "--out", out)
        assert res.exit_code == 2 and "not the current directory" in res.output, res.output
        assert sorted(p.name for p in tmp_path.iterdir()) == ["here"] and not any(here.iterdir())
    res = _export_cli(*model, "--out", "./sub")
    assert res.exit_code == 0, res.output
    assert load_manifest(here / "sub").task == "pair-classifier"
    assert sorted(p.name for p in here.iterdir()) == ["sub"]


def _bump_rows(**edited: object) -> str:
    rows = [
        {"pair_id": "p0", "role": "reference", "source": "S.", "summary": "good"},
        {"pair_id": "p0", "role": "edited", "source": "S.", "summary": "bad", **edited},
    ]
    return "".join(json.dumps(r) + "\n" for r in rows)


def test_a_malformed_calibration_file_is_an_input_error_naming_the_line(tmp_path, tiny):
    from faithgate.backends.quantize.parity import load_calibration

    path = tmp_path / "calib.jsonl"
    cases = {
        _bump_rows().encode() + b'{"pair_id": "p1", "summary": "\xff"}\n': r"calib.jsonl:3: not valid UTF-8",
        (_bump_rows() + "[1, 2]\n").encode(): r"calib.jsonl:3: expected a JSON object",
        _bump_rows().replace('"source": "S.", ', "", 1).encode(): r"calib.jsonl:1: .*'source'",
        _bump_rows(summary=None).encode(): r"calib.jsonl:2: .*'summary'",
    }  # fmt: skip
    for data, message in cases.items():
        path.write_bytes(data)
        with pytest.raises(InputError, match=message):
            load_calibration(path)
        res = _export_cli("nli", "--model", str(tiny["nli"]), "--calibration", str(path),
                          "--out", str(tmp_path / "o"))  # fmt: skip
        assert res.exit_code == 2 and "internal error" not in res.output, res.output
    assert not (tmp_path / "o").exists()


def test_the_export_command_calibrates_on_the_environments_file(tiny, tmp_path, monkeypatch):
    """Without --calibration the command reads ``$FAITHGATE_CALIBRATION`` (as .ci/run sets it)
    and records it as the manifest's calibration source."""
    calib = tmp_path / "calib.jsonl"
    calib.write_text(_bump_rows())
    monkeypatch.setenv("FAITHGATE_CALIBRATION", str(calib))
    out = tmp_path / "out"
    res = _export_cli("nli", "--model", str(tiny["nli"]), "--quantize", "none", "--out", str(out))
    assert res.exit_code == 0, res.output
    assert load_manifest(out).parity["calibration"] == {"source": str(calib), "n_pairs": 1}


def test_export_threads_must_be_positive(tiny, tmp_path):
    res = _export_cli("nli", "--model", str(tiny["nli"]), "--threads", "-1")
    assert res.exit_code == 2 and "--threads" in res.output


def test_export_prints_paths_as_safe_lines(tiny, tmp_path):
    out = tmp_path / "e\x1b[2J\n::warning::forged"
    res = _export_cli("nli", "--model", str(tiny["nli"]), "--quantize", "none", "--out", str(out))
    assert res.exit_code == 0, res.output
    assert "\x1b" not in res.output and "\n::warning" not in res.output
    assert "-> " in res.output and "\\x1b[2J\\n::warning::forged" in res.output


def test_export_summary_escapes_label_names(tiny, tmp_path):
    """An NLI probe's score is named after a label of the model's config.json (someone else's
    text on the hub): the summary lines printed it raw, escape sequences and all."""
    model = tmp_path / "nli"
    shutil.copytree(tiny["nli"], model)
    config = json.loads((model / "config.json").read_text())
    label = config["id2label"]["0"]
    # an OSC and GitHub's legacy workflow command (parsed anywhere in a line)
    config["id2label"]["0"] = label + "\x1b]0;pwned\x07\x1b[2K##[error]forged"
    config["label2id"] = {v: int(k) for k, v in config["id2label"].items()}
    (model / "config.json").write_text(json.dumps(config))
    out = tmp_path / "out"
    res = _export_cli("nli", "--model", str(model), "--quantize", "none", "--out", str(out))
    assert res.exit_code == 0, res.output
    assert "\x1b" not in res.output and "\x07" not in res.output and "##[" not in res.output
    assert f"p_{label.lower()}\\x1b]0;pwned\\x07\\x1b[2k#" in res.output  # labels lowercased
    # --json too: the same manifest, valid JSON, nothing a runner or terminal would act on
    res = _export_cli("nli", "--model", str(model), "--quantize", "none", "--out", str(out),
                      "--json")  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "\x1b" not in res.stdout and "##[" not in res.stdout
    scores = json.loads(res.stdout)["parity"]["onnx_fp32_vs_torch"]
    assert any(name.endswith("##[error]forged") for name in scores)


def test_export_out_below_a_regular_file_is_an_input_error(tiny, tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("mine\n")
    res = _export_cli("nli", "--model", str(tiny["nli"]), "--quantize", "none",
                      "--out", str(afile / "sub"))  # fmt: skip
    assert res.exit_code == 2 and res.output.count("\n") == 1, res.output
    assert "cannot create its parent directory" in res.output
    assert "internal error" not in res.output and afile.read_text() == "mine\n"


@pytest.mark.parametrize(
    "key, change, wrong",
    [
        ("llama", {"num_kv_heads": 3}, "num_kv_heads is 3, its graph has"),
        ("llama", {"head_dim": 5}, "head_dim is 5, its graph has"),
        ("llama", {"with_past": False}, "with_past is false and the graph has key/value"),
        ("llama_nocache", {"with_past": True, "num_kv_heads": 2, "head_dim": 8},
         "with_past is true and the graph has no key/value"),
    ],
)  # fmt: skip
def test_a_causal_lm_manifest_that_does_not_match_its_graph_is_a_model_file_error(
    exports, tmp_path, key, change, wrong
):
    """Config values are checked for type by the manifest; ones the graph contradicts failed on
    every pass inside onnxruntime (an internal error), now when the model loads (exit 2)."""
    directory = tmp_path / key
    shutil.copytree(exports[key], directory)
    data = json.loads((directory / MANIFEST_NAME).read_text())
    data["config"].update(change)
    (directory / MANIFEST_NAME).write_text(json.dumps(data))
    with pytest.raises(ModelFileError) as err:
        OnnxBackend().load(models.resolve("lm", str(directory)), "causal-lm")
    message = str(err.value)
    assert message.startswith(f"{directory / MANIFEST_NAME}: config does not match its graph")
    assert wrong in message and "export it again" in message and "\n" not in message


def test_an_encoder_stride_not_below_its_window_is_refused_when_it_loads(tiny, exports):
    """A stride of the window or more became a step of one token (62 windows where 2 do):
    refused on both backends, naming the option; the default fits any window."""
    window = 64 - 2  # the tiny BERT's 64 positions less [CLS] and [SEP]
    for backend, location in (("torch", tiny["bert"]), ("onnx", exports["bert"])):
        for stride in (window, 600):
            pool = ModelPool({"embedder": str(location)}, backend=backend,
                             model_options={"embedder": {"stride": stride}})  # fmt: skip
            with pytest.raises(ConfigError) as err:
                pool.get("embedder", "text-encoder")
            assert str(err.value).startswith(f"model_options.embedder.stride = {stride} ")
            assert f"window of {window} tokens" in str(err.value)
        pool = ModelPool({"embedder": str(location)}, backend=backend,
                         model_options={"embedder": {"stride": window - 1}})  # fmt: skip
        assert pool.get("embedder", "text-encoder").stride == window - 1
        # Not set, the stride is 64 where that fits the window, else half the window.
        default = ModelPool({"embedder": str(location)}, backend=backend)
        assert default.get("embedder", "text-encoder").stride == window // 2


def test_only_text_encoder_exports_are_written_in_manifest_format_2(exports):
    """Format 2 changed what a text encoder's pooling means and nothing else: an NLI, LM or
    seq2seq export written as format 2 was refused by a faithgate one release older ("manifest
    format 2 is newer than this faithgate"), with nothing in it that faithgate could not read."""
    formats = {
        key: json.loads((directory / MANIFEST_NAME).read_text())["format"]
        for key, directory in exports.items()
    }
    assert formats == {"bert": 2, "nli": 1, "llama": 1, "llama_nocache": 1, "bart": 1}


def test_a_kept_export_must_be_what_was_asked_for(tiny, tmp_path):
    """The previous good export was kept whenever its weights were the same, though made
    without the KV cache asked for now, or at another opset; and --json printed the old
    manifest with nothing saying this run's form was refused (exit 0)."""
    spec = models.resolve("lm", str(tiny["llama"]))
    out = tmp_path / "lm"
    assert export_model(spec, out=out, quantize="w8").quantization == "w8"
    redone = export_model(spec, out=out, quantize="w4", use_cache=False, tolerance=Tolerance.zero())
    assert redone.quantization == "none" and redone.config["with_past"] is False
    assert load_manifest(out).config["with_past"] is False
    embedder = models.resolve("embedder", str(tiny["bert"]))
    bert = tmp_path / "bert"
    export_model(embedder, out=bert, quantize="w8")
    other_opset = export_model(
        embedder, out=bert, quantize="w4", opset=17, tolerance=Tolerance.zero()
    )
    assert other_opset.quantization == "none" and other_opset.opset == 17
    export_model(embedder, out=bert, quantize="w8")
    res = _export_cli("embedder", "--model", str(tiny["bert"]), "--out", str(bert),
                      "--quantize", "w4", "--max-diff", "0", "--min-agreement", "1",
                      "--max-consistency-change", "0", "--json")  # fmt: skip
    assert res.exit_code == 0, res.output
    printed = json.loads(res.stdout)
    assert printed["quantization"] == "w8"
    assert printed["parity"]["this_run"]["asked"] == "w4"
    res = _export_cli("embedder", "--model", str(tiny["bert"]), "--out", str(bert),
                      "--quantize", "w4", "--max-diff", "0", "--min-agreement", "1",
                      "--max-consistency-change", "0")  # fmt: skip
    assert "this export (w4) refused by the parity gate: w4: " in res.output
    assert "kept the earlier w8 export" in res.output


def test_two_local_models_of_one_name_keep_their_own_cache_exports(tiny, tmp_path, monkeypatch):
    """The cache folder was named by the directory's basename: exporting runs/b/bert replaced
    runs/a/bert's export, which then ran on torch without a word. It carries the weights'
    fingerprint now; an export cached under the bare name is still found while it matches."""
    monkeypatch.setenv("FAITHGATE_HOME", str(tmp_path / "home"))
    a, b = tmp_path / "a" / "bert", tmp_path / "b" / "bert"
    shutil.copytree(tiny["bert"], a)
    shutil.copytree(tiny["bert"], b)
    (b / "config.json").write_text((b / "config.json").read_text() + "\n")  # other bytes
    spec_a, spec_b = (models.resolve("embedder", str(d)) for d in (a, b))
    assert spec_a.fingerprint != spec_b.fingerprint
    first = export_model(spec_a, quantize="none")
    second = export_model(spec_b, quantize="none")
    assert first.directory != second.directory
    assert find_export(spec_a, "text-encoder").directory == first.directory
    assert find_export(spec_b, "text-encoder").directory == second.directory
    # A copy of a's weights elsewhere (another clone, a CI workspace) finds a's export.
    copy = tmp_path / "clone" / "bert"
    shutil.copytree(a, copy)
    found = find_export(models.resolve("embedder", str(copy)), "text-encoder")
    assert found is not None and found.directory == first.directory
    # An export in the old place (onnx/bert/text-encoder) is used while it matches.
    old_place = models.cache_dir_for("bert", kind="onnx") / "text-encoder"
    old_place.parent.mkdir(parents=True)
    shutil.move(str(first.directory), str(old_place))
    forget_manifest(first.directory)
    found = find_export(spec_a, "text-encoder")
    assert found is not None and found.directory == old_place
    assert find_export(spec_b, "text-encoder").directory == second.directory
