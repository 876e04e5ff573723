"""Key ranges: which of a partition's k hashed key ranges a record belongs to.

The hash is Kafka's default partitioner hash, `Utils.toPositive(Utils.murmur2(key))`
over the serialized key bytes: 31 bits. The hash space of the cooperative
assignor (spec/key-range-assign.md) is [0, 2^63 - 1]; a 31-bit hash is placed in
it by `hash << 32`, so the k equal ranges of that space are the k equal ranges
of the 31-bit hash, and range i of k holds the keys with `hash * k >> 31 == i`.

A null key has no hash. Records without a key carry no per-key order to keep,
so they are spread by offset: range `offset % k`. Every record falls in
exactly one range of k, so the k tasks of a partition together read each of
its records once.

This is the project's only copy of murmur2 in the connector; it is meant to
be the one in kipcheck.model.key_hash once that module exists.
"""

from __future__ import annotations

HASH_BITS = 31  # Utils.toPositive keeps 31 bits
HASH_SPACE_SHIFT = 63 - HASH_BITS  # 31 bits placed in the assignor's [0, 2^63 - 1]
_MASK = 0xFFFFFFFF
_SEED, _M, _R = 0x9747B28C, 0x5BD1E995, 24


def murmur2(data: bytes) -> int:
    """Kafka's Utils.murmur2 as an unsigned 32-bit value (Java returns the same bits as a signed int)."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    for index in range(0, length - length % 4, 4):
        k = int.from_bytes(data[index:index + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> _R
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = length - length % 4
    extra = length % 4
    if extra == 3:
        h ^= data[tail + 2] << 16
    if extra >= 2:
        h ^= data[tail + 1] << 8
    if extra >= 1:
        h ^= data[tail]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h


def key_hash(key: bytes) -> int:
    """Kafka's default partitioner hash of a serialized key: toPositive(murmur2(key)), 0 .. 2^31 - 1."""
    return murmur2(key) & 0x7FFFFFFF


def key_range_of(key: bytes | None, offset: int, ranges: int) -> int:
    """The index (0 .. ranges - 1) of the key range that holds a record with this key and offset."""
    if key is None:
        return offset % ranges
    return (key_hash(key) * ranges) >> HASH_BITS


def hash_space_bounds(index: int, ranges: int) -> tuple[int, int]:
    """[lo, hi] of key range `index` of `ranges` in the assignor's hash space [0, 2^63 - 1]."""
    width = 1 << HASH_BITS
    first = -(-index * width // ranges)  # the lowest 31-bit hash h with h * ranges >> 31 == index
    last = -(-(index + 1) * width // ranges) - 1
    return first << HASH_SPACE_SHIFT, ((last + 1) << HASH_SPACE_SHIFT) - 1
