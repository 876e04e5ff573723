"""The same malformed Produce bytes to Apache Kafka 4.2 and to the reference broker: the same errors.

Every case of tests/crafted_batches.py (malformed records in a CRC-valid batch, every codec) and the
batch-level and transactional ones below goes to both brokers as one Produce v9; the answers' error codes
must be equal, except where spec/kafka-findings.md ("The reference broker under attack") records that the
reference broker refuses a batch Kafka stores although librdkafka cannot read it (DELIBERATE). A reference
broker that does not read records at all is shown to be caught by the same comparison.
"""

from __future__ import annotations

import struct
import sys
import time
from pathlib import Path

import crc32c
import pytest

from kipcheck.oracle.conformance.probes.raw_client import RawClient
from kipcheck.oracle.conformance.targets.embedded import EmbeddedBroker

sys.path.insert(0, str(Path(__file__).resolve().parent))
from crafted_batches import (  # noqa: E402
    CODECS, CODEC_NAMES, CONTROL, GZIP, LZ4, SNAPPY, TRANSACTIONAL, ZSTD, batch, good_records,
    malformed_batches, record)

pytestmark = pytest.mark.slow

TOPIC = "differential"
# Kafka 4.2 stores these; librdkafka cannot read past them (a record length that lies inside a compressed batch,
# a key length of -5) or reads wrong offsets (offset deltas out of order): the reference broker refuses them.
DELIBERATE = {f"{CODEC_NAMES[codec]}: {lie}": "invalid_record" for codec in (GZIP, SNAPPY, LZ4, ZSTD)
              for lie in ("record length short by one", "record length long by one")} | {
    "key length -5": "invalid_record", "offset deltas out of order": "invalid_record",
    "offset deltas beyond the last": "invalid_record"}
# `kipcheck broker` with its record reading taken out: only the batch-level checks are left.
UNCHECKED_RECORDS = (sys.executable, "-c", "from kipcheck.impl.broker.handlers import records; "
                     "records.check_records = lambda *arguments: None; from kipcheck.cli import main; "
                     "raise SystemExit(main())", "broker")


def with_crc(data: bytes) -> bytes:
    data = bytearray(data)
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    return bytes(data)


def patched(data: bytes, offset: int, fmt: str, value: int, crc: bool = True) -> bytes:
    data = bytearray(data)
    struct.pack_into(fmt, data, offset, value)
    return with_crc(data) if crc else bytes(data)


def cases() -> list[tuple[str, bytes]]:
    good = batch(good_records(3), 3)
    now_ms = int(time.time() * 1000)
    crafted = [(f"{CODEC_NAMES[codec]}: {name}", data) for codec in CODECS for name, data in malformed_batches(codec)]
    return crafted + [
        ("good", good),
        ("good zstd", batch(good_records(3), 3, codec=ZSTD)),
        ("CRC wrong", patched(good, len(good) - 1, ">B", good[-1] ^ 1, crc=False)),
        ("batch length 10", patched(good, 8, ">i", 10, crc=False)),
        ("magic 3", patched(good, 16, ">b", 3)),
        ("magic 1", patched(good, 16, ">b", 1, crc=False)),
        ("base offset 5", patched(good, 0, ">q", 5, crc=False)),
        ("two batches", good + good),
        ("a second batch cut short", good + good[:30]),
        ("twenty zero bytes after the batch", good + bytes(20)),
        ("the batch cut short", good[:-5]),
        ("no bytes", b""),
        ("timestamp two hours ahead", patched(patched(good, 27, ">q", now_ms + 7_200_000), 35, ">q", now_ms + 7_200_000)),
        ("compression type 6", batch(good_records(3), 3, attributes=6)),
        ("zstd that does not decompress", batch(good_records(3), 3, codec=ZSTD, compressed=b"\x28\xb5\x2f\xfd" + b"junk" * 5)),
        ("gzip that does not decompress", batch(good_records(3), 3, codec=GZIP, compressed=b"\x1f\x8b" + b"junk" * 5)),
        ("snappy that does not decompress", batch(good_records(3), 3, codec=SNAPPY, compressed=b"\xff\xff\xff\x0fjunk")),
        ("lz4 that does not decompress", batch(good_records(3), 3, codec=LZ4, compressed=b"\x04\x22\x4d\x18" + b"junk" * 5)),
        ("a batch over message.max.bytes", batch(good_records(100, 11000), 100)),
        ("key length -5", batch(record(0, key=b"", key_length=-5) + record(1) + record(2), 3)),
        ("null key, null value, null header value",
         batch(record(0, key=None) + record(1, value=None) + record(2, headers=((b"h", None),)), 3)),
        ("offset deltas out of order", batch(record(2) + record(1) + record(0), 3)),
        ("offset deltas beyond the last", batch(record(0) + record(1) + record(7), 3)),
        ("control batch, transactional", batch(record(0, key=struct.pack(">hh", 0, 0)), 1, producer_id=7,
                                               producer_epoch=0, attributes=TRANSACTIONAL | CONTROL)),
        ("control batch, not transactional", batch(record(0, key=struct.pack(">hh", 0, 0)), 1, attributes=CONTROL)),
        ("transactional, made-up producer id", batch(good_records(3), 3, producer_id=424242, producer_epoch=0,
                                                     base_sequence=0, attributes=TRANSACTIONAL)),
        ("producer id without a sequence", batch(good_records(3), 3, producer_id=424243, producer_epoch=0)),
    ]


NOT_READY = ("not_leader_or_follower", "leader_not_available", "unknown_topic_or_partition")


def answers(port: int) -> dict[str, str]:
    client = RawClient(port)
    created = client.request(19, 7, timeout=30000, topics=[
        {"name": TOPIC, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}])
    assert created.topics[0].error_code.name in ("none", "topic_already_exists")

    def produce(data: bytes) -> str:
        answer = client.request(0, 9, transactional_id=None, acks=-1, timeout=10000, topic_data=[
            {"name": TOPIC, "partition_data": [{"index": 0, "records": data}]}])
        return answer.responses[0].partition_responses[0].error_code.name

    good = dict(cases())["good"]
    deadline = time.monotonic() + 60
    while produce(good) in NOT_READY and time.monotonic() < deadline:  # Kafka elects the new topic's leader
        time.sleep(0.2)
    found = {name: produce(data) for name, data in cases()}
    client.close()
    return found


def differences(kafka: dict[str, str], reference: dict[str, str]) -> dict[str, tuple[str, str]]:
    return {name: (kafka[name], reference[name]) for name in kafka
            if reference[name] != DELIBERATE.get(name, kafka[name])}


@pytest.fixture(scope="module")
def kafka_answers(start_kafka_once):
    return answers(start_kafka_once("4.2").ports[0])


def test_the_reference_broker_answers_malformed_produces_as_kafka_does(kafka_answers, tmp_path):
    with EmbeddedBroker(tmp_path, traced=False) as broker:
        reference = answers(broker.port)
    assert not differences(kafka_answers, reference)
    for name, error in DELIBERATE.items():
        assert kafka_answers[name] == "none" and reference[name] == error, name
    assert {"invalid_record", "corrupt_message", "message_too_large", "invalid_timestamp", "unknown_server_error",
            "transactional_id_authorization_failed", "none"} <= set(kafka_answers.values())


def test_a_broker_that_reads_no_record_is_caught(kafka_answers, tmp_path):
    with EmbeddedBroker(tmp_path, traced=False, launcher=UNCHECKED_RECORDS) as broker:
        reference = answers(broker.port)
    caught = differences(kafka_answers, reference)
    assert "none: header count 2^31-1" in caught and "zstd: junk after the last record" in caught, caught
