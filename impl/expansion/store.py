"""Where a KIP-287 job's record lives on a broker: the last record of a compacted topic, keyed by the group (EX-5).

    store = JobStore("127.0.0.1:9092", group="counter")      # confluent-kafka clients on the `kip287-jobs` topic
    store.create_topic()                                     # once: 1 partition, cleanup.policy=compact
    store.write(JobRecord(10))                               # the job starts: N0 = 10
    store.read()                                             # the latest record, read to the topic's end (or None)
    store.latest()                                           # what arrived since, without waiting (or None)

One topic holds the records of every job, one key per job: its consumer
group's id. Kafka's compaction keeps each key's last record, so the topic
stays small; the reference broker does not compact (it keeps every record, the
last one still wins). Records are written uncompressed, so anyone can read
them from the raw log, as the reference broker's linear-hashing assignor does
(impl/expansion/job.py LatestRecords). Only the expansion tool writes (impl/expansion/expander.py): it is the one
place an expansion is decided. A value that is no job record is refused
(JobRecordError) by `read` and `latest`.
"""

from __future__ import annotations

import threading
import time
import uuid

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kipcheck.impl.expansion.job import JOBS_TOPIC, JobRecord

TIMEOUT_S = 30.0
# How long the broker may hold the store's fetch when the topic has nothing new: a job record written is seen
# within it (librdkafka's default, 500 ms, is time a partition expansion keeps producers paused).
FETCH_WAIT_MAX_MS = 100
QUIET = {"log_level": 0}


def wait_for_partitions(admin: AdminClient, topic: str, partitions: int, timeout_s: float) -> None:
    """Until Metadata shows `topic` with `partitions` partitions or more (Kafka's brokers learn a new topic or
    partition count a moment after the controller answered)."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = admin.list_topics(topic, timeout=timeout_s).topics.get(topic)
        if found is not None and found.error is None and len(found.partitions) >= partitions:
            return
        if time.monotonic() > deadline:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, f"Metadata does not show {topic} with "
                                                                  f"{partitions} partitions"))
        time.sleep(0.1)


class JobStore:
    def __init__(self, bootstrap: str, group: str, topic: str = JOBS_TOPIC, timeout_s: float = TIMEOUT_S) -> None:
        if not group:
            raise ValueError("a job's record is keyed by its consumer group's id, which must not be empty")
        self.bootstrap, self.group, self.topic, self.timeout_s = bootstrap, group, topic, timeout_s
        self._lock = threading.Lock()  # a processor's thread and its group's membership thread both read it
        self._consumer: Consumer | None = None
        self._producer: Producer | None = None  # the expansion tool's, kept for its next record
        self._record: JobRecord | None = None

    def create_topic(self) -> None:
        """The jobs topic, compacted, one partition; nothing if it exists."""
        admin = AdminClient({"bootstrap.servers": self.bootstrap, **QUIET})
        future = admin.create_topics([NewTopic(self.topic, 1, 1, config={"cleanup.policy": "compact"})])[self.topic]
        try:
            future.result(self.timeout_s)
        except KafkaException as error:
            if error.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
        wait_for_partitions(admin, self.topic, 1, self.timeout_s)

    def write(self, record: JobRecord) -> None:
        """The job's new record, acknowledged by the broker (acks=all, idempotent) before this returns."""
        if self._producer is None:
            self._producer = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True,
                                       "compression.type": "none", **QUIET})
        producer, delivered = self._producer, []
        producer.produce(self.topic, key=self.group.encode(), value=record.encode(), partition=0,
                         on_delivery=lambda error, message: delivered.append(error))
        producer.flush(self.timeout_s)
        if delivered != [None]:
            raise KafkaException(delivered[0] if delivered else KafkaError(KafkaError._TIMED_OUT))
        with self._lock:
            self._record = record

    def read(self) -> JobRecord | None:
        """The job's latest record, the topic read up to its end as it is now."""
        with self._lock:
            consumer = self._open()
            start, end = consumer.get_watermark_offsets(TopicPartition(self.topic, 0), self.timeout_s)
            deadline = time.monotonic() + self.timeout_s
            # The position is no offset (negative) until something was read: an empty topic is read at once.
            while start < end and consumer.position([TopicPartition(self.topic, 0)])[0].offset < end:
                if time.monotonic() > deadline:
                    raise KafkaException(KafkaError(KafkaError._TIMED_OUT, f"{self.topic} not read to {end}"))
                self._take(consumer.consume(1000, 0.1))
            return self._record

    def latest(self) -> JobRecord | None:
        """The latest record this store has seen, with what arrived since the last call (no waiting)."""
        with self._lock:
            self._take(self._open().consume(1000, 0))
            return self._record

    def _open(self) -> Consumer:
        if self._consumer is None:
            self._consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"job-store-{uuid.uuid4()}",
                                       "enable.auto.commit": False, "enable.partition.eof": False,
                                       "fetch.wait.max.ms": FETCH_WAIT_MAX_MS, **QUIET})
            self._consumer.assign([TopicPartition(self.topic, 0, OFFSET_BEGINNING)])
        return self._consumer

    def _take(self, messages) -> None:
        for message in messages:
            if message.error() is not None:
                raise KafkaException(message.error())
            if message.key() == self.group.encode():
                self._record = JobRecord.decode(message.value())

    def close(self) -> None:
        with self._lock:
            if self._consumer is not None:
                self._consumer.close()
                self._consumer = None
            if self._producer is not None:
                self._producer.flush(self.timeout_s)
                self._producer = None
