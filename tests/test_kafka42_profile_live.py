"""The kafka-4.2 profile's corrections read from Kafka 4.2's code (SP-66, SP-65, SP-41, SP-43), reproduced on a
live Apache Kafka 4.2.2, and on Kafka 4.4.0 under kafka-4.4, which keeps them: each probe drives Kafka over the
wire (the conformance probe, kio) into the situation, asserts what Kafka answered (AcquiredRecords, error codes,
the start offset the share coordinator stored, read with DescribeShareGroupOffsets), has its traces judged under
the profile, and shows the judge rejects the same trace changed to what the rule before its correction expected.
And a finding (SP-64): Kafka acquires records below the log start offset while it caches records below them.

The log start offset moves by DeleteRecords and batches go by compaction (a compacted topic whose segments roll
after a second, the cleaner every 200 ms); the probe writes the `log_start` and `compact` steps the
share-partition leader learns of at its next fetch (SP-64, SP-65). One Kafka of each line serves the module.

The probing itself, shared with the same probes of the reference broker, is tests/profile_probes.py.

Skipped, with the reason in pytest's summary, where Java 17 or Maven is missing; `make test` installs both.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
from profile_probes import (
    WAIT_MS, Broker, acknowledged, below_the_log_start, judged, one_partition, probe_of, rejected, step_after,
    stored_from_subscription, stranded_by_the_log_start, while_a_lock_holds,
)

from kipcheck.oracle.conformance.probes.probe import Probe
from kipcheck.oracle.conformance.scenarios.clients import produce

pytestmark = pytest.mark.slow

QUIET = {"log_level": 0}
# A lock Kafka accepts and a test can outwait; the broker's default delivery limit (5: redelivery throttled from
# the third delivery on, SP-43); the log cleaner looking for work every 200 ms (SP-65).
SETTINGS = {"group.share.record.lock.duration.ms": "2000", "group.share.min.record.lock.duration.ms": "1000",
            "group.share.heartbeat.interval.ms": "1000", "group.share.min.heartbeat.interval.ms": "1000",
            "log.cleaner.backoff.ms": "200"}
COMPACTION_WAIT_S = 30.0


# Kafka 4.4 computes a share group's assignment at most once a second by default: a new member would be assigned
# its partitions, and they initialized, only after the probe's first fetch.
LINES = {"4.2": {}, "4.4": {"group.share.assignment.interval.ms": "0"}}


@pytest.fixture(scope="module", params=sorted(LINES))
def kafka(request, start_kafka_once, tmp_path_factory) -> Broker:
    """Kafka 4.2.2, judged under kafka-4.2, then Kafka 4.4.0 under kafka-4.4 (which keeps these corrections)."""
    settings = {**SETTINGS, **LINES[request.param]}
    cluster = start_kafka_once(request.param, name=f"kafka-{request.param}",
                               **{name.replace(".", "_"): value for name, value in settings.items()})
    bootstrap = f"127.0.0.1:{cluster.ports[0]}"
    kafka = Broker(bootstrap, f"kafka-{request.param}", settings, AdminClient({"bootstrap.servers": bootstrap, **QUIET}))
    _warm_up(kafka, tmp_path_factory.mktemp("warm-up"))
    return kafka


def _warm_up(kafka: Broker, directory: Path) -> None:
    """One share group's first requests, which a fresh Kafka answers slowly (over a second for the first
    DescribeShareGroupOffsets): a probe that met that while a lock ran would record no `check` there."""
    probe = probe_of(kafka, "warm-up")
    topic = probe.topic(1)
    probe.produce(topic, 0, [1])
    member = probe.member("member")
    probe.fetch(member, [f"{topic}:0"], max_records=1, wait_ms=WAIT_MS)
    probe.close(member, {f"{topic}:0": [(0, 0, "accept")]})
    probe.finish(directory)
    kafka.admin.list_topics(timeout=30)   # the admin client connected before any test times a lock


def test_sp41_a_renewal_failing_part_way_keeps_the_records_before_it_renewed(kafka, tmp_path):
    """SP-41: alice holds 0-4 of a cached batch 0-9, bob 5-9; alice's RENEW of 0-9 fails at 5
    (INVALID_RECORD_STATE), yet 0-4 stay renewed: accepted after their first lock ran out, the answer is NONE.
    Before the correction the model renewed none of a failing batch: the accept would have been refused."""
    probe, tp, (alice, bob) = one_partition(kafka, "renew", [10], "alice", "bob")
    assert probe.fetch(alice, [tp], max_records=10, wait_ms=WAIT_MS) == {tp: [[0, 9, 1]]}
    _, first_lock_ends = probe.timers.windows[-1]
    assert probe.acknowledge(alice, {tp: [(5, 9, "release")]}) == {tp: "NONE"}
    assert probe.fetch(bob, [tp], max_records=10) == {tp: [[5, 9, 2]]}
    # Late enough that the renewed deadline falls clear after the first one (Timers keeps requests out of both).
    probe.timers.sleep_until(first_lock_ends - 1100)
    assert probe.acknowledge(alice, {tp: [(0, 9, "renew")]}, renew=True) == {tp: "INVALID_RECORD_STATE"}
    probe.timers.sleep_until(first_lock_ends + 1)
    assert probe.acknowledge(alice, {tp: [(0, 4, "accept")]}) == {tp: "NONE"}
    probe.close(alice)
    probe.close(bob)
    (trace,) = judged(probe, tmp_path)
    rejected(trace, acknowledged([(0, 4, "accept")]),
             lambda step: step["observed"].update(error="INVALID_RECORD_STATE"), "SP-9")


def test_sp43_a_throttled_batch_met_after_others_ends_the_acquisition(kafka, tmp_path):
    """SP-43 (limit 5, throttled from 3 deliveries): cached batches 0-2 and 3-5 (two acquisitions), 3-5 delivered
    three times; with both released, an acquisition of 20 takes 0-2 and ends at 3-5: not 3-5, not 6-8 past
    it. Then 3-5 come one at a time. Before the correction nothing forbade records past the throttled ones."""
    probe, tp, (alice, bob) = one_partition(kafka, "throttle", [3, 3, 3], "alice", "bob")
    assert probe.fetch(alice, [tp], max_records=3, wait_ms=WAIT_MS) == {tp: [[0, 2, 1]]}
    counts = []
    for _ in range(3):
        (held,) = probe.fetch(alice, [tp], max_records=3)[tp]
        counts.append(held)
        last = [(0, 2, "release")] if len(counts) == 3 else []
        assert probe.acknowledge(alice, {tp: [*last, (3, 5, "release")]}) == {tp: "NONE"}
    assert counts == [[3, 5, 1], [3, 5, 2], [3, 5, 3]]
    assert probe.fetch(bob, [tp], max_records=20) == {tp: [[0, 2, 2]]}
    assert probe.fetch(bob, [tp], max_records=20) == {tp: [[3, 3, 4]]}
    assert probe.fetch(alice, [tp], max_records=20) == {tp: [[4, 4, 4]]}
    probe.close(alice)
    probe.close(bob)
    (trace,) = judged(probe, tmp_path)
    rejected(trace, lambda step: step["op"] == "acquire" and step["observed"].get("records") == [[0, 2, 2]],
             lambda step: step["observed"].update(records=[[0, 2, 2], [6, 8, 1]], delivered=[[0, 8]]), "SP-43")


def test_sp43_a_throttled_record_in_the_same_cached_batch_is_acquired_after_others(kafka, tmp_path):
    """SP-43: when the throttled records share a cached batch with the ones acquired before them (one acquisition
    of 0-5, 3-5 released three times), Kafka takes them too, alone past SPEO: 0-2 and 3-5, not 6-8. The trace
    cannot tell the two cases apart, so the clause forbids only records above a throttled one left available."""
    probe, tp, (alice, bob) = one_partition(kafka, "throttle-shared", [3, 3, 3], "alice", "bob")
    assert probe.fetch(alice, [tp], max_records=6, wait_ms=WAIT_MS) == {tp: [[0, 5, 1]]}
    for count in (2, 3):
        assert probe.acknowledge(alice, {tp: [(3, 5, "release")]}) == {tp: "NONE"}
        assert probe.fetch(alice, [tp], max_records=3) == {tp: [[3, 5, count]]}
    assert probe.acknowledge(alice, {tp: [(0, 2, "release"), (3, 5, "release")]}) == {tp: "NONE"}
    assert probe.fetch(bob, [tp], max_records=20) == {tp: [[0, 2, 2], [3, 5, 4]]}
    probe.close(alice)
    probe.close(bob)
    (trace,) = judged(probe, tmp_path)
    rejected(trace, lambda step: step["op"] == "acquire" and step["observed"].get("records") == [[0, 2, 2], [3, 5, 4]],
             lambda step: step["observed"].update(records=[[0, 2, 2], [3, 5, 4], [6, 8, 1]], delivered=[[0, 8]]),
             "SP-43")


def test_sp66_a_record_the_log_start_stranded_holds_spso_until_its_lock_expires(kafka, tmp_path):
    """SP-66, SP-64: alice holds 0-4; the log start moves to 7 (DeleteRecords) while 5-9 are available. Carol
    accepts 7-19, in two requests: the second write still carries SPSO 7, since alice's 0-4, acquired below SPSO,
    hold it. Once their lock expired, the next write carries 20. Alice's accept of 0-4 is skipped (below SPSO).
    Before the correction SPSO moved after every step, and the second write would carry 15."""
    probe = while_a_lock_holds(lambda name: stranded_by_the_log_start(kafka, name), "log-start")
    (trace,) = judged(probe, tmp_path)
    second_write = acknowledged([(15, 19, "accept")])
    check_after = step_after(trace, second_write)
    rejected(trace, lambda step: step["step"] == check_after,
             lambda step: step["observed"].update(stored_spso=15), "SP-47")


def test_sp64_records_below_the_log_start_are_acquired_while_records_below_it_are_cached(kafka, tmp_path):
    """SP-64, a finding: batches 0-4, 5-9, 10-14 in two partitions; the log start moves to 12, inside 10-14 and past
    SPEO. Where nothing is cached (partition 1) the fetch from SPEO acquires 12-14; where alice still holds 0-4
    (partition 0), stranded below SPSO, Kafka acquires 10-14: records below the log start offset. Accepted, their
    write carries SPSO 12; once every lock expired, the next write carries 15."""
    probe = while_a_lock_holds(lambda name: below_the_log_start(kafka, name), "below-log-start")
    stranded, plain = judged(probe, tmp_path)
    # Kafka starts at 12 where it caches nothing below: 10-14 there is rejected.
    rejected(plain, lambda step: step["op"] == "acquire" and step["observed"].get("records") == [[12, 14, 1]],
             lambda step: step["observed"].update(records=[[10, 14, 1]]), "SP-64")
    rejected(stranded, lambda step: step["op"] == "acquire" and step["observed"].get("records") == [[10, 14, 1]],
             lambda step: step["observed"].update(records=[[11, 14, 1]]), "SP-64")


def test_st2_the_share_state_is_initialized_at_subscription_without_a_start_offset(kafka, tmp_path):
    """ST-2: the group coordinator initializes a subscribed share-partition with start offset -1, and the leader
    applies the reset in memory: -1 stored (and the partition listed by a describe of all offsets) until the first
    write, though the log start moved to 12 before the first fetch; then 12."""
    judged(stored_from_subscription(kafka, "from-subscription"), tmp_path)


def compacted_topic(probe: Probe, bootstrap: str, partitions: int) -> str:
    """A topic of the probe made compacted, its segments rolled a second after their first record."""
    topic = probe.topic(partitions)
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    resource = ConfigResource("TOPIC", topic, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        for name, value in (("cleanup.policy", "compact"), ("segment.ms", "1000"),
                            ("min.cleanable.dirty.ratio", "0.01"))])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)
    return topic


def produce_keyed(probe: Probe, bootstrap: str, topic: str, partitions: int, keys: list[str]) -> None:
    """One log batch of these keys in each partition, appended to the traces."""
    for partition in range(partitions):
        produce(bootstrap, topic, [(partition, key.encode(), b"value") for key in keys])
        probe.produce(topic, partition, [])


def test_sp65_compaction_leaves_holes_and_new_records_start_at_speo_from_inside_the_window(kafka, tmp_path):
    """SP-65: batches 0-4, 5-9 and 10-14 (whose keys replace 5-9's) in two partitions; compaction removes 5-9
    before anything is fetched. Partition 0, 0-4 released: a fetch from inside the window acquires 0-4 and new
    records from SPEO 5, the removed offsets among them (the old rule started them at 10). Partition 1, 0-4 held:
    the fetch starts at SPEO and the new records at 10; 5-9 are a hole of Kafka's cache, so a gap of 7-9 is INVALID_REQUEST (the
    old rule had them archived: INVALID_RECORD_STATE) and an accept of 7-12 reaches over it to 10, not held."""
    probe = probe_of(kafka, "compact")
    topic = compacted_topic(probe, kafka.bootstrap, 2)
    tp0, tp1 = f"{topic}:0", f"{topic}:1"
    produce_keyed(probe, kafka.bootstrap, topic, 2, [f"a{index}" for index in range(5)])
    rolls_after = time.monotonic() + 1.1   # segment.ms past the first batch's timestamp
    for _ in range(2):
        produce_keyed(probe, kafka.bootstrap, topic, 2, [f"k{index}" for index in range(5)])
    time.sleep(max(0.0, rolls_after - time.monotonic()))
    produce_keyed(probe, kafka.bootstrap, topic, 2, [f"d{index}" for index in range(5)])   # rolls the segment
    _wait_compacted(probe, topic, 2, (5, 9))
    for tp in (tp0, tp1):
        probe.partitions[tp].add(probe.timers.now_ms(), "cleaner", "compact", {"first": 5, "last": 9})
    alice, dave, bob, erin = (probe.member(name) for name in ("alice", "dave", "bob", "erin"))
    assert probe.fetch(alice, [tp0], max_records=5, wait_ms=WAIT_MS) == {tp0: [[0, 4, 1]]}
    assert probe.acknowledge(alice, {tp0: [(0, 4, "release")]}) == {tp0: "NONE"}
    assert probe.fetch(dave, [tp1], max_records=5, wait_ms=WAIT_MS) == {tp1: [[0, 4, 1]]}
    # The fetch reads the first segment only (0-14): 15-19 wait for the next one.
    assert probe.fetch(bob, [tp0], max_records=50) == {tp0: [[0, 4, 2], [5, 14, 1]]}
    assert probe.fetch(erin, [tp1], max_records=50) == {tp1: [[10, 14, 1]]}
    answers = [probe.acknowledge(erin, {tp1: [batch]})[tp1]
               for batch in ((7, 9, "gap"), (7, 12, "accept"), (10, 14, "accept"))]
    assert answers == ["INVALID_REQUEST", "INVALID_RECORD_STATE", "NONE"]
    assert probe.acknowledge(dave, {tp1: [(0, 4, "accept")]}) == {tp1: "NONE"}
    assert probe.acknowledge(bob, {tp0: [(0, 4, "accept"), (5, 9, "gap"), (10, 14, "accept")]}) == {tp0: "NONE"}
    for member in (alice, dave, bob, erin):
        probe.close(member)
    inside, at_speo = judged(probe, tmp_path)
    rejected(inside, lambda step: step["op"] == "acquire" and step["actor"] == "bob",
             lambda step: step["observed"].update(records=[[0, 4, 2], [10, 14, 1]]), "SP-6")
    rejected(at_speo, acknowledged([(7, 9, "gap")]),
             lambda step: step["observed"].update(error="INVALID_RECORD_STATE"), "SP-14")


def _wait_compacted(probe: Probe, topic: str, partitions: int, batch: tuple[int, int]) -> None:
    deadline = time.monotonic() + COMPACTION_WAIT_S
    while any(batch in probe.log_batches(topic, partition) for partition in range(partitions)):
        if time.monotonic() > deadline:
            pytest.fail(f"the log cleaner did not remove batch {batch} of {topic} in {COMPACTION_WAIT_S:.0f} s")
        time.sleep(0.2)
