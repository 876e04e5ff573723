"""The bundled example traces: oracle/examples/<machine>/*.jsonl.

A trace directly in a machine's folder must be allowed. A trace under
<machine>/violations/ must be caught, breaking the clause its name ends with:
`more-processors-than-partitions.EX-3.jsonl` must fail at EX-3.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kipcheck.oracle.check import Verdict, check_file

EXAMPLES = Path(__file__).parent / "examples"


@dataclass(frozen=True)
class Example:
    path: Path
    machine: str
    expected_clause: str | None  # None: the trace must be allowed

    def judge(self) -> tuple[Verdict, bool]:
        """The verdict, and whether it is the expected one."""
        verdict = check_file(self.path)
        if self.expected_clause is None:
            return verdict, verdict.status == "ok"
        return verdict, verdict.status == "violation" and verdict.clause == self.expected_clause


def examples(root: Path = EXAMPLES) -> list[Example]:
    found = []
    for path in sorted(root.glob("*/*.jsonl")):
        found.append(Example(path, path.parent.name, None))
    for path in sorted(root.glob("*/violations/*.jsonl")):
        found.append(Example(path, path.parent.parent.name, path.name.rsplit(".", 2)[-2]))
    return found
