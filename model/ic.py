"""Individual commit (IC) offsets of one group and partition at the coordinator (seeds 000/003).

State: `stable_offset` (inclusive, -1 when nothing is committed; IC-1) and
`ranges`, the held IC ranges in normal form (IC-2). Clause ids refer to
spec/ic.md. A range is a closed `(first, last)` pair; answers use JSON-shaped
`[first, last]` lists so they compare directly with a trace.

Library API (all pure, deterministic):

- `IndividualCommit(max_ranges=10_000, accept_individual_commit=True)`: an empty partition.
- `.commit(ranges) -> CommitResult(error, stable_offset, ranges, appends, clause)`:
  apply one OffsetCommit's ranges; `clause` names the rule that decided `error`.
- `.fetch() -> (stable_offset, ranges)`: the offset-fetch answer (IC-9).
- `.uncommitted(first, last) -> ranges`: the offsets of [first, last] a poll may return (IC-10).
- `.committed(offset) -> bool`: whether one offset is committed (IC-1, IC-2).
- `.amend(fetched, processed) -> ranges`: the consumer's gap-amended commit (IC-11).
- `.unwritten() -> CommitResult`: the answer to a commit the coordinator could not write (IC-13).
- `.restart(stable_offset, ranges) -> str | None`: judge and adopt a restarted coordinator's state (IC-12).
- `commit_due(ranges_waiting, max_num_ranges_to_commit) -> bool`: the consumer's commit trigger (IC-18).
- `plain_commit(stable_offset, next_offset) -> ranges | None`: a plain OffsetCommit as an IC commit (IC-19).
- `to_wire(ranges) -> bounds`, `from_wire(bounds) -> ranges`: ranges as the wire's int64 pairs (IC-20).
- `answered(stable_offset, held, sent) -> (stable_offset, ranges)`: the consumer's view after a commit (IC-21).
- `WIRE_CODES`: the wire codes of the seed's five errors (IC-17).
- `replay(appends) -> (stable_offset, ranges)`: rebuild the state from the IC and primary logs (IC-12).
- `live_ic_ranges(appends) -> set of ranges`: the IC log keys left after compaction.
- `normal_form(stable_offset, ranges) -> (stable_offset, ranges)`: union, trim, merge, advance.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from kipcheck.model.errors import Error
from kipcheck.model.ranges import Range, merge, subtract

OFFSET_MAX = 2**63 - 1   # offsets are int64 on the wire

# IC-17: the seed's codes 88-92 collide with Kafka's; the same order, moved above Kafka's codes (<= 133 in 4.2).
WIRE_CODES = {error: error.code for error in (
    Error.INDIVIDUAL_COMMIT_NOT_ALLOWED, Error.TOPIC_RANGE_FETCH_NOT_ALLOWED, Error.CONSUMER_RANGE_FETCH_NOT_ACCEPTED,
    Error.INDIVIDUAL_COMMIT_TOO_OLD, Error.MAX_INDIVIDUAL_COMMIT_REACHED)}
# IC-18: a range on the wire is two int64.
RANGE_WIRE_BYTES = 16

# The clause that decides each error a commit can answer (NONE: the commit applied, IC-2).
ERROR_CLAUSES = {Error.NONE: "IC-2", Error.INDIVIDUAL_COMMIT_NOT_ALLOWED: "IC-7", Error.INVALID_REQUEST: "IC-8",
                 Error.INDIVIDUAL_COMMIT_TOO_OLD: "IC-5", Error.MAX_INDIVIDUAL_COMMIT_REACHED: "IC-6",
                 Error.NOT_COORDINATOR: "IC-13"}


@dataclass(frozen=True)
class CommitResult:
    error: str
    stable_offset: int
    ranges: list[list[int]]
    appends: list[dict]
    clause: str


def normal_form(stable_offset: int, ranges: Iterable[Range]) -> tuple[int, tuple[Range, ...]]:
    """The held state for a stable offset and any ranges: trimmed, merged, stable offset advanced."""
    # IC-2: offsets at or below the stable offset are already committed; the rest is a merged union.
    above = merge((max(first, stable_offset + 1), last) for first, last in ranges if last > stable_offset)
    # IC-3: a range starting right after the stable offset is folded into it. Merged ranges are
    # non-adjacent, so only the lowest can touch it.
    if above and above[0][0] == stable_offset + 1:
        return above[0][1], above[1:]
    return stable_offset, above


def as_lists(ranges: Iterable[Range]) -> list[list[int]]:
    return [[first, last] for first, last in ranges]


def compaction_appends(before: tuple[int, tuple[Range, ...]], after: tuple[int, tuple[Range, ...]]) -> list[dict]:
    """The log records that take the held state `before` to `after` (IC-4)."""
    (stable_before, ranges_before), (stable_after, ranges_after) = before, after
    appends: list[dict] = []
    # IC-4: new state first (the primary log's stable offset, then new IC ranges), tombstones last,
    # so a crash between the writes leaves a superset that replays correctly (IC-12).
    if stable_after != stable_before:
        appends.append({"log": "primary", "stable_offset": stable_after})
    appends += [{"log": "ic", "put": [first, last]} for first, last in ranges_after if (first, last) not in ranges_before]
    appends += [{"log": "ic", "tombstone": [first, last]} for first, last in ranges_before if (first, last) not in ranges_after]
    return appends


class IndividualCommit:
    """The coordinator's IC state for one group and topic-partition."""

    def __init__(self, max_ranges: int = 10_000, accept_individual_commit: bool = True) -> None:
        assert max_ranges >= 0
        self.max_ranges = max_ranges
        self.accept_individual_commit = accept_individual_commit
        self.stable_offset = -1  # IC-1: nothing committed yet.
        self.ranges: tuple[Range, ...] = ()

    def _answer(self, error: str, appends: list[dict] | None = None) -> CommitResult:
        return CommitResult(error, self.stable_offset, as_lists(self.ranges), appends or [], ERROR_CLAUSES[error])

    def commit(self, ranges: Iterable[Iterable[int]]) -> CommitResult:
        """Apply one IC commit request for this partition and answer it."""
        request = [tuple(pair) for pair in ranges]
        # IC-7: a coordinator that refuses IC refuses before looking at the request.
        if not self.accept_individual_commit:
            return self._answer(Error.INDIVIDUAL_COMMIT_NOT_ALLOWED)
        # IC-8: an empty list, or a backwards range or an offset outside int64's non-negative part, is invalid.
        if not request or any(len(pair) != 2 or not 0 <= pair[0] <= pair[1] <= OFFSET_MAX for pair in request):
            return self._answer(Error.INVALID_REQUEST)
        # IC-5: wholly at or below the stable offset is too old; a straddling commit is trimmed (below).
        if all(last <= self.stable_offset for _, last in request):
            return self._answer(Error.INDIVIDUAL_COMMIT_TOO_OLD)
        before = (self.stable_offset, self.ranges)
        after = normal_form(self.stable_offset, self.ranges + tuple(request))
        # IC-6: refuse a commit that would leave more ranges held than the cap (filling gaps never grows it).
        if len(after[1]) > self.max_ranges:
            return self._answer(Error.MAX_INDIVIDUAL_COMMIT_REACHED)
        self.stable_offset, self.ranges = after
        return self._answer(Error.NONE, compaction_appends(before, after))

    def unwritten(self) -> CommitResult:
        # IC-13: a commit the coordinator could not write to its logs changes nothing and appends nothing.
        return self._answer(Error.NOT_COORDINATOR)

    def restart(self, stable_offset: int, ranges: Iterable[Iterable[int]]) -> str | None:
        """IC-12: a restarted coordinator's replayed state keeps every committed offset; it is adopted.

        It may hold more than the trace shows (a commit cut by the crash before it was answered and
        traced, IC-4), so only loss and a state out of normal form are refused (the reason is returned).
        """
        replayed = tuple(tuple(pair) for pair in ranges)
        if normal_form(stable_offset, replayed) != (stable_offset, replayed):
            return "the replayed ranges are not in normal form"
        prefix = ((0, stable_offset),) if stable_offset >= 0 else ()
        if stable_offset < self.stable_offset or subtract(self.ranges, prefix + replayed):
            return "the replayed state lost committed offsets"
        self.stable_offset, self.ranges = stable_offset, replayed
        return None

    def fetch(self) -> tuple[int, list[list[int]]]:
        # IC-9: offset fetch answers the stable offset and the held ranges.
        return self.stable_offset, as_lists(self.ranges)

    def committed(self, offset: int) -> bool:
        # IC-1, IC-2: committed means at or below the stable offset, or in a held range.
        return offset <= self.stable_offset or any(first <= offset <= last for first, last in self.ranges)

    def _uncommitted(self, first: int, last: int) -> tuple[Range, ...]:
        committed = ((0, self.stable_offset),) + self.ranges if self.stable_offset >= 0 else self.ranges
        return subtract([(first, last)], committed)

    def uncommitted(self, first: int, last: int) -> list[list[int]]:
        # IC-10: a poll returns a record iff it is above the stable offset and in no held range.
        return as_lists(self._uncommitted(first, last))

    def amend(self, fetched: Iterable[int], processed: Iterable[Iterable[int]]) -> list[list[int]]:
        """The ranges a consumer commits after processing `processed` out of the `fetched` range."""
        uncommitted = self._uncommitted(*fetched)
        # IC-11: commit = (processed ∩ fetched) − (<= stable ∪ held ranges), i.e. the uncommitted
        # fetched offsets minus those not processed.
        not_processed = subtract(uncommitted, (tuple(pair) for pair in processed))
        return as_lists(subtract(uncommitted, not_processed))


def commit_due(ranges_waiting: int, max_num_ranges_to_commit: int) -> bool:
    # IC-18: passing max.num.ranges.to.commit makes a commit due; it never caps what is kept.
    return ranges_waiting > max_num_ranges_to_commit


def plain_commit(stable_offset: int, next_offset: int) -> list[Range] | None:
    """IC-19: a plain OffsetCommit of an individually committed partition, as the IC commit it is."""
    if next_offset - 1 == stable_offset:
        return None                       # the committed offset again: NONE, nothing to do
    # Every offset below next_offset; a rewind is at or below the stable offset: TOO_OLD (IC-5).
    return [(0, max(next_offset - 1, 0))]


def to_wire(ranges: Iterable[Iterable[int]]) -> tuple[int, ...]:
    # IC-20: a ranges field is one int64 array of bounds in pairs, 16 bytes a range.
    return tuple(int(bound) for pair in ranges for bound in pair)


def from_wire(bounds: Sequence[int]) -> list[Range]:
    """IC-20: the ranges of a bounds array; ValueError for an odd count (INVALID_REQUEST)."""
    if len(bounds) % 2:
        raise ValueError(f"a ranges array holds pairs of bounds, found {len(bounds)} values")
    return [(int(bounds[index]), int(bounds[index + 1])) for index in range(0, len(bounds), 2)]


def answered(stable_offset: int, held: Iterable[Range], sent: Iterable[Range]) -> tuple[int, tuple[Range, ...]]:
    # IC-21: a commit answered NONE is committed; LastStableOffset purges what is at or below it.
    return normal_form(stable_offset, [*held, *sent])


def live_ic_ranges(appends: Iterable[dict]) -> set[Range]:
    """The IC log keys still live after compaction: puts not later tombstoned (IC-12)."""
    live: set[Range] = set()
    for record in appends:
        if record["log"] != "ic":
            continue
        if "put" in record:
            live.add(tuple(record["put"]))
        else:
            live.discard(tuple(record["tombstone"]))
    return live


def replay(appends: Iterable[dict]) -> tuple[int, list[list[int]]]:
    """Rebuild (stable_offset, ranges) from the IC and primary log records, in write order."""
    records = list(appends)
    # IC-12: the stable offset is the last primary record; the ranges are the live IC keys, normalised.
    stable_offset = -1
    for record in records:
        if record["log"] == "primary":
            stable_offset = record["stable_offset"]
    stable_offset, ranges = normal_form(stable_offset, live_ic_ranges(records))
    return stable_offset, as_lists(ranges)
