"""PartitionIc: one (group, topic-partition)'s individual-commit state, and the plan of a commit.

    state = PartitionIc()                   # stable offset -1, no ranges (IC-1)
    plan = state.plan([(45, 47), (50, 50)]) # pure: what the commit would do, nothing changed yet
    plan.stable_offset, plan.puts, plan.tombstones, plan.ranges_after
    state.apply(plan)                       # after the plan's records are durably written

The same rules as model/ic.py (IC-2 to IC-6), computed from the ranges a
commit touches instead of the whole set, so a commit costs O(touched ranges
+ log n) with a million ranges held; tests/test_ic_coordinator.py diffs the
two. Planning before applying lets the coordinator write first and change
memory only after the write succeeded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from kipcheck.impl.ic.ranges import Range, RangeSet


@dataclass
class Span:
    """A new held range, and the held ranges it absorbs."""

    first: int
    last: int
    absorbed: list[Range] = field(default_factory=list)


@dataclass(frozen=True)
class Plan:
    stable_offset: int             # after the commit
    puts: list[Range]              # held ranges the commit creates, ascending (IC-4)
    tombstones: list[Range]        # held ranges it removes, ascending (IC-4)
    spans: list[Span]              # what `apply` does: each span replaces its absorbed ranges
    folded: Span | None            # the span folded into the stable offset (IC-3)
    ranges_after: int

    @property
    def changes(self) -> bool:
        return bool(self.puts or self.tombstones or self.folded)


class PartitionIc:
    def __init__(self, stable_offset: int = -1, ranges: RangeSet | None = None) -> None:
        self.stable_offset = stable_offset   # IC-1: inclusive, -1 when nothing is committed
        self.ranges = ranges if ranges is not None else RangeSet()

    def plan(self, request: Iterable[Range]) -> Plan:
        """What committing `request` (valid ranges, IC-8) does; the state is not changed."""
        spans = self._spans(_trimmed(request, self.stable_offset))
        # A span that is one held range unchanged is a duplicate: nothing to write (IC-5).
        spans = [span for span in spans if span.absorbed != [(span.first, span.last)]]
        folded = spans[0] if spans and spans[0].first == self.stable_offset + 1 else None
        stable_offset = folded.last if folded else self.stable_offset
        puts = [(span.first, span.last) for span in spans if span is not folded]
        tombstones = [old for span in spans for old in span.absorbed]
        ranges_after = len(self.ranges) + len(puts) - len(tombstones)
        return Plan(stable_offset, puts, tombstones, spans, folded, ranges_after)

    def apply(self, plan: Plan) -> None:
        for span in plan.spans:
            self.ranges.replace(span.absorbed, None if span is plan.folded else (span.first, span.last))
        self.stable_offset = plan.stable_offset

    def _spans(self, request: list[Range]) -> list[Span]:
        """IC-2: each request range with the held ranges it touches; spans that touch each other join."""
        spans: list[Span] = []
        for first, last in request:
            touched = self.ranges.touching(first, last)
            if touched:
                first, last = min(first, touched[0][0]), max(last, touched[-1][1])
            if spans and first <= spans[-1].last + 1:
                previous = spans[-1]
                if touched and previous.absorbed and touched[0] == previous.absorbed[-1]:
                    touched = touched[1:]   # one held range bridging two request ranges
                previous.last = max(previous.last, last)
                previous.absorbed += touched
            else:
                spans.append(Span(first, last, touched))
        return spans


def _trimmed(request: Iterable[Range], stable_offset: int) -> list[Range]:
    """The request merged (sorted, disjoint, non-adjacent) and cut to above the stable offset (IC-5)."""
    merged: list[list[int]] = []
    for first, last in sorted(request):
        if last <= stable_offset:
            continue
        first = max(first, stable_offset + 1)
        if merged and first <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], last)
        else:
            merged.append([first, last])
    return [(first, last) for first, last in merged]
