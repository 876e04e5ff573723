"""What crosses the proxy, turned into traces: share sessions, share-partitions, individual commits.

    observer = Observer(shelf, admin, profile="kafka-4.2", settings=RecordSettings())
    proxy = Proxy(upstreams, host, port, settings, observer)

The requests and answers it reads (`wants`): Metadata (topic names), ShareGroupHeartbeat (who joined the
group through the proxy), ShareFetch and ShareAcknowledge (through oracle/share_traces.ShareSteps, as the
conformance probe writes them), Fetch and OffsetCommit (individual commit: oracle/record/commits.py).

The traces (spec/conformance.md says how a client's view becomes steps; SP-80 and SS-41 what a partial view is):
- share-session, one per member and broker (`share-session.<broker port>.<group>.<member>.jsonl`): a partial
  view of the broker's cache (other members' sessions are in other traces), with conduct judged (SS-40).
  A member is followed from a session it opened through the proxy (epoch 0); one whose session began before
  is not seen until it opens one.
- share-partition, one per group and topic-partition (`share-partition.<group>.<topic>:<partition>.jsonl`),
  from its first acquisition by a seen member, with conduct judged (SP-85), and the records each acquisition's
  bytes held (`delivered`, SP-48). It is a full view when the topic is not compacted (the proxy follows neither
  compaction nor transactions), the proxy saw the group born (its first member joined through it, answered
  member epoch 1), the group's description names no member the proxy has not seen join, and the group's epoch
  moved no more often than members joined and left through the proxy; otherwise a partial view. A full view
  becomes partial (LiveTrace.demote) when its answers show a compacted or a transactional batch, and when a
  violation cannot be confirmed as one: the group then has a member the proxy never saw, the step's request
  overlapped another request on the partition (their order at the broker is unknown), or it came near a
  lock's expiry (the broker's timer and the trace's may disagree).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from kipcheck.impl.wire.batches import batch_spans
from kipcheck.impl.wire.codec import decode_request
from kipcheck.oracle.record.admin import Admin
from kipcheck.oracle.record.commits import Commits
from kipcheck.oracle.record.live import LiveTrace
from kipcheck.oracle.record.proxy import Exchange, Link
from kipcheck.oracle.record.settings import RecordSettings
from kipcheck.oracle.record.shelf import Shelf
from kipcheck.oracle.share_traces import ACK_TYPES, ShareSteps, answer_lock_ms, error_name

log = logging.getLogger("kipcheck.record")

METADATA, FETCH, OFFSET_COMMIT, SHARE_GROUP_HEARTBEAT, SHARE_FETCH, SHARE_ACKNOWLEDGE = 3, 1, 8, 76, 78, 79
TIMER_TOLERANCE_MS = 300  # how late a broker's lock timer may fire (spec/conformance.md, "Timer tolerance")


@dataclass(eq=False)
class Member:
    """A member's session with one broker as the proxy saw it (what ShareSteps reads and advances)."""

    name: str
    group: str
    broker: tuple[str, int]
    epoch: int = 0
    session: set[str] = field(default_factory=set)
    held: set[str] = field(default_factory=set)        # topic-partitions it acquired in
    link: Link | None = None                            # the connection its session was opened on
    trace: LiveTrace | None = None                      # its share-session trace (None: not followed)


@dataclass(eq=False)
class Partition:
    """A share-partition trace and what the observer knows to write it."""

    trace: LiveTrace
    group: str
    broker: tuple[str, int]
    log_end: int                                    # the offset after the last record appended in the trace
    busy_until_ms: int = 0                          # the latest answer to a request on it
    lock_windows: list[tuple[int, int]] = field(default_factory=list)  # when locks it saw taken may expire
    ambiguous: bool = False                         # a request overlapped another, or a lock's expiry


class Group:
    def __init__(self) -> None:
        self.born_seen = False             # its first member joined through the proxy
        self.joined: set[str] = set()      # members that joined through the proxy
        self.changes = 0                   # joins and leaves through the proxy: each may bump the group epoch


class Observer:
    def __init__(self, shelf: Shelf, admin: Admin, profile: str, settings: RecordSettings):
        self.shelf, self.admin, self.profile, self.settings = shelf, admin, profile, settings
        self.topic_names: dict = {}
        self.groups: dict[str, Group] = {}
        self.members: dict[tuple, Member] = {}
        self.partitions: dict[tuple[str, str], Partition] = {}
        self.not_observed: dict[str, int] = {}
        self.compacted_topics: dict[str, bool] = {}
        self.commits = Commits(shelf, self._name)
        self.steps = ShareSteps(profile, sessions=lambda member: shelf.sink(member.trace),
                                partitions=self._partition_sink, held=lambda member: sorted(member.held),
                                read_records=True)
        shelf.confirm = self.confirm

    def wants(self, api_key: int) -> bool:
        return api_key in (METADATA, FETCH, OFFSET_COMMIT, SHARE_GROUP_HEARTBEAT, SHARE_FETCH, SHARE_ACKNOWLEDGE)

    def sent(self, exchange: Exchange) -> None:
        """A member joining through the proxy counts as seen from its request on (the group's description may
        name it before its answer is observed)."""
        if exchange.api_key == SHARE_GROUP_HEARTBEAT:
            request = decode_request(exchange.frame, {exchange.api_key: (exchange.api_version,) * 2}).body
            if request.member_epoch in (0, -1):
                group = self.groups.setdefault(request.group_id, Group())
                group.changes += 1
                if request.member_epoch == 0:
                    group.joined.add(request.member_id)

    def observe(self, exchange: Exchange) -> None:
        handler = {METADATA: self._metadata, SHARE_GROUP_HEARTBEAT: self._heartbeat, SHARE_FETCH: self._share_fetch,
                   SHARE_ACKNOWLEDGE: self._share_acknowledge, FETCH: self.commits.fetched,
                   OFFSET_COMMIT: self.commits.committed}[exchange.api_key]
        handler(exchange)

    def missed(self, exchange: Exchange, reason: str) -> None:
        """An exchange the proxy could not read: whoever it concerns is no longer followed."""
        self.not_observed[reason] = self.not_observed.get(reason, 0) + 1
        for member in self.members.values():
            if member.link is exchange.link and member.trace is not None:
                self._stop_following(member, exchange.received_ms, reason)
        self.commits.missed(exchange, reason)

    def settled(self, before_ms: int | None) -> None:
        """Every request sent before `before_ms` (None: every request) has been observed: write what came before."""
        self.shelf.flush(before_ms)

    def closed(self, link: Link, at_ms: int) -> None:
        """SS-17: a closed connection ends the sessions opened on it, and their members' records are released."""
        for member in self.members.values():
            if member.link is link and member.epoch != 0 and member.trace is not None:
                self.steps.sessions(member).add(at_ms, member.name, "disconnect", {})
                self.steps.left(at_ms, member)
                member.epoch, member.session, member.link = 0, set(), None
        if link.facts.get("closed_by_broker"):  # the broker may have restarted: its share-partitions reload
            for partition in self.partitions.values():
                if partition.broker == link.broker:
                    self._moved(partition, at_ms, "the broker closed a connection (it may have restarted)")

    # -- topics and groups ---------------------------------------------------------------------

    def _metadata(self, exchange: Exchange) -> None:
        for topic in exchange.response.topics:
            if topic.name is not None and getattr(topic, "topic_id", None) is not None:
                self.topic_names[topic.topic_id] = topic.name

    def _name(self, topic_id) -> str:
        if topic_id not in self.topic_names:
            self.topic_names.update(self.admin.topic_names([topic_id]))
        return self.topic_names.get(topic_id, str(topic_id))

    def _heartbeat(self, exchange: Exchange) -> None:
        request, answer = exchange.request, exchange.response
        if answer.error_code.name != "none" or request.member_epoch != 0:
            return
        group = self.groups.setdefault(request.group_id, Group())
        group.joined.add(answer.member_id or request.member_id)
        if answer.member_epoch == 1:
            group.born_seen = True  # the group's first epoch: nothing happened in it before

    def full_view(self, group_id: str) -> bool:
        """The proxy saw the group born; its description names only members that joined through it; and its
        epoch moved no more often than members joined and left through the proxy (a member that joined and
        left unseen, between two descriptions, moved it too)."""
        group = self.groups.get(group_id)
        if group is None or not group.born_seen:
            log.info("group %s: a partial view (the proxy did not see it born)", group_id)
            return False
        described = self.admin.share_group(group_id)
        if described is None or not set(described[1]) <= group.joined or described[0] > group.changes:
            log.info("group %s: a partial view (described as %s; joined through the proxy %s, %d joins and leaves)",
                     group_id, described, sorted(group.joined), group.changes)
            return False
        return True

    def confirm(self, trace: LiveTrace) -> bool:
        """Before a full view's violation is reported: was it a full view, and the step's order certain?"""
        partition = next((part for part in self.partitions.values() if part.trace is trace), None)
        if partition is None:
            return True
        reason = ("a request overlapped another, or came near a lock's expiry" if partition.ambiguous
                  else None if self.full_view(partition.group) else "the group had members the proxy never saw")
        if reason is None:
            return True
        trace.demote(reason, self.settings.min_lock_duration_ms)
        return False

    def poll_start_offsets(self, now_ms, idle: bool) -> None:
        """`check` steps of the start offset the share coordinator stored (SP-47: `stored_spso`), as
        DescribeShareGroupOffsets answers it, for the full views (a partial view does not judge it). Written only
        when no request was in flight around the question (`idle` before it, and no answer about the partition
        came during it), so that the answer has one place among the steps."""
        if not idle:
            return
        by_group: dict[str, list[tuple[str, int]]] = {}
        for (group, tp), partition in self.partitions.items():
            if not partition.trace.partial and not partition.ambiguous:
                topic, _, number = tp.rpartition(":")
                by_group.setdefault(group, []).append((topic, int(number)))
        for group, partitions in by_group.items():
            sent_ms = now_ms()
            answered = self.admin.start_offsets(group, partitions)
            for (topic, number), stored in answered.items():
                partition = self.partitions[(group, f"{topic}:{number}")]
                if partition.busy_until_ms < sent_ms:
                    self.shelf.sink(partition.trace).add(sent_ms, "check", "check", {}, {"stored_spso": stored})

    # -- share sessions and share-partitions ----------------------------------------------------

    def _member(self, exchange: Exchange, group: str, member_id: str) -> Member:
        key = (exchange.link.broker, group, member_id)
        member = self.members.get(key)
        if member is None:
            member = self.members[key] = Member(member_id, group, exchange.link.broker)
        return member

    def _share_fetch(self, exchange: Exchange) -> None:
        request, answer = exchange.request, exchange.response
        member = self._member(exchange, request.group_id, request.member_id)
        epoch = request.share_session_epoch
        if epoch == 0 and member.trace is None:
            self._follow(member)
        if member.trace is None:
            return
        if epoch == 0:
            member.link = exchange.link
        tps = [self._tp(topic.topic_id, part.partition_index) for topic in request.topics for part in topic.partitions]
        forget = [self._tp(topic.topic_id, number) for topic in request.forgotten_topics_data
                  for number in topic.partitions]
        results = self._results(answer)
        error = error_name(answer.error_code)
        acks = _acks(self, request.topics)
        self._before_steps(member, exchange, results, error, set(acks))
        lock_ms = answer_lock_ms(answer)
        acquired = self.steps.share_fetch(member, epoch, tps, acks, error, results,
                                          exchange.sent_ms, exchange.received_ms, max(1, request.max_records),
                                          forget=forget, acquire_args=_acquire_args(exchange, lock_ms),
                                          renew_lock_ms=self._renewed(member, request, acks, exchange, lock_ms))
        for tp, runs in acquired.items():
            if runs:
                member.held.add(tp)
                self._locks_taken(member.group, tp, exchange, lock_ms)

    def _share_acknowledge(self, exchange: Exchange) -> None:
        request, answer = exchange.request, exchange.response
        member = self._member(exchange, request.group_id, request.member_id)
        if member.trace is None:
            return
        results = self._results(answer)
        error = error_name(answer.error_code)
        acks = _acks(self, request.topics)
        self._before_steps(member, exchange, results, error, set(acks))
        lock_ms = answer_lock_ms(answer)
        self.steps.share_acknowledge(member, request.share_session_epoch, acks, error, results, exchange.sent_ms,
                                     self._renewed(member, request, acks, exchange, lock_ms))

    def _renewed(self, member: Member, request, acks: dict, exchange: Exchange, lock_ms: int | None) -> int | None:
        """The lock duration of a request that announced renewals (IsRenewAck, version 2: SP-41), whose locks
        may restart in each partition it acknowledged in; None for any other request."""
        if not getattr(request, "is_renew_ack", False):
            return None
        for tp in acks:
            self._locks_taken(member.group, tp, exchange, lock_ms)
        return lock_ms or self.settings.share.lock_ms

    def _follow(self, member: Member) -> None:
        broker = "%s-%d" % member.broker
        member.trace = self.shelf.open(["share-session", broker, member.group, member.name], {
            "machine": "share-session", "profile": self.profile, "view": "partial", "conduct": True,
            "config": {"max_sessions": self.settings.share.max_sessions}})

    def _tp(self, topic_id, partition: int) -> str:
        return f"{self._name(topic_id)}:{partition}"

    def _results(self, answer) -> dict:
        return {self._tp(topic.topic_id, part.partition_index): part for topic in answer.responses
                for part in topic.partitions}

    def _before_steps(self, member: Member, exchange: Exchange, results: dict, error: str, acked: set[str]) -> None:
        """Open the traces of partitions acquired in for the first time, and append what the answer shows of
        the log; mark requests that overlapped others or a lock's expiry."""
        touched = set(results) | member.session | acked
        for tp in touched:
            partition = self.partitions.get((member.group, tp))
            part = results.get(tp)
            acquired = [] if part is None or error != "NONE" or part.error_code.name != "none" \
                else list(getattr(part, "acquired_records", ()))
            if partition is None and (acquired or tp in acked):
                partition = self._open_partition(member, exchange, tp, acquired)
            if partition is None:
                continue
            if partition.broker != exchange.link.broker:
                self._moved(partition, exchange.sent_ms, f"its leader moved to {exchange.link.broker}")
                partition.broker = exchange.link.broker
            self._mark_ambiguous(partition, exchange)
            if acquired and not partition.trace.partial:
                self._append(partition, exchange, part, max(run.last_offset for run in acquired))

    def _open_partition(self, member: Member, exchange: Exchange, tp: str, acquired: list) -> Partition:
        """A share-partition's trace from its first acquisition (a full view if fresh and fully seen), or from
        an acknowledgement of a member that never acquired there (a partial view: nothing is known of it)."""
        start = min((run.first_offset for run in acquired), default=0)
        fresh = bool(acquired) and all(run.delivery_count == 1 for run in acquired)
        full = fresh and not self._compacted(tp) and self.full_view(member.group)
        config = {**self.settings.share.partition_config(), "start_offset": start, "kafka_ranges": "waive",
                  "min_lock_duration_ms": self.settings.min_lock_duration_ms}
        header = {"machine": "share-partition", "profile": self.profile, "conduct": True, "config": config}
        if not full:
            header["view"] = "partial"
        trace = self.shelf.open(["share-partition", member.group, tp], header)
        partition = self.partitions[(member.group, tp)] = Partition(trace, member.group, exchange.link.broker, start)
        return partition

    def _compacted(self, tp: str) -> bool:
        """The topic is compacted: its traces are partial views, as they do not follow compaction (SP-65: a batch
        compaction removed looks like one the broker did not send)."""
        topic = tp.rpartition(":")[0]
        if topic not in self.compacted_topics:
            self.compacted_topics[topic] = self.admin.compacted(topic)
            if self.compacted_topics[topic]:
                log.info("topic %s: partial views (it is compacted: the traces do not follow compaction)", topic)
        return self.compacted_topics[topic]

    def _append(self, partition: Partition, exchange: Exchange, part, last_acquired: int) -> None:
        """`append` steps for the batches of the answer past what the trace has of the log (SP-2), then for the
        records it acquired past them (their batches were not sent: SP-48 judges that, from the records the
        answer held). A trace that meets a transaction's batches, or a batch compaction removed records from,
        becomes a partial view: it follows neither (SP-61, SP-65)."""
        sink = self.shelf.sink(partition.trace)
        spans = batch_spans(part.records or b"")
        if any(transactional for _, _, transactional, _ in spans):
            self._moved(partition, exchange.sent_ms, "transactional batches (the trace does not follow transactions)")
            return
        if any(count < last + 1 - first for first, last, _, count in spans):
            self._moved(partition, exchange.sent_ms, "a compacted batch (the trace does not follow compaction)")
            return
        for first, last, _, _ in spans:
            if last < partition.log_end:
                continue
            if first > partition.log_end:  # records between: never seen acquired, their batches unknown
                sink.add(exchange.sent_ms, "log", "append", {"count": first - partition.log_end})
            sink.add(exchange.sent_ms, "log", "append", {"count": last + 1 - max(first, partition.log_end)})
            partition.log_end = last + 1
        if last_acquired >= partition.log_end:  # acquired, their batches not sent: one append, batches unknown
            sink.add(exchange.sent_ms, "log", "append", {"count": last_acquired + 1 - partition.log_end})
            partition.log_end = last_acquired + 1

    def _mark_ambiguous(self, partition: Partition, exchange: Exchange) -> None:
        """A request overlapping another on the partition, or a window in which a lock it saw may expire."""
        sent, received = exchange.sent_ms, exchange.received_ms
        partition.lock_windows = [(early, late) for early, late in partition.lock_windows
                                  if late + TIMER_TOLERANCE_MS >= sent]
        near_expiry = any(early - TIMER_TOLERANCE_MS <= received and sent <= late + TIMER_TOLERANCE_MS
                          for early, late in partition.lock_windows)
        if sent < partition.busy_until_ms or near_expiry:
            partition.ambiguous = True
        partition.busy_until_ms = max(partition.busy_until_ms, received)

    def _locks_taken(self, group: str, tp: str, exchange: Exchange, lock_ms: int | None) -> None:
        partition = self.partitions.get((group, tp))
        if partition is not None:
            duration = lock_ms or self.settings.share.lock_ms
            partition.lock_windows.append((exchange.sent_ms + duration, exchange.received_ms + duration))

    def _moved(self, partition: Partition, at_ms: int, reason: str) -> None:
        """The share-partition may have been reloaded: a partial view from now on, told so (SP-82)."""
        partition.trace.demote(reason, self.settings.min_lock_duration_ms)
        self.shelf.sink(partition.trace).add(at_ms, "log", "reset", {})

    def _partition_sink(self, member: Member, tp: str):
        partition = self.partitions.get((member.group, tp))
        return None if partition is None else self.shelf.sink(partition.trace)

    def _stop_following(self, member: Member, at_ms: int, reason: str) -> None:
        for tp in member.held:
            partition = self.partitions.get((member.group, tp))
            if partition is not None:
                partition.trace.demote(f"an answer to {member.name} was not observed ({reason})",
                                       self.settings.min_lock_duration_ms)
                self.shelf.sink(partition.trace).add(at_ms, member.name, "unseen", {})
        member.trace.end(f"an answer was not observed ({reason})")
        member.trace, member.held = None, set()


def _acks(observer: Observer, topics) -> dict[str, list[tuple[int, int, str]]]:
    """The acknowledgements of a ShareFetch or ShareAcknowledge request: {tp: [(first, last, type)]}, a batch
    with one type per offset split into runs of one type."""
    acks: dict[str, list[tuple[int, int, str]]] = {}
    for topic in topics:
        for part in topic.partitions:
            batches = []
            for batch in part.acknowledgement_batches:
                types = list(batch.acknowledge_types)
                if len(types) == 1:
                    batches.append((batch.first_offset, batch.last_offset, ACK_TYPES.get(types[0], "gap")))
                    continue
                for index, code in enumerate(types):
                    offset, kind = batch.first_offset + index, ACK_TYPES.get(code, "gap")
                    if batches and batches[-1][2] == kind and batches[-1][1] == offset - 1:
                        batches[-1] = (batches[-1][0], offset, kind)
                    else:
                        batches.append((offset, offset, kind))
            if batches:
                acks[observer._tp(topic.topic_id, part.partition_index)] = batches
    return acks


def _acquire_args(exchange: Exchange, lock_ms: int | None) -> dict:
    """What an acquire step says beyond max_records: when its request left, and the lock duration it got."""
    return {"sent_ms": exchange.sent_ms, **({"lock_duration_ms": lock_ms} if lock_ms else {})}
