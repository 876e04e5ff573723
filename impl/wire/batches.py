"""Record batches (v2), as producers send them and logs keep them: framing, header, validation, markers.

    header = read_header(data, position)      # BatchHeader of the batch at `position`; InvalidBatch if it is not
    for batch, header in split_batches(records): ...   # a produce request's record set, every batch validated
    batch_spans(records)                      # [(first, last, transactional or control)]: offsets only, unvalidated
    marker_batch(producer_id, producer_epoch, COMMIT)   # a transaction marker, as Kafka writes one

A batch is valid when its length fits the bytes given, its magic is 2 and its
CRC-32C matches; a control batch also needs a control record key. The broker
validates produced batches with these, the consumer fetched ones, and
individual commit's key-range filter the batches it rewrites.
"""

from __future__ import annotations

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

BATCH_HEADER_BYTES = 61  # through recordsCount, the fixed part of a v2 batch
LENGTH_PREFIX_BYTES = 12  # baseOffset + batchLength
MAGIC_OFFSET, CRC_OFFSET, ATTRIBUTES_OFFSET, LAST_OFFSET_DELTA_OFFSET = 16, 17, 21, 23
BASE_TIMESTAMP_OFFSET, RECORDS_COUNT_OFFSET = 27, 57
CRC_COVERS_FROM = 21
COMPRESSION_MASK, TRANSACTIONAL, CONTROL = 0x07, 0x10, 0x20  # batch attribute bits
ABORT, COMMIT = 0, 1  # control record types (Kafka's ControlRecordType)


class InvalidBatch(Exception):
    """A produced batch that is not a valid v2 record batch (Kafka's CORRUPT_MESSAGE)."""


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
    (crc,) = struct.unpack_from(">I", data, position + CRC_OFFSET)
    if crc32c.crc32c(bytes(data[position + CRC_COVERS_FROM:position + length])) != crc:
        raise InvalidBatch("record batch CRC-32C mismatch")
    last_delta, _, max_timestamp, producer_id, producer_epoch, base_sequence, count = struct.unpack_from(
        ">iqqqhii", data, position + LAST_OFFSET_DELTA_OFFSET)
    if last_delta < 0 or count < 0:
        raise InvalidBatch("negative record count")
    (attributes,) = struct.unpack_from(">h", data, position + ATTRIBUTES_OFFSET)
    control_type = _control_type(data, position, length) if attributes & CONTROL else None
    return BatchHeader(length, last_delta, max_timestamp, producer_id, producer_epoch, base_sequence, count,
                       attributes, control_type)


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


def batch_spans(records: bytes | memoryview) -> list[tuple[int, int, bool]]:
    """(first offset, last offset, transactional or control) of each whole batch of a fetched record set, read
    from the batch headers alone (no CRC, no records): what an observer of the wire needs. A last batch cut
    short (a fetch answer may end inside one) is left out."""
    spans, position = [], 0
    while len(records) - position >= BATCH_HEADER_BYTES:
        base_offset, batch_length = struct.unpack_from(">qi", records, position)
        length = batch_length + LENGTH_PREFIX_BYTES
        if batch_length < BATCH_HEADER_BYTES - LENGTH_PREFIX_BYTES or len(records) - position < length:
            break
        (attributes,) = struct.unpack_from(">h", records, position + ATTRIBUTES_OFFSET)
        (last_delta,) = struct.unpack_from(">i", records, position + LAST_OFFSET_DELTA_OFFSET)
        spans.append((base_offset, base_offset + last_delta, bool(attributes & (TRANSACTIONAL | CONTROL))))
        position += length
    return spans
