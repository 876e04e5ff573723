"""The normative text: one clause per rule, read from the Markdown files beside this module.

Each machine has one file, spec/<machine>.md. A clause is a level-two heading
`## ID: title` followed by bullet lines `- seed: ...`, optionally
`- profile: kip` or `- profile: kafka-4.2, kafka-4.4` (the profiles it holds
under, when not all of them), then its text. Decisions taken where the seeds
are silent or contradict each other are clauses too, with `- decision: ...`
saying why.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

CLAUSE_ID = re.compile(r"\b(SP|SS|ST|IC|RD|KR|EX|XM)-\d+\b")
_HEADING = re.compile(r"^## ((?:SP|SS|ST|IC|RD|KR|EX|XM)-\d+): (.+)$")
_FIELD = re.compile(r"^- (seed|profile|decision): (.+)$")
# The source documents (shared/seeds/NNN_*.txt), cited in a clause's seed line by number.
SEEDS = {
    "000": "KIP-X: Introduce a cooperative consumer processing semantic (the draft)",
    "001": "KIP-983: Full speed async processing during rebalance",
    "002": "KIP-932: Queues for Kafka (the revision \"More detail on share coordinator\")",
    "003": "KIP-X: Introduce a cooperative consumer processing semantic (its revision)",
    "004": "KIP-287: Support partition and processor expansion for stateful processing jobs",
}
_SEED_NUMBER = re.compile(r"(^|;\s*)(00[0-4])\b")
PREFIXES = {
    "SP": "share-partition", "SS": "share-session", "ST": "share-state", "IC": "ic",
    "RD": "revoke-delay", "KR": "key-range-assign", "EX": "expansion", "XM": "cross-machine",
}


@dataclass(frozen=True)
class Clause:
    id: str
    title: str
    machine: str
    seed: str
    profile: str  # as the spec writes it: "all", or the profiles it holds under, e.g. "kafka-4.2, kafka-4.4"
    decision: str | None
    text: str
    source: str

    @property
    def profiles(self) -> tuple[str, ...]:
        """The profiles the clause holds under; empty when it holds under every one."""
        return () if self.profile == "all" else tuple(name.strip() for name in self.profile.split(","))

    def holds_under(self, profile: str) -> bool:
        return not self.profiles or profile in self.profiles


def _parse(path: Path) -> list[Clause]:
    clauses: list[Clause] = []
    current: dict | None = None

    def close() -> None:
        if current is not None:
            clause_id = current["id"]
            if "seed" not in current:
                raise ValueError(f"{path.name}: clause {clause_id} has no '- seed:' line")
            clauses.append(Clause(
                clause_id, current["title"], PREFIXES[clause_id.split("-")[0]], current["seed"],
                current.get("profile", "all"), current.get("decision"),
                "\n".join(current["text"]).strip(), path.name,
            ))

    in_code = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_code = not in_code
        heading = None if in_code else _HEADING.match(line)
        if heading:
            close()
            current = {"id": heading.group(1), "title": heading.group(2), "text": []}
        elif line.startswith("#") and not in_code:
            close()
            current = None
        elif current is not None:
            field_line = _FIELD.match(line)
            if field_line and not any(text.strip() for text in current["text"]):
                current[field_line.group(1)] = field_line.group(2).strip()
            else:
                current["text"].append(line)
    close()
    return clauses


@cache
def clauses() -> dict[str, Clause]:
    """Every clause of every machine, by id."""
    found: dict[str, Clause] = {}
    for path in sorted(Path(__file__).parent.glob("*.md")):
        for clause in _parse(path):
            if clause.id in found:
                raise ValueError(f"clause {clause.id} defined twice ({found[clause.id].source}, {clause.source})")
            found[clause.id] = clause
    return found


def cited(seed: str) -> str:
    """A clause's seed line with each seed number replaced by its document's title."""
    return _SEED_NUMBER.sub(lambda match: f"{match.group(1)}{SEEDS[match.group(2)]}", seed)


def find(clause_id: str) -> Clause | None:
    """The clause with this id, whatever its case ("sp-21" finds SP-21)."""
    return clauses().get(clause_id.strip().upper())
