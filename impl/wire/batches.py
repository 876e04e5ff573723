"""Record batches (v2), as producers send them and logs keep them: framing, header, validation, markers.

    batch, header = produced_batch(records, version, max_message_bytes)   # a Produce partition's one batch
    header = read_header(data, position)      # BatchHeader of the batch at `position`; InvalidBatch if it is not
    for batch, header in split_batches(records): ...   # a record set (a fetch's, a log's), every batch validated
    batch_spans(records)                      # [(first, last, transactional or control, record count)]: unvalidated
    marker_batch(producer_id, producer_epoch, COMMIT)   # a transaction marker, as Kafka writes one

A batch is valid when its length fits the bytes given, its magic is 2 and its
CRC-32C matches; a control batch also needs a control record key. The consumer
validates fetched batches with these, the log its segments at replay, and
individual commit's key-range filter the batches it rewrites. A produced batch
must pass Kafka's own rules as well (produced_batch); its records are read by
records.check_records.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import struct
from dataclasses import dataclass

import crc32c
from kio.records.readers import read_batch
from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch
from kio.schema.end_txn_marker.v0 import EndTxnMarker
from kio.serial import entity_writer
from kio.static.primitive import i8, i16, i32, i64

from kipcheck.model.errors import Error

BATCH_HEADER_BYTES = 61  # through recordsCount, the fixed part of a v2 batch
LENGTH_PREFIX_BYTES = 12  # baseOffset + batchLength
MAGIC_OFFSET, CRC_OFFSET, ATTRIBUTES_OFFSET, LAST_OFFSET_DELTA_OFFSET = 16, 17, 21, 23
BASE_TIMESTAMP_OFFSET, RECORDS_COUNT_OFFSET = 27, 57
CRC_COVERS_FROM = 21
COMPRESSION_MASK, TRANSACTIONAL, CONTROL = 0x07, 0x10, 0x20  # batch attribute bits
ZSTD = 4
LEGACY_RECORD_OVERHEAD_BYTES = 14  # Kafka's LegacyRecord.RECORD_OVERHEAD_V0: the smallest batch length it reads
ABORT, COMMIT = 0, 1  # control record types (Kafka's ControlRecordType)


class InvalidBatch(Exception):
    """A batch that is not a valid v2 record batch; `error` is Kafka's answer to a producer that sends it."""

    def __init__(self, message: str, error: str = Error.CORRUPT_MESSAGE):
        super().__init__(message)
        self.error = error


class InvalidRecord(InvalidBatch):
    """A batch or record Kafka refuses with InvalidRecordException (INVALID_RECORD)."""

    def __init__(self, message: str):
        super().__init__(message, Error.INVALID_RECORD)


@dataclass(frozen=True)
class BatchHeader:
    """The fields of a v2 batch header that the broker uses."""

    length: int  # whole batch, length prefix included
    last_offset_delta: int
    max_timestamp_ms: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int
    attributes: int = 0
    control_type: int | None = None  # ABORT or COMMIT for a transaction marker

    @property
    def transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL) and self.producer_id >= 0


def read_header(data: bytes | memoryview, position: int = 0) -> BatchHeader:
    """Parse and validate the batch starting at `position` (raises InvalidBatch)."""
    if len(data) - position < BATCH_HEADER_BYTES:
        raise InvalidBatch("truncated batch header")
    (batch_length,) = struct.unpack_from(">i", data, position + 8)
    length = batch_length + LENGTH_PREFIX_BYTES
    if batch_length < BATCH_HEADER_BYTES - LENGTH_PREFIX_BYTES or len(data) - position < length:
        raise InvalidBatch(f"batch length {batch_length} does not fit the {len(data) - position} bytes given")
    if data[position + MAGIC_OFFSET] != 2:
        raise InvalidBatch(f"record batch magic {data[position + MAGIC_OFFSET]}, only v2 is served")
    _check_crc(data, position, length)
    header = _fields(data, position, length)
    if header.last_offset_delta < 0 or header.record_count < 0:
        raise InvalidBatch("negative record count")
    if header.attributes & CONTROL:
        return dataclasses.replace(header, control_type=_control_type(data, position, length))
    return header


def _check_crc(data: bytes | memoryview, position: int, length: int) -> None:
    (crc,) = struct.unpack_from(">I", data, position + CRC_OFFSET)
    if crc32c.crc32c(bytes(data[position + CRC_COVERS_FROM:position + length])) != crc:
        raise InvalidBatch(f"Record is corrupt (stored crc = {crc})")


def _fields(data: bytes | memoryview, position: int, length: int) -> BatchHeader:
    last_delta, _, max_timestamp, producer_id, producer_epoch, base_sequence, count = struct.unpack_from(
        ">iqqqhii", data, position + LAST_OFFSET_DELTA_OFFSET)
    (attributes,) = struct.unpack_from(">h", data, position + ATTRIBUTES_OFFSET)
    return BatchHeader(length, last_delta, max_timestamp, producer_id, producer_epoch, base_sequence, count,
                       attributes)


def produced_batch(records: bytes | None, version: int, max_message_bytes: int) -> tuple[bytes, BatchHeader]:
    """The one batch of a Produce partition, refused (InvalidBatch, with Kafka's error) where Kafka refuses it:
    ProduceRequest.validateRecords (one batch of magic 2; zstd from v7), UnifiedLog.analyzeAndValidateRecords
    (base offset 0, at most `message.max.bytes`, its CRC) and LogValidator.validateBatch (a record count that
    matches the offsets, no control batch, a sequence for a producer id). Its records are not read here."""
    data = records or b""
    size = _next_batch_size(data, 0)
    if size is None:
        raise InvalidRecord(f"Produce requests with version {version} must have at least one record batch per partition")
    if data[MAGIC_OFFSET] != 2:
        raise InvalidRecord(f"Produce requests with version {version} are only allowed to contain record batches "
                            f"with magic version 2")
    if version < 7 and data[ATTRIBUTES_OFFSET + 1] & COMPRESSION_MASK == ZSTD:
        raise InvalidBatch(f"Produce requests with version {version} are not allowed to use ZStandard compression",
                           Error.UNSUPPORTED_COMPRESSION_TYPE)
    if _next_batch_size(data, size) is not None:
        raise InvalidRecord(f"Produce requests with version {version} are only allowed to contain exactly one "
                            f"record batch per partition")
    batch = data[:size]
    (base_offset,) = struct.unpack_from(">q", batch, 0)
    if base_offset != 0:
        raise InvalidRecord(f"The baseOffset of the record batch should be 0, but it is {base_offset}")
    if size > max_message_bytes:
        raise InvalidBatch(f"The record batch size is {size} bytes which exceeds the maximum configured value of "
                           f"{max_message_bytes} (message.max.bytes)", Error.MESSAGE_TOO_LARGE)
    if size < BATCH_HEADER_BYTES:
        raise InvalidBatch(f"Record batch is corrupt (the size {size} is smaller than the minimum allowed overhead "
                           f"{BATCH_HEADER_BYTES})")
    _check_crc(batch, 0, size)
    header = _fields(batch, 0, size)
    _check_batch(header)
    return batch, header


def _next_batch_size(data: bytes, position: int) -> int | None:
    """Kafka's ByteBufferLogInputStream: the size of the batch at `position`, None when the bytes left cannot
    hold one (they are ignored); InvalidBatch for an impossible size or magic."""
    left = len(data) - position
    if left < LENGTH_PREFIX_BYTES:
        return None
    (batch_length,) = struct.unpack_from(">i", data, position + 8)
    if batch_length < LEGACY_RECORD_OVERHEAD_BYTES:
        raise InvalidBatch(f"Record size {batch_length} is less than the minimum record overhead "
                           f"({LEGACY_RECORD_OVERHEAD_BYTES})")
    if left <= MAGIC_OFFSET:
        return None
    if not 0 <= data[position + MAGIC_OFFSET] <= 2:
        raise InvalidBatch(f"Invalid magic found in record: {struct.unpack_from('>b', data, position + MAGIC_OFFSET)[0]}")
    return None if left < batch_length + LENGTH_PREFIX_BYTES else batch_length + LENGTH_PREFIX_BYTES


def _check_batch(header: BatchHeader) -> None:
    """LogValidator.validateBatch for a batch from a client."""
    from_offsets = header.last_offset_delta + 1
    if from_offsets <= 0:
        raise InvalidRecord(f"Batch has an invalid offset range: [0, {header.last_offset_delta}]")
    if header.record_count <= 0:
        raise InvalidRecord(f"Invalid reported count for record batch: {header.record_count}")
    if from_offsets != header.record_count:
        raise InvalidRecord(f"Inconsistent batch offset range [0, {header.last_offset_delta}] and count of records "
                            f"{header.record_count}")
    if header.attributes & CONTROL:
        raise InvalidRecord("Clients are not allowed to write control records")
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise InvalidRecord(f"Invalid sequence number {header.base_sequence} in record batch with producerId "
                            f"{header.producer_id}")


def _control_type(data: bytes | memoryview, position: int, length: int) -> int:
    """The type in a control batch's record key (version int16, type int16)."""
    batch, _ = read_batch(bytes(data[position:position + length]), 0)
    key = batch.records[0].key if batch.records else None
    if key is None or len(key) < 4:
        raise InvalidBatch("control batch without a control record key")
    return struct.unpack_from(">h", key, 2)[0]


def marker_batch(producer_id: int, producer_epoch: int, control_type: int, coordinator_epoch: int = 0) -> bytes:
    """A transaction marker: one control record in a transactional control batch, as Kafka's
    EndTransactionMarker writes it. Key: version 0 and the control type (Kafka's ControlRecordType key,
    two int16s, for which there is no message schema); value: version 0, then kio's EndTxnMarker."""
    value = io.BytesIO()
    value.write(struct.pack(">h", 0))
    entity_writer(EndTxnMarker)(value, EndTxnMarker(coordinator_epoch=i32(coordinator_epoch)))
    record = Record(attributes=i8(0), timestamp=_now(), offset=i64(0), headers=(),
                    key=struct.pack(">hh", 0, control_type), value=value.getvalue())
    buffer = io.BytesIO()
    write_new_batch(buffer, NewRecordBatch(producer_id=i64(producer_id), producer_epoch=i16(producer_epoch),
                                           base_sequence=i32(-1), records=(record,),
                                           attributes=i16(TRANSACTIONAL | CONTROL)))
    return buffer.getvalue()


def _now():
    return datetime.datetime.now(datetime.timezone.utc)


def split_batches(records: bytes) -> list[tuple[bytes, BatchHeader]]:
    """The batches of a produce request's record set, validated."""
    batches, position = [], 0
    while position < len(records):
        header = read_header(records, position)
        batches.append((records[position:position + header.length], header))
        position += header.length
    if not batches:
        raise InvalidBatch("empty record set")
    return batches


def batch_spans(records: bytes | memoryview) -> list[tuple[int, int, bool, int]]:
    """(first offset, last offset, transactional or control, record count) of each whole batch of a fetched record
    set, read from the batch headers alone (no CRC, no records): what an observer of the wire needs. A count below
    the batch's offsets says records were removed from it (compaction keeps a batch's offsets). A last batch cut
    short (a fetch answer may end inside one) is left out."""
    spans, position = [], 0
    while len(records) - position >= BATCH_HEADER_BYTES:
        base_offset, batch_length = struct.unpack_from(">qi", records, position)
        length = batch_length + LENGTH_PREFIX_BYTES
        if batch_length < BATCH_HEADER_BYTES - LENGTH_PREFIX_BYTES or len(records) - position < length:
            break
        (attributes,) = struct.unpack_from(">h", records, position + ATTRIBUTES_OFFSET)
        (last_delta,) = struct.unpack_from(">i", records, position + LAST_OFFSET_DELTA_OFFSET)
        (count,) = struct.unpack_from(">i", records, position + RECORDS_COUNT_OFFSET)
        spans.append((base_offset, base_offset + last_delta, bool(attributes & (TRANSACTIONAL | CONTROL)), count))
        position += length
    return spans
