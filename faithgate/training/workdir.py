"""Where a run writes: ``--out`` (published once trained) and its working directory
``OUT.work`` (checkpoint, dataset, synthetic pairs), refused when they hold what is not
faithgate's."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from faithgate import models
from faithgate.errors import InputError
from faithgate.safety import paths
from faithgate.safety.escape import printable
from faithgate.training.recipe import BUILTIN_CORPORA, TRAINING_META, TrainConfig

# The mark of a working directory (OUT.work: checkpoint, dataset, synthetic pairs) faithgate
# made: only such a directory is written into.
WORK_MARKER = "faithgate_work.json"
# Every file a run writes into OUT.work. A working directory from before WORK_MARKER holds
# nothing else (nor does one a user made for a dataset file copied in, to train elsewhere).
_WORK_FILES = re.compile(
    r"(checkpoint\.pt|dataset-[0-9a-f]{12}\.json\.gz|(synth|labelled)-[0-9a-f]{12}\.jsonl)"
    r"(\.tmp)?"
)


def work_dir(output: str | Path) -> Path:
    """The run's working directory beside ``--out``: ``OUT.work``."""
    output = Path(output)
    return output.with_name(output.name + ".work")


def check_work_dir(workdir: Path) -> None:
    """Raise ``InputError`` (exit 2) unless a run may write into ``workdir``: nothing there,
    an empty directory, or one faithgate made (it holds ``WORK_MARKER``, or only files a run
    writes there: a working directory from an earlier version). A directory of the user's
    with other files keeps them untouched."""
    if not workdir.exists():
        if workdir.is_symlink():
            raise InputError(
                f"{printable(workdir)} (the working directory of --out) is a broken symbolic "
                "link; remove it or use another --out"
            )
        return
    if not workdir.is_dir():
        raise InputError(
            f"{printable(workdir)} (the working directory of --out) is a file, not a "
            "directory; move it away or use another --out"
        )
    if (workdir / WORK_MARKER).is_file():
        return
    try:
        foreign = sorted(p.name for p in workdir.iterdir() if not _WORK_FILES.fullmatch(p.name))
    except OSError as exc:
        raise InputError(f"{printable(workdir)} cannot be read ({exc.strerror})") from None
    if foreign:
        raise InputError(
            f"{printable(workdir)} (the working directory of --out) was not made by faithgate "
            f"train (it holds {printable(foreign[0])} and no {WORK_MARKER}); refusing to write "
            "into it: move it away or use another --out"
        )


def open_work_dir(workdir: Path) -> None:
    """Create (or adopt, once checked) the working directory and mark it as faithgate's."""
    check_work_dir(workdir)  # again: the user may have put files there since check_output
    workdir.mkdir(parents=True, exist_ok=True)
    marker = workdir / WORK_MARKER
    if not marker.is_file():
        text = json.dumps({"format": 1, "made_by": "faithgate train"}) + "\n"
        marker.write_text(text, encoding="utf-8")


def check_output(config: TrainConfig) -> None:
    """Refuse, before any work, an ``--out`` that publishing the model would wreck: the
    current directory (or one above it), a directory of the user's that is not an earlier
    ``faithgate train`` output, or one of the run's own inputs (or a directory holding one);
    and an ``OUT.work`` that faithgate did not make (``check_work_dir``)."""
    output = Path(config.output)
    models.refuse_current_dir(output)
    inputs: list[tuple[str, str | None]] = [("--init-from model", config.init_from)]
    inputs.append(("--base-model", config.base_model))
    inputs += [("--documents file", d) for d in config.documents if d not in BUILTIN_CORPORA]
    inputs += [("--labelled file", path) for path in config.labelled]
    # Before the check that the directory holds only what training writes, which an input
    # inside it fails too: this one names the input.
    paths.refuse_dir_over_inputs(output, inputs)
    models.refuse_foreign_dir(output, TRAINING_META)
    check_work_dir(work_dir(output))


def remove_if_unused(workdir: Path) -> None:
    """Delete ``workdir`` when it holds nothing but ``WORK_MARKER`` (this run made it)."""
    try:
        if {p.name for p in workdir.iterdir()} <= {WORK_MARKER}:
            shutil.rmtree(workdir)
    except OSError:
        pass
