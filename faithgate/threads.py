"""Thread pools of the numeric libraries under faithgate, set for machines shared with others.

faithgate mostly runs where cores are shared: CI runners, pytest-xdist workers, Ray actors,
a developer's laptop running the suite. Three pools misbehave there (issue 13, measured on a
2-core machine at load average 8-10):

- **torch's OpenMP threads spin** between parallel regions (GNU OpenMP's default wait policy
  is active). When other processes want the cores, the spinning threads hold them: a MiniLM
  forward pass over 4 x 254 tokens took 4.0-5.8 s with 2 threads, 1.0-1.35 s with
  ``OMP_WAIT_POLICY=PASSIVE`` (1.1 s with 1 thread). libgomp reads the variable once, when
  torch loads (spaCy's thinc imports torch too), so :func:`prefer_passive_openmp` sets it as
  ``import faithgate`` runs, unless the user set it or torch is already loaded. Set
  ``OMP_WAIT_POLICY=ACTIVE`` to keep spinning (torch and onnxruntime; a few percent faster on
  an idle, dedicated machine).
- **onnxruntime's intra-op threads spin** too: the shipped NLI checker's ``entail_topk`` took
  0.50-0.61 CPU s (0.29-0.36 s wall) per BUMP pair spinning, 0.30-0.35 CPU s (0.21-0.23 s wall)
  not (3 alternating rounds of 120 pairs). Sessions are made with spinning off
  (:func:`onnxruntime_spinning`) unless ``OMP_WAIT_POLICY=ACTIVE`` asks for busy threads.
- **numpy's BLAS threads** (OpenBLAS) split small products, a summary's tokens against a
  source's (60 x 384 by 384 x 1000), where synchronising two threads costs more than it
  saves: 16 ms a product with 2 threads, 2.4 ms with 1. :func:`metric_blas_threads` limits
  it to one thread while metrics compute (``threadpoolctl``); torch (MKL / oneDNN) and
  onnxruntime keep their own pools for the model passes.

One setting of the same kind is about results, not speed: **MKL's conditional numerical
reproducibility**. Left unset, MKL's sgemm on an AMD EPYC (AVX-512) machine gave a row of a
product that differs in the last bits with the number of rows around it (6 of 57 shapes of
MiniLM's projections: the same sentence alone and in a batch of equal-length sentences
differed by up to 1.4e-6), so a score depended on its batch, which faithgate promises it
never does (``tests/unit/test_batch_independence.py``). ``MKL_CBWR=AUTO`` keeps MKL's own
choice of instruction set and turns reproducible mode on: 0 of 57 differ, at the same speed
(MiniLM over 536 sentences, 3 rounds each way: 3.0-3.5 s both). MKL reads it once, when torch
loads, so :func:`prefer_reproducible_mkl` sets it as ``import faithgate`` runs, unless the user
set it or torch is already loaded.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator


def _set_before_torch_loads(variable: str, value: str) -> bool:
    """Set ``variable`` for a library that reads it once, when torch loads: only when the user
    has not chosen a value and torch is not loaded yet. Returns whether it was set here."""
    if variable in os.environ or "torch" in sys.modules:
        return False
    os.environ[variable] = value
    return True


def prefer_passive_openmp() -> bool:
    """Set ``OMP_WAIT_POLICY=PASSIVE`` for torch's OpenMP threads when the user has not chosen
    a policy and torch is not loaded yet (libgomp reads it once, at load). Returns whether
    the variable was set here."""
    return _set_before_torch_loads("OMP_WAIT_POLICY", "PASSIVE")


def prefer_reproducible_mkl() -> bool:
    """Set ``MKL_CBWR=AUTO`` (MKL's reproducible mode, its own instruction-set choice) when the
    user has not chosen a mode and torch is not loaded yet, so a product's rows do not depend
    on how many rows share it. Returns whether the variable was set here."""
    return _set_before_torch_loads("MKL_CBWR", "AUTO")


def onnxruntime_spinning() -> str:
    """``session.intra_op.allow_spinning`` for new onnxruntime sessions: ``"0"`` (threads sleep
    between runs) unless the user asked for busy threads with ``OMP_WAIT_POLICY=ACTIVE``."""
    return "1" if os.environ.get("OMP_WAIT_POLICY", "").strip().upper() == "ACTIVE" else "0"


@contextlib.contextmanager
def metric_blas_threads() -> Iterator[None]:
    """numpy's BLAS on one thread for the duration (restored after). A no-op when
    threadpoolctl finds no OpenBLAS (e.g. numpy built against another BLAS)."""
    from threadpoolctl import ThreadpoolController  # a dependency; imported late: start-up

    # OpenBLAS only (numpy's and scipy's), never torch's MKL / oneDNN, which run the model
    # passes inside the same calls. Scanning the loaded libraries costs ~1 ms per batch.
    openblas = ThreadpoolController().select(internal_api="openblas")
    with openblas.limit(limits=1):
        yield
