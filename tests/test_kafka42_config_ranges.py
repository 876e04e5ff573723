"""SP-45: Kafka 4.2's configuration ranges, held by the judge to kafka-4.2 traces and by the broker to its settings."""

from __future__ import annotations

import json

import pytest

from kipcheck.impl.broker.config import split_properties
from kipcheck.impl.share.config import ShareConfig
from kipcheck.oracle.check import check_lines

STEPS = [{"step": 1, "at_ms": 0, "actor": "producer", "op": "append", "args": {"count": 3}},
         {"step": 2, "at_ms": 0, "actor": "c1", "op": "acquire", "args": {"max_records": 3},
          "observed": {"records": [[0, 2, 1]]}}]


def trace(profile: str, config: dict) -> list[str]:
    header = {"format": "kipcheck-trace", "version": 1, "machine": "share-partition", "profile": profile,
              "config": config}
    return [json.dumps(header)] + [json.dumps(step) for step in STEPS]


@pytest.mark.parametrize("reference", [False, True])
@pytest.mark.parametrize("config, named", [
    ({"delivery_count_limit": 1}, "delivery_count_limit in 2..10"),
    ({"delivery_count_limit": 11}, "delivery_count_limit in 2..10"),
    ({"record_lock_duration_ms": 999}, "record_lock_duration_ms in 1000..3600000"),
    ({"record_lock_duration_ms": 3600001}, "record_lock_duration_ms in 1000..3600000"),
    ({"max_inflight_records": 99}, "max_inflight_records in 100..10000"),
    ({"max_inflight_records": 10001}, "max_inflight_records in 100..10000"),
])
def test_a_kafka_trace_outside_kafkas_ranges_breaks_sp45_at_the_header(config, named, reference):
    verdict = check_lines(trace("kafka-4.2", config), reference=reference)
    assert (verdict.status, verdict.clause, verdict.step) == ("violation", "SP-45", 0), verdict.summary()
    assert named in verdict.allowed and "the header breaks SP-45" in verdict.reason
    # The seed sets no bounds, and a kafka-4.2 run that declares its test-sized settings is judged as usual.
    assert check_lines(trace("kip", config), reference=reference), "kip has no Kafka ranges"
    assert check_lines(trace("kafka-4.2", {**config, "kafka_ranges": "waive"}), reference=reference)


def test_kafkas_bounds_themselves_pass_and_a_bad_waiver_is_malformed():
    assert check_lines(trace("kafka-4.2", {"delivery_count_limit": 2, "record_lock_duration_ms": 3600000,
                                           "max_inflight_records": 10000}))
    verdict = check_lines(trace("kafka-4.2", {"kafka_ranges": "yes"}))
    assert verdict.status == "malformed" and "kafka_ranges" in verdict.reason


@pytest.mark.parametrize("properties, message", [
    ({"group.share.delivery.count.limit": "11"}, "group.share.delivery.count.limit must be in 2..10"),
    ({"group.share.delivery.count.limit": "1"}, "group.share.delivery.count.limit must be in 2..10"),
    ({"group.share.partition.max.record.locks": "99"}, "group.share.partition.max.record.locks must be in 100..10000"),
    ({"group.share.record.lock.duration.ms": "2000"},
     "group.share.record.lock.duration.ms must be in 15000..60000 (group.share.min.record.lock.duration.ms"),
    ({"group.share.record.lock.duration.ms": "90000"}, "group.share.record.lock.duration.ms must be in 15000..60000"),
    ({"group.share.min.record.lock.duration.ms": "500"}, "group.share.min.record.lock.duration.ms must be in 1000..30000"),
    ({"group.share.max.record.lock.duration.ms": "20000"}, "group.share.max.record.lock.duration.ms must be in 30000..3600000"),
    ({"group.share.max.share.sessions": "10"}, "group.share.max.share.sessions (10) must be at least group.share.max.size (200)"),
])
def test_the_broker_refuses_kafka_42_settings_out_of_range_and_kip_takes_them(properties, message):
    with pytest.raises(ValueError, match=message.replace(".", r"\.").replace("(", r"\(").replace(")", r"\)")):
        split_properties(properties, "kafka-4.2")
    _, share = split_properties(properties, "kip")
    assert share.profile == "kip"


def test_a_lock_duration_within_lowered_bounds_is_taken():
    _, share = split_properties({"group.share.record.lock.duration.ms": "2000",
                                 "group.share.min.record.lock.duration.ms": "1000"}, "kafka-4.2")
    assert share.record_lock_duration_ms == 2000


def test_the_engine_waives_the_ranges_in_its_trace_only_for_test_sized_settings():
    assert "kafka_ranges" not in ShareConfig().trace_config(0)
    assert ShareConfig(record_lock_duration_ms=100).trace_config(0)["kafka_ranges"] == "waive"
    assert "kafka_ranges" not in ShareConfig(record_lock_duration_ms=100, profile="kip").trace_config(0)
