"""Record batch payloads decompressed as a stream, a bounded chunk at a time, for the codecs Kafka uses.

    for chunk in decompressed_chunks(codec, payload, chunk_bytes=1 << 20): ...   # raises Undecompressable

Each codec is read as Kafka's broker reads it (Compression.wrapForInput), and
no chunk is ever longer than `chunk_bytes`, so a small payload that expands
to gigabytes (a compression bomb) costs the reader time, never memory:
- gzip (1): zlib, member after member (GZIPInputStream reads concatenated
  members and ignores bytes after the last that are not a gzip header), each
  member's CRC-32 and length checked;
- snappy (2): xerial framing (`\\x82SNAPPY\\x00`, a version and a compatible
  version, then length-prefixed raw chunks) as the Java client writes it, or
  one raw block as librdkafka writes it (SnappyInputStream reads both). A raw
  block holds its decompressed length up front; snappy cannot expand a byte
  into more than RAW_SNAPPY_EXPANSION_MAX bytes, so a block claiming more is
  corrupt, and a block is decompressed whole;
- lz4 (3): one LZ4 frame (what follows its end mark is not read, as in
  Kafka's Lz4BlockInputStream) through python-lz4's frame decompressor, which
  checks every checksum the frame carries, after Kafka's frame rules
  (version 1, independent blocks, no reserved bits);
- zstd (4): through compression.zstd (backports.zstd before Python 3.14),
  frame after frame.
Codecs 5 to 7 do not exist. A payload that does not decompress raises
Undecompressable: Kafka answers its KafkaException ("Failed to decompress
record stream") UNKNOWN_SERVER_ERROR.
"""

from __future__ import annotations

import struct
import zlib
from typing import Iterator

import cramjam
import lz4.frame

try:
    from compression import zstd
except ImportError:  # before Python 3.14
    from backports import zstd

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
GZIP_MAGIC = b"\x1f\x8b"
XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER_BYTES = 16   # magic, version int32, compatible version int32
RAW_SNAPPY_EXPANSION_MAX = 22  # a 3-byte copy of 64 bytes is snappy's largest expansion
LZ4_MAGIC = b"\x04\x22\x4d\x18"
LZ4_VERSION, LZ4_INDEPENDENT_BLOCKS, LZ4_FLG_RESERVED, LZ4_BD_RESERVED = 0xC0, 0x20, 0x03, 0x8F


class Undecompressable(Exception):
    """A batch payload its codec cannot read (Kafka: "Failed to decompress record stream", UNKNOWN_SERVER_ERROR)."""


def decompressed_chunks(codec: int, payload: bytes, chunk_bytes: int) -> Iterator[bytes]:
    """The decompressed payload, in chunks of at most `chunk_bytes` (the payload itself for NONE)."""
    if codec == NONE:
        yield payload
        return
    try:
        if codec == GZIP:
            yield from _stream(_GzipMember, payload, chunk_bytes, zlib.error, lambda rest: rest[:2] == GZIP_MAGIC)
        elif codec == SNAPPY:
            yield from _snappy(payload, chunk_bytes)
        elif codec == LZ4:
            _check_lz4_header(payload)
            yield from _stream(lz4.frame.LZ4FrameDecompressor, payload, chunk_bytes, RuntimeError, lambda rest: False)
        elif codec == ZSTD:
            yield from _stream(zstd.ZstdDecompressor, payload, chunk_bytes, zstd.ZstdError, bool)
        else:
            raise Undecompressable(f"unknown compression type id {codec}")
    except cramjam.DecompressionError as error:
        raise Undecompressable(f"{CODEC_NAMES[codec]}: {error}") from None


def _stream(new_decompressor, payload: bytes, chunk_bytes: int, failure: type, more_frames) -> Iterator[bytes]:
    """One streaming decompressor per frame (gzip member, zstd frame), frames back to back while
    `more_frames(the bytes after a frame)` says another one follows."""
    data = payload
    while True:
        decompressor = new_decompressor()
        try:
            chunk = decompressor.decompress(data, max_length=chunk_bytes)
            while True:
                if chunk:
                    yield chunk
                if decompressor.eof or (not chunk and decompressor.needs_input):
                    break
                chunk = decompressor.decompress(b"", max_length=chunk_bytes)
        except failure as error:
            raise Undecompressable(f"{type(error).__name__}: {error}") from None
        if not decompressor.eof:
            raise Undecompressable("the compressed stream ends inside a frame")
        data = decompressor.unused_data
        if not more_frames(data):
            return


class _GzipMember:
    """zlib's decompressobj with the interface of the lz4 and zstd decompressors: the input it could not take
    for want of output room is kept and fed again."""

    def __init__(self):
        self._zlib = zlib.decompressobj(wbits=31)
        self._tail = b""

    def decompress(self, data: bytes, max_length: int) -> bytes:
        chunk = self._zlib.decompress(self._tail + data if data else self._tail, max_length)
        self._tail = self._zlib.unconsumed_tail
        return chunk

    @property
    def eof(self) -> bool:
        return self._zlib.eof

    @property
    def needs_input(self) -> bool:
        return not self._tail

    @property
    def unused_data(self) -> bytes:
        return self._zlib.unused_data


def _snappy(payload: bytes, chunk_bytes: int) -> Iterator[bytes]:
    if not payload.startswith(XERIAL_MAGIC):
        yield from _slices(_snappy_raw(payload), chunk_bytes)
        return
    position = XERIAL_HEADER_BYTES
    while position < len(payload):
        if position + 4 > len(payload):
            raise Undecompressable("xerial snappy chunk length cut short")
        (length,) = struct.unpack_from(">i", payload, position)
        if length < 0 or position + 4 + length > len(payload):
            raise Undecompressable("xerial snappy chunk runs past the payload")
        yield from _slices(_snappy_raw(payload[position + 4:position + 4 + length]), chunk_bytes)
        position += 4 + length


def _snappy_raw(block: bytes) -> bytes:
    claimed = cramjam.snappy.decompress_raw_len(block)
    if claimed > RAW_SNAPPY_EXPANSION_MAX * len(block):
        raise Undecompressable(f"a snappy block of {len(block)} bytes claims {claimed} decompressed")
    return bytes(cramjam.snappy.decompress_raw(block))


def _slices(data: bytes, chunk_bytes: int) -> Iterator[bytes]:
    for start in range(0, len(data), chunk_bytes):
        yield data[start:start + chunk_bytes]


def _check_lz4_header(payload: bytes) -> None:
    """Kafka's Lz4BlockInputStream refuses what its FLG and BD descriptors do not allow."""
    if len(payload) < 7 or not payload.startswith(LZ4_MAGIC):
        raise Undecompressable("not an LZ4 frame")
    flg, bd = payload[4], payload[5]
    if flg & LZ4_FLG_RESERVED or bd & LZ4_BD_RESERVED:
        raise Undecompressable("Reserved bits must be 0")
    if not flg & LZ4_INDEPENDENT_BLOCKS:
        raise Undecompressable("Dependent block stream is unsupported")
    if flg & LZ4_VERSION != 0x40:
        raise Undecompressable(f"Version {flg >> 6} is unsupported")
