"""`kipcheck record` reads the record bytes of every ShareFetch answer it relays (SP-48): a broker that sends an
acquisition without some of its records, or with a record nobody acquired, is caught through the proxy, and a
correct broker is not, with confluent-kafka's ShareConsumer.

The faulty brokers are the reference broker with a seeded bug (tests/broker_bugs.py, the bugs the conformance
probes catch over the wire), run as a separate process the proxy stands in front of.
"""

import dataclasses
import time
import uuid

import pytest

from broker_bugs import BUGS, launcher
from kipcheck.oracle.check import check_file
from kipcheck.oracle.conformance.scenarios.clients import create_topic, poll_records, produce, share_consumer
from kipcheck.oracle.conformance.targets.embedded import DEFAULT_LAUNCHER, EmbeddedBroker
from record_support import Recording, TamperingBroker

BATCH_RECORDS = 100
# An in-flight limit of one batch (Kafka 4.2's lowest), so that an acquisition stops where a later batch begins.
IN_FLIGHT = {"group.share.partition.max.record.locks": str(BATCH_RECORDS)}


def relayed(tmp_path, bug: str | None, settings: dict[str, str], rewrite=None,
            expected: int = 2 * BATCH_RECORDS, codec: str = "none") -> tuple[Recording, list[int]]:
    """Two batches of a hundred records produced (compressed by `codec`) through `kipcheck record --check` in front
    of the reference broker (with `bug` patched in, or its ShareFetch answers' partitions passed through `rewrite`),
    then one share consumer polling them, accepting them, until it has seen `expected` offsets or the proxy printed
    a violation; the stopped recording and the offsets the consumer was given."""
    broker = EmbeddedBroker(tmp_path / "broker", {"share.auto.offset.reset": "earliest", **settings},
                            launcher=launcher(bug) if bug else DEFAULT_LAUNCHER, traced=False)
    with broker:
        tampering = TamperingBroker(broker.port, rewrite) if rewrite else None
        try:
            with Recording([("127.0.0.1", tampering.port if tampering else broker.port)], tmp_path / "traces",
                           settings=settings) as recording:
                given = consumed(recording, expected, codec)
        finally:
            if tampering:
                tampering.stop()
    return recording, given


def consumed(recording: Recording, expected: int, codec: str) -> list[int]:
    topic, group = f"bytes-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    create_topic(recording.bootstrap, topic, 1)
    for batch in range(2):  # one produce each: two log batches
        produce(recording.bootstrap, topic, [(0, None, b"v%d" % (batch * BATCH_RECORDS + index))
                                             for index in range(BATCH_RECORDS)], **{"compression.type": codec})
    consumer = share_consumer(recording.bootstrap, group, [topic], explicit=True)
    given, deadline = [], time.monotonic() + 30
    while len(set(given)) < expected and time.monotonic() < deadline \
            and not any("VIOLATION" in line for line in recording.lines):
        for message in poll_records(consumer, 0.5):
            given.append(message.offset())
            consumer.acknowledge(message, 1)
    consumer.close()
    return given


@pytest.mark.parametrize("bug, settings", [("last-batch-not-sent", {}), ("next-batch-sent", IN_FLIGHT)])
def test_a_broker_sending_other_records_than_it_acquired_is_caught_through_record(tmp_path, bug, settings):
    """last-batch-not-sent: the acquisition of both batches goes out without the second, whose records are lost
    to the client (it acknowledges their offsets as gaps). next-batch-sent: the acquisition of the first batch
    (the in-flight limit) goes out with the second, which nobody acquired (the client skips it)."""
    assert bug in BUGS
    recording, given = relayed(tmp_path, bug, settings)
    recording.wait_for("VIOLATION")
    violations = [line for line in recording.lines if "VIOLATION" in line]
    assert violations and all("SP-48" in line for line in violations), recording.output
    assert recording.exit_code == 1, recording.output
    if bug == "last-batch-not-sent":
        assert set(given) < set(range(2 * BATCH_RECORDS)), "the client never got the dropped records"
    [verdict] = [verdict for verdict in map(check_file, recording.traces("share-partition")) if not verdict]
    assert verdict.clause == "SP-48", verdict.summary()


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_a_batch_dropped_from_a_compressed_answer_is_caught_through_record(tmp_path, codec):
    """SP-48 is judged on compressed answers too: the proxy reads the records of every codec Kafka has, so the
    second batch missing from an answer is caught, and a correct broker's compressed answers are allowed."""
    recording, given = relayed(tmp_path, "last-batch-not-sent", {}, codec=codec)
    recording.wait_for("VIOLATION")
    violations = [line for line in recording.lines if "VIOLATION" in line]
    assert violations and all("SP-48" in line for line in violations), recording.output
    assert set(given) < set(range(2 * BATCH_RECORDS)), "the client never got the dropped records"
    [verdict] = [verdict for verdict in map(check_file, recording.traces("share-partition")) if not verdict]
    assert verdict.clause == "SP-48", verdict.summary()
    recording, given = relayed(tmp_path / "correct", None, {}, codec=codec)
    assert sorted(given) == list(range(2 * BATCH_RECORDS)), recording.output
    assert recording.exit_code == 0 and "VIOLATION" not in recording.output, recording.output
    acquired = [step for step in recording.acquisitions() if step["observed"]["records"]]
    assert acquired and all(step["observed"]["delivered"] for step in acquired), "every compressed answer read"
    assert all(check_file(path) for path in recording.traces("share-partition"))


@pytest.mark.parametrize("settings", [{}, IN_FLIGHT])
def test_a_correct_broker_relayed_to_real_share_consumers_sends_exactly_what_it_acquired(tmp_path, settings):
    recording, given = relayed(tmp_path, None, settings)
    assert sorted(given) == list(range(2 * BATCH_RECORDS)), recording.output
    assert recording.exit_code == 0 and "VIOLATION" not in recording.output, recording.output
    paths = recording.traces("share-partition")
    assert paths and all('"view"' not in path.read_text().partition("\n")[0] for path in paths), \
        "a full view: judged by SP-48"
    acquired = [step for step in recording.acquisitions() if step["observed"]["records"]]
    assert acquired and all("delivered" in step["observed"] for step in acquired), "every answer's records read"
    assert all(check_file(path) for path in paths)


def holds(runs: list[list[int]], offset: int) -> bool:
    return any(run[0] <= offset <= run[1] for run in runs)


def compacted(part):
    """What Kafka's log cleaner leaves of the batches of a ShareFetch answer, faked on the wire: each batch loses
    its second record, and keeps its first and last offsets (the cleaner keeps a batch's offsets; its count and
    CRC are written again)."""
    from crafted_batches import batch, record
    from kipcheck.impl.consumer.records import decode_batch, split_batches

    batches = []
    for data in split_batches(part.records or b""):
        records = decode_batch("", 0, data)
        base = records[0].offset if records else 0
        kept = records[:1] + records[2:]
        payload = b"".join(record(kept_record.offset - base, kept_record.key, kept_record.value)
                           for kept_record in kept)
        batches.append(batch(payload, len(kept), last_offset_delta=records[-1].offset - base, base_offset=base)
                       if len(records) > 2 else bytes(data))
    return dataclasses.replace(part, records=b"".join(batches))


def test_a_compacted_batch_makes_a_partial_view_instead_of_a_false_alarm(tmp_path):
    """SP-65: Kafka acquires the offsets compaction emptied inside a batch, and sends the batch as the cleaner left
    it; the client acknowledges them as gaps. The proxy does not follow compaction: the trace becomes a partial
    view (SP-80), which SP-48 does not judge, rather than a full view that would call the hole a lost record."""
    recording, given = relayed(tmp_path, None, {}, rewrite=compacted, expected=2 * BATCH_RECORDS - 2)
    assert 1 not in given and len(set(given)) == 2 * BATCH_RECORDS - 2, recording.output
    assert recording.exit_code == 0 and "VIOLATION" not in recording.output, recording.output
    assert "partial view from then on: a compacted batch (the trace does not follow compaction)" in recording.output
    [path] = recording.traces("share-partition")
    assert '"view": "partial"' in path.read_text().partition("\n")[0]
    assert any(holds(step["observed"]["records"], 1) and not holds(step["observed"]["delivered"], 1)
               for step in recording.acquisitions()), \
        "an acquisition of offset 1 whose bytes held no record 1: what a full view would call SP-48"
    assert check_file(path)
