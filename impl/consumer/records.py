"""Records out of Fetch answers: v2 record batches, validated, decoded one batch at a time.

    for batch in split_batches(data):                 # whole batches; a batch cut off at the end is left out
        last_offset(batch)                            # its last offset, without decoding it
        decode_batch("orders", 0, batch)              # -> [ConsumerRecord, ...]

Batch headers are checked as the broker checks produced ones (CRC-32C, magic 2:
impl/wire/batches.py read_header); a batch that fails raises KafkaError
CORRUPT_MESSAGE. Uncompressed and gzip batches are decoded (zlib is in every
Python); snappy, lz4 and zstd raise UNSUPPORTED_COMPRESSION_TYPE rather than
return nothing. Control batches (transaction markers) hold no records. Record
fields are read with kio's varint readers; timestamps keep their milliseconds.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from kio.serial.readers import read_signed_varint, read_signed_varlong

from kipcheck.impl.consumer.errors import KafkaError
from kipcheck.impl.wire.batches import (
    ATTRIBUTES_OFFSET, BASE_TIMESTAMP_OFFSET, BATCH_HEADER_BYTES, COMPRESSION_MASK, CONTROL, LENGTH_PREFIX_BYTES,
    InvalidBatch, read_header)
from kipcheck.model.errors import Error

NO_COMPRESSION, GZIP = 0, 1
COMPRESSION_NAMES = {2: "snappy", 3: "lz4", 4: "zstd"}


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


def decode_batch(topic: str, partition: int, batch: memoryview) -> list[ConsumerRecord]:
    try:
        header = read_header(batch)
    except InvalidBatch as error:
        raise KafkaError(Error.CORRUPT_MESSAGE, f"{topic}:{partition}: {error}") from None
    (attributes,) = struct.unpack_from(">h", batch, ATTRIBUTES_OFFSET)
    if attributes & CONTROL:
        return []
    (base_offset,) = struct.unpack_from(">q", batch, 0)
    (base_timestamp,) = struct.unpack_from(">q", batch, BASE_TIMESTAMP_OFFSET)
    body = bytes(batch[BATCH_HEADER_BYTES:])
    compression = attributes & COMPRESSION_MASK
    if compression == GZIP:
        body = zlib.decompress(body, 16 + zlib.MAX_WBITS)
    elif compression != NO_COMPRESSION:
        name = COMPRESSION_NAMES.get(compression, f"codec {compression}")
        raise KafkaError(Error.UNSUPPORTED_COMPRESSION_TYPE, f"{topic}:{partition} at offset {base_offset}: {name}")
    try:
        return _records(topic, partition, base_offset, base_timestamp, body, header.record_count)
    except (ValueError, IndexError, struct.error) as error:
        raise KafkaError(Error.CORRUPT_MESSAGE, f"{topic}:{partition} at offset {base_offset}: {error}") from None


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
