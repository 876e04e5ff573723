"""Key-range filtering of raw v2 record batches, for a Fetch that carries KeyRanges (spec KR-10).

    data = partition_log.read(offset, max_bytes)        # whole batches, as stored (impl/broker/log.py)
    kept = filter_batches(data, [(0, 2**62 - 1)], limit_bytes=104857600, cache=cache, cache_key=("orders", 0))

Each batch is answered with the records whose key hash (model/key_hash.py,
KR-9) lies in the requested ranges:
- all records kept: the batch as stored, compressed or not (zero copies of work);
- some or none kept: a new uncompressed batch with the same base offset, last
  offset delta, timestamps, producer fields and partition leader epoch, the kept
  records' bytes copied unchanged (their deltas stay valid), a new record
  count and CRC-32C. A batch that keeps nothing is still sent, with no
  records: its last offset delta moves the consumer past it, as Kafka's log
  cleaner does with emptied batches;
- control batches (transaction markers) as stored: they carry no user key.
Records are read through impl/wire/records.read_records (a bounded streaming
decompressor for compressed batches). A batch costs its decompressed bytes
plus RECORD_OVERHEAD_BYTES a record decoded (what the decoded records hold
in memory, and what decoding them costs in time); a batch that would cost
more than `limit_bytes` (`max.bytes.fetcher.filtering`) raises
FilterLimitExceeded before it is decoded, as soon as its record count or its
bytes show it. A batch that cannot be read raises BatchDecodeError
(CORRUPT_MESSAGE). The batch header fields are written with kio's serial
writers. The function is pure but for the cache, which is thread-safe: the
broker runs it on a worker thread.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Iterable

from crc32c import crc32c
from kio.serial.writers import write_int16, write_int32, write_int8, write_uint32
from kio.static.primitive import i8, i16, i32, u32

from kipcheck.impl.ic.key_range_cache import RECORD_OVERHEAD_BYTES, KeyRangeCache
from kipcheck.impl.wire.batches import (
    ATTRIBUTES_OFFSET, BATCH_HEADER_BYTES, COMPRESSION_MASK, CONTROL, LAST_OFFSET_DELTA_OFFSET, RECORDS_COUNT_OFFSET,
    InvalidBatch, read_header)
from kipcheck.impl.wire.compression import Undecompressable
from kipcheck.impl.wire.records import RecordsTooLarge, read_records
from kipcheck.model.key_hash import HASH_MAX, record_hash


class BatchDecodeError(Exception):
    """A batch that cannot be read (Kafka's CORRUPT_MESSAGE)."""


class FilterLimitExceeded(Exception):
    """A batch whose filtering would cost more than max.bytes.fetcher.filtering."""


@dataclass(frozen=True, slots=True)
class Record:
    offset: int
    key_hash: int
    raw: bytes                 # the record as stored: length varint, then its fields


def filter_batches(data: bytes, ranges: Iterable[tuple[int, int]], *, limit_bytes: int,
                   cache: KeyRangeCache | None = None, cache_key: tuple | None = None) -> bytes:
    ranges = sorted((low, high) for low, high in ranges)
    if ranges == [(0, HASH_MAX)]:
        return data
    out, position, view = [], 0, memoryview(data)
    while position < len(data):
        try:
            header = read_header(view, position)
        except InvalidBatch as error:
            raise BatchDecodeError(str(error)) from None
        batch = data[position:position + header.length]
        out.append(_filter_batch(batch, ranges, limit_bytes, cache, cache_key))
        position += header.length
    return b"".join(out)


def _filter_batch(batch: bytes, ranges: list[tuple[int, int]], limit_bytes: int,
                  cache: KeyRangeCache | None, cache_key: tuple | None) -> bytes:
    if batch[ATTRIBUTES_OFFSET + 1] & CONTROL:
        return batch
    base_offset = int.from_bytes(batch[:8], "big", signed=True)
    records = cache.take((cache_key, base_offset), ranges) if cache is not None else None
    served_before = records is not None
    if records is None:
        records = decode_records(batch, limit_bytes)
    kept, rest = [], []
    for record in records:
        (kept if any(low <= record.key_hash <= high for low, high in ranges) else rest).append(record)
    if cache is not None:
        # The seed's cache: what this fetch did not take waits for the other sharers' fetches.
        cache.put((cache_key, base_offset), rest, ranges)
    if len(kept) == int.from_bytes(batch[RECORDS_COUNT_OFFSET:BATCH_HEADER_BYTES], "big") and not served_before:
        return batch
    return encode_batch(batch, kept)


def decode_records(batch: bytes, limit_bytes: int) -> list[Record]:
    """Every record of a (non-control) batch with its offset and key hash; FilterLimitExceeded past
    `limit_bytes` (module docstring), BatchDecodeError if it cannot be read."""
    base_offset = int.from_bytes(batch[:8], "big", signed=True)
    count = int.from_bytes(batch[RECORDS_COUNT_OFFSET:BATCH_HEADER_BYTES], "big", signed=True)
    if count * RECORD_OVERHEAD_BYTES > limit_bytes:
        raise FilterLimitExceeded(f"a batch of {count} records costs more than {limit_bytes} bytes to filter")
    try:
        return [Record(base_offset + delta, record_hash(key, base_offset + delta), raw)
                for delta, key, raw in read_records(batch, count, limit_bytes - count * RECORD_OVERHEAD_BYTES)]
    except RecordsTooLarge as error:
        raise FilterLimitExceeded(str(error)) from None
    except (InvalidBatch, Undecompressable) as error:
        raise BatchDecodeError(f"unreadable record: {error}") from None


def encode_batch(batch: bytes, records: list[Record]) -> bytes:
    """`batch` with only `records`, uncompressed: same offsets span, timestamps and producer fields."""
    after_crc = io.BytesIO()
    write_int16(after_crc, i16(int.from_bytes(batch[ATTRIBUTES_OFFSET:LAST_OFFSET_DELTA_OFFSET], "big") & ~COMPRESSION_MASK))
    after_crc.write(batch[LAST_OFFSET_DELTA_OFFSET:RECORDS_COUNT_OFFSET])  # lastOffsetDelta .. baseSequence, unchanged
    write_int32(after_crc, i32(len(records)))
    for record in records:
        after_crc.write(record.raw)
    body = after_crc.getvalue()
    out = io.BytesIO()
    out.write(batch[:8])                                           # baseOffset
    write_int32(out, i32(len(body) + 9))                           # batchLength: from the leader epoch on
    out.write(batch[12:16])                                        # partitionLeaderEpoch
    write_int8(out, i8(2))
    write_uint32(out, u32(crc32c(body)))
    out.write(body)
    return out.getvalue()
