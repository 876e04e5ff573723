"""ClassicProtocolGroup: a KIP-287 job's Group (impl/expansion/processor.py) as a classic consumer group whose leader
assigns by linear hashing, client-side: the job runs on any Kafka broker, Apache Kafka's included.

    store = JobStore(servers, "counter")
    group = ClassicProtocolGroup(servers, "counter", "orders", processor=3, store=store)
    processor = Processor(3, group, reader, function, emit)
    ...
    group.close()

Membership is impl/job/classic_membership.py's (a static member named after
its processor, in a thread of its own). The leader's assignment is
impl/expansion's `member_target` with the cooperative step of the classic
protocol on top: a partition that another member still holds (it says so in
its JoinGroup) is given to nobody in this generation; its holder, no longer
given it, releases it (commits T1, EX-11) and rejoins, and the next
generation gives it to its processor (EX-8). The leader assigns with the job
record read to the end of the jobs topic and the topic's partition count,
and rejoins when either has changed since (a partition expansion: the record
first, then the topic, spec/expansion.md EX-5).

What the processor asks of its group is as in impl/job/consumer_group.py: a
new processor joins the group when it says ready; its assignment is what it
was given, each partition with its committed offset when it came; revoking
is what it holds and was no longer given. Commits are OffsetCommit with the
member's generation, tried again while a rebalance is under way; committed
offsets are read as an administrator reads them.
"""

from __future__ import annotations

import time

from kipcheck.impl.consumer.cluster import Cluster
from kipcheck.impl.consumer.config import ConsumerConfig
from kipcheck.impl.consumer.errors import KafkaError
from kipcheck.impl.consumer.offsets import GroupOffsets
from kipcheck.impl.expansion.assignor import instance_id, member_target, processor_of
from kipcheck.impl.expansion.job import JobRecord
from kipcheck.impl.expansion.processor import ProcessorError
from kipcheck.impl.expansion.store import JobStore
from kipcheck.impl.job.classic_membership import ClassicMembership, Member, Timeouts
from kipcheck.impl.job.consumer_group import HeldPartitions, committed_reader
from kipcheck.impl.topic_partition import TopicPartition
from kipcheck.model.errors import Error

CLIENT_ASSIGNOR = "linear-hashing"  # the protocol (assignment strategy) every member names
REBALANCING = {Error.REBALANCE_IN_PROGRESS, Error.ILLEGAL_GENERATION}
COMMIT_RETRY_S = 0.05


class ClassicProtocolGroup(HeldPartitions):
    def __init__(self, bootstrap: str, group_id: str, topic: str, processor: int, store: JobStore,
                 timeouts: Timeouts = Timeouts()) -> None:
        self.topic, self.processor, self.store, self.timeouts = topic, processor, store, timeouts
        record = store.read()
        if record is None:
            raise ProcessorError(f"group {group_id} has no job record in {store.topic}: start the job first")
        self.record: JobRecord = record
        self.config = ConsumerConfig.from_properties({"bootstrap.servers": bootstrap, "group.id": group_id})
        self.cluster = Cluster(self.config)
        self.membership = ClassicMembership(self.cluster, group_id, instance_id(processor), topic, CLIENT_ASSIGNOR,
                                            self._assign, self._stale, timeouts)
        self.offsets = GroupOffsets(self.config, self.cluster, self.membership.identity)
        self.reads = committed_reader(bootstrap, group_id)
        self.held: dict[int, int] = {}  # partition -> its output offset, as told to the processor
        self.assigned_with: tuple[int, int, int] | None = None  # what the leader last assigned with
        if not record.takeover(processor):
            self.ready(processor)

    # -- the processor's Group -------------------------------------------------------------------

    def job(self) -> JobRecord:
        if self.membership.failure is not None:
            raise self.membership.failure
        self.record = self.store.latest() or self.record
        return self.record

    def assignment(self, processor: int) -> dict[int, int]:
        return self._hold(self.membership.take())

    def revoking(self, processor: int) -> set[int]:
        return set(self.held) - self.membership.assigned

    def commit(self, processor: int, partition: int, offset: int) -> None:
        """OffsetCommit in the member's generation, again while the group rebalances (up to its timeout)."""
        deadline = time.monotonic() + self.timeouts.rebalance_ms / 1000
        while True:
            tp = TopicPartition(self.topic, partition)
            error = self.offsets.finish(self.offsets.send({tp: offset}))[tp]
            if error == Error.NONE:
                return
            if error not in REBALANCING or time.monotonic() > deadline or self.membership.failure is not None:
                raise self.membership.failure or KafkaError(error, f"committing {tp} at {offset}")
            time.sleep(COMMIT_RETRY_S)

    def release(self, processor: int, partition: int, offset: int) -> None:
        self.commit(processor, partition, offset)
        del self.held[partition]
        self.membership.release(partition)

    def ready(self, processor: int) -> None:
        self.membership.start()

    def close(self) -> None:
        self.membership.close()
        self.offsets.close()
        self.reads.close()

    # -- the leader's assignor (the membership thread) ----------------------------------------

    def _assign(self, members: list[Member]) -> dict[str, list[int]]:
        """Each member's partitions: linear hashing over N0, none that another member still holds."""
        record, partitions = self.store.read() or self.record, self._topic_partitions()
        processors, holders = {}, {}
        for member in sorted(members, key=lambda member: member.member_id):
            processor = processor_of(member.instance_id)
            if processor is not None and processor not in processors:
                processors[processor] = member.member_id
                holders.update(dict.fromkeys(member.owned, processor))
        given: dict[str, list[int]] = {member.member_id: [] for member in members}
        for partition, processor in sorted(member_target(record, processors, holders, partitions).items()):
            if holders.get(partition, processor) == processor:  # held by another: it releases it first
                given[processors[processor]].append(partition)
        self.assigned_with = (record.partitions, record.processors, partitions)
        return given

    def _stale(self) -> bool:
        """Whether the job record or the topic changed since the leader assigned."""
        record = self.store.latest() or self.record
        return self.assigned_with != (record.partitions, record.processors, self._topic_partitions())

    def _topic_partitions(self) -> int:
        connection = self.cluster.connect()
        try:
            self.cluster.refresh(connection, names=[self.topic])
        finally:
            connection.close()
        return self.cluster.partitions(self.topic)
