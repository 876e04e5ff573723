"""Expander: the one place a KIP-287 job's expansions are decided, over confluent-kafka's AdminClient (EX-4, EX-5,
EX-12).

    expander = Expander(servers, "counter", "orders", producers=[producer])
    expander.start(10)                    # the input topic with 10 partitions, the jobs topic, JobRecord(10)
    expander.expand_partitions(15)        # producers paused; the job record, then the topic; producers resumed
    expander.expand_processors(15)        # the job record; then start processors 10..14, they join when ready
    expander.handovers_pending()          # S1 partitions still held by their old processor (EX-12)

Each expansion first waits until no handover is pending (EX-12: one
expansion at a time), reading who holds what from the group's description
(members named by their instance ids, impl/expansion/assignor.py). A
partition expansion pauses the producers (impl/expansion/producer.py: every
record acknowledged, none sent), reads the log ends (the split offsets,
EX-5), writes the job record and only then grows the topic with
CreatePartitions: assignors and processors use the partitions both the
record and the topic have, so every new partition is known with its split
before anyone can read it. Then the producers resume with the new count.
Each step can be repeated: a tool that died between the record and the
topic grows the topic when asked again.
"""

from __future__ import annotations

import time
from typing import Iterable, Protocol

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic, OffsetSpec

from kipcheck.impl.expansion.assignor import instance_id
from kipcheck.impl.expansion.job import JobRecord
from kipcheck.impl.expansion.store import QUIET, JobStore, wait_for_partitions

# What a coordinator answers while it loads or moves its groups: the question is asked again.
COORDINATOR_MOVING = (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                      KafkaError.COORDINATOR_NOT_AVAILABLE)

TIMEOUT_S = 30.0
HANDOVER_WAIT_S = 300.0


class Pausable(Protocol):
    def pause(self) -> None: ...
    def resume(self, record: JobRecord) -> None: ...


class Expander:
    def __init__(self, bootstrap: str, group_id: str, topic: str, producers: Iterable[Pausable] = (),
                 store: JobStore | None = None, timeout_s: float = TIMEOUT_S) -> None:
        self.bootstrap, self.group_id, self.topic, self.timeout_s = bootstrap, group_id, topic, timeout_s
        self.producers = list(producers)
        self.store = store or JobStore(bootstrap, group_id, timeout_s=timeout_s)
        self.admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})

    def start(self, initial: int) -> JobRecord:
        """The input topic (`initial` partitions) and the jobs topic; the job record, unless the job has one."""
        self._create_topic(NewTopic(self.topic, initial, 1))
        wait_for_partitions(self.admin, self.topic, initial, self.timeout_s)
        self.store.create_topic()
        record = self.store.read()
        if record is None:
            record = JobRecord(initial)
            self.store.write(record)
        return record

    def expand_partitions(self, count: int, handover_wait_s: float = HANDOVER_WAIT_S) -> JobRecord:
        """The job at `count` partitions; producers resume once the topic has them (an expansion that fails leaves
        them paused: ask again)."""
        self.wait_for_handovers(handover_wait_s)
        for producer in self.producers:
            producer.pause()
        record = self._record()
        if record.partitions < count:
            ends = self._log_ends(record.partitions)
            record = record.with_partitions(count, ends.__getitem__)
            self.store.write(record)
        if self._topic_partitions() < record.partitions:
            future = self.admin.create_partitions([NewPartitions(self.topic, record.partitions)])[self.topic]
            future.result(self.timeout_s)
        wait_for_partitions(self.admin, self.topic, record.partitions, self.timeout_s)
        for producer in self.producers:
            producer.resume(record)
        return record

    def expand_processors(self, count: int, handover_wait_s: float = HANDOVER_WAIT_S) -> JobRecord:
        self.wait_for_handovers(handover_wait_s)
        record = self._record()
        if record.processors < count:
            record = record.with_processors(count)
            self.store.write(record)
        return record

    def handovers_pending(self) -> dict[int, list[int]]:
        """Processor -> its partitions S1 still held by another processor, as the group describes itself."""
        record, holders = self._record(), self.holders()
        pending = {}
        for processor in range(record.initial, record.processors):
            held = sorted(partition for partition in record.takeover(processor)
                          if holders.get(partition, processor) != processor)
            if held:
                pending[processor] = held
        return pending

    def wait_for_handovers(self, timeout_s: float = HANDOVER_WAIT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while pending := self.handovers_pending():
            if time.monotonic() > deadline:
                raise TimeoutError(f"handovers still pending after {timeout_s:.0f} s (processor: partitions "
                                   f"held by another): {pending}")
            time.sleep(0.2)

    def _record(self) -> JobRecord:
        record = self.store.read()
        if record is None:
            raise ValueError(f"group {self.group_id} has no job record in {self.store.topic}: start the job first")
        return record

    def holders(self) -> dict[int, int]:
        """Partition -> the processor whose member holds it now."""
        instances = {instance_id(processor): processor for processor in range(self._record().processors)}
        group = self._describe_group()
        return {tp.partition: instances[member.group_instance_id] for member in group.members
                if member.group_instance_id in instances
                for tp in member.assignment.topic_partitions if tp.topic == self.topic}

    def _describe_group(self):
        """The group as its coordinator describes it, asked again while a retriable error (a coordinator loading
        its groups after a restart or a move) lasts, up to the timeout."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                return self.admin.describe_consumer_groups([self.group_id])[self.group_id].result(self.timeout_s)
            except KafkaException as failure:
                if failure.args[0].code() not in COORDINATOR_MOVING or time.monotonic() > deadline:
                    raise
            time.sleep(0.2)

    def _log_ends(self, partitions: int) -> dict[int, int]:
        """Every partition's log end, in one ListOffsets round."""
        asked = {TopicPartition(self.topic, partition): OffsetSpec.latest() for partition in range(partitions)}
        answers = self.admin.list_offsets(asked, request_timeout=self.timeout_s)
        return {tp.partition: future.result(self.timeout_s).offset for tp, future in answers.items()}

    def _topic_partitions(self) -> int:
        metadata = self.admin.list_topics(self.topic, timeout=self.timeout_s)
        return len(metadata.topics[self.topic].partitions)

    def _create_topic(self, topic: NewTopic) -> None:
        try:
            self.admin.create_topics([topic])[topic.topic].result(self.timeout_s)
        except KafkaException as error:
            if error.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
