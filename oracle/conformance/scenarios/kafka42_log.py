"""Scenarios of Kafka 4.2's log under share groups: transactions, and the log start offset moving.

    result = SCENARIOS["share-transactions"](work_dir)     # a ScenarioResult, like the others

share-transactions: a confluent-kafka transactional Producer commits three
records, aborts two and commits one more; a ShareConsumer reads the topic.
Under `kafka-4.2` the broker runs with share.isolation.level=read_committed:
the consumer gets exactly the four committed records, and the broker's
share-partition trace shows the aborted batch archived at acquisition (spec
SP-61..SP-63). Under `kip`, which has no isolation level (SP-60), it reads
uncommitted and gets all six. The broker's traces are judged with the rest.

share-log-start: a ShareConsumer releases the first records it gets; then an
AdminClient deletes the records below offset 6 (DeleteRecords). Under
`kafka-4.2` the share-partition's SPSO jumps to 6 and the released records
are never delivered again (spec SP-64: the broker's trace has the `log_start`
step and the oracle judges every acquisition after it); the consumer accepts
every record from 6 on. Under `kip`, which has no log start movement (SP-60),
the broker does not serve DeleteRecords: the deletion fails and every record
is delivered.
"""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka import AcknowledgeType, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from kipcheck.oracle.conformance.scenarios.clients import QUIET, create_topic, poll_records, produce, share_consumer
from kipcheck.oracle.conformance.targets.embedded import DEFAULT_LAUNCHER
from kipcheck.oracle.conformance.scenarios.runner import WAIT_S, ScenarioResult, check, run_scenario

TOPIC = "payments"
TRANSACTIONS = ((True, [b"c1", b"c2", b"c3"]), (False, [b"a1", b"a2"]), (True, [b"c4"]))  # (commit, values)
QUIET_AFTER_S = 2.0  # polls after the last expected record: anything more would arrive now


def write_transactions(bootstrap: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "payments-writer", **QUIET})
    producer.init_transactions(WAIT_S)
    for commit, values in TRANSACTIONS:
        producer.begin_transaction()
        for value in values:
            producer.produce(TOPIC, value=value, partition=0)
        producer.flush(WAIT_S)  # in the log before the marker, so an abort has records to archive
        if commit:
            producer.commit_transaction(WAIT_S)
        else:
            producer.abort_transaction(WAIT_S)


def share_transactions(work_dir: Path, launcher: tuple[str, ...] = DEFAULT_LAUNCHER,
                       profile: str = "kafka-4.2") -> ScenarioResult:
    read_committed = profile == "kafka-4.2"
    expected = [value for commit, values in TRANSACTIONS for value in values if commit or not read_committed]
    settings = {"share.auto.offset.reset": "earliest"}
    if read_committed:
        settings["share.isolation.level"] = "read_committed"

    def body(broker) -> str:
        create_topic(broker.bootstrap, TOPIC, 1)
        write_transactions(broker.bootstrap)
        consumer = share_consumer(broker.bootstrap, "payments-readers", [TOPIC])
        received, deadline = [], time.monotonic() + WAIT_S
        try:
            while len(received) < len(expected) and time.monotonic() < deadline:
                received += [message.value() for message in poll_records(consumer)]
            quiet_until = time.monotonic() + QUIET_AFTER_S
            while time.monotonic() < quiet_until:
                received += [message.value() for message in poll_records(consumer, 0.5)]
        finally:
            consumer.close()
        isolation = "read_committed" if read_committed else "read_uncommitted"
        check(received == expected, f"{isolation}: expected {expected}, the share consumer got {received}")
        return f"{len(received)} records of {len(TRANSACTIONS)} transactions read {isolation}"

    return run_scenario("share-transactions", work_dir, settings, body, launcher, profile)


DELETED_BELOW, RECORDS = 6, 12


def _delete_records(bootstrap: str, topic: str, offset: int) -> str | None:
    """DeleteRecords through an AdminClient: None when done, else the error the client reports."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    futures = admin.delete_records([TopicPartition(topic, 0, offset)], request_timeout=30)
    try:
        for future in futures.values():
            future.result(WAIT_S)
    except KafkaException as error:
        return str(error)
    return None


def share_log_start(work_dir: Path, launcher: tuple[str, ...] = DEFAULT_LAUNCHER,
                    profile: str = "kafka-4.2") -> ScenarioResult:
    moves = profile == "kafka-4.2"

    def body(broker) -> str:
        create_topic(broker.bootstrap, "tasks", 1)
        produce(broker.bootstrap, "tasks", [(0, None, f"task-{index}".encode()) for index in range(RECORDS)])
        consumer = share_consumer(broker.bootstrap, "workers", ["tasks"], explicit=True)
        accepted: set[int] = set()
        deadline = time.monotonic() + WAIT_S
        try:
            released = []
            while not released and time.monotonic() < deadline:
                for message in poll_records(consumer):
                    consumer.acknowledge(message, AcknowledgeType.RELEASE)
                    released.append(message.offset())
            consumer.commit_sync(30)
            error = _delete_records(broker.bootstrap, "tasks", DELETED_BELOW)
            check((error is None) == moves, f"DeleteRecords under {profile}: {error or 'done'}")
            wanted = set(range(DELETED_BELOW if moves else 0, RECORDS))
            while not wanted <= accepted and time.monotonic() < deadline:
                for message in poll_records(consumer):
                    consumer.acknowledge(message, AcknowledgeType.ACCEPT)
                    accepted.add(message.offset())
                consumer.commit_sync(30)
        finally:
            consumer.close()
        check(wanted <= accepted, f"offsets {sorted(wanted - accepted)} never delivered")
        return (f"{len(released)} released, records below {DELETED_BELOW} "
                f"{'deleted' if moves else 'kept (DeleteRecords refused)'}, {len(accepted)} accepted")

    return run_scenario("share-log-start", work_dir, {"share.auto.offset.reset": "earliest"}, body, launcher, profile)


SCENARIOS = {"share-transactions": share_transactions, "share-log-start": share_log_start}
