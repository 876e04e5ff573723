"""Partition logs: produced record batches kept as raw bytes in durable segment files.

A produced batch is stored exactly as the producer sent it; only its 8-byte
`baseOffset` (outside the CRC) is overwritten with the offset the log assigns.
Records are never decoded, so compressed batches pass through untouched and
timestamps keep their milliseconds.

On disk: `<data dir>/<topic>-<partition>/<base offset, 20 digits>.log`, the
batches back to back. A segment rolls when it would pass `segment_bytes`. A
partition's directory and first segment are created by its first append.

Writes go through impl/storage: a produce whose write or fsync fails raises
StorageError (answered KAFKA_STORAGE_ERROR), nothing of it is indexed, and the
segment is cut back to where it was, so no torn batch ever sits in front of a
later one; the next produce writes again as soon as the disk accepts it.
Segment files are opened on demand within the storage's bound of open files.

Durability policy (documented for users in `kipcheck broker --help`):
- every batch is written to the operating system before the produce request is
  answered, so an answered produce survives `kill -9` of the broker;
- segment files are fsync'd when `flush_interval_messages` batches have been
  written since the last fsync (Kafka's `log.flush.interval.messages`; 1 means
  fsync before every answer), by the broker's flush timer
  (`log.flush.interval.ms`), when a segment rolls, and at a clean shutdown.

On start every segment is replayed: each batch's length, magic, CRC-32C and
offset are checked, and the log is truncated at the first batch that fails (a
torn tail from a crash mid-write). Later segments are then removed.

Idempotent producers: the last RETAINED_BATCHES batches of each producer id
and epoch are remembered (rebuilt by the replay too), so a retried batch, one
of up to five requests a producer had in flight when the broker died, is
answered with its first offset and not written again. As in Kafka's
ProducerAppendInfo: a batch that does not follow the last one is
OUT_OF_ORDER_SEQUENCE_NUMBER, and so is a new epoch's first batch unless it
starts at sequence 0; a batch of an epoch older than the last one is
INVALID_PRODUCER_EPOCH. The sequence rule is what lets a client trust a
success: librdkafka bumps an idempotent producer's epoch itself, restarts its
sequences at 0 and pipelines the new epoch's batches, and when one succeeds it
reports every earlier batch still unacknowledged as delivered (its "implicit
ack"). Were a new epoch's sequence 3 stored after its sequence 0 was refused
(a full disk, or a kill -9 while in flight), sequence 0 would be reported
delivered and never be stored. For the same reason a producer id the log
holds no batch of must start at sequence 0 too: this broker keeps every batch
it stored (DeleteRecords only moves the log start offset; the replay still
reads the batches below it), so such a producer has stored nothing here. (Kafka accepts any
sequence there, for producers whose batches retention or DeleteRecords
removed; Kafka 4.2 asks for 0 too from transactions-v2 producers.)

Transactions: a transactional batch opens (or extends) its producer's
transaction in this partition; the control batch the transaction coordinator
appends (`append_marker`, one commit or abort record written by kio) closes
it (clients cannot write control batches: the Produce handler refuses them).
While a producer's transaction is open here, a plain batch of that producer
is TransactionStateError (INVALID_TXN_STATE), as in Kafka's ProducerAppendInfo. The log keeps, rebuilt by the replay, the first offset of every open
transaction (the last stable offset is the earliest of them, else the log
end) and the aborted transactions as Kafka's AbortedTxn (producer id, first
offset, marker offset), which read_committed fetches are told about.
"""

from __future__ import annotations

import bisect
import logging
import struct
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from kipcheck.impl.storage import AppendFile, Storage
from kipcheck.impl.wire.batches import ABORT, COMMIT, BatchHeader, InvalidBatch, marker_batch, read_header, split_batches

RETAINED_BATCHES = 5  # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN


class SequenceError(Exception):
    """An idempotent producer's batch out of sequence (OUT_OF_ORDER_SEQUENCE_NUMBER)."""


class TransactionStateError(Exception):
    """A producer's non-transactional batch while its transaction is open here (INVALID_TXN_STATE)."""


class ProducerEpochError(Exception):
    """An idempotent producer's batch of an epoch older than its last stored one (INVALID_PRODUCER_EPOCH)."""


@dataclass
class Segment:
    base_offset: int
    file: AppendFile


@dataclass
class ProducerState:
    """Idempotent producer bookkeeping: its epoch and its last RETAINED_BATCHES batches
    as (first sequence, last sequence, base offset), as Kafka's ProducerStateEntry keeps them."""

    epoch: int
    batches: deque = field(default_factory=lambda: deque(maxlen=RETAINED_BATCHES))


@dataclass
class PartitionLog:
    """One partition's log. Offsets start at 0; `end_offset` is the next offset to assign."""

    directory: Path
    storage: Storage
    segment_bytes: int = 1 << 30
    flush_interval_messages: int = 1 << 62
    segments: list[Segment] = field(default_factory=list)
    # Batch index, parallel lists sorted by base offset.
    bases: list[int] = field(default_factory=list)
    lasts: list[int] = field(default_factory=list)
    places: list[tuple[int, int, int]] = field(default_factory=list)  # (segment index, position, length)
    timestamps: list[int] = field(default_factory=list)
    # Per batch: None, or (producer id, None) for transactional data, (producer id, ABORT or COMMIT) for a marker.
    transactions: list[tuple[int, int | None] | None] = field(default_factory=list)
    producers: dict[int, ProducerState] = field(default_factory=dict)
    unflushed: int = 0
    deleted_below: int = 0  # DeleteRecords: the log start offset it set (the broker restores it at open)
    open_transactions: dict[int, int] = field(default_factory=dict)  # producer id -> first offset
    aborted: list[tuple[int, int, int]] = field(default_factory=list)  # (producer id, first offset, marker offset)

    @classmethod
    def open(cls, directory: Path, segment_bytes: int = 1 << 30, flush_interval_messages: int = 1 << 62,
             storage: Storage | None = None) -> "PartitionLog":
        """Replay the log in `directory` (nothing is created until the first append)."""
        log = cls(directory, storage or Storage(), segment_bytes, max(1, flush_interval_messages))
        log._replay()
        return log

    @property
    def start_offset(self) -> int:
        stored = self.bases[0] if self.bases else self.segments[0].base_offset if self.segments else 0
        return max(stored, self.deleted_below)

    @property
    def end_offset(self) -> int:
        return self.lasts[-1] + 1 if self.lasts else self.segments[-1].base_offset if self.segments else 0

    @property
    def last_stable_offset(self) -> int:
        """The first offset of the earliest open transaction, else the log end."""
        return min(self.open_transactions.values(), default=self.end_offset)

    def aborted_transactions(self, first: int, last: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of the aborted transactions a read of offsets first..last meets."""
        return [(producer, start) for producer, start, marker in self.aborted if start <= last and marker >= first]

    def append_marker(self, producer_id: int, producer_epoch: int, commit: bool) -> int | None:
        """The transaction coordinator ends `producer_id`'s open transaction here: its marker's offset,
        or None when the producer has no open transaction in this partition (a repeated end)."""
        if producer_id not in self.open_transactions:
            return None
        return self.append(marker_batch(producer_id, producer_epoch, COMMIT if commit else ABORT))

    def batch_ranges(self, from_offset: int = 0) -> list[tuple[int, int]]:
        """(first, last) offsets of the stored batches that end at or after `from_offset`."""
        index = bisect.bisect_left(self.lasts, from_offset)
        return list(zip(self.bases[index:], self.lasts[index:]))

    def batch_details(self, from_offset: int = 0) -> list[tuple[int, int, tuple[int, int | None] | None]]:
        """batch_ranges with each batch's transaction: None, (producer id, None) for transactional data,
        or (producer id, ABORT or COMMIT) for a marker."""
        index = bisect.bisect_left(self.lasts, from_offset)
        return list(zip(self.bases[index:], self.lasts[index:], self.transactions[index:]))

    def append(self, records: bytes) -> int:
        """Append a produce request's record set; returns the base offset of its first batch.

        The whole record set is one write to one segment (Kafka rolls per append
        too). Raises InvalidBatch, SequenceError, ProducerEpochError or TransactionStateError without
        writing anything, and StorageError (KAFKA_STORAGE_ERROR) with the segment
        as it was.
        """
        batches = split_batches(records)
        duplicate = self._check_sequences(batches)
        if duplicate is not None:
            return duplicate
        header = batches[0][1]
        if header.control_type is None and not header.transactional and header.producer_id in self.open_transactions:
            # ProducerAppendInfo: a producer whose transaction is open here writes only transactional batches.
            raise TransactionStateError(f"Expected transactional write from producer {header.producer_id} at offset "
                                        f"{self.end_offset} in partition {self.directory.name}")
        base_offset = offset = self.end_offset
        stamped = []
        for batch, header in batches:
            stamped.append(struct.pack(">q", offset) + batch[8:])
            offset += header.last_offset_delta + 1
        data = b"".join(stamped)
        segment = self._segment_for(len(data))
        sync = self.unflushed + len(batches) >= self.flush_interval_messages
        position = segment.file.append(data, sync=sync)
        self.unflushed = 0 if sync else self.unflushed + len(batches)
        offset = base_offset
        for batch, header in batches:
            self._index(offset, header, len(self.segments) - 1, position)
            position += header.length
            offset += header.last_offset_delta + 1
        return base_offset

    def read(self, offset: int, max_bytes: int, until: int | None = None) -> bytes:
        """Whole batches from the one holding `offset`, up to `max_bytes` (always at least one batch),
        none starting at or past `until` (read_committed reads below the last stable offset)."""
        index = bisect.bisect_right(self.lasts, offset - 1)
        stop = len(self.bases) if until is None else bisect.bisect_left(self.bases, until)
        chunks, total = [], 0
        while index < stop:
            segment_index, position, length = self.places[index]
            if chunks and total + length > max_bytes:
                break
            chunks.append(self.segments[segment_index].file.read(position, length))
            total += length
            index += 1
        return b"".join(chunks)

    def read_range(self, first: int, last: int) -> bytes:
        """The whole batches holding offsets first..last (a share fetch's acquired records)."""
        start, stop = bisect.bisect_left(self.lasts, first), bisect.bisect_right(self.bases, last)
        return b"".join(self.segments[segment_index].file.read(position, length)
                        for segment_index, position, length in self.places[start:stop])

    def offset_for_timestamp(self, timestamp_ms: int) -> int:
        """The first offset of the first batch whose max timestamp is >= `timestamp_ms`, else the end."""
        for base, stamp in zip(self.bases, self.timestamps):
            if stamp >= timestamp_ms:
                return base
        return self.end_offset

    def flush(self) -> None:
        """fsync the active segment (earlier ones were fsynced when they rolled); StorageError if it fails."""
        if self.segments:
            self.segments[-1].file.sync()
        self.unflushed = 0

    def close(self) -> None:
        try:
            self.flush()
        finally:
            for segment in self.segments:
                segment.file.close()
            self.segments.clear()

    def _check_sequences(self, batches: list[tuple[bytes, BatchHeader]]) -> int | None:
        """Idempotence: the base offset of a retried duplicate (any of the producer's last RETAINED_BATCHES
        batches: a producer has up to five requests in flight), None for new batches; SequenceError or
        ProducerEpochError otherwise (the rules: module docstring)."""
        header = batches[0][1]
        if header.producer_id < 0 or header.control_type is not None:
            return None  # markers are written by the coordinator, not sequenced
        state = self.producers.get(header.producer_id)
        if state is not None and header.producer_epoch < state.epoch:
            raise ProducerEpochError(f"producer {header.producer_id} epoch {header.producer_epoch}, "
                                     f"older than its last stored epoch {state.epoch}")
        if state is None or header.producer_epoch > state.epoch:
            if header.base_sequence != 0:
                raise SequenceError(f"producer {header.producer_id} epoch {header.producer_epoch} starts at "
                                    f"sequence {header.base_sequence}, expected 0")
            return None
        last_sequence = _sequence_after(header.base_sequence, header.last_offset_delta)
        for first, last, base_offset in state.batches:
            if (first, last) == (header.base_sequence, last_sequence):
                return base_offset
        expected = _sequence_after(state.batches[-1][1], 1)
        if header.base_sequence != expected:
            raise SequenceError(f"producer {header.producer_id} sequence {header.base_sequence}, expected {expected}")
        return None

    def _segment_for(self, length: int) -> Segment:
        """The segment the next `length` bytes go to: the active one, or a new one listed after it.

        A new segment is listed before its first write: if that write fails, its file may stay on disk,
        empty, and the next appends must go to it, never back to the old segment (even a batch that would
        fit there), or the replay would find the file inside the old segment's offsets and drop it and every
        segment after it."""
        if self.segments:
            active = self.segments[-1]
            if active.file.size == 0 or active.file.size + length <= self.segment_bytes:
                return active
            active.file.sync()  # a full segment is durable before the next one takes writes
        base_offset = self.end_offset
        self.segments.append(Segment(base_offset, self.storage.append_file(self.directory / f"{base_offset:020d}.log")))
        return self.segments[-1]

    def _index(self, offset: int, header: BatchHeader, segment_index: int, position: int) -> None:
        self.bases.append(offset)
        self.lasts.append(offset + header.last_offset_delta)
        self.places.append((segment_index, position, header.length))
        self.timestamps.append(header.max_timestamp_ms)
        self.transactions.append((header.producer_id, header.control_type)
                                 if header.transactional or header.control_type is not None else None)
        if header.control_type is not None:
            first = self.open_transactions.pop(header.producer_id, None)
            if first is not None and header.control_type == ABORT:
                self.aborted.append((header.producer_id, first, offset))
            return
        if header.transactional:
            self.open_transactions.setdefault(header.producer_id, offset)
        if header.producer_id >= 0:
            state = self.producers.get(header.producer_id)
            if state is None or state.epoch != header.producer_epoch:
                state = self.producers[header.producer_id] = ProducerState(header.producer_epoch)
            state.batches.append(
                (header.base_sequence, _sequence_after(header.base_sequence, header.last_offset_delta), offset))

    def _replay(self) -> None:
        paths = sorted(self.directory.glob("*.log"))
        for number, path in enumerate(paths):
            base_offset = int(path.stem)
            if self.segments and base_offset != self.end_offset:
                self._drop(paths[number:], f"segment {path.name} does not follow offset {self.end_offset}")
                return
            data = path.read_bytes()
            good_bytes = self._replay_segment(base_offset, data)
            self.segments.append(Segment(base_offset, self.storage.append_file(path, good_bytes, len(data))))
            if good_bytes < len(data):
                self._drop(paths[number + 1:], f"torn tail in {path.name}")
                return

    def _replay_segment(self, base_offset: int, data: bytes) -> int:
        """Index a segment's batches up to the first bad one; returns the bytes that are good."""
        position, expected = 0, base_offset
        view = memoryview(data)
        while position < len(data):
            try:
                header = read_header(view, position)
                (offset,) = struct.unpack_from(">q", data, position)
                if offset != expected:
                    raise InvalidBatch(f"offset {offset}, expected {expected}")
            except InvalidBatch:
                return position
            self._index(offset, header, len(self.segments), position)
            position += header.length
            expected = offset + header.last_offset_delta + 1
        return position

    def _drop(self, paths: list[Path], reason: str) -> None:
        """Cut the log at a torn tail: later segments go (StorageError if one cannot: the broker must not start
        on a log that could later read them back)."""
        for path in paths:
            self.storage.remove(path)
        logging.getLogger("kipcheck.broker").warning(
            "log %s: %s; truncated there and removed %d later segment(s)", self.directory.name, reason, len(paths))


def _sequence_after(sequence: int, steps: int) -> int:
    """A producer sequence `steps` later: sequences wrap from 2^31 - 1 to 0, as in Kafka."""
    return (sequence + steps) % (1 << 31)
