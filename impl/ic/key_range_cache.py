"""KeyRangeCache: the seed's bounded cache of key-range filter results (`max.bytes.key.range.cache`).

    cache = KeyRangeCache(max_bytes=209715200)
    records = cache.take(key, ranges)      # the batch's unsent records, or None: decode it from the log
    cache.put(key, rest, ranges)           # after a fetch took its records: keep the others for later

Seed 000, "Key Based Filtering": the records of a decoded batch that one
fetch did not want are kept for the fetches of the other sharers, and "once a
cached result is being sent out, it will be evicted immediately". An entry
remembers the hash ranges already served from it: a fetch whose ranges touch
them (a retry, a new owner after a rebalance) is a miss and decodes the batch
again, so the cache can never hide a record. Entries are evicted oldest
first to stay within `max_bytes` (record bytes plus a fixed cost per record);
an entry that alone exceeds it is not kept. Thread-safe: the broker filters
on its worker threads.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Hashable, Sequence

RECORD_OVERHEAD_BYTES = 96     # the Record object, its ints and the list slot


@dataclass
class _Entry:
    records: list
    served: list[tuple[int, int]] = field(default_factory=list)
    size_bytes: int = 0


class KeyRangeCache:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.size_bytes = 0
        self._entries: OrderedDict[Hashable, _Entry] = OrderedDict()
        self.hits = self.misses = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def take(self, key: Hashable, ranges: Sequence[tuple[int, int]]) -> list | None:
        """The unsent records of the batch if none of `ranges` was served from the entry yet."""
        with self._lock:
            return self._take(key, ranges)

    def put(self, key: Hashable, rest: list, ranges: Sequence[tuple[int, int]]) -> None:
        """What a fetch for `ranges` left: kept for the others, or dropped when nothing is left."""
        with self._lock:
            self._put(key, rest, ranges)

    def _take(self, key: Hashable, ranges: Sequence[tuple[int, int]]) -> list | None:
        entry = self._entries.get(key)
        if entry is None or _touch(entry.served, ranges):
            self.misses += 1
            return None
        self.hits += 1
        return entry.records

    def _put(self, key: Hashable, rest: list, ranges: Sequence[tuple[int, int]]) -> None:
        previous = self._entries.pop(key, None)
        served = (previous.served if previous is not None and not _touch(previous.served, ranges) else []) + list(ranges)
        if previous is not None:
            self.size_bytes -= previous.size_bytes
        size_bytes = sum(len(record.raw) for record in rest) + RECORD_OVERHEAD_BYTES * len(rest)
        if not rest or size_bytes > self.max_bytes:
            return
        while self.size_bytes + size_bytes > self.max_bytes:
            _, evicted = self._entries.popitem(last=False)
            self.size_bytes -= evicted.size_bytes
        self._entries[key] = _Entry(rest, served, size_bytes)
        self.size_bytes += size_bytes


def _touch(served: Sequence[tuple[int, int]], ranges: Sequence[tuple[int, int]]) -> bool:
    return any(low <= other_high and other_low <= high for low, high in ranges for other_low, other_high in served)
