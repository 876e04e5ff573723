"""The proxy's parts in the test process: address rewriting, the pending send times, the settings."""

import pytest

from kipcheck.impl.wire.codec import build
from kipcheck.impl.wire.schemas import response_schema
from kipcheck.oracle.record.addresses import BrokerMap, rewrite
from kipcheck.oracle.record.proxy import Pending, _answered
from kipcheck.oracle.record.settings import RecordSettings


def brokers() -> BrokerMap:
    brokers = BrokerMap("127.0.0.1")
    brokers.add("127.0.0.1", 9092, 19092)
    brokers.on_new = lambda host, port: 19093  # a listener opened for a broker first named in an answer
    return brokers


@pytest.mark.parametrize("version", [2, 6])
def test_find_coordinator_names_the_proxy_in_every_version(version):
    """v0-v3 name the coordinator at the top level, v4+ in `coordinators`: one walk rewrites both."""
    where = {"node_id": 1, "host": "localhost", "port": 9092, "error_code": 0, "error_message": None}
    body = {"throttle_time": 0, **(where if version < 4 else {"coordinators": [{"key": "g", **where}]})}
    answer = rewrite(build(response_schema(10, version), body), brokers().listener_of)
    named = answer if version < 4 else answer.coordinators[0]
    assert (named.host, named.port) == ("127.0.0.1", 19092), "localhost is the broker at 127.0.0.1:9092"


def test_a_broker_first_named_in_metadata_gets_a_listener_and_nothing_else_changes():
    body = build(response_schema(3, 12), {"throttle_time": 0, "cluster_id": "c", "controller_id": 1, "topics": [],
                                          "brokers": [{"node_id": 1, "host": "127.0.0.1", "port": 9092, "rack": None},
                                                      {"node_id": 2, "host": "127.0.0.1", "port": 9093,
                                                       "rack": "r2"}]})
    answer = rewrite(body, brokers().listener_of)
    assert [(broker.node_id, broker.port, broker.rack) for broker in answer.brokers] == [(1, 19092, None),
                                                                                          (2, 19093, "r2")]
    untouched = build(response_schema(3, 12), {"throttle_time": 0, "cluster_id": "c", "controller_id": 1,
                                               "topics": [], "brokers": []})
    assert rewrite(untouched, brokers().listener_of) is untouched


def test_produce_with_acks_0_is_never_answered_in_any_header_version():
    from kipcheck.impl.consumer.connection import encode_request

    for version in (3, 8, 9, 11):
        for acks, answered in ((0, False), (1, True), (-1, True)):
            frame = encode_request(0, version, 7, "client", {"transactional_id": "tx" if version % 2 else None,
                                                            "acks": acks, "timeout": 1000, "topic_data": []})[4:]
            assert _answered(0, version, frame) is answered, (version, acks)


def test_pending_gives_the_earliest_send_time_not_yet_observed():
    pending = Pending()
    assert pending.earliest() is None
    for sent_ms in (5, 3, 3, 9):
        pending.add(sent_ms)
    pending.done(3)
    assert pending.earliest() == 3
    pending.done(3)
    pending.done(5)
    assert pending.earliest() == 9


def test_settings_take_kafka_names_and_refuse_others():
    settings = RecordSettings.from_properties({"queued.max.request.bytes": "1000",
                                               "group.share.record.lock.duration.ms": "15000",
                                               "group.share.min.record.lock.duration.ms": "1000"}, "kafka-4.2")
    assert (settings.queued_max_bytes, settings.share.lock_ms, settings.min_lock_duration_ms) == (1000, 15000, 1000)
    with pytest.raises(ValueError, match="unknown setting 'queued.max.requests'"):
        RecordSettings.from_properties({"queued.max.requests": "1"}, "kafka-4.2")
    with pytest.raises(ValueError, match="max.connections must be at least 1"):
        RecordSettings.from_properties({"max.connections": "0"}, "kafka-4.2")
