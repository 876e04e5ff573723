"""RangeSet: disjoint, non-adjacent closed ranges of int64 offsets, sorted, for a million ranges and more.

    held = RangeSet()
    held.insert(45, 47); held.insert(50, 50)
    held.touching(48, 49)        # [(45, 47), (50, 50)]: ranges overlapping or adjacent to [48, 49]
    held.replace([(45, 47), (50, 50)], (45, 50))
    held.lowest(); held.highest(); len(held); list(held)

Why this structure: the coordinator holds up to `individual.commit.max.ranges`
ranges per partition (a million by default) and must stay small and fast
there. Python objects cost ~120 bytes a range (a tuple of two ints in a list,
or a sortedcontainers SortedList) and one flat sorted array, 16 bytes a range,
moves megabytes on every insert in the middle. So the ranges live in blocks of
at most BLOCK_RANGES entries, each block two `array('q')` (firsts and lasts,
8 bytes each), found by bisect over the blocks' first offsets, then by bisect
inside the block: about 16 bytes a range, and O(log n + BLOCK_RANGES) per
change (bench/bench_ic.py measures both against a sorted list of tuples).
The caller keeps the set normal (IC-2): `replace` and `insert` trust it.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from typing import Iterator

Range = tuple[int, int]
BLOCK_RANGES = 1024


class RangeSet:
    def __init__(self) -> None:
        self._firsts: list[array] = []
        self._lasts: list[array] = []
        self._heads: list[int] = []   # the first offset of each block, for bisect over blocks
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[Range]:
        for firsts, lasts in zip(self._firsts, self._lasts):
            yield from zip(firsts, lasts)

    def lowest(self) -> Range | None:
        return (self._firsts[0][0], self._lasts[0][0]) if self._count else None

    def highest(self) -> Range | None:
        return (self._firsts[-1][-1], self._lasts[-1][-1]) if self._count else None

    def touching(self, first: int, last: int) -> list[Range]:
        """The held ranges that overlap [first, last] or are adjacent to it, ascending."""
        found: list[Range] = []
        block = bisect_right(self._heads, last + 1) - 1
        if block < 0:
            return found
        index = bisect_right(self._firsts[block], last + 1) - 1
        while block >= 0:
            firsts, lasts = self._firsts[block], self._lasts[block]
            while index >= 0 and lasts[index] >= first - 1:
                found.append((firsts[index], lasts[index]))
                index -= 1
            if index >= 0:
                break
            block -= 1
            index = len(self._firsts[block]) - 1 if block >= 0 else -1
        found.reverse()
        return found

    def replace(self, old: list[Range], new: Range | None) -> None:
        """Remove `old` (consecutive held ranges, as `touching` gives them), then insert `new` if given."""
        if old:
            self._delete(old[0][0], len(old))
        if new is not None:
            self.insert(*new)

    def append(self, first: int, last: int) -> None:
        """Insert a range above every held range and not adjacent to the highest (replay builds in order)."""
        if not self._firsts or len(self._firsts[-1]) >= BLOCK_RANGES:
            self._firsts.append(array("q"))
            self._lasts.append(array("q"))
            self._heads.append(first)
        self._firsts[-1].append(first)
        self._lasts[-1].append(last)
        self._count += 1

    def insert(self, first: int, last: int) -> None:
        """Insert a range that is disjoint from, and not adjacent to, every held range."""
        if not self._firsts:
            self._firsts, self._lasts, self._heads = [array("q", [first])], [array("q", [last])], [first]
            self._count = 1
            return
        block = max(bisect_right(self._heads, first) - 1, 0)
        firsts, lasts = self._firsts[block], self._lasts[block]
        index = bisect_left(firsts, first)
        firsts.insert(index, first)
        lasts.insert(index, last)
        self._heads[block] = firsts[0]
        self._count += 1
        if len(firsts) > 2 * BLOCK_RANGES:
            self._split(block)

    def _delete(self, first: int, count: int) -> None:
        block = bisect_right(self._heads, first) - 1
        index = bisect_left(self._firsts[block], first)
        assert block >= 0 and self._firsts[block][index] == first, f"range starting at {first} is not held"
        self._count -= count
        while count:
            firsts, lasts = self._firsts[block], self._lasts[block]
            taken = min(count, len(firsts) - index)
            del firsts[index:index + taken], lasts[index:index + taken]
            count -= taken
            if firsts:
                self._heads[block] = firsts[0]
                block += 1
            else:
                del self._firsts[block], self._lasts[block], self._heads[block]
            index = 0

    def _split(self, block: int) -> None:
        firsts, lasts = self._firsts[block], self._lasts[block]
        self._firsts[block + 1:block + 1] = [firsts[BLOCK_RANGES:]]
        self._lasts[block + 1:block + 1] = [lasts[BLOCK_RANGES:]]
        del firsts[BLOCK_RANGES:], lasts[BLOCK_RANGES:]
        self._heads.insert(block + 1, self._firsts[block + 1][0])
