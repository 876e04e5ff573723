"""The reference broker's kafka-4.2 profile on the wire, request by request, and its traces judged.

Raw kio requests (kipcheck.oracle.conformance.wire.RawClient) read the exact
error codes Apache Kafka 4.2 gives where the profile departs from the KIP
text; every trace the broker wrote must then be allowed by the oracle.
"""

from __future__ import annotations

import json

import harness  # tests/harness.py
from kio.schema.errors import ErrorCode

from kipcheck.impl.broker.metadata import topic_id_of
from kipcheck.impl.share.config import ShareConfig
from kipcheck.impl.share.coordinator import ShareCoordinator
from kipcheck.impl.share.partition import ACKNOWLEDGED, SharePartition
from kipcheck.impl.share.tracing import TraceWriter
from kipcheck.oracle.check import check_file

PRODUCE, CREATE_TOPICS, SHARE_GROUP_HEARTBEAT, SHARE_FETCH, SHARE_ACKNOWLEDGE = 0, 19, 76, 78, 79
ACCEPT, REJECT, RENEW = 1, 3, 4
RECORD_LIMIT = 1
KEY = "g:orders:0"


class ShareMember:
    """One member of group "g" on topic `topic` (one partition), speaking ShareFetch and ShareAcknowledge v1."""

    def __init__(self, client, topic: str, member: str = "m1"):
        self.client, self.topic, self.member, self.epoch = client, topic, member, 0
        joined = client.request(SHARE_GROUP_HEARTBEAT, 1, group_id="g", member_id=member, member_epoch=0,
                                subscribed_topic_names=[topic])
        assert joined.error_code == ErrorCode.none

    def _partitions(self, batches):
        return [{"topic_id": topic_id_of(self.topic), "partitions": [
            {"partition_index": 0, "acknowledgement_batches": [
                {"first_offset": first, "last_offset": last, "acknowledge_types": [kind]} for first, last, kind in batches]}]}]

    def fetch(self, max_records: int = 100):
        """The acquired records as (first, last, delivery count)."""
        answer = self.client.request(SHARE_FETCH, 1, group_id="g", member_id=self.member,
                                     share_session_epoch=self.epoch, max_wait=500, min_bytes=1, max_bytes=1 << 20,
                                     max_records=max_records, batch_size=max_records, forgotten_topics_data=[],
                                     topics=self._partitions([]))
        self.epoch += 1
        partition = answer.responses[0].partitions[0]
        assert partition.error_code == ErrorCode.none
        return [(batch.first_offset, batch.last_offset, batch.delivery_count) for batch in partition.acquired_records]

    def acknowledge(self, *batches) -> ErrorCode:
        """One ShareAcknowledge of batches (first, last, type); the partition's error."""
        answer = self.client.request(SHARE_ACKNOWLEDGE, 1, group_id="g", member_id=self.member,
                                     share_session_epoch=self.epoch, topics=self._partitions(batches))
        self.epoch += 1
        assert answer.error_code == ErrorCode.none
        return answer.responses[0].partitions[0].error_code


def topic_with_records(client, topic: str, count: int) -> None:
    created = client.request(CREATE_TOPICS, 7, timeout=5000, validate_only=False, topics=[
        {"name": topic, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}])
    assert created.topics[0].error_code == ErrorCode.none
    produced = client.request(PRODUCE, 9, transactional_id=None, acks=-1, timeout=5000, topic_data=[
        {"name": topic, "partition_data": [{"index": 0, "records": harness.record_batch(count)}]}])
    assert produced.responses[0].partition_responses[0].error_code == ErrorCode.none


def judged(broker) -> list[str]:
    """`kipcheck check` of every trace the broker wrote, as one summary line each (the broker stopped first)."""
    broker.stop()
    return [check_file(path).summary() for path in sorted(broker.trace_dir.rglob("*.jsonl"))]


def test_a_shared_offset_below_spso_is_skipped_and_the_request_succeeds(start_broker, raw_client):
    """SP-11: [0, 5] then [5, 9] after 0-5 were accepted: both batches skip offset 5, below SPSO 6."""
    broker = start_broker(share_auto_offset_reset="earliest")
    client = raw_client(broker)
    topic_with_records(client, "orders", 10)
    member = ShareMember(client, "orders")
    assert member.fetch() == [(0, 9, 1)]
    # At or above SPSO the shared record is in a pending transition: the whole request fails.
    assert member.acknowledge((0, 3, ACCEPT), (3, 5, ACCEPT)) == ErrorCode.invalid_record_state
    assert member.acknowledge((0, 5, ACCEPT)) == ErrorCode.none
    assert member.acknowledge((0, 5, ACCEPT), (5, 9, REJECT)) == ErrorCode.none
    verdicts = judged(broker)
    assert verdicts and all(line.startswith("ok") for line in verdicts), verdicts


def test_a_batch_straddling_spso_of_an_empty_window_is_invalid_record_state(start_broker, raw_client):
    """SP-40: where Kafka 4.2 fails the whole request, the broker answers INVALID_RECORD_STATE and its
    traces say `straddle_npe: flag`, so the oracle expects exactly that."""
    broker = start_broker(share_auto_offset_reset="earliest")
    client = raw_client(broker)
    topic_with_records(client, "orders", 5)
    member = ShareMember(client, "orders")
    assert member.fetch() == [(0, 4, 1)]
    assert member.acknowledge((0, 4, ACCEPT)) == ErrorCode.none
    assert member.acknowledge((3, 6, ACCEPT)) == ErrorCode.invalid_record_state
    verdicts = judged(broker)
    assert verdicts and all(line.startswith("ok") for line in verdicts), verdicts
    partition_traces = list(broker.trace_dir.rglob("share-partition*.jsonl"))
    assert partition_traces and all(json.loads(path.read_text().splitlines()[0])["config"]["straddle_npe"] == "flag"
                                    for path in partition_traces)


def test_an_initialize_with_state_epoch_minus_one_is_not_fenced_and_lowers_no_fence(tmp_path):
    """ST-2: Kafka 4.2 stores -1 but keeps fencing against the highest epoch, across compaction and restart;
    the share-state trace the coordinator writes is judged."""
    config = ShareConfig()
    writer = TraceWriter(tmp_path / "traces", config)
    coordinator = ShareCoordinator(tmp_path / "data", config, fsync=False, trace_writer=writer, compact_bytes=1)
    assert coordinator.initialize(KEY, 3, 0) == "NONE"
    assert coordinator.initialize(KEY, 2, 5) == "FENCED_STATE_EPOCH"
    assert coordinator.initialize(KEY, -1, 5) == "NONE"      # compact_bytes=1: the log is rewritten every time
    assert coordinator.read(KEY)[:3] == ("NONE", -1, 5)
    assert coordinator.write(KEY, 2, -1, [(5, 6, ACKNOWLEDGED, 1)]) == "FENCED_STATE_EPOCH"
    assert coordinator.write(KEY, 3, -1, [(5, 6, ACKNOWLEDGED, 1)]) == "NONE"
    restarted = ShareCoordinator(tmp_path / "data", config, fsync=False, trace_writer=writer)
    assert restarted.initialize(KEY, 1, 5) == "FENCED_STATE_EPOCH"
    assert restarted.read(KEY) == ("NONE", -1, 5, [(5, 6, ACKNOWLEDGED, 1)])
    writer.close()
    verdicts = [check_file(path) for path in writer.paths()]
    assert verdicts and all(verdicts), [verdict.summary() for verdict in verdicts]


def test_renew_restarts_the_lock_and_renewals_before_a_failing_batch_stand(tmp_path):
    """SP-41 on the engine, with its own clock: the trace it writes is judged."""
    writer = TraceWriter(tmp_path / "traces", ShareConfig(record_lock_duration_ms=100))
    partition = SharePartition(writer.config, trace=writer.partition(KEY, writer.config))
    partition.on_append(0, 5, 0)
    assert partition.acquire("m1", 5, 0) == [(0, 4, 1)]
    assert partition.acknowledge("m1", [(0, 2, "renew")], 50) == "INVALID_REQUEST"   # no IsRenewAck
    assert partition.acknowledge("m1", [(0, 2, "renew")], 50, renew=True) == "NONE"
    assert partition.expire_locks(100) == 2                                             # 3-4 only
    assert partition.acquired_by("m1") == [(0, 2, 1)]
    # 3 is no longer acquired: the request fails, but the renewal of 0-2 before it stands.
    assert partition.acknowledge("m1", [(0, 2, "renew"), (3, 3, "accept")], 120, renew=True) == "INVALID_RECORD_STATE"
    assert partition.expire_locks(150) == 0 and partition.acquired_by("m1") == [(0, 2, 1)]
    assert partition.expire_locks(220) == 3
    assert partition.states() == [(0, 2, "available", 1), (3, 4, "available", 1)]
    partition.trace_check(220)
    writer.close()
    verdicts = [check_file(path) for path in writer.paths()]
    assert verdicts and all(verdicts), [verdict.summary() for verdict in verdicts]


def share_fetch_v2(client, member: str, epoch: int, topic: str, acks=(), renew: bool = False, max_records: int = 100):
    wait_ms = max_bytes = min_bytes = 0 if renew else None
    return client.request(
        SHARE_FETCH, 2, group_id="g", member_id=member, share_session_epoch=epoch,
        max_wait=wait_ms if renew else 500, min_bytes=min_bytes if renew else 1,
        max_bytes=max_bytes if renew else 1 << 20, max_records=max_records, batch_size=100,
        is_renew_ack=renew, forgotten_topics_data=[], topics=[{"topic_id": topic_id_of(topic), "partitions": [
            {"partition_index": 0, "acknowledgement_batches": [
                {"first_offset": first, "last_offset": last, "acknowledge_types": [kind]} for first, last, kind in acks]}]}])


def test_renew_on_the_wire_versions_1_and_2(start_broker, raw_client):
    """SP-41 through ShareFetch and ShareAcknowledge v2 (kio's own schemas); the broker's traces are judged."""
    broker = start_broker(share_auto_offset_reset="earliest")
    client = raw_client(broker)
    topic_with_records(client, "orders", 5)
    member = ShareMember(client, "orders")
    assert member.fetch(max_records=3) == [(0, 4, 1)]                          # a whole log batch (SP-6)
    renewing = share_fetch_v2(client, "m1", 1, "orders", acks=[(0, 1, RENEW)], renew=True)
    assert renewing.error_code == ErrorCode.invalid_request                    # max_records must be 0 too
    renewing = share_fetch_v2(client, "m1", 1, "orders", acks=[(0, 1, RENEW)], renew=True, max_records=0)
    partition = renewing.responses[0].partitions[0]
    assert renewing.error_code == ErrorCode.none and partition.acknowledge_error_code == ErrorCode.none
    assert not partition.acquired_records                                      # a renewing fetch fetches nothing
    member.epoch = 2
    assert member.acknowledge((2, 2, RENEW)) == ErrorCode.invalid_request      # v1 knows no RENEW
    answer = client.request(SHARE_ACKNOWLEDGE, 2, group_id="g", member_id="m1", share_session_epoch=3,
                            is_renew_ack=False, topics=member._partitions([(2, 2, RENEW)]))
    assert answer.responses[0].partitions[0].error_code == ErrorCode.invalid_request   # no IsRenewAck
    answer = client.request(SHARE_ACKNOWLEDGE, 2, group_id="g", member_id="m1", share_session_epoch=4,
                            is_renew_ack=True, topics=member._partitions([(2, 4, RENEW)]))
    assert answer.responses[0].partitions[0].error_code == ErrorCode.none
    assert answer.acquisition_lock_timeout.total_seconds() == 30
    member.epoch = 5
    assert member.acknowledge((0, 4, ACCEPT)) == ErrorCode.none               # renewed records stay acquired
    verdicts = judged(broker)
    assert verdicts and all(line.startswith("ok") for line in verdicts), verdicts
    renewals = [json.loads(line)["args"] for path in broker.trace_dir.rglob("share-partition*.jsonl")
                for line in path.read_text().splitlines() if '"type":"renew"' in line]
    # The fetch's renewal and two ShareAcknowledges, one without IsRenewAck; v1's never reached the partition.
    assert [args.get("renew", False) for args in renewals] == [True, False, True], renewals


def fetch_v2(client, member: str, epoch: int, topic: str, partitions: int, max_records: int, mode: int):
    """A ShareFetch v2 of `partitions` partitions: {partition: [(first, last, delivery count)]}."""
    answer = client.request(
        SHARE_FETCH, 2, group_id="g", member_id=member, share_session_epoch=epoch, max_wait=500, min_bytes=1,
        max_bytes=1 << 20, max_records=max_records, batch_size=max_records, share_acquire_mode=mode,
        is_renew_ack=False, forgotten_topics_data=[], topics=[{"topic_id": topic_id_of(topic), "partitions": [
            {"partition_index": index, "acknowledgement_batches": []} for index in range(partitions)]}])
    assert answer.error_code == ErrorCode.none
    return {partition.partition_index: [(batch.first_offset, batch.last_offset, batch.delivery_count)
                                        for batch in partition.acquired_records]
            for topic in answer.responses for partition in topic.partitions}


def test_record_limit_acquires_exactly_max_records_and_the_rest_of_the_batch_waits(start_broker, raw_client):
    """SP-42 through ShareFetch v2's ShareAcquireMode; an unknown mode is refused; the traces are judged."""
    broker = start_broker(share_auto_offset_reset="earliest")
    client = raw_client(broker)
    topic_with_records(client, "orders", 5)
    ShareMember(client, "orders", "m1")
    ShareMember(client, "orders", "m2")
    assert fetch_v2(client, "m1", 0, "orders", 1, 3, RECORD_LIMIT) == {0: [(0, 2, 1)]}
    assert fetch_v2(client, "m2", 0, "orders", 1, 3, RECORD_LIMIT) == {0: [(3, 4, 1)]}   # the rest of the batch
    refused = client.request(SHARE_FETCH, 2, group_id="g", member_id="m1", share_session_epoch=1, max_wait=0,
                             min_bytes=1, max_bytes=1 << 20, max_records=3, batch_size=3, share_acquire_mode=2,
                             is_renew_ack=False, forgotten_topics_data=[], topics=[])
    assert refused.error_code == ErrorCode.invalid_request
    verdicts = judged(broker)
    assert verdicts and all(line.startswith("ok") for line in verdicts), verdicts
    modes = [json.loads(line)["args"].get("acquire_mode") for path in broker.trace_dir.rglob("share-partition*.jsonl")
             for line in path.read_text().splitlines() if '"op":"acquire"' in line]
    assert modes == ["record_limit", "record_limit"]


def test_each_partition_of_a_share_fetch_gets_what_the_ones_before_it_left(start_broker, raw_client):
    """The max_records of a share-partition trace is what was left of the ShareFetch's MaxRecords."""
    broker = start_broker(share_auto_offset_reset="earliest")
    client = raw_client(broker)
    created = client.request(CREATE_TOPICS, 7, timeout=5000, validate_only=False, topics=[
        {"name": "orders", "num_partitions": 2, "replication_factor": 1, "assignments": [], "configs": []}])
    assert created.topics[0].error_code == ErrorCode.none
    for index in range(2):
        client.request(PRODUCE, 9, transactional_id=None, acks=-1, timeout=5000, topic_data=[
            {"name": "orders", "partition_data": [{"index": index, "records": harness.record_batch(4)}]}])
    ShareMember(client, "orders")
    acquired = fetch_v2(client, "m1", 0, "orders", 2, 6, RECORD_LIMIT)
    assert sorted(last - first + 1 for runs in acquired.values() for first, last, _ in runs) == [2, 4]
    verdicts = judged(broker)
    assert verdicts and all(line.startswith("ok") for line in verdicts), verdicts
    asked = sorted(json.loads(line)["args"]["max_records"] for path in broker.trace_dir.rglob("share-partition*.jsonl")
                   for line in path.read_text().splitlines() if '"op":"acquire"' in line)
    assert asked == [2, 6]
