"""A real confluent-kafka transactional Producer against the reference broker: commits, aborts, kill -9.

read_committed consumers (classic Fetch) see exactly the committed records, read_uncommitted ones every
data record; the transaction state survives kill -9 of the broker: a transaction left open by a killed
broker is aborted when its producer initializes again, and committed records stay committed."""

import sys
from pathlib import Path

from confluent_kafka import KafkaException, Producer

from kipcheck.oracle.conformance.scenarios.clients import create_topic
from kipcheck.oracle.conformance.targets.embedded import EmbeddedBroker

sys.path.insert(0, str(Path(__file__).resolve().parent))
from attacks import TIMEOUT_S, read_all  # noqa: E402


def transactional_producer(bootstrap: str, transactional_id: str) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                         "transaction.timeout.ms": 60000})
    producer.init_transactions(TIMEOUT_S)
    return producer


def in_transaction(producer: Producer, topic: str, values: list[bytes], commit: bool) -> None:
    producer.begin_transaction()
    for value in values:
        producer.produce(topic, value=value, partition=0)
    if commit:
        producer.commit_transaction(TIMEOUT_S)
    else:
        producer.flush(TIMEOUT_S)  # the records are in the log before the abort marker
        producer.abort_transaction(TIMEOUT_S)


def test_read_committed_sees_committed_transactions_only(tmp_path):
    with EmbeddedBroker(tmp_path, {"share.auto.offset.reset": "earliest"}) as broker:
        create_topic(broker.bootstrap, "payments", 1)
        producer = transactional_producer(broker.bootstrap, "payments-writer")
        in_transaction(producer, "payments", [b"c1", b"c2", b"c3"], commit=True)
        in_transaction(producer, "payments", [b"a1", b"a2"], commit=False)
        in_transaction(producer, "payments", [b"c4"], commit=True)
        producer.flush(TIMEOUT_S)
        assert read_all(broker.bootstrap, "payments", "read_committed", 4) == [b"c1", b"c2", b"c3", b"c4"]
        assert read_all(broker.bootstrap, "payments", "read_uncommitted", 6) == [b"c1", b"c2", b"c3", b"a1", b"a2", b"c4"]


def test_a_second_producer_with_the_same_id_fences_the_first(tmp_path):
    with EmbeddedBroker(tmp_path) as broker:
        create_topic(broker.bootstrap, "payments", 1)
        first = transactional_producer(broker.bootstrap, "writer")
        first.begin_transaction()
        first.produce("payments", value=b"old", partition=0)
        first.flush(TIMEOUT_S)
        second = transactional_producer(broker.bootstrap, "writer")  # aborts the open transaction
        in_transaction(second, "payments", [b"new"], commit=True)
        try:
            first.commit_transaction(TIMEOUT_S)
            fenced = False
        except KafkaException as error:
            fenced = error.args[0].fatal()
        assert fenced, "the older producer must be fenced"
        assert read_all(broker.bootstrap, "payments", "read_committed", 1) == [b"new"]


def test_transactions_survive_kill_9(tmp_path):
    with EmbeddedBroker(tmp_path) as broker:
        create_topic(broker.bootstrap, "payments", 1)
        producer = transactional_producer(broker.bootstrap, "writer")
        in_transaction(producer, "payments", [b"kept"], commit=True)
        producer.begin_transaction()
        producer.produce("payments", value=b"open", partition=0)
        producer.flush(TIMEOUT_S)
        broker.kill()
        broker.start()
        # The open transaction holds the last stable offset until the producer's next incarnation aborts it.
        again = transactional_producer(broker.bootstrap, "writer")
        in_transaction(again, "payments", [b"after"], commit=True)
        assert read_all(broker.bootstrap, "payments", "read_committed", 2) == [b"kept", b"after"]
