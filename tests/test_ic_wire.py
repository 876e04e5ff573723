"""Individual commit and key-range fetch for real: the reference broker, the kio consumer, confluent-kafka beside them.

The scenarios (oracle/conformance/scenarios/ic.py): several consumers share one partition by key range
(KR-10), commit the ranges they processed (IC-2, IC-11), hand a key range over (IC-15) and survive a kill -9
of the broker (IC-12); every ic trace, the coordinator's and the consumers', is judged by the oracle. Here
also: the wire fields (IC-20), the switches (KR-11, IC-7, IC-6), plain commits over IC state (IC-19).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from kipcheck.impl.consumer import Consumer, IllegalState, KafkaError, TopicPartition
from kipcheck.model.key_hash import in_ranges, record_hash
from kipcheck.model.key_range_assign import split
from kipcheck.oracle.check import check_file
from kipcheck.oracle.conformance.scenarios.clients import QUIET, create_topic, produce
from kipcheck.oracle.conformance.targets.embedded import EmbeddedBroker
from kipcheck.oracle.conformance.probes.raw_client import RawClient
from kipcheck.oracle.conformance.scenarios.ic import (GROUP, SCENARIOS, TOPIC, key_range_consumer, plain_committed,
                                                      prepare)

pytestmark = pytest.mark.slow

TP = TopicPartition(TOPIC, 0)


def assert_traces_pass(directory: Path) -> list[Path]:
    paths = sorted(Path(directory).glob("ic*.jsonl"))
    assert paths
    for path in paths:
        verdict = check_file(path)
        assert verdict, verdict.summary()
    return paths


def test_the_fields_ride_as_tagged_fields_that_only_the_extended_schemas_read():
    """IC-20: OffsetRanges round-trips through the extended OffsetCommit v9 schema; kio's own schema refuses the
    unknown tag (so both ends use impl/wire/schemas.py), and a plain commit carries no tag at all."""
    import io

    from kio.index import load_request_schema
    from kio.serial import entity_reader, entity_writer

    from kipcheck.impl.wire.codec import build
    from kipcheck.impl.wire.schemas import flat, pairs, request_schema

    def encoded(schema, partition: dict) -> bytes:
        buffer = io.BytesIO()
        entity_writer(schema)(buffer, build(schema, {"group_id": "g", "member_id": "", "topics": [
            {"name": TOPIC, "partitions": [{"partition_index": 0, "committed_offset": -1, "committed_metadata": None,
                                            **partition}]}]}))
        return buffer.getvalue()

    extended, plain = request_schema(8, 9), load_request_schema(8, 9)
    frame = encoded(extended, {"offset_ranges": flat([(41, 42), (46, 47)])})
    body, _ = entity_reader(extended)(frame, 0)
    assert pairs(body.topics[0].partitions[0].offset_ranges) == [(41, 42), (46, 47)]
    with pytest.raises(Exception, match="tag"):
        entity_reader(plain)(frame, 0)
    assert encoded(extended, {}) == encoded(plain, {})
    assert len(frame) - len(encoded(plain, {})) == 2 + 1 + 1 + 2 * 16   # tag, size, count, 16 bytes a range
    with pytest.raises(ValueError):
        pairs((1, 2, 3))


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenario(tmp_path, name, kipcheck_check):
    """KR-10, IC-2, IC-11, IC-21 (ic-key-range-sharing); IC-15, IC-16 (ic-key-handoff, ic-late-commit);
    IC-12 (ic-broker-killed); KR-12 to KR-14 (ic-group-key-sharing):
    every record processed by the owner of its key (exactly once, but for those ic-late-commit gives up), the plain
    committed offset equal to the stable offset + 1, and every ic trace (the coordinator's and the consumers')
    allowed."""
    result = SCENARIOS[name](tmp_path)
    assert result.ok, result.summary()
    # the group scenario's coordinator also judges its assignments and its members' partitions
    group = name == "ic-group-key-sharing"
    machines = {"ic", "key-range-assign", "revoke-delay"} if group else {"ic"}
    assert machines == {verdict.machine for verdict in result.traces}
    if name != "ic-broker-killed":
        assert any(Path(verdict.name).name.startswith("ic-client.") for verdict in result.traces)
    traces = sorted((tmp_path / "traces").glob("*.jsonl"))
    checked = kipcheck_check(traces)                  # the command line, as a user's CI runs it
    assert checked.returncode == 0 and checked.stdout.count("ok ") == len(traces), checked.stdout + checked.stderr


def test_switches_answer_the_seeds_errors(tmp_path):
    """KR-11 and IC-7: TOPIC_RANGE_FETCH_NOT_ALLOWED, CONSUMER_RANGE_FETCH_NOT_ACCEPTED, INDIVIDUAL_COMMIT_NOT_ALLOWED;
    accept.range.fetch through DescribeConfigs and IncrementalAlterConfigs."""
    with EmbeddedBroker(tmp_path, settings={"accept.individual.commit": "false"}) as broker:
        create_topic(broker.bootstrap, "closed", 1)
        produce(broker.bootstrap, "closed", [(0, f"k{number}".encode(), b"v") for number in range(10)])
        consumer = key_range_consumer(broker.bootstrap)
        consumer.assign({TopicPartition("closed", 0): [split(2)[0]]})
        with pytest.raises(KafkaError) as refused:
            for _ in range(20):
                consumer.poll(200)
        assert refused.value.error == "TOPIC_RANGE_FETCH_NOT_ALLOWED"
        consumer.close()
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
        resource = ConfigResource(ConfigResource.Type.TOPIC, "closed")
        assert admin.describe_configs([resource])[resource].result(30)["accept.range.fetch"].value == "false"
        resource.add_incremental_config(ConfigEntry("accept.range.fetch", "true",
                                                    incremental_operation=AlterConfigOpType.SET))
        admin.incremental_alter_configs([resource])[resource].result(30)
        described = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "closed")])
        assert next(iter(described.values())).result(30)["accept.range.fetch"].value == "true"
        consumer = key_range_consumer(broker.bootstrap)
        consumer.assign({TopicPartition("closed", 0): [split(2)[0]]})
        records = []
        for _ in range(20):
            records += consumer.poll(200)
        assert 0 < len(records) < 10
        with pytest.raises(KafkaError) as not_allowed:
            consumer.commit_ranges({TopicPartition("closed", 0): [(records[0].offset, records[0].offset)]})
        assert not_allowed.value.error == "INDIVIDUAL_COMMIT_NOT_ALLOWED"
        consumer.close()
        shy = key_range_consumer(broker.bootstrap, **{"allow.individual.commit": "false"})
        with pytest.raises(KafkaError) as not_accepted:
            shy.assign({TopicPartition("closed", 0): [split(2)[0]]})
        assert not_accepted.value.error == "CONSUMER_RANGE_FETCH_NOT_ACCEPTED"
        with pytest.raises(IllegalState):
            shy.commit_ranges({TopicPartition("closed", 0): [(0, 0)]})
        shy.close()


def test_seek_reads_a_key_range_from_an_offset_and_refuses_a_partition_not_assigned(tmp_path):
    """seek (as Kafka's): the next polls return the key range's records from the offset on, and only those."""
    with EmbeddedBroker(tmp_path) as broker:
        prepare(broker, 60)
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "max.poll.records": 7})
        with pytest.raises(IllegalState, match="no current assignment"):
            consumer.seek(TP, 10)
        consumer.assign({TP: [split(2)[1]]})
        consumer.seek(TP, 25)
        offsets = []
        while consumer.position(TP) < 60:
            offsets += [record.offset for record in consumer.poll(200)]
        expected = [offset for offset in range(25, 60)
                    if in_ranges(record_hash(f"user-{offset % 37}".encode(), offset), [split(2)[1]])]
        assert offsets == expected and 0 < len(expected) < 35
        with pytest.raises(ValueError, match="seek offset"):
            consumer.seek(TP, -1)
        consumer.close()


def test_a_plain_commit_of_an_individually_committed_partition(tmp_path):
    """IC-19: a confluent-kafka commit moves the stable offset forward like an IC commit of everything below it,
    a rewind below it is INDIVIDUAL_COMMIT_TOO_OLD, and committing the same offset again is accepted."""
    with EmbeddedBroker(tmp_path) as broker:
        prepare(broker, 50)
        consumer = key_range_consumer(broker.bootstrap)
        consumer.assign({TP: []})
        consumer.commit_ranges({TP: [(0, 9), (20, 24)]})
        assert plain_committed(broker.bootstrap) == 10
        assert consumer.commit_ranges({TP: [(5, 9), (20, 21)]}) == {}     # all committed: nothing sent (IC-11)
        plain = KafkaConsumer({"bootstrap.servers": broker.bootstrap, "group.id": GROUP, **QUIET})
        plain.commit(offsets=[KafkaTopicPartition(TOPIC, 0, 20)], asynchronous=False)   # folds [20, 24]
        assert plain_committed(broker.bootstrap) == 25
        plain.commit(offsets=[KafkaTopicPartition(TOPIC, 0, 25)], asynchronous=False)   # the same again
        with pytest.raises(KafkaException):
            plain.commit(offsets=[KafkaTopicPartition(TOPIC, 0, 5)], asynchronous=False)  # a rewind
        plain.close()
        consumer.close()
        assert plain_committed(broker.bootstrap) == 25
    assert_traces_pass(broker.trace_dir)


def test_the_cap_is_an_error_never_a_silent_drop_and_its_callout_fences_the_owners(tmp_path):
    """IC-6: past individual.commit.max.ranges the commit is refused with MAX_INDIVIDUAL_COMMIT_REACHED (at the
    wire, through the consumer), nothing is dropped; the callout fences the KIP-848 members owning the partition."""
    from kipcheck.impl.groups.config import GroupConfig
    from kipcheck.impl.groups.consumer import HeartbeatRequest
    from kipcheck.impl.groups.coordinator import GroupCoordinator

    with EmbeddedBroker(tmp_path / "broker", settings={"individual.commit.max.ranges": "2"}) as broker:
        prepare(broker, 20)
        consumer = key_range_consumer(broker.bootstrap)
        consumer.assign({TP: []})
        consumer.commit_ranges({TP: [(1, 1), (3, 3)]})
        with pytest.raises(KafkaError) as capped:
            consumer.commit_ranges({TP: [(5, 5)]})
        assert capped.value.error == "MAX_INDIVIDUAL_COMMIT_REACHED"
        assert consumer.commit_ranges({TP: [(0, 0), (2, 2)]}) == {TP: "NONE"}   # filling the gaps still works
        consumer.close()
        assert plain_committed(broker.bootstrap) == 4
        assert "individual-commit ranges (cap 2" in broker.log_tail(50)
    groups = GroupCoordinator(tmp_path / "groups", GroupConfig(), lambda topic: 1, lambda: [TOPIC], lambda group: False)
    answer = groups.consumer_heartbeat(HeartbeatRequest(GROUP, "m1", 0, rebalance_timeout_ms=30000,
                                                        subscribed_names=(TOPIC,), owned={}), 0)
    assert answer.assignment == {TOPIC: frozenset({0})}
    assert groups.fence_owners(GROUP, TOPIC, 0, 10) == ["m1"]
    assert not groups.consumer.groups[GROUP].members
    groups.close()


def test_offset_delete_of_an_individually_committed_partition_is_refused(tmp_path):
    """IC-19: deleting the offset would leave the held ranges behind, so it is refused; plain partitions still go."""
    with EmbeddedBroker(tmp_path) as broker:
        prepare(broker, 10)
        consumer = key_range_consumer(broker.bootstrap)
        consumer.assign({TP: []})
        consumer.commit_ranges({TP: [(0, 3), (6, 6)]})
        consumer.close()
        client = RawClient(int(broker.bootstrap.rsplit(":", 1)[1]))
        deleted = client.request(47, 0, group_id=GROUP, topics=[{"name": TOPIC, "partitions": [{"partition_index": 0}]}])
        client.close()
        assert deleted.error_code.name == "none"
        assert [part.error_code.name for part in deleted.topics[0].partitions] == ["invalid_request"]
        assert plain_committed(broker.bootstrap) == 4


def test_a_commit_too_large_for_one_request_is_split_and_nothing_is_dropped(tmp_path):
    """IC-18: 70,000 ranges (more than the ~62,000 a 1,000,000-byte request holds) go as two OffsetCommits;
    the coordinator holds every one of them and answers them in CommittedRangeOffsets."""
    from kipcheck.impl.ic.client import PendingCommits

    ranges = [(2 * number + 1, 2 * number + 1) for number in range(70_000)]
    pending = PendingCommits(key_range_consumer("127.0.0.1:1").config.ic)
    for first, last in ranges:
        pending.add(TOPIC, 0, first, last)
    assert len(pending.take()) == 2
    with EmbeddedBroker(tmp_path) as broker:
        prepare(broker, 10)
        consumer = key_range_consumer(broker.bootstrap)
        consumer.assign({TP: []})
        assert consumer.commit_ranges({TP: ranges}) == {TP: "NONE"}
        consumer.close()
        reader = key_range_consumer(broker.bootstrap)
        assert reader._offsets.committed([TP]) == {TP: -1}            # offset 0 is not committed (IC-1)
        assert reader._offsets.committed_ranges[TP] == ranges
        reader.close()


def test_a_kip848_member_commits_ranges_validated_by_its_member_epoch(tmp_path):
    """IC-21 in group mode: commit_ranges carries the member id and epoch the coordinator validates, as a plain
    commit does; the ranges are held and a confluent-kafka consumer of the group reads the stable offset + 1."""
    with EmbeddedBroker(tmp_path, settings={"group.consumer.heartbeat.interval.ms": "500"}) as broker:
        prepare(broker, 30)
        consumer = key_range_consumer(broker.bootstrap)
        consumer.subscribe([TOPIC])
        offsets: list[int] = []
        for _ in range(100):
            offsets += [record.offset for record in consumer.poll(200)]
            if len(offsets) >= 30:
                break
        assert sorted(offsets) == list(range(30))
        assert consumer.commit_ranges({TP: [(0, 9), (20, 29)]}) == {TP: "NONE"}
        consumer.close()
        assert plain_committed(broker.bootstrap) == 10
        outsider = key_range_consumer(broker.bootstrap)
        assert outsider._offsets.committed([TP]) == {TP: 10}
        assert outsider._offsets.committed_ranges[TP] == [(20, 29)]
        outsider.close()
    assert_traces_pass(broker.trace_dir)
