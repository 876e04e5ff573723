"""The pieces of a KIP-287 job that run beside its processors, on the reference broker: the job record's store
(impl/expansion/store.py), the expansion tool (impl/expansion/expander.py) and the job's producer
(impl/expansion/producer.py). The whole job through its expansions is tests/test_expansion_end_to_end.py."""

from __future__ import annotations

import threading

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from kipcheck.impl.expansion.expander import Expander
from kipcheck.impl.expansion.job import JobRecord, JobRecordError
from kipcheck.impl.expansion.partitioner import LinearHashPartitioner
from kipcheck.impl.expansion.producer import JobProducer
from kipcheck.impl.expansion.store import JobStore
from kipcheck.impl.expansion.tracing import ExpansionTrace
from kipcheck.model.expansion import source
from kipcheck.oracle.check import check_file

QUIET = {"log_level": 0}


def partitions_of(bootstrap: str, topic: str) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    return len(admin.list_topics(topic, timeout=30).topics[topic].partitions)


def test_the_store_keeps_each_groups_last_record(start_broker):
    broker = start_broker()
    counter, other = JobStore(broker.bootstrap, "counter"), JobStore(broker.bootstrap, "other")
    try:
        counter.create_topic()
        counter.create_topic()  # once or twice: the same topic
        assert counter.read() is None
        counter.write(JobRecord(4))
        other.write(JobRecord(2))
        grown = JobRecord(4).with_partitions(6, lambda partition: 3)
        counter.write(grown)
        assert counter.read() == grown and other.read() == JobRecord(2)
        reader = JobStore(broker.bootstrap, "counter")
        assert reader.read() == grown
        counter.write(grown.with_processors(5))
        assert counter.read() == grown.with_processors(5)
        reader.close()
    finally:
        counter.close()
        other.close()
    with pytest.raises(ValueError, match="must not be empty"):
        JobStore(broker.bootstrap, "")


def test_the_store_refuses_a_value_that_is_no_job_record(start_broker):
    broker = start_broker()
    store = JobStore(broker.bootstrap, "counter")
    try:
        store.create_topic()
        producer = Producer({"bootstrap.servers": broker.bootstrap, **QUIET})
        producer.produce(store.topic, key=b"counter", value=b'{"initial": 4, "expansions": [{"processors": 5}]}',
                         partition=0)
        assert producer.flush(30) == 0
        with pytest.raises(JobRecordError, match="EX-3"):  # more processors than partitions
            store.read()
    finally:
        store.close()


def test_the_tool_records_each_split_at_its_sources_log_end_then_grows_the_topic(start_broker, tmp_path):
    broker = start_broker()
    expander = Expander(broker.bootstrap, "counter", "orders")
    record = expander.start(4)
    assert record == JobRecord(4) and expander.start(4) == record  # starting again keeps the job
    trace = ExpansionTrace.open(tmp_path, "producer", 4)
    producer = JobProducer(Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, **QUIET}), "orders",
                           record, trace)
    expander.producers.append(producer)
    keys = [f"key-{number}".encode() for number in range(40)]
    written = [producer.produce(key, b"1") for key in keys]
    assert written == [LinearHashPartitioner(4).partition(key, 4) for key in keys]
    grown = expander.expand_partitions(6)
    ends = {partition: written.count(partition) for partition in range(4)}
    assert grown.splits == {4: (source(4, 4, 4), ends[source(4, 4, 4)]), 5: (source(5, 4, 4), ends[source(5, 4, 4)])}
    assert partitions_of(broker.bootstrap, "orders") == 6 and expander.store.read() == grown
    assert [producer.produce(key, b"2") for key in keys] == [LinearHashPartitioner(4).partition(key, 6) for key in keys]
    assert expander.expand_partitions(6) == grown  # asked again: nothing more
    with pytest.raises(JobRecordError, match="EX-3"):
        expander.expand_processors(7)
    assert expander.expand_processors(5) == grown.with_processors(5)
    assert expander.handovers_pending() == {}  # no processor runs here: partitions S1 held by nobody wait for none
    producer.close()
    verdict = check_file(trace.path)
    assert verdict.status == "ok", verdict.summary()


def test_a_tool_that_died_between_the_record_and_the_topic_grows_the_topic_when_asked_again(start_broker):
    broker = start_broker()
    expander = Expander(broker.bootstrap, "counter", "orders")
    record = expander.start(4).with_partitions(6, lambda partition: 0)
    expander.store.write(record)  # the record written, CreatePartitions never sent
    assert partitions_of(broker.bootstrap, "orders") == 4
    assert expander.expand_partitions(6) == record
    assert partitions_of(broker.bootstrap, "orders") == 6


def test_a_paused_producer_sends_nothing_until_resumed_with_the_new_count(start_broker):
    broker = start_broker()
    expander = Expander(broker.bootstrap, "counter", "orders")
    record = expander.start(2)
    producer = JobProducer(Producer({"bootstrap.servers": broker.bootstrap, **QUIET}), "orders", record)
    producer.pause()
    sent = []
    thread = threading.Thread(target=lambda: sent.append(producer.produce(b"key-3", b"1")))
    thread.start()
    thread.join(0.5)
    assert thread.is_alive() and sent == [], "a paused producer waits"
    grown = record.with_partitions(3, lambda partition: 0)
    expander.store.write(grown)
    expander.expand_partitions(3)  # grows the topic the record names, and resumes nothing it does not know
    producer.resume(grown)
    thread.join(30)
    assert sent == [LinearHashPartitioner(2).partition(b"key-3", 3)]
    producer.close()
