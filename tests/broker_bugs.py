"""Seeded broker bugs, for measuring what `kipcheck conform` catches from the outside. TEST-ONLY.

Run as a script, this module is a `kipcheck broker` launcher that first patches
one bug into the reference broker, in this process only:

    python tests/broker_bugs.py BUG broker --port 0 ...      # what EmbeddedBroker(launcher=launcher(BUG)) runs

Each bug is one realistic slip in impl/share or impl/broker (a line or two
changed), the first group named after what goes wrong, the second after the
Apache Kafka bug it reproduces, the third after what only a client speaking
as real clients do sees (acknowledgements inside a fetch that acquires,
ForgottenTopicsData, version 2's RENEW and record_limit, the record bytes, the
settings the broker states); COMPARE_BUGS are those only a comparison with
another broker sees (`conform --compare`: tests/test_compare.py), as no probe
asks what they break. The production code is never edited: patches
are subclasses or replaced functions installed before the broker starts.
tests/test_conform.py shows a few caught; bench/bench_conform_bugs.py runs
the whole table (kill rate, time to each catch, false alarms).
"""

from __future__ import annotations

import dataclasses
import sys
from heapq import heapify
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve()


def launcher(bug: str) -> tuple[str, ...]:
    """The argv prefix that runs `kipcheck broker` with `bug` patched in (for EmbeddedBroker and --launcher)."""
    return (sys.executable, str(HERE), bug, "broker")


def _partition_bug(make: Callable[[type], type]) -> Callable[[], None]:
    """A bug in impl/share's SharePartition: the broker builds its partitions from the patched subclass."""
    def install() -> None:
        from kipcheck.impl.broker.share_engine import ShareEngine
        from kipcheck.impl.share import partition

        ShareEngine.partition_factory = staticmethod(make(partition.SharePartition).load)
    return install


# -- bugs named after what goes wrong ---------------------------------------------------------

def _expired_count_kept(base):
    from kipcheck.impl.share.partition import COUNT, EXPIRED, FIRST

    class Bug(base):
        """The delivery count is not incremented when a record whose lock expired is acquired again."""

        def _acquire_cached(self, member_id, budget, lock_id, acquired, record_limit=False):
            expired = {batch[FIRST] for batch in self._batches if batch[EXPIRED] is not None}
            start = len(acquired)
            remaining = super()._acquire_cached(member_id, budget, lock_id, acquired, record_limit)
            for position in range(start, len(acquired)):
                first, last, count = acquired[position]
                if first in expired:
                    acquired[position] = (first, last, count - 1)
                    self._batches[self._index_of(first)][COUNT] -= 1
            return remaining
    return Bug


def _spso_past_acquired(base):
    from kipcheck.impl.share.partition import ACKNOWLEDGED, ACQUIRED, ARCHIVED, STATE

    class Bug(base):
        """SPSO moves past acquired records as if they were done."""

        def _advance_start(self):
            batches = self._batches
            done = 0
            while done < len(batches) and batches[done][STATE] in (ACKNOWLEDGED, ARCHIVED, ACQUIRED):
                done += 1
            if any(batch[STATE] != ACQUIRED for batch in batches[:done]):  # moves only when something was done
                del batches[:done]
                del self._firsts[:done]
                self._spso = batches[0][0] if batches else self._cache_end
    return Bug


def _foreign_ack(base):
    from kipcheck.impl.share.partition import ACQUIRED, MEMBER, STATE

    class Bug(base):
        """A member may acknowledge records another member holds."""

        def _first_not_held(self, member_id, first, last):
            index = self._index_of(first)
            while index < len(self._batches):
                batch = self._batches[index]
                if batch[0] > last:
                    return None
                if batch[STATE] != ACQUIRED:
                    return batch
                index += 1
            return None

        def _apply_acknowledgements(self, member_id, batches, now_ms):
            for batch in self._batches:
                if batch[STATE] == ACQUIRED and any(first <= batch[0] and batch[1] <= last for first, last, _ in batches):
                    batch[MEMBER] = member_id
            return super()._apply_acknowledgements(member_id, batches, now_ms)
    return Bug


def _late_ack_accepted(base):
    from kipcheck.impl.share.partition import ACQUIRED, AVAILABLE, EXPIRED, MEMBER, STATE

    class Bug(base):
        """An acknowledgement of records whose lock expired is accepted (the member still counts as holding them)."""

        def _first_not_held(self, member_id, first, last):
            self._retake_expired(member_id, first, last)
            return super()._first_not_held(member_id, first, last)

        def _retake_expired(self, member_id, first, last):
            for batch in self._batches:
                if first <= batch[0] and batch[1] <= last and batch[STATE] == AVAILABLE and batch[EXPIRED] == member_id:
                    batch[STATE], batch[MEMBER] = ACQUIRED, member_id
                    self._available_records -= batch[1] - batch[0] + 1
    return Bug


def _speo_inclusive(base):
    class Bug(base):
        """SPEO treated as inclusive: an acknowledgement ending at SPEO is accepted (for the records below it)."""

        def _batch_error(self, member_id, first, last, previous_last, previous_type):
            if last == self._cache_end:
                return ("NONE", None) if first == last else \
                    super()._batch_error(member_id, first, last - 1, previous_last, previous_type)
            return super()._batch_error(member_id, first, last, previous_last, previous_type)

        def _apply_acknowledgements(self, member_id, batches, now_ms):
            clipped = [(first, min(last, self._cache_end - 1), kind) for first, last, kind in batches]
            return super()._apply_acknowledgements(member_id, [batch for batch in clipped if batch[0] <= batch[1]], now_ms)
    return Bug


def _partial_ack_split_off_by_one(base):
    class Bug(base):
        """A partial acknowledgement splits the batch one offset late: the range's first record is left acquired."""

        def _apply_acknowledgements(self, member_id, batches, now_ms):
            shifted = [(first + 1 if first < last else first, last, kind) for first, last, kind in batches]
            return super()._apply_acknowledgements(member_id, shifted, now_ms)
    return Bug


def _held_persisted_acknowledged(base):
    from kipcheck.impl.share.partition import ACKNOWLEDGED, ACQUIRED, COUNT, FIRST, LAST, STATE

    class Bug(base):
        """A state write carries the member's other held records as acknowledged (seen only after a restart)."""

        def _persist(self, planned, now_ms):
            written = {(first, last) for first, last, _, _ in planned}
            held = [(batch[FIRST], batch[LAST], ACKNOWLEDGED, batch[COUNT]) for batch in self._batches
                    if batch[STATE] == ACQUIRED and (batch[FIRST], batch[LAST]) not in written]
            return super()._persist(planned + held, now_ms)
    return Bug


def _release_stops_at_foreign(base):
    from kipcheck.impl.share.partition import ACQUIRED, FIRST, LAST, MEMBER, STATE

    class Bug(base):
        """KAFKA-19953: releasing a member's records stops at the first record another member holds."""

        def release_member(self, member_id, now_ms):
            self._tick(now_ms)
            ranges = []
            for batch in self._batches:
                if batch[STATE] == ACQUIRED:
                    if batch[MEMBER] != member_id:
                        break
                    ranges.append((batch[FIRST], batch[LAST]))
            released = self._release_ranges(ranges, now_ms)
            self._record(now_ms, member_id, "leave", {})
            return released
    return Bug


def _inflight_limit_ignores_released(base):
    class Bug(base):
        """KAFKA-19555: records acquired again after a release do not use up the in-flight room, so a fetch that
        re-acquires them also takes new records past group.share.partition.max.record.locks."""

        def _acquire_cached(self, member_id, budget, lock_id, acquired, record_limit=False):
            super()._acquire_cached(member_id, budget, lock_id, acquired, record_limit)
            return budget
    return Bug


def _count_decremented_on_close(base):
    from kipcheck.impl.share.partition import ACQUIRED, COUNT, MEMBER, STATE

    class Bug(base):
        """KAFKA-19972: a member's released records lose one delivery when its session closes."""

        def release_member(self, member_id, now_ms):
            for batch in self._batches:
                if batch[STATE] == ACQUIRED and batch[MEMBER] == member_id and batch[COUNT] > 0:
                    batch[COUNT] -= 1
            return super().release_member(member_id, now_ms)
    return Bug


def _spso_moves_while_pending(base):
    from kipcheck.impl.share.partition import ACKNOWLEDGED, ARCHIVED, AVAILABLE, STATE

    class Bug(base):
        """KAFKA-19436: SPSO moves past records whose acknowledgement is still in flight, releases included."""

        def _apply_acknowledgements(self, member_id, batches, now_ms):
            error = super()._apply_acknowledgements(member_id, batches, now_ms)
            if error == "NONE":
                acked = [(first, last) for first, last, _ in batches]
                done = 0
                while done < len(self._batches) and (self._batches[done][STATE] in (ACKNOWLEDGED, ARCHIVED) or (
                        self._batches[done][STATE] == AVAILABLE and any(
                            first <= self._batches[done][0] and self._batches[done][1] <= last for first, last in acked))):
                    done += 1
                if done:
                    self._available_records -= sum(batch[1] - batch[0] + 1 for batch in self._batches[:done]
                                                   if batch[STATE] == AVAILABLE)
                    del self._batches[:done]
                    del self._firsts[:done]
                    self._spso = self._batches[0][0] if self._batches else self._cache_end
            return error
    return Bug


def _reacquired_without_timer(base):
    class Bug(base):
        """KAFKA-18084: records acquired again get no acquisition lock timer: they stay acquired for ever."""

        def _lock(self, lock_id, acquired, now_ms, lock_duration_ms):
            super()._lock(lock_id, acquired, now_ms, lock_duration_ms)
            if any(count > 1 for _, _, count in acquired):
                self._locks.remove(next(entry for entry in self._locks if entry[1] == lock_id))
                heapify(self._locks)
    return Bug


# -- bugs outside the share-partition ---------------------------------------------------------

def _session_epoch_unchecked() -> None:
    from kipcheck.impl.share.sessions import ShareSessionCache

    original = ShareSessionCache._advance

    def advance(self, group, member, epoch, add, forget):
        """The incremental epoch is not compared with the session's."""
        session = self._sessions.get((group, member))
        return original(self, group, member, session.epoch if session is not None else epoch, add, forget)
    ShareSessionCache._advance = advance


def _session_limit_off_by_one() -> None:
    from kipcheck.impl.share.sessions import ShareSessionCache

    original = ShareSessionCache.__init__

    def init(self, config, trace_writer=None):
        """One session more than group.share.max.share.sessions fits in the cache."""
        original(self, dataclasses.replace(config, max_share_sessions=config.max_share_sessions + 1), trace_writer)
    ShareSessionCache.__init__ = init


def _final_epoch_keeps_records() -> None:
    from kipcheck.impl.share.sessions import SessionAnswer, ShareSessionCache

    original = ShareSessionCache._close_final

    def close_final(self, group, member, has_topics):
        """KAFKA-17396: the final epoch removes the session without releasing its records (they wait for their locks)."""
        answer = original(self, group, member, has_topics)
        return SessionAnswer(answer.error, process=answer.process, release=False, partitions=answer.partitions,
                             closed=answer.closed)
    ShareSessionCache._close_final = close_final


def _released_before_final_acks() -> None:
    from kipcheck.impl.broker.handlers import share

    def apply_session_answer(broker, connection, group, member, answer, acks, at_ms, error_field, renew):
        """The final request releases the member's records before it applies the request's acknowledgements."""
        broker.engine.session_used(connection, group, member, answer)
        if answer.release:
            broker.engine.release_member(group, member, at_ms, answer.released)
            broker.notify_changed()
        return {tp: {error_field: share._acknowledge(broker, group, member, tp, batches, at_ms, renew)}
                for tp, batches in acks.items()}
    share._apply_session_answer = apply_session_answer


def _merge_keeps_lower_count() -> None:
    from kipcheck.impl.share import coordinator

    original = coordinator._paint

    def paint(runs, batch, newer_wins):
        """Merging a state update keeps the lower delivery count where it overlaps the stored state."""
        if newer_wins:
            return original(runs, batch, newer_wins)
        negated = [(first, last, state, -count) for first, last, state, count in runs]
        first, last, state, count = batch
        return [(a, b, s, -c) for a, b, s, c in original(negated, (first, last, state, -count), False)]
    coordinator._paint = paint


def _snapshot_one_update_late() -> None:
    from kipcheck.impl.share.coordinator import ShareCoordinator

    original = ShareCoordinator._record_for_write

    def record_for_write(self, key, current, start_offset, batches):
        """A snapshot is written from the state before the update that triggered it."""
        record = original(self, key, current, start_offset, batches)
        if record["type"] in ("ShareSnapshot", "ShareCheckpoint"):
            record["batches"] = [list(batch) for batch in current.batches]
        return record
    ShareCoordinator._record_for_write = record_for_write


# -- bugs a client sees only in what real clients send and read ------------------------------------

def _piggyback_acquired_dropped() -> None:
    from kipcheck.impl.broker.handlers import share

    original = share._fetched_partition

    def fetched_partition(broker, tp, result):
        """A ShareFetch carrying acknowledgements answers its acknowledgement error and none of the records it
        acquired in the same partition (they stay acquired, unseen, until their locks expire)."""
        if "acknowledge_error_code" in result:
            result = {key: value for key, value in result.items() if key != "acquired"}
        return original(broker, tp, result)
    share._fetched_partition = fetched_partition


def _piggyback_acks_ignored() -> None:
    from kipcheck.impl.broker.handlers import share
    from kipcheck.model.errors import Error

    original = share._apply_session_answer

    def apply_session_answer(broker, connection, group, member, answer, acks, at_ms, error_field, renew):
        """The acknowledgements of a ShareFetch that is not final are answered NONE and never applied."""
        if error_field == "acknowledge_error_code" and not answer.closed:
            broker.engine.session_used(connection, group, member, answer)
            return {tp: {error_field: Error.NONE} for tp in acks}
        return original(broker, connection, group, member, answer, acks, at_ms, error_field, renew)
    share._apply_session_answer = apply_session_answer


def _forget_ignored() -> None:
    from kipcheck.impl.broker.share_engine import ShareEngine

    original = ShareEngine.share_fetch_session

    def share_fetch_session(self, group, member, epoch, add, forget, acks, at_ms):
        """ForgottenTopicsData is ignored: a forgotten partition stays in the session, fetched and released with it."""
        return original(self, group, member, epoch, add, [], acks, at_ms)
    ShareEngine.share_fetch_session = share_fetch_session


def _renew_ignored(base):
    class Bug(base):
        """RENEW is answered NONE and renews nothing: the lock runs out when it would have."""

        def _renew(self, batches, now_ms, lock_duration_ms):
            return None
    return Bug


def _record_limit_ignored() -> None:
    from kipcheck.impl.broker.share_engine import ShareEngine

    original = ShareEngine.acquire

    def acquire(self, group, member, tp, max_records, at_ms, record_limit=False):
        """The record_limit acquire mode is served as batch_optimized: whole log batches, MaxRecords a soft limit."""
        return original(self, group, member, tp, max_records, at_ms, False)
    ShareEngine.acquire = acquire


def _last_batch_not_sent() -> None:
    from kipcheck.impl.broker.handlers import share
    from kipcheck.impl.wire.batches import split_batches

    original = share._fetched_partition

    def fetched_partition(broker, tp, result):
        """An acquisition spanning several log batches is sent without the last of them: its records are lost to
        the client, which acknowledges their offsets as gaps."""
        answer = original(broker, tp, result)
        batches = split_batches(answer["records"]) if answer["records"] else []
        if len(batches) > 1:
            answer["records"] = b"".join(batch for batch, _ in batches[:-1])
        return answer
    share._fetched_partition = fetched_partition


def _next_batch_sent() -> None:
    from kipcheck.impl.broker.handlers import share

    original = share._fetched_partition

    def fetched_partition(broker, tp, result):
        """An acquisition's record bytes run one log batch past its last acquired record (reading the log to the
        offset after it): a record nobody acquired goes out with it."""
        answer = original(broker, tp, result)
        acquired = result.get("acquired", [])
        if acquired:
            answer["records"] = broker.partition_log(tp.topic, tp.partition).read_range(acquired[0][0],
                                                                                        acquired[-1][1] + 1)
        return answer
    share._fetched_partition = fetched_partition


def _lock_misreported() -> None:
    from kipcheck.impl.broker.handlers import configs, share

    original_reply = share.reply

    def reply(request, **fields):
        """The broker says its locks last three times longer than they do: in every ShareFetch and ShareAcknowledge
        answer (AcquisitionLockTimeoutMs) and in DescribeConfigs."""
        if fields.get("acquisition_lock_timeout"):
            fields["acquisition_lock_timeout"] *= 3
        return original_reply(request, **fields)
    share.reply = reply
    original_describe = configs._DESCRIBE[configs.BROKER]

    def describe_broker(broker, resource):
        error, message, entries = original_describe(broker, resource)
        for entry in entries:
            if entry["name"] == "group.share.record.lock.duration.ms":
                entry["value"] = str(3 * int(entry["value"]))
        return error, message, entries
    configs._DESCRIBE[configs.BROKER] = describe_broker


BUGS: dict[str, Callable[[], None]] = {
    "expired-count-kept": _partition_bug(_expired_count_kept),
    "spso-past-acquired": _partition_bug(_spso_past_acquired),
    "foreign-ack": _partition_bug(_foreign_ack),
    "late-ack-accepted": _partition_bug(_late_ack_accepted),
    "speo-inclusive": _partition_bug(_speo_inclusive),
    "partial-ack-split-off-by-one": _partition_bug(_partial_ack_split_off_by_one),
    "session-epoch-unchecked": _session_epoch_unchecked,
    "session-limit-off-by-one": _session_limit_off_by_one,
    "merge-keeps-lower-count": _merge_keeps_lower_count,
    "held-persisted-acknowledged": _partition_bug(_held_persisted_acknowledged),
    "released-before-final-acks": _released_before_final_acks,
    "KAFKA-19953-release-stops-at-foreign": _partition_bug(_release_stops_at_foreign),
    "KAFKA-19555-inflight-limit-ignores-released": _partition_bug(_inflight_limit_ignores_released),
    "KAFKA-19972-count-decremented-on-close": _partition_bug(_count_decremented_on_close),
    "KAFKA-17396-final-epoch-keeps-records": _final_epoch_keeps_records,
    "KAFKA-19436-spso-moves-while-pending": _partition_bug(_spso_moves_while_pending),
    "KAFKA-18084-reacquired-without-timer": _partition_bug(_reacquired_without_timer),
    "snapshot-one-update-late": _snapshot_one_update_late,
    "piggyback-acquired-dropped": _piggyback_acquired_dropped,
    "piggyback-acks-ignored": _piggyback_acks_ignored,
    "forget-ignored": _forget_ignored,
    "renew-ignored": _partition_bug(_renew_ignored),
    "record-limit-ignored": _record_limit_ignored,
    "last-batch-not-sent": _last_batch_not_sent,
    "next-batch-sent": _next_batch_sent,
    "lock-misreported": _lock_misreported,
}


# -- bugs only a comparison with another broker sees (`conform --compare`): no probe asks what they break ---------

def _log_end_is_last_offset() -> None:
    from kipcheck.impl.broker.handlers import records

    original = records._list_offset

    def list_offset(broker, topic, part):
        """ListOffsets answers the log's last offset where its end offset (one past the last) is asked for."""
        answer = original(broker, topic, part)
        if part.timestamp == records.LATEST_TIMESTAMP and answer.get("offset", 0) > 0:
            answer["offset"] -= 1
        return answer
    records._list_offset = list_offset


COMPARE_BUGS: dict[str, Callable[[], None]] = {"log-end-is-last-offset": _log_end_is_last_offset}


# -- faults: not bugs to catch, but a target the runner must not judge -------------------------------

def _exits_mid_run() -> None:
    import os

    from kipcheck.impl.broker.handlers import share

    original = share.handlers
    served = iter(range(EXIT_AFTER_SHARE_FETCHES))

    def handlers(broker):
        """The broker process dies after EXIT_AFTER_SHARE_FETCHES ShareFetch requests (the runner cannot
        restart a wire target: it is gone)."""
        served_handlers = original(broker)
        low, high, share_fetch = served_handlers[78]

        async def dying_share_fetch(connection, request):
            if next(served, None) is None:
                os._exit(1)
            return await share_fetch(connection, request)
        return {**served_handlers, 78: (low, high, dying_share_fetch)}
    share.handlers = handlers


EXIT_AFTER_SHARE_FETCHES = 40
FAULTS: dict[str, Callable[[], None]] = {"exits-mid-run": _exits_mid_run}


def _cli_main():
    from kipcheck.cli import main

    return main


if __name__ == "__main__":
    from bug_launcher import run_with_bug

    run_with_bug({**BUGS, **COMPARE_BUGS, **FAULTS}, _cli_main)
