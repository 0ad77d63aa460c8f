"""A vector, and so a score, is the same bits whatever shares its forward pass and
however many threads run it, on the CPU that runs the suite (AVX-512 Intel and AVX2 AMD alike).

Each probe runs in a fresh interpreter that imports faithgate before torch, as every faithgate
process does, with the user's ``MKL_CBWR`` removed: what is checked is faithgate's own setting
(faithgate/threads.py). On an Intel Xeon with AVX-512, ``MKL_CBWR=AUTO`` (the setting before
issue 44) made 20 projection shapes and 6 MiniLM batches differ; ``AUTO,STRICT`` makes none.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

# Rows of MiniLM's three projection shapes alone, in a product 4x as tall, and on 1 thread
# against 2: counts of shapes whose rows differ in any bit.
PROJECTIONS = """
import json, faithgate, torch
torch.manual_seed(0)
company = threads = 0
for k, n in [(384, 384), (384, 1536), (1536, 384)]:
    lin = torch.nn.Linear(k, n)
    with torch.no_grad():
        for rows in range(5, 60, 3):
            x = torch.randn(4 * rows, k)
            torch.set_num_threads(2)
            two = lin(x)
            company += int(not torch.equal(lin(x[:rows]), two[:rows]))
            torch.set_num_threads(1)
            threads += int(not torch.equal(lin(x), two))
print(json.dumps({"company": company, "threads": threads}))
"""

# faithgate's torch text encoder (real MiniLM): a text's token vectors alone, beside copies of
# itself in one batch of equal-length sequences (no padding), and on one thread; the pooled
# sentence vector likewise. Counts of (text, batch size) whose vectors differ in any bit.
ENCODER = """
import json, faithgate, numpy as np, torch
from faithgate import models
from faithgate.backends import ModelPool

enc = ModelPool({"embedder": models.resolve("embedder").location}, backend="torch").get(
    "embedder", "text-encoder"
)
texts = [
    "The city council approved a new budget on Monday after a long debate.",
    "Heavy rain flooded the main road near the river, and police closed it for two hours.",
    "Researchers found that the glacier lost twelve meters of ice in 2023. " * 4,
]
torch.set_num_threads(2)
company = threads = 0
for text in texts:
    alone = enc.token_embeddings([text])[0].vectors
    pooled = enc.sentence_embeddings([text])[0]
    for k in (2, 5, 13):
        batch = enc.token_embeddings([text] * k)
        company += int(not all(np.array_equal(t.vectors, alone) for t in batch))
        company += int(not np.array_equal(enc.sentence_embeddings([text] * k), [pooled] * k))
    torch.set_num_threads(1)
    threads += int(not np.array_equal(enc.token_embeddings([text] * 5)[0].vectors, alone))
    torch.set_num_threads(2)
print(json.dumps({"company": company, "threads": threads}))
"""


def _probe(code: str) -> dict[str, int]:
    env = {k: v for k, v in os.environ.items() if k != "MKL_CBWR"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_projection_rows_depend_neither_on_company_nor_on_threads(torch):
    assert _probe(PROJECTIONS) == {"company": 0, "threads": 0}


@pytest.mark.slow
def test_minilm_vectors_same_alone_in_a_batch_and_on_one_thread(transformers):
    assert _probe(ENCODER) == {"company": 0, "threads": 0}


def test_torch_imported_first_is_named_once(monkeypatch, caplog):
    """torch loaded before faithgate: the settings come too late, and the torch backend says so
    once per process, naming what to set (a silent batch-dependent score otherwise)."""
    from faithgate import threads

    monkeypatch.setattr(threads, "MISSED", set())
    monkeypatch.setattr(threads, "_WARNED", [])
    monkeypatch.delenv("MKL_CBWR", raising=False)
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")  # the user's choice: not a miss
    monkeypatch.setitem(sys.modules, "torch", object())
    assert not threads.prefer_reproducible_mkl()
    assert not threads.prefer_passive_openmp()
    with caplog.at_level("WARNING", logger="faithgate.threads"):
        threads.warn_if_torch_came_first()
        threads.warn_if_torch_came_first()
    [record] = caplog.records
    assert "torch was imported before faithgate" in record.getMessage()
    assert "MKL_CBWR=AUTO,STRICT" in record.getMessage()
    assert "OMP_WAIT_POLICY" not in record.getMessage()


def test_no_warning_when_faithgate_came_first(monkeypatch, caplog):
    from faithgate import threads

    monkeypatch.setattr(threads, "MISSED", set())
    monkeypatch.setattr(threads, "_WARNED", [])
    with caplog.at_level("WARNING", logger="faithgate.threads"):
        threads.warn_if_torch_came_first()
    assert not caplog.records
