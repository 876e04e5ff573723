"""Closed ranges of offsets [first, last]: their union and difference, as sorted, disjoint, non-adjacent ranges.

    merge([(5, 9), (0, 4), (12, 12)]) -> ((0, 9), (12, 12))
    subtract([(0, 9)], [(3, 4)])      -> ((0, 2), (5, 9))

Shared by the models that keep sets of offsets as ranges: individual commit (model/ic.py, IC-2) and a
client's conduct (model/conduct.py).
"""

from __future__ import annotations

from typing import Iterable

Range = tuple[int, int]


def merge(ranges: Iterable[Range]) -> tuple[Range, ...]:
    """Union of closed ranges as sorted, disjoint, non-adjacent ranges (IC-2)."""
    merged: list[Range] = []
    for first, last in sorted(ranges):
        if merged and first <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], last))
        else:
            merged.append((first, last))
    return tuple(merged)


def subtract(ranges: Iterable[Range], removed: Iterable[Range]) -> tuple[Range, ...]:
    """The offsets of `ranges` not in `removed`, merged."""
    result: list[Range] = []
    removed = merge(removed)
    for first, last in merge(ranges):
        for cut_first, cut_last in removed:
            if cut_last < first or cut_first > last:
                continue
            if cut_first > first:
                result.append((first, cut_first - 1))
            first = cut_last + 1
            if first > last:
                break
        if first <= last:
            result.append((first, last))
    return merge(result)
