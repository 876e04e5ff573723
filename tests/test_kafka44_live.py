"""Apache Kafka 4.4.0 itself, judged under the kafka-4.4 profile: a group's delivery limit lowered mid-run and its
renewals refused (SP-70, SP-72), and its dead-letter queue (SP-73, SP-74), spoken through the conformance probe
(kio) and written as share-partition traces; and Kafka 4.2.2 refusing the same group configs, which is why the
kafka-4.2 profile has no `alter_config`.

The probe's `check` steps observe the SPSO the share coordinator stored (SP-47); one past a record waiting in
archiving says its phase 2 finished (SP-74). What Kafka sent to the dead-letter topic is written as
`dead_lettered`, once the topic was read: phase 2 produced it, so the model must have had the record archiving (or
already known its phase 2 finished).

Skipped, with the reason in pytest's summary, where Java 17 or Maven is missing; `make test` installs both.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from kipcheck.oracle.check import check_file, check_lines
from kipcheck.oracle.conformance.probes.probe import Probe
from kipcheck.oracle.conformance.probes.tolerance import Timers
from kipcheck.oracle.conformance.targets import TargetOptions, resolve

pytestmark = pytest.mark.slow

QUIET = {"log_level": 0}
# The broker's settings, as the probe's trace headers say them (a short lock, Kafka 4.4's default limit of 5).
SETTINGS = {"group.share.record.lock.duration.ms": "2000", "group.share.min.record.lock.duration.ms": "1000",
            "group.share.delivery.count.limit": "5", "group.share.partition.max.record.locks": "100",
            "group.share.max.share.sessions": "6", "group.share.max.size": "6",
            "group.share.heartbeat.interval.ms": "1000", "group.share.min.heartbeat.interval.ms": "1000",
            # Kafka 4.4 computes a share group's assignment at most once a second by default: a new member would
            # be assigned its partitions, and they initialized, only after the probe's first fetch.
            "group.share.assignment.interval.ms": "0"}
WAIT_MS = 1500
SHARE_ACKNOWLEDGE, RENEW = 79, 4


@pytest.fixture(scope="module")
def kafka44(start_kafka_once):
    cluster = start_kafka_once("4.4", **{name.replace(".", "_"): value for name, value in SETTINGS.items()})
    return f"127.0.0.1:{cluster.ports[0]}"


def probe_of(bootstrap: str, name: str) -> Probe:
    """A probe of a fresh group reading from the earliest offset; its topics' share-partitions are initialized
    before anything is produced (probe.py)."""
    return Probe(resolve(f"wire://{bootstrap}", TargetOptions("kafka-4.4", SETTINGS)), name, Timers())


def alter(bootstrap: str, group: str, **configs) -> None:
    """IncrementalAlterConfigs SET on the group; a refusal raises KafkaException."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    resource = ConfigResource("GROUP", group, incremental_configs=[
        ConfigEntry(name.replace("_", "."), str(value), incremental_operation=AlterConfigOpType.SET)
        for name, value in configs.items()])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def altered(probe: Probe, tp: str, **settings) -> None:
    """The trace's `alter_config` step (SP-70), written once Kafka accepted the change."""
    probe.partitions[tp].add(probe.timers.now_ms(), "admin", "alter_config", settings)


def one_record_topic(probe: Probe, records: int) -> str:
    """A topic of one partition holding one log batch of `records`."""
    topic = probe.topic(1)
    probe.produce(topic, 0, [records])
    return f"{topic}:0"


def judged(probe: Probe, directory) -> list:
    verdicts = [check_file(path) for path in probe.finish(directory)]
    assert [verdict.machine for verdict in verdicts] == ["share-session", "share-partition"]
    return verdicts


def test_sp70_a_lowered_delivery_limit_delivers_a_record_once_more_then_archives_it(kafka44, tmp_path):
    """SP-70, SP-21: limit 5, a record released three times (count 3); the limit lowered to 2 does not archive it:
    it is delivered with count 4, and archived when released."""
    probe = probe_of(kafka44, "limit")
    tp = one_record_topic(probe, 1)
    alice = probe.member("alice")

    def delivered_and_released() -> list[int]:
        held = probe.fetch(alice, [tp], max_records=1, wait_ms=WAIT_MS).get(tp, [])
        probe.acknowledge(alice, {tp: [(first, last, "release") for first, last, _ in held]})
        return [count for _, _, count in held]

    counts = [delivered_and_released() for _ in range(3)]
    alter(kafka44, probe.group, share_delivery_count_limit=2)
    altered(probe, tp, delivery_count_limit=2)
    counts += [delivered_and_released() for _ in range(2)]
    probe.close(alice)
    assert counts == [[1], [2], [3], [4], []]
    assert [verdict.status for verdict in judged(probe, tmp_path)] == ["ok", "ok"]
    trace = (tmp_path / "limit.01.share-partition.jsonl").read_text().splitlines()
    as_kafka_42 = check_lines([trace[0].replace('"kafka-4.4"', '"kafka-4.2"'), *trace[1:]])
    assert as_kafka_42.status == "malformed" and "alter_config" in as_kafka_42.reason


def test_sp72_a_group_that_refuses_renewals(kafka44, tmp_path):
    """SP-72, SP-41: with share.renew.acknowledge.enable false a RENEW (ShareAcknowledge v2, IsRenewAck) of the
    member's own record is INVALID_RECORD_STATE; allowed again, it is NONE."""
    probe = probe_of(kafka44, "renew")
    tp = one_record_topic(probe, 1)
    alice = probe.member("alice")
    assert probe.fetch(alice, [tp], max_records=1, wait_ms=WAIT_MS).get(tp) == [[0, 0, 1]]
    answers = []
    for enabled in (False, True):
        alter(kafka44, probe.group, share_renew_acknowledge_enable=str(enabled).lower())
        altered(probe, tp, renew_acknowledge_enable=enabled)
        answers.append(_renew(probe, alice, tp))
    probe.close(alice, {tp: [(0, 0, "accept")]})
    assert answers == ["INVALID_RECORD_STATE", "NONE"]
    assert [verdict.status for verdict in judged(probe, tmp_path)] == ["ok", "ok"]


def _renew(probe: Probe, member, tp: str) -> str:
    """A ShareAcknowledge v2 renewing record 0 (the probe speaks v1, which has no RENEW), written as the
    partition's `acknowledge` step with `renew` (SP-41) and the session's `share_acknowledge`."""
    topic, _, partition = tp.rpartition(":")
    probe.timers.fit(0, 250)
    at_ms = probe.timers.now_ms()
    answer = member.connection.request(SHARE_ACKNOWLEDGE, 2, group_id=probe.group, member_id=member.member_id,
                                       share_session_epoch=member.epoch, is_renew_ack=True, topics=[{
                                           "topic_id": probe.topic_ids[topic], "partitions": [{
                                               "partition_index": int(partition), "acknowledgement_batches": [
                                                   {"first_offset": 0, "last_offset": 0,
                                                    "acknowledge_types": [RENEW]}]}]}])
    assert answer.error_code.name == "none"
    probe.sessions.add(at_ms, member.name, "share_acknowledge",
                       {"epoch": member.epoch, "acks": [{"tp": tp, "first": 0, "last": 0, "type": "renew"}]},
                       {"error": "NONE"})
    member.epoch += 1
    error = answer.responses[0].partitions[0].error_code.name.upper()
    probe.partitions[tp].add(at_ms, member.name, "acknowledge",
                             {"batches": [{"first": 0, "last": 0, "type": "renew"}], "renew": True},
                             {"error": error})
    return error


def test_sp73_sp74_a_dead_letter_queue_receives_what_was_rejected_and_exhausted(kafka44, tmp_path):
    """SP-73, SP-74: with a dead-letter topic and limit 2, a REJECT of 0 and a RELEASE of 2 at its second delivery
    send both to the topic (with their delivery counts), nothing else; a second REJECT of 0 before its phase 2 is
    INVALID_RECORD_STATE; each record Kafka sent there is archiving in the model when its `dead_lettered` comes."""
    probe = probe_of(kafka44, "dlq")
    dlq = f"dlq.{probe.group}"
    admin = AdminClient({"bootstrap.servers": kafka44, **QUIET})
    admin.create_topics([NewTopic(dlq, 1, 1, config={"errors.deadletterqueue.group.enable": "true"})])[dlq].result(30)
    alter(kafka44, probe.group, errors_deadletterqueue_topic_name=dlq, share_delivery_count_limit=2)
    tp = one_record_topic(probe, 4)
    altered(probe, tp, dead_letter_queue=True, delivery_count_limit=2)
    alice = probe.member("alice")
    assert probe.fetch(alice, [tp], max_records=4, wait_ms=WAIT_MS).get(tp) == [[0, 3, 1]]
    first = probe.acknowledge(alice, {tp: [(0, 0, "reject"), (1, 1, "accept"), (2, 2, "release"), (3, 3, "gap")]})
    again = probe.acknowledge(alice, {tp: [(0, 0, "reject")]})
    redelivered = probe.fetch(alice, [tp], max_records=4, wait_ms=WAIT_MS).get(tp, [])
    probe.acknowledge(alice, {tp: [(2, 2, "release")]})
    dead_letters = _dead_letters(kafka44, dlq, 2)
    for offset in sorted(dead_letters):
        probe.partitions[tp].add(probe.timers.now_ms(), "dead-letter-queue", "dead_lettered",
                                 {"first": offset, "last": offset})
    probe.close(alice)
    assert (first, redelivered) == ({tp: "NONE"}, [[2, 2, 2]])
    assert again in ({tp: "INVALID_RECORD_STATE"}, {tp: "NONE"}), "SP-74: before phase 2, or skipped after it"
    assert dead_letters == {0: ("1", "Offset rejected by client."),
                            2: ("2", "Offset delivery count exceeded the threshold.")}
    assert [verdict.status for verdict in judged(probe, tmp_path)] == ["ok", "ok"]


def _dead_letters(bootstrap: str, topic: str, wanted: int) -> dict[int, tuple[str, str]]:
    """The dead-letter topic's records: source offset -> (delivery count, message), from their headers."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kipcheck-dlq-reader", **QUIET})
    consumer.assign([TopicPartition(topic, 0, 0)])
    found: dict[int, tuple[str, str]] = {}
    deadline = time.monotonic() + 30
    while len(found) < wanted and time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is not None and message.error() is None:
            headers = {key: value.decode() for key, value in message.headers() or []}
            found[int(headers["__dlq.errors.offset"])] = (headers["__dlq.errors.delivery.count"],
                                                         headers["__dlq.errors.message"])
    consumer.close()
    return found


def test_kafka_42_refuses_kafka_44s_group_configs(start_kafka):
    """SP-70, SP-72, SP-73: Kafka 4.2.2 knows none of these group configs (INVALID_CONFIG), so the kafka-4.2 profile
    has no step that changes them."""
    kafka = start_kafka("4.2")
    bootstrap = f"127.0.0.1:{kafka.ports[0]}"
    for name, value in (("share_delivery_count_limit", 2), ("share_renew_acknowledge_enable", "false"),
                        ("errors_deadletterqueue_topic_name", "dlq.g")):
        with pytest.raises(KafkaException, match="INVALID_CONFIG|Unknown group config"):
            alter(bootstrap, "kipcheck-g", **{name: value})
