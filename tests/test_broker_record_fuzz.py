"""Fuzz the records inside valid batches, every compression codec: no answer but Kafka's, no poisoned partition.

Beside the frame-level fuzz (test_broker_fuzz.py), which mutates whole request frames, this one keeps the
frame and the batch well formed (length, magic, CRC-32C, the codec's own framing) and lies only inside the
records: bytes of the record payload flipped, cut, repeated or inserted before it is compressed, varints
made long, the record count and last offset delta moved. Each batch goes to the reference broker as one
Produce. Afterwards: the broker is alive and logged no traceback; every answer was NONE or one of the
errors Kafka gives a bad batch; and a librdkafka consumer reads exactly the records of the batches answered
NONE, in order, and the good records produced after them: nothing accepted poisons the partition.
Failures print "reproduce with seed=..." (set KIPCHECK_FUZZ_SEED).
"""

from __future__ import annotations

import os
import random
import sys
import time
from pathlib import Path

import pytest

from kipcheck.oracle.conformance.probes.raw_client import RawClient
from kipcheck.oracle.conformance.scenarios.clients import create_topic, produce, read_plain
from kipcheck.oracle.conformance.targets.embedded import EmbeddedBroker

sys.path.insert(0, str(Path(__file__).resolve().parent))
from crafted_batches import CODECS, CODEC_NAMES, batch, record  # noqa: E402

pytestmark = pytest.mark.slow

FUZZ_SECONDS = 20.0
ERRORS_OF_A_BAD_BATCH = {"none", "invalid_record", "corrupt_message", "unknown_server_error", "invalid_timestamp",
                         "message_too_large"}


def random_records(rng: random.Random) -> list[bytes]:
    records = []
    for index in range(rng.randint(1, 12)):
        key = None if rng.random() < 0.2 else rng.randbytes(rng.randint(0, 12))
        value = None if rng.random() < 0.1 else rng.randbytes(rng.randint(0, 40))
        headers = tuple((rng.randbytes(rng.randint(0, 4)), None if rng.random() < 0.3 else rng.randbytes(3))
                        for _ in range(rng.choice((0, 0, 1, 2))))
        records.append(record(index, key=key, value=value, headers=headers))
    return records


def mutate(records: list[bytes], rng: random.Random) -> tuple[bytes, int, int]:
    """(payload, record count, last offset delta): the records with one lie told inside them."""
    count, last = len(records), len(records) - 1
    payload = bytearray(b"".join(records))
    kind = rng.randrange(7)
    if kind == 0:                                                # flip a few bytes
        for _ in range(rng.randint(1, 3)):
            payload[rng.randrange(len(payload))] = rng.randrange(256)
    elif kind == 1:                                              # cut the payload short
        del payload[rng.randrange(len(payload)):]
    elif kind == 2:                                              # bytes inserted somewhere
        position = rng.randrange(len(payload) + 1)
        payload[position:position] = rng.randbytes(rng.randint(1, 8))
    elif kind == 3:                                              # a record repeated
        payload += rng.choice(records)
    elif kind == 4:                                              # a varint made long: 0x80 continuation bytes
        position = rng.randrange(len(payload))
        payload[position:position] = b"\x80" * rng.randint(1, 10)
    elif kind == 5:                                              # the count disagrees
        count = rng.choice((0, count - 1, count + 1, 2**31 - 1, -1))
        last = count - 1 if rng.random() < 0.5 else last
    # kind 6: no lie at all
    return bytes(payload), count, last


def produce_raw(client: RawClient, topic: str, data: bytes) -> str:
    answer = client.request(0, 9, transactional_id=None, acks=-1, timeout=10000, topic_data=[
        {"name": topic, "partition_data": [{"index": 0, "records": data}]}])
    return answer.responses[0].partition_responses[0].error_code.name


def test_lies_inside_valid_batches_of_every_codec_never_poison_a_partition(tmp_path):
    seed = int(os.environ.get("KIPCHECK_FUZZ_SEED", random.randrange(2**32)))
    rng = random.Random(seed)
    with EmbeddedBroker(tmp_path, traced=False) as broker:
        create_topic(broker.bootstrap, "fuzzed", 1)
        client = RawClient(broker.port)
        accepted: list[int] = []
        answers: dict[str, int] = {}
        deadline = time.monotonic() + FUZZ_SECONDS
        while time.monotonic() < deadline:
            codec = rng.choice(CODECS)
            payload, count, last = mutate(random_records(rng), rng)
            answer = produce_raw(client, "fuzzed", batch(payload, count, last_offset_delta=last, codec=codec))
            answers[f"{CODEC_NAMES[codec]} {answer}"] = answers.get(f"{CODEC_NAMES[codec]} {answer}", 0) + 1
            assert answer in ERRORS_OF_A_BAD_BATCH, f"{answer}; reproduce with seed={seed}"
            if answer == "none":
                accepted.append(count)
            assert broker.alive(), f"broker died; reproduce with seed={seed}"
        client.close()
        produce(broker.bootstrap, "fuzzed", [(0, b"k", b"after the fuzz")])
        expected = sum(accepted) + 1
        read = read_plain(broker.bootstrap, "fuzzed", 1, expected, timeout_s=60)
        assert len(read) == expected and read[-1].value() == b"after the fuzz", \
            f"read {len(read)} of {expected} records; reproduce with seed={seed}"
        assert [message.offset() for message in read] == list(range(expected))
        assert "Traceback" not in broker.log_path.read_text(), f"a handler failed; reproduce with seed={seed}"
        assert any(key.endswith(" none") for key in answers) and any(not key.endswith(" none") for key in answers)
    print(f"{sum(answers.values())} batches (seed={seed}): {dict(sorted(answers.items()))}")


def test_the_fuzz_catches_a_broker_that_reads_no_record(tmp_path):
    """The same lies sent to a broker whose record reading is taken out: a librdkafka consumer then stops at
    a stored lie, so the fuzz's last check fails."""
    from test_produce_differential import UNCHECKED_RECORDS

    rng = random.Random(7)
    with EmbeddedBroker(tmp_path, traced=False, launcher=UNCHECKED_RECORDS) as broker:
        create_topic(broker.bootstrap, "fuzzed", 1)
        client = RawClient(broker.port)
        accepted = 0
        for _ in range(40):
            payload, count, last = mutate(random_records(rng), rng)
            if produce_raw(client, "fuzzed", batch(payload, count, last_offset_delta=last)) == "none":
                accepted += max(count, 0)
        client.close()
        produce(broker.bootstrap, "fuzzed", [(0, b"k", b"after the fuzz")])
        read = read_plain(broker.bootstrap, "fuzzed", 1, accepted + 1, timeout_s=15)
        assert not read or read[-1].value() != b"after the fuzz"
