"""The key hash of the key-range proposal (seed 000), in one place for the model, the broker and the consumer.

Clause ids refer to spec/key-range-assign.md (KR-9, KR-10). The seed hashes
keys "to a space of [0, Long.MAX]" without naming the hash; kipcheck uses
Kafka's default partitioner hash, so a key's share is computed exactly as its
partition is:

- `murmur2(data) -> int`: Kafka's `Utils.murmur2`, a signed 32-bit result.
- `to_positive(value) -> int`: Kafka's `Utils.toPositive` (`value & 0x7fffffff`).
- `record_hash(key, offset) -> int`: the record's place in [0, HASH_MAX] (KR-9).
- `in_ranges(key_hash, ranges) -> bool`: whether a hash lies in closed ranges (KR-10).
- `range_fetch_error(ranges, topic_accepts_range_fetch, member_allows_key_share) -> str`: the answer to
  a fetch (or, at the consumer, an assignment) with key ranges (KR-11).
"""

from __future__ import annotations

from typing import Iterable, Sequence

from kipcheck.model.errors import Error

HASH_MAX = 2**63 - 1
# The positive 31-bit partitioner hash is moved to the top of the 63-bit space (KR-9).
HASH_SHIFT = 32

_SEED, _M, _R = 0x9747B28C, 0x5BD1E995, 24
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (org.apache.kafka.common.utils.Utils.murmur2), as a signed 32-bit int."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    whole = length - length % 4
    for index in range(0, whole, 4):
        k = int.from_bytes(data[index:index + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> _R
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = data[whole:]
    if tail:
        # Java's switch falls through: the last 3, 2, 1 bytes are xor'ed in, then one multiply.
        for position in range(len(tail) - 1, -1, -1):
            h ^= tail[position] << (8 * position)
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(value: int) -> int:
    return value & 0x7FFFFFFF


def record_hash(key: bytes | None, offset: int) -> int:
    """KR-9: the hash of a record in [0, HASH_MAX].

    A key hashes as Kafka's default partitioner does (positive murmur2 of the
    serialized key), shifted into the top 31 bits of the 63-bit space. A null
    key has no order to keep, so it hashes its offset (8 bytes, big-endian):
    null-key records spread over the sharers as they spread over partitions.
    """
    data = key if key is not None else offset.to_bytes(8, "big", signed=True)
    return to_positive(murmur2(data)) << HASH_SHIFT


def in_ranges(key_hash: int, ranges: Iterable[tuple[int, int]]) -> bool:
    """KR-10: a record belongs to a fetch with key ranges iff its hash lies in one of them (closed)."""
    return any(low <= key_hash <= high for low, high in ranges)


def is_whole(ranges: Sequence[tuple[int, int]]) -> bool:
    """KR-1's two spellings of full ownership: no ranges, or exactly the whole hash space."""
    return not ranges or list(ranges) == [(0, HASH_MAX)]


def range_fetch_error(ranges: Sequence[tuple[int, int]], topic_accepts_range_fetch: bool,
                      member_allows_key_share: bool) -> str:
    """KR-11: whether a fetch for these key ranges is served (NONE) or refused, and with which error."""
    if is_whole(ranges):
        return Error.NONE   # a plain fetch: the switches do not apply
    # KR-11: the topic's accept.range.fetch, then the consumer's allow.individual.commit, as the seed orders them.
    if not topic_accepts_range_fetch:
        return Error.TOPIC_RANGE_FETCH_NOT_ALLOWED
    if not member_allows_key_share:
        return Error.CONSUMER_RANGE_FETCH_NOT_ACCEPTED
    if any(not 0 <= low <= high <= HASH_MAX for low, high in ranges):
        return Error.INVALID_REQUEST
    return Error.NONE
