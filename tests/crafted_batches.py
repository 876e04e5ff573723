"""Record batches crafted byte by byte, well formed or not, with a correct CRC: what a hostile producer sends.

    payload = record(0, key=b"k", value=b"v") + record(1, key=b"k", value=b"w")
    data = batch(payload, count=2, codec=ZSTD)               # one v2 batch, compressed, CRC-32C right
    for name, data in malformed_batches(codec): ...          # every malformed case, inside a CRC-valid batch

Records are written as Kafka's DefaultRecord lays them out (a varint length,
attributes, varlong timestamp delta, varint offset delta, key and value with
varint lengths, a varint header count and the headers), any field replaceable
by a lie. `batch` compresses the records with the codec asked (gzip, raw
snappy as librdkafka writes it, the LZ4 frame format, zstd) and computes the
header's CRC-32C, so the broker's only way to see the lie is to read the
records. Used by the record-level tests, the record-level fuzz and
bench/bench_attacks.py.
"""

from __future__ import annotations

import io
import struct

import cramjam
import crc32c
from kio.serial.writers import write_signed_varlong

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODECS = (NONE, GZIP, SNAPPY, LZ4, ZSTD)
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
TRANSACTIONAL, CONTROL = 0x10, 0x20
BASE_TIMESTAMP_MS = 1_767_225_600_000  # 2026-01-01


def varint(value: int) -> bytes:
    """A zigzag varlong (Kafka's ByteUtils.writeVarlong, written by kio: not by the broker's own code)."""
    buffer = io.BytesIO()
    write_signed_varlong(buffer, value)
    return buffer.getvalue()


def record(offset_delta: int, key: bytes | None = b"k", value: bytes | None = b"v",
           headers: tuple[tuple[bytes, bytes | None], ...] = (), *, length: int | None = None,
           key_length: int | None = None, header_count: int | None = None, timestamp_delta: int = 0) -> bytes:
    """One record; `length`, `key_length` and `header_count` replace the true values by a lie."""
    body = bytearray(b"\x00")  # attributes
    body += varint(timestamp_delta) + varint(offset_delta)
    true_key_length = -1 if key is None else len(key)
    body += varint(true_key_length if key_length is None else key_length) + (key or b"")
    body += varint(-1 if value is None else len(value)) + (value or b"")
    body += varint(len(headers) if header_count is None else header_count)
    for header_key, header_value in headers:
        body += varint(len(header_key)) + header_key + varint(-1 if header_value is None else len(header_value))
        body += header_value or b""
    return varint(len(body) if length is None else length) + bytes(body)


def compress(codec: int, payload: bytes) -> bytes:
    if codec == NONE:
        return payload
    if codec == SNAPPY:
        return bytes(cramjam.snappy.compress_raw(payload))
    if codec == LZ4:  # independent blocks, as Kafka's Lz4BlockOutputStream and librdkafka write them
        compressor = cramjam.lz4.Compressor(block_linked=False)
        compressor.compress(payload)
        return bytes(compressor.finish())
    return bytes(getattr(cramjam, CODEC_NAMES[codec]).compress(payload))


def batch(payload: bytes, count: int, *, last_offset_delta: int | None = None, codec: int = NONE,
          producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1, attributes: int = 0,
          base_offset: int = 0, compressed: bytes | None = None) -> bytes:
    """A v2 batch of the records in `payload` (compressed by `codec`, or the bytes given as `compressed`)."""
    last = count - 1 if last_offset_delta is None else last_offset_delta
    data = compress(codec, payload) if compressed is None else compressed
    after_crc = struct.pack(">hiqqqhii", attributes | codec, last, BASE_TIMESTAMP_MS, BASE_TIMESTAMP_MS,
                            producer_id, producer_epoch, base_sequence, count) + data
    after_length = struct.pack(">ibI", 0, 2, crc32c.crc32c(after_crc)) + after_crc
    return struct.pack(">qi", base_offset, len(after_length)) + after_length


def good_records(count: int, value_bytes: int = 8) -> bytes:
    return b"".join(record(index, key=b"key-%d" % index, value=b"v" * value_bytes) for index in range(count))


def malformed_batches(codec: int) -> list[tuple[str, bytes]]:
    """(name, batch) for each way a CRC-valid batch can lie about its records, compressed by `codec`."""
    good = good_records(3)
    cases = [
        ("header count 2^31-1", record(0, header_count=2**31 - 1) + record(1) + record(2), 3),
        ("record length 2^31-1", record(0, length=2**31 - 1) + record(1) + record(2), 3),
        ("negative header key length",
         record(0, headers=((b"", b"x"),)).replace(b"\x02\x00\x02x", b"\x02\x05\x02x") + record(1) + record(2), 3),
        ("negative header count", record(0, header_count=-2) + record(1) + record(2), 3),
        ("record length short by one", record(0, length=len(record(0)) - 2) + record(1) + record(2), 3),
        ("record length long by one", record(0, length=len(record(0))) + record(1) + record(2), 3),
        ("junk after the last record", good + b"\x00junk", 3),
        ("fewer records than counted", good, 4),
        ("records cut inside the last one", good[:-3], 3),
    ]
    crafted = [(name, batch(payload, count, codec=codec)) for name, payload, count in cases]
    return crafted + [
        ("count disagrees with the last offset delta", batch(good, 3, last_offset_delta=5, codec=codec)),
        ("count of 0", batch(b"", 0, last_offset_delta=0, codec=codec)),
        ("negative count", batch(good, -1, last_offset_delta=2, codec=codec)),
    ]
