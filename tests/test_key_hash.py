"""model/key_hash.py: Kafka's murmur2 (KR-9), the fetch filter rule (KR-10), the range-fetch switches (KR-11),
and the wire codes of the seed's errors (IC-17)."""

from hypothesis import given, strategies as st
from kio.schema.errors import ErrorCode

from kipcheck.model.errors import Error
from kipcheck.model.ic import WIRE_CODES
from kipcheck.model.key_hash import HASH_MAX, in_ranges, murmur2, range_fetch_error, record_hash, to_positive
from kipcheck.model.key_range_assign import split

# org.apache.kafka.common.utils.UtilsTest.testMurmur2 (and the empty key, as librdkafka's tests give it).
KAFKA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
    b"": 275646681,
}


def test_kr_9_murmur2_is_kafkas():
    """KR-9: Kafka's murmur2 vectors, and the default partitioner's positive hash."""
    for data, expected in KAFKA_VECTORS.items():
        assert murmur2(data) == expected, data
    assert to_positive(murmur2(b"foobar")) % 10 == 6   # the partition Kafka's partitioner picks of 10


@given(st.binary(max_size=40), st.integers(0, 2**63 - 1))
def test_kr_9_hashes_fill_the_top_of_the_space(key, offset):
    """KR-9: a key's hash ignores the offset; a null key's follows it; all lie in [0, 2^63 - 1]."""
    assert record_hash(key, offset) == record_hash(key, 0) == to_positive(murmur2(key)) << 32
    assert 0 <= record_hash(None, offset) <= HASH_MAX and record_hash(None, offset) % 2**32 == 0


def test_kr_9_null_keys_spread_over_the_shares():
    shares = split(4)
    counts = [sum(in_ranges(record_hash(None, offset), [share]) for offset in range(4000)) for share in shares]
    assert min(counts) > 800, counts


def test_kr_10_every_hash_is_in_exactly_one_share():
    """KR-10: closed ranges; the shares of split(k) take each hash once."""
    for key in KAFKA_VECTORS:
        for k in (1, 2, 3, 7):
            assert sum(in_ranges(record_hash(key, 5), [share]) for share in split(k)) == 1


def test_kr_11_switch_order_and_whole_partition():
    """KR-11: topic switch, then the consumer's, then validity; a whole-partition fetch is never refused."""
    half = [(0, 2**62 - 1)]
    assert range_fetch_error(half, False, False) == Error.TOPIC_RANGE_FETCH_NOT_ALLOWED
    assert range_fetch_error(half, True, False) == Error.CONSUMER_RANGE_FETCH_NOT_ACCEPTED
    assert range_fetch_error(half, True, True) == "NONE"
    assert range_fetch_error([(0, HASH_MAX)], False, False) == range_fetch_error([], False, False) == "NONE"
    assert range_fetch_error([(5, 4)], True, True) == range_fetch_error([(0, HASH_MAX + 1)], True, True) == "INVALID_REQUEST"


def test_ic_17_wire_codes_are_distinct_and_unknown_to_kafka():
    """IC-17: the five codes keep the seed's order and collide with no code Kafka 4.2 (kio) defines."""
    assert list(WIRE_CODES.values()) == [1088, 1089, 1090, 1091, 1092]
    assert not set(WIRE_CODES.values()) & {code.value for code in ErrorCode}
    assert all(-32768 <= code <= 32767 for code in WIRE_CODES.values())
