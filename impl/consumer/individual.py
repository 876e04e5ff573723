"""The consumer's individual-commit state: key ranges it fetches, offsets committed, and its ic trace.

    view = IndividualCommits()
    view.own(tp, [(0, 2**62 - 1)])                  # the key-hash ranges fetched from now on ([]: every key)
    view.learned(tp, stable_offset, ranges)         # from OffsetFetch (CommittedRangeOffsets) or a commit answer
    view.committed(tp, offset)                      # IC-10: a poll never returns a committed record
    view.amend(tp, processed)                       # IC-11: processed ranges minus what is committed
    view.answered(tp, stable_offset, sent)          # a commit answered NONE: its ranges are committed

    traces = KeySharingTraces(directory, max_ranges=1_000_000, storage=None)   # one per process, shared
    traces.own(group, tp, member, ranges); traces.deliver(group, tp, member, records)
    traces.commit(group, tp, member, ranges, error)

The ic trace the consumers write (spec/ic.md IC-14 to IC-16, `ic-client.<group>:<topic>:<partition>.jsonl`)
holds every sharer's `own`, `deliver` and `commit` in the order they happened in this process; a commit
step carries the answer's error only (the stable offset depends on the order the coordinator served
concurrent commits in, which the coordinator's own ic trace records with the held ranges and appends).
Commits are unions (IC-2), so the committed set the judge rebuilds does not depend on that order.
"""

from __future__ import annotations

import threading
from pathlib import Path

from kipcheck.impl.storage import Storage
from kipcheck.impl.topic_partition import TopicPartition
from kipcheck.impl.tracing import Trace, quoted_name
from kipcheck.model.ic import answered, merge, subtract
from kipcheck.model.key_hash import HASH_MAX

Range = tuple[int, int]
WHOLE = [(0, HASH_MAX)]


class IndividualCommits:
    def __init__(self) -> None:
        self.key_ranges: dict[TopicPartition, list[Range]] = {}
        self._stable: dict[TopicPartition, int] = {}
        self._held: dict[TopicPartition, tuple[Range, ...]] = {}

    def own(self, tp: TopicPartition, ranges: list[Range]) -> None:
        self.key_ranges[tp] = list(merge(ranges))

    def forget(self, tp: TopicPartition) -> None:
        self.key_ranges.pop(tp, None)
        self._stable.pop(tp, None)
        self._held.pop(tp, None)

    def learned(self, tp: TopicPartition, stable_offset: int, ranges) -> None:
        self._stable[tp] = stable_offset
        self._held[tp] = merge(ranges)

    def answered(self, tp: TopicPartition, stable_offset: int, sent: list[Range]) -> None:
        """A commit answered NONE with LastStableOffset (IC-21)."""
        self.learned(tp, *answered(max(stable_offset, self.stable_offset(tp)), self._held.get(tp, ()), sent))

    def stable_offset(self, tp: TopicPartition) -> int:
        return self._stable.get(tp, -1)

    def committed(self, tp: TopicPartition, offset: int) -> bool:
        if offset <= self.stable_offset(tp):
            return True
        return any(first <= offset <= last for first, last in self._held.get(tp, ()))

    def amend(self, tp: TopicPartition, processed: list[Range]) -> list[Range]:
        """IC-11: the processed offsets not committed yet, as merged ranges."""
        stable_offset = self.stable_offset(tp)
        committed = [(0, stable_offset), *self._held.get(tp, ())] if stable_offset >= 0 else self._held.get(tp, ())
        return list(subtract(processed, committed))


class KeySharingTraces:
    """The consumers' ic traces of one process (see the module docstring); thread-safe."""

    def __init__(self, directory: str | Path, max_ranges: int = 1_000_000, storage: Storage | None = None) -> None:
        self.directory = Path(directory)
        self._storage = storage or Storage()
        self._storage.make_dirs(self.directory)
        self._header = {"machine": "ic", "config": {"max_ranges": max_ranges}}
        self._traces: dict[tuple[str, TopicPartition], Trace] = {}
        self._lock = threading.Lock()

    def own(self, group: str, tp: TopicPartition, member: str, ranges: list[Range], at_ms: int) -> None:
        """The member's key ranges of `tp` from now on: [] once it gave them up, WHOLE for every key (IC-14)."""
        self._step(group, tp, at_ms, member, "own", {"ranges": [list(pair) for pair in ranges]})

    def deliver(self, group: str, tp: TopicPartition, member: str, records: list[tuple[int, int]],
                at_ms: int) -> None:
        self._step(group, tp, at_ms, member, "deliver", {"records": [list(record) for record in records]})

    def commit(self, group: str, tp: TopicPartition, member: str, ranges: list[Range], error: str,
               at_ms: int) -> None:
        self._step(group, tp, at_ms, member, "commit", {"ranges": [list(pair) for pair in ranges]}, {"error": error})

    def close(self) -> None:
        with self._lock:
            for trace in self._traces.values():
                trace.close()
            self._traces.clear()

    def _step(self, group: str, tp: TopicPartition, at_ms: int, member: str, op: str, args: dict,
              observed: dict | None = None) -> None:
        with self._lock:
            trace = self._traces.get((group, tp))
            if trace is None:
                name = quoted_name(f"{group}:{tp.topic}:{tp.partition}")
                trace = self._traces[group, tp] = Trace(self.directory / f"ic-client.{name}.jsonl", self._header,
                                                        self._storage)
            trace.step(at_ms, member, op, args, observed)
