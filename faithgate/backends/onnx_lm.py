"""The onnx backend's language models: causal LMs (with a past-key-value cache, so a
shared document prefix runs once) and seq2seq LMs (the encoder run once per distinct input).
Each mirrors its torch reference in ``torch_lm`` step for step."""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from faithgate.backends.base import LanguageModel, special_wrap
from faithgate.backends.lm_graph import SCORE_FROM
from faithgate.backends.manifest import AGAIN, MANIFEST_NAME, ExportManifest
from faithgate.backends.onnx_session import OnnxRole, get_session, import_ort
from faithgate.backends.windowing import batches_by_token_budget, split_by_sizes
from faithgate.errors import BackendError, ModelFileError
from faithgate.models import ModelSpec
from faithgate.threads import onnxruntime_spinning


class OnnxLanguageModel(OnnxRole, LanguageModel):
    """Shared by decoder-only and encoder-decoder ONNX models. The exported graphs carry an
    extra input ``target_ids`` and output ``target_logprobs`` = log_softmax(logits)[target]
    (added at export), so the (batch, length, vocabulary) logits never leave onnxruntime."""

    def __init__(
        self,
        spec: ModelSpec,
        manifest: ExportManifest,
        max_length: int | None = None,
        batch_tokens: int = 4096,
        threads: int | None = None,
        provider: str | None = None,
    ) -> None:
        LanguageModel.__init__(self, spec, backend="onnx", quantization=manifest.quantization)
        self._setup(manifest, threads, provider)
        limit = int(self.config["max_length"])
        self._max_length = min(limit, int(max_length)) if max_length else limit
        self.batch_tokens = int(batch_tokens)

    @property
    def max_length(self) -> int:
        return self._max_length

    def tokenize(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def token_texts(self, ids: Sequence[int]) -> list[str]:
        return [self.tokenizer.decode([int(i)], skip_special_tokens=False) for i in ids]

    def token_offsets(self, text: str) -> list[tuple[int, int]]:
        enc = self.tokenizer.encode(text, add_special_tokens=False)
        return [(int(a), int(b)) for a, b in enc.offsets]

    def special_tokens(self) -> tuple[list[int], list[int]]:
        probe = "a"
        return special_wrap(
            self.tokenizer.encode(probe, add_special_tokens=True).ids, self.tokenize(probe)
        )

    @property
    def bos_token_id(self) -> int | None:
        return self.config.get("bos_id")

    @property
    def eos_token_id(self) -> int | None:
        return self.config.get("eos_id")

    @property
    def pad_id(self) -> int:
        return int(self.config["pad_id"])


class OnnxCausalLM(OnnxLanguageModel):
    """Decoder-only teacher forcing; prefix caching when exported with key/value cache."""

    task = "causal-lm"

    def __init__(self, spec: ModelSpec, manifest: ExportManifest, **options: Any) -> None:
        super().__init__(spec, manifest, **options)
        self.session = self.sessions["model"]
        self.with_past = bool(self.config.get("with_past"))
        self.kv_names = [n for n in sorted(self.input_names["model"]) if n.startswith("past_")]
        self._check_config_fits_graph()
        self.present_names = [
            o.name for o in self.session.get_outputs() if o.name.startswith("present")
        ]
        # Exports made before faithgate added this input score every position.
        self.takes_score_from = SCORE_FROM in self.input_names["model"]
        # w8a32-ctx8: the int8 graph that fills the cache of an unscored prefix (expand.py).
        self.context_session = (
            get_session(
                manifest.path_of("model"),
                options.get("threads"),
                options.get("provider"),
                graph="context-int8",
            )
            if manifest.quantization == "w8a32-ctx8" and self.with_past
            else None
        )
        # On CUDA the key/value cache of a prefix stays on the GPU (IO binding) from the prefix
        # pass to its continuations, and is repeated for a batch there (``_repeat_cache``): no
        # round trip through host memory (on an H200 it halved loglik's model time).
        # None: numpy in and out (the CPU, where binding buys nothing).
        on_cuda = self.session.get_providers()[0] == "CUDAExecutionProvider"
        self.cache_device: str | None = "cuda" if on_cuda and self.with_past else None
        self._repeat_session: Any = None
        self._repeat_lock = threading.Lock()

    def _check_config_fits_graph(self) -> None:
        """``ModelFileError`` (exit 2) where the manifest's cache settings are not the graph's:
        fed as they are, onnxruntime fails on every pass with an error about an input."""
        where = self.manifest.directory / MANIFEST_NAME if self.manifest.directory else "manifest"
        wrong: list[str] = []
        if self.with_past != bool(self.kv_names):
            wrong.append(
                f"with_past is {str(self.with_past).lower()} and the graph has "
                f"{'' if self.kv_names else 'no '}key/value cache inputs"
            )
        elif self.with_past:
            for i in self.session.get_inputs():
                if i.name not in self.kv_names or len(i.shape) != 4:
                    continue
                for axis, key in ((1, "num_kv_heads"), (3, "head_dim")):
                    dim = i.shape[axis]  # a static dimension is an int, a symbolic one a str
                    if isinstance(dim, int) and dim != self.config.get(key):
                        wrong.append(f"{key} is {self.config.get(key)!r}, its graph has {dim}")
                if wrong:
                    break
        if wrong:
            raise ModelFileError(
                f"{where}: config does not match its graph ({'; '.join(wrong)}); {AGAIN}"
            )

    def _empty_past(self, batch: int) -> dict[str, np.ndarray]:
        shape = (batch, int(self.config["num_kv_heads"]), 0, int(self.config["head_dim"]))
        return {name: np.zeros(shape, dtype=np.float32) for name in self.kv_names}

    def _feeds(
        self,
        ids: np.ndarray,
        mask: np.ndarray,
        targets: np.ndarray,
        positions: np.ndarray,
        past: dict[str, np.ndarray] | None = None,
        score_from: int = 0,
    ) -> dict[str, np.ndarray]:
        """The graph's inputs: position ids where it takes them, an empty cache by default,
        every position scored by default."""
        feeds = {"input_ids": ids, "attention_mask": mask, "target_ids": targets}
        if "position_ids" in self.input_names["model"]:
            feeds["position_ids"] = positions
        if self.takes_score_from:
            feeds[SCORE_FROM] = np.array([score_from], dtype=np.int64)
        if self.with_past:
            feeds.update(past if past is not None else self._empty_past(len(ids)))
        return feeds

    def _run(
        self,
        ids: np.ndarray,
        mask: np.ndarray,
        targets: np.ndarray,
        positions: np.ndarray,
        past: dict[str, np.ndarray] | None = None,
        want_present: bool = False,
        score_from: int = 0,
        context: bool = False,
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """``context``: the pass only fills the cache; it runs on the int8 context graph
        where the export has one."""
        feeds = self._feeds(ids, mask, targets, positions, past, score_from)
        session = self.session
        if context and self.context_session is not None:
            session = self.context_session
        elif self.cache_device is not None:
            return self._run_bound(feeds, want_present)
        names = ["target_logprobs"] + (self.present_names if want_present else [])
        outs = session.run(names, feeds)
        present = dict(zip(self.present_names, outs[1:], strict=False)) if want_present else {}
        return outs[0].astype(np.float64), present

    def _run_bound(
        self, feeds: dict[str, Any], want_present: bool
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """``_run`` through IO binding: each input from host memory or, a cache already there,
        from ``cache_device``; the log-probabilities to the host, the cache (``OrtValue``s)
        left on ``cache_device``."""
        ort = import_ort()
        binding = self.session.io_binding()
        for name, value in feeds.items():
            if isinstance(value, ort.OrtValue):
                binding.bind_ortvalue_input(name, value)
            else:
                binding.bind_cpu_input(name, np.ascontiguousarray(value))
        binding.bind_output("target_logprobs", "cpu")
        for name in self.present_names:  # all bound: left unbound they would come to the host
            binding.bind_output(name, self.cache_device)
        self.session.run_with_iobinding(binding)
        outs = binding.get_outputs()
        present = dict(zip(self.present_names, outs[1:], strict=True)) if want_present else {}
        return outs[0].numpy().astype(np.float64), present

    def _repeat_cache(self, past: dict[str, Any], batch: int) -> dict[str, Any]:
        """A one-row key/value cache repeated for ``batch`` rows: numpy on the host, an
        ``Expand`` per tensor on ``cache_device`` for a cache there."""
        if not past or not isinstance(next(iter(past.values())), import_ort().OrtValue):
            return {k: np.repeat(v, batch, axis=0) for k, v in past.items()}
        if batch == 1:
            return past
        names = list(past)
        try:
            session = self._repeat_graph(len(names))
        except ImportError:  # no onnx package to build the graph: repeated on the host
            return {k: np.repeat(v.numpy(), batch, axis=0) for k, v in past.items()}
        binding = session.io_binding()
        for i, name in enumerate(names):
            binding.bind_ortvalue_input(f"x{i}", past[name])
            binding.bind_output(f"y{i}", self.cache_device)
        binding.bind_cpu_input("shape", np.array([batch, 1, 1, 1], dtype=np.int64))
        session.run_with_iobinding(binding)
        return dict(zip(names, binding.get_outputs(), strict=True))

    def _repeat_graph(self, count: int) -> Any:
        """The session of ``y_i = Expand(x_i, shape)`` for ``count`` cache tensors, built once
        (onnx, in the runtime extra), on this model's providers and element type."""
        with self._repeat_lock:
            if self._repeat_session is None:
                from onnx import TensorProto, helper

                kinds = {i.name: i.type for i in self.session.get_inputs()}
                half = kinds.get(self.kv_names[0]) == "tensor(float16)"
                elem = TensorProto.FLOAT16 if half else TensorProto.FLOAT
                dims = ["batch", "heads", "length", "head_dim"]
                graph = helper.make_graph(
                    [
                        helper.make_node("Expand", [f"x{i}", "shape"], [f"y{i}"])
                        for i in range(count)
                    ],
                    "repeat_cache",
                    [helper.make_tensor_value_info(f"x{i}", elem, dims) for i in range(count)]
                    + [helper.make_tensor_value_info("shape", TensorProto.INT64, [4])],
                    [helper.make_tensor_value_info(f"y{i}", elem, None) for i in range(count)],
                )
                model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
                model.ir_version = 8  # what every onnxruntime this code supports reads
                ort = import_ort()
                options = ort.SessionOptions()
                # One CPU thread, sleeping when idle, as every session here (threads.py): the
                # Expands run on the GPU, and a default pool would spin on the CPU's cores.
                options.intra_op_num_threads = 1
                options.add_session_config_entry(
                    "session.intra_op.allow_spinning", onnxruntime_spinning()
                )
                self._repeat_session = ort.InferenceSession(
                    model.SerializeToString(), options, providers=self.session.get_providers()
                )
            return self._repeat_session

    def calibration_feeds(
        self, texts: Sequence[str], max_tokens: int = 512
    ) -> list[dict[str, np.ndarray]]:
        """Model inputs for quantizers that read activations: one feed per text (bos + its
        first ``max_tokens`` tokens), with an empty key/value cache."""
        feeds = []
        bos = [] if self.bos_token_id is None else [int(self.bos_token_id)]
        for t in texts:
            ids = np.array([bos + list(self.tokenize(t))[:max_tokens]], dtype=np.int64)
            positions = np.arange(ids.shape[1], dtype=np.int64)[None, :]
            feeds.append(self._feeds(ids, np.ones_like(ids), np.zeros_like(ids), positions))
        return feeds

    def _next_token_logprobs(self, rows: list[list[int]]) -> list[np.ndarray]:
        ids, mask = self._pad(rows, self.pad_id)
        targets = np.zeros_like(ids)
        targets[:, :-1] = ids[:, 1:]  # position t predicts token t+1
        positions = np.broadcast_to(np.arange(ids.shape[1]), ids.shape).astype(np.int64)
        lp, _ = self._run(ids, mask, targets, np.ascontiguousarray(positions))
        return [lp[r, : len(row) - 1] if row else np.zeros(0) for r, row in enumerate(rows)]

    def _prefix_cache(
        self, tokens: Sequence[int], targets: Sequence[int], score_prefix: bool
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """The key/value cache of ``tokens`` (as ``past_key_values.*`` feeds) and, with
        ``score_prefix``, the log-probabilities of ``targets`` (token t+1 at position t).

        Run only for its cache, the prefix skips the LM head where the export allows (on all
        but its last position: an empty head input trips quantized kernels), and runs on the
        int8 context graph where the export has one (``w8a32-ctx8``)."""
        ids = np.array([tokens], dtype=np.int64)
        skip = 0 if score_prefix or not self.takes_score_from else ids.shape[1] - 1
        lp, cache = self._run(
            ids,
            np.ones_like(ids),
            np.array([targets], dtype=np.int64),
            np.arange(ids.shape[1], dtype=np.int64)[None, :],
            want_present=True,
            score_from=skip,
            context=not score_prefix,
        )
        return lp[0], {k.replace("present", "past_key_values"): v for k, v in cache.items()}

    def prefix_logprobs(
        self,
        prefix: Sequence[int],
        continuations: Sequence[Sequence[Sequence[int]]],
        score_prefix: bool = True,
    ) -> tuple[np.ndarray, list[list[np.ndarray]]]:
        prefix = [int(t) for t in prefix]
        if not prefix:
            return np.zeros(0), self.segment_logprobs(continuations)
        flat = self._flat_within_window(continuations, len(prefix))
        if not self.with_past or len(prefix) == 1:
            # No cache in this export (or nothing worth caching): score prefix + continuation
            # in full; equal values, more compute.
            if not continuations:
                lp = self.segment_logprobs([[prefix]])[0][0] if score_prefix else np.zeros(0)
                return lp, []
            full = self.segment_logprobs([[prefix, *segs] for segs in continuations])
            return (full[0][0] if score_prefix else np.zeros(0)), [row[1:] for row in full]
        # The cache holds prefix[:-1]; every continuation row re-feeds prefix[-1] so that its
        # first position predicts the first continuation token (the torch backend reads that
        # from the prefix pass; the values agree within float rounding).
        lp, past = self._prefix_cache(prefix[:-1], prefix[1:], score_prefix)
        prefix_lp = np.concatenate([[math.nan], lp]) if score_prefix else np.zeros(0)
        past_len = len(prefix) - 1
        results: list[list[np.ndarray]] = [[] for _ in continuations]
        for idx in batches_by_token_budget(
            [len(ids) + len(prefix) for ids in flat], self.batch_tokens
        ):
            rows = [[prefix[-1], *flat[i]] for i in idx]
            b = len(rows)
            ids, row_mask = self._pad(rows, self.pad_id)
            targets = np.zeros_like(ids)
            targets[:, :-1] = ids[:, 1:]
            mask = np.concatenate([np.ones((b, past_len), np.int64), row_mask], axis=1)
            positions = np.broadcast_to(
                np.arange(past_len, past_len + ids.shape[1]), ids.shape
            ).astype(np.int64)
            batch_past = self._repeat_cache(past, b)
            lp, _ = self._run(ids, mask, targets, np.ascontiguousarray(positions), batch_past)
            for r, i in enumerate(idx):
                n = len(flat[i])
                results[i] = split_by_sizes(lp[r, :n], [len(s) for s in continuations[i]])
        return prefix_lp, results


class OnnxSeq2SeqLM(OnnxLanguageModel):
    """Encoder-decoder teacher forcing: encoder graph once, decoder graph on the target."""

    task = "seq2seq-lm"

    @property
    def max_target_length(self) -> int:
        return self.max_length

    @property
    def decoder_start_token_id(self) -> int | None:
        start = self.config.get("decoder_start_id")
        return int(self.pad_id if start is None else start)

    def seq2seq_logprobs(
        self, batch: Sequence[tuple[Sequence[int], Sequence[int]]]
    ) -> list[np.ndarray]:
        start = self.decoder_start_token_id
        results: list[np.ndarray] = [np.zeros(0)] * len(batch)
        for enc, tgt in batch:
            if len(enc) > self.max_length or len(tgt) > self.max_target_length:
                raise BackendError(
                    f"encoder input of {len(enc)} / target of {len(tgt)} tokens exceeds the "
                    f"model window {self.max_length}"
                )
        hidden = self._encode_once([e for e, t in batch if len(t)])
        lengths = [max(len(e), len(t)) for e, t in batch]
        pair_lengths = [(len(e), len(t)) for e, t in batch]  # both sides unpadded
        for idx in batches_by_token_budget(lengths, self.batch_tokens, keys=pair_lengths):
            rows = [(list(map(int, batch[i][0])), list(map(int, batch[i][1]))) for i in idx]
            if all(not t for _, t in rows):
                continue
            enc_ids, enc_mask = self._pad([e for e, _ in rows], self.pad_id)
            states = np.stack([hidden[tuple(e)] for e, _ in rows])
            dec_rows = [[start, *t[:-1]][: len(t)] for _, t in rows]
            dec_in, _ = self._pad(dec_rows, self.pad_id)
            targets, _ = self._pad([t for _, t in rows], self.pad_id)
            feeds = {
                "input_ids": dec_in,
                "encoder_hidden_states": states,
                "encoder_attention_mask": enc_mask,
                "target_ids": targets,
            }
            feeds = {k: v for k, v in feeds.items() if k in self.input_names["decoder"]}
            (lp,) = self.sessions["decoder"].run(["target_logprobs"], feeds)
            for r, i in enumerate(idx):
                results[i] = lp[r, : len(rows[r][1])].astype(np.float64)
        return results

    def _encode_once(self, inputs: Sequence[Sequence[int]]) -> dict[tuple[int, ...], np.ndarray]:
        """Encoder states of each distinct input, run once: a source shared by several
        targets (its summaries, its y and x passes) and the empty source shared by every
        summary's y_lm were encoded once per target. Batched by equal length, as the decoder
        (no padding, so a state never depends on its batch)."""
        distinct = sorted({tuple(int(i) for i in e) for e in inputs})
        states: dict[tuple[int, ...], np.ndarray] = {}
        for idx in batches_by_token_budget([len(e) for e in distinct], self.batch_tokens):
            enc_ids, enc_mask = self._pad([distinct[i] for i in idx], self.pad_id)
            (hidden,) = self.sessions["encoder"].run(
                ["last_hidden_state"], {"input_ids": enc_ids, "attention_mask": enc_mask}
            )
            for r, i in enumerate(idx):
                states[distinct[i]] = hidden[r]
        return states
