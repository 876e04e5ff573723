"""GroupCoordinator: classic and KIP-848 consumer groups and their committed offsets, one id space with share groups.

    coordinator = GroupCoordinator(data_dir, config, partitions_of, topic_names, share_group_exists,
                                   trace_dir=None)   # with a dir: KIP-848 members' revoke-delay traces
    coordinator.join(JoinRequest(...), now_ms) -> Pending JoinAnswer    # JoinGroup
    coordinator.sync(...), .heartbeat(...), .leave(...)                  # SyncGroup, Heartbeat, LeaveGroup
    coordinator.consumer_heartbeat(HeartbeatRequest(...), now_ms)        # ConsumerGroupHeartbeat
    coordinator.commit(OffsetCommit(...), now_ms) -> {(topic, partition): error}
    coordinator.fetch(group_id, member_id, member_epoch, keys | None) -> (error, {key: CommittedOffset | None})
    coordinator.delete_offsets(group_id, keys) -> (error, {key: error})
    coordinator.fence_owners(group_id, topic, partition, now_ms) -> [member ids fenced]
    coordinator.group_type(group_id) -> "classic" | "consumer" | None; coordinator.tick(now_ms)

A group id names one group of one type, as in Kafka 4.2: a share group's id
cannot be used by a classic or consumer group (JoinGroup answers
INCONSISTENT_GROUP_PROTOCOL, ConsumerGroupHeartbeat GROUP_ID_NOT_FOUND) nor
the other way round (ShareGroupHeartbeat answers GROUP_ID_NOT_FOUND: see
`share_group_refused`). An Empty classic group becomes a consumer group when a
KIP-848 member joins it, and an Empty consumer group a classic one when a
classic member joins it; committed offsets stay. A group with members does
not change protocol: kipcheck serves Kafka's `group.consumer.migration.policy
= disabled` (Kafka 4.2 defaults to bidirectional online migration, which mixes
classic and KIP-848 members in one group), so a classic member joining a
non-empty consumer group gets INCONSISTENT_GROUP_PROTOCOL and a KIP-848 member
joining a non-empty classic group GROUP_ID_NOT_FOUND. Committed offsets
without a live group are an Empty classic group (Kafka creates such a
"simple" group for commits from consumers that use assign()).
Offsets are validated as Kafka's OffsetMetadataManager does
(`validate_commit`) and stored through OffsetStore; a failed write answers
NOT_COORDINATOR on every partition and changes nothing (Kafka's
KAFKA_STORAGE_ERROR, as CoordinatorOperationExceptionHelper maps it), a commit
too large for one record UNKNOWN_SERVER_ERROR (Kafka's MESSAGE_TOO_LARGE). OffsetDelete on a
classic group with members answers NON_EMPTY_GROUP (Kafka lets a group of the
`consumer` protocol type delete the offsets of topics no member subscribes
to; kipcheck does not read the client-side subscriptions).
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from typing import Callable

from kipcheck.impl.groups.classic import ClassicGroups, JoinRequest
from kipcheck.impl.groups.classic_group import EMPTY, ClassicGroup, JoinAnswer, Pending, SyncAnswer
from kipcheck.impl.groups.config import GroupConfig
from kipcheck.impl.groups.consumer import ConsumerGroups, HeartbeatAnswer, HeartbeatRequest
from kipcheck.impl.groups.offsets import CommittedOffset, Key, OffsetStore, RecordTooLarge, StorageError
from kipcheck.impl.groups.tracing import CoordinatorTraces
from kipcheck.impl.storage import Storage
from kipcheck.model.errors import Error

NEW_GROUP_PROTOCOL_ERROR = Error.INCONSISTENT_GROUP_PROTOCOL


@dataclass(frozen=True)
class OffsetCommit:
    group_id: str
    member_id: str
    instance_id: str | None
    generation_or_epoch: int
    api_version: int
    offsets: dict[Key, CommittedOffset]


class GroupCoordinator:
    def __init__(self, data_dir: str | os.PathLike, config: GroupConfig, partitions_of: Callable[[str], int],
                 topic_names: Callable[[], list[str]], share_group_exists: Callable[[str], bool],
                 *, fsync: bool = True, new_member_id: Callable[[str], str] | None = None,
                 trace_dir: str | os.PathLike | None = None, storage: Storage | None = None):
        self.config = config
        self.share_group_exists = share_group_exists
        self.offsets = OffsetStore(data_dir, fsync=fsync, compact_bytes=config.offsets_segment_bytes, storage=storage)
        self.classic = ClassicGroups(config, new_member_id or (lambda prefix: f"{prefix}-{uuid.uuid4()}"))
        self.consumer = ConsumerGroups(config, partitions_of, topic_names, self._not_for_consumer_protocol)
        if trace_dir is not None:
            self.consumer.traces = CoordinatorTraces(trace_dir, storage)

    def close(self) -> None:
        self.offsets.close()
        if self.consumer.traces is not None:
            self.consumer.traces.close()

    def group_type(self, group_id: str) -> str | None:
        if group_id in self.consumer.groups:
            return "consumer"
        if group_id in self.classic.groups or self.offsets.has_offsets(group_id):
            return "classic"
        return None

    def share_group_refused(self, group_id: str) -> bool:
        """A new share group may not take an id a classic or consumer group holds (GROUP_ID_NOT_FOUND)."""
        return self.group_type(group_id) is not None

    def _not_for_consumer_protocol(self, group_id: str) -> bool:
        """A share group, or a classic group with members (group.consumer.migration.policy = disabled)."""
        return self.share_group_exists(group_id) or not self._empty(group_id)

    def _empty(self, group_id: str) -> bool:
        consumer = self.consumer.groups.get(group_id)
        if consumer is not None:
            return not consumer.members
        classic = self.classic.groups.get(group_id)
        return classic is None or (classic.state == EMPTY and not classic.pending_join)

    # -- the classic protocol ----------------------------------------------------------------

    def join(self, request: JoinRequest, now_ms: int) -> Pending:
        if self.share_group_exists(request.group_id) or \
                (self.group_type(request.group_id) == "consumer" and not self._empty(request.group_id)):
            return _done(JoinAnswer(NEW_GROUP_PROTOCOL_ERROR, ""))
        self.consumer.groups.pop(request.group_id, None)  # an Empty consumer group becomes a classic group
        pending = self.classic.join(request, now_ms)
        self._forget_if_unused(request.group_id)
        return pending

    def sync(self, group_id: str, member_id: str, instance_id: str | None, generation: int,
             protocol_type: str | None, protocol_name: str | None, assignments: dict[str, bytes],
             now_ms: int) -> Pending:
        return self.classic.sync(group_id, member_id, instance_id, generation, protocol_type, protocol_name,
                                 assignments, now_ms)

    def heartbeat(self, group_id: str, member_id: str, instance_id: str | None, generation: int, now_ms: int) -> str:
        return self.classic.heartbeat(group_id, member_id, instance_id, generation, now_ms)

    def leave(self, group_id: str, members: list[tuple[str, str | None]], now_ms: int) -> tuple[str, list[str]]:
        """(group error, one error per member); members of a consumer group are fenced (an admin removal)."""
        if group_id in self.consumer.groups:
            answer = Error.NONE, self.consumer.leave_members(group_id, members, now_ms)
        else:
            answer = self.classic.leave(group_id, members, now_ms)
        self._forget_if_unused(group_id)
        return answer

    # -- KIP-848 -------------------------------------------------------------------------------

    def consumer_heartbeat(self, request: HeartbeatRequest, now_ms: int) -> HeartbeatAnswer:
        answer = self.consumer.heartbeat(request, now_ms)
        if request.group_id in self.consumer.groups:
            self.classic.groups.pop(request.group_id, None)  # an Empty classic group became a consumer group
        self._forget_if_unused(request.group_id)
        return answer

    # -- offsets -------------------------------------------------------------------------------

    def commit(self, commit: OffsetCommit, now_ms: int) -> dict[Key, str]:
        """One error per partition (Kafka's OffsetCommit has no top-level error)."""
        error = self.validate_commit(commit, now_ms)
        if error != Error.NONE:
            return {key: error for key in commit.offsets}
        errors = {key: Error.OFFSET_METADATA_TOO_LARGE if len(value.metadata) > self.config.offset_metadata_max_bytes
                  else Error.NONE for key, value in commit.offsets.items()}
        accepted = {key: value for key, value in commit.offsets.items() if errors[key] == Error.NONE}
        try:
            self.offsets.commit(commit.group_id, accepted)
        except (StorageError, RecordTooLarge) as error:
            failed = Error.NOT_COORDINATOR if isinstance(error, StorageError) else Error.UNKNOWN_SERVER_ERROR
            return {key: failed if key in accepted else errors[key] for key in commit.offsets}
        self._trace_commit(commit, accepted, now_ms)
        return errors

    def _trace_commit(self, commit: OffsetCommit, accepted: dict[Key, CommittedOffset], now_ms: int) -> None:
        """A KIP-848 member's accepted commit, in its revoke-delay trace (spec/revoke-delay.md RD-12)."""
        group = self.consumer.groups.get(commit.group_id)
        if self.consumer.traces is not None and group is not None and commit.member_id in group.members:
            self.consumer.traces.committed(commit.group_id, commit.member_id,
                                           {key: value.offset for key, value in accepted.items()}, now_ms)

    def validate_commit(self, commit: OffsetCommit, now_ms: int) -> str:
        """OffsetMetadataManager.validateOffsetCommit, then the group's own check."""
        if not commit.group_id:
            return Error.INVALID_GROUP_ID
        if self.share_group_exists(commit.group_id):
            return Error.GROUP_ID_NOT_FOUND
        kind = self.group_type(commit.group_id)
        if kind == "consumer":
            return self.consumer.validate_offset_commit(self.consumer.groups[commit.group_id], commit.member_id,
                                                        commit.generation_or_epoch, commit.api_version)
        if kind is None and commit.generation_or_epoch >= 0:
            return Error.GROUP_ID_NOT_FOUND if commit.api_version >= 9 else Error.ILLEGAL_GENERATION
        group = self.classic.groups.get(commit.group_id) or ClassicGroup(commit.group_id)
        return self.classic.validate_offset_commit(group, commit.member_id, commit.instance_id,
                                                   commit.generation_or_epoch, now_ms)

    def fetch(self, group_id: str, member_id: str | None, member_epoch: int,
              keys: list[Key] | None) -> tuple[str, dict[Key, CommittedOffset | None]]:
        """(group error, offsets): every asked partition (None: no offset), or all of the group's (keys None)."""
        group = self.consumer.groups.get(group_id)
        if group is not None:
            error = self.consumer.validate_offset_fetch(group, member_id, member_epoch)
            if error != Error.NONE:
                return error, {}
        stored = {} if self.share_group_exists(group_id) else self.offsets.offsets(group_id)
        if keys is None:
            return Error.NONE, dict(stored)
        return Error.NONE, {key: stored.get(key) for key in keys}

    def delete_offsets(self, group_id: str, keys: list[Key]) -> tuple[str, dict[Key, str]]:
        """OffsetDelete: (group error, one error per partition); NOT_COORDINATOR if the write fails."""
        kind = self.group_type(group_id)
        if kind is None or self.share_group_exists(group_id):
            return Error.GROUP_ID_NOT_FOUND, {}
        if kind == "classic" and not self._empty(group_id):
            return Error.NON_EMPTY_GROUP, {}
        subscribed = self.consumer.subscribed_topics(group_id)
        errors = {key: Error.GROUP_SUBSCRIBED_TO_TOPIC if key[0] in subscribed else Error.NONE for key in keys}
        try:
            self.offsets.delete(group_id, [key for key, error in errors.items() if error == Error.NONE])
        except StorageError:
            return Error.NOT_COORDINATOR, {}
        self._forget_if_unused(group_id)
        return Error.NONE, errors

    def delete_group(self, group_id: str) -> str:
        """DeleteGroups for a classic or consumer group: its committed offsets and the group go, if it has no
        members (NON_EMPTY_GROUP otherwise); NOT_COORDINATOR if the offsets' deletion cannot be written."""
        if self.group_type(group_id) is None:
            return Error.GROUP_ID_NOT_FOUND
        if not self._empty(group_id):
            return Error.NON_EMPTY_GROUP
        try:
            self.offsets.delete(group_id, list(self.offsets.offsets(group_id)))
        except StorageError:
            return Error.NOT_COORDINATOR
        self._forget_if_unused(group_id)
        return Error.NONE

    def fence_owners(self, group_id: str, topic: str, partition: int, now_ms: int) -> list[str]:
        """Fence the KIP-848 members that own a partition, so the group rebalances it (the seed's "callout
        rebalance" when individual commits reach their cap, spec/ic.md IC-6)."""
        group = self.consumer.groups.get(group_id)
        owners = [member_id for member_id, member in group.members.items()
                  if (topic, partition) in member.owned()] if group is not None else []
        for member_id in owners:
            self.consumer.fence(group, member_id, now_ms)
        return owners

    # -- timers and housekeeping ----------------------------------------------------------------

    def tick(self, now_ms: int) -> list[str]:
        events = self.classic.tick(now_ms) + self.consumer.tick(now_ms)
        for group_id in list(self.classic.groups) + list(self.consumer.groups):
            self._forget_if_unused(group_id)
        return events

    def _forget_if_unused(self, group_id: str) -> None:
        """Drop an Empty group object that holds no offsets (Kafka's periodic cleanup, done at once)."""
        if self._empty(group_id) and not self.offsets.has_offsets(group_id):
            self.classic.groups.pop(group_id, None)
            self.consumer.groups.pop(group_id, None)


def _done(answer: JoinAnswer | SyncAnswer) -> Pending:
    pending = Pending()
    pending.complete(answer)
    return pending
