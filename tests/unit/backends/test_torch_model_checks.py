"""The torch backend refuses models that would load but score wrongly (review s19, findings 5
and 10): a checkpoint of another kind for the role (a causal LM or a classifier as the
embedder), weights missing from a checkpoint (transformers would initialise them at random, so
scores would change from run to run under one settings hash), and a sentence-transformers
pooling or module the encoder does not reproduce. Each refusal is one line, exit 2."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from tiny_models import BERT, NLI_LABELS, bert_tokenizer, save_tiny_bart, save_tiny_models

from faithgate import models
from faithgate.errors import ModelFileError

CORPUS = [
    "The council voted to build a new library in the city park.",
    "Police said two men were arrested after the fire.",
]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory, torch, transformers) -> dict[str, Path]:
    """The shared tiny models plus the odd ones: an NLI classifier whose head is missing from
    its weights, a BERT without pooler weights, a masked LM and a BART."""
    from safetensors.torch import load_file, save_file

    torch.manual_seed(0)
    root = tmp_path_factory.mktemp("checks")
    out, bpe = save_tiny_models(root, CORPUS)

    def bert(name: str, cls: str, **config) -> Path:
        d = root / name
        tok = bert_tokenizer(d, CORPUS)
        cfg = transformers.BertConfig(vocab_size=len(tok), **BERT, **config)
        getattr(transformers, cls)(cfg).save_pretrained(d)
        tok.save_pretrained(d)
        return d

    nohead = bert(
        "nli_nohead",
        "BertForSequenceClassification",
        id2label=NLI_LABELS,
        label2id={v: k for k, v in NLI_LABELS.items()},
    )
    weights = load_file(nohead / "model.safetensors")
    save_file(
        {k: v for k, v in weights.items() if not k.startswith("classifier.")},
        nohead / "model.safetensors",
        metadata={"format": "pt"},
    )
    out["nli_nohead"] = nohead
    d = root / "bert_nopooler"
    tok = bert_tokenizer(d, CORPUS)
    transformers.BertModel(
        transformers.BertConfig(vocab_size=len(tok), **BERT), add_pooling_layer=False
    ).save_pretrained(d)
    tok.save_pretrained(d)
    out["bert_nopooler"] = d
    out["mlm"] = bert("mlm", "BertForMaskedLM")
    out["bart"] = save_tiny_bart(root / "bart", bpe)
    return out


def _load(path: Path, role: str, task: str):
    from faithgate.backends.torch_backend import TorchBackend

    return TorchBackend().load(models.resolve(role, str(path)), task)


# --- the kind of a checkpoint ----------------------------------------------------------------


def _config(*architectures: str, is_encoder_decoder: bool = False) -> SimpleNamespace:
    return SimpleNamespace(
        architectures=list(architectures), is_encoder_decoder=is_encoder_decoder, model_type="x"
    )


@pytest.mark.parametrize(
    ("config", "kind"),
    [
        (_config("LlamaForCausalLM"), "causal-lm"),
        (_config("GPT2LMHeadModel"), "causal-lm"),
        (_config("BertForSequenceClassification"), "classifier"),
        (_config("BartForSequenceClassification", is_encoder_decoder=True), "classifier"),
        (_config("RobertaForMaskedLM"), "masked-lm"),
        (_config("BertForQuestionAnswering"), "qa"),
        (_config("T5ForConditionalGeneration", is_encoder_decoder=True), "seq2seq"),
        (_config("EncoderDecoderModel", is_encoder_decoder=True), "seq2seq"),
        (_config("T5EncoderModel", is_encoder_decoder=True), None),  # sentence-t5
        # Gemma 3's checkpoints are decoders named *ForConditionalGeneration
        (_config("Gemma3ForConditionalGeneration"), None),
        # XLNet's pretraining head: an encoder for BERTScore, not refused as one
        (_config("XLNetLMHeadModel"), None),
        (_config("BertModel"), None),
        (_config(), None),
    ],
)
def test_model_kind_from_the_architecture_name(config, kind) -> None:
    from faithgate.backends.torch_common import model_kind

    found = model_kind(config)
    assert (found[0] if found else None) == kind


@pytest.mark.parametrize(
    ("key", "role", "task", "message"),
    [
        # SmolLM2 as the embedder scored 0.904 for an unrelated summary (MiniLM: 0.132)
        ("llama", "embedder", "text-encoder", "is a causal .decoder-only. language model .Llama"),
        # the checker (a BertForSequenceClassification) as the embedder: 0.418
        ("nli", "embedder", "text-encoder", "is a sequence classifier .BertForSequenceClass"),
        ("bart", "embedder", "text-encoder", "is an encoder-decoder .sequence-to-sequence. m"),
        ("bart", "lm", "causal-lm", "is an encoder-decoder"),
        ("llama", "seq2seq", "seq2seq-lm", "is a causal"),
        ("mlm", "lm", "causal-lm", "is a masked language model .BertForMaskedLM., not a de"),
        ("llama", "nli", "pair-classifier", "is a causal .decoder-only. language model"),
    ],
)
def test_a_checkpoint_of_another_kind_is_refused(tiny, key, role, task, message) -> None:
    with pytest.raises(ModelFileError, match=message) as info:
        _load(tiny[key], role, task)
    assert info.value.exit_code == 2
    assert "\n" not in str(info.value)
    assert str(tiny[key]) in str(info.value)


@pytest.mark.parametrize(
    ("key", "role", "task", "missing"),
    [
        # scored 0.357, 0.309, 0.339 on three runs under one settings hash
        ("nli_nohead", "nli", "pair-classifier", "classifier.bias, classifier.weight"),
        # an encoder's checkpoint as the classifier: its head would be random too
        ("bert", "nli", "pair-classifier", "classifier.bias, classifier.weight"),
        ("bert", "qa", "extractive-qa", "qa_outputs.bias, qa_outputs.weight"),
    ],
)
def test_a_checkpoint_missing_weights_is_refused(tiny, key, role, task, missing) -> None:
    with pytest.raises(ModelFileError, match="lacks weights") as info:
        _load(tiny[key], role, task)
    assert info.value.exit_code == 2
    assert missing in str(info.value) and str(tiny[key]) in str(info.value)
    assert "\n" not in str(info.value)


def test_models_of_the_right_kind_still_load(tiny) -> None:
    """The encoder reads hidden states only: a checkpoint without pooler weights is whole for
    it, and a masked LM's trunk is an encoder (BERTScore's checkpoints are *ForMaskedLM)."""
    for key in ("bert", "bert_nopooler", "mlm"):
        vectors = _load(tiny[key], "embedder", "text-encoder").sentence_embeddings(CORPUS)
        assert vectors.shape == (2, BERT["hidden_size"])
    assert _load(tiny["nli"], "nli", "pair-classifier").labels == [
        "entailment",
        "neutral",
        "contradiction",
    ]
    assert _load(tiny["llama"], "lm", "causal-lm").max_length > 0
    assert _load(tiny["bart"], "seq2seq", "seq2seq-lm").is_encoder_decoder


def test_the_onnx_export_refuses_a_checkpoint_missing_weights(tiny, tmp_path) -> None:
    """The export loads its torch reference through the same loader: no export of a
    half-random model, and nothing written."""
    pytest.importorskip("optimum.exporters.onnx", reason="exports need faithgate[full]")
    from faithgate.backends.export import export_model

    spec = models.resolve("nli", str(tiny["nli_nohead"]))
    with pytest.raises(ModelFileError, match="lacks weights"):
        export_model(spec, "pair-classifier", out=tmp_path / "out", quantize="none")
    assert not (tmp_path / "out").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == []


# --- sentence-transformers pooling -----------------------------------------------------------


def _st_copy(src: Path, dst: Path, pooling: dict | str | None, modules: list | None = None):
    import shutil

    shutil.copytree(src, dst)
    if pooling is not None:
        (dst / "1_Pooling").mkdir()
        text = pooling if isinstance(pooling, str) else json.dumps(pooling)
        (dst / "1_Pooling" / "config.json").write_text(text)
    if modules is not None:
        (dst / "modules.json").write_text(json.dumps(modules))
    return dst


MODES = (
    "pooling_mode_cls_token",
    "pooling_mode_mean_tokens",
    "pooling_mode_max_tokens",
    "pooling_mode_mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens",
    "pooling_mode_lasttoken",
)
ST_MODULES = [
    {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
    {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    {
        "idx": 2,
        "name": "2",
        "path": "2_Normalize",
        "type": "sentence_transformers.models.Normalize",
    },
]


def _pooling(*on: str) -> dict:
    return {"word_embedding_dimension": BERT["hidden_size"], **{m: m in on for m in MODES}}


@pytest.mark.parametrize(
    "on",
    [
        ("pooling_mode_max_tokens",),  # scored as mean pooling, same value, only the hash moved
        ("pooling_mode_lasttoken",),
        ("pooling_mode_mean_sqrt_len_tokens",),
        ("pooling_mode_weightedmean_tokens",),
        ("pooling_mode_cls_token", "pooling_mode_mean_tokens"),  # concatenated by ST
        (),
    ],
)
def test_a_pooling_the_encoder_does_not_reproduce_is_refused(tiny, tmp_path, on) -> None:
    d = _st_copy(tiny["bert"], tmp_path / "st", _pooling(*on), ST_MODULES)
    with pytest.raises(ModelFileError, match="asks for pooling") as info:
        _load(d, "embedder", "text-encoder")
    assert str(d / "1_Pooling" / "config.json") in str(info.value)
    assert "\n" not in str(info.value) and info.value.exit_code == 2


@pytest.mark.parametrize(
    ("text", "message"),
    [('{"pooling_mode_mean_tokens": tru', "JSONDecodeError"), ("[1, 2]", "not a JSON object")],
)
def test_a_damaged_pooling_config_is_one_line_naming_the_file(tiny, tmp_path, text, message):
    """It was ``could not score with sentsim: JSONDecodeError: ...`` (exit 1, no file named)."""
    d = _st_copy(tiny["bert"], tmp_path / "st", text)
    with pytest.raises(ModelFileError, match=message) as info:
        _load(d, "embedder", "text-encoder")
    assert f"cannot read {d / '1_Pooling' / 'config.json'}" in str(info.value)
    assert "\n" not in str(info.value) and info.value.exit_code == 2


def test_a_sentence_transformers_module_the_encoder_does_not_apply_is_refused(tiny, tmp_path):
    dense = {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}
    d = _st_copy(
        tiny["bert"], tmp_path / "st", _pooling("pooling_mode_mean_tokens"), [*ST_MODULES, dense]
    )
    with pytest.raises(ModelFileError, match="module Dense at '2_Dense'"):
        _load(d, "embedder", "text-encoder")
    (d / "modules.json").write_text("{")
    with pytest.raises(ModelFileError, match=f"cannot read {d / 'modules.json'}"):
        _load(d, "embedder", "text-encoder")


def test_cls_and_mean_pooling_still_load_and_differ(tiny, tmp_path) -> None:
    mean = _st_copy(tiny["bert"], tmp_path / "mean", _pooling("pooling_mode_mean_tokens"))
    cls = _st_copy(tiny["bert"], tmp_path / "cls", _pooling("pooling_mode_cls_token"), ST_MODULES)
    by_mean = _load(mean, "embedder", "text-encoder")
    by_cls = _load(cls, "embedder", "text-encoder")
    assert (by_mean.pooling, by_cls.pooling) == ("mean", "cls")
    plain = _load(tiny["bert"], "embedder", "text-encoder").sentence_embeddings(CORPUS)
    np.testing.assert_allclose(by_mean.sentence_embeddings(CORPUS), plain, atol=1e-6)
    assert not np.allclose(by_cls.sentence_embeddings(CORPUS), plain, atol=1e-3)


# --- end to end: one line, exit 2 --------------------------------------------------------------


REFUSALS = {
    "sentsim": ("embedder", "llama", "LlamaForCausalLM"),
    "entail_topk": ("nli", "nli_nohead", "lacks weights"),
}


@pytest.fixture(scope="module")
def cli_refusals(tiny, tmp_path_factory) -> dict[str, dict[str, str]]:
    """Each REFUSALS case as ``python -m faithgate score`` in a process of its own: a fork of
    one driver that imported torch and transformers once (tests/forked_cli.py), not a cold
    start per case. By metric: the child's ``stderr`` and ``exit`` status."""
    import os
    import subprocess
    import sys

    root = tmp_path_factory.mktemp("cli_refusals")
    cases = []
    for metric, (role, key, _) in REFUSALS.items():
        out = root / metric
        out.mkdir()
        argv = ["score", "--source", "-", "--metric", metric,
                "--summary", "The council built a library.", "--backend", "torch",
                "--model", f"{role}={tiny[key]}"]  # fmt: skip
        cases.append({"argv": argv, "stdin": CORPUS[0], "out": str(out)})
    (root / "cases.json").write_text(json.dumps(cases))
    driver = Path(__file__).resolve().parents[2] / "forked_cli.py"
    env = {**os.environ, "FAITHGATE_HOME": str(root / "home")}
    subprocess.run(
        [sys.executable, str(driver), str(root / "cases.json")],
        env=env, stdin=subprocess.DEVNULL, check=True, timeout=300,
    )  # fmt: skip
    return {
        metric: {name: (root / metric / name).read_text() for name in ("stdout", "stderr", "exit")}
        for metric in REFUSALS
    }


# One worker runs both cases, so the driver (the fixture) runs once under xdist.
@pytest.mark.xdist_group("torch_cli_refusals")
@pytest.mark.parametrize("metric", list(REFUSALS))
def test_the_cli_refuses_in_one_line_with_exit_2(tiny, cli_refusals, metric):
    """Only transformers' "Some weights ... newly initialized" warning used to show (the score
    printed, exit 0); now faithgate's line alone, without that warning before it."""
    _, key, says = REFUSALS[metric]
    run = cli_refusals[metric]
    assert run["exit"] == "2", run["stdout"] + run["stderr"]
    assert run["stderr"].startswith("faithgate: ") and run["stderr"].count("\n") == 1, run["stderr"]
    assert says in run["stderr"] and str(tiny[key]) in run["stderr"]


def test_a_hub_model_is_pooled_as_its_sentence_transformers_files_say(tmp_path, monkeypatch):
    """A hub id used to pool by mean whatever its ``1_Pooling`` said (``from_pretrained`` does
    not fetch it): a CLS-pooled model was scored wrong. The two files are fetched now; a repo
    without them pools by mean; a hub that cannot be asked is an error, not a guess."""
    huggingface_hub = pytest.importorskip("huggingface_hub")
    from huggingface_hub.errors import EntryNotFoundError, LocalEntryNotFoundError

    from faithgate.backends.torch_backend import sentence_pooling
    from faithgate.errors import ModelNotFoundError

    snapshot = tmp_path / "models--org--emb" / "snapshots" / ("a" * 40)
    served: dict[str, str] = {}
    asked: list[tuple[str, str, str | None]] = []

    def fake_download(repo_id, filename, revision=None, cache_dir=None, **kwargs):
        asked.append((repo_id, filename, revision))
        if filename not in served:
            raise EntryNotFoundError(f"404 {filename}")
        (snapshot / filename).parent.mkdir(parents=True, exist_ok=True)
        (snapshot / filename).write_text(served[filename])
        return str(snapshot / filename)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake_download)
    spec = models.ModelSpec("embedder", "org/emb", "org/emb", "hub", revision="v1")
    assert sentence_pooling(spec) == "mean"  # a plain transformers repo
    assert {(r, f, v) for r, f, v in asked} == {
        ("org/emb", "modules.json", "v1"),
        ("org/emb", "1_Pooling/config.json", "v1"),
    }
    served["modules.json"] = json.dumps(ST_MODULES)
    served["1_Pooling/config.json"] = json.dumps(_pooling("pooling_mode_cls_token"))
    assert sentence_pooling(spec) == "cls"
    served["1_Pooling/config.json"] = json.dumps(_pooling("pooling_mode_max_tokens"))
    with pytest.raises(ModelFileError, match="asks for pooling pooling_mode_max_tokens"):
        sentence_pooling(spec)

    def unreachable(*args, **kwargs):
        raise LocalEntryNotFoundError("Connection error, and the file is not cached\nretry")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", unreachable)
    with pytest.raises(ModelNotFoundError, match="cannot read the sentence pooling") as err:
        sentence_pooling(spec)
    assert "\n" not in str(err.value)
