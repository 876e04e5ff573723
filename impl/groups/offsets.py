"""OffsetStore: the committed offsets of every consumer group, per (group, topic, partition), on a durable log.

    store = OffsetStore(data_dir)                     # replays `<data dir>/offsets.log`
    store.commit("g", {("orders", 0): CommittedOffset(42, -1, "", now_ms)})   # fsynced, then applied
    store.fetch("g", "orders", 0)                     # CommittedOffset(42, ...) or None
    store.offsets("g")                                # {(topic, partition): CommittedOffset}
    store.delete("g", [("orders", 0)])                # OffsetDelete: a tombstone, fsynced, then applied
    store.close()

Kafka keeps committed offsets in the compacted `__consumer_offsets` topic;
kipcheck keeps them in a DurableLog (length + CRC-32C framed records, torn
tail truncated at open). One record per OffsetCommit (all its partitions, so
a commit is applied whole or not at all) or per OffsetDelete; the same
`_apply` serves live writes and replay. A write is appended and fsynced
BEFORE it is applied and answered, so an offset answered NONE survives
kill -9. A commit whose record would exceed MAX_RECORD_BYTES (Kafka's
message.max.bytes) raises RecordTooLarge. If the write fails,
`commit`/`delete` raise StorageError and nothing changes: the caller answers Kafka's error for a failed append to the
offsets log (KAFKA_STORAGE_ERROR becomes NOT_COORDINATOR, as Kafka 4.2's
CoordinatorOperationExceptionHelper maps it). When the log outgrows
`compact_bytes` (Kafka's offsets.topic.segment.bytes) it is rewritten with
each group's offsets (split into records of at most MAX_RECORD_BYTES),
atomically (temporary file, fsync, rename, fsync dir).

Offsets do not expire (Kafka's offsets.retention.minutes is not served).
This log is also individual commit's primary offsets log (impl/ic/logs.py,
spec/ic.md IC-4): an individually committed partition's stable offset is its
committed offset minus one, written as a `commit_record` to `log` and
`applied` once the commit's IC log records are written too; one store, so a
plain OffsetFetch and the IC stable offset always agree.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

import msgspec
from kipcheck.impl.storage import Storage
from kipcheck.impl.storage.durable_log import DurableLog

log = logging.getLogger("kipcheck.groups")

LOG_NAME = "offsets.log"
# Kafka's default message.max.bytes, which bounds one append to __consumer_offsets: a larger commit
# fails (MESSAGE_TOO_LARGE, answered UNKNOWN_SERVER_ERROR). Far below DurableLog's record limit.
MAX_RECORD_BYTES = 1048588
Key = tuple[str, int]  # (topic, partition)


class StorageError(Exception):
    """The offsets log could not be written; nothing was applied."""


class RecordTooLarge(Exception):
    """One commit would need a record above MAX_RECORD_BYTES; nothing was applied."""


@dataclass(frozen=True)
class CommittedOffset:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp_ms: int = 0


class OffsetStore:
    def __init__(self, data_dir: str | os.PathLike, *, fsync: bool = True, compact_bytes: int = 100 * 1024 * 1024,
                 storage: Storage | None = None):
        self._compact_bytes = compact_bytes
        self._groups: dict[str, dict[Key, CommittedOffset]] = {}
        self._log = DurableLog(Path(data_dir) / LOG_NAME, fsync=fsync, storage=storage)
        for payload in self._log.replay():
            self._apply(msgspec.json.decode(payload))
        self.truncated_bytes = self._log.truncated_bytes

    @property
    def log(self) -> DurableLog:
        return self._log

    def close(self) -> None:
        self._log.close()

    def fetch(self, group_id: str, topic: str, partition: int) -> CommittedOffset | None:
        return self._groups.get(group_id, {}).get((topic, partition))

    def offsets(self, group_id: str) -> dict[Key, CommittedOffset]:
        return dict(self._groups.get(group_id, {}))

    def groups(self) -> list[str]:
        return sorted(self._groups)

    def has_offsets(self, group_id: str) -> bool:
        return bool(self._groups.get(group_id))

    def commit(self, group_id: str, offsets: dict[Key, CommittedOffset]) -> None:
        """Store every offset or none (StorageError, RecordTooLarge)."""
        if offsets:
            self._store(commit_record(group_id, offsets))

    def delete(self, group_id: str, keys: list[Key]) -> None:
        """Forget these partitions' offsets, or nothing (StorageError)."""
        present = sorted(key for key in keys if key in self._groups.get(group_id, {}))
        if present:
            self._store({"group": group_id, "delete": [list(key) for key in present]})

    def _store(self, record: dict) -> None:
        payload = msgspec.json.encode(record)
        if len(payload) > MAX_RECORD_BYTES:
            raise RecordTooLarge(f"{len(payload)} bytes, above {MAX_RECORD_BYTES}")
        try:
            self._log.append(payload)
        except OSError as error:
            raise StorageError(str(error)) from error
        self.applied(record)

    def applied(self, record: dict) -> None:
        """A record now durable in `log` takes effect (individual commit appends its own, logs.py)."""
        self._apply(record)
        if self._log.size_bytes() > self._compact_bytes:
            self._compact()

    def _apply(self, record: dict) -> None:
        offsets = self._groups.setdefault(record["group"], {})
        for topic, partition, offset, leader_epoch, metadata, timestamp_ms in record.get("commit", ()):
            offsets[topic, partition] = CommittedOffset(offset, leader_epoch, metadata, timestamp_ms)
        for topic, partition in record.get("delete", ()):
            offsets.pop((topic, partition), None)
        if not offsets:
            del self._groups[record["group"]]

    def _compact(self) -> None:
        """Rewrite the log as commit records of each group's offsets, none above MAX_RECORD_BYTES."""
        payloads = [payload for group_id, offsets in sorted(self._groups.items())
                    for payload in _chunks(group_id, _rows(offsets))]
        try:
            self._log.rewrite(payloads)
        except OSError as error:  # the commit is stored; the long log stays correct and is compacted later
            log.warning("compacting %s failed: %s", LOG_NAME, error)


def commit_record(group_id: str, offsets: dict[Key, CommittedOffset]) -> dict:
    return {"group": group_id, "commit": _rows(offsets)}


def _rows(offsets: dict[Key, CommittedOffset]) -> list[list]:
    return [[topic, partition, value.offset, value.leader_epoch, value.metadata, value.commit_timestamp_ms]
            for (topic, partition), value in sorted(offsets.items())]


def _chunks(group_id: str, rows: list[list]) -> list[bytes]:
    """Commit records of `rows`, split so that each stays under MAX_RECORD_BYTES (replay merges them)."""
    payloads, chunk, size = [], [], 0
    envelope = len(msgspec.json.encode({"group": group_id, "commit": []}))
    for row in rows:
        row_size = len(msgspec.json.encode(row)) + 1
        if chunk and envelope + size + row_size > MAX_RECORD_BYTES:
            payloads.append(msgspec.json.encode({"group": group_id, "commit": chunk}))
            chunk, size = [], 0
        chunk.append(row)
        size += row_size
    payloads.append(msgspec.json.encode({"group": group_id, "commit": chunk}))
    return payloads
