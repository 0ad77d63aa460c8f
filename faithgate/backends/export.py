"""Export models to ONNX (optimum's exporter), quantize them, and find exports again.

Layout: an export is a directory holding the ONNX file(s), the tokenizer (``tokenizer.json``,
read at run time by the Rust ``tokenizers`` library), ``config.json`` and a manifest
``faithgate_onnx.json`` (format in ``onnx_models/README.md``). Exports go to the faithgate
cache, ``<faithgate_home>/onnx/<model>/<task>/``, where ``find_export`` (and so backend ``auto``)
looks for them, or to a directory of the user's choice that can then be passed as the model
path (``--model embedder=DIR``).

This module is imported by the torch-free runtime: only ``find_export`` and the manifest are
used there, and torch / transformers / optimum are imported inside the export functions only.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np

from faithgate import models
from faithgate.backends.lm_graph import add_score_from, drop_mask_expands, drop_softmax_nan_guards
from faithgate.backends.manifest import (
    MANIFEST_FORMAT,
    MANIFEST_NAME,
    ExportManifest,
    default_export_dir,
    find_export,
    forget_manifest,
    load_manifest,
    manifest_format_for,
)
from faithgate.backends.onnx_backend import OnnxBackend, drop_sessions, providers_for
from faithgate.backends.quantize.forms import save_onnx
from faithgate.backends.quantize.modes import (
    AUTO_CANDIDATES,
    NEEDS_FEEDS,
    auto_candidates,
    check_mode_fits_task,
    normalise_quantization,
    quantize_file,
    quantized_file_name,
)
from faithgate.backends.quantize.parity import (
    MIN_PARITY_PAIRS,
    Tolerance,
    Triple,
    compare,
    load_calibration,
)
from faithgate.backends.torch_backend import TorchBackend
from faithgate.backends.windowing import read_pooling
from faithgate.errors import BackendError, InputError
from faithgate.safety import paths

DEFAULT_OPSET = 18
# The ONNX opsets an export can be made at (``check_opset``), checked before any model loads:
# optimum exports with torch's TorchScript exporter (``torch.onnx.export(dynamo=False)``),
# whose highest supported opset is 20 (``ONNX_TORCHSCRIPT_EXPORTER_MAX_OPSET`` in torch 2.13;
# 21 to 23 only warn and stamp the newer opset on the same operators, and above that it
# fails); and transformers runs BERT, Llama and BART with SDPA attention, whose export needs
# opset 14 (below it every architecture's export fails). The LM graph rewrite
# (``_finish_lm_graph``: Unsqueeze/Squeeze with axes as an input) needs 13.
# ``tests/unit/backends/test_export_opset.py`` checks these against torch and exports at both.
MIN_OPSET = 14
MAX_OPSET = 20

# The fp32 ONNX graph is held to the user's mean |diff| limits (and no NaN), no tighter than
# this: it and torch differ by kernel summation order (~1e-6, the shipped checker 4e-6), so a
# zero tolerance (``Tolerance.zero``: "bit-identical", for quantized forms) would refuse every
# fp32 graph. A real defect (a mis-export, a runtime config unlike torch's) is far above it.
FP32_MIN_DIFF_LIMIT = 1e-4


def fp32_gate(tolerance: Tolerance) -> Tolerance:
    """The limits the fp32 graph is held to: ``tolerance``'s mean |diff| limits, no tighter than
    ``FP32_MIN_DIFF_LIMIT``, and nothing on pair agreement or consistency: float rounding
    flips a near-tied calibration pair now and then, which would refuse a correct graph
    (those two gate the quantized forms). ``compare`` refuses NaN under any limits."""
    return replace(
        tolerance,
        max_mean_abs_diff=max(tolerance.max_mean_abs_diff, FP32_MIN_DIFF_LIMIT),
        max_mean_abs_nats=max(tolerance.max_mean_abs_nats, FP32_MIN_DIFF_LIMIT),
        min_rank_agreement=0.0,
        max_consistency_change=1.0,
    )


# Which task each role's model serves, and which optimum task exports it.
ROLE_TASKS: dict[str, str] = {
    "embedder": "text-encoder",
    "nli": "pair-classifier",
    "lm": "causal-lm",
    "seq2seq": "seq2seq-lm",
    "alignscore": "pair-classifier",
    "hhem": "pair-classifier",
}
OPTIMUM_TASKS: dict[str, str] = {
    "text-encoder": "feature-extraction",
    "pair-classifier": "text-classification",
    "causal-lm": "text-generation-with-past",  # "text-generation" when exported without cache
    "seq2seq-lm": "text2text-generation",
}


def _nli_generative_task(spec: models.ModelSpec) -> str | None:
    """``seq2seq-lm`` for an encoder-decoder in the nli role (MiniCheck-Flan-T5, which the
    ``minicheck`` metric reads as a generative classifier); None otherwise."""
    if spec.role != "nli":
        return None
    try:
        config = json.loads((Path(str(spec.location)) / "config.json").read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return "seq2seq-lm" if isinstance(config, dict) and config.get("is_encoder_decoder") else None


# --- probes: the scores the parity gate compares ----------------------------------------------


def probe_scores(model: Any, triples: Sequence[Triple]) -> dict[str, tuple[np.ndarray, bool]]:
    """Metric-like scores of each triple's two summaries under ``model`` (any backend).

    Returns score name -> ((n, 2) array: faithful, edited; bounded?). The probes are the
    quantities the metrics compute: cosine of pooled embeddings (SentSim), greedy-matched
    token cosine precision (BERTScore P, Zhang et al. 2020), entailment probability (NLI) and
    mean target log-probability given the source (likelihood metrics).
    """
    sources = [t[0] for t in triples]
    summaries = [t[1] for t in triples] + [t[2] for t in triples]
    n = len(triples)
    out: dict[str, tuple[np.ndarray, bool]] = {}
    if model.task == "text-encoder":
        emb = model.sentence_embeddings(sources + summaries)
        src, summ = emb[:n], emb[n:]
        cos = np.array([float(src[i % n] @ summ[i]) for i in range(2 * n)])
        out["sentsim_cosine"] = (cos.reshape(2, n).T, True)
        toks = model.token_embeddings(sources + summaries)
        prec = []
        for i in range(2 * n):
            s_vec, c_vec = toks[i % n].vectors, toks[n + i].vectors
            if len(s_vec) == 0 or len(c_vec) == 0:
                prec.append(0.0)
                continue
            s_vec = s_vec / np.linalg.norm(s_vec, axis=1, keepdims=True).clip(1e-12)
            c_vec = c_vec / np.linalg.norm(c_vec, axis=1, keepdims=True).clip(1e-12)
            prec.append(float((c_vec @ s_vec.T).max(axis=1).mean()))
        out["bertscore_precision"] = (np.array(prec).reshape(2, n).T, True)
    elif model.task == "pair-classifier":
        labels = list(model.labels)
        # The class that means "supported" (HHEM: consistent, AlignScore's binary head: aligned).
        supported = ("consistent", "aligned")
        col = next((i for i, lab in enumerate(labels) if "entail" in lab or lab in supported), 0)
        proba = model.predict_proba(sources + sources, summaries)
        out[f"p_{labels[col]}"] = (proba[:, col].reshape(2, n).T, True)
    elif model.task in ("causal-lm", "seq2seq-lm"):
        limit = model.max_length
        src_ids = [model.tokenize(s) for s in sources]
        sum_ids = [model.tokenize(" " + s)[: limit // 2] for s in summaries]
        if model.task == "causal-lm":
            # One prefix pass per source, its key/value cache shared by both summaries (as the
            # likelihood engine scores): half the source passes of scoring each (source,
            # summary) row whole, and no (batch, length, vocabulary) logits of long rows.
            target = [np.zeros(0)] * (2 * n)
            for i in range(n):
                pair = (sum_ids[i], sum_ids[n + i])
                prefix = src_ids[i][: limit - max(len(pair[0]), len(pair[1]))]
                _, conts = model.prefix_logprobs(prefix, [[pair[0]], [pair[1]]], score_prefix=False)
                target[i], target[n + i] = conts[0][0], conts[1][0]
        else:
            target = model.seq2seq_logprobs(
                [(src_ids[i % n][:limit], sum_ids[i]) for i in range(2 * n)]
            )
        means = np.array([float(np.mean(t)) if len(t) else 0.0 for t in target])
        out["mean_logprob"] = (means.reshape(2, n).T, False)
    else:
        raise BackendError(f"no parity probe for task {model.task!r}")
    return out


# --- export ------------------------------------------------------------------------------------


def _versions() -> dict[str, str]:
    # library_version: the build an import loads (onnxruntime-gpu's for onnxruntime)
    from faithgate.backends import library_version

    tools = {}
    for dist in ("optimum", "optimum-onnx", "onnx", "onnxruntime", "torch", "transformers"):
        if (version := library_version(dist)) is not None:
            tools[dist] = version
    return tools


def _weights_sha256(spec: models.ModelSpec) -> dict[str, str]:
    """sha256 of the weight files of a local model (a hub model is pinned by revision)."""
    path = Path(spec.location)
    if spec.origin == "hub" or not path.is_dir():
        return {}
    digests = {}
    for child in sorted(path.rglob("*")):
        if child.is_file() and child.suffix in {".safetensors", ".bin", ".gguf"}:
            digests[child.relative_to(path).as_posix()] = models.file_sha256(child)
    return digests


def _special_template(tokenizer: Any) -> tuple[list[int], list[int]]:
    """Special ids the tokenizer puts before and after a single sequence ([CLS] ... [SEP])."""
    marker = -7  # never a real id; build_inputs_with_special_tokens only concatenates lists
    ids = tokenizer.build_inputs_with_special_tokens([marker])
    at = ids.index(marker)
    return [int(i) for i in ids[:at]], [int(i) for i in ids[at + 1 :]]


def _encoder_onnx_config(model: Any, optimum_task: str) -> Any:
    """optimum's ONNX config for the architecture, extended to output every hidden layer
    (``hidden_states.{i}``): BERTScore reads a chosen layer, not only the last."""
    import optimum.exporters.onnx.model_configs  # noqa: F401 - registers configs with TasksManager
    from optimum.exporters.tasks import TasksManager

    ctor = TasksManager.get_exporter_config_constructor(
        "onnx", model=model, task=optimum_task, library_name="transformers"
    )
    base = ctor(model.config, task=optimum_task)
    n_layers = int(model.config.num_hidden_layers)

    class AllLayersConfig(type(base)):  # type: ignore[misc, valid-type]
        @property
        def outputs(self) -> dict[str, dict[int, str]]:
            axes = {0: "batch_size", 1: "sequence_length"}
            out = {"last_hidden_state": dict(axes)}
            for i in range(n_layers + 1):
                out[f"hidden_states.{i}"] = dict(axes)
            return out

    return AllLayersConfig(model.config, task=optimum_task)


def _run_optimum(
    model: Any,
    tokenizer: Any,
    out: Path,
    optimum_task: str,
    opset: int,
    custom: dict[str, Any] | None = None,
    model_kwargs: dict[str, Any] | None = None,
) -> None:
    import warnings

    from optimum.exporters.onnx import onnx_export_from_model

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tracer warnings are noise for the user
        try:
            onnx_export_from_model(
                model,
                out,
                task=optimum_task,
                opset=opset,
                custom_onnx_configs=custom,
                model_kwargs=model_kwargs,
                do_validation=False,  # faithgate validates scores itself (parity below)
                preprocessors=[tokenizer],
            )
        except Exception as exc:  # optimum raises many types; report one line
            raise BackendError(f"ONNX export failed ({optimum_task}): {exc}") from exc


def _torch_model(spec: models.ModelSpec, task: str) -> Any:
    """The torch reference model of ``task`` (also the object exported)."""
    return TorchBackend().load(spec, task)


def _hf_parts(reference: Any) -> tuple[Any, Any]:
    """(transformers model, tokenizer) inside a torch-backend role model."""
    model = getattr(reference, "model", None)
    tokenizer = getattr(reference, "tokenizer", None)
    if model is None or tokenizer is None:
        raise BackendError(
            f"cannot export: the torch {reference.task} model exposes no .model/.tokenizer"
        )
    return model, tokenizer


def _export_fp32(
    spec: models.ModelSpec, task: str, reference: Any, out: Path, opset: int, use_cache: bool
) -> tuple[dict[str, str], dict[str, Any]]:
    """Export the fp32 graph(s) to ``out``; return (files, runtime config)."""
    model, tokenizer = _hf_parts(reference)
    if not getattr(tokenizer, "is_fast", False):
        raise BackendError(
            f"cannot export {spec.name!r}: the ONNX runtime needs a fast tokenizer (tokenizer.json)"
        )
    cfg = model.config
    config: dict[str, Any] = {
        "model_type": cfg.model_type,
        "max_length": int(reference.max_length),
        "pad_id": int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0),
    }
    if task == "text-encoder":
        _run_optimum(
            model,
            tokenizer,
            out,
            "feature-extraction",
            opset,
            custom={"model": _encoder_onnx_config(model, "feature-extraction")},
            model_kwargs={"output_hidden_states": True},
        )
        prefix, suffix = _special_template(tokenizer)
        config.update(
            hidden_size=int(cfg.hidden_size),
            num_layers=int(cfg.num_hidden_layers),
            # The torch encoder's own pooling, read (and checked) from the model's files.
            pooling=getattr(reference, "pooling", None) or read_pooling(spec.location),
            special_prefix=prefix,
            special_suffix=suffix,
            stride=int(getattr(reference, "stride", 64)),
        )
        return {"model": "model.onnx"}, config
    if task == "pair-classifier" and getattr(reference, "prompt", None):
        from faithgate.backends.torch_hhem import export_onnx

        export_onnx(model, tokenizer, out / "model.onnx", opset)  # HHEM: no optimum recipe
        tokenizer.save_pretrained(str(out))
        config["prompt"] = reference.prompt
    elif task == "pair-classifier":
        _run_optimum(model, tokenizer, out, "text-classification", opset)
    if task == "pair-classifier":
        config["labels"] = [str(cfg.id2label[i]).lower() for i in range(len(cfg.id2label))]
        return {"model": "model.onnx"}, config
    if task in ("causal-lm", "seq2seq-lm"):
        return _export_lm(task, model, tokenizer, out, opset, use_cache, config, reference)
    raise BackendError(f"no ONNX export recipe for task {task!r}")


def _finish_lm_graph(
    path: Path, logits: str = "logits", score_from: bool = False, mask_expands: bool = False
) -> dict[str, int | bool]:
    """Append ``target_logprobs = log_softmax(logits)[..., target_ids]`` to an exported graph
    and drop the logits output, so onnxruntime returns (batch, length) floats instead of
    (batch, length, vocabulary) and frees the logits inside the run; drop the attention
    softmax NaN guards (``lm_graph.drop_softmax_nan_guards``: same scores, less time); with
    ``score_from``, add that input (``lm_graph.add_score_from``: a cached prefix pass skips
    the LM head). Returns what was rewritten, for the manifest."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    model = onnx.load(str(path))
    graph = model.graph
    guards = drop_softmax_nan_guards(graph)
    expands = drop_mask_expands(graph) if mask_expands else 0
    ids_input = next(i for i in graph.input if i.name == "input_ids")
    dims = [d.dim_param or d.dim_value for d in ids_input.type.tensor_type.shape.dim]
    graph.input.append(helper.make_tensor_value_info("target_ids", TensorProto.INT64, dims))
    graph.initializer.append(numpy_helper.from_array(np.array([-1], np.int64), "fg_last_axis"))
    graph.node.extend(
        [
            helper.make_node("LogSoftmax", [logits], ["fg_logsoftmax"], axis=-1),
            helper.make_node("Unsqueeze", ["target_ids", "fg_last_axis"], ["fg_target_index"]),
            helper.make_node(
                "GatherElements", ["fg_logsoftmax", "fg_target_index"], ["fg_gathered"], axis=-1
            ),
            helper.make_node("Squeeze", ["fg_gathered", "fg_last_axis"], ["target_logprobs"]),
        ]
    )
    scored_from = score_from and add_score_from(graph, logits, "target_ids")
    if scored_from:
        dims = [dims[0], "scored_length"]
    kept = [o for o in graph.output if o.name != logits]
    del graph.output[:]
    graph.output.extend(kept)
    graph.output.append(helper.make_tensor_value_info("target_logprobs", TensorProto.FLOAT, dims))
    for stale in path.parent.glob(path.name + "_data"):
        stale.unlink()
    save_onnx(model, path)
    rewrites: dict[str, int | bool] = {"softmax_nan_guards_dropped": guards}
    if mask_expands:
        rewrites["mask_expands_dropped"] = expands
    return {**rewrites, "score_from": scored_from}


def _finish_encoder_graph(path: Path) -> int:
    """An encoder-decoder's encoder graph with its key-padding mask left unexpanded
    (``lm_graph.drop_mask_expands``: same states, about half the encoder's op time on long
    sources); returns how many expansions were dropped."""
    import onnx

    model = onnx.load(str(path))
    dropped = drop_mask_expands(model.graph)
    if dropped:
        for stale in path.parent.glob(path.name + "_data"):
            stale.unlink()
        save_onnx(model, path)
    return dropped


def _export_lm(
    task: str,
    model: Any,
    tokenizer: Any,
    out: Path,
    opset: int,
    use_cache: bool,
    config: dict[str, Any],
    reference: Any,
) -> tuple[dict[str, str], dict[str, Any]]:
    cfg = model.config
    config.update(
        pad_id=int(reference.pad_id),
        bos_id=reference.bos_token_id,
        eos_id=reference.eos_token_id,
    )
    if task == "causal-lm":
        optimum_task = "text-generation-with-past" if use_cache else "text-generation"
        _run_optimum(model, tokenizer, out, optimum_task, opset)
        heads = int(cfg.num_attention_heads)
        config.update(
            with_past=use_cache,
            num_kv_heads=int(getattr(cfg, "num_key_value_heads", None) or heads),
            head_dim=int(getattr(cfg, "head_dim", None) or cfg.hidden_size // heads),
        )
        config["graph_rewrites"] = _finish_lm_graph(out / "model.onnx", score_from=True)
        return {"model": "model.onnx"}, config
    _run_optimum(model, tokenizer, out, "text2text-generation", opset)
    config["decoder_start_id"] = reference.decoder_start_token_id
    config["graph_rewrites"] = {
        **_finish_lm_graph(out / "decoder_model.onnx", mask_expands=True),
        "encoder_mask_expands_dropped": _finish_encoder_graph(out / "encoder_model.onnx"),
    }
    return {"encoder": "encoder_model.onnx", "decoder": "decoder_model.onnx"}, config


def _calibration_feeds(manifest: ExportManifest, triples: Sequence[Triple]) -> list[dict]:
    """Model inputs on calibration texts, for the modes that read activations (static int8,
    w8a8): encoders, classifiers and decoder-only LMs."""
    from faithgate.backends.onnx_backend import OnnxBackend

    loaded = OnnxBackend().load_manifest(manifest)
    if not hasattr(loaded, "calibration_feeds"):
        raise InputError(
            f"quantization from calibration inputs is not available for {manifest.task} exports"
        )
    return loaded.calibration_feeds([t for trip in triples for t in trip])


def quantization_feeds(
    manifest: ExportManifest, mode: str, triples: Sequence[Triple]
) -> list[dict]:
    """Calibration inputs of the fp32 export ``manifest`` for quantizing it to ``mode``: none
    for weight-only and fp16 forms; for w8a8 the built-in sentences, never a calibration file's
    pairs (which then judge it; without a file the built-in triples are also the parity
    sample); for static int8 (its historical rule) the parity triples."""
    if mode not in NEEDS_FEEDS:
        return []
    return _calibration_feeds(
        manifest, triples if mode == "int8-static" else load_calibration(None)
    )


def onnx_files(name: str) -> list[str]:
    """The files of the graph ``name``: itself and, past protobuf's 2 GB limit, its tensors in
    ``<name>_data`` (``save_onnx``, optimum), which are unlinked and counted with it."""
    return [name, name + "_data"]


def _files_bytes(directory: Path, names: Iterable[str]) -> int:
    return sum(
        (directory / f).stat().st_size
        for name in names
        for f in onnx_files(name)
        if (directory / f).exists()
    )


def _unlink_graphs(directory: Path, names: Iterable[str]) -> None:
    for name in names:
        for f in onnx_files(name):
            (directory / f).unlink(missing_ok=True)


def _previous_good_export(
    target: Path, spec: models.ModelSpec, asked: ExportManifest
) -> ExportManifest | None:
    """The quantized export already in ``target`` of the same weights, made as ``asked`` is
    (task, opset, and for an LM with or without its KV cache), if any: one made otherwise is
    not what this export was asked for, so it is replaced rather than kept."""
    if not (target / MANIFEST_NAME).is_file():
        return None
    try:
        previous = load_manifest(target)
    except InputError:
        return None
    same = (
        previous.source.get("fingerprint") == spec.fingerprint
        and previous.task == asked.task
        and previous.opset == asked.opset
        and previous.config.get("with_past") == asked.config.get("with_past")
    )
    return previous if same and previous.quantization != "none" else None


def check_device(device: str) -> None:
    """Refuse an export ``device`` onnxruntime cannot run the parity runs on, before any model
    is loaded or exported (``--device cuda`` without a CUDA device: one line, nothing done)."""
    if device not in AUTO_CANDIDATES:
        raise InputError(f"unknown device {device!r}; choose one of: {', '.join(AUTO_CANDIDATES)}")
    providers_for(device)


def check_opset(opset: object, what: str = "opset") -> None:
    """Refuse an ONNX opset the export cannot be made at (``MIN_OPSET`` to ``MAX_OPSET``),
    before any model is loaded (``--opset -1`` loaded the model, then failed in torch with a
    dump of its graph)."""
    if isinstance(opset, bool) or not isinstance(opset, int) or not MIN_OPSET <= opset <= MAX_OPSET:
        raise InputError(
            f"{what} {opset!r} is not supported: give an ONNX opset from {MIN_OPSET} to "
            f"{MAX_OPSET} (default {DEFAULT_OPSET})"
        )


def export_model(
    spec: models.ModelSpec,
    task: str | None = None,
    *,
    out: str | Path | None = None,
    quantize: str = "auto",
    opset: int = DEFAULT_OPSET,
    use_cache: bool = True,
    calibration: Sequence[Triple] | None = None,
    calibration_source: str = "built-in",
    tolerance: Tolerance | None = None,
    require_quantized: bool = False,
    threads: int | None = None,
    device: str = "cpu",
    log: Callable[[str], None] = lambda msg: None,
) -> ExportManifest:
    """Export ``spec`` to ONNX for ``task``, quantize it, gate it, write the manifest.

    ``quantize`` is a mode of ``quantize.modes.MODES`` or ``auto`` (default): the candidates of
    ``AUTO_CANDIDATES[device]`` smallest first, the first that passes the gate kept (one that
    cannot be made here, its quantizer failing, is refused and the next tried). Parity is
    measured on ``calibration`` triples: torch fp32 vs ONNX fp32, and each quantized form vs
    torch fp32, gated by ``tolerance`` (the fp32 graph's diff limits no tighter than
    ``FP32_MIN_DIFF_LIMIT``), run on ``device`` (``cpu`` or ``cuda``: onnxruntime's execution
    provider). An fp32 graph that fails is refused (``BackendError``; nothing written, a
    previous export in ``target`` untouched). When no quantized form passes, the fp32
    export is written and the manifest says why, unless ``target`` already holds a quantized
    export of the same weights that passed its gate: that one is kept untouched. With
    ``require_quantized`` the export is refused instead (``BackendError``; nothing written).
    """
    task = task or _nli_generative_task(spec) or ROLE_TASKS.get(spec.role)
    if task is None:
        raise InputError(
            f"no ONNX recipe for role {spec.role!r}; exportable roles: {', '.join(ROLE_TASKS)}"
        )
    quant = normalise_quantization(quantize)
    check_mode_fits_task(quant, task)
    check_device(device)
    check_opset(opset)
    tolerance = tolerance or Tolerance()
    triples = list(calibration) if calibration is not None else load_calibration(None)
    candidates = (
        list(auto_candidates(device, task))
        if quant == "auto"
        else ([] if quant == "none" else [quant])
    )
    if candidates and len(triples) < MIN_PARITY_PAIRS:
        # compare() on no pairs finds nothing to refuse: a gate that measured nothing must
        # not pass a quantized form (fp32 needs no pairs; with some, its graph is gated too).
        raise InputError(
            f"{quant} export of {spec.name!r}: the parity gate has {len(triples)} calibration "
            f"pairs ({calibration_source}) and needs at least {MIN_PARITY_PAIRS}; give "
            "calibration pairs (a minimal-pairs file, or the built-in ones), or export fp32 "
            "(quantize none)"
        )
    # Absolute and normalised: the temporary directory and the lock are made beside it, by its
    # name (``x/..`` has none of its own).
    target = Path(os.path.abspath(out)) if out is not None else default_export_dir(spec, task)
    if out is not None:
        # The user's directory: replaced only when it is an earlier export (its manifest, and
        # nothing an export does not write), never the current directory or one above it, and
        # never when it is (or holds, or lies in) the model being exported.
        models.refuse_foreign_dir(target, MANIFEST_NAME)
    paths.refuse_dir_over_inputs(target, [("--model directory", spec.location)])
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a regular file on the way, no permission: the user's path
        what = "--out" if out is not None else "export directory"
        raise InputError(
            f"{what} {target}: cannot create its parent directory ({exc.strerror or exc})"
        ) from None
    # DIR.lock beside the directory: made by faithgate (O_EXCL, never truncating a file there);
    # a file of the user's with that name is refused untouched.
    with paths.owned_lock(str(target) + ".lock", "--out"):
        tmp = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
        try:
            t0 = time.perf_counter()
            log(f"loading {spec.role} model {spec.name} (torch, reference)")
            reference = _torch_model(spec, task)
            log(f"exporting {task} with optimum (opset {opset})")
            files, config = _export_fp32(spec, task, reference, tmp, opset, use_cache)
            manifest = ExportManifest(
                role=spec.role,
                task=task,
                source={
                    "name": spec.name,
                    "location": spec.location,
                    "origin": spec.origin,
                    "revision": spec.revision,
                    "fingerprint": spec.fingerprint,
                    "sha256": _weights_sha256(spec),
                },
                opset=opset,
                quantization="none",
                files=files,
                tokenizer_files=sorted(
                    p.name
                    for p in tmp.iterdir()
                    if p.name.startswith(("tokenizer", "special")) or p.suffix in {".txt", ".model"}
                ),
                config=config,
                tools=_versions(),
                created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                format=manifest_format_for(task),
                directory=tmp,
            )
            manifest.save(tmp)
            log(f"measuring parity on {len(triples)} calibration pairs ({calibration_source})")
            ref_scores = probe_scores(reference, triples)
            del reference  # free the torch weights before loading ONNX sessions
            fp32 = OnnxBackend().load_manifest(manifest, threads=threads, provider=device)
            fp32_scores = probe_scores(fp32, triples)
            fp32_tolerance = fp32_gate(tolerance)
            fp32_reports = {
                k: compare(k, ref_scores[k][0], fp32_scores[k][0], ref_scores[k][1], fp32_tolerance)
                for k in ref_scores
            }
            if len(triples) >= MIN_PARITY_PAIRS:  # fp32 on no pairs is exported unmeasured
                # Every quantized form is measured against torch through this graph: one that
                # disagrees would have them all refused and then be published itself (and
                # picked by backend auto). Refused: the previous export, if any, stays.
                wrong = [f"{k}: {r}" for k, rep in fp32_reports.items() for r in rep.reasons]
                if wrong:
                    raise BackendError(
                        f"export of {spec.name!r} refused: the fp32 ONNX graph disagrees with "
                        f"torch ({'; '.join(wrong)}); nothing was written to {target}"
                    )
            parity: dict[str, Any] = {
                "calibration": {"source": calibration_source, "n_pairs": len(triples)},
                "tolerance": asdict(tolerance),
                "onnx_fp32_vs_torch": {k: r.to_dict() for k, r in fp32_reports.items()},
            }
            del fp32
            drop_sessions(tmp)  # the cache holds the session: this frees it
            fp32_bytes = _files_bytes(tmp, files.values())
            parity["file_bytes"] = {"none": fp32_bytes}
            refusals: list[str] = []
            tried: list[str] = []
            for mode in candidates:
                tried.append(mode)
                qfile = {p: quantized_file_name(f, mode) for p, f in files.items()}
                qmanifest = ExportManifest(
                    **{**manifest.to_dict(), "quantization": mode, "files": qfile},
                    directory=tmp,
                )
                try:
                    feeds = quantization_feeds(manifest, mode, triples)
                    recipes = {}
                    for part, name in files.items():
                        log(f"quantizing {name} ({mode})")
                        recipes[part] = quantize_file(
                            mode, tmp / name, tmp / qfile[part], feeds, manifest.task
                        )
                    qmodel = OnnxBackend().load_manifest(
                        qmanifest, threads=threads, provider=device
                    )
                    q_scores = probe_scores(qmodel, triples)
                    del qmodel
                except Exception as exc:
                    # auto: a form that cannot be made here (a missing quantizer package, a
                    # graph the quantizer does not take) is refused like one that fails the
                    # gate, and the next is tried; a mode asked for by name fails.
                    drop_sessions(tmp)
                    _unlink_graphs(tmp, qfile.values())
                    if quant != "auto":
                        raise
                    why = f"could not be made: {' '.join(str(exc).split()) or type(exc).__name__}"
                    refusals.append(f"{mode}: {why}")
                    log(f"{mode} {why}")
                    continue
                drop_sessions(tmp)
                reports = {
                    k: compare(k, ref_scores[k][0], q_scores[k][0], ref_scores[k][1], tolerance)
                    for k in ref_scores
                }
                passed = all(r.passed for r in reports.values())
                parity[f"{mode}_vs_torch"] = {k: r.to_dict() for k, r in reports.items()}
                parity["file_bytes"][mode] = _files_bytes(tmp, qfile.values())
                parity.setdefault("recipes", {})[mode] = recipes
                if passed:
                    _unlink_graphs(tmp, files.values())
                    manifest = qmanifest
                    log(f"{mode} passed the parity gate")
                    break
                why = "; ".join(f"{k}: {r}" for k, rep in reports.items() for r in rep.reasons)
                refusals.append(f"{mode}: {why}")
                _unlink_graphs(tmp, qfile.values())
                log(f"{mode} refused by the parity gate ({why})")
            if candidates:
                parity["tried"] = tried
                parity["quantized"] = manifest.quantization != "none"
                if refusals:
                    parity["refused"] = " | ".join(refusals)
                if manifest.quantization == "none":
                    why = parity["refused"]
                    if require_quantized:
                        raise BackendError(
                            f"{quant} export of {spec.name!r} refused by the parity gate: {why}"
                        )
                    previous = _previous_good_export(target, spec, manifest)
                    if previous is not None:
                        # A re-export whose quantization fails must not replace a quantized
                        # export that passed its own gate with fp32: keep the good one.
                        log(
                            f"{quant} refused ({why}); keeping the previous "
                            f"{previous.quantization} export in {target}"
                        )
                        # What this run refused, beside the kept manifest (not saved in it):
                        # with --json the log is silent, and the old manifest says nothing.
                        kept = {"asked": quant, "refused": why}
                        return replace(previous, parity={**previous.parity, "this_run": kept})
                    log("no quantized form passed the parity gate; keeping fp32")
            parity["export_seconds"] = round(time.perf_counter() - t0, 1)
            manifest.parity = parity
            manifest.directory = target
            manifest.save(tmp)
            models.publish_dir(tmp, target, manifest=MANIFEST_NAME if out is not None else None)
        finally:
            drop_sessions(tmp)
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    forget_manifest(target)
    drop_sessions(target)  # sessions of the files this export replaced
    return load_manifest(target)


__all__ = [
    "DEFAULT_OPSET",
    "MANIFEST_FORMAT",
    "MANIFEST_NAME",
    "MAX_OPSET",
    "MIN_OPSET",
    "ROLE_TASKS",
    "ExportManifest",
    "check_device",
    "check_opset",
    "default_export_dir",
    "export_model",
    "find_export",
    "load_manifest",
    "probe_scores",
]
