"""Where an 8-bit causal LM's log-probability error comes from (issue 13), simulated in torch.

faithgate's fast LM form (``w8a8``: int8 weights per output channel x int8 activations per
token, SmoothQuant-smoothed) moves SmolLM2's mean log-probability by ~0.04 nats and its
minimal-pair gaps by ~0.035, three times the weight-only ``w8a32``: the parity gate refuses it.
This fake-quantizes every linear layer's input and/or weight in torch (round to the int8 grid
and back, fp32 arithmetic), one source of error at a time, so each row says what that source
alone costs:

- ``w8_channel``: weights per output channel, activations fp32;
- ``a8_token``: activations per token (SmoothQuant alpha 0.5, Xiao et al. 2023), weights fp32;
- ``w8a8``: both, the exported ``w8a8`` form (its ONNX export measures the same error);
- ``w8a8_rotated``: both, after QuaRot-style rotations (Ashkboos et al. 2024) that spread
  outlier channels: the residual stream by a random orthogonal matrix (RMSNorm gains folded into
  the next weights), the attention output by one random 64 x 64 rotation per head, the MLP's
  gated product in blocks of 128. This measures accuracy only: an exported graph could fold
  the per-head rotations into the v/o projections only if heads sharing a key/value head shared
  one, and the gated product's would be an extra MatMul at run time;
- ``a8_block64``: activations with one scale per token and block of 64 inputs, weights fp32;
- ``w8a8_block64``: weights and activations in blocks of 64 (onnxruntime's ``MatMulNBits`` at
  ``accuracy_level`` 4), smoothed.

Reference: the same model in fp32. Pairs: the 12 built-in calibration triples and a seeded
sample of Falke 2019 pairs (never BUMP, which judges the exports). Reported per row: mean
|diff| of the mean log-probability, mean and max |diff| of the (faithful - edited) gap, and
pairs whose order flips. The figures are in onnx_models/README.md.

    python benchmarks/int8_error_sources.py [--falke ../shared/data/falke2019.jsonl] [--pairs 30]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from faithgate.backends.quantize.smoothquant import smoothing_scales

VARIANTS = ("w8_channel", "a8_token", "w8a8", "w8a8_rotated", "a8_block64", "w8a8_block64")
BLOCK = 64


def _fake_int8(x, axis_block: int | None = None):
    """Symmetric int8 round trip of ``x`` with one scale per row of its last axis, or per
    ``axis_block`` consecutive entries of it."""
    import torch

    shape = x.shape
    if axis_block:
        x = x.reshape(*shape[:-1], shape[-1] // axis_block, axis_block)
    scale = x.abs().amax(-1, keepdim=True).clamp_min(1e-8) / 127
    return (torch.round(x / scale).clamp(-127, 127) * scale).reshape(shape)


def _orthogonal(n: int, block: int, gen):
    """Block-diagonal random orthogonal matrix (QR of Gaussian blocks, sign-fixed)."""
    import torch

    block = min(block, n)
    if n % block:
        raise ValueError(f"rotation blocks of {block} do not tile {n} channels")
    blocks = []
    for _ in range(n // block):
        q, r = torch.linalg.qr(torch.randn(block, block, generator=gen, dtype=torch.float64))
        blocks.append((q * torch.sign(torch.diag(r))).float())
    return torch.block_diag(*blocks)


class FakeQuant:
    """Forward pre-hooks that feed each linear layer q_a(x_b) and give it the weight q_w(W_b),
    where x_b = (x / d) @ B and W_b = W diag(d) B^-T, so that x_b @ W_b^T = x @ W^T before
    rounding: B = diag(1/s) for SmoothQuant, a rotation for QuaRot (d: the RMSNorm gain folded
    into the weight), the identity otherwise. q_a / q_w: int8 round trips (``_fake_int8``)."""

    def __init__(self, hf_model, calibration_inputs: list[dict]) -> None:
        import torch

        self.linears = {
            n: m
            for n, m in hf_model.named_modules()
            if isinstance(m, torch.nn.Linear) and "lm_head" not in n
        }
        self.weights = {n: m.weight.data.clone() for n, m in self.linears.items()}
        self.config = hf_model.config
        self.gains: dict = {}  # the RMSNorm gain that feeds each projection
        for i, layer in enumerate(hf_model.model.layers):
            for p in ("q_proj", "k_proj", "v_proj"):
                self.gains[f"model.layers.{i}.self_attn.{p}"] = layer.input_layernorm.weight.data
            for p in ("gate_proj", "up_proj"):
                self.gains[f"model.layers.{i}.mlp.{p}"] = layer.post_attention_layernorm.weight.data
        self.maxima = self._input_maxima(hf_model, calibration_inputs)
        self.plan: dict[str, tuple] = {}
        for name, module in self.linears.items():
            module.register_forward_pre_hook(lambda m, args, name=name: self._hook(name, args))

    def _input_maxima(self, hf_model, inputs: list[dict]) -> dict:
        """Per input channel max |x| of every linear layer over the model ``inputs``
        (SmoothQuant's activation statistics)."""
        import torch

        maxima: dict = {}

        def record(name, args):
            x = args[0].detach().abs().reshape(-1, args[0].shape[-1]).amax(0)
            maxima[name] = torch.maximum(maxima[name], x) if name in maxima else x

        hooks = [
            m.register_forward_pre_hook(lambda m, args, name=name: record(name, args))
            for name, m in self.linears.items()
        ]
        with torch.no_grad():
            for feed in inputs:
                hf_model(**feed)
        for h in hooks:
            h.remove()
        return maxima

    def configure(self, variant: str) -> None:
        import torch

        gen = torch.Generator().manual_seed(0)
        rotated = variant == "w8a8_rotated"
        width, head = self.config.hidden_size, self.config.head_dim
        residual = _orthogonal(width, width, gen) if rotated else None
        per_head = (
            _orthogonal(self.config.num_attention_heads * head, head, gen) if rotated else None
        )
        quant_w = variant in ("w8_channel", "w8a8", "w8a8_rotated", "w8a8_block64")
        quant_a = variant != "w8_channel"
        block = BLOCK if variant.endswith("block64") else None
        for name, module in self.linears.items():
            w = self.weights[name]
            d, basis = torch.ones(w.shape[1]), None
            if rotated:
                if name in self.gains:
                    d, basis = self.gains[name], residual
                elif name.endswith("o_proj"):
                    basis = per_head
                else:  # down_proj: the gated product, rotated in blocks of 128
                    basis = _orthogonal(w.shape[1], 128, gen)
            elif variant in ("a8_token", "w8a8", "w8a8_block64"):
                s = smoothing_scales(self.maxima[name].numpy(), w.abs().amax(0).numpy())
                basis = torch.diag(1.0 / torch.from_numpy(s))
            w_b = w * d if basis is None else (w * d) @ torch.linalg.inv(basis).T
            module.weight.data = _fake_int8(w_b, block) if quant_w else w_b
            self.plan[name] = (quant_a, d, basis, block)

    def _hook(self, name: str, args):
        if name not in self.plan:  # not configured yet: the fp32 model
            return None
        quant_a, d, basis, block = self.plan[name]
        x = args[0] if basis is None else (args[0] / d) @ basis
        return (_fake_int8(x, block) if quant_a else x,)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--falke", default="../shared/data/falke2019.jsonl")
    parser.add_argument("--pairs", type=int, default=30, help="Falke pairs (seeded sample)")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--out", help="also write the rows as JSON lines here")
    args = parser.parse_args(argv)

    import torch

    from faithgate import models
    from faithgate.backends.export import probe_scores
    from faithgate.backends.quantize.parity import BUILTIN_CALIBRATION, load_calibration
    from faithgate.backends.torch_backend import TorchBackend

    torch.set_num_threads(2)
    triples = load_calibration(None)
    if Path(args.falke).is_file():
        triples += load_calibration(args.falke, n_pairs=args.pairs)
    lm = TorchBackend().load(models.resolve("lm"), "causal-lm")
    with torch.no_grad():
        ref = probe_scores(lm, triples)["mean_logprob"][0]
        texts = [t for triple in BUILTIN_CALIBRATION for t in triple]
        fake = FakeQuant(lm.model, [lm.tokenizer(t, return_tensors="pt") for t in texts])
        rows = []
        print(f"{len(triples)} pairs; reference: torch fp32", file=sys.stderr)
        print(
            "| variant | mean \\|diff\\| nats | gap \\|diff\\| mean | gap \\|diff\\| max | flips |"
        )
        print("|---|---:|---:|---:|---:|")
        for variant in args.variants.split(","):
            t0 = time.perf_counter()
            fake.configure(variant)
            scores = probe_scores(lm, triples)["mean_logprob"][0]
            gap_ref, gap = ref[:, 0] - ref[:, 1], scores[:, 0] - scores[:, 1]
            row = {
                "variant": variant,
                "pairs": len(triples),
                "mean_abs_diff": float(np.abs(scores - ref).mean()),
                "gap_abs_diff_mean": float(np.abs(gap - gap_ref).mean()),
                "gap_abs_diff_max": float(np.abs(gap - gap_ref).max()),
                "flips": int(((gap > 0) != (gap_ref > 0)).sum()),
                "seconds": round(time.perf_counter() - t0, 1),
            }
            rows.append(row)
            print(
                f"| {variant} | {row['mean_abs_diff']:.4f} | {row['gap_abs_diff_mean']:.4f} | "
                f"{row['gap_abs_diff_max']:.4f} | {row['flips']} |",
                flush=True,
            )
    if args.out:
        Path(args.out).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
