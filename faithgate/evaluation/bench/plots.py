"""``--plots``: ROC curves and score histograms of each metric, as PNG files."""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from faithgate.errors import InputError
from faithgate.evaluation.meta import Item, roc_auc
from faithgate.safety.atomic import atomic_write_bytes


def write_plots(
    directory: str | Path,
    dataset: str,
    items: Sequence[Item],
    scores: Mapping[str, np.ndarray],
) -> list[str]:
    """PNG figures per metric: ROC curves (overall and per error type) and score histograms of
    faithful vs unfaithful items. Returns the written paths."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise InputError("--plots needs matplotlib: pip install 'faithgate[full]'") from None
    from sklearn.metrics import roc_curve

    from faithgate.evaluation.meta import _error_type_groups, conflicting_keys, dedupe_labelled

    out_dir = Path(directory)  # created by the first atomic write
    written: list[str] = []

    def save(fig: Any, path: Path) -> None:
        png = io.BytesIO()
        fig.savefig(png, format="png", dpi=110)
        atomic_write_bytes(path, png.getvalue())
        written.append(str(path))

    groups = {"all": list(range(len(items))), **_error_type_groups(items)}
    # As in the statistics: each item once, one labelled both ways left out.
    bad = conflicting_keys([it.key for it in items], [it.label for it in items])

    def distinct(idx: Sequence[int]) -> list[int]:
        kept, _ = dedupe_labelled([items[i].key for i in idx], [items[i].label for i in idx], bad)
        return [idx[j] for j in kept]

    for mname, s in scores.items():
        s = np.asarray(s, dtype=float)
        fig, ax = plt.subplots(figsize=(5.5, 5))
        drew = False
        for gname, idx in groups.items():
            idx = distinct(idx)
            y = np.asarray([items[i].label if items[i].label is not None else -1 for i in idx])
            sv = s[idx]
            keep = (y >= 0) & ~np.isnan(sv)
            if len(set(y[keep].tolist())) < 2:
                continue
            fpr, tpr, _ = roc_curve(y[keep], sv[keep])
            auc = roc_auc(sv[keep], y[keep])
            ax.plot(fpr, tpr, lw=2.2 if gname == "all" else 1.2, label=f"{gname} (AUC {auc:.2f})")
            drew = True
        if drew:
            ax.plot([0, 1], [0, 1], ls=":", c="grey")
            ax.set_xlabel("false positive rate (unfaithful kept)")
            ax.set_ylabel("true positive rate (faithful kept)")
            ax.set_title(f"{dataset}: {mname}")
            ax.legend(fontsize=7, loc="lower right")
            fig.tight_layout()
            save(fig, out_dir / f"{dataset}__{mname}__roc.png")
        plt.close(fig)
        uniq = distinct(list(range(len(items))))
        y = np.asarray([items[i].label if items[i].label is not None else -1 for i in uniq])
        sv = s[uniq]
        if (y == 1).any() and (y == 0).any():
            fig, ax = plt.subplots(figsize=(6, 4))
            finite = sv[~np.isnan(sv)]
            bins = np.linspace(finite.min(), finite.max(), 31) if finite.size else 30
            ax.hist(
                sv[(y == 1) & ~np.isnan(sv)], bins=bins, alpha=0.6, label="faithful", density=True
            )
            ax.hist(
                sv[(y == 0) & ~np.isnan(sv)], bins=bins, alpha=0.6, label="unfaithful", density=True
            )
            ax.set_xlabel(f"{mname} score")
            ax.set_ylabel("density")
            ax.set_title(f"{dataset}: {mname}")
            ax.legend()
            fig.tight_layout()
            save(fig, out_dir / f"{dataset}__{mname}__hist.png")
            plt.close(fig)
    return written
