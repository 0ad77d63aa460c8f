"""Speed and memory of ``alignscore`` and ``hhem`` on torch fp32, ONNX fp32 and quantized ONNX,
side by side in one run.

The checkers are the tiny random ones of ``tests/tiny_checkers.py`` (seed 45), converted with
``faithgate.convert`` and exported with ``faithgate.backends.export`` (quantized forms ungated:
the table measures them, not the gate). Items: ``--items`` (source, summary) pairs, half with
``tiny_checkers.SHORT`` (3 sentences) and half with ``tiny_checkers.LONG`` (50 sentences, 600
words: two AlignScore chunks), each summary distinct so nothing is answered from a cache.

Each form runs in a fresh subprocess (``--rounds`` times, the forms' order rotated each round):
items/s is the median over rounds of items / scoring seconds (model load and one warm-up
batch excluded); peak RSS is the subprocess's ``VmHWM`` (imports and weights included).

    nice -n 5 python benchmarks/checker_align_speed.py --items 40 --rounds 3
    nice -n 5 python benchmarks/checker_align_speed.py --size base --items 8 --rounds 1

``--size base`` builds random checkers of AlignScore-base's and HHEM's real sizes (RoBERTa-base,
Flan-T5-base encoder) over the tiny vocabularies: real compute per token, toy tokenization.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FORMS = ("torch", "onnx-fp32", "onnx-int8-dynamic", "onnx-w8")

_CHILD = """
import json, sys, time
from faithgate import Example, Scorer
metric, path, backend, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
sys.path.insert(0, sys.argv[5])
import tiny_checkers as tc
sources = [tc.SHORT, tc.LONG]
summaries = ["The mayor opened a library on day {i}.", "The river rose by {i} metres. Sheep moved."]
items = [Example(str(i), sources[i % 2], summaries[i % 2].format(i=i)) for i in range(n)]
scorer = Scorer([metric], models={metric: path}, backend=backend)
scorer.score([Example("warm", tc.SHORT, "A warm-up sentence.")])
start = time.perf_counter()
scorer.score(items)
seconds = time.perf_counter() - start
rss = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM"))
print(json.dumps({"seconds": seconds, "rss_mb": rss / 1024}))
"""


def build(work: Path, size: str = "tiny") -> dict[tuple[str, str], tuple[Path, str]]:
    """The tiny checkers, converted and exported: (metric, form) -> (directory, backend)."""
    sys.path.insert(0, str(REPO / "tests"))
    import tiny_checkers as tc

    from faithgate import models
    from faithgate.backends.export import export_model
    from faithgate.backends.quantize.parity import Tolerance
    from faithgate.convert import convert_alignscore, convert_hhem

    UNGATED = Tolerance(max_mean_abs_diff=1.0, min_rank_agreement=0.0, max_consistency_change=1.0)

    base_size = size == "base"
    base, ckpt = tc.save_alignscore(work, tc.ROBERTA_BASE if base_size else None)
    foundation, hhem = tc.save_hhem(work, tc.T5_BASE if base_size else None)
    dirs = {
        "alignscore": convert_alignscore(ckpt, base, work / "alignscore"),
        "hhem": convert_hhem(hhem, foundation, work / "hhem"),
    }
    out: dict[tuple[str, str], tuple[Path, str]] = {}
    for metric, directory in dirs.items():
        out[(metric, "torch")] = (directory, "torch")
        spec = models.resolve(metric, str(directory))
        for form in FORMS[1:]:
            mode = form.removeprefix("onnx-").replace("fp32", "none")
            manifest = export_model(
                spec,
                out=work / f"{metric}-{form}",
                quantize=mode,
                calibration=[(tc.SHORT, tc.PAIRS[0][1], tc.PAIRS[1][1])],
                tolerance=UNGATED,
            )
            if manifest.quantization != mode:
                raise SystemExit(f"{metric}: {mode} was not made ({manifest.parity})")
            out[(metric, form)] = (manifest.directory, "onnx")
    return out


def parity(cells: dict[tuple[str, str], tuple[Path, str]]) -> str:
    """Max |score - reference| of each form on ``tiny_checkers.PAIRS``, against the golden
    values of the reference code (tests/golden/checker_reference.json)."""
    import tiny_checkers as tc

    from faithgate import Example, Scorer

    golden = json.loads((REPO / "tests" / "golden" / "checker_reference.json").read_text())
    examples = [Example(str(i), s, c) for i, (s, c) in enumerate(tc.PAIRS)]
    lines = ["| metric | form | max abs diff vs reference |", "| --- | --- | ---: |"]
    for (metric, form), (directory, backend) in cells.items():
        scorer = Scorer([metric], models={metric: str(directory)}, backend=backend)
        got = [r[metric].value for r in scorer.score(examples)]
        want = golden["alignscore_nli" if metric == "alignscore" else metric]
        diff = max(abs(a - b) for a, b in zip(got, want, strict=True))
        lines.append(f"| {metric} | {form} | {diff:.1e} |")
    return "\n".join(lines)


def run(metric: str, directory: Path, backend: str, items: int) -> dict[str, float]:
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            _CHILD,
            metric,
            str(directory),
            backend,
            str(items),
            str(REPO / "tests"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-2000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--size",
        choices=("tiny", "base"),
        default="tiny",
        help="tiny: the test checkers; base: RoBERTa-base and Flan-T5-base sizes (random)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cells = build(Path(tmp), args.size)
        if args.size == "tiny":  # the golden values are of the tiny checkers
            print(parity(cells))
        results: dict[tuple[str, str], list[dict[str, float]]] = {k: [] for k in cells}
        for r in range(args.rounds):
            for metric in ("alignscore", "hhem"):
                order = FORMS[r % len(FORMS) :] + FORMS[: r % len(FORMS)]
                for form in order:
                    directory, backend = cells[(metric, form)]
                    results[(metric, form)].append(run(metric, directory, backend, args.items))
    rows = []
    print("| metric | form | items/s | vs torch | peak RSS (MB) |")
    print("| --- | --- | ---: | ---: | ---: |")
    for metric in ("alignscore", "hhem"):
        torch_speed = statistics.median(
            args.items / c["seconds"] for c in results[(metric, "torch")]
        )
        for form in FORMS:
            cells_ = results[(metric, form)]
            speed = statistics.median(args.items / c["seconds"] for c in cells_)
            rss = statistics.median(c["rss_mb"] for c in cells_)
            rows.append({"metric": metric, "form": form, "items_per_s": speed, "rss_mb": rss})
            print(f"| {metric} | {form} | {speed:.1f} | {speed / torch_speed:.2f}x | {rss:.0f} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
