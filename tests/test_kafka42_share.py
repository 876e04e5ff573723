"""The kafka-4.2 profile in the reference broker's parts and on the wire, every trace judged.

The engine with its own clock (RENEW's lock, SP-41), the share coordinator
(ST-2), and raw kio requests (kipcheck.oracle.conformance.probes.raw_client.RawClient)
where no real client goes: a ShareFetch over two partitions. The wire
behaviour of RENEW, record_limit and acknowledgements around SPSO is the
conformance scenarios' (oracle/conformance/scenarios/kafka42.py, run by
tests/test_e2e_broker.py under both profiles).
"""

from __future__ import annotations

import json

import harness  # tests/harness.py
import pytest
from kio.schema.errors import ErrorCode

from kipcheck.impl.broker.metadata import topic_id_of
from kipcheck.impl.share.config import ShareConfig
from kipcheck.impl.share.coordinator import ShareCoordinator
from kipcheck.impl.share.partition import ACKNOWLEDGED, SharePartition
from kipcheck.impl.share.tracing import TraceWriter
from kipcheck.oracle.check import check_file
from kipcheck.oracle.conformance.scenarios.clients import produce
from kipcheck.oracle.conformance.scenarios.kafka42 import (SCENARIOS, RECORD_LIMIT, SHARE_FETCH,
                                                         WireMember)

PRODUCE, CREATE_TOPICS = 0, 19
KEY = "g:orders:0"


def judged(broker) -> list[str]:
    """`kipcheck check` of every trace the broker wrote, as one summary line each (the broker stopped first)."""
    broker.stop()
    return [check_file(path).summary() for path in sorted(broker.trace_dir.rglob("*.jsonl"))]


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
    writer = TraceWriter(tmp_path / "traces", ShareConfig(record_lock_duration_ms=1000))
    partition = SharePartition(writer.config, trace=writer.partition(KEY, writer.config))
    partition.on_append(0, 5, 0)
    assert partition.acquire("m1", 5, 0) == [(0, 4, 1)]
    assert partition.acknowledge("m1", [(0, 2, "renew")], 500) == "INVALID_REQUEST"   # no IsRenewAck
    assert partition.acknowledge("m1", [(0, 2, "renew")], 500, renew=True) == "NONE"
    assert partition.expire_locks(1000) == 2                                             # 3-4 only
    assert partition.acquired_by("m1") == [(0, 2, 1)]
    # 3 is no longer acquired: the request fails, but the renewal of 0-2 before it stands.
    assert partition.acknowledge("m1", [(0, 2, "renew"), (3, 3, "accept")], 1200, renew=True) == "INVALID_RECORD_STATE"
    assert partition.expire_locks(1500) == 0 and partition.acquired_by("m1") == [(0, 2, 1)]
    assert partition.expire_locks(2200) == 3
    assert partition.states() == [(0, 2, "available", 1), (3, 4, "available", 1)]
    partition.trace_check(2200)
    writer.close()
    verdicts = [check_file(path) for path in writer.paths()]
    assert verdicts and all(verdicts), [verdict.summary() for verdict in verdicts]


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
    member = WireMember(broker.port, "g", "m1", "orders")
    topics = [{"topic_id": topic_id_of("orders"), "partitions": [
        {"partition_index": index, "acknowledgement_batches": []} for index in range(2)]}]
    answer = member.client.request(SHARE_FETCH, 2, group_id="g", member_id="m1", share_session_epoch=0,
                                   max_wait=500, min_bytes=1, max_bytes=1 << 20, max_records=6, batch_size=6,
                                   share_acquire_mode=RECORD_LIMIT, is_renew_ack=False, forgotten_topics_data=[],
                                   topics=topics)
    member.close()
    acquired = sorted(batch.last_offset - batch.first_offset + 1 for topic in answer.responses
                      for partition in topic.partitions for batch in partition.acquired_records)
    assert acquired == [2, 4]
    verdicts = judged(broker)
    assert verdicts and all(line.startswith("ok") for line in verdicts), verdicts
    asked = sorted(json.loads(line)["args"]["max_records"] for path in broker.trace_dir.rglob("share-partition*.jsonl")
                   for line in path.read_text().splitlines() if '"op":"acquire"' in line)
    assert asked == [2, 6]


def test_the_broker_tells_the_oracle_it_flags_kafkas_straddling_failure(tmp_path):
    """SP-40: the kafka-4.2 engine answers INVALID_RECORD_STATE where Kafka 4.2 fails the request, and its
    share-partition traces say `straddle_npe: flag`, so the oracle expects exactly that answer."""
    result = SCENARIOS["kafka42-acks-around-spso"](tmp_path / "scenario")
    assert result.ok, result.summary()
    headers = [json.loads(path.read_text().splitlines()[0])
               for path in (tmp_path / "scenario" / "traces").glob("share-partition*.jsonl")]
    assert headers and all(header["config"]["straddle_npe"] == "flag" for header in headers)


@pytest.mark.parametrize("value, duration_ms", [
    ("by_duration:PT1H", 3_600_000), ("by_duration:P1DT2H3M4.05S", 93_784_050), ("by_duration:pt0.5s", 500),
    ("by_duration:P", None), ("by_duration:PT", None), ("by_duration:1h", None), ("by_duration:-PT1H", None),
])
def test_share_auto_offset_reset_by_duration_reads_java_durations(value, duration_ms):
    if duration_ms is None:
        with pytest.raises(ValueError, match="share.auto.offset.reset must be one of latest, earliest, by_duration"):
            ShareConfig.from_properties({"share.auto.offset.reset": value})
    else:
        assert ShareConfig.from_properties({"share.auto.offset.reset": value}).reset_duration_ms == duration_ms


def test_by_duration_starts_a_new_share_partition_at_the_first_recent_batch(start_broker, raw_client):
    """share.auto.offset.reset=by_duration:PT1H: records stamped long ago are skipped, recent ones delivered;
    the traces, whose start_offset says where the share-partition began, are judged."""
    broker = start_broker(share_auto_offset_reset="by_duration:PT1H")
    client = raw_client(broker)
    created = client.request(CREATE_TOPICS, 7, timeout=5000, validate_only=False, topics=[
        {"name": "orders", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}])
    assert created.topics[0].error_code == ErrorCode.none
    old = client.request(PRODUCE, 9, transactional_id=None, acks=-1, timeout=5000, topic_data=[
        {"name": "orders", "partition_data": [{"index": 0, "records": harness.record_batch(3)}]}])   # 2026-01-01
    assert old.responses[0].partition_responses[0].error_code == ErrorCode.none
    produce(broker.bootstrap, "orders", [(0, None, b"recent")])                                    # stamped now
    member = WireMember(broker.port, "g", "m1", "orders")
    assert member.acquired(100) == [(3, 3, 1)]
    member.close()
    verdicts = judged(broker)
    assert verdicts and all(line.startswith("ok") for line in verdicts), verdicts
