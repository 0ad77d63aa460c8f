"""Minimal pairs: finding the pairs given in the data, generating them, and their edits.

A pair is a faithful row and its unfaithful edit (BUMP, Ma et al. 2023; Falke et al. 2019):
rows sharing ``pair_id`` with ``role`` reference/correct (faithful) and edited/incorrect
(unfaithful). Pure, like the rules: nothing here loads a model, reads a file or prints
(``generate_pairs`` imports ``faithgate.perturb`` on use).
"""

from __future__ import annotations

import difflib
import importlib
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from faithgate.config import GateConfig, PairConsistencyRule
from faithgate.errors import InputError
from faithgate.types import Example, is_blank

FAITHFUL_ROLES = ("reference", "correct", "faithful", "original")
UNFAITHFUL_ROLES = ("edited", "incorrect", "unfaithful", "perturbed")


@dataclass(frozen=True)
class Pair:
    """Indices (into the examples list) of a faithful member and its unfaithful edit."""

    faithful: int
    unfaithful: int
    pair_id: str
    error_type: str | None = None
    generated: bool = False


def pair_role(meta: Mapping[str, Any]) -> str:
    """A row's ``role`` as pairs are read: stripped and case-folded, so a spreadsheet's
    ``"Edited "`` is ``edited`` ("" when there is none)."""
    role = meta.get("role")
    return "" if role is None else str(role).strip().casefold()


def _pair_key(meta: Mapping[str, Any]) -> str | None:
    """A row's ``pair_id`` as rows are grouped by it, surrounding whitespace stripped (an
    exported ``"p2 "`` is ``p2``; ``scan_pairs`` reports ids it merged); None when blank."""
    pid = meta.get("pair_id")
    key = "" if pid is None else str(pid).strip()
    return key or None


def _carries_pair_fields(meta: Mapping[str, Any]) -> bool:
    """Whether a row was meant as a pair member: a ``pair_id``, or a faithful/unfaithful
    ``role`` (a role such as ``"summary"`` with no pair_id is no pair field)."""
    return _pair_key(meta) is not None or pair_role(meta) in FAITHFUL_ROLES + UNFAITHFUL_ROLES


@dataclass(frozen=True)
class PairScan:
    """What the pair fields of a set of rows make: the ``pairs``; ``unknown_roles``, rows with
    a ``pair_id`` whose ``role`` is neither faithful nor unfaithful; and ``merged_ids``, the
    spellings of one ``pair_id`` that differed only in surrounding whitespace."""

    pairs: list[Pair]
    unknown_roles: list[int]
    merged_ids: list[list[str]]


def scan_pairs(examples: Sequence[Example]) -> PairScan:
    """Minimal pairs given in the data (``PairScan.pairs``; see ``find_pairs``) and what kept
    rows from pairing."""
    groups: dict[str, tuple[list[int], list[int]]] = {}
    spellings: dict[str, set[str]] = {}
    unknown: list[int] = []
    for i, ex in enumerate(examples):
        key = _pair_key(ex.meta)
        if key is None:
            continue
        role = pair_role(ex.meta)
        spellings.setdefault(key, set()).add(str(ex.meta["pair_id"]))
        good, bad = groups.setdefault(key, ([], []))
        if role in FAITHFUL_ROLES:
            good.append(i)
        elif role in UNFAITHFUL_ROLES:
            bad.append(i)
        elif role:
            unknown.append(i)
    pairs = []
    for pid, (good, bad) in groups.items():
        for g in good:
            for b in bad:
                etype = examples[b].meta.get("error_type")
                pairs.append(Pair(g, b, pid, str(etype) if etype else None))
    merged = [sorted(s) for s in spellings.values() if len(s) > 1]
    return PairScan(pairs, unknown, merged)


def find_pairs(examples: Sequence[Example]) -> list[Pair]:
    """Minimal pairs given in the data: rows sharing ``meta['pair_id']`` with a faithful
    ``role`` (reference/correct/...) and an unfaithful one (edited/incorrect/...). A group with
    several members of each kind yields every faithful x unfaithful combination. Roles are
    compared stripped and case-folded, pair ids stripped (``pair_role``, ``_pair_key``)."""
    return scan_pairs(examples).pairs


def unpaired_rows(examples: Sequence[Example], pairs: Sequence[Pair]) -> list[int]:
    """Rows that carry pair fields (a ``pair_id``, or a faithful/unfaithful ``role``) but are
    a member of none of ``pairs``: a missing partner, a row without ``pair_id`` or ``role``.
    They are gated as ordinary outputs, and no pair rule judges them."""
    members = {i for p in pairs for i in (p.faithful, p.unfaithful)}
    return [
        i for i, ex in enumerate(examples) if i not in members and _carries_pair_fields(ex.meta)
    ]


def _rows_named(examples: Sequence[Example], rows: Sequence[int], limit: int = 5) -> str:
    """The first rows of ``rows`` as ``'id' (pair_id 'p', role 'edited')``, for messages."""
    named = []
    for i in rows[:limit]:
        meta = examples[i].meta
        fields = [f"{k} {str(meta[k])[:40]!r}" for k in ("pair_id", "role") if k in meta]
        named.append(f"{examples[i].id[:60]!r} ({', '.join(fields) or 'no pair fields'})")
    more = f" and {len(rows) - limit} more" if len(rows) > limit else ""
    return ", ".join(named) + more


def _rows(n: int, one: str, many: str) -> str:
    """``"1 row has"`` / ``"2 rows have"``: a count of rows with its verb."""
    return f"1 row {one}" if n == 1 else f"{n} rows {many}"


def no_pair(n: int) -> str:
    """``"2 rows with pair fields form no pair"``, in the singular for one."""
    return (
        "1 row with pair fields forms no pair"
        if n == 1
        else f"{n} rows with pair fields form no pair"
    )


def given_pairs(config: GateConfig, examples: Sequence[Example]) -> list[Pair]:
    """The minimal pairs given in the data, when a pair rule (``rules.pair_consistency``) is
    configured to use them; none otherwise. Without a pair rule a row with ``pair_id`` and an
    unfaithful ``role`` is an ordinary output, gated like the others: ``role`` values such as
    ``unfaithful`` or ``perturbed`` must not take a row out of the gate on their own.

    With the rule, a row with a ``pair_id`` and a ``role`` that is neither faithful nor
    unfaithful (a misspelt ``edtied``) is an ``InputError``: it would pair with nothing and be
    gated as an output, its pair silently missing from the rule."""
    if config.rules.pair_consistency is None:
        return []
    scan = scan_pairs(examples)
    if scan.unknown_roles:
        raise InputError(
            f"{_rows(len(scan.unknown_roles), 'has', 'have')} a pair_id and a role that is "
            "neither faithful "
            f"({', '.join(FAITHFUL_ROLES)}) nor unfaithful ({', '.join(UNFAITHFUL_ROLES)}): "
            f"{_rows_named(examples, scan.unknown_roles)}; rules.pair_consistency pairs rows "
            "by these roles (correct the role, or remove the pair_id of a row that is no pair "
            "member)"
        )
    return scan.pairs


def ignored_pair_fields(
    config: GateConfig, examples: Sequence[Example], pairs: Sequence[Pair] | None = None
) -> list[str]:
    """Warnings about pair fields that pair nothing. Without a pair rule: one line when rows
    carry ``pair_id`` and ``role``, gated as ordinary outputs (the unfaithful members too).
    With one: a line naming the rows with pair fields that are in none of ``pairs`` (default:
    the pairs given in ``examples``; ``Gate.run`` passes the generated ones too), and one
    naming ``pair_id`` spellings taken as one id."""
    if config.rules.pair_consistency is not None:
        scan = scan_pairs(examples)
        notes = []
        orphans = unpaired_rows(examples, scan.pairs if pairs is None else pairs)
        if orphans:
            notes.append(
                f"{no_pair(len(orphans))} (no partner of the other "
                "role under the same pair_id, or no pair_id): "
                f"{_rows_named(examples, orphans)}; they are gated as ordinary outputs and "
                "rules.pair_consistency does not judge them"
            )
        for spellings in scan.merged_ids:
            notes.append(
                "pair_id values that differ only in surrounding whitespace are taken as one "
                f"pair id: {', '.join(repr(s[:40]) for s in spellings[:5])}"
            )
        return notes
    marked = [
        ex
        for ex in examples
        if ex.meta.get("pair_id") not in (None, "") and ex.meta.get("role") not in (None, "")
    ]
    if not marked:
        return []
    return [
        f"{len(marked)} outputs carry pair_id and role fields, which are ignored: no pair rule "
        "(rules.pair_consistency) is configured, so they are gated as ordinary outputs, "
        "the edited members of pairs too"
    ]


def changed_words(before: str, after: str) -> int:
    """Words changed between two summaries (word-level diff: replaced, inserted or deleted
    words, the longer side of each changed span)."""
    return sum(max(i2 - i1, j2 - j1) for _, i1, i2, j1, j2, _, _ in _word_changes(before, after))


def _word_changes(before: str, after: str) -> list[tuple[str, int, int, int, int, str, str]]:
    """The changed spans of a word-level diff: (op, i1, i2, j1, j2, old words, new words)."""
    a, b = before.split(), after.split()
    return [
        (op, i1, i2, j1, j2, " ".join(a[i1:i2]), " ".join(b[j1:j2]))
        for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes()
        if op != "equal"
    ]


def describe_edit(before: str, after: str, limit: int = 120) -> str:
    """The word-level difference between two summaries, e.g. ``'appeared' -> 'confessed'``
    (several changed spans are joined with ``; ``)."""
    parts = []
    for op, _, _, _, _, old, new in _word_changes(before, after):
        if op == "delete":
            parts.append(f"-'{old}'")
        elif op == "insert":
            parts.append(f"+'{new}'")
        else:
            parts.append(f"'{old}' -> '{new}'")
    text = "; ".join(parts)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def generate_pairs(
    examples: Sequence[Example], rule: PairConsistencyRule
) -> tuple[list[Example], list[Pair], list[str]]:
    """Perturbed variants of every output (``faithgate.perturb``) as extra examples, the pairs
    linking them to their originals (indices offset by ``len(examples)``), and warnings
    (outputs that got no generated pair, and why)."""
    try:
        # import_module, not ``from faithgate import perturb``: the package's lazy public
        # API maps that name to the function, not the module. Imported on use: perturb
        # loads word lists and spaCy, which only pair generation needs.
        perturb_module = importlib.import_module("faithgate.perturb")
    except ImportError as exc:
        raise InputError(
            f"pair_consistency.generate needs faithgate.perturb, which cannot be imported ({exc})"
        ) from None
    variants: list[Example] = []
    pairs: list[Pair] = []
    base = len(examples)
    taken = {ex.id for ex in examples}  # a user's id may look like a variant's ("a~0")
    not_english = 0
    for i, ex in enumerate(examples):
        if pair_role(ex.meta) in UNFAITHFUL_ROLES or is_blank(ex.summary):  # nothing to edit
            continue
        made = _call_perturb(perturb_module, ex, rule)
        english = getattr(perturb_module, "reads_as_english", None)
        if not made and english is not None and not english(ex.source):
            not_english += 1
        for k, (text, etype) in enumerate(made[: rule.per_example]):
            vid = f"{ex.id}~{k}"
            while vid in taken:
                vid += "~"
            taken.add(vid)
            variants.append(
                Example(
                    vid,
                    ex.source,
                    text,
                    meta={
                        "pair_id": f"gen:{vid}",
                        "role": "edited",
                        "error_type": etype,
                        "generated": True,
                    },
                )
            )
            pairs.append(Pair(i, base + len(variants) - 1, f"gen:{vid}", etype, True))
    notes = (
        [
            f"{not_english} output(s) got no generated minimal pair: their source does not "
            "read as English, and faithgate.perturb's edit rules are English (they would make "
            "garbage edits that flatter a metric)"
        ]
        if not_english
        else []
    )
    return variants, pairs, notes


def _call_perturb(
    module: Any, ex: Example, rule: PairConsistencyRule
) -> list[tuple[str, str | None]]:
    """Adapter over ``faithgate.perturb.perturb``: variants as (text, error type)."""
    func: Callable[..., Any] = module.perturb
    kwargs: dict[str, Any] = {"seed": rule.seed}
    if rule.types:
        kwargs["types"] = tuple(rule.types)  # hashable: perturb caches type resolution
    made = list(func(ex.source, ex.summary, **kwargs))
    # One variant per type comes back in a fixed type order; shuffle (seeded per example) so
    # ``per_example`` keeps a mix of error types rather than always the first types.
    random.Random(f"{rule.seed}:{ex.id}").shuffle(made)
    out: list[tuple[str, str | None]] = []
    for v in made:
        if isinstance(v, str):
            out.append((v, None))
        elif isinstance(v, Mapping):
            out.append((v.get("summary") or v.get("text"), v.get("error_type") or v.get("type")))
        else:
            text = getattr(v, "summary", None) or getattr(v, "text", None)
            etype = getattr(v, "error_type", None) or getattr(v, "type", None)
            out.append((text, etype))
    return [(t, e) for t, e in out if isinstance(t, str) and t.strip() and t != ex.summary]
