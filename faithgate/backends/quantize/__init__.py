"""Quantized forms of exported ONNX models (``forms``, ``smoothquant``), the modes that name them
(``modes``), and the parity gate that decides whether to keep one (``parity``).

Modes (``--quantize``), smallest first:

- ``w4`` / ``w8``: weight-only block quantization (onnxruntime's ``MatMulNBitsQuantizer``):
  every MatMul with a constant weight becomes ``MatMulNBits`` (4 or 8-bit weights, one fp32
  scale per block of 32 input features, 64 for causal LMs, symmetric; ``accuracy_level=4``
  lets onnxruntime's CPU kernel quantize the activations to int8 per block on the fly, which
  is where the speed comes from) and the embedding tables (constant ``Gather`` data, most of a small encoder's
  bytes) become ``GatherBlockQuantized`` in blocks of 32. The MLP down projections of
  LLaMA-style decoders stay fp32 (``FP32_MATMULS``: their inputs carry activation outliers).
  On SmolLM2 at 8 bits the mean log-probability moves ~0.01 nats, where dynamic int8 moves
  it by 0.27 (issue 13). ``w8`` is the recommended mode; ``w4`` is half its size and usually
  fails the gate on minimal pairs.
- ``w8a32``: the same 8-bit weights in blocks of 16 (32 for causal LMs), with
  ``accuracy_level`` 0: the kernel
  computes in fp32 on dequantized weights, so only the weights' rounding remains (about the
  size of ``w8``). onnxruntime's kernel re-dequantizes on every call (SmolLM2 0.71-0.77x fp32),
  so the ONNX backend loads such a file expanded to fp32 MatMuls once (``expand.py``): fp32
  speed and memory, the small file on disk. For small classifiers whose
  int8 activations flip close minimal pairs: the shipped NLI checker passes the gate in this
  form (rank agreement 0.995 on 200 held-out triples) where ``w8`` does not (0.975).
- ``w8a8``: SmoothQuant (Xiao et al. 2023, "SmoothQuant: Accurate and Efficient Post-Training
  Quantization for Large Language Models"): each MatMul with a constant weight W and input X
  becomes (X diag(s)^-1) (diag(s) W) with s_j = max|X_j|^0.5 / max|W_j|^0.5 (activation maxima
  measured by onnxruntime on the built-in calibration sentences: never on a ``--calibration``
  file's pairs, which then judge it; without one those 12 triples are the parity sample too),
  then int8 weights per output channel and int8 activations per *token*, scaled on the fly
  (``MatMulInteger`` on uint8 x int8, the fast VNNI path on x86; loaded as uint8 x uint8 where
  that kernel saturates, ``onnx_backend.int8_weights_form``). Per-tensor activation scales
  (``int8-dynamic``) are what fails on language models: one outlier token or channel sets the
  scale of all. SmolLM2-135M on 50 BUMP pairs: 41% of the fp32 file, 1.26x fp32 ONNX's speed,
  mean log-prob moves 0.024 nats, one near-tie pair of 50 (fp32 margin 0.009 nats) flips
  (issue 13). ``auto``'s first choice for causal LMs on CPU; the tied embedding table stays
  fp32.
- ``fp16``: every float weight and activation in half precision, inputs and outputs kept fp32
  (``onnxruntime.transformers``' converter): for CUDA; on CPU onnxruntime falls back to casts.
- ``int8-dynamic``: weights of MatMul/Gemm stored as signed int8 per channel, activations
  quantized on the fly per batch (``quantize_dynamic``). No calibration data needed; the usual choice for
  transformers on CPU (Zafrir et al. 2019, "Q8BERT"; onnxruntime's transformer quantization notes).
- ``int8-static``: activations get fixed scales measured on calibration inputs (``quantize_static``,
  QDQ format). Faster on some CPUs, usually less accurate on transformers.

``auto`` (the export default) tries the modes of ``AUTO_CANDIDATES`` smallest first and keeps
the first that passes the parity gate; fp32 when none does.
"""
