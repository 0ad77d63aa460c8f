"""Checkpoints of a training run: written atomically, read back checked against the recipe,
the starting model and the base model before a run resumes from one."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from faithgate.errors import InputError
from faithgate.safety.escape import printable
from faithgate.training.recipe import TrainConfig


def save_checkpoint(obj: Any, path: Path) -> None:
    """Write ``obj`` to ``path`` through a synced temporary: an interrupted run leaves the last
    whole checkpoint."""
    import torch

    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb") as fh:
        torch.save(obj, fh)
        fh.flush()
        os.fsync(fh.fileno())
    tmp.replace(path)


# What every checkpoint holds; an earlier one without the dataset's digest cannot be checked
# against this run's data, so it is refused like a damaged one.
_CHECKPOINT_KEYS = ("recipe_hash", "dataset_sha256", "total_steps", "model", "optimizer")
_CHECKPOINT_KEYS += ("scheduler", "step", "history", "torch_rng")


def _earlier_version(path: Path) -> InputError:
    return InputError(
        f"{printable(path)} is not a checkpoint this faithgate can resume from: an earlier "
        "faithgate version wrote it, before checkpoints recorded their dataset and step count, "
        "so this run's data cannot be checked against it; remove it (or the whole work "
        f"directory {printable(path.parent)}) to start afresh"
    )


def damaged_checkpoint(path: Path, exc: BaseException | None = None) -> InputError:
    """The error for a checkpoint that cannot be read back (``exc``: why, by its type)."""
    why = f" ({type(exc).__name__})" if exc is not None else ""
    return InputError(
        f"{printable(path)} is not a checkpoint this faithgate can resume from (damaged, "
        f"truncated or written by another version){why}: remove it to start afresh"
    )


def load_checkpoint(path: Path, config: TrainConfig, device: str) -> dict[str, Any]:
    """The checkpoint at ``path``, checked to be whole and of ``config``'s recipe."""
    import pickle

    import torch

    try:
        state = torch.load(path, weights_only=False, map_location=device)
    except (RuntimeError, ValueError, EOFError, pickle.UnpicklingError, AttributeError,
            ImportError, IndexError, KeyError, TypeError, UnicodeDecodeError) as exc:  # fmt: skip
        raise damaged_checkpoint(path, exc) from None
    except OSError as exc:
        raise InputError(f"{printable(path)} cannot be read ({exc.strerror})") from None
    if not isinstance(state, dict):
        raise damaged_checkpoint(path)
    missing = {key for key in _CHECKPOINT_KEYS if key not in state}
    if missing and missing <= {"dataset_sha256", "total_steps"}:
        raise _earlier_version(path)  # whole, but its data cannot be verified: never resumed
    if missing:
        raise damaged_checkpoint(path)
    if state["recipe_hash"] != config.recipe_hash():
        first = replace(config, synth=replace(config.synth, synthesis=1))
        hint = (
            ": that of --synthesis 1 (the default before synthesis 2); add it to resume"
            if state["recipe_hash"] == first.recipe_hash()
            else ""
        )
        raise InputError(
            f"{printable(path)} belongs to another recipe ({printable(state['recipe_hash'])})"
            f"{hint}; remove it or use another --out"
        )
    return state


def check_same_start(
    state: dict[str, Any], init_sha256: str | None, config: TrainConfig, path: Path
) -> None:
    """Refuse (``InputError``) to resume a checkpoint that started from other weights than
    this run's ``--init-from`` (same path, changed content): the run would go on from the
    old start while the manifest names the new one. Without ``--init-from`` the recipe hash
    already says the checkpoint had none."""
    if config.init_from is None:
        return
    recorded = state.get("init_sha256")
    if recorded == init_sha256:
        return
    why = (
        "the starting model changed: --init-from "
        f"{printable(config.init_from)} holds other weights than the checkpoint started from"
        if recorded
        else "it does not record the --init-from weights it started from (an earlier "
        "faithgate version wrote it), so the starting model cannot be checked"
    )
    raise _cannot_resume(path, why)


def check_same_base(
    state: dict[str, Any], fingerprint: str, config: TrainConfig, path: Path
) -> None:
    """Refuse (``InputError``) to resume a checkpoint made on another ``--base-model`` than
    this run's (a local directory whose content changed, or a hub id now at another commit):
    the run would go on from the old weights with the new tokenizer, and the manifest would
    name the new base. (A checkpoint without the record, from an earlier faithgate, is resumed
    unchecked, with a log line: ``train._run``.)"""
    recorded = state.get("base_fingerprint")
    if recorded == fingerprint:
        return
    why = (
        f"the base model changed: --base-model {printable(config.base_model)} is now "
        f"{printable(fingerprint)}, the checkpoint started from {printable(str(recorded))}"
    )
    raise _cannot_resume(path, why)


def _cannot_resume(path: Path, why: str) -> InputError:
    return InputError(
        f"{printable(path)} cannot be resumed: {why}; start afresh with a new --out, or remove "
        f"{printable(path.parent)}"
    )
