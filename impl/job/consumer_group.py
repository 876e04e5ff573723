"""ConsumerProtocolGroup: a KIP-287 job's Group (impl/expansion/processor.py) as a KIP-848 consumer group whose
coordinator assigns with the reference broker's `linear-hashing` server assignor (impl/groups/linear_hashing.py).

    store = JobStore(servers, "counter")
    group = ConsumerProtocolGroup(servers, "counter", "orders", processor=3, store=store)
    processor = Processor(3, group, reader, function, emit)       # the group is the processor's coordination
    ...
    group.close()

Each processor is a member of its own, through kipcheck's consumer
(impl/consumer) in KIP-983's revoke-delay mode, its instance id naming its
processor (`processor-3`). It never reads records through that consumer
(every partition it is given is paused): the processor reads with its own
reader. What the processor asks of its group, from the consumer:
- the job record: the jobs topic's latest (JobStore);
- joining: a processor added by a processor expansion, until it holds its
  partitions S1 (EX-10); it joins the group (subscribes) only when it says
  ready, so the assignor gives it nothing before (an original processor
  subscribes at once);
- its assignment: the partitions the consumer holds, each with its committed
  offset read when it first came (T1, EX-11); a partition the job record does
  not have yet waits until the record arrives;
- revoking: those the coordinator wants back (KIP-983's revoke-next list). The
  processor keeps them, delaying their revocation at every poll (delay_revoke),
  until it releases one: it commits T1, and the next poll completes the
  revocation, which the next heartbeat acknowledges; only then does the
  coordinator give the partition to its new processor (KIP-848);
- committed offsets: OffsetFetch as an administrator reads them (no member: a
  member still joining is not yet known); commits: the consumer's OffsetCommit.
A partition lost (the member fenced) is a ProcessorError: its processor stops,
for its partitions may already be another's.
"""

from __future__ import annotations

from kipcheck.impl.consumer import Consumer, TopicPartition
from kipcheck.impl.consumer.cluster import Cluster
from kipcheck.impl.consumer.config import ConsumerConfig
from kipcheck.impl.consumer.offsets import GroupOffsets
from kipcheck.impl.expansion.assignor import instance_id
from kipcheck.impl.expansion.job import JobRecord
from kipcheck.impl.expansion.processor import ProcessorError
from kipcheck.impl.expansion.store import JobStore

SERVER_ASSIGNOR = "linear-hashing"


class HeldPartitions:
    """What both forms of a job's group keep alike: the partitions held, each with the offset its output starts at
    (its committed offset when it came, T1), and committed offsets read as an administrator reads them."""

    topic: str
    record: JobRecord
    held: dict[int, int]
    reads: GroupOffsets

    def _hold(self, given) -> dict[int, int]:
        """Holds the partitions `given` not yet held that the job record has; returns every one held."""
        new = sorted(partition for partition in set(given) - set(self.held) if partition < self.record.partitions)
        if new:
            committed = self.reads.committed([TopicPartition(self.topic, partition) for partition in new])
            self.held.update({tp.partition: max(offset, 0) for tp, offset in committed.items()})
        return dict(self.held)

    def joining(self, processor: int) -> bool:
        return not set(self.record.takeover(processor)) <= set(self.held)

    def committed(self, partition: int) -> int:
        tp = TopicPartition(self.topic, partition)
        return max(self.reads.committed([tp])[tp], 0)


class ConsumerProtocolGroup(HeldPartitions):
    def __init__(self, bootstrap: str, group_id: str, topic: str, processor: int, store: JobStore,
                 consumer_settings: dict | None = None) -> None:
        self.topic, self.processor, self.store = topic, processor, store
        record = store.read()
        if record is None:
            raise ProcessorError(f"group {group_id} has no job record in {store.topic}: start the job first")
        self.record: JobRecord = record
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group_id,
                                  "group.instance.id": instance_id(processor), "group.remote.assignor": SERVER_ASSIGNOR,
                                  **(consumer_settings or {})})
        # Committed offsets are read as an administrator does (no member, epoch -1): a member that is still
        # joining is not yet known to the coordinator, which would refuse its reads (UNKNOWN_MEMBER_ID).
        self.reads = committed_reader(bootstrap, group_id)
        self.held: dict[int, int] = {}  # partition -> its output offset, as told to the processor
        self.released: set[int] = set()  # released, their revocation not yet completed
        self.subscribed = False
        if not record.takeover(processor):
            self.ready(processor)

    def job(self) -> JobRecord:
        self._poll()
        self.record = self.store.latest() or self.record
        return self.record

    def _poll(self) -> None:
        """Delay every revocation not released, then poll: released ones complete, what the coordinator
        decided is learned."""
        if not self.subscribed:
            return
        pending = {tp for tp in self.consumer.to_be_revoked_partitions() if tp.partition not in self.released}
        delayed = not pending or self.consumer.delay_revoke(pending)
        self.consumer.poll(0)  # every partition is paused: no records, only what the coordinator decided
        if not delayed or self.consumer.lost_partitions():
            raise ProcessorError(f"processor {self.processor} lost partitions: its member was fenced, they may be "
                                 f"another's already")
        self.consumer.pause(self.consumer.assignment())
        self.released &= {tp.partition for tp in self.consumer.assignment()}

    def assignment(self, processor: int) -> dict[int, int]:
        given = {tp.partition for tp in self.consumer.assignment()} - self.released if self.subscribed else set()
        return self._hold(given)

    def revoking(self, processor: int) -> set[int]:
        return {tp.partition for tp in self.consumer.to_be_revoked_partitions()} & set(self.held) \
            if self.subscribed else set()

    def commit(self, processor: int, partition: int, offset: int) -> None:
        self.consumer.commit({TopicPartition(self.topic, partition): offset})

    def release(self, processor: int, partition: int, offset: int) -> None:
        self.commit(processor, partition, offset)
        del self.held[partition]
        self.released.add(partition)

    def ready(self, processor: int) -> None:
        self.consumer.subscribe([self.topic])
        self.subscribed = True

    def close(self) -> None:
        self.consumer.close()
        self.reads.close()


def committed_reader(bootstrap: str, group_id: str) -> GroupOffsets:
    """OffsetFetch of the group's committed offsets as an administrator reads them (no member, epoch -1)."""
    config = ConsumerConfig.from_properties({"bootstrap.servers": bootstrap, "group.id": group_id})
    return GroupOffsets(config, Cluster(config), lambda: ("", -1, 0))
