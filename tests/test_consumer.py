"""impl/consumer without a broker: its KIP-983 ownership diffed against the model, offsets, records, settings."""

from __future__ import annotations

import datetime
import io
import struct
from pathlib import Path

import crafted_batches
import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_batch
from kio.static.primitive import TZAwareMicros

from kipcheck.impl.consumer.config import ConsumerConfig
from kipcheck.impl.consumer.errors import KafkaError
from kipcheck.impl.consumer.offsets import ProcessedOffsets
from kipcheck.impl.consumer.ownership import ASSIGN, LOSE, REVOKE, Decision, Ownership
from kipcheck.impl.consumer.records import RECEIVE_MESSAGE_MAX_BYTES, decode_batch, record_offsets, split_batches
from kipcheck.impl.topic_partition import TopicPartition
from kipcheck.impl.wire.batches import COMMIT, marker_batch
from kipcheck.model.revoke_delay import RevokeDelayConsumer

PARTITIONS = [TopicPartition("orders", partition) for partition in range(3)] + [TopicPartition("audit", 0)]
some_partitions = st.sets(st.sampled_from(PARTITIONS), max_size=3)
operations = st.lists(st.one_of(
    st.tuples(st.sampled_from([ASSIGN, REVOKE, LOSE]), some_partitions),
    st.tuples(st.just("poll"), st.just(frozenset())),
    st.tuples(st.just("delay"), some_partitions)), max_size=40)


def first_disagreement(ownership: Ownership, steps) -> str | None:
    """Drive the consumer's Ownership and the model with the same steps; the first answer they disagree on."""
    model, decisions = RevokeDelayConsumer(), []
    for kind, partitions in steps:
        names = {str(tp) for tp in partitions}
        if kind in (ASSIGN, REVOKE, LOSE):
            decisions.append(Decision(kind, frozenset(partitions), 0))
            getattr(model, kind)(names)
        elif kind == "delay":
            if ownership.delay(set(partitions)) != model.delay_revoke(names):
                return f"delay of {sorted(names)}"
        else:
            start, expected = ownership.start_poll(decisions), model.poll()
            decisions = []
            observed = tuple({str(tp) for tp in found} for found in
                             (start.revoked, start.to_be_revoked, start.lost, ownership.fetchable()))
            if observed != (expected.revoked, expected.to_be_revoked, expected.lost, expected.fetchable):
                return f"poll: consumer {observed}, model {expected}"
        if {str(tp) for tp in ownership.held()} != model.owned:
            return f"held after {kind}"
    return None


@settings(max_examples=300, deadline=None)
@given(operations)
def test_the_consumers_ownership_agrees_with_the_model(steps):
    """RD-1 to RD-9 as the consumer implements them: the same answers as model/revoke_delay.py, step for step."""
    assert first_disagreement(Ownership(), steps) is None


class DelayAfterLoss(Ownership):
    def delay(self, partitions):
        super().delay({tp for tp in partitions if self.owns(tp)})
        return True  # the seeded bug: a delay accepted after the partition was lost (RD-9)


def test_the_differential_test_catches_a_seeded_bug():
    lost_then_delayed = [(ASSIGN, {PARTITIONS[0]}), ("poll", frozenset()), (LOSE, {PARTITIONS[0]}),
                         ("poll", frozenset()), ("delay", {PARTITIONS[0]})]
    assert first_disagreement(Ownership(), lost_then_delayed) is None
    assert first_disagreement(DelayAfterLoss(), lost_then_delayed) == "delay of ['orders:0']"


def test_processed_offsets_commit_below_the_first_gap_and_keep_the_ranges_above():
    tp, processed = PARTITIONS[0], ProcessedOffsets()
    processed.start(tp, 40)
    assert processed.commit_offset(tp) == 40
    for offset in (42, 44, 43, 42, 46):
        processed.done(tp, offset)
    assert (processed.commit_offset(tp), processed.ranges(tp)) == (40, [(42, 44), (46, 46)])
    processed.done(tp, 40)
    processed.done(tp, 41)
    assert (processed.commit_offset(tp), processed.ranges(tp)) == (45, [(46, 46)])
    processed.done(tp, 45)
    assert (processed.commit_offset(tp), processed.ranges(tp)) == (47, [])


def _batch(base_offset: int, values: list[bytes]) -> bytes:
    stamp = TZAwareMicros.parse(datetime.datetime(2024, 5, 1, 12, 0, 0, 123000, tzinfo=datetime.timezone.utc))
    records = tuple(Record(attributes=0, timestamp=stamp, offset=index, key=b"k", value=value, headers=())
                    for index, value in enumerate(values))
    buffer = io.BytesIO()
    write_batch(buffer, NewRecordBatch(producer_id=-1, producer_epoch=-1, base_sequence=-1, records=records,
                                       attributes=0))
    data = bytearray(buffer.getvalue())
    struct.pack_into(">q", data, 0, base_offset)  # outside the CRC, as the broker assigns it
    return bytes(data)


def test_batches_decode_with_offsets_and_milliseconds_and_a_cut_batch_is_left_out():
    data = _batch(10, [b"a", b"b"]) + _batch(12, [b"c"])
    batches = split_batches(data + data[:30])
    assert len(batches) == 2
    records = [record for batch in batches for record in decode_batch("orders", 0, batch)]
    assert [(record.offset, record.value) for record in records] == [(10, b"a"), (11, b"b"), (12, b"c")]
    assert records[0].timestamp_ms % 1000 == 123


def test_a_corrupt_batch_is_corrupt_message_not_garbage():
    data = bytearray(_batch(0, [b"a"]))
    data[-1] ^= 0xFF
    with pytest.raises(KafkaError) as caught:
        decode_batch("orders", 0, split_batches(bytes(data))[0])
    assert caught.value.error == "CORRUPT_MESSAGE"


@pytest.mark.parametrize("codec", crafted_batches.CODECS)
def test_record_offsets_are_the_decoded_records_offsets_without_decoding_them(codec):
    """The observer's cheap reading (keys, values and headers stepped over) against the full decoding: a batch
    with keys, headers and a hole compaction left (deltas 0, 2, 3), compressed or not; then a batch cut inside
    its last record, which neither reads; a control batch holds no data record for either."""
    from crafted_batches import batch, record

    payload = record(0, key=b"k" * 200, value=None, headers=((b"h", b"x" * 300),)) + record(2) + record(3, value=b"")
    data = batch(payload, 3, last_offset_delta=3, codec=codec, base_offset=40)
    [whole] = split_batches(data)
    assert record_offsets("orders", 0, whole) == [record.offset for record in decode_batch("orders", 0, whole)] \
        == [40, 42, 43]
    [cut] = split_batches(batch(payload[:-2], 3, codec=codec))
    for read in (record_offsets, decode_batch):
        with pytest.raises(KafkaError) as caught:
            read("orders", 0, cut)
        assert caught.value.error == "CORRUPT_MESSAGE"
    [marker] = split_batches(marker_batch(producer_id=7, producer_epoch=0, control_type=COMMIT))
    assert record_offsets("orders", 0, marker) == decode_batch("orders", 0, marker) == []


DATA = Path(__file__).resolve().parent / "data"


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_librdkafka_compressed_batches_decode_to_the_uncompressed_ones_records(codec):
    """The same 300 records produced by librdkafka uncompressed and with each codec (tests/data): each codec's
    batches decode to the uncompressed batches' records, keys, values and offsets, and record_offsets agrees."""
    def read(name: str) -> list[tuple]:
        found = []
        for batch in split_batches((DATA / f"librdkafka-{name}.batches").read_bytes()):
            records = decode_batch("orders", 0, batch)
            assert record_offsets("orders", 0, batch) == [record.offset for record in records]
            found += [(record.offset, record.key, record.value, record.headers) for record in records]
        return found

    reference = read("none")
    assert len(reference) == 300 and read(codec) == reference


def test_xerial_framed_snappy_as_the_java_client_writes_it_decodes():
    from crafted_batches import SNAPPY, batch, record

    payload = b"".join(record(delta, value=b"value %d " % delta * 20) for delta in range(40))
    halves = (payload[:1000], payload[1000:])
    framed = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + b"".join(
        struct.pack(">i", len(raw)) + raw for raw in (bytes(cramjam.snappy.compress_raw(half)) for half in halves))
    [data] = split_batches(batch(payload, 40, codec=SNAPPY, compressed=framed, base_offset=7))
    assert [record.value for record in decode_batch("orders", 0, data)] == [b"value %d " % delta * 20
                                                                           for delta in range(40)]
    assert record_offsets("orders", 0, data) == list(range(7, 47))


@pytest.mark.parametrize("codec", crafted_batches.CODECS[1:])
def test_a_compressed_payload_that_does_not_decompress_is_corrupt_message(codec):
    """Under a correct CRC: garbage, and the codec's own output cut short."""
    from crafted_batches import batch, compress, good_records

    payload = good_records(5)
    for compressed in (b"\x00garbage that no codec reads" * 3, compress(codec, payload)[:-6]):
        [data] = split_batches(batch(payload, 5, codec=codec, compressed=compressed))
        for read in (decode_batch, record_offsets):
            with pytest.raises(KafkaError) as caught:
                read("orders", 3, data)
            assert caught.value.error == "CORRUPT_MESSAGE", caught.value
            assert "orders:3 at offset 0" in str(caught.value)


@pytest.mark.parametrize("codec", crafted_batches.CODECS)
def test_records_decompress_no_further_than_receive_message_max_bytes(codec):
    """A batch whose records decompress past the bound (a compression bomb: 4 MiB of zeros in a value) is
    MESSAGE_TOO_LARGE naming receive.message.max.bytes; the same batch reads under a bound that holds it."""
    from crafted_batches import batch, record

    payload = record(0, value=bytes(4 << 20))
    [data] = split_batches(batch(payload, 1, codec=codec))
    for read in (decode_batch, record_offsets):
        with pytest.raises(KafkaError) as caught:
            read("orders", 0, data, receive_message_max_bytes=1 << 20)
        assert caught.value.error == "MESSAGE_TOO_LARGE"
        assert "receive.message.max.bytes (1048576)" in str(caught.value)
    [whole] = decode_batch("orders", 0, data, receive_message_max_bytes=len(payload))
    assert whole.value == bytes(4 << 20)
    assert ConsumerConfig().receive_message_max_bytes == RECEIVE_MESSAGE_MAX_BYTES


def test_a_compression_type_kafka_does_not_have_is_unsupported():
    from crafted_batches import batch, good_records

    [data] = split_batches(batch(good_records(2), 2, compressed=b"whatever", attributes=5))
    with pytest.raises(KafkaError) as caught:
        decode_batch("orders", 0, data)
    assert caught.value.error == "UNSUPPORTED_COMPRESSION_TYPE" and "compression type id 5" in str(caught.value)


@pytest.mark.parametrize("properties, message", [
    ({"bootstrap.servers": "h:1", "max.poll.recods": 5}, "unknown consumer setting 'max.poll.recods'"),
    ({"bootstrap.servers": "h:1", "max.poll.records": "many"}, "max.poll.records must be an integer"),
    ({"bootstrap.servers": "h:1", "fetch.max.bytes": 0}, "fetch.max.bytes must be positive"),
    ({"bootstrap.servers": "h:1", "auto.offset.reset": "smallest"}, "auto.offset.reset must be one of"),
    ({"bootstrap.servers": "h:1", "rebalance.revoke.mode": "eager"}, "rebalance.revoke.mode must be one of"),
    ({"bootstrap.servers": "h:1", "receive.message.max.bytes": 1000}, r"at least fetch\.max\.bytes \+ 512"),
    ({}, "bootstrap.servers must name"),
])
def test_bad_settings_are_named(properties, message):
    with pytest.raises(ValueError, match=message):
        ConsumerConfig.from_properties(properties)


def test_bootstrap_servers_must_be_host_and_port():
    with pytest.raises(ValueError, match="is not host:port"):
        ConsumerConfig.from_properties({"bootstrap.servers": "localhost"}).bootstrap_addresses()
