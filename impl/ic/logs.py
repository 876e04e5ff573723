"""IcLogs: the two logs of individual commit on disk, written in an order no crash can hurt, and replayed.

    logs = IcLogs(data_dir, fsync=True, offsets=None, storage=None)   # offsets: the groups' OffsetStore
    states = logs.replay(range_set)   # {(group, topic, partition): (stable_offset, ranges)}
    logs.stable_offset(key)           # a partition's stable offset in the primary log (-1: none)
    logs.write(key, plan, now_ms)     # durable before it returns; StorageError: files as before
    logs.rewrite(states)              # compaction of both logs (atomic per file)

Files (DurableLog: length + CRC-32C framed JSON records, torn tail cut at open):
- the seed's primary offsets log is the consumer groups' committed offsets (impl/groups/offsets.py
  OffsetStore, `offsets.log`): a partition's committed offset is `stable_offset + 1` (IC-1), so a
  plain OffsetFetch and the IC stable offset are one record. Without `offsets` (the library alone)
  IcLogs opens an OffsetStore of its own in `data_dir`.
- `_individual_commit_offsets.log`, the seed's IC log: `{group, topic, partition, put: [[first,
  last], ...], tombstone: [[first, last], ...]}`. Each pair is one record keyed by the range itself
  (IC-4); a log entry batches one commit's records of one partition, split so that no entry passes
  MAX_RECORD_BYTES (Kafka's message.max.bytes for the offsets topic, 1048588). A partition's first
  commit writes an entry even when it has no range to put, and compaction keeps one per partition:
  the IC log names the partitions that are individually committed (IC-19).

Write order (IC-4): the primary record first, then the IC entries (puts, then tombstones), each
file fsynced before the next is written. A crash after any prefix replays to the state before the
commit or to one between it and the state after: puts come before the tombstones of the ranges they
absorb, and the stable offset before the tombstones of the ranges it covers, so nothing committed is
ever missing, and tombstoned ranges are covered by a put or the stable offset, never resurrected as
held ranges (replay trims them). A write that fails is undone: the files are cut back to their sizes
before the commit and StorageError raised. If even the cut fails, every later write first retries it
and fails until it succeeds.

Replay: the partitions are those the IC log names; the stable offset is the primary log's; the live IC keys are the puts not tombstoned,
kept as {first: last} (a later put with the same first always contains the earlier, so the union is
kept with one int per range); then trimmed to above the stable offset and merged (IC-12).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

import msgspec

from kipcheck.impl.groups.offsets import CommittedOffset, OffsetStore, commit_record
from kipcheck.impl.ic.ranges import Range, RangeSet
from kipcheck.impl.ic.state import Plan
from kipcheck.impl.storage import Storage
from kipcheck.impl.storage.durable_log import DurableLog

IC_LOG_NAME = "_individual_commit_offsets.log"
MAX_RECORD_BYTES = 1048588
# A range as JSON is at most 41 bytes ("[9223372036854775807,9223372036854775807],").
_RANGE_JSON_BYTES_MAX = 41
Key = tuple[str, str, int]


class StorageError(Exception):
    """A commit could not be written; the logs are as they were before it."""


class IcLogs:
    def __init__(self, data_dir: str | os.PathLike, fsync: bool = True, offsets: OffsetStore | None = None,
                 storage: Storage | None = None) -> None:
        self._own_offsets = offsets is None
        self.offsets = offsets if offsets is not None else OffsetStore(data_dir, fsync=fsync, storage=storage)
        self.primary = self.offsets.log
        self.ic = DurableLog(Path(data_dir) / IC_LOG_NAME, fsync=fsync, storage=storage)
        self.ic_records = 0            # put and tombstone records in the IC log (compaction's dirt measure)
        self.keys: set[Key] = set()    # the partitions the IC log names (IC-19)
        self._undo: list[tuple[DurableLog, int]] = []

    def close(self) -> None:
        if self._own_offsets:
            self.offsets.close()
        self.ic.close()

    def stable_offset(self, key: Key) -> int:
        group, topic, partition = key
        committed = self.offsets.fetch(group, topic, partition)
        return committed.offset - 1 if committed is not None else -1

    def sizes_bytes(self) -> tuple[int, int]:
        return self.primary.size_bytes(), self.ic.size_bytes()

    def write(self, key: Key, plan: Plan, now_ms: int = 0) -> None:
        """Append the plan's records, primary first (IC-4); StorageError leaves both files as before."""
        self._finish_undo()
        group, topic, partition = key
        marks = [(self.primary, self.primary.size_bytes()), (self.ic, self.ic.size_bytes())]
        primary = commit_record(group, {(topic, partition): CommittedOffset(plan.stable_offset + 1, -1, "", now_ms)}) \
            if plan.folded is not None else None
        try:
            if primary is not None:
                self.primary.append(msgspec.json.encode(primary))
            if plan.puts or plan.tombstones or key not in self.keys:
                self.ic.append_many(_entries(key, plan.puts, plan.tombstones))
        except OSError as error:
            self._undo = marks
            self._finish_undo()
            raise StorageError(str(error)) from error
        if primary is not None:
            self.offsets.applied(primary)
        self.keys.add(key)
        self.ic_records += len(plan.puts) + len(plan.tombstones)

    def _finish_undo(self) -> None:
        while self._undo:
            log, size_bytes = self._undo[-1]
            try:
                if log.size_bytes() > size_bytes:
                    log.truncate(size_bytes)
            except OSError as error:
                raise StorageError(f"{log.path}: an earlier failed commit could not be undone yet: {error}") from error
            self._undo.pop()

    def replay(self, range_set: Callable[[], RangeSet]) -> dict[Key, tuple[int, RangeSet]]:
        live: dict[Key, dict[int, int]] = {}
        for payload in self.ic.replay():
            record = msgspec.json.decode(payload)
            ranges = live.setdefault((record["group"], record["topic"], record["partition"]), {})
            for first, last in record.get("put", ()):
                ranges[first] = max(last, ranges.get(first, last))
            for first, last in record.get("tombstone", ()):
                if ranges.get(first) == last:
                    del ranges[first]
            self.ic_records += len(record.get("put", ())) + len(record.get("tombstone", ()))
        self.keys = set(live)
        return {key: _normal(self.stable_offset(key), sorted(ranges.items()), range_set())
                for key, ranges in sorted(live.items())}

    def rewrite(self, states: dict[Key, tuple[int, RangeSet]]) -> None:
        """Compaction of the IC log (atomic): one put per held range, an entry for every partition.

        The primary log is the OffsetStore's, which compacts itself."""
        self._finish_undo()
        self.ic.rewrite(entry for key, (_, ranges) in states.items() for entry in _entries(key, list(ranges), []))
        self.ic_records = sum(len(ranges) for _, ranges in states.values())


def _entries(key: Key, puts: list[Range], tombstones: list[Range]) -> list[bytes]:
    """The IC log entries of one commit: puts then tombstones, each entry at most MAX_RECORD_BYTES; at least one."""
    group, topic, partition = key
    envelope = {"group": group, "topic": topic, "partition": partition}
    per_entry = max(1, (MAX_RECORD_BYTES - len(msgspec.json.encode(envelope)) - 32) // _RANGE_JSON_BYTES_MAX)
    records = [("put", pair) for pair in puts] + [("tombstone", pair) for pair in tombstones]
    entries = []
    for start in range(0, max(1, len(records)), per_entry):
        entry: dict = dict(envelope)
        for kind, pair in records[start:start + per_entry]:
            entry.setdefault(kind, []).append(pair)
        entries.append(msgspec.json.encode(entry))
    return entries


def _normal(stable_offset: int, live: list[Range], ranges: RangeSet) -> tuple[int, RangeSet]:
    """IC-12: live keys trimmed to above the stable offset, merged, the lowest folded into it (IC-3)."""
    pending: list[int] | None = None      # the highest range, still growing while live keys overlap it
    for first, last in live:
        if last <= stable_offset:
            continue
        first = max(first, stable_offset + 1)
        if pending is not None and first <= pending[1] + 1:
            pending[1] = max(pending[1], last)
        elif pending is None and first == stable_offset + 1:
            stable_offset = last
        else:
            if pending is not None:
                ranges.append(*pending)
            pending = [first, last]
    if pending is not None:
        ranges.append(*pending)
    return stable_offset, ranges
