"""Records out of Fetch answers: v2 record batches, validated, decoded one batch at a time.

    for batch in split_batches(data):                 # whole batches; a batch cut off at the end is left out
        last_offset(batch)                            # its last offset, without decoding it
        decode_batch("orders", 0, batch)              # -> [ConsumerRecord, ...]
        record_offsets("orders", 0, batch)            # -> [offset, ...]: the records' offsets alone, cheaply
        decode_batch("orders", 0, batch, receive_message_max_bytes=1 << 20)   # a tighter bound on decompression

Batch headers are checked as the broker checks produced ones (CRC-32C, magic 2:
impl/wire/batches.py read_header); a batch that fails raises KafkaError
CORRUPT_MESSAGE. Every codec Kafka has is decoded (gzip, snappy in xerial
framing or raw, lz4 frames, zstd) through the broker's own decompressor,
impl/wire/compression.py: a payload it cannot decompress is CORRUPT_MESSAGE,
a compression type Kafka does not have (5 to 7) UNSUPPORTED_COMPRESSION_TYPE.
A batch's records are decompressed up to `receive_message_max_bytes`
(librdkafka's receive.message.max.bytes, 100 MB, which caps what its
decompressors return too): a batch that decompresses past it raises
MESSAGE_TOO_LARGE, decompression stopping at the first chunk (CHUNK_BYTES at
most) beyond it, so a compression bomb costs bounded time and memory.
Control batches (transaction markers) hold no records. Record fields are read
with kio's varint readers; timestamps keep their milliseconds.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kio.serial.errors import DecodeError
from kio.serial.readers import read_signed_varint, read_signed_varlong

from kipcheck.impl.consumer.errors import KafkaError
from kipcheck.impl.wire.batches import (
    BASE_TIMESTAMP_OFFSET, BATCH_HEADER_BYTES, COMPRESSION_MASK, CONTROL, LENGTH_PREFIX_BYTES, BatchHeader,
    InvalidBatch, read_header)
from kipcheck.impl.wire.compression import CODEC_NAMES, Undecompressable, decompressed_chunks
from kipcheck.impl.wire.records import CHUNK_BYTES
from kipcheck.model.errors import Error

RECEIVE_MESSAGE_MAX_BYTES = 100000000  # librdkafka's default receive.message.max.bytes
UNREADABLE = (ValueError, IndexError, struct.error, DecodeError)  # records that do not read: CORRUPT_MESSAGE


@dataclass(frozen=True, slots=True)
class ConsumerRecord:
    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


def split_batches(data: bytes) -> list[memoryview]:
    """The whole batches in `data` (a Fetch may end with a batch cut short, which is left out)."""
    batches, position, view = [], 0, memoryview(data)
    while len(data) - position >= LENGTH_PREFIX_BYTES:
        (length,) = struct.unpack_from(">i", data, position + 8)
        end = position + LENGTH_PREFIX_BYTES + length
        if length < BATCH_HEADER_BYTES - LENGTH_PREFIX_BYTES or end > len(data):
            break
        batches.append(view[position:end])
        position = end
    return batches


def last_offset(batch: memoryview) -> int:
    base_offset, _, _, _, _, _, last_delta = struct.unpack_from(">qiibIhi", batch, 0)
    return base_offset + last_delta


def decode_batch(topic: str, partition: int, batch: memoryview,
                 receive_message_max_bytes: int = RECEIVE_MESSAGE_MAX_BYTES) -> list[ConsumerRecord]:
    header, body = _opened(topic, partition, batch, receive_message_max_bytes)
    if header.attributes & CONTROL:
        return []
    base_offset, base_timestamp = _bases(batch)
    try:
        return _records(topic, partition, base_offset, base_timestamp, body, header.record_count)
    except UNREADABLE as error:
        raise KafkaError(Error.CORRUPT_MESSAGE, f"{topic}:{partition} at offset {base_offset}: {error}") from None


def record_offsets(topic: str, partition: int, batch: memoryview,
                   receive_message_max_bytes: int = RECEIVE_MESSAGE_MAX_BYTES) -> list[int]:
    """The offsets of a data batch's records, as decode_batch gives them, read from each record's length and offset
    delta alone (what an observer of the wire needs, several times cheaper: keys, values and headers are stepped
    over, not read); none for a control batch. The same KafkaError as decode_batch for a batch that does not read."""
    header, body = _opened(topic, partition, batch, receive_message_max_bytes)
    if header.attributes & CONTROL:
        return []
    base_offset, _ = _bases(batch)
    offsets, position = [], 0
    try:
        for _ in range(header.record_count):
            length, size = read_signed_varint(body, position)
            end = position + size + length
            position += size + 1  # attributes: unused in v2 records
            while body[position] & 0x80:  # the timestamp delta, a varlong, stepped over
                position += 1
            offset_delta, _ = read_signed_varint(body, position + 1)
            if length < 0 or end > len(body):
                raise ValueError(f"a record of {length} bytes runs past the end of its batch")
            offsets.append(base_offset + offset_delta)
            position = end
    except UNREADABLE as error:
        raise KafkaError(Error.CORRUPT_MESSAGE, f"{topic}:{partition} at offset {base_offset}: {error}") from None
    return offsets


def _opened(topic: str, partition: int, batch: memoryview, max_bytes: int) -> tuple[BatchHeader, bytes]:
    """The batch's checked header and its records' bytes, decompressed (none for a control batch: it holds no
    data records)."""
    try:
        header = read_header(batch)
    except InvalidBatch as error:
        raise KafkaError(Error.CORRUPT_MESSAGE, f"{topic}:{partition}: {error}") from None
    if header.attributes & CONTROL:
        return header, b""
    return header, _decompressed(f"{topic}:{partition} at offset {_bases(batch)[0]}", batch,
                                 header.attributes & COMPRESSION_MASK, max_bytes)


def _decompressed(where: str, batch: memoryview, codec: int, max_bytes: int) -> bytes:
    """The records' bytes of a data batch compressed with `codec`, held only up to `max_bytes`."""
    if codec not in CODEC_NAMES:
        raise KafkaError(Error.UNSUPPORTED_COMPRESSION_TYPE, f"{where}: compression type id {codec}")
    chunks, size = [], 0
    try:
        for chunk in decompressed_chunks(codec, bytes(batch[BATCH_HEADER_BYTES:]), CHUNK_BYTES):
            size += len(chunk)
            if size > max_bytes:
                raise KafkaError(Error.MESSAGE_TOO_LARGE, f"{where}: the batch's records ({CODEC_NAMES[codec]}) "
                                                          f"come to more than receive.message.max.bytes ({max_bytes})")
            chunks.append(chunk)
    except Undecompressable as error:
        raise KafkaError(Error.CORRUPT_MESSAGE, f"{where}: {CODEC_NAMES[codec]} payload does not decompress: "
                                                f"{error}") from None
    return b"".join(chunks)


def _bases(batch: memoryview) -> tuple[int, int]:
    """The batch's base offset and base timestamp."""
    (base_offset,) = struct.unpack_from(">q", batch, 0)
    (base_timestamp,) = struct.unpack_from(">q", batch, BASE_TIMESTAMP_OFFSET)
    return base_offset, base_timestamp


def _records(topic: str, partition: int, base_offset: int, base_timestamp: int, body: bytes,
             count: int) -> list[ConsumerRecord]:
    records, position = [], 0
    for _ in range(count):
        length, size = read_signed_varint(body, position)
        position += size
        end = position + length
        position += 1  # attributes: unused in v2 records
        timestamp_delta, size = read_signed_varlong(body, position)
        position += size
        offset_delta, size = read_signed_varint(body, position)
        position += size
        key, position = _bytes(body, position)
        value, position = _bytes(body, position)
        header_count, size = read_signed_varint(body, position)
        position += size
        headers = []
        for _ in range(header_count):
            name, position = _bytes(body, position)
            header_value, position = _bytes(body, position)
            headers.append(((name or b"").decode("utf-8", "replace"), header_value))
        if position != end:
            raise ValueError(f"a record's fields take {position - end + length} bytes, its length says {length}")
        records.append(ConsumerRecord(topic, partition, base_offset + offset_delta, base_timestamp + timestamp_delta,
                                      key, value, tuple(headers)))
    return records


def _bytes(body: bytes, position: int) -> tuple[bytes | None, int]:
    length, size = read_signed_varint(body, position)
    position += size
    if length < 0:
        return None, position
    if position + length > len(body):
        raise ValueError("a record field runs past the end of its batch")
    return body[position:position + length], position + length
