"""Whether batched sentence splitting (``faithgate.text.presplit``, ``nlp.pipe``) gives the
sentences of one text at a time (``nlp(text)``), on real texts.

Development data (``$FAITHGATE_SHARED_DATA``): the distinct sources and summaries of SummEval,
Polytope, CoGenSumm, FactCC, QAGS and FALKE, normalised as faithgate scores them, first N.

    python benchmarks/split_equivalence.py 3000
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from faithgate import text as textmod
from faithgate.types import normalized

SETS = ("summeval", "polytope", "cogensumm", "factcc_subset", "qags", "falke2019")


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    data = Path(os.environ.get("FAITHGATE_SHARED_DATA", "../shared/data"))
    texts: list[str] = []
    for name in SETS:
        for line in (data / f"{name}.jsonl").open(encoding="utf-8"):
            row = json.loads(line)
            texts += [normalized(row["source"]), normalized(row["summary"])]
    texts = list(dict.fromkeys(texts))[:n]
    start = time.perf_counter()
    alone = [textmod._sentences_alone.__wrapped__(t, None) for t in texts]
    middle = time.perf_counter()
    batched = []
    for at in range(0, len(texts), 1024):  # within presplit's cache
        textmod.presplit(texts[at : at + 1024], None)
        batched += [textmod._BATCH_SPLIT[(t, None)] for t in texts[at : at + 1024]]
    end = time.perf_counter()
    differ = [i for i, (a, b) in enumerate(zip(alone, batched, strict=True)) if a != b]
    print(
        f"{len(texts)} texts: one at a time {middle - start:.1f} s, batched {end - middle:.1f} s, "
        f"{len(differ)} differ"
    )
    for i in differ[:3]:
        print(alone[i], batched[i], sep="\n")


if __name__ == "__main__":
    main()
