"""The shipped LM as a zero-shot judge: can SmolLM2-135M-Instruct say whether a summary is
supported? (issue 11)

Per (source, summary), with the model's chat template and this user turn (source cut at 1,500
tokens)::

    Document:\\n{source}\\n\\nSummary:\\n{summary}\\n\\nIs every fact in the summary supported by
    the document? Answer Yes or No.

the score is log P(Yes) - log P(No) at the answer's first token ("Yes"/" Yes"/"yes" against
"No"/" No"/"no", each side log-sum-exp'd). No training and no tuning: the prompt was written
once, before any figure. ROC AUC over the rows (label 1 = faithful); for a file of minimal
pairs (BUMP), ``--pairs N`` takes a seeded sample of N pairs and also reports the share of pairs
whose reference outscores its edit. torch, CPU, 2 threads. Nothing here ships: the figures are
in docs/metrics/likelihood.md.

    python benchmarks/lm_judge.py ../shared/data/falke2019.jsonl --limit 100
    python benchmarks/lm_judge.py ../shared/data/bump_task1.jsonl --pairs 60
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

import numpy as np

QUESTION = "Is every fact in the summary supported by the document? Answer Yes or No."
SOURCE_TOKENS = 1500


def _rows(path: Path, limit: int, pairs: int) -> list[dict]:
    rows = [json.loads(line) for line in path.open(encoding="utf-8") if line.strip()]
    if pairs:
        by_pair: dict[str, dict] = {}
        for row in rows:
            if row.get("pair_id") is not None:
                by_pair.setdefault(row["pair_id"], {})[row.get("role")] = row
        ids = sorted(k for k, v in by_pair.items() if "reference" in v and "edited" in v)
        random.Random(0).shuffle(ids)
        return [by_pair[k][role] for k in ids[:pairs] for role in ("reference", "edited")]
    rows = [r for r in rows if r.get("label") is not None]
    random.Random(0).shuffle(rows)
    return rows[:limit]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path, help="labelled JSONL (source, summary, label)")
    parser.add_argument("--limit", type=int, default=100, help="seeded sample of rows")
    parser.add_argument("--pairs", type=int, default=0, help="seeded sample of minimal pairs")
    args = parser.parse_args(argv)

    import torch
    from sklearn.metrics import roc_auc_score
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from faithgate import models

    torch.set_num_threads(2)
    location = str(models.resolve("lm").location)
    tok = AutoTokenizer.from_pretrained(location)
    lm = AutoModelForCausalLM.from_pretrained(location, dtype=torch.float32).eval()
    yes = [tok.encode(w, add_special_tokens=False)[0] for w in ("Yes", " Yes", "yes")]
    no = [tok.encode(w, add_special_tokens=False)[0] for w in ("No", " No", "no")]

    def judge(source: str, summary: str) -> float:
        source = tok.decode(tok.encode(source, add_special_tokens=False)[:SOURCE_TOKENS])
        turn = f"Document:\n{source}\n\nSummary:\n{summary}\n\n{QUESTION}"
        ids = tok.apply_chat_template(
            [{"role": "user", "content": turn}], add_generation_prompt=True, return_tensors="pt"
        )
        with torch.no_grad():
            logp = torch.log_softmax(lm(ids).logits[0, -1], -1)
        return float(torch.logsumexp(logp[yes], 0) - torch.logsumexp(logp[no], 0))

    rows = _rows(args.data, args.limit, args.pairs)
    t0 = time.perf_counter()
    scores = np.array([judge(r["source"], r["summary"]) for r in rows])
    labels = np.array([int(r["label"]) for r in rows])
    out = {
        "file": args.data.name,
        "rows": len(rows),
        "roc_auc": round(roc_auc_score(labels, scores), 3),
    }
    if args.pairs:
        out["consistency"] = round(float(np.mean(scores[0::2] > scores[1::2])), 3)
    out["seconds"] = round(time.perf_counter() - t0)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
