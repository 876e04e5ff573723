"""The individual-commit coordinator holding a million outstanding ranges, beside a naive sorted list.

    .venv/bin/python bench/bench_ic.py [--ranges 1000000] [--commits 2000] [--fsync-commits 200]

For each range structure (impl/ic/ranges.RangeSet, and a plain sorted list of
(first, last) tuples searched with bisect, the naive baseline), in one run:
1. builds --ranges outstanding alternating committed offsets (1, 3, 5, ...: offset 0 never
   committed, so nothing folds into the stable offset), in commits of 10,000 ranges
   (max.num.ranges.to.commit), fsync on; prints the bytes per range held (tracemalloc);
2. times --commits single-range commits without fsync (the CPU path: half fill a random gap,
   merging two ranges, half add a range past the end), then --fsync-commits with fsync;
3. closes and reopens the coordinator: the replay time of both logs;
4. commits the even offsets of the first half (the stable offset passes half the ranges),
   then prints the IC log's size before and after compaction.
"""

from __future__ import annotations

import argparse
import bisect
import gc
import random
import tempfile
import time
import tracemalloc

from kipcheck.impl.ic.config import IcConfig
from kipcheck.impl.ic.coordinator import IcCoordinator
from kipcheck.impl.ic.ranges import RangeSet

KEY = ("bench", "orders", 0)
COMMIT_RANGES = 10_000


class SortedListRanges:
    """The naive baseline: one Python list of (first, last) tuples, kept sorted with bisect."""

    def __init__(self) -> None:
        self._ranges: list[tuple[int, int]] = []

    def __len__(self) -> int:
        return len(self._ranges)

    def __iter__(self):
        return iter(self._ranges)

    def lowest(self):
        return self._ranges[0] if self._ranges else None

    def highest(self):
        return self._ranges[-1] if self._ranges else None

    def touching(self, first, last):
        stop = bisect.bisect_right(self._ranges, (last + 1, 2**63))
        start = stop
        while start > 0 and self._ranges[start - 1][1] >= first - 1:
            start -= 1
        return self._ranges[start:stop]

    def replace(self, old, new):
        if old:
            start = bisect.bisect_left(self._ranges, old[0])
            del self._ranges[start:start + len(old)]
        if new is not None:
            self.insert(*new)

    def insert(self, first, last):
        bisect.insort(self._ranges, (first, last))

    def append(self, first, last):
        self._ranges.append((first, last))


def config_for(ranges: int) -> IcConfig:
    """Room for every range; compaction only when the bench asks for it."""
    return IcConfig(max_ranges=ranges + 1_000_000, segment_bytes=1 << 40)


def build(directory: str, structure, ranges: int) -> tuple[IcCoordinator, float]:
    config = config_for(ranges)
    gc.collect()
    tracemalloc.start()
    coordinator = IcCoordinator(directory, config, fsync=True, range_set=structure)
    before = tracemalloc.get_traced_memory()[0]
    for start in range(0, ranges, COMMIT_RANGES):
        request = [(2 * offset + 1, 2 * offset + 1) for offset in range(start, min(start + COMMIT_RANGES, ranges))]
        assert coordinator.commit(*KEY, request).error == "NONE"
    del request                                            # count what is held, not the last request
    gc.collect()
    held_bytes = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert len(coordinator.fetch(*KEY)[1]) == ranges
    return coordinator, held_bytes / ranges


def commits_per_second(coordinator: IcCoordinator, count: int, ranges: int, chooser: random.Random) -> float:
    end = 2 * ranges + 1
    started = time.perf_counter()
    for number in range(count):
        if number % 2:
            gap = 2 * chooser.randrange(1, ranges - 1)        # fills a gap between two held ranges
            request = [(gap, gap)]
        else:
            end += 2
            request = [(end, end)]
        assert coordinator.commit(*KEY, request).error == "NONE"
    return count / (time.perf_counter() - started)


def run(structure, name: str, arguments) -> dict:
    chooser = random.Random(7)
    with tempfile.TemporaryDirectory() as directory:
        coordinator, bytes_per_range = build(directory, structure, arguments.ranges)
        coordinator._logs.primary.fsync = coordinator._logs.ic.fsync = False
        cpu_rate = commits_per_second(coordinator, arguments.commits, arguments.ranges, chooser)
        coordinator._logs.primary.fsync = coordinator._logs.ic.fsync = True
        fsync_rate = commits_per_second(coordinator, arguments.fsync_commits, arguments.ranges, chooser)
        state = coordinator.fetch(*KEY)
        coordinator.close()
        started = time.perf_counter()
        coordinator = IcCoordinator(directory, config_for(arguments.ranges), fsync=False, range_set=structure)
        replay_s = time.perf_counter() - started
        assert coordinator.fetch(*KEY) == state, "the replay must give the same state"
        half = arguments.ranges // 2
        for start in range(0, half, COMMIT_RANGES):
            coordinator.commit(*KEY, [(2 * offset, 2 * offset) for offset in range(start, min(start + COMMIT_RANGES, half))])
        ic_before = coordinator.log_sizes_bytes()[1]
        held = len(coordinator.fetch(*KEY)[1])
        coordinator.compact()
        ic_after = coordinator.log_sizes_bytes()[1]
        coordinator.close()
    return {"name": name, "bytes_per_range": bytes_per_range, "cpu_rate": cpu_rate, "fsync_rate": fsync_rate,
            "replay_s": replay_s, "ic_before": ic_before, "ic_after": ic_after, "held": held}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranges", type=int, default=1_000_000)
    parser.add_argument("--commits", type=int, default=2000)
    parser.add_argument("--fsync-commits", type=int, default=200)
    arguments = parser.parse_args()
    print(f"{arguments.ranges:,} outstanding alternating committed offsets, one partition")
    print(f"{'structure':<22}{'bytes/range':>12}{'commits/s':>12}{'fsync c/s':>11}{'replay s':>10}"
          f"{'IC log before':>15}{'after compaction':>18}{'ranges held':>13}")
    for structure, name in ((RangeSet, "RangeSet (arrays)"), (SortedListRanges, "sorted list (naive)")):
        result = run(structure, name, arguments)
        print(f"{result['name']:<22}{result['bytes_per_range']:>12.1f}{result['cpu_rate']:>12,.0f}"
              f"{result['fsync_rate']:>11,.0f}{result['replay_s']:>10.2f}{result['ic_before']:>15,}"
              f"{result['ic_after']:>18,}{result['held']:>13,}", flush=True)


if __name__ == "__main__":
    main()
