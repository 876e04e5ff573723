"""The consumer's individual-commit state: key ranges it fetches, offsets committed, and its ic trace.

    view = IndividualCommits()
    view.own(tp, [(0, 2**62 - 1)])                  # the key-hash ranges fetched from now on ([]: every key)
    view.learned(tp, stable_offset, ranges)         # from OffsetFetch (CommittedRangeOffsets) or a commit answer
    view.committed(tp, offset)                      # IC-10: a poll never returns a committed record
    view.amend(tp, processed)                       # IC-11: processed ranges minus what is committed
    view.answered(tp, stable_offset, sent)          # a commit answered NONE: its ranges are committed
    view.delivered(tp, [(offset, key_hash), ...])   # a poll returned these records
    view.given_up(tp, ranges) -> ranges             # IC-16: the offsets of `ranges` whose records it gave up

    traces = KeySharingTraces(directory, max_ranges=1_000_000, storage=None)   # one per process, shared
    traces.own(group, tp, member, ranges); traces.deliver(group, tp, member, records)
    traces.commit(group, tp, member, ranges, error); traces.drop(group, tp, member, ranges)

The ic trace the consumers write (spec/ic.md IC-14 to IC-16, `ic-client.<group>:<topic>:<partition>.jsonl`)
holds every sharer's `own`, `deliver`, `commit` and `drop` in the order they happened in this process; a commit
step carries the answer's error only (the stable offset depends on the order the coordinator served
concurrent commits in, which the coordinator's own ic trace records with the held ranges and appends).
Commits are unions (IC-2), so the committed set the judge rebuilds does not depend on that order.

The view remembers the records a poll returned until they are known committed, with their key hashes, so
that giving a key range up (`own` narrower, or `forget`) knows which of them it gave up; those offsets are
never committed by this member again unless a poll returns them again (IC-16). They are kept as merged
ranges, at most the records delivered and not yet committed when a range goes: a poll's worth for an
application that commits what it processed before it polls again.
"""

from __future__ import annotations

import bisect
import threading
from pathlib import Path
from typing import Callable

from kipcheck.impl.storage import Storage
from kipcheck.impl.topic_partition import TopicPartition
from kipcheck.impl.tracing import Trace, quoted_name
from kipcheck.model.ic import OFFSET_MAX, answered, merge, subtract
from kipcheck.model.key_hash import HASH_MAX, in_ranges

Range = tuple[int, int]
WHOLE = [(0, HASH_MAX)]


class IndividualCommits:
    def __init__(self) -> None:
        self.key_ranges: dict[TopicPartition, list[Range]] = {}
        self._stable: dict[TopicPartition, int] = {}
        self._held: dict[TopicPartition, tuple[Range, ...]] = {}
        self._delivered: dict[TopicPartition, dict[int, int]] = {}    # offset -> key hash, not known committed
        self._given_up: dict[TopicPartition, tuple[Range, ...]] = {}  # delivered, then given up uncommitted

    def own(self, tp: TopicPartition, ranges: list[Range]) -> None:
        self.key_ranges[tp] = list(merge(ranges))
        if ranges:    # narrower than every key: the records of the hashes left go (IC-15)
            self._give_up(tp, lambda key_hash: not in_ranges(key_hash, self.key_ranges[tp]))

    def forget(self, tp: TopicPartition) -> None:
        """Every key range of `tp` is given up; what it gave up is still remembered (IC-16)."""
        self._give_up(tp, lambda key_hash: True)
        self._delivered.pop(tp, None)
        self.key_ranges.pop(tp, None)
        self._stable.pop(tp, None)
        self._held.pop(tp, None)

    def _give_up(self, tp: TopicPartition, leaves: Callable[[int], bool]) -> None:
        delivered = self._delivered.get(tp, {})
        gone = [offset for offset, key_hash in delivered.items() if leaves(key_hash)]
        for offset in gone:
            del delivered[offset]
        if gone:
            self._given_up[tp] = merge([*self._given_up.get(tp, ()), *((offset, offset) for offset in gone)])

    def delivered(self, tp: TopicPartition, records: list[tuple[int, int]]) -> None:
        """A poll returned these [offset, key_hash]: they are this member's to commit again (IC-16)."""
        self._delivered.setdefault(tp, {}).update(records)
        if self._given_up.get(tp):
            self._given_up[tp] = subtract(self._given_up[tp], [(offset, offset) for offset, _ in records])

    def given_up(self, tp: TopicPartition, ranges: list[Range]) -> list[Range]:
        """IC-16: the offsets of `ranges` whose records this member gave up uncommitted."""
        given_up = self._given_up.get(tp, ())
        return list(subtract(ranges, subtract(ranges, given_up))) if given_up else []

    def learned(self, tp: TopicPartition, stable_offset: int, ranges) -> None:
        self._stable[tp] = stable_offset
        self._held[tp] = merge(ranges)
        delivered = self._delivered.get(tp)
        if delivered:   # committed records are no longer this member's to give up
            for offset in [offset for offset in delivered if self.committed(tp, offset)]:
                del delivered[offset]

    def answered(self, tp: TopicPartition, stable_offset: int, sent: list[Range]) -> None:
        """A commit answered NONE with LastStableOffset (IC-21)."""
        self.learned(tp, *answered(max(stable_offset, self.stable_offset(tp)), self._held.get(tp, ()), sent))

    def stable_offset(self, tp: TopicPartition) -> int:
        return self._stable.get(tp, -1)

    def committed(self, tp: TopicPartition, offset: int) -> bool:
        if offset <= self.stable_offset(tp):
            return True
        held = self._held.get(tp, ())
        index = bisect.bisect_right(held, (offset, OFFSET_MAX)) - 1   # the held range starting at or below it
        return index >= 0 and offset <= held[index][1]

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

    def drop(self, group: str, tp: TopicPartition, member: str, ranges: list[Range], at_ms: int) -> None:
        """Processed offsets left uncommitted: the member gave their records up (IC-16)."""
        self._step(group, tp, at_ms, member, "drop", {"ranges": [list(pair) for pair in ranges]})

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
