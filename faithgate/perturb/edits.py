"""What an edit is: its type in BUMP's taxonomy, the candidate a rule proposes, and the
variant it becomes."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

# Revisions of the edit rules (``perturb(..., rules=...)``): 1 = the rules the first shipped
# checker's contradiction pairs were made with (kept so that its build reproduces), 2 = the
# review fixes, 3 = verb swaps by class (see ``faithgate.perturb``'s docstring). Each revision's edits stay
# reproducible; new code gets the latest.
RULES = 3

# variant type -> BUMP error type (intrinsic/extrinsic predicate edits are decided per edit)
TYPES: dict[str, str] = {
    "predicate_negation": "Intrinsic Predicate",
    "predicate_antonym": "Extrinsic Predicate",  # Intrinsic when the antonym occurs in the source
    "predicate_verb_intrinsic": "Intrinsic Predicate",
    "predicate_verb_extrinsic": "Extrinsic Predicate",
    "entity_intrinsic": "Intrinsic Entity",
    "entity_extrinsic": "Extrinsic Entity",
    "circumstance_intrinsic": "Intrinsic Circumstance",
    "circumstance_extrinsic": "Extrinsic Circumstance",
    "coreference": "Coreference",
    "number": "Number",
}


@dataclass(frozen=True)
class Perturbation:
    """One minimally edited variant of a summary.

    ``summary[start:start + len(replacement)]`` is the new span; ``original`` was at
    ``[start, end)`` in the unedited summary. ``type`` is one of ``TYPES``; ``error_type`` is the
    BUMP label ("Intrinsic Entity", ...); ``detail`` says which rule made the edit.
    """

    type: str
    error_type: str
    summary: str
    original: str
    replacement: str
    start: int
    end: int
    detail: str = ""

    @property
    def new_end(self) -> int:
        return self.start + len(self.replacement)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Candidate:
    """An edit a rule proposes: ``replacement`` for ``[start, end)`` of the summary."""

    type: str
    start: int
    end: int
    replacement: str
    detail: str
    error_type: str | None = None
    # Lemma of the replacement word (predicate edits), for the synonym and source checks.
    lemma: str | None = None

    @classmethod
    def on_token(cls, kind: str, tok: Any, replacement: str, detail: str, **kw: Any) -> Candidate:
        """An edit of one (spaCy) token: ``replacement`` for the token's text."""
        return cls(kind, tok.idx, tok.idx + len(tok.text), replacement, detail, **kw)
