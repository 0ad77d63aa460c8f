"""PyTorch + transformers language models: teacher-forced token log-probabilities.

Implements the token-level ``LanguageModel`` interface (see ``faithgate.backends.base``):

- ``TorchCausalLM`` (task ``causal-lm``): decoder-only models (the ``lm`` role, default
  SmolLM2-135M-Instruct). ``segment_logprobs`` batches right-padded sequences (right padding
  never changes a causal model's earlier positions, and positions start at 0 for every row);
  ``prefix_logprobs`` runs a shared prefix once and reuses its key/value cache for every
  continuation, batched with the cache repeated along the batch axis.
- ``TorchSeq2SeqLM`` (task ``seq2seq-lm``): encoder-decoder models (the ``seq2seq`` role: any
  BART / T5 / Pegasus hub id or local directory, e.g. the summarizer under test).

The vocabulary projection is applied in row chunks to the hidden states, so a 2k-token
sequence with a 50k vocabulary never materialises a (T, V) float tensor per batch row.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from faithgate.backends.base import LanguageModel, offsets_by_decoding, special_wrap
from faithgate.backends.torch_common import import_torch, load_hf_model, load_tokenizer
from faithgate.backends.windowing import batches_by_token_budget, bucket_width, split_by_sizes
from faithgate.errors import BackendError, ConfigError
from faithgate.models import ModelSpec

# model_type values whose CausalLM forward is lm_head(base_model(...)) with nothing else.
_PLAIN_HEAD_TYPES = frozenset(
    {
        "llama",
        "mistral",
        "qwen2",
        "qwen3",
        "gpt2",
        "gpt_neox",
        "phi3",
        "olmo",
        "olmo2",
        "smollm3",
        "starcoder2",
        "stablelm",
    }
)
# Rows of hidden states projected to the vocabulary at once (bounds peak memory).
_HEAD_CHUNK = 512


def _model_limit(config: Any, tokenizer: Any, default: int = 2048) -> int:
    for attr in ("max_position_embeddings", "n_positions", "max_sequence_length"):
        value = getattr(config, attr, None)
        if isinstance(value, int) and value > 0:
            return value
    tok_limit = getattr(tokenizer, "model_max_length", None)
    if isinstance(tok_limit, int) and 0 < tok_limit < 1_000_000:
        return tok_limit
    return default


class _TorchLMBase(LanguageModel):
    def __init__(
        self,
        spec: ModelSpec,
        auto_class_name: str,
        max_length: int | None = None,
        batch_tokens: int = 4096,
        threads: int | None = None,
    ) -> None:
        super().__init__(spec, backend="torch")
        self.torch = import_torch()
        import transformers

        if threads:
            self.torch.set_num_threads(int(threads))
        self.tokenizer = load_tokenizer(spec)
        self.model = load_hf_model(spec, getattr(transformers, auto_class_name), self.task)
        limit = _model_limit(self.model.config, self.tokenizer)
        self._max_length = min(limit, int(max_length)) if max_length else limit
        # Padded tokens per forward pass: bounds memory and keeps batches CPU-friendly.
        self.batch_tokens = int(batch_tokens)

    @property
    def max_length(self) -> int:
        return self._max_length

    def tokenize(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def token_texts(self, ids: Sequence[int]) -> list[str]:
        return [self.tokenizer.decode([int(i)]) for i in ids]

    def token_offsets(self, text: str) -> list[tuple[int, int]]:
        if getattr(self.tokenizer, "is_fast", False):
            enc = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
            return [(int(a), int(b)) for a, b in enc["offset_mapping"]]
        # A slow (Python) tokenizer keeps no offsets: decode growing prefixes instead.
        return offsets_by_decoding(text, self.tokenize(text), self.tokenizer.decode)

    def special_tokens(self) -> tuple[list[int], list[int]]:
        probe = "a"
        return special_wrap(self.tokenizer(probe)["input_ids"], self.tokenize(probe))

    @property
    def bos_token_id(self) -> int | None:
        bos = self.tokenizer.bos_token_id
        if bos is None:
            bos = getattr(self.model.config, "bos_token_id", None)
        return None if bos is None else int(bos)

    @property
    def eos_token_id(self) -> int | None:
        eos = self.tokenizer.eos_token_id
        if eos is None:
            eos = getattr(self.model.config, "eos_token_id", None)
        if isinstance(eos, list):
            eos = eos[0] if eos else None
        return None if eos is None else int(eos)

    @property
    def pad_id(self) -> int:
        for candidate in (self.tokenizer.pad_token_id, self.eos_token_id, 0):
            if candidate is not None:
                return int(candidate)
        return 0

    # Set by subclasses: True when ``_gather_logprobs`` receives hidden states (the head is
    # applied here), False when it receives the model's own logits.
    _head_here = False

    def _gather_logprobs(self, states: Any, targets: Any) -> Any:
        """log_softmax of the logits at ``targets``; states (N, d or V), targets (N,) -> (N,).

        With ``_head_here`` the vocabulary head is applied chunk by chunk to hidden states."""
        torch = self.torch
        head = self.model.get_output_embeddings()
        out = torch.empty(states.shape[0], dtype=torch.float64)
        for s in range(0, states.shape[0], _HEAD_CHUNK):
            chunk = states[s : s + _HEAD_CHUNK]
            logits = (head(chunk) if self._head_here else chunk).float()
            logp = torch.log_softmax(logits, dim=-1)
            out[s : s + _HEAD_CHUNK] = (
                logp.gather(-1, targets[s : s + _HEAD_CHUNK].unsqueeze(-1)).squeeze(-1).double()
            )
        return out


class TorchCausalLM(_TorchLMBase):
    """Decoder-only teacher forcing with batching and key/value prefix reuse."""

    task = "causal-lm"

    def __init__(self, spec: ModelSpec, **options: Any) -> None:
        super().__init__(spec, "AutoModelForCausalLM", **options)
        if self.model.config.is_encoder_decoder:
            raise BackendError(
                f"{spec.role} model {spec.name!r} is an encoder-decoder; "
                "configure it as the seq2seq role"
            )

        # Architectures whose causal-LM head is exactly ``lm_head(base_model(x))``: for these
        # the head is applied only to the rows that are scored, in chunks. Any other model
        # (logit scaling, soft-capping, custom heads) goes through its own forward.
        self._head_here = (
            getattr(self.model.config, "model_type", "") in _PLAIN_HEAD_TYPES
            and self.model.get_output_embeddings() is not None
            and self.model.base_model is not self.model
        )

    def _hidden(self, input_ids: Any, attention_mask: Any, **kwargs: Any) -> Any:
        """(hidden states or logits, model output); see ``_head_here``."""
        if self._head_here:
            out = self.model.base_model(
                input_ids=input_ids, attention_mask=attention_mask, **kwargs
            )
            return out.last_hidden_state, out
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
        return out.logits, out

    def _next_token_logprobs(self, rows: list[list[int]]) -> list[np.ndarray]:
        torch = self.torch
        width = max(len(r) for r in rows)
        input_ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for r, ids in enumerate(rows):
            input_ids[r, : len(ids)] = torch.tensor(ids, dtype=torch.long)
            mask[r, : len(ids)] = 1
        with torch.inference_mode():
            hidden, _ = self._hidden(input_ids, mask)
            # Position t predicts token t+1: gather only real (unpadded) positions.
            sel_rows, sel_pos = [], []
            for r, ids in enumerate(rows):
                for t in range(len(ids) - 1):
                    sel_rows.append(r)
                    sel_pos.append(t)
            if sel_rows:
                rr = torch.tensor(sel_rows)
                pp = torch.tensor(sel_pos)
                lp = self._gather_logprobs(hidden[rr, pp], input_ids[rr, pp + 1]).numpy()
            else:
                lp = np.zeros(0)
        out, offset = [], 0
        for ids in rows:
            n = max(len(ids) - 1, 0)
            out.append(lp[offset : offset + n])
            offset += n
        return out

    def prefix_logprobs(
        self,
        prefix: Sequence[int],
        continuations: Sequence[Sequence[Sequence[int]]],
        score_prefix: bool = True,
    ) -> tuple[np.ndarray, list[list[np.ndarray]]]:
        torch = self.torch
        prefix = [int(t) for t in prefix]
        if not prefix:  # nothing to cache
            return np.zeros(0), self.segment_logprobs(continuations)
        flat = self._flat_within_window(continuations, len(prefix))
        p_ids = torch.tensor([prefix], dtype=torch.long)
        with torch.inference_mode():
            hidden, out = self._hidden(p_ids, torch.ones_like(p_ids), use_cache=True)
            cache = out.past_key_values
            # Prefix tokens 1.. and the first continuation token are predicted by these rows.
            last_hidden = hidden[0, -1:]
            if len(prefix) > 1 and score_prefix:
                prefix_lp = self._gather_logprobs(hidden[0, :-1], p_ids[0, 1:]).numpy()
            else:
                prefix_lp = np.zeros(0)
        if score_prefix:
            prefix_lp = np.concatenate([[math.nan], prefix_lp])
        results: list[list[np.ndarray]] = [[] for _ in continuations]
        n_pre = len(prefix)
        # Continuations are padded to a width set by their own length (bucket_width), not by
        # the longest of the batch, and batched by that width: a continuation's log-probs do
        # not depend on which other summaries of this source are scored with it.
        widths = [bucket_width(len(ids)) for ids in flat]
        for idx in batches_by_token_budget([w + n_pre for w in widths], self.batch_tokens):
            rows = [flat[i] for i in idx]
            width = widths[idx[0]]
            if width == 0:
                for i in idx:
                    results[i] = [np.zeros(0) for _ in continuations[i]]
                continue
            b = len(rows)
            input_ids = torch.full((b, width), self.pad_id, dtype=torch.long)
            mask = torch.zeros((b, n_pre + width), dtype=torch.long)
            mask[:, :n_pre] = 1
            for r, ids in enumerate(rows):
                if ids:
                    input_ids[r, : len(ids)] = torch.tensor(ids, dtype=torch.long)
                mask[r, n_pre : n_pre + len(ids)] = 1
            positions = torch.arange(n_pre, n_pre + width).unsqueeze(0).expand(b, -1)
            # The forward pass appends to the cache in place: give each batch its own copy.
            batch_cache = copy.deepcopy(cache)
            if b > 1:
                batch_cache.batch_repeat_interleave(b)
            with torch.inference_mode():
                hidden, _ = self._hidden(
                    input_ids,
                    mask,
                    past_key_values=batch_cache,
                    position_ids=positions,
                    use_cache=True,
                )
                sel_h, sel_t = [], []
                for r, ids in enumerate(rows):
                    if not ids:
                        continue
                    # First continuation token: predicted by the prefix's last position.
                    sel_h.append(last_hidden)
                    sel_t.append(input_ids[r, :1])
                    if len(ids) > 1:
                        sel_h.append(hidden[r, : len(ids) - 1])
                        sel_t.append(input_ids[r, 1 : len(ids)])
                lp = self._gather_logprobs(torch.cat(sel_h), torch.cat(sel_t)).numpy()
            offset = 0
            for r, i in enumerate(idx):
                n = len(rows[r])
                results[i] = split_by_sizes(
                    lp[offset : offset + n], [len(s) for s in continuations[i]]
                )
                offset += n
        return prefix_lp, results


class TorchSeq2SeqLM(_TorchLMBase):
    """Encoder-decoder teacher forcing (BART, T5, Pegasus, ...)."""

    task = "seq2seq-lm"

    def __init__(self, spec: ModelSpec, **options: Any) -> None:
        super().__init__(spec, "AutoModelForSeq2SeqLM", **options)
        from transformers.modeling_outputs import BaseModelOutput

        self._encoder_output = BaseModelOutput

    @property
    def max_target_length(self) -> int:
        return self.max_length

    @property
    def decoder_start_token_id(self) -> int | None:
        start = getattr(self.model.config, "decoder_start_token_id", None)
        if start is None:
            start = self.pad_id
        return int(start)

    def seq2seq_logprobs(
        self, batch: Sequence[tuple[Sequence[int], Sequence[int]]]
    ) -> list[np.ndarray]:
        torch = self.torch
        start = self.decoder_start_token_id
        results: list[np.ndarray] = [np.zeros(0)] * len(batch)
        lengths = [max(len(e), len(t)) for e, t in batch]
        for enc, tgt in batch:
            if len(enc) > self.max_length or len(tgt) > self.max_target_length:
                raise BackendError(
                    f"encoder input of {len(enc)} / target of {len(tgt)} tokens exceeds the "
                    f"model window {self.max_length}"
                )
        pair_lengths = [(len(e), len(t)) for e, t in batch]  # both sides unpadded
        states = self._encode_once([e for e, t in batch if len(t)])
        for idx in batches_by_token_budget(lengths, self.batch_tokens, keys=pair_lengths):
            rows = [(list(map(int, batch[i][0])), list(map(int, batch[i][1]))) for i in idx]
            if all(not t for _, t in rows):
                continue
            b = len(rows)
            enc_w = max(1, max(len(e) for e, _ in rows))
            dec_w = max(1, max(len(t) for _, t in rows))
            enc_ids = torch.full((b, enc_w), self.pad_id, dtype=torch.long)
            enc_mask = torch.zeros((b, enc_w), dtype=torch.long)
            dec_in = torch.full((b, dec_w), self.pad_id, dtype=torch.long)
            dec_mask = torch.zeros((b, dec_w), dtype=torch.long)
            for r, (e, t) in enumerate(rows):
                enc_ids[r, : len(e)] = torch.tensor(e, dtype=torch.long)
                enc_mask[r, : len(e)] = 1
                shifted = [start, *t[:-1]]
                dec_in[r, : len(t)] = torch.tensor(shifted[: len(t)], dtype=torch.long)
                dec_mask[r, : len(t)] = 1
            with torch.inference_mode():
                hidden = torch.stack([states[tuple(e)] for e, _ in rows])
                out = self.model(
                    encoder_outputs=self._encoder_output(last_hidden_state=hidden),
                    attention_mask=enc_mask,
                    decoder_input_ids=dec_in,
                    decoder_attention_mask=dec_mask,
                )
                lp = self._seq2seq_gather(out, rows)
            offset = 0
            for r, i in enumerate(idx):
                n = len(rows[r][1])
                results[i] = lp[offset : offset + n]
                offset += n
        return results

    def _encode_once(self, inputs: Sequence[Sequence[int]]) -> dict[tuple[int, ...], Any]:
        """Encoder states of each distinct input, run once (a source shared by several
        targets, the empty source by every y_lm target); batched by equal length, so a state
        never depends on its batch."""
        torch = self.torch
        distinct = sorted({tuple(int(i) for i in e) for e in inputs})
        encoder = self.model.get_encoder()
        states: dict[tuple[int, ...], Any] = {}
        for idx in batches_by_token_budget([len(e) for e in distinct], self.batch_tokens):
            ids = torch.tensor([distinct[i] for i in idx], dtype=torch.long)
            with torch.inference_mode():
                hidden = encoder(input_ids=ids, attention_mask=torch.ones_like(ids))[0]
            for r, i in enumerate(idx):
                states[distinct[i]] = hidden[r]
        return states

    def _seq2seq_gather(self, out: Any, rows: list[tuple[list[int], list[int]]]) -> np.ndarray:
        """Log-probs from the model's own logits: encoder-decoders differ in how the head is
        applied (T5 rescales tied embeddings, BART adds a final_logits_bias), so the full
        logits the model computed are the safe source."""
        torch = self.torch
        pieces = []
        for r, (_, t) in enumerate(rows):
            if not t:
                continue
            logp = torch.log_softmax(out.logits[r, : len(t)].float(), dim=-1)
            pieces.append(
                logp.gather(-1, torch.tensor(t, dtype=torch.long).unsqueeze(-1))
                .squeeze(-1)
                .double()
            )
        return torch.cat(pieces).numpy() if pieces else np.zeros(0)


def load_language_model(spec: ModelSpec, task: str, **options: Any) -> LanguageModel:
    """Load ``spec`` as a causal (``causal-lm``) or encoder-decoder (``seq2seq-lm``) scorer.

    Options: ``max_length`` (cap the window below the model's), ``batch_tokens`` (padded
    tokens per forward pass, default 4096), ``threads`` (torch intra-op threads).
    """
    allowed = {"max_length", "batch_tokens", "threads"}
    unknown = set(options) - allowed
    if unknown:
        raise ConfigError(
            f"model_options.{spec.role}: the torch {task} model takes no option "
            f"{', '.join(sorted(unknown))}; it takes: {', '.join(sorted(allowed))}"
        )
    if task == "causal-lm":
        return TorchCausalLM(spec, **options)
    if task == "seq2seq-lm":
        return TorchSeq2SeqLM(spec, **options)
    raise BackendError(f"the torch language-model loader has no task {task!r}")
