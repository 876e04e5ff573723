"""Key-range filtering of raw batches (impl/ic/filtering.py, spec KR-9, KR-10) on batches real librdkafka
producers wrote (tests/data/librdkafka-<codec>.batches: 300 records, keyed, null keys and headers among
them), its cache, its limits, and a real confluent-kafka consumer reading the filtered batches."""

from __future__ import annotations

import struct
from pathlib import Path

import cramjam
import pytest
from kio.records.readers import read_batch

from kipcheck.impl.ic.filtering import BatchDecodeError, FilterLimitExceeded, decode_records, filter_batches
from kipcheck.impl.wire.compression import Undecompressable, decompressed_chunks
from kipcheck.impl.ic.key_range_cache import KeyRangeCache
from kipcheck.model.key_hash import HASH_MAX, in_ranges, record_hash
from kipcheck.model.key_range_assign import split

DATA = Path(__file__).resolve().parent / "data"
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
LIMIT = 100 * 1024 * 1024


def batches(data: bytes) -> list[bytes]:
    found, position = [], 0
    while position < len(data):
        length = struct.unpack_from(">i", data, position + 8)[0] + 12
        found.append(data[position:position + length])
        position += length
    return found


def records_of(data: bytes):
    """(offset, key hash, record bytes) of every record in `data`, decompressing as needed."""
    return [(record.offset, record.key_hash, record.raw) for batch in batches(data)
            for record in decode_records(batch, LIMIT)]


def kio_records(data: bytes):
    """The same records read independently by kio's reader (uncompressed batches only)."""
    found, position = [], 0
    while position < len(data):
        batch, size = read_batch(data, position)
        found += [(record.offset, record.key, record.value) for record in batch.records]
        position += size
    return found


@pytest.mark.parametrize("codec", CODECS)
def test_kr_9_every_codec_decodes_to_the_records_kio_reads(codec):
    """KR-9: keys are hashed as produced; null keys by offset; every codec gives the same records."""
    reference = kio_records((DATA / "librdkafka-none.batches").read_bytes())
    decoded = records_of((DATA / f"librdkafka-{codec}.batches").read_bytes())
    assert len(decoded) == len(reference) == 300
    for (offset, key_hash, _), (kio_offset, key, _) in zip(decoded, reference):
        assert offset == kio_offset and key_hash == record_hash(key, offset)
    assert any(key is None for _, key, _ in reference)


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("sharers", [1, 2, 3, 5])
def test_kr_10_shares_get_disjoint_records_that_cover_the_partition(codec, sharers):
    """KR-10: each share gets exactly the records whose hash it holds; the shares together get each once."""
    data = (DATA / f"librdkafka-{codec}.batches").read_bytes()
    every = records_of(data)
    seen = []
    for share in split(sharers):
        kept = filter_batches(data, [share], limit_bytes=LIMIT)
        assert len(batches(kept)) == len(batches(data)), "every batch is answered, emptied or not"
        got = records_of(kept)
        assert got == [record for record in every if in_ranges(record[1], [share])]
        seen += got
        for batch in batches(kept):
            if batch[22] & 0x07 == 0:   # a batch we wrote (or an uncompressed one): kio's own reader agrees
                assert [(offset, key_hash) for offset, key_hash, _ in records_of(batch)] == \
                    [(offset, record_hash(key, offset)) for offset, key, _ in kio_records(batch)]
    assert sorted(seen) == sorted(every)


def test_whole_range_and_all_kept_batches_are_passed_as_stored():
    data = (DATA / "librdkafka-zstd.batches").read_bytes()
    assert filter_batches(data, [(0, HASH_MAX)], limit_bytes=LIMIT) is data
    assert filter_batches(data, [(0, 2**62 - 1), (2**62, HASH_MAX)], limit_bytes=LIMIT) == data


@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_the_cache_serves_the_other_sharers_and_never_hides_a_record(codec):
    data = (DATA / f"librdkafka-{codec}.batches").read_bytes()
    shares = split(3)
    expected = [filter_batches(data, [share], limit_bytes=LIMIT) for share in shares]
    cache = KeyRangeCache(max_bytes=10 * 1024 * 1024)
    got = [filter_batches(data, [share], limit_bytes=LIMIT, cache=cache, cache_key=("t", 0)) for share in shares]
    assert [records_of(one) for one in got] == [records_of(one) for one in expected]
    assert cache.hits == 2 * len(batches(data)) and len(cache) == 0, "evicted once every share was sent"
    retry = filter_batches(data, [shares[0]], limit_bytes=LIMIT, cache=cache, cache_key=("t", 0))
    again = filter_batches(data, [shares[0]], limit_bytes=LIMIT, cache=cache, cache_key=("t", 0))
    assert records_of(retry) == records_of(again) == records_of(expected[0]), "a retry decodes again"
    small = KeyRangeCache(max_bytes=2000)
    for share in shares:
        filter_batches(data, [share], limit_bytes=LIMIT, cache=small, cache_key=("t", 0))
        assert small.size_bytes <= 2000


def decompress(codec: int, data: bytes) -> bytes:
    return b"".join(decompressed_chunks(codec, data, 1 << 20))


def test_limits_and_corrupt_batches_are_errors():
    data = (DATA / "librdkafka-zstd.batches").read_bytes()
    first = batches(data)[0]
    records = len(decode_records(first, LIMIT))
    with pytest.raises(FilterLimitExceeded):  # the records' cost is known from the count before decoding
        decode_records(first, records * 96 - 1)
    with pytest.raises(FilterLimitExceeded):  # then the bytes they decompress to
        decode_records(first, records * 96 + 10)
    with pytest.raises(Undecompressable):
        decompress(3, b"not lz4")
    data = bytearray((DATA / "librdkafka-none.batches").read_bytes())
    data[70] ^= 0xFF
    with pytest.raises(BatchDecodeError):
        filter_batches(bytes(data), [(0, 5)], limit_bytes=LIMIT)


def test_xerial_framed_snappy_as_the_java_client_writes_it():
    chunks = [b"first chunk " * 50, b"second " * 70]
    framed = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + b"".join(
        struct.pack(">i", len(raw)) + raw for raw in (bytes(cramjam.snappy.compress_raw(chunk)) for chunk in chunks))
    assert decompress(2, framed) == b"".join(chunks)
    with pytest.raises(Undecompressable):
        decompress(2, framed[:-3])


def test_a_real_consumer_reads_filtered_batches(tmp_path):
    """KR-10: a confluent-kafka consumer (plain Fetch) takes the filtered batches, emptied ones among them:
    it gets exactly the kept records, with their keys, values, headers and millisecond timestamps."""
    from confluent_kafka import Producer

    from kipcheck.oracle.conformance.scenarios.clients import QUIET, read_plain
    from kipcheck.oracle.conformance.targets.embedded import EmbeddedBroker

    share = split(4)[1]
    with EmbeddedBroker(tmp_path, traced=False) as broker:
        producer = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": "lz4", "linger.ms": 5,
                             "batch.num.messages": 4, **QUIET})
        for number in range(200):
            key = None if number % 9 == 0 else f"user-{number % 17}".encode()
            producer.produce("source", key=key, value=f"v{number}".encode(), headers=[("n", str(number).encode())],
                             timestamp=1_700_000_000_123 + number)
        producer.produce("filtered", value=b"placeholder")
        assert producer.flush(30) == 0
    source = b"".join(path.read_bytes() for path in sorted((broker.data_dir / "logs" / "source-0").glob("*.log")))
    [segment] = (broker.data_dir / "logs" / "filtered-0").glob("*.log")
    filtered = filter_batches(source, [share], limit_bytes=LIMIT)
    segment.write_bytes(filtered)
    emptied = [index for index, batch in enumerate(batches(filtered)) if batch[57:61] == b"\0\0\0\0"]
    assert emptied and emptied[0] < len(batches(filtered)) - 1, "an emptied batch before kept records"
    expected = [(offset, key, value) for (offset, key, value), (_, key_hash, _)
                in zip(kio_records(_uncompressed(source)), records_of(source)) if in_ranges(key_hash, [share])]
    assert 20 < len(expected) < 100
    with EmbeddedBroker(tmp_path, traced=False) as broker:
        got = read_plain(broker.bootstrap, "filtered", 1, len(expected), timeout_s=60)
    assert [(m.offset(), m.key(), m.value()) for m in got] == expected
    assert all(m.timestamp()[1] == 1_700_000_000_123 + int(m.headers()[0][1]) for m in got)


def _uncompressed(data: bytes) -> bytes:
    """`data` with every batch rewritten uncompressed and whole, so kio's reader can read it."""
    from kipcheck.impl.ic.filtering import encode_batch

    return b"".join(encode_batch(batch, decode_records(batch, LIMIT)) for batch in batches(data))


def share_problems(filter_function, data: bytes, sharers: int) -> list[str]:
    """What is wrong with `filter_function`'s answers to the shares of a split partition (KR-10), judged
    from keys kio reads and model/key_hash.py, independently of the filter's own decoding and hashing."""
    every = [(offset, record_hash(key, offset)) for offset, key, _ in kio_records(_uncompressed(data))]
    seen, problems = [], []
    for share in split(sharers):
        kept = filter_function(data, [share], limit_bytes=LIMIT)
        if len(batches(kept)) != len(batches(data)):
            problems.append(f"{share}: {len(batches(data)) - len(batches(kept))} batches not answered")
        got = [offset for offset, _, _ in kio_records(_uncompressed(kept))]
        if got != [offset for offset, key_hash in every if in_ranges(key_hash, [share])]:
            problems.append(f"{share}: records outside the share, or missing")
        seen += got
    if sorted(seen) != sorted(offset for offset, _ in every):
        problems.append("the shares together do not get every record exactly once")
    return problems


def test_kr_10_seeded_filter_bugs_are_caught(monkeypatch):
    """The KR-10 check can fail: a filter that drops emptied batches, and one hashing without the shift."""
    from kipcheck.impl.ic import filtering

    data = (DATA / "librdkafka-snappy.batches").read_bytes()
    assert share_problems(filter_batches, data, 3) == []
    singles = _single_record_batches()
    assert share_problems(filter_batches, singles, 5) == []

    def drops_emptied_batches(data, ranges, limit_bytes):
        kept = filter_batches(data, ranges, limit_bytes=limit_bytes)
        return b"".join(batch for batch in batches(kept) if batch[57:61] != b"\0\0\0\0")

    assert any("not answered" in problem for problem in share_problems(drops_emptied_batches, singles, 5))
    monkeypatch.setattr(filtering, "record_hash", lambda key, offset: record_hash(key, offset) >> 32)
    assert share_problems(filter_batches, data, 3), "a filter hashing into the wrong space must be caught"


def _single_record_batches() -> bytes:
    """Uncompressed batches of one record each, so that every share empties most of them."""
    from kipcheck.impl.ic.filtering import encode_batch

    return b"".join(encode_batch(batch, [record]) for batch in batches((DATA / "librdkafka-none.batches").read_bytes())
                    for record in decode_records(batch, LIMIT)[:3])
