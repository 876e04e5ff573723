"""Who holds which partition of a KIP-287 job, and when partitions move (spec/expansion.md EX-2, EX-8 to EX-11).

    moves = next_moves(job, holders, committed, members, joining, ready)
    moves.revoke    # {partition: processor}: release it (commit T1 and stop), a new processor is ready for it
    moves.assign    # {partition: (processor, offset)}: hold it, output from offset (its committed offset, T1)

    target = member_target(job, members, holders, partitions)   # {partition: processor}, for a Kafka group

    instance_id(3) -> "processor-3"; processor_of("processor-3") -> 3   # a member's processor, by its instance id

Pure: the group that runs the job keeps the state and calls these after
every change. A partition goes to linear hashing's processor over N0 (EX-2):
at the start, after a partition expansion (the source's processor: no key
moves), and from an old processor to a new one only once that one is ready
(EX-10) and the old one released it (EX-8); always at its committed offset
(EX-11).

`next_moves` is for a group that sees readiness and releases itself (one
process). `member_target` is the target assignment of a Kafka consumer group
(the reference broker's server-side assignor, and the group leader's
client-side one), where a processor becomes a member only once it is ready
(a new one says ready by joining) and the protocol gives a partition to its
new member only after the old one gave it up (KIP-848's revocation before
assignment; the leader's cooperative step in the classic protocol): each
partition to its processor when that one is a member, else to the member that
holds it now (the old owner, until the new processor is ready), else to
nobody (its processor is down: no other processor has its keys' state, EX-9).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Collection, Mapping

from kipcheck.impl.expansion.job import JobRecord
from kipcheck.model.expansion import linear_hash

INSTANCE_PREFIX = "processor-"  # a member's group.instance.id names its processor: linear hashing's bucket


@dataclass
class Moves:
    revoke: dict[int, int] = field(default_factory=dict)
    assign: dict[int, tuple[int, int]] = field(default_factory=dict)


def target(job: JobRecord, partition: int) -> int:
    """The processor a partition belongs to (EX-2)."""
    return linear_hash(partition, job.processors, job.initial)


def gaining_processors(before: JobRecord, after: JobRecord) -> set[int]:
    """The processors an expansion hands partitions they did not hold: with linear hashing, the new ones (EX-9)."""
    return {target(after, partition) for partition in range(before.partitions)
            if target(after, partition) != target(before, partition)}


def next_moves(job: JobRecord, holders: Mapping[int, int], committed: Mapping[int, int], members: Collection[int],
               joining: Collection[int], ready: Collection[int]) -> Moves:
    """`holders`: partition -> its processor; `committed`: partition -> committed offset; `members`: processors
    running; `joining`: new processors not yet handed all their partitions; `ready`: those that said ready."""
    moves = Moves()
    for partition in range(job.partitions):
        processor, holder = target(job, partition), holders.get(partition)
        if processor not in members or holder == processor:
            continue
        if processor in joining and processor not in ready:
            continue  # EX-10: a new processor gets nothing before it is almost caught up
        if holder is not None:
            moves.revoke[partition] = holder  # EX-8: the old holder releases first
        else:
            moves.assign[partition] = (processor, committed.get(partition, 0))  # EX-11: output from T1
    return moves


def member_target(job: JobRecord, members: Collection[int], holders: Mapping[int, int], partitions: int
                  ) -> dict[int, int]:
    """The target of a Kafka group running the job: `members` the processors in the group (ready), `holders`
    partition -> the processor that holds it now, `partitions` the topic's count (the job's partitions are those
    both the job record and the topic have)."""
    assigned = {}
    for partition in range(min(job.partitions, partitions)):
        processor, holder = target(job, partition), holders.get(partition)
        if processor in members:
            assigned[partition] = processor
        elif holder in members:
            assigned[partition] = holder  # EX-10: the old owner keeps it until the new processor is ready
    return assigned


def instance_id(processor: int) -> str:
    return f"{INSTANCE_PREFIX}{processor}"


def processor_of(instance: str | None) -> int | None:
    """The processor a member's instance id names, or None if it names none."""
    number = (instance or "").removeprefix(INSTANCE_PREFIX)
    if instance is None or not instance.startswith(INSTANCE_PREFIX) or not number.isdigit() or len(number) > 10:
        return None
    return int(number)
