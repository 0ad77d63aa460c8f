"""Run ``benchmarks/onnx_speed.py`` on a lent GPU machine (issue 13's CUDA figures).

That machine takes at most 64 MiB per call (the working tree included), reaches no package
index and no model hub, and has torch, onnx and a CPU-only onnxruntime but no spaCy, no
optimum and no model packages. So everything the run needs is packed here, cut into parts
that go one per call, and unpacked there:

    python benchmarks/remote_gpu.py pack --ort-wheel onnxruntime_gpu-*.whl --reference \\
        .gpu/reference.json --sentences .gpu/sentences.json --out .gpu/parts      # here
    python3 benchmarks/remote_gpu.py unpack PARTS_DIR DEST                         # there
    PYTHONPATH=DEST/site:$PWD LD_LIBRARY_PATH=<the image's nvidia/*/lib folders> \\
        python3 benchmarks/remote_gpu.py run DEST --json OUT.json                  # there

(``DEST/site`` first: the carried onnxruntime-gpu before the image's CPU-only onnxruntime;
the ``nvidia/*/lib`` folders of the image's site-packages hold CUDA 13 and cuDNN.)

``--reference`` and ``--sentences`` come from a run here:
``python benchmarks/onnx_speed.py --modes fp16 --json .gpu/reference.json
--record-sentences .gpu/sentences.json`` (its torch fp32 cells are the reference the GPU
cells are compared with; spaCy's sentence splits of the same texts stand in for spaCy there).

What ``pack`` writes, and why each is smaller than what it stands for:

- **onnxruntime-gpu** without what an sm_90 GPU (H100/H200) never reads: its CUDA provider's
  ``.nv_fatbin`` section holds one cubin per kernel per GPU generation (sm_75 ... sm_120, 218
  of the library's 284 MB) and no PTX, so the cubins of the other generations are zeroed in
  place (``zero_other_cubins``: same file layout, so the library loads as built);
  ``libonnxruntime.so`` (the C API, which the Python module does not load) and the TensorRT
  provider are left out. 256 MB wheel -> 59 MiB xz.
- **the LM's fp32 ONNX export** as its weights' GGUF codes: faithgate's SmolLM2 comes from a
  Q4_1/Q8_0 GGUF file, so every weight block of 32 of the export is exactly ``d * q + m``
  (``encode_tensor``); the codes and block scales go, the file is rebuilt there and checked
  by SHA-256 against this one (539 MB -> 88 MB xz).
- the encoders' **fp16 exports** (embedder, NLI checker) as they are, xz-compressed.
- the BUMP rows of the benchmarked pairs, the reference scores and the sentence table.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
BLOCK = 32
FATBIN_MAGIC = 0xBA55ED50
CUBIN = 2  # a fatbin entry's kind: 1 PTX, 2 cubin (ELF)
ORT_LEFT_OUT = ("libonnxruntime.so", "libonnxruntime_providers_tensorrt.so")


# --- onnxruntime-gpu for one GPU generation -------------------------------------------------


def _section(data: bytes | bytearray, wanted: str) -> tuple[int, int]:
    """(file offset, size) of an ELF64 section by name."""
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    entsize, count, names = struct.unpack_from("<HHH", data, 0x3A)

    def header(i: int) -> tuple:
        return struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * entsize)

    strtab = header(names)[4]
    for i in range(count):
        h = header(i)
        name = bytes(data[strtab + h[0] : data.index(b"\0", strtab + h[0])]).decode()
        if name == wanted:
            return h[4], h[5]
    raise ValueError(f"no {wanted} section")


def zero_other_cubins(data: bytearray, keep_sm: int) -> dict[str, int]:
    """Zero, in place, the cubins in ``.nv_fatbin`` built for another architecture than
    ``sm_<keep_sm>``; bytes per (kind, arch) found. Refuses a library with PTX (a GPU of
    another generation could JIT it) or one without a cubin of ``keep_sm``."""
    start, size = _section(data, ".nv_fatbin")
    found: dict[str, int] = {}
    pos = start
    while pos < start + size:
        magic, _, header_size, blob_size = struct.unpack_from("<IHHQ", data, pos)
        if magic != FATBIN_MAGIC:  # padding between blobs
            pos += 8
            continue
        entry, end = pos + header_size, pos + header_size + blob_size
        while entry < end:
            kind, _, entry_header, payload = struct.unpack_from("<HHIQ", data, entry)
            arch = struct.unpack_from("<I", data, entry + 28)[0]
            key = f"{'cubin' if kind == CUBIN else 'ptx'} sm_{arch}"
            found[key] = found.get(key, 0) + payload
            if kind == CUBIN and arch != keep_sm:
                body = entry + entry_header
                data[body : body + payload] = bytes(payload)
            entry += entry_header + payload
        pos = end
    if any(k.startswith("ptx") for k in found) or f"cubin sm_{keep_sm}" not in found:
        raise SystemExit(f"cannot keep only sm_{keep_sm}: the fatbin holds {sorted(found)}")
    return found


def pack_onnxruntime(wheel: Path, keep_sm: int, out: Path) -> None:
    with zipfile.ZipFile(wheel) as zf, tempfile.TemporaryDirectory() as tmp:
        zf.extractall(tmp)
        capi = Path(tmp) / "onnxruntime" / "capi"
        for path in capi.iterdir():
            if path.name.startswith(ORT_LEFT_OUT):
                path.unlink()
        provider = capi / "libonnxruntime_providers_cuda.so"
        data = bytearray(provider.read_bytes())
        found = zero_other_cubins(data, keep_sm)
        provider.write_bytes(data)
        print("CUDA provider fatbin:", {k: f"{v / 1e6:.1f} MB" for k, v in found.items()})
        _tar_xz(Path(tmp), out)


def _tar_xz(directory: Path, out: Path) -> None:
    """``directory`` as a tar stream through the xz tool (two threads; lzma in Python has one)."""
    with out.open("wb") as fh:
        tar = subprocess.Popen(
            ["tar", "-C", str(directory), "-cf", "-", "."], stdout=subprocess.PIPE
        )
        xz = subprocess.run(["xz", "-T2", "-6"], stdin=tar.stdout, stdout=fh, check=False)
        tar.stdout.close()
        if tar.wait() or xz.returncode:
            raise SystemExit(f"tar | xz of {directory} failed")


# --- the LM's fp32 export as GGUF codes ------------------------------------------------------


def _blocks(w: np.ndarray, axis: int) -> np.ndarray:
    return np.ascontiguousarray(np.moveaxis(w, axis, -1)).reshape(-1, BLOCK)


def _q4_1(blocks: np.ndarray) -> tuple[np.ndarray, ...]:
    """Q4_1 as gguf-py dequantizes it: ``d * q + m``, q in 0..15, d and m float16."""
    m = blocks.min(axis=1)
    d = ((blocks.max(axis=1) - m) / 15).astype(np.float16).astype(np.float32)
    m16 = m.astype(np.float16).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.rint((blocks - m16[:, None]) / d[:, None])
    q = np.nan_to_num(q, nan=0.0, posinf=0.0, neginf=0.0).clip(0, 15).astype(np.uint8)
    rebuilt = d[:, None] * q.astype(np.float32) + m16[:, None]
    return q, d.astype(np.float16), m16.astype(np.float16), rebuilt


def _q8_0(blocks: np.ndarray) -> tuple[np.ndarray, ...]:
    """Q8_0 as gguf-py dequantizes it: ``d * q``, q in -127..127, d float16."""
    d = (np.abs(blocks).max(axis=1) / 127).astype(np.float16).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.rint(blocks / d[:, None])
    q = np.nan_to_num(q, nan=0.0, posinf=0.0, neginf=0.0).clip(-127, 127).astype(np.int8)
    rebuilt = d[:, None] * q.astype(np.float32)
    return q, d.astype(np.float16), np.zeros_like(d, dtype=np.float16), rebuilt


def encode_tensor(w: np.ndarray) -> dict[str, np.ndarray] | None:
    """``w`` (float32) as block codes that rebuild it bit for bit: blocks of 32 along its last
    or first axis, Q4_1 or Q8_0, the blocks that match neither kept as they are."""
    best = None
    for axis in dict.fromkeys((w.ndim - 1, 0)):
        if w.shape[axis] % BLOCK:
            continue
        blocks = _blocks(w, axis)
        for kind, fn in (("q4_1", _q4_1), ("q8_0", _q8_0)):
            q, d, m, rebuilt = fn(blocks)
            exact = (rebuilt.view(np.uint32) == blocks.view(np.uint32)).all(axis=1)
            if best is None or exact.sum() > best["exact"].sum():
                best = {"kind": kind, "axis": axis, "q": q, "d": d, "m": m, "exact": exact}
                best["raw"] = blocks[~exact]
    if best is None or best["exact"].mean() < 0.9:
        return None
    if best["kind"] == "q4_1":  # two codes a byte
        best["q"] = best["q"][:, 0::2] | (best["q"][:, 1::2] << 4)
    return best


def decode_tensor(enc: dict, shape: tuple[int, ...]) -> np.ndarray:
    q, d = enc["q"], enc["d"].astype(np.float32)
    if enc["kind"] == "q4_1":
        codes = np.empty((q.shape[0], BLOCK), dtype=np.uint8)
        codes[:, 0::2], codes[:, 1::2] = q & 0x0F, q >> 4
        blocks = d[:, None] * codes.astype(np.float32) + enc["m"].astype(np.float32)[:, None]
    else:
        blocks = d[:, None] * q.astype(np.float32)
    blocks[~enc["exact"]] = enc["raw"]
    axis = int(enc["axis"])
    moved = list(shape)
    moved.append(moved.pop(axis))
    return np.ascontiguousarray(np.moveaxis(blocks.reshape(moved), -1, axis))


def pack_lm(export_dir: Path, out: Path) -> None:
    """``export_dir``'s model.onnx as a skeleton + codes; every other file as it is."""
    import onnx
    from onnx import numpy_helper

    model_file = export_dir / "model.onnx"
    model = onnx.load(str(model_file))
    codes: dict[str, np.ndarray] = {}
    names: dict[str, list] = {}
    for i, tensor in enumerate(model.graph.initializer):
        if tensor.data_type != onnx.TensorProto.FLOAT or not tensor.raw_data:
            continue
        w = numpy_helper.to_array(tensor)
        if w.size < BLOCK * 64:
            continue
        enc = encode_tensor(w)
        if enc is None:
            continue
        key = f"t{i}"
        names[key] = [tensor.name, list(w.shape), enc["kind"], int(enc["axis"])]
        for field in ("q", "d", "m", "exact", "raw"):
            codes[f"{key}.{field}"] = enc[field]
        assert decode_tensor(enc, w.shape).tobytes() == tensor.raw_data, tensor.name
        tensor.raw_data = b""
    with tempfile.TemporaryDirectory() as tmp:
        stage = Path(tmp)
        for f in export_dir.iterdir():
            if f.name != "model.onnx":
                shutil.copy2(f, stage / f.name)
        (stage / "skeleton.onnx").write_bytes(model.SerializeToString())
        np.savez(stage / "codes.npz", **codes)
        meta = {"tensors": names, "sha256": hashlib.sha256(model_file.read_bytes()).hexdigest()}
        (stage / "codes.json").write_text(json.dumps(meta))
        _tar_xz(stage, out)
    print(f"LM: {len(names)} of {len(model.graph.initializer)} initializers as codes")


def unpack_lm(src: Path, dest: Path) -> None:
    import onnx

    meta = json.loads((src / "codes.json").read_text())
    codes = np.load(src / "codes.npz")
    model = onnx.load(str(src / "skeleton.onnx"))
    by_name = {t.name: t for t in model.graph.initializer}
    for key, (name, shape, kind, axis) in meta["tensors"].items():
        enc = {f: codes[f"{key}.{f}"] for f in ("q", "d", "m", "exact", "raw")}
        enc |= {"kind": kind, "axis": axis}
        by_name[name].raw_data = decode_tensor(enc, tuple(shape)).tobytes()
    data = model.SerializeToString()
    if hashlib.sha256(data).hexdigest() != meta["sha256"]:
        raise SystemExit("the rebuilt LM export is not the packed one (SHA-256 differs)")
    dest.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.name not in ("codes.json", "codes.npz", "skeleton.onnx"):
            shutil.copy2(f, dest / f.name)
    (dest / "model.onnx").write_bytes(data)
    print(f"LM export rebuilt: {dest / 'model.onnx'} ({len(data) / 1e6:.0f} MB), SHA-256 equal")


# --- pack / unpack / run -------------------------------------------------------------------


def bump_rows(n_pairs: int) -> list[str]:
    """The lines of bump_task1.jsonl whose pair is among the first ``n_pairs`` that
    ``onnx_speed.bump_items`` takes: the same items come out of them there."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import onnx_speed

    items = onnx_speed.bump_items(n_pairs)
    ids = {i["id"] for i in items}
    text = (onnx_speed.data_dir() / "bump_task1.jsonl").read_text(encoding="utf-8")
    rows = [(line, json.loads(line)) for line in text.splitlines() if line.strip()]
    pairs = {row["pair_id"] for _, row in rows if row["id"] in ids}
    return [line for line, row in rows if row["pair_id"] in pairs]


def pack(args: argparse.Namespace) -> None:
    stage = args.out / "stage"
    shutil.rmtree(args.out, ignore_errors=True)
    stage.mkdir(parents=True)
    pack_onnxruntime(args.ort_wheel, args.sm, stage / "onnxruntime.tar.xz")
    pack_lm(args.work / "lm-none", stage / "lm-none.tar.xz")
    for name in args.encoders:
        _tar_xz(args.work / name, stage / f"{name}.tar.xz")
    (stage / "data").mkdir()
    rows = bump_rows(args.pairs)
    (stage / "data" / "bump_task1.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    shutil.copy2(args.reference, stage / "reference.json")
    shutil.copy2(args.sentences, stage / "sentences.json")
    (stage / "pack.json").write_text(json.dumps({"pairs": args.pairs, "sm": args.sm}))
    # one tar of the (already compressed) members, cut into parts of --part-mb
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.add(stage, arcname="payload")
    blob, size = buffer.getvalue(), int(args.part_mb * 2**20)
    shutil.rmtree(stage)
    for k in range(0, len(blob), size):
        (args.out / f"payload.tar.{k // size:03d}").write_bytes(blob[k : k + size])
    print(f"{len(blob) / 2**20:.1f} MiB in {-(-len(blob) // size)} parts of at most "
          f"{args.part_mb} MiB: {args.out}")  # fmt: skip


def unpack(args: argparse.Namespace) -> None:
    parts = sorted(args.parts.glob("payload.tar.*"))
    dest = args.dest
    dest.mkdir(parents=True, exist_ok=True)
    blob = b"".join(p.read_bytes() for p in parts)
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        tar.extractall(dest, filter="data")
    payload = dest / "payload"
    for member in payload.glob("*.tar.xz"):
        name = member.name.removesuffix(".tar.xz")
        target = dest / ("site" if name == "onnxruntime" else f"work/{name}")
        if name == "lm-none":
            target = dest / "lm-packed"
        target.mkdir(parents=True, exist_ok=True)
        with tarfile.open(member, mode="r:xz") as tar:
            tar.extractall(target, filter="data")
    unpack_lm(dest / "lm-packed", dest / "work" / "lm-none")
    print("unpacked into", dest)


def run(args: argparse.Namespace) -> None:
    """Check that onnxruntime runs on the GPU, then onnx_speed's cells on CPU and CUDA."""
    import onnxruntime as ort

    from faithgate.backends.onnx_backend import cuda_usable

    print("onnxruntime", ort.__version__, ort.__file__, ort.get_available_providers())
    print("faithgate cuda_usable():", cuda_usable())
    if not cuda_usable():
        lib = Path(ort.__file__).parent / "capi" / "libonnxruntime_providers_cuda.so"
        subprocess.run(["ldd", str(lib)], check=False)
        raise SystemExit("CUDA is not usable by onnxruntime here")
    payload = args.dest / "payload"
    pack_info = json.loads((payload / "pack.json").read_text())
    env = os.environ | {"FAITHGATE_SHARED_DATA": str(payload / "data")}
    cmd = [
        sys.executable, str(REPO / "benchmarks" / "onnx_speed.py"), "--carried",
        "--work", str(args.dest / "work"), "--pairs", str(pack_info["pairs"]),
        "--modes", args.modes, "--providers", "cpu,cuda", "--metrics", args.metrics,
        "--threads", str(args.threads), "--rounds", str(args.rounds),
        "--reference", str(payload / "reference.json"),
        "--sentences", str(payload / "sentences.json"), "--timeout", str(args.timeout),
        "--host-cache", args.host_cache,
        "--json", str(args.json),
    ]  # fmt: skip
    raise SystemExit(subprocess.run(cmd, env=env, check=False).returncode)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("pack")
    p.add_argument("--ort-wheel", type=Path, required=True)
    p.add_argument("--sm", type=int, default=90, help="the GPU generation to keep (90: H100/H200)")
    p.add_argument("--work", type=Path, default=Path("/tmp/faithgate-onnx-bench"))
    p.add_argument("--encoders", nargs="*", default=["embedder-fp16", "nli-fp16"])
    p.add_argument("--reference", type=Path, required=True)
    p.add_argument("--sentences", type=Path, required=True)
    p.add_argument("--pairs", type=int, default=50)
    p.add_argument("--part-mb", type=float, default=56.0)
    p.add_argument("--out", type=Path, required=True)
    u = sub.add_parser("unpack")
    u.add_argument("parts", type=Path)
    u.add_argument("dest", type=Path)
    r = sub.add_parser("run")
    r.add_argument("dest", type=Path)
    r.add_argument("--json", type=Path, required=True)
    r.add_argument("--modes", default="none,fp16")
    r.add_argument("--metrics", default="sentsim,bertscore,entail_s2s,loglik,harim_plus")
    r.add_argument("--threads", type=int, default=16)
    r.add_argument("--rounds", type=int, default=1)
    r.add_argument("--timeout", type=int, default=180)
    r.add_argument(
        "--host-cache", default="none", help="forms also run with the LM cache on the host"
    )
    args = ap.parse_args()
    {"pack": pack, "unpack": unpack, "run": run}[args.command](args)


if __name__ == "__main__":
    main()
