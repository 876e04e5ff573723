"""What every model shares: the exception for a disallowed answer, and a ruled answer."""

from __future__ import annotations

from typing import Any, NamedTuple


class Violation(Exception):
    """An observed answer that the model does not allow.

    `clause` is the spec clause id the answer breaks, `allowed` says in words
    what the model would have accepted, `observed` what it was given.
    """

    def __init__(self, clause: str, allowed: str, observed: str) -> None:
        super().__init__(f"{clause}: allowed {allowed}; observed {observed}")
        self.clause = clause
        self.allowed = allowed
        self.observed = observed


class Ruled(NamedTuple):
    """A deterministic answer and the clause that decides it (named when an observation differs)."""

    value: Any
    clause: str
