"""CreatePartitions (API 37) on the reference broker: Kafka 4.2's answers, measured against a live Kafka 4.2 in the same
test, durable across kill -9, and seen at once by Metadata, KIP-848 consumer groups and share groups.

The differential test sends the same sequence of requests to both brokers (each case changes what the next one sees,
so both must agree all along) and compares every answer: each topic's error code and message (in any order: Kafka
answers in its hash map's order); then the partition counts Metadata reports (Kafka's brokers learn a new count a moment after the controller answers, so
its count is waited for). A broker id in an assignment is written relative to the broker's own node id, which
differs between the two (0 and 1).
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewPartitions

from kipcheck.impl.consumer.connection import BrokerConnection
from kipcheck.oracle.conformance.scenarios.clients import QUIET, create_topic, produce
from kipcheck.oracle.conformance.targets.embedded import DEFAULT_LAUNCHER, EmbeddedBroker
from expansion_broker_bugs import launcher

CREATE_PARTITIONS, METADATA = 37, 3
NODE, OTHER = "node", "other"  # this broker's node id, and one the cluster does not have


def grow(name: str, count: int, *assignments: list) -> dict:
    return {"name": name, "count": count, "assignments": None if not assignments else
            [{"broker_ids": replicas} for replicas in assignments]}


# (what the case is, topics, validate_only, timeout_ms)
CASES = [
    ("a decrease", [grow("grow-a", 2)], False, 30000),
    ("the same count", [grow("grow-a", 3)], False, 30000),
    ("zero", [grow("grow-a", 0)], False, 30000),
    ("an unknown topic", [grow("no-such-topic", 5)], False, 30000),
    ("validate only: an increase", [grow("grow-a", 5)], True, 30000),
    ("validate only: a decrease", [grow("grow-a", 1)], True, 30000),
    ("validate only: a broker the cluster lacks", [grow("grow-b", 3, [OTHER])], True, 30000),
    ("an assignment to this broker", [grow("grow-b", 3, [NODE])], False, 30000),
    ("an assignment to a broker the cluster lacks", [grow("grow-b", 4, [OTHER])], False, 30000),
    ("too few assignments", [grow("grow-b", 5, [NODE])], False, 30000),
    ("too many assignments", [grow("grow-b", 4, [NODE], [NODE])], False, 30000),
    ("an empty replica list", [grow("grow-b", 5, [], [NODE])], False, 30000),
    ("one broker twice", [grow("grow-b", 4, [NODE, NODE])], False, 30000),
    ("two replicas, one unknown", [grow("grow-b", 4, [NODE, OTHER])], False, 30000),
    ("unknown, an increase and a decrease in one request",
     [grow("grow-a", 4), grow("no-such-topic", 4), grow("grow-b", 1)], False, 30000),
    ("a topic named twice", [grow("grow-a", 6), grow("grow-a", 7), grow("grow-b", 4)], False, 30000),
    ("a timeout of zero", [grow("grow-a", 9), grow("no-such-topic", 2), grow("grow-b", 2)], False, 0),
    ("a negative timeout", [grow("grow-a", 9)], False, -1),
    ("a timeout of zero with a topic named twice", [grow("grow-b", 9), grow("grow-b", 9)], False, 0),
    ("nothing asked", [], False, 30000),
]
FINAL_COUNTS = {"grow-a": 4, "grow-b": 4}


class Cluster:
    """One broker spoken to over the wire with kio (impl/consumer's connection)."""

    def __init__(self, bootstrap: str):
        host, port = bootstrap.split(",")[0].rsplit(":", 1)
        self.connection = BrokerConnection(host, int(port), "create-partitions-test", 60000, 100_000_000)
        self.node_id = self.metadata([]).brokers[0].node_id

    def metadata(self, names: list[str]):
        return self.connection.request(METADATA, 12, topics=[{"name": name, "topic_id": None} for name in names],
                                       allow_auto_topic_creation=False, include_topic_authorized_operations=False)

    def counts(self, names: list[str]) -> dict[str, int]:
        return {topic.name: len(topic.partitions) for topic in self.metadata(names).topics if not topic.error_code.value}

    def create_partitions(self, topics: list[dict], validate_only: bool, timeout_ms: int, version: int = 3) -> list:
        ids = {NODE: self.node_id, OTHER: self.node_id + 1}
        topics = [{**topic, "assignments": None if topic["assignments"] is None else
                   [{"broker_ids": [ids[replica] for replica in assignment["broker_ids"]]}
                    for assignment in topic["assignments"]]} for topic in topics]
        answer = self.connection.request(CREATE_PARTITIONS, version, topics=topics, timeout=timeout_ms,
                                         validate_only=validate_only)
        return [(result.name, result.error_code.name.upper(), self._relative(result.error_message))
                for result in answer.results]

    def _relative(self, message: str | None) -> str | None:
        if message is None:
            return None
        return message.replace(f"broker {self.node_id + 1},", f"broker {OTHER},") \
            .replace(f"broker {self.node_id} ", f"broker {NODE} ")


def answers_of(bootstrap: str, settle) -> list:
    """Every case's answers, then the final counts (`settle` waits for them where a broker is slow to show them)."""
    create_topic(bootstrap, "grow-a", 3)
    create_topic(bootstrap, "grow-b", 2)
    cluster = Cluster(bootstrap)
    try:
        answers = [(name, cluster.create_partitions(topics, validate_only, timeout_ms))
                   for name, topics, validate_only, timeout_ms in CASES]
        answers.append(("version 0", cluster.create_partitions([grow("grow-a", 2)], False, 30000, version=0)))
        answers.append(("counts", settle(lambda: cluster.counts(sorted(FINAL_COUNTS)))))
    finally:
        cluster.connection.close()
    return answers


def eventually(read, expected=FINAL_COUNTS, timeout_s: float = 30):
    deadline = time.monotonic() + timeout_s
    while (value := read()) != expected and time.monotonic() < deadline:
        time.sleep(0.2)
    return value


def test_create_partitions_answers_as_kafka_4_2(start_broker, start_kafka):
    kafka = start_kafka("4.2")
    reference = start_broker()
    expected = answers_of(kafka.bootstrap, eventually)
    assert dict(expected)["counts"] == FINAL_COUNTS, "the cases leave grow-a and grow-b at 4 partitions on Kafka"
    assert dict(expected)["an unknown topic"] == [("no-such-topic", "UNKNOWN_TOPIC_OR_PARTITION", None)]
    observed = answers_of(reference.bootstrap, lambda read: read())  # no waiting: at once
    for (case, kafka_answer), (_, answer) in zip(expected, observed):
        assert sorted(answer, key=str) == sorted(kafka_answer, key=str), case


def test_the_reference_broker_refuses_what_kafka_refuses(start_broker):
    """The answers measured on Kafka 4.2.2 (the differential test above re-measures them where Kafka runs)."""
    answers = dict(answers_of(start_broker().bootstrap, lambda read: read()))
    assert answers["a decrease"] == [("grow-a", "INVALID_PARTITIONS",
                                      "The topic grow-a currently has 3 partition(s); 2 would not be an increase.")]
    assert answers["the same count"] == [("grow-a", "INVALID_PARTITIONS", "Topic already has 3 partition(s).")]
    assert answers["validate only: an increase"] == [("grow-a", "NONE", None)]
    assert answers["an assignment to this broker"] == [("grow-b", "NONE", None)]
    assert answers["an assignment to a broker the cluster lacks"] == [("grow-b", "INVALID_REPLICA_ASSIGNMENT", (
        f"The manual partition assignment includes broker {OTHER}, but no such broker is registered."))]
    assert answers["too few assignments"] == [("grow-b", "INVALID_REPLICA_ASSIGNMENT", (
        "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified."))]
    assert answers["one broker twice"] == [("grow-b", "INVALID_REPLICA_ASSIGNMENT", (
        f"The manual partition assignment includes the broker {NODE} more than once."))]
    assert answers["unknown, an increase and a decrease in one request"] == [
        ("no-such-topic", "UNKNOWN_TOPIC_OR_PARTITION", None), ("grow-a", "NONE", None),
        ("grow-b", "INVALID_PARTITIONS", "The topic grow-b currently has 3 partition(s); 1 would not be an increase.")]
    assert answers["a topic named twice"] == [("grow-a", "INVALID_REQUEST", "Duplicate topic name."),
                                              ("grow-b", "NONE", None)]
    assert answers["a timeout of zero"] == [(name, "REQUEST_TIMED_OUT", None)
                                            for name in ("grow-a", "no-such-topic", "grow-b")]
    assert answers["counts"] == FINAL_COUNTS


def test_the_reference_broker_bounds_a_topic_and_the_broker(start_broker):
    broker = start_broker(max_broker_partitions=20)
    create_topic(broker.bootstrap, "bounded", 2)
    cluster = Cluster(broker.bootstrap)
    try:
        assert cluster.create_partitions([grow("bounded", 21)], False, 30000) == [
            ("bounded", "POLICY_VIOLATION", "the broker hosts 2 partitions: 19 more would exceed "
                                            "max.broker.partitions (20)")]
        assert cluster.create_partitions([grow("bounded", 1001)], True, 30000)[0][1] == "INVALID_PARTITIONS"
        assert cluster.counts(["bounded"]) == {"bounded": 2}
    finally:
        cluster.connection.close()


def grown_and_killed(work_dir, launcher=DEFAULT_LAUNCHER) -> tuple[dict[str, int], list]:
    """The partition counts and the records a broker has after a topic grew and it was killed -9."""
    with EmbeddedBroker(work_dir, launcher=launcher) as broker:
        create_topic(broker.bootstrap, "orders", 2)
        produce(broker.bootstrap, "orders", [(index % 2, b"k", b"before-%d" % index) for index in range(6)])
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
        admin.create_partitions([NewPartitions("orders", 5)])["orders"].result(30)
        broker.kill()
        broker.start()
        cluster = Cluster(broker.bootstrap)
        try:
            counts = cluster.counts(["orders"])
        finally:
            cluster.connection.close()
        if counts["orders"] == 5:
            produce(broker.bootstrap, "orders", [(4, b"k", b"after")])
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "reader", "auto.offset.reset": "earliest",
                             "enable.auto.commit": False, **QUIET})
        consumer.subscribe(["orders"])
        values, deadline = [], time.monotonic() + 60
        while len(values) < counts["orders"] + 2 and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                values.append((message.partition(), message.value()))
        consumer.close()
    return counts, sorted(values)


def test_a_grown_topic_survives_kill_9_with_its_records(tmp_path):
    counts, values = grown_and_killed(tmp_path / "broker")
    assert counts == {"orders": 5}
    assert values == sorted([(index % 2, b"before-%d" % index) for index in range(6)] + [(4, b"after")])


def test_a_growth_answered_but_not_written_is_caught_by_kill_9(tmp_path):
    counts, _ = grown_and_killed(tmp_path / "broker", launcher("grown-in-memory"))
    assert counts == {"orders": 2}, "the seeded bug loses the growth it answered"


def test_consumer_and_share_groups_see_new_partitions_at_once(tmp_path):
    """A KIP-848 member is given the new partitions at its next heartbeat; a share group's member too, and it reads
    what is produced to them."""
    settings = {"group.consumer.heartbeat.interval.ms": "300", "share.auto.offset.reset": "earliest",
                "group.share.heartbeat.interval.ms": "1000"}
    with EmbeddedBroker(tmp_path / "broker", settings) as broker:
        create_topic(broker.bootstrap, "events", 2)
        member = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "kip848", "group.protocol": "consumer",
                           **QUIET})
        sharer = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": "sharers", **QUIET})
        member.subscribe(["events"])
        sharer.subscribe(["events"])
        try:
            assert eventually(lambda: (member.poll(0.1), sorted(tp.partition for tp in member.assignment()))[1],
                              [0, 1]) == [0, 1]
            admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
            admin.create_partitions([NewPartitions("events", 4)])["events"].result(30)
            assert eventually(lambda: (member.poll(0.1), sorted(tp.partition for tp in member.assignment()))[1],
                              [0, 1, 2, 3]) == [0, 1, 2, 3]
            produce(broker.bootstrap, "events", [(3, b"k", b"in-a-new-partition")])
            received, deadline = [], time.monotonic() + 60
            while not received and time.monotonic() < deadline:
                received = [(message.partition(), message.value()) for message in sharer.poll(0.5)
                            if message.error() is None]
            assert received == [(3, b"in-a-new-partition")]
        finally:
            member.close()
            sharer.close()


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_every_version_is_served(start_broker, version):
    broker = start_broker()
    create_topic(broker.bootstrap, "versions", 1)
    cluster = Cluster(broker.bootstrap)
    try:
        assert cluster.create_partitions([grow("versions", 2)], False, 30000, version) == [("versions", "NONE", None)]
        assert cluster.counts(["versions"]) == {"versions": 2}
    finally:
        cluster.connection.close()
