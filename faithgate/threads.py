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
reproducibility** (CNR). torch's float32 products (``Linear``, the attention's ``bmm``) are MKL
sgemm calls, and left unset MKL picks kernels and thread splits by the shape of the whole
product, so a row of a product differed in its last bits with the number of rows around it:
the same sentence alone and in a batch of equal-length sentences gave different vectors, and a
score depended on its batch, which faithgate promises it never does
(``tests/unit/test_batch_independence.py``). Of 57 shapes of MiniLM's projections
(``tests/unit/test_determinism.py``), the rows that depended on their company: on issue 13's
AMD EPYC, 6 unset and 0 with ``MKL_CBWR=AUTO``; on an Intel Xeon with AVX-512 (VNNI, bf16,
fp16; issue 44), 20 with ``AUTO``, 19 with ``AVX2``, 20 with ``AVX512``, 42 with
``COMPATIBLE``, and 0 with ``AUTO,STRICT`` (0 too with MKL held to AVX2 by
``MKL_ENABLE_INSTRUCTIONS=AVX2``, where ``AUTO`` gave 19); on that Xeon emulating an AMD
EPYC-Rome (AVX2; ``benchmarks/emulated_cpu.py``), 6 unset, as on issue 13's, and 0 with
``AUTO`` or ``AUTO,STRICT``.

``STRICT`` is MKL's strict CNR mode: for ``?gemm`` on its AVX2 and AVX-512 code branches a
result is bitwise the same whatever the thread count (so whatever the split of the rows), which
is what batch independence needs; a run on 1 thread (a Ray worker) and on 2 (local) agree too
(11 of the 57 shapes differed under ``AUTO``). On a branch without strict support MKL keeps
standard CNR, which is what ``AUTO`` alone gives, so ``AUTO,STRICT`` is never less reproducible
than ``AUTO``, on an AVX2-only AMD machine included. It costs no speed (MiniLM, 1 thread: 2.97
CPU s against 3.10 with ``AUTO``; benchmarks/README.md). MKL reads the variable once, when
torch loads, so :func:`prefer_reproducible_mkl` sets it as ``import faithgate`` runs, unless
the user set it or torch is already loaded. What it cannot give: the same bits on two CPUs
whose float32 kernels differ (AVX2 and AVX-512 sum in other orders); docs/data-safety.md says
what holds.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator

log = logging.getLogger(__name__)

# The variables above that torch's libraries read without a value: torch was loaded before
# faithgate and the user had set none (filled as faithgate imports; see warn_if_torch_came_first).
MISSED: set[str] = set()
_WARNED: list[bool] = []


def _set_before_torch_loads(variable: str, value: str) -> bool:
    """Set ``variable`` for a library that reads it once, when torch loads: only when the user
    has not chosen a value and torch is not loaded yet. Returns whether it was set here."""
    if variable in os.environ:
        return False
    if "torch" in sys.modules:
        MISSED.add(variable)
        return False
    os.environ[variable] = value
    return True


def prefer_passive_openmp() -> bool:
    """Set ``OMP_WAIT_POLICY=PASSIVE`` for torch's OpenMP threads when the user has not chosen
    a policy and torch is not loaded yet (libgomp reads it once, at load). Returns whether
    the variable was set here."""
    return _set_before_torch_loads("OMP_WAIT_POLICY", "PASSIVE")


# MKL's strict reproducible mode on its own choice of instruction set (see the module's notes).
REPRODUCIBLE_MKL = "AUTO,STRICT"


def prefer_reproducible_mkl() -> bool:
    """Set ``MKL_CBWR=AUTO,STRICT`` (MKL's strict reproducible mode, its own instruction-set
    choice) when the user has not chosen a mode and torch is not loaded yet, so a product's
    rows depend neither on how many rows share it nor on the thread count. Returns whether the
    variable was set here."""
    return _set_before_torch_loads("MKL_CBWR", REPRODUCIBLE_MKL)


def warn_if_torch_came_first() -> None:
    """Warn once per process when torch was imported before faithgate with the user's
    environment setting neither variable: MKL then runs without its reproducible mode (a score
    can change in its last bits with its batch) and torch's OpenMP threads spin (on a busy
    machine bertscore ran 6x slower: benchmarks/README.md). Called as the torch backend loads
    a model."""
    missed = sorted(MISSED)
    if not missed or _WARNED:
        return
    _WARNED.append(True)
    wanted = {"MKL_CBWR": REPRODUCIBLE_MKL, "OMP_WAIT_POLICY": "PASSIVE"}
    log.warning(
        "torch was imported before faithgate, so %s came too late: scores may differ in their "
        "last bits with their batch and torch passes may be slow on a busy machine; import "
        "faithgate first, or set %s in the environment",
        " and ".join(missed),
        " ".join(f"{v}={wanted[v]}" for v in missed),
    )


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
