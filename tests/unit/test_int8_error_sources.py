"""benchmarks/int8_error_sources.py: each variant's change of basis is exact before rounding, so
the errors it reports come from the int8 rounding it simulates and nothing else."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "int8_error_sources.py"


def _load_script():
    spec = importlib.util.spec_from_file_location("int8_error_sources", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tiny_llama(torch, transformers):
    config = transformers.LlamaConfig(
        vocab_size=97,
        hidden_size=128,  # blocks of 64 and per-head rotations of 32 must tile it
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
    )
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    with torch.no_grad():  # gains other than 1, so folding them into the weights is tested
        for layer in model.model.layers:
            layer.input_layernorm.weight.uniform_(0.5, 1.5)
            layer.post_attention_layernorm.weight.uniform_(0.5, 1.5)
    return model


def test_every_variant_is_the_fp32_model_when_nothing_is_rounded(torch, transformers, monkeypatch):
    script = _load_script()
    model = _tiny_llama(torch, transformers)
    ids = torch.randint(0, 97, (1, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        reference = model(input_ids=ids).logits
        fake = script.FakeQuant(model, [{"input_ids": ids}])
        assert torch.equal(model(input_ids=ids).logits, reference)  # hooks idle until configured
        monkeypatch.setattr(script, "_fake_int8", lambda x, block=None: x)
        for variant in script.VARIANTS:
            fake.configure(variant)
            logits = model(input_ids=ids).logits
            assert torch.allclose(logits, reference, atol=1e-4), variant
        monkeypatch.undo()
        for variant in script.VARIANTS:
            fake.configure(variant)
            assert not torch.allclose(model(input_ids=ids).logits, reference, atol=1e-6), variant


def test_int8_round_trip_scales_per_row_or_block(torch):
    script = _load_script()
    x = torch.tensor([[1.0, -0.5, 0.25, 100.0], [0.003, 0.002, -0.001, 0.0]])
    per_row = script._fake_int8(x)
    assert torch.equal(per_row[0, 3], torch.tensor(100.0))  # the row's max is on the grid
    assert per_row[0, 2] == 0.0  # 0.25 is under half a step of 100/127
    per_block = script._fake_int8(x, 2)
    assert torch.allclose(per_block[0, :2], x[0, :2], atol=1 / 127)  # its own block's scale
    assert torch.allclose(per_row[1], x[1], atol=0.003 / 127)
