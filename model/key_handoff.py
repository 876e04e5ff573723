"""Key handoff between the sharers of one partition (spec/ic.md IC-14 to IC-16), part of the `ic` machine.

The seed gives no rule for a key whose hash range moves to another consumer
while records of it are in flight. kipcheck adopts Pulsar's (PIP-379): a key
is delivered-and-uncommitted at no more than one consumer at a time. It holds
by three checkable rules: records are delivered only within the receiver's
hash ranges (IC-14); a hash range changes hands only after its previous owner
gave it up (IC-15), which releases that owner's uncommitted records of it;
and a member never commits a record it gave up (IC-16: it stopped processing it).

Library API (pure, deterministic), driven by the ic judge beside model/ic.py:

- `KeyHandoff()`; `.own(member, ranges)`: the member's hash ranges of the partition from now on.
- `.deliver(member, records, committed)`: records [(offset, key_hash)] given to the member;
  `committed(offset)` says whether an offset is already committed (IC-10).
- `.commit(member, ranges)`: the member commits these offset ranges.
- `.drop(member, ranges, uncommitted)`: the member leaves processed offsets uncommitted, having given them up;
  `uncommitted(first, last)` gives the ranges of [first, last] not committed.
- `.forget(committed)`: drop in-flight records whose offsets are now committed.
Each raises Violation naming the clause it breaks.
"""

from __future__ import annotations

from typing import Callable, Iterable

from kipcheck.model.key_hash import in_ranges
from kipcheck.model.violation import Violation

Range = tuple[int, int]


def _overlap(ours: Iterable[Range], theirs: Iterable[Range]) -> Range | None:
    for low, high in ours:
        for other_low, other_high in theirs:
            if low <= other_high and other_low <= high:
                return max(low, other_low), min(high, other_high)
    return None


class KeyHandoff:
    def __init__(self) -> None:
        self.owned: dict[str, tuple[Range, ...]] = {}
        self.in_flight: dict[str, dict[int, int]] = {}   # member -> {offset: key hash}, delivered, uncommitted
        self.given_up: dict[str, set[int]] = {}          # member -> offsets it gave up uncommitted

    def own(self, member: str, ranges: Iterable[Iterable[int]]) -> None:
        ranges = tuple((low, high) for low, high in ranges)
        for other, theirs in self.owned.items():
            shared = _overlap(ranges, theirs)
            # IC-15: a hash value passes to a new owner only once its previous owner gave it up.
            if other != member and shared is not None:
                raise Violation("IC-15", f"{member} to own no hash {other} still owns",
                                f"{member} owns {list(shared)}, still owned by {other}")
        # IC-15: giving a range up releases the member's uncommitted records of it (it stops processing them).
        holding = self.in_flight.setdefault(member, {})
        for offset, key_hash in list(holding.items()):
            if not in_ranges(key_hash, ranges):
                del holding[offset]
                self.given_up.setdefault(member, set()).add(offset)
        self.owned[member] = ranges

    def deliver(self, member: str, records: Iterable[Iterable[int]], committed: Callable[[int], bool]) -> None:
        owned = self.owned.get(member, ())
        for offset, key_hash in records:
            # IC-10: a poll returns only uncommitted records.
            if committed(offset):
                raise Violation("IC-10", "only uncommitted records delivered", f"offset {offset} is committed")
            # IC-14: only records whose key hash the member owns, so only one member holds a key in flight.
            if not in_ranges(key_hash, owned):
                raise Violation("IC-14", f"{member} delivered hashes in {[list(pair) for pair in owned]}",
                                f"offset {offset} with key hash {key_hash}")
            self.in_flight.setdefault(member, {})[offset] = key_hash
            self.given_up.get(member, set()).discard(offset)

    def commit(self, member: str, ranges: Iterable[Iterable[int]]) -> None:
        given_up = self.given_up.get(member)
        if not given_up:
            return
        for first, last in ranges:
            late = sorted(offset for offset in given_up if first <= offset <= last)
            # IC-16: a member that gave a record up does not commit it: it stopped processing it then.
            if late:
                raise Violation("IC-16", f"{member} commits none of the records it gave up",
                                f"{member} commits offset {late[0]} after giving it up")

    def drop(self, member: str, ranges: Iterable[Iterable[int]],
             uncommitted: Callable[[int, int], Iterable[Iterable[int]]]) -> None:
        given_up = self.given_up.get(member, set())
        for first, last in ranges:
            for low, high in uncommitted(first, last):
                # IC-16: a member leaves uncommitted only records it gave up: any other processed record is lost.
                kept = next((offset for offset in range(low, high + 1) if offset not in given_up), None)
                if kept is not None:
                    raise Violation("IC-16", f"{member} drops only records it gave up",
                                    f"{member} drops offset {kept}, which it did not give up and is not committed")

    def forget(self, committed: Callable[[int], bool]) -> None:
        """Committed records are no longer in flight anywhere."""
        for holding in self.in_flight.values():
            for offset in [offset for offset in holding if committed(offset)]:
                del holding[offset]
