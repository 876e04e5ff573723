"""The KIP-287 server-side assignor: a job's partitions to its processors by linear hashing over N0 (spec/expansion.md).

    target = LinearHashingAssignor().assign(spec)   # spec.job_record: the group's job record (impl/expansion/store.py)

A KIP-287 job's processors are the members of one consumer group that
subscribe to its input topic, each naming its processor by its instance id
(`group.instance.id=processor-3`, impl/expansion/assignor.py). The job record
(N0, the partition and processor counts, the splits) is the group's last
record in the jobs topic, which the broker reads from its own log and gives
in `spec.job_record`. The target is impl/expansion's `member_target`: a
partition goes to its processor when that processor is a member, else stays
with the member that holds it (a new processor joins the group only once it
has almost caught up, EX-10, so until then its partitions stay with their old
owner), else to nobody. KIP-848's reconciliation then hands a partition to its
new member only after the old one revoked it, and the old one revokes it only
after committing T1 (EX-8, EX-11).

Partitions left to nobody are this assignor's design (a processor that is down
has the only state of its keys), so `check` replaces the coordinator's
every-partition-assigned check: each partition to at most one member, of a
topic it subscribes to, that exists. A group without a job record, or with
one that cannot be read, gets no assignment and the reason, refused by
`check` (UNKNOWN_SERVER_ERROR in the members' heartbeats).
"""

from __future__ import annotations

from kipcheck.impl.expansion.assignor import member_target, processor_of
from kipcheck.impl.expansion.job import JobRecord, JobRecordError


class LinearHashingAssignor:
    name = "linear-hashing"

    def assign(self, spec) -> dict:
        """{member id: {topic: frozenset(partitions)}} for every member (GroupSpec of impl/groups/assignors.py)."""
        target: dict = {member_id: {} for member_id in spec.members}
        job, topic = self._job(spec), self._topic(spec)
        if job is None or topic is None:
            return target
        members = {}
        for member_id in sorted(spec.members):
            processor = processor_of(spec.members[member_id].instance_id)
            if processor is not None:
                members.setdefault(processor, member_id)
        holders = {partition: processor for processor, member_id in members.items()
                   for partition in spec.current.get(member_id, {}).get(topic, ())}
        for partition, processor in member_target(job, members, holders, spec.partitions[topic]).items():
            target[members[processor]].setdefault(topic, set()).add(partition)
        return {member_id: {name: frozenset(parts) for name, parts in assignment.items()}
                for member_id, assignment in target.items()}

    def check(self, spec, target: dict) -> str | None:
        """None if `target` gives each partition to at most one member subscribed to its topic, else why not; and
        why the group has no assignment, if it has none for a reason."""
        problem = self._problem(spec)
        if problem is not None:
            return problem
        if set(target) != set(spec.members):
            return f"assignment names members {sorted(target)}, group has {sorted(spec.members)}"
        seen: dict[tuple[str, int], str] = {}
        for member_id, assignment in sorted(target.items()):
            for topic, partitions in assignment.items():
                if topic not in spec.subscribed(member_id):
                    return f"member {member_id} is given {topic}, which it does not subscribe to"
                for partition in partitions:
                    if not 0 <= partition < spec.partitions[topic] or (topic, partition) in seen:
                        return f"{topic}-{partition} given to {member_id} does not exist or is given twice"
                    seen[topic, partition] = member_id
        return None

    def _job(self, spec) -> JobRecord | None:
        try:
            return JobRecord.decode(spec.job_record) if spec.job_record is not None else None
        except JobRecordError:
            return None

    def _topic(self, spec) -> str | None:
        """The job's input topic: the one topic every member subscribes to."""
        topics = {tuple(spec.subscribed(member_id)) for member_id in spec.members}
        return topics.pop()[0] if len(topics) == 1 and len(next(iter(topics))) == 1 else None

    def _problem(self, spec) -> str | None:
        """Why the group gets no assignment at all, if it gets none for a reason."""
        if spec.job_record is None:
            return f"group {spec.group_id} has no KIP-287 job record in the jobs topic"
        try:
            JobRecord.decode(spec.job_record)
        except JobRecordError as error:
            return f"group {spec.group_id}'s job record: {error}"
        if spec.members and self._topic(spec) is None:
            return "a KIP-287 job's members all subscribe to one topic, its input topic, which exists"
        return None
