"""Speed and memory of one metric's checker: torch vs ONNX fp32 vs quantized ONNX, side by side.

Generic over the metric and its models, so any checker (minicheck, summac_zs, alignscore, hhem,
...) is measured the same way::

    python benchmarks/checker_speed.py --metric summac_zs                 # the shipped checker
    python benchmarks/checker_speed.py --metric minicheck --model nli=DIR \\
        --set nli.supported_label=LABEL_1 --forms torch,onnx,w8,int8-dynamic

``--model ROLE=PATH`` picks a role's model (default: the role's default, e.g. the shipped
checker for ``nli``). ``--set METRIC.KEY=VALUE`` is a metric setting; ``--set ROLE.KEY=VALUE``
(ROLE a model role) a loader option of that role, as ``faithgate score --set`` reads them.

Forms (``--forms``): ``torch`` (fp32), ``onnx`` (the fp32 export) and any quantized mode of
``faithgate export --quantize`` (``w8``, ``w4``, ``int8-dynamic``, ...). The fp32 export is made
once per role into ``--work`` (never the faithgate cache); each quantized form is derived from
its graph file, ungated (the table reports its agreement with torch instead), as
benchmarks/onnx_speed.py does.

Each form runs in a fresh subprocess, one after the other (``--rounds`` rotates the order):

- items/s: scored (source, summary) items per second, model load and a 2-item warm-up excluded;
- peak RSS: the subprocess's peak resident memory (``VmHWM``: imports and weights included);
- max |diff|: the largest score difference from torch fp32 over the same items.

Items: the first ``--items`` rows of BUMP task 1 ($FAITHGATE_SHARED_DATA), or ``--synthetic``
(a fixed news paragraph and summaries, for a machine without the data). Results also go to
``--json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SYNTHETIC_SOURCE = (
    "The mayor of Springfield, John Carter, opened a new public library on Monday. "
    "The building cost 4 million dollars and holds 20,000 books. "
    "Carter said the library would stay open until 9 pm every weekday. "
    "Local students had campaigned for the library since 2015. "
    "The old library, which was built in 1952, will become a museum."
)
SYNTHETIC_SUMMARIES = (
    "Springfield opened a new library on Monday.",
    "The library cost 4 million dollars and holds 20,000 books.",
    "The library will close at 6 pm on weekdays.",
    "Students campaigned for it since 2015, and the old library becomes a museum.",
)


def items_from(args: argparse.Namespace) -> list[dict]:
    if args.synthetic:
        return [
            {"id": str(i), "source": SYNTHETIC_SOURCE, "summary": SYNTHETIC_SUMMARIES[i % 4]}
            for i in range(args.items)
        ]
    env = os.environ.get("FAITHGATE_SHARED_DATA")
    path = (Path(env) if env else REPO.parent / "shared" / "data") / "bump_task1.jsonl"
    if not path.is_file():
        sys.exit(f"{path} not found: set FAITHGATE_SHARED_DATA or pass --synthetic")
    rows = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                row = json.loads(line)
                rows.append({"id": row["id"], "source": row["source"], "summary": row["summary"]})
            if len(rows) == args.items:
                break
    return rows


def split_sets(items: list[str]) -> tuple[dict, dict]:
    """``--set`` items into (metric settings, model options), by whether the prefix is a role."""
    from faithgate.models import ROLES

    settings: dict[str, dict] = {}
    options: dict[str, dict] = {}
    for item in items:
        key, _, raw = item.partition("=")
        head, _, name = key.partition(".")
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        (options if head in ROLES else settings).setdefault(head, {})[name] = value
    return settings, options


def export_forms(
    roles: dict[str, str | None],
    forms: list[str],
    work: Path,
    log,
    tasks: dict[str, str] | None = None,
) -> dict[str, dict[str, str]]:
    """form -> {role: model path or name}; ONNX forms point at export directories in ``work``."""
    from faithgate import models
    from faithgate.backends.export import (
        MANIFEST_NAME,
        export_model,
        load_manifest,
        quantization_feeds,
    )
    from faithgate.backends.quantize.modes import quantize_file, quantized_file_name
    from faithgate.backends.quantize.parity import Tolerance, load_calibration

    out: dict[str, dict[str, str]] = {form: {} for form in forms}
    for role, given in roles.items():
        spec = models.resolve(role, given)
        if "torch" in forms:
            out["torch"][role] = given or spec.name
        onnx_forms = [f for f in forms if f != "torch"]
        if not onnx_forms:
            continue
        fp32_dir = work / f"{role}-none"
        if not (fp32_dir / MANIFEST_NAME).is_file():
            log(f"exporting {role} (fp32) -> {fp32_dir}")
            task = (tasks or {}).get(role)  # None: the role's own task
            export_model(spec, task, out=fp32_dir, quantize="none", tolerance=Tolerance.loose())
        fp32 = load_manifest(fp32_dir)
        for form in onnx_forms:
            if form == "onnx":
                out[form][role] = str(fp32_dir)
                continue
            target = work / f"{role}-{form}"
            if not (target / MANIFEST_NAME).is_file():
                log(f"quantizing {role} ({form}) -> {target}")
                tmp = work / f"{role}-{form}.tmp"
                shutil.rmtree(tmp, ignore_errors=True)
                tmp.mkdir()
                for f in fp32_dir.iterdir():
                    if f.suffix != ".onnx" and f.name != MANIFEST_NAME and f.is_file():
                        shutil.copy(f, tmp / f.name)
                feeds = quantization_feeds(fp32, form, load_calibration(None))
                files = {}
                for part, name in fp32.files.items():
                    files[part] = quantized_file_name(name, form)
                    quantize_file(form, fp32_dir / name, tmp / files[part], feeds, fp32.task)
                data = fp32.to_dict() | {"quantization": form, "files": files}
                data["parity"] = {"gated": False, "note": "benchmark copy, ungated"}
                (tmp / MANIFEST_NAME).write_text(json.dumps(data, indent=1))
                shutil.rmtree(target, ignore_errors=True)
                tmp.rename(target)
            out[form][role] = str(target)
    return out


def peak_rss_mb() -> float:
    """Peak resident memory of this process (``VmHWM`` restarts at exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def worker(cell: dict) -> dict:
    """One form, in its own process: load, warm up on 2 items, then time every item."""
    from faithgate.scoring.scorer import Scorer
    from faithgate.types import Example

    if cell["backend"] == "torch":
        import torch

        torch.set_num_threads(cell["threads"])
    examples = [Example(i["id"], i["source"], i["summary"]) for i in cell["items"]]
    options = {r: dict(o) for r, o in cell["options"].items()}
    if cell["backend"] == "onnx":
        for role in cell["models"]:
            options.setdefault(role, {})["threads"] = cell["threads"]
    metric = cell["metric"]
    warm = Scorer(
        [metric],
        models=cell["models"],
        backend=cell["backend"],
        metric_settings={metric: cell["settings"]},
        model_options=options,
    )
    t0 = time.perf_counter()
    warm.score(examples[:2])
    load_s = time.perf_counter() - t0
    scorer = Scorer([metric], metric_settings={metric: cell["settings"]}, pool=warm.pool)
    t0 = time.perf_counter()
    rows = scorer.score(examples)
    elapsed = time.perf_counter() - t0
    values = [row[metric].value for row in rows]
    return {
        "values": [None if v != v else v for v in values],
        "seconds": elapsed,
        "load_seconds": load_s,
        "peak_rss_mb": peak_rss_mb(),
        "failed": sum(1 for row in rows if row[metric].failure),
        "settings_hash": rows[0][metric].settings_hash,
    }


def run_cell(cell: dict, timeout: int) -> dict:
    try:
        proc = subprocess.run(
            [sys.executable, __file__, "--worker"],
            input=json.dumps(cell),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s"}
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        return {"error": lines[-1] if lines else f"exit {proc.returncode}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def max_diff(ref: list, new: list) -> float:
    pairs = [(a, b) for a, b in zip(ref, new, strict=True) if a is not None and b is not None]
    return max((abs(a - b) for a, b in pairs), default=float("nan"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--metric", default="summac_zs")
    parser.add_argument("--model", action="append", default=[], metavar="ROLE=PATH")
    parser.add_argument("--set", action="append", default=[], metavar="METRIC|ROLE.KEY=VALUE")
    parser.add_argument(
        "--task",
        action="append",
        default=[],
        metavar="ROLE=TASK",
        help="export a role for this task (e.g. nli=seq2seq-lm for MiniCheck-Flan-T5)",
    )
    parser.add_argument("--forms", default="torch,onnx,w8,int8-dynamic")
    parser.add_argument("--items", type=int, default=40)
    parser.add_argument("--synthetic", action="store_true")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--timeout", type=int, default=900)
    parser.add_argument("--work", type=Path, default=Path("/tmp/faithgate-checker-speed"))
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(json.loads(sys.stdin.read()))))
        return

    from faithgate.metrics.base import get_metric

    settings, options = split_sets(args.set)
    metric_settings = settings.get(args.metric, {})
    given = dict(m.split("=", 1) for m in args.model)
    metric = get_metric(args.metric, **metric_settings)
    roles: dict[str, str | None] = {
        r: given.get(r) for r in metric.roles if r != "spacy"
    } | given  # a role the metric picks by configuration (--model) counts too
    forms = [f.strip() for f in args.forms.split(",") if f.strip()]
    args.work.mkdir(parents=True, exist_ok=True)
    tasks = dict(t.split("=", 1) for t in args.task)
    paths = export_forms(roles, forms, args.work, lambda m: print(m, file=sys.stderr), tasks)
    items = items_from(args)
    runs: dict[str, list[dict]] = {f: [] for f in forms}
    for r in range(args.rounds):
        order = forms[r % len(forms) :] + forms[: r % len(forms)]
        for form in order:
            cell = {
                "metric": args.metric,
                "settings": metric_settings,
                "options": options,
                "models": paths[form],
                "backend": "torch" if form == "torch" else "onnx",
                "items": items,
                "threads": args.threads,
            }
            print(f"round {r + 1}: {form}", file=sys.stderr)
            runs[form].append(run_cell(cell, args.timeout))
    ref = next((x for x in runs.get("torch", []) if "values" in x), None)
    table = []
    for form in forms:
        done = [x for x in runs[form] if "values" in x]
        if not done:
            table.append({"form": form, "error": runs[form][-1].get("error", "?")})
            continue
        seconds = statistics.median(x["seconds"] for x in done)
        table.append(
            {
                "form": form,
                "items_per_s": len(items) / seconds,
                "peak_rss_mb": max(x["peak_rss_mb"] for x in done),
                "load_s": statistics.median(x["load_seconds"] for x in done),
                "max_diff_vs_torch": max_diff(ref["values"], done[0]["values"]) if ref else None,
                "failed": done[0]["failed"],
                "settings_hash": done[0]["settings_hash"],
            }
        )
    data = "synthetic" if args.synthetic else "BUMP task 1 (first rows)"
    print(
        f"\n{args.metric}, {len(items)} items ({data}), {args.threads} threads, "
        f"median of {args.rounds} round(s), models: {paths.get('torch') or roles}\n"
    )
    print("| form | items/s | peak RSS MB | load s | max abs diff vs torch |")
    print("|---|---:|---:|---:|---:|")
    for row in table:
        if "error" in row:
            print(f"| {row['form']} | failed: {row['error'][:80]} | | | |")
            continue
        diff = row["max_diff_vs_torch"]
        print(
            f"| {row['form']} | {row['items_per_s']:.2f} | {row['peak_rss_mb']:.0f} | "
            f"{row['load_s']:.1f} | {'-' if diff is None else f'{diff:.2e}'} |"
        )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "args": vars(args) | {"work": str(args.work), "json": str(args.json)},
                    "table": table,
                },
                indent=1,
                default=str,
            )
        )


if __name__ == "__main__":
    main()
