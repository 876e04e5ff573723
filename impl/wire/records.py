"""The records inside a v2 batch, read as a stream: every field checked, nothing held longer than a chunk.

    check_records(batch, header, now_ms, timestamp_after_max_ms)   # Produce: raises InvalidRecord, InvalidTimestamps
    for offset, key, raw in read_records(batch): ...                  # key-range filtering: each record whole

A record (Kafka's DefaultRecord) is a varint length, then attributes, a
varlong timestamp delta, a varint offset delta, key and value (varint length,
-1 for null, then the bytes), a varint header count and the headers (a key
that may not be null, a value that may). The reader follows
DefaultRecord.readFrom and DefaultRecordBatch's iterator, and raises
InvalidRecord (Kafka's InvalidRecordException, INVALID_RECORD) where they
throw: a varint longer than 5 bytes (10 for a varlong), a length that runs
past the record, a negative header count or header key length, a record
whose fields do not add up to its length, fewer records than the batch
counts, or bytes after the last. Three rules go further than Kafka 4.2, which
stores such batches although librdkafka consumers cannot read them or read
wrong offsets (spec/kafka-findings.md, "The reference broker under attack"):
a compressed record's length is checked too (Kafka skips the fields of
compressed records without it), a null is -1 only (Kafka reads any negative
key or value length as null, librdkafka stops at it), and offset deltas must
run 0, 1, 2, ... (Kafka rewrites a compressed batch whose deltas do not, and
stores an uncompressed one as it came).

The payload is decompressed through compression.decompressed_chunks, CHUNK_BYTES
at a time; key and value bytes are skipped, not held, by check_records, so
checking a compression bomb costs time in proportion to its expansion and
memory in proportion to a chunk. read_records holds each record whole (the
filter copies the ones it keeps).
"""

from __future__ import annotations

import struct
from typing import Iterator

from kipcheck.impl.wire.batches import (
    ATTRIBUTES_OFFSET, BASE_TIMESTAMP_OFFSET, BATCH_HEADER_BYTES, COMPRESSION_MASK, BatchHeader, InvalidBatch,
    InvalidRecord)
from kipcheck.impl.wire.compression import decompressed_chunks
from kipcheck.model.errors import Error

CHUNK_BYTES = 1 << 20
VARINT_MAX_BYTES, VARLONG_MAX_BYTES = 5, 10
RECORD_ERRORS_MAX = 1000  # timestamp errors answered per batch (Kafka answers every one)


class InvalidTimestamps(InvalidBatch):
    """Records whose timestamps lie outside log.message.timestamp.before/after.max.ms (INVALID_TIMESTAMP);
    `record_errors`: (record index, message), as Kafka's ProduceResponse lists them."""

    def __init__(self, record_errors: list[tuple[int, str]]):
        super().__init__("One or more records have been rejected due to invalid timestamp", Error.INVALID_TIMESTAMP)
        self.record_errors = record_errors


class RecordsTooLarge(Exception):
    """read_records would hold more than the bytes it was allowed."""


class RecordStream:
    """The decompressed bytes of a batch, read forward; `position` counts from the first record."""

    def __init__(self, chunks: Iterator[bytes]):
        self._chunks = chunks
        self._data = b""
        self._at = 0          # the next byte in _data
        self._dropped = 0     # bytes before _data

    @property
    def position(self) -> int:
        return self._dropped + self._at

    def at_end(self) -> bool:
        return self._fill(1) == 0

    def varint(self) -> int:
        """A zigzag varint of at most 5 bytes, as Kafka's ByteUtils.readVarint (32-bit, wrapping)."""
        value = self._unsigned(VARINT_MAX_BYTES) & 0xFFFFFFFF
        return _signed32((value >> 1) ^ -(value & 1))

    def varlong(self) -> int:
        value = self._unsigned(VARLONG_MAX_BYTES) & 0xFFFFFFFFFFFFFFFF
        return (value >> 1) ^ -(value & 1)

    def byte(self) -> int:
        if self._fill(1) < 1:
            raise InvalidRecord("Incorrect declared batch size, premature EOF reached")
        self._at += 1
        return self._data[self._at - 1]

    def take(self, count: int) -> bytes:
        """The next `count` bytes, held (the caller bounds `count`)."""
        if self._fill(count) < count:
            raise InvalidRecord("Incorrect declared batch size, premature EOF reached")
        self._at += count
        return self._data[self._at - count:self._at]

    def skip(self, count: int) -> None:
        """Step over `count` bytes, a chunk at a time, holding none of them."""
        while count > 0:
            available = len(self._data) - self._at
            if available == 0 and self._fill(1) == 0:
                raise InvalidRecord("Incorrect declared batch size, premature EOF reached")
            step = min(count, len(self._data) - self._at)
            self._at += step
            count -= step

    def _unsigned(self, max_bytes: int) -> int:
        data, at = self._data, self._at
        if at < len(data) and data[at] < 0x80:  # the usual one-byte varint
            self._at = at + 1
            return data[at]
        self._fill(max_bytes)
        value = 0
        for index in range(max_bytes):
            byte = self.byte()
            value |= (byte & 0x7F) << (7 * index)
            if byte < 0x80:
                return value
        raise InvalidRecord("Found invalid record structure: varint too long")

    def _fill(self, count: int) -> int:
        """Try to have `count` bytes ahead; the bytes ahead (fewer only at the end of the stream)."""
        available = len(self._data) - self._at
        if available >= count:
            return available
        parts = [self._data[self._at:]]
        self._dropped += self._at
        while available < count:
            chunk = next(self._chunks, None)
            if chunk is None:
                break
            parts.append(chunk)
            available += len(chunk)
        self._data, self._at = b"".join(parts), 0
        return available


def _signed32(value: int) -> int:
    return value - (1 << 32) if value >= 1 << 31 else value


def records_stream(batch: bytes) -> RecordStream:
    codec = batch[ATTRIBUTES_OFFSET + 1] & COMPRESSION_MASK
    return RecordStream(decompressed_chunks(codec, batch[BATCH_HEADER_BYTES:], CHUNK_BYTES))


def check_records(batch: bytes, header: BatchHeader, now_ms: int, timestamp_after_max_ms: int,
                  timestamp_before_max_ms: int) -> None:
    """Read every record of a produced batch (module docstring); InvalidRecord, InvalidTimestamps or
    compression.Undecompressable if Kafka would refuse it."""
    stream = records_stream(batch)
    (base_timestamp,) = struct.unpack_from(">q", batch, BASE_TIMESTAMP_OFFSET)
    lowest, highest = now_ms - timestamp_before_max_ms, now_ms + timestamp_after_max_ms
    errors: list[tuple[int, str]] = []
    for index in range(header.record_count):
        timestamp_delta, offset_delta = _record_fields(stream, index)
        timestamp = base_timestamp + timestamp_delta
        if not lowest <= timestamp <= highest and len(errors) < RECORD_ERRORS_MAX:
            errors.append((index, f"Timestamp {timestamp} of message with offset {offset_delta} is out of range. "
                                  f"The timestamp should be within [{lowest}, {highest}]"))
    if not stream.at_end():
        raise InvalidRecord("Incorrect declared batch size, records still remaining in file")
    if errors:
        raise InvalidTimestamps(errors)


def _record_fields(stream: RecordStream, index: int) -> tuple[int, int]:
    """Step over one record, checking its structure; its (timestamp delta, offset delta)."""
    length = stream.varint()
    start = stream.position
    end = start + length
    stream.byte()  # attributes: unused in v2
    timestamp_delta = stream.varlong()
    offset_delta = stream.varint()
    if offset_delta != index:
        raise InvalidRecord(f"Record {index} has offset delta {offset_delta}: the deltas of a batch run 0, 1, 2, ...")
    for _ in range(2):  # key, value
        _skip_within(stream, stream.varint(), end)
    headers = stream.varint()
    if headers < 0:
        raise InvalidRecord(f"Found invalid number of record headers {headers}")
    if headers > end - stream.position:
        raise InvalidRecord(f"Found invalid number of record headers. {headers} is larger than the remaining size "
                            f"of the record")
    for _ in range(headers):
        key_length = stream.varint()
        if key_length < 0:
            raise InvalidRecord(f"Invalid negative header key size {key_length}")
        _skip_within(stream, key_length, end)
        _skip_within(stream, stream.varint(), end)
    if stream.position - start != length:
        raise InvalidRecord(f"Invalid record size: expected to read {length} bytes in record payload, but instead "
                            f"read {stream.position - start}")
    return timestamp_delta, offset_delta


def _skip_within(stream: RecordStream, length: int, end: int) -> None:
    """Step over a nullable key, value or header value of `length` bytes inside a record ending at `end`."""
    if length < -1:
        raise InvalidRecord(f"Invalid negative length {length}: only -1 stands for null")
    if length > end - stream.position:
        raise InvalidRecord("Found invalid record structure: a field runs past its record")
    if length > 0:
        stream.skip(length)


def read_records(batch: bytes, count: int, limit_bytes: int) -> Iterator[tuple[int, bytes | None, bytes]]:
    """(offset delta, key, the record's bytes: its length varint first) of each record of a batch that
    check_records accepted; RecordsTooLarge before the records read would pass `limit_bytes` decompressed."""
    stream = records_stream(batch)
    for _ in range(count):
        length = stream.varint()
        if stream.position + length > limit_bytes:
            raise RecordsTooLarge(f"the records decompress past {limit_bytes} bytes")
        body = stream.take(length)
        fields = RecordStream(iter((body,)))
        fields.byte()
        fields.varlong()
        offset_delta = fields.varint()
        key_length = fields.varint()
        yield offset_delta, fields.take(key_length) if key_length >= 0 else None, varint(length) + body


def varint(value: int) -> bytes:
    """A zigzag varint, as Kafka's ByteUtils.writeVarint writes it."""
    value = ((value << 1) ^ (value >> 31)) & 0xFFFFFFFF
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
