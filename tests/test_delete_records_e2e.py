"""DeleteRecords against the reference broker with confluent-kafka's AdminClient: the log start offset moves,
durably (kill -9), reads below it are OFFSET_OUT_OF_RANGE, and an offset past the log end is refused."""

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from kipcheck.oracle.conformance.scenarios.clients import create_topic, produce
from kipcheck.oracle.conformance.targets.embedded import EmbeddedBroker


def delete_below(bootstrap: str, offset: int):
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the answer: its futures need it
    futures = admin.delete_records([TopicPartition("tasks", 0, offset)], request_timeout=30)
    return next(iter(futures.values())).exception(60)


def test_the_log_start_offset_moves_durably(tmp_path):
    with EmbeddedBroker(tmp_path) as broker:
        create_topic(broker.bootstrap, "tasks", 1)
        produce(broker.bootstrap, "tasks", [(0, None, f"task-{index}".encode()) for index in range(10)])
        assert delete_below(broker.bootstrap, 4) is None
        error = delete_below(broker.bootstrap, 11)
        assert error is not None and "OFFSET_OUT_OF_RANGE" in str(error)
        broker.kill()
        broker.start()
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "readers",
                             "auto.offset.reset": "earliest"})
        try:
            assert consumer.get_watermark_offsets(TopicPartition("tasks", 0), timeout=30) == (4, 10)
            consumer.subscribe(["tasks"])  # no committed offset: the earliest, which is now 4
            offsets = []
            for _ in range(60):
                message = consumer.poll(1.0)
                if message is not None and message.error() is None:
                    offsets.append(message.offset())
                if len(offsets) == 6:
                    break
        finally:
            consumer.close()
        assert offsets == list(range(4, 10))
