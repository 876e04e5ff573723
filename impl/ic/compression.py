"""Bounded decompression of record batch payloads, for the codecs Kafka uses (attributes bits 0-2).

    decompress(codec, data, limit_bytes) -> bytes     # raises BatchDecodeError

One maintained library, cramjam (Rust bindings, used by python-snappy and
fastparquet), covers all four: gzip, snappy, lz4 (the LZ4 frame format of v2
batches) and zstd. Snappy comes raw from librdkafka and in xerial framing
(`\\x82SNAPPY\\x00`, then length-prefixed raw chunks) from the Java client; both
are read. Nothing is ever decompressed past `limit_bytes` (the broker's
`max.bytes.fetcher.filtering`): a batch that would is refused with
FilterLimitExceeded, so a small compressed batch cannot make the broker
allocate gigabytes.
"""

from __future__ import annotations

import struct

import cramjam

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER_BYTES = 16   # magic, version int32, compatible version int32
_FIRST_GUESS_RATIO = 8


class BatchDecodeError(Exception):
    """A batch that cannot be read (Kafka's CORRUPT_MESSAGE)."""


class FilterLimitExceeded(Exception):
    """A batch that would decompress past max.bytes.fetcher.filtering."""


def decompress(codec: int, data: bytes, limit_bytes: int) -> bytes:
    try:
        if codec == SNAPPY:
            return _snappy(data, limit_bytes)
        if codec in (GZIP, LZ4, ZSTD):
            return _bounded(getattr(cramjam, CODEC_NAMES[codec]), data, limit_bytes)
    except cramjam.DecompressionError as error:
        raise BatchDecodeError(f"{CODEC_NAMES[codec]} payload does not decompress: {error}") from None
    raise BatchDecodeError(f"unknown compression codec {codec}")


def _bounded(module, data: bytes, limit_bytes: int) -> bytes:
    """Decompress into a buffer that grows 8x per try up to the limit (at most twice the work)."""
    size = min(limit_bytes, max(64 * 1024, _FIRST_GUESS_RATIO * len(data)))
    while True:
        output = bytearray(size)
        try:
            written = module.decompress_into(data, output)
        except cramjam.DecompressionError as error:
            if "whole buffer" not in str(error):
                raise
            if size >= limit_bytes:
                raise FilterLimitExceeded(f"batch decompresses past {limit_bytes} bytes") from None
            size = min(limit_bytes, size * _FIRST_GUESS_RATIO)
            continue
        return bytes(output[:written])


def _snappy(data: bytes, limit_bytes: int) -> bytes:
    if not data.startswith(_XERIAL_MAGIC):
        return _snappy_raw(data, limit_bytes)
    chunks, position, total = [], _XERIAL_HEADER_BYTES, 0
    while position < len(data):
        if position + 4 > len(data):
            raise BatchDecodeError("xerial snappy chunk length cut short")
        (length,) = struct.unpack_from(">i", data, position)
        if length < 0 or position + 4 + length > len(data):
            raise BatchDecodeError("xerial snappy chunk runs past the payload")
        chunk = _snappy_raw(data[position + 4:position + 4 + length], limit_bytes - total)
        chunks.append(chunk)
        total += len(chunk)
        position += 4 + length
    return b"".join(chunks)


def _snappy_raw(data: bytes, limit_bytes: int) -> bytes:
    if cramjam.snappy.decompress_raw_len(data) > limit_bytes:
        raise FilterLimitExceeded(f"batch decompresses past {limit_bytes} bytes")
    return bytes(cramjam.snappy.decompress_raw(data))
