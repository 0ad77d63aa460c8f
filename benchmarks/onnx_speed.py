"""Speed, memory, size and agreement of torch fp32 and each ONNX form, per metric.

Forms (``--modes``): onnx fp32 and the quantized modes of ``faithgate export --quantize``:
``w8``/``w4`` (weight-only blocks), ``int8-dynamic``, ``fp16``. Each quantized form is made
from the same fp32 export (ungated here: the table measures the gate itself).

For each metric and form, scores the same BUMP task-1 examples (``--pairs`` minimal pairs,
both summaries of each: 2 x pairs (source, summary) items) in a fresh subprocess and prints:

- items/s: scored (source, summary) items per second, model load and warm-up excluded;
- model s: the part of that time spent inside the backend's model calls;
- peak RSS: the subprocess's peak resident memory (``VmHWM``), imports and weights included;
- agreement with torch fp32: mean/max |score difference|, share of minimal pairs ordered as
  torch orders them, and BUMP consistency (share of pairs where the reference scores higher);
- file: size of the model file(s);
- gate: whether the scores pass the export parity gate (mean |diff| <= 0.01 for bounded scores,
  <= 0.05 nats for log-probabilities, >= 99% pair agreement, consistency within 1 point).

Then, per model role, the form ``--quantize auto`` keeps on these pairs: the smallest one
whose every metric passes. Results go to ``--json`` after every cell; a re-run with the same
``--json`` skips the cells already there (the machine is shared: runs get cut).

Speed is compared side by side: with ``--rounds N`` every form of a metric runs once per round,
in an order rotated each round, and the table gives the median time, and each "vs" column the
median over rounds of the per-round ratio (so a load change between rounds cancels out).

Then the install size of the ``runtime`` extra against the torch install (sum of the files each
installed distribution's RECORD lists, over the extra's dependency closure minus the core's).

    nice -n 5 python benchmarks/onnx_speed.py                    # 50 pairs = 100 items
    python benchmarks/onnx_speed.py --pairs 10 --metrics sentsim  # a quick look

The NLI model is the shipped checker (``onnx_models/checker``: MiniLM-L6 trained by
``faithgate train``, its torch weights as the reference; ``--nli random`` for a randomly
initialised classifier of the same shape, as before the checker existed).
Exports go to ``--work`` (never to the faithgate cache, so other runs keep their backend).
Data: ``$FAITHGATE_SHARED_DATA`` or ``../shared/data`` beside the repository.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
# metric -> (settings, model roles it needs, bounded score?)
METRICS: dict[str, tuple[dict, tuple[str, ...], bool]] = {
    "bertscore": ({}, ("embedder",), True),
    "sentsim": ({}, ("embedder",), True),
    "entail_s2s": ({}, ("nli",), True),
    "loglik": ({}, ("lm",), False),
    "harim_plus": ({}, ("lm",), False),
}
MODES = ("none", "w8", "w8a32", "w8a32-ctx8", "w8a8", "w4", "int8-dynamic", "fp16")


def variant_name(mode: str) -> str:
    return "onnx fp32" if mode == "none" else f"onnx {mode}"


def data_dir() -> Path:
    env = os.environ.get("FAITHGATE_SHARED_DATA")
    path = Path(env) if env else REPO.parent / "shared" / "data"
    if not (path / "bump_task1.jsonl").is_file():
        sys.exit(f"BUMP data not found in {path} (set FAITHGATE_SHARED_DATA)")
    return path


def bump_items(n_pairs: int) -> list[dict]:
    """The first ``n_pairs`` minimal pairs of BUMP task 1 (file order): reference, edited."""
    refs: dict[str, dict] = {}
    items: list[dict] = []
    with (data_dir() / "bump_task1.jsonl").open(encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    for row in rows:
        if row["role"] == "reference":
            refs.setdefault(row["pair_id"], row)
    seen = set()
    for row in rows:
        if row["role"] != "edited" or row["pair_id"] in seen or row["pair_id"] not in refs:
            continue
        seen.add(row["pair_id"])
        ref = refs[row["pair_id"]]
        items.append({"id": ref["id"], "source": ref["source"], "summary": ref["summary"]})
        items.append({"id": row["id"], "source": row["source"], "summary": row["summary"]})
        if len(seen) == n_pairs:
            break
    return items


# --- models and exports ------------------------------------------------------------------------


def random_nli(work: Path) -> Path:
    """A BERT classifier with MiniLM-L6's shape and tokenizer, random weights (seed 0)."""
    target = work / "nli-random-minilm"
    if (target / "config.json").is_file():
        return target
    import torch
    import transformers

    from faithgate import models

    emb = models.resolve("embedder").location
    base = transformers.AutoConfig.from_pretrained(emb)
    labels = {0: "entailment", 1: "neutral", 2: "contradiction"}
    cfg = transformers.BertConfig(
        **{
            k: getattr(base, k)
            for k in (
                "vocab_size",
                "hidden_size",
                "num_hidden_layers",
                "num_attention_heads",
                "intermediate_size",
                "max_position_embeddings",
            )
        },  # fmt: skip
        id2label=labels,
        label2id={v: k for k, v in labels.items()},
    )
    torch.manual_seed(0)
    transformers.BertForSequenceClassification(cfg).save_pretrained(target)
    transformers.AutoTokenizer.from_pretrained(emb).save_pretrained(target)
    return target


def ensure_exports(
    work: Path,
    roles: set[str],
    modes: list[str],
    log,
    nli: str = "checker",
    torch: bool = True,
    carried: bool = False,
) -> dict[str, dict[str, str]]:
    """variant -> {role: model path}; the fp32 export made once into ``work``, every other
    mode derived from its file, all reused by later runs.

    ``carried``: a machine that cannot export (no optimum, no model packages: a lent GPU
    machine) uses the ``<role>-<mode>`` directories already in ``work``, deriving a missing
    mode only from an fp32 directory there; a (role, mode) it has neither for is left out."""
    import shutil

    from faithgate import models
    from faithgate.backends.export import (
        MANIFEST_NAME,
        export_model,
        load_manifest,
        quantization_feeds,
    )
    from faithgate.backends.quantize.modes import quantize_file, quantized_file_name
    from faithgate.backends.quantize.parity import Tolerance, load_calibration

    paths: dict[str, dict[str, str]] = {"torch fp32": {}} | {variant_name(m): {} for m in modes}
    for role in sorted(roles):
        fp32_dir = work / f"{role}-none"
        if torch or not carried:
            # nli: the shipped checker is the role's default (resolved offline, no source)
            source = str(random_nli(work)) if role == "nli" and nli == "random" else None
            spec = models.resolve(role, source)
            paths["torch fp32"][role] = source or spec.name
            if not (fp32_dir / MANIFEST_NAME).is_file():
                log(f"exporting {role} (fp32) -> {fp32_dir}")
                export_model(spec, out=fp32_dir, quantize="none", tolerance=Tolerance.loose())
        fp32 = load_manifest(fp32_dir) if (fp32_dir / MANIFEST_NAME).is_file() else None
        for mode in modes:
            out = work / f"{role}-{mode}"
            if mode != "none" and not (out / MANIFEST_NAME).is_file() and fp32 is not None:
                log(f"quantizing {role} ({mode}) -> {out}")
                tmp = work / f"{role}-{mode}.tmp"
                shutil.rmtree(tmp, ignore_errors=True)
                tmp.mkdir()
                for f in fp32_dir.iterdir():
                    if f.suffix != ".onnx" and f.name != MANIFEST_NAME:
                        shutil.copy(f, tmp / f.name)
                files = {}
                # The export's own rule (w8a8: built-in sentences, not these BUMP pairs).
                feeds = quantization_feeds(fp32, mode, load_calibration(None))
                for part, name in fp32.files.items():
                    files[part] = quantized_file_name(name, mode)
                    quantize_file(mode, fp32_dir / name, tmp / files[part], feeds, fp32.task)
                data = fp32.to_dict() | {"quantization": mode, "files": files}
                data["parity"] = {"gated": False, "note": "benchmark copy; gate measured there"}
                (tmp / MANIFEST_NAME).write_text(json.dumps(data, indent=1))
                shutil.rmtree(out, ignore_errors=True)
                tmp.rename(out)
            if (out / MANIFEST_NAME).is_file():
                paths[variant_name(mode)][role] = str(out)
    return paths


def file_mb(path: str) -> float:
    """Size of the ONNX file(s) of an export directory (MB), or of a torch model's weights."""
    from faithgate.backends.export import MANIFEST_NAME, load_manifest

    p = Path(path)
    if (p / MANIFEST_NAME).is_file():
        m = load_manifest(p)
        total = 0
        for name in m.files.values():
            total += sum(f.stat().st_size for f in p.glob(name + "*"))  # + external data
        return total / 1e6
    return float("nan")


# --- one measurement, in its own process ---------------------------------------------------------


def peak_rss_mb() -> float:
    """This process's peak resident memory. ``VmHWM`` restarts at exec, unlike ``ru_maxrss``,
    which a subprocess inherits from the (large) parent that forked it."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def worker(cell: dict) -> dict:
    from faithgate.scoring.scorer import Scorer
    from faithgate.types import Example

    threads = cell["threads"]
    if cell["backend"] == "torch":
        import torch

        torch.set_num_threads(threads)
    examples = [Example(i["id"], i["source"], i["summary"]) for i in cell["items"]]
    recorder = None
    if cell.get("sentences"):
        use_sentence_table(Path(cell["sentences"]))
    elif cell.get("record_sentences"):
        recorder = record_sentences()
    options = {role: {"threads": threads} for role in cell["models"]}
    if cell.get("provider"):
        for role_options in options.values():
            role_options["provider"] = cell["provider"]
    if cell["backend"] == "torch":  # the torch encoders/classifiers take no thread option
        options = {r: o for r, o in options.items() if r in ("lm", "seq2seq")}
    t0 = time.perf_counter()
    warm = Scorer(
        [cell["metric"]],
        models=cell["models"],
        backend=cell["backend"],
        metric_settings={cell["metric"]: cell["settings"]},
        model_options=options,
    )
    warm.score(examples[:2])  # loads models, spaCy; not timed
    load_s = time.perf_counter() - t0
    model_time = [0.0]
    for role, task in warm.metrics[0].roles.items():
        if role == "spacy":
            continue
        model = warm.pool.get(role, task, **options.get(role, {}))
        if cell.get("host_cache") and hasattr(model, "cache_device"):
            model.cache_device = None  # the LM's cache through host memory, as before IO binding
        for name in ("token_embeddings", "sentence_embeddings", "predict_proba",
                     "segment_logprobs", "prefix_logprobs", "seq2seq_logprobs"):  # fmt: skip
            fn = getattr(model, name, None)
            if fn is None:
                continue

            def timed(*a, _fn=fn, **k):
                s = time.perf_counter()
                try:
                    return _fn(*a, **k)
                finally:
                    model_time[0] += time.perf_counter() - s

            setattr(model, name, timed)
    from faithgate import text as textmod

    textmod.clear_caches()  # spaCy parses are not reused from the warm-up
    scorer = Scorer(
        [cell["metric"]], metric_settings={cell["metric"]: cell["settings"]}, pool=warm.pool
    )
    t0 = time.perf_counter()
    scores = scorer.score(examples)
    elapsed = time.perf_counter() - t0
    values = [row[cell["metric"]].value for row in scores]
    return {
        "values": [None if v != v else v for v in values],
        "seconds": elapsed,
        "model_seconds": model_time[0],
        "load_seconds": load_s,
        "peak_rss_mb": peak_rss_mb(),
        "errors": sum(1 for row in scores if row[cell["metric"]].error),
        "settings_hash": scores[0][cell["metric"]].settings_hash,
        "providers": _providers_used(warm, options),
    } | ({"sentences": recorder.table()} if recorder else {})


def _providers_used(scorer, options: dict) -> dict[str, list[str]]:
    """role -> the execution providers its onnxruntime sessions really run on (an ONNX model
    asked to run on CUDA must not have fallen back to the CPU unseen)."""
    used: dict[str, list[str]] = {}
    for role, task in scorer.metrics[0].roles.items():
        model = scorer.pool.get(role, task, **options.get(role, {})) if role != "spacy" else None
        sessions = getattr(model, "sessions", None) or {}
        used[role] = sorted({p for sess in sessions.values() for p in sess.get_providers()[:1]})
    return used


class _SentenceTable:
    """``faithgate.text._sentences_cached`` read from a table: a text that is not in it is an
    error, never a guess."""

    def __init__(self, rows: list) -> None:
        self.rows = {(text, model): tuple(sents) for text, model, sents in rows}

    def __call__(self, text: str, spacy_model: str | None) -> tuple[str, ...]:
        try:
            return self.rows[(text, spacy_model)]
        except KeyError:
            raise RuntimeError(
                f"the sentence table has no split of a {len(text)}-character text"
            ) from None


class _SentenceRecorder:
    """``faithgate.text._sentences_cached`` that also keeps every split it makes."""

    def __init__(self, split) -> None:
        self.split, self.rows = split, {}

    def __call__(self, text: str, spacy_model: str | None) -> tuple[str, ...]:
        self.rows[(text, spacy_model)] = out = self.split(text, spacy_model)
        return out

    def table(self) -> list:
        return [[text, model, list(sents)] for (text, model), sents in self.rows.items()]


def use_sentence_table(path: Path) -> None:
    """Split sentences by a table that ``record_sentences`` made on a machine with spaCy: for a
    machine without it (a lent GPU machine), so that every metric sees the same sentences."""
    from dataclasses import dataclass

    from faithgate import models
    from faithgate import text as textmod

    textmod._sentences_cached = _SentenceTable(json.loads(path.read_text(encoding="utf-8")))

    @dataclass(frozen=True)
    class TableSpec(models.ModelSpec):  # the spaCy role, resolved to the table
        @property
        def fingerprint(self) -> str:
            return "sentence-table"

    resolve = models.resolve

    def resolve_spacy_to_table(role: str, name: str | None = None, *args, **kwargs):
        if role == "spacy":
            return TableSpec("spacy", name or "en_core_web_sm", str(path), "path")
        return resolve(role, name, *args, **kwargs)

    models.resolve = resolve_spacy_to_table


def record_sentences() -> _SentenceRecorder:
    from faithgate import text as textmod

    textmod._sentences_cached = recorder = _SentenceRecorder(textmod._sentences_cached)
    return recorder


def run_cell(cell: dict, timeout: int) -> dict:
    try:
        proc = subprocess.run(
            [sys.executable, __file__, "--worker"],
            input=json.dumps(cell),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:  # a cut cell is a row of the table, not a crash
        return {"failed": f"timed out after {timeout} s"}
    if proc.returncode != 0:
        return {"failed": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "?"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


# --- agreement and install size ------------------------------------------------------------------


def agreement(ref: list, new: list, bounded: bool) -> dict:
    from faithgate.backends.quantize.parity import Tolerance, compare

    a = np.array([np.nan if v is None else v for v in ref], dtype=float).reshape(-1, 2)
    b = np.array([np.nan if v is None else v for v in new], dtype=float).reshape(-1, 2)
    ok = ~(np.isnan(a).any(axis=1) | np.isnan(b).any(axis=1))
    report = compare("score", a[ok], b[ok], bounded, Tolerance())
    return report.to_dict() | {"nan_pairs": int((~ok).sum())}


def _dist_files_size(dist: metadata.Distribution) -> int:
    total = 0
    for f in dist.files or []:
        with contextlib.suppress(OSError):
            total += (Path(dist.locate_file(f))).stat().st_size
    return total


def _closure(names: list[str]) -> set[str]:
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = re.split(r"[ ;<>=!~\[]", todo.pop(), maxsplit=1)[0].lower().replace("_", "-")
        if not name or name in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        seen.add(name)
        for req in dist.requires or []:
            if "extra ==" not in req:
                todo.append(req)
    return seen


def install_sizes() -> list[tuple[str, float, list[str]]]:
    fg = metadata.distribution("faithgate")
    reqs = fg.requires or []
    core = [r for r in reqs if "extra ==" not in r]
    runtime = [r.split(";")[0] for r in reqs if 'extra == "runtime"' in r]
    core_set = _closure(core)
    runtime_only = _closure(runtime) - core_set
    torch_set = _closure(["torch"])
    torch_full = _closure(["torch", "transformers", "optimum", "optimum-onnx"]) - core_set
    rows = []
    for label, names in (
        ("runtime extra (onnxruntime, tokenizers + deps not in core)", runtime_only),
        ("torch (+ its deps)", torch_set),
        ("torch + transformers + optimum (+ deps not in core)", torch_full),
    ):
        size = sum(_dist_files_size(metadata.distribution(n)) for n in names)
        rows.append((label, size / 2**20, sorted(names)))
    return rows


# --- main --------------------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=50, help="BUMP minimal pairs (2 items each)")
    ap.add_argument("--metrics", default=",".join(METRICS))
    ap.add_argument("--modes", default=",".join(MODES), help="ONNX forms, fp32 = none")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="runs of every form per metric, in rotating order (median reported)",
    )
    ap.add_argument(
        "--nli",
        choices=("checker", "random"),
        default="checker",
        help="NLI model: the shipped checker or a random MiniLM-sized classifier",
    )
    ap.add_argument("--work", type=Path, default=Path("/tmp/faithgate-onnx-bench"))
    ap.add_argument("--timeout", type=int, default=1800)
    ap.add_argument("--json", type=Path, help="write results here as they come; resume from it")
    ap.add_argument("--no-torch", action="store_true",
                    help="skip the torch cells; compare with onnx fp32 (equal to torch within "
                    "1e-6 for encoders and classifiers)")  # fmt: skip
    ap.add_argument("--providers", default="cpu",
                    help="onnxruntime providers to run every ONNX form on: cpu, cuda or "
                    "cpu,cuda (a cuda cell whose sessions fall back to the CPU fails)")  # fmt: skip
    ap.add_argument("--host-cache", default="", type=lambda v: [m for m in v.split(",") if m],
                    help="ONNX forms (e.g. none) to run on CUDA a second time with the LM's "
                    "key/value cache through host memory, as before IO binding")  # fmt: skip
    ap.add_argument("--reference", type=Path,
                    help="take the torch fp32 cells from this earlier --json (another machine's "
                    "run of the same pairs: a lent GPU machine has no model packages); implies "
                    "--no-torch")  # fmt: skip
    ap.add_argument("--sentences", type=Path,
                    help="sentence splits from this table (written by a --record-sentences run "
                    "where spaCy is installed) instead of spaCy")  # fmt: skip
    ap.add_argument("--record-sentences", type=Path,
                    help="write the torch cells' sentence splits to this table")  # fmt: skip
    ap.add_argument("--carried", action="store_true",
                    help="export nothing: use the <role>-<mode> directories in --work, deriving "
                    "a mode only from an fp32 directory there")  # fmt: skip
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(json.loads(sys.stdin.read()))))
        return

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    metrics = [m.strip() for m in args.metrics.split(",") if m.strip()]
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    providers = [p.strip() for p in args.providers.split(",") if p.strip()]
    unknown = (set(metrics) - set(METRICS)) | (set(modes) - set(MODES))
    unknown |= set(providers) - {"cpu", "cuda"}
    if unknown:
        sys.exit(f"unknown metric(s)/mode(s)/provider(s): {', '.join(sorted(unknown))}")
    torch = not (args.no_torch or args.reference)
    items = bump_items(args.pairs)
    args.work.mkdir(parents=True, exist_ok=True)
    roles = {r for m in metrics for r in METRICS[m][1]}
    paths = ensure_exports(args.work, roles, modes, log, args.nli, torch, args.carried)
    # variant -> (form whose paths it uses, provider)
    # variant -> (form whose paths it uses, provider, LM cache through host memory on CUDA)
    forms = {"torch fp32": ("torch fp32", None, False)} if torch else {}
    for mode in modes:
        for provider in providers:
            name = variant_name(mode) + ("" if provider == "cpu" else f" {provider}")
            # explicit, also "cpu": with onnxruntime-gpu and a GPU, no provider means CUDA
            forms[name] = (variant_name(mode), provider, False)
            if provider == "cuda" and mode in args.host_cache:
                forms[name + " host-cache"] = (variant_name(mode), provider, True)
    results: dict[str, dict[str, dict]] = {}
    if args.json and args.json.is_file():
        results = json.loads(args.json.read_text()).get("results", {})
    if args.reference:
        reference = json.loads(args.reference.read_text())
        if reference.get("pairs", 0) < args.pairs:
            sys.exit(f"{args.reference} scored {reference.get('pairs')} pairs, fewer than these")
        for metric in metrics:
            ref = reference["results"].get(metric, {}).get("torch fp32", {})
            if "values" in ref:  # the same pairs come first there: the first 2 x pairs items
                ref = ref | {"values": ref["values"][: len(items)], "elsewhere": "yes"}
                results.setdefault(metric, {})["torch fp32"] = ref
    recorded: dict[tuple, list] = {}
    for metric in metrics:
        settings, mroles, bounded = METRICS[metric]
        results.setdefault(metric, {})
        variants = [v for v, (form, *_) in forms.items() if set(mroles) <= set(paths[form])]
        if "lm" not in mroles:  # the cache's way matters only to the LM
            variants = [v for v in variants if not forms[v][2]]
        if not variants:
            log(f"{metric}: no form of its model here, skipped")
            continue
        for r in range(args.rounds):
            order = variants[r % len(variants) :] + variants[: r % len(variants)]
            for variant in order:
                done = results[metric].get(variant, {})
                if "failed" in done or len(done.get("rounds", [])) > r:
                    continue  # measured by an earlier (cut) run, or failed once
                form, provider, host_cache = forms[variant]
                cell = {
                    "metric": metric,
                    "settings": settings,
                    "backend": "torch" if variant == "torch fp32" else "onnx",
                    "models": {role: paths[form][role] for role in mroles},
                    "items": items,
                    "threads": args.threads,
                    "provider": provider,
                    "host_cache": host_cache,
                    "sentences": str(args.sentences) if args.sentences else None,
                    "record_sentences": bool(args.record_sentences) and variant == "torch fp32",
                }
                log(f"{metric} / {variant} (round {r + 1}) ...")
                res = run_cell(cell, args.timeout)
                for text, model, sents in res.pop("sentences", []):
                    recorded[(text, model)] = sents
                res["file_mb"] = sum(file_mb(p) for p in cell["models"].values())
                expected = {"cpu": "CPUExecutionProvider", "cuda": "CUDAExecutionProvider"}
                wrong = {
                    role: used
                    for role, used in res.get("providers", {}).items()
                    if provider and used and used != [expected[provider]]
                }
                if wrong:  # a CUDA figure measured on the CPU (or back) is a wrong figure
                    res = {"failed": f"sessions did not run on {provider}: {wrong}"}
                log(f"  {res.get('seconds', float('nan')):.1f} s {res.get('failed', '')}")
                if "failed" not in res:
                    res["rounds"] = [*done.get("rounds", []), res["seconds"]]
                    res["seconds"] = float(np.median(res["rounds"]))
                results[metric][variant] = res
                if args.json:
                    args.json.write_text(json.dumps({"results": results, "pairs": args.pairs}))
    if args.record_sentences:
        table = [[text, model, sents] for (text, model), sents in recorded.items()]
        args.record_sentences.write_text(json.dumps(table), encoding="utf-8")
    print_tables(results, items, args)


def speed_ratio(base: dict, res: dict) -> float:
    """Median over rounds of base time / res time, pairing the runs of one round (so a load
    change between rounds cancels); the ratio of medians for cells without rounds."""
    a, b = base.get("rounds") or [], res.get("rounds") or []
    if a and b:
        return float(np.median([x / y for x, y in zip(a, b)]))  # noqa: B905 - cut runs
    if "seconds" in base and "seconds" in res:
        return base["seconds"] / res["seconds"]
    return float("nan")


def _times(ratio: float) -> str:
    return "-" if ratio != ratio else f"{ratio:.2f}x"


def print_tables(results: dict[str, dict[str, dict]], items: list[dict], args) -> None:
    """The markdown tables of a run (also of a resumed one)."""
    print(f"\n### ONNX speed: {len(items)} BUMP task-1 items ({args.pairs} minimal pairs), "
          f"{args.threads} threads, {os.cpu_count()} CPUs, median of {args.rounds} "
          "rotating rounds\n")  # fmt: skip
    print("| metric | form | items/s | vs torch | vs onnx fp32 | vs same form on CPU | model s "
          "| peak RSS MB | file MB | file vs fp32 | mean abs diff | pair agreement | consistency "
          "| gate |")  # fmt: skip
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    verdicts: dict[str, dict[str, bool]] = {}
    for metric, cells in results.items():
        bounded = METRICS[metric][2]
        fp32 = cells.get("onnx fp32", {})
        ref = cells.get("torch fp32", {})
        if "values" not in ref:  # torch cell skipped or cut: onnx fp32 is the reference
            ref = fp32
        for variant, res in cells.items():
            if "failed" in res or "seconds" not in res:
                print(
                    f"| {metric} | {variant} | failed: {res.get('failed', '?')[:80]} ||||||||||||"
                )
                continue
            rate = len(items) / res["seconds"]
            vs_torch = float("nan") if ref.get("elsewhere") else speed_ratio(ref, res)
            vs_fp32 = speed_ratio(fp32, res)
            # a CUDA row against the same form on the CPU of the same machine
            on_cpu = cells.get(variant.rsplit(" ", 1)[0], {}) if variant.endswith(" cuda") else {}
            vs_cpu = _times(speed_ratio(on_cpu, res)) if "seconds" in on_cpu else "-"
            size = res.get("file_mb", float("nan"))
            rel = size / fp32["file_mb"] if fp32.get("file_mb") else float("nan")
            if "values" in ref and res is not ref:
                ag = agreement(ref["values"], res["values"], bounded)
                unit = "" if bounded else " nats"
                diff = f"{ag['mean_abs_diff']:.2e}{unit} | {ag['rank_agreement']:.3f} | "
                diff += f"{ag['consistency_ref']:.3f} -> {ag['consistency_new']:.3f} | "
                diff += "pass" if ag["passed"] else "FAIL: " + "; ".join(ag["reasons"])
                res["agreement"] = ag
                role = METRICS[metric][1][0]
                verdicts.setdefault(role, {})
                verdicts[role][variant] = verdicts[role].get(variant, True) and ag["passed"]
            else:
                cons = agreement(res["values"], res["values"], bounded)["consistency_ref"]
                diff = f"- | - | {cons:.3f} | reference"
            if res.get("elsewhere"):  # its speed is another machine's: not comparable
                print(f"| {metric} | {variant} (CPU machine) | - | - | - | - | - | - | - | - | - "
                      f"| {cons:.3f} | reference |")  # fmt: skip
                continue
            print(
                f"| {metric} | {variant} | {rate:.2f} | {_times(vs_torch)} | {_times(vs_fp32)} "
                f"| {vs_cpu} | {res['model_seconds']:.1f} | {res['peak_rss_mb']:.0f} | {size:.1f} "
                f"| {'-' if rel != rel else f'{100 * rel:.0f}%'} | {diff} |"
            )
    print(
        "\n### What `--quantize auto` keeps on these pairs (smallest form passing every metric)\n"
    )
    from faithgate.backends.quantize.modes import AUTO_CANDIDATES

    for device in ("cpu", "cuda"):
        suffix = "" if device == "cpu" else " cuda"
        order = [variant_name(m) + suffix for m in AUTO_CANDIDATES[device]]
        for role, passed in sorted(verdicts.items()):
            if not any(v.endswith(" cuda") == (device == "cuda") for v in passed):
                continue
            keep = next((v for v in order if passed.get(v)), "onnx fp32" + suffix)
            tried = ", ".join(v for v in order if passed.get(v)) or "-"
            print(f"- {role} on {device}: {keep} (passed: {tried})")
    if os.environ.get("FG_BENCH_INSTALL_SIZES"):
        print("\n### Install size (files listed in each distribution's RECORD)\n")
        print("| install | MiB | distributions |")
        print("|---|---:|---|")
        sizes = install_sizes()
        for label, mib, names in sizes:
            print(f"| {label} | {mib:.1f} | {', '.join(names)} |")


if __name__ == "__main__":
    main()
