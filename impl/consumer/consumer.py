"""Consumer: a Kafka consumer over the wire protocol (through kio), with KIP-983's revoke-delay poll.

    consumer = Consumer({"bootstrap.servers": "127.0.0.1:9092", "group.id": "g"}, trace_dir="traces")
    consumer.subscribe(["orders"])                       # KIP-848 group (ConsumerGroupHeartbeat)
    while running:
        records = consumer.poll(100)                     # start-of-poll steps, then records
        ...process, then consumer.commit({tp: next_offset}, asynchronous=True)
        unfinished = consumer.to_be_revoked_partitions() & partitions_still_processing
        if unfinished:
            consumer.delay_revoke(unfinished)            # False once one of them was lost
        for tp in consumer.lost_partitions(): abort its work, commit nothing more for it
    consumer.close()

    consumer.assign([TopicPartition("orders", 0)])       # or standalone, without a group

Individual commit and key-range fetch (seed 000, spec/ic.md; `allow.individual.commit`):

    consumer.assign({TopicPartition("orders", 0): [(0, 2**62 - 1)]})   # key-hash ranges ([]: every key)
    consumer.key_ranges(TopicPartition("orders", 0))   # [(0, 2**62 - 1)]; None: not fetched by key range
    records = consumer.poll(100)                         # never a record already committed (IC-10)
    consumer.commit_ranges({tp: [(41, 42), (46, 47)]})   # processed offsets; sent minus what is committed (IC-11)
    consumer.commit_ranges({tp: ...}, asynchronous=True) # sent once max.num.ranges.to.commit wait, or next poll

In a group whose members ask for the key-range assignor
(`group.remote.assignor=key-range-round-robin`, spec/key-range-assign.md KR-13)
every assigned partition is fetched and committed this way, with the key share
the coordinator gave (whole when not split). A share changes owner through
KIP-983's revocation: the poll that completes it has sent every range the
application committed before it (`commit_ranges`, also asynchronous), gives
the share up (`own []`), and only then does the heartbeat acknowledge it.

A partition assigned with key ranges is fetched with KeyRanges (the broker
filters) and starts at its stable offset + 1, knowing the held ranges
(OffsetFetch's CommittedRangeOffsets); changing its ranges drops what was
fetched and starts again from there, so a key taken over is read from its
first uncommitted record. A range commit larger than one request is split
(impl/ic/client.py PendingCommits); a request refused with a retriable error
waits for the next flush, any other refusal is raised by the next call.
Records of a key range the consumer gave up are never committed by it
afterwards (IC-16: their new owner processes them): whenever their offsets
would be sent, a retried request's or a late commit_ranges', they are
dropped, logged and traced (`drop`), until a poll returns them again.
With `ic_traces` (KeySharingTraces, shared by the consumers of a process)
the consumer writes its own, deliver, commit and drop steps (impl/consumer/individual.py).

KIP-983 (seed 001, spec/revoke-delay.md), the default `rebalance.revoke.mode=delay`:
every poll first completes the revoke of the revoke-next partitions (after
the answers of commits still in flight: a partition is never let go before its
commit is answered), empties the lost list and moves revoke-thereafter to
revoke-next; then it learns, in order, what the coordinator decided since the
last poll (Decisions from the heartbeat thread). It returns records only from
partitions held and not pending revocation; buffered records of a partition
pending revocation, revoked or lost are dropped, never returned. The first
heartbeat after the poll acknowledges the completed revokes. A poll that
learned something returns without waiting for records, so the application
sees it at once. Commits of a partition the consumer no longer holds are
refused (CommitFailed, ILLEGAL_GENERATION) without asking the coordinator.

`rebalance.revoke.mode=callback` is the comparison: what consumers do today.
`subscribe(topics, on_assign, on_revoke, on_lost)`; the poll that learns a
revoke calls on_revoke(partitions) and completes the revoke when it returns
(the application processes and commits them inside the callback, while poll
returns nothing for any partition); no revoke-delay trace is written, since
the model is KIP-983's.

With `trace_dir` (delay mode, group) the consumer writes its revoke-delay trace
(impl/consumer/tracing.py). Not thread-safe, as Kafka's consumer: one thread
calls its methods; the heartbeat thread is its own.
"""

from __future__ import annotations

import base64
import logging
import time
import uuid
from collections import deque
from typing import Callable, Iterable, Mapping

from kipcheck.impl.consumer.cluster import Cluster
from kipcheck.impl.consumer.config import CALLBACK, DELAY, ConsumerConfig
from kipcheck.impl.consumer.errors import CommitFailed, IllegalState, KafkaError
from kipcheck.impl.consumer.fetcher import Fetcher
from kipcheck.impl.consumer.individual import WHOLE, IndividualCommits, KeySharingTraces
from kipcheck.impl.consumer.membership import GroupMembership, now_ms
from kipcheck.impl.consumer.offsets import RETRIED, GroupOffsets, PendingCommit
from kipcheck.impl.consumer.ownership import ASSIGN, Decision, Ownership, PollStart
from kipcheck.impl.consumer.records import ConsumerRecord
from kipcheck.impl.consumer.tracing import ConsumerTrace
from kipcheck.impl.ic.client import PendingCommits
from kipcheck.impl.topic_partition import TopicPartition
from kipcheck.model.errors import Error
from kipcheck.model.ic import merge, subtract
from kipcheck.model.key_hash import is_whole, record_hash
from kipcheck.model.key_range_assign import SERVER_ASSIGNOR

log = logging.getLogger("kipcheck.consumer")

MAX_IN_FLIGHT_COMMITS = 32  # asynchronous commits not yet answered; one more waits for the oldest answer
FENCED_ANSWERS = {Error.UNKNOWN_MEMBER_ID, Error.FENCED_MEMBER_EPOCH, Error.ILLEGAL_GENERATION}
Callback = Callable[["Consumer", frozenset[TopicPartition]], None]


def new_member_id() -> str:
    """A client-generated member id (KIP-1082), as Kafka's Uuid.randomUuid().toString(): 22 base64url chars."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class Consumer:
    def __init__(self, config: Mapping[str, str | int], trace_dir=None, ic_traces: KeySharingTraces | None = None):
        self.config = ConsumerConfig.from_properties(config)
        self.cluster = Cluster(self.config)
        self.fetcher = Fetcher(self.config, self.cluster)
        self._individual = IndividualCommits()
        self.fetcher.key_ranges = self._individual.key_ranges
        self._pending_ranges = PendingCommits(self.config.ic)
        self._ic_failure: KafkaError | None = None
        self._ic_traces = ic_traces
        self.member_id = new_member_id()
        self._trace_dir = trace_dir
        self._trace: ConsumerTrace | None = None
        self._membership: GroupMembership | None = None
        self._offsets = GroupOffsets(self.config, self.cluster, self._identity) if self.config.group_id else None
        self._ownership = Ownership()
        self._learned: list[Decision] = []    # taken from the heartbeat thread (and traced), applied at next poll
        self._in_flight: deque[tuple[PendingCommit, dict[TopicPartition, str], Callable | None]] = deque()
        self._listener: dict[str, Callback | None] = {}
        self._paused: set[TopicPartition] = set()
        self._closed = False

    # -- joining -------------------------------------------------------------------------------

    def subscribe(self, topics: Iterable[str], on_assign: Callback | None = None, on_revoke: Callback | None = None,
                  on_lost: Callback | None = None) -> None:
        """Join the group (KIP-848) on `topics`; the callbacks are the callback mode's rebalance listener."""
        self._check_usable()
        if not self.config.group_id:
            raise IllegalState("subscribe needs group.id")
        if self._membership is not None or self._learned or self._ownership.held():
            raise IllegalState("already subscribed or assigned")
        if self.config.remote_assignor == SERVER_ASSIGNOR and not self.config.ic.allow_individual_commit:
            raise IllegalState(f"group.remote.assignor={SERVER_ASSIGNOR} shares partitions by key range, "
                               "which allow.individual.commit=false refuses (KR-4)")
        listener = {"assign": on_assign, "revoke": on_revoke, "lost": on_lost}
        if self.config.revoke_mode == DELAY and any(listener.values()):
            raise IllegalState("rebalance.revoke.mode=delay has no rebalance listener (KIP-983): use "
                               "to_be_revoked_partitions(), delay_revoke() and lost_partitions() after each poll")
        topics = tuple(sorted(set(topics)))
        connection = self.cluster.connect()
        try:
            self.cluster.refresh(connection, names=topics)  # topic ids: the heartbeat reports owned ones by id
        finally:
            connection.close()
        self._listener = listener
        if self._trace_dir is not None and self.config.revoke_mode == DELAY:
            self._trace = ConsumerTrace(self._trace_dir, self.config.group_id, self.member_id)
        self._membership = GroupMembership(self.config, self.cluster, topics, self.member_id, self._trace)
        self._membership.start()

    def assign(self, partitions: Iterable[TopicPartition] | Mapping[TopicPartition, list]) -> None:
        """Standalone: consume exactly `partitions` from the next poll on, without a group.

        A mapping gives each partition its key-hash ranges (seed 000's assign; [] means every key): the
        partition is then fetched by key range and committed by ranges (CONSUMER_RANGE_FETCH_NOT_ACCEPTED
        if `allow.individual.commit` is false)."""
        self._check_usable()
        if self._membership is not None:
            raise IllegalState("assign after subscribe")
        key_ranges = {TopicPartition(*tp): [tuple(pair) for pair in ranges] for tp, ranges in partitions.items()} \
            if isinstance(partitions, Mapping) else {}
        for tp, ranges in key_ranges.items():
            error = self.config.ic.assignment_error(ranges)
            if error != Error.NONE:
                raise KafkaError(error, f"key ranges {ranges} of {tp}: allow.individual.commit is false")
        wanted = frozenset(TopicPartition(*tp) for tp in partitions)
        connection = self.cluster.connect()
        try:
            self.cluster.refresh(connection, names=sorted({tp.topic for tp in wanted}))
        finally:
            connection.close()
        unknown = [str(tp) for tp in wanted if not 0 <= tp.partition < self.cluster.partitions(tp.topic)]
        if unknown:
            raise KafkaError(Error.UNKNOWN_TOPIC_OR_PARTITION, ", ".join(sorted(unknown)))
        dropped = self._ownership.held() - wanted
        self._flush_ranges()            # what was processed is committed before a key range is given up
        self._ownership.complete(dropped)
        self._ended(dropped)
        self._own(key_ranges, dropped)
        self._learned.append(Decision(ASSIGN, wanted, now_ms()))

    def _own(self, key_ranges: dict[TopicPartition, list], dropped: frozenset[TopicPartition]) -> None:
        """New key ranges: what was fetched for the old ones goes; the position is fetched again (IC-15)."""
        gone = dropped | (set(self._individual.key_ranges) - set(key_ranges))
        self._give_up_key_ranges(gone)
        self.fetcher.forget(gone)
        self._own_ranges(key_ranges)

    def _own_ranges(self, key_ranges: dict[TopicPartition, list]) -> None:
        for tp, ranges in sorted(key_ranges.items()):
            ranges = [] if is_whole(ranges) else ranges
            if self._individual.key_ranges.get(tp) != list(merge(ranges)):
                self.fetcher.forget([tp])
                self._individual.own(tp, ranges)
                self._trace_own(tp, list(self._individual.key_ranges[tp]) or WHOLE)

    def _give_up_key_ranges(self, partitions) -> None:
        """The key ranges of these partitions are given up (traced as own [], IC-15) and their view forgotten."""
        for tp in sorted(partitions):
            if tp in self._individual.key_ranges:
                self._trace_own(tp, [])
                self._individual.forget(tp)

    def _trace_own(self, tp: TopicPartition, ranges: list) -> None:
        if self._ic_traces is not None and self.config.group_id:
            self._ic_traces.own(self.config.group_id, tp, self.member_id, ranges, now_ms())

    # -- polling -------------------------------------------------------------------------------

    def poll(self, timeout_ms: int) -> list[ConsumerRecord]:
        self._check_usable()
        deadline_ms = now_ms() + max(0, timeout_ms)
        self._flush_ranges()
        self._raise_ic_failure()
        self._settle_commits()
        if self._membership is not None:
            self._membership.polled(now_ms())
        self._trace_new_decisions()
        learned, self._learned = self._learned, []  # all learned by this poll (RD-2)
        start = self._start_poll(learned)
        records: list[ConsumerRecord] = []
        try:
            records = self._records(deadline_ms, news=bool(learned or start.revoked))
        finally:  # the poll happened, records or not: its step is written
            if self._trace is not None:
                self._trace.poll(now_ms(), {TopicPartition(record.topic, record.partition) for record in records},
                                 start)
            if self._membership is not None:  # after the poll step: the acknowledgement follows it
                self._membership.poll_done(start.revoked)
        return records

    def _trace_new_decisions(self) -> None:
        """Take what the coordinator decided from the heartbeat thread, trace it, keep it for the next poll."""
        if self._membership is not None:
            taken = self._membership.take_decisions()
            if self._trace is not None:
                for decision in taken:
                    self._trace.decision(decision)
            self._learned += taken

    def _start_poll(self, learned: list[Decision]) -> PollStart:
        start = self._ownership.start_poll(learned)
        self._ended(start.ended)
        if self.config.remote_assignor == SERVER_ASSIGNOR:   # each assigned partition is fetched by key range
            self._own_ranges({tp: [decision.key_shares[tp]] if tp in decision.key_shares else []
                              for decision in learned if decision.kind == ASSIGN
                              for tp in decision.partitions if self._ownership.owns(tp)})
        self.fetcher.discard_buffered(self._ownership.pending_revocation())  # never returned (RD-7)
        if self.config.revoke_mode == CALLBACK:
            self._run_listener(start, learned)
        return start

    def _run_listener(self, start: PollStart, learned: list[Decision]) -> None:
        """Today's consumers: callbacks inside poll; a revoke completes when on_revoke returns."""
        if start.lost and self._listener.get("lost"):
            self._listener["lost"](self, start.lost)
        revoking = self._ownership.to_be_revoked()
        if revoking:
            if self._listener.get("revoke"):
                self._listener["revoke"](self, revoking)
            self._settle_commits()
            self._ownership.complete(revoking)
            self._ended(revoking)
            self._membership.poll_done(revoking)
        assigned = frozenset(tp for decision in learned if decision.kind == ASSIGN for tp in decision.partitions
                             if self._ownership.owns(tp))
        if assigned and self._listener.get("assign"):
            self._listener["assign"](self, assigned)

    def _ended(self, partitions: frozenset[TopicPartition]) -> None:
        """An ownership ended: its position, buffer, pause and key ranges go (a new one starts afresh, as in Kafka)."""
        self.fetcher.forget(partitions)
        self._paused -= partitions
        self._give_up_key_ranges(partitions)

    def _records(self, deadline_ms: int, news: bool) -> list[ConsumerRecord]:
        fetchable = self._ownership.fetchable() - self._paused
        self._ensure_positions(fetchable)
        records = self._take(fetchable)
        while not records:
            remaining_ms = deadline_ms - now_ms()
            if remaining_ms <= 0 or (self._membership is not None and self._membership.changed.is_set()):
                break
            wait_ms = 0 if news else min(remaining_ms, self.config.fetch_max_wait_ms)
            if any(tp in self.fetcher.positions for tp in fetchable):
                self.fetcher.fetch(fetchable, wait_ms)
            elif self._membership is not None:
                self._membership.changed.wait(wait_ms / 1000)
            else:
                time.sleep(wait_ms / 1000)
            records = self._take(fetchable)
            if news:
                break
        return records

    def _take(self, fetchable: frozenset[TopicPartition]) -> list[ConsumerRecord]:
        """Buffered records, without those of key-range partitions already committed (IC-10)."""
        records = [record for record in self.fetcher.take(fetchable, self.config.max_poll_records)
                   if not self._individual.committed(TopicPartition(record.topic, record.partition), record.offset)]
        delivered: dict[TopicPartition, list] = {}
        for record in records:
            tp = TopicPartition(record.topic, record.partition)
            if tp in self._individual.key_ranges:
                delivered.setdefault(tp, []).append((record.offset, record_hash(record.key, record.offset)))
        for tp, pairs in sorted(delivered.items()):
            self._individual.delivered(tp, pairs)       # what a key range given up leaves behind (IC-16)
            if self._ic_traces is not None and self.config.group_id:
                self._ic_traces.deliver(self.config.group_id, tp, self.member_id, pairs, now_ms())
        return records

    def _ensure_positions(self, partitions: frozenset[TopicPartition]) -> None:
        missing = sorted(tp for tp in partitions if tp not in self.fetcher.positions)
        if not missing:
            return
        committed = self._offsets.committed(missing) if self._offsets is not None else {}
        for tp, offset in committed.items():
            if tp in self._individual.key_ranges:   # the stable offset and the held ranges (IC-9)
                self._individual.learned(tp, max(offset, 0) - 1, self._offsets.committed_ranges.get(tp, []))
            if offset >= 0:
                self.fetcher.seek(tp, offset)
        unset = [tp for tp in missing if tp not in self.fetcher.positions]
        if unset:
            self.fetcher.reset(unset, self.config.auto_offset_reset)

    # -- KIP-983 ---------------------------------------------------------------------------------

    def to_be_revoked_partitions(self) -> frozenset[TopicPartition]:
        """getToBeRevokedPartitions: the revoke-next list, revoked at the start of the next poll."""
        return self._ownership.to_be_revoked()

    def lost_partitions(self) -> frozenset[TopicPartition]:
        """getLostPartitions: the partitions lost during the last poll."""
        return self._ownership.lost

    def delay_revoke(self, partitions: Iterable[TopicPartition]) -> bool:
        """delayRevoke: revoke-next partitions move to revoke-thereafter; false (nothing moves) if one was lost."""
        self._check_usable()
        if self._membership is None or self.config.revoke_mode != DELAY:
            raise IllegalState("delay_revoke needs a subscription with rebalance.revoke.mode=delay")
        partitions = frozenset(TopicPartition(*tp) for tp in partitions)
        result = self._ownership.delay(partitions)
        if self._trace is not None:
            self._trace.delay_revoke(now_ms(), partitions, result)
        return result

    # -- commits ---------------------------------------------------------------------------------

    def commit(self, offsets: Mapping[TopicPartition, int] | None = None, asynchronous: bool = False,
               on_commit: Callable[[dict[TopicPartition, str]], None] | None = None) -> dict[TopicPartition, str] | None:
        """Commit `offsets` (default: the position of every held partition).

        Synchronous: the answers ({partition: "NONE"}), or CommitFailed for partitions not held (RD-10) or a
        group that no longer knows this member, KafkaError for other failures. Asynchronous: returns None;
        `on_commit(answers)` runs in a later poll, commit or close, always before a revoke completes; at most
        MAX_IN_FLIGHT_COMMITS wait for their answer (a further one first waits for the oldest).
        """
        self._check_usable()
        if self._offsets is None:
            raise IllegalState("commit needs group.id")
        if offsets is None:
            offsets = {tp: offset for tp, offset in self.fetcher.positions.items() if self._ownership.owns(tp)}
        offsets = {TopicPartition(*tp): offset for tp, offset in offsets.items()}
        if any(type(offset) is not int or offset < 0 for offset in offsets.values()):
            raise ValueError(f"commit offsets must be integers >= 0, found {offsets}")
        refused = self._refused(offsets)
        accepted = {tp: offset for tp, offset in offsets.items() if tp not in refused}
        pending = self._offsets.send(accepted) if accepted else None
        if asynchronous:
            while len(self._in_flight) >= MAX_IN_FLIGHT_COMMITS:
                self._settle_oldest()
            self._in_flight.append((pending, refused, on_commit))
            return None
        self._settle_commits()
        answers = {**(self._finish(pending) if pending is not None else {}), **refused}
        _raise_for(answers)
        return answers

    def commit_ranges(self, ranges: Mapping[TopicPartition, Iterable], asynchronous: bool = False
                      ) -> dict[TopicPartition, str] | None:
        """Individual commit of processed offsets, `{tp: [(first, last), ...]}` (seed 000).

        What is already committed is left out (gap amending, IC-11), and so are records of a key range given
        up (IC-16). Synchronous: every pending range is sent (split into requests that fit) and the answers
        returned, {tp: "NONE" | error}, a partition left with nothing to send answering nothing; KafkaError if
        one failed. Asynchronous: the ranges wait until more than max.num.ranges.to.commit are pending
        (IC-18), or the next poll, commit_ranges or close; returns None."""
        self._check_usable()
        if self._offsets is None:
            raise IllegalState("commit_ranges needs group.id")
        if not self.config.ic.allow_individual_commit:
            raise IllegalState("allow.individual.commit is false: this consumer does not commit ranges")
        self._raise_ic_failure()
        for tp, pairs in ranges.items():
            tp = TopicPartition(*tp)
            for first, last in self._individual.amend(tp, [tuple(pair) for pair in pairs]):
                self._pending_ranges.add(tp.topic, tp.partition, first, last)
        if asynchronous:
            if self._pending_ranges.due():
                self._flush_ranges()
            return None
        answers = self._flush_ranges(keep_failed=False)
        failed = {str(tp): error for tp, error in answers.items()
                  if error not in (Error.NONE, Error.INDIVIDUAL_COMMIT_TOO_OLD)}
        if failed:
            raise KafkaError(next(iter(failed.values())), f"individual commit failed: {failed}")
        return answers

    def _flush_ranges(self, keep_failed: bool = True) -> dict[TopicPartition, str]:
        """Send every pending range, pipelined, and take the answers. A request refused with a retriable
        error waits again; another refusal is kept for the next call to raise (`keep_failed`)."""
        if self._offsets is None:
            return {}
        requests = [self._without_given_up(request) for request in self._pending_ranges.take()]
        answers: dict[TopicPartition, str] = {}
        for request, pending in [(request, self._offsets.send(request)) for request in requests if request]:
            for tp, error in self._offsets.finish(pending).items():
                answers[tp] = error if answers.get(tp, Error.NONE) == Error.NONE else answers[tp]
                self._committed_ranges(tp, request[tp], error)
                if error in RETRIED and keep_failed:
                    self._pending_ranges.restore({tp: request[tp]})
                elif error not in (Error.NONE, Error.INDIVIDUAL_COMMIT_TOO_OLD) and keep_failed:
                    self._ic_failure = KafkaError(error, f"individual commit of {tp} failed")
        return answers

    def _without_given_up(self, request: dict[TopicPartition, list]) -> dict[TopicPartition, list]:
        """IC-16: a member never commits a record it gave up (its new owner processes it): those offsets are
        dropped, and the drop traced, whenever they would be sent (pending across the give-up, or later)."""
        kept: dict[TopicPartition, list] = {}
        for tp, ranges in request.items():
            dropped = self._individual.given_up(tp, ranges)
            if dropped:
                log.warning("not committing %d offsets of %s from %d to %d: their key range was given up",
                            sum(last - first + 1 for first, last in dropped), tp, dropped[0][0], dropped[-1][1])
                if self._ic_traces is not None and self.config.group_id:
                    self._ic_traces.drop(self.config.group_id, tp, self.member_id, dropped, now_ms())
                ranges = list(subtract(ranges, dropped))
            if ranges:
                kept[tp] = ranges
        return kept

    def _committed_ranges(self, tp: TopicPartition, sent: list, error: str) -> None:
        if error == Error.NONE:
            self._individual.answered(tp, self._offsets.stable_offsets.get(tp, -1), sent)
        if self._ic_traces is not None and error not in RETRIED:   # a retried commit is traced once answered
            self._ic_traces.commit(self.config.group_id, tp, self.member_id, sent, error, now_ms())

    def _raise_ic_failure(self) -> None:
        failure, self._ic_failure = self._ic_failure, None
        if failure is not None:
            raise failure

    def _refused(self, offsets: dict[TopicPartition, int]) -> dict[TopicPartition, str]:
        """RD-10: in a group, a partition this consumer does not hold is refused without asking the coordinator."""
        if self._membership is None:
            return {}
        refused = {tp: Error.ILLEGAL_GENERATION for tp in offsets if not self._ownership.owns(tp)}
        if self._trace is not None:
            for tp in sorted(refused):
                self._trace.commit(now_ms(), tp, offsets[tp], Error.ILLEGAL_GENERATION)
        return refused

    def _finish(self, pending: PendingCommit) -> dict[TopicPartition, str]:
        """A commit's answers; a fencing learned here is applied (and traced) before its commit steps."""
        answers = self._offsets.finish(pending)
        if self._membership is not None and FENCED_ANSWERS & set(answers.values()):
            self._membership.fenced(pending.generation, now_ms())
            self._trace_new_decisions()  # the loss precedes the refused commits in the trace (RD-13)
        answers = {tp: Error.ILLEGAL_GENERATION if error in FENCED_ANSWERS else error for tp, error in answers.items()}
        if self._trace is not None:
            for tp, error in sorted(answers.items()):
                if error in (Error.NONE, Error.ILLEGAL_GENERATION):  # other failures say nothing about ownership
                    self._trace.commit(now_ms(), tp, pending.offsets[tp], error)
        return answers

    def _settle_commits(self) -> None:
        while self._in_flight:
            self._settle_oldest()

    def _settle_oldest(self) -> None:
        pending, refused, on_commit = self._in_flight.popleft()
        answers = {**(self._finish(pending) if pending is not None else {}), **refused}
        if on_commit is not None:
            on_commit(answers)
        elif any(error != Error.NONE for error in answers.values()):
            log.warning("asynchronous commit failed: %s", {str(tp): error for tp, error in answers.items()})

    # -- the rest of the consumer API -------------------------------------------------------------

    def assignment(self) -> frozenset[TopicPartition]:
        return self._ownership.held()

    def key_ranges(self, tp: TopicPartition) -> list[tuple[int, int]] | None:
        """The key-hash ranges of `tp` this consumer fetches ([]: every key), None if not by key range."""
        ranges = self._individual.key_ranges.get(TopicPartition(*tp))
        return None if ranges is None else list(ranges)

    def position(self, tp: TopicPartition) -> int | None:
        return self.fetcher.positions.get(TopicPartition(*tp))

    def seek(self, tp: TopicPartition, offset: int) -> None:
        """The next poll returns `tp`'s records from `offset` on, as Kafka's seek (what was fetched ahead goes)."""
        self._check_usable()
        tp = TopicPartition(*tp)
        assigns = [decision.partitions for decision in self._learned if decision.kind == ASSIGN]
        assigned = assigns[-1] if assigns else self._ownership.held()   # an assign not yet polled counts
        if tp not in assigned:
            raise IllegalState(f"no current assignment for partition {tp}")
        if type(offset) is not int or offset < 0:
            raise ValueError(f"seek offset must be an integer >= 0, found {offset!r}")
        self.fetcher.seek(tp, offset)

    def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        self._check_usable()
        if self._offsets is None:
            raise IllegalState("committed needs group.id")
        return self._offsets.committed([TopicPartition(*tp) for tp in partitions])

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        self._paused |= {TopicPartition(*tp) for tp in partitions}

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        self._paused -= {TopicPartition(*tp) for tp in partitions}

    def close(self) -> None:
        """Answers of commits in flight first, then leave the group (epoch -1); the trace ends here."""
        if self._closed:
            return
        self._closed = True
        try:
            self._flush_ranges()
            self._settle_commits()
            self._give_up_key_ranges(set(self._individual.key_ranges))   # before leaving: no one else has them yet
        finally:
            if self._membership is not None:
                self._membership.close()
            self.fetcher.close()
            if self._offsets is not None:
                self._offsets.close()
            if self._trace is not None:
                self._trace.close()

    def __enter__(self) -> "Consumer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _check_usable(self) -> None:
        if self._closed:
            raise IllegalState("the consumer is closed")

    def _identity(self) -> tuple[str, int, int]:
        return self._membership.commit_identity() if self._membership is not None else ("", -1, 0)


def _raise_for(answers: dict[TopicPartition, str]) -> None:
    refused = sorted(tp for tp, error in answers.items() if error == Error.ILLEGAL_GENERATION)
    if refused:
        raise CommitFailed(refused, f"not this consumer's partitions (any more): {', '.join(map(str, refused))}")
    failed = {str(tp): error for tp, error in answers.items() if error != Error.NONE}
    if failed:
        raise KafkaError(next(iter(failed.values())), f"commit failed: {failed}")
