"""Judge for `share-partition` traces (KIP-932 in-flight records; spec/share-partition.md).

Every step first fires the locks that expired by its `at_ms` (SP-20), then
applies its op to the model. The checker must keep up with recorded traces of
millions of steps (bench/bench_check.py), so by default it judges with the fast
acceptor fast/share_partition.py, which gives the model's verdicts
(tests/test_fastcheck_share_partition.py diffs the two); `reference=True`
(`kipcheck check --reference`) judges with model/share_partition.py itself. The
hot ops (append, acquire, acknowledge) read their fields directly and fall back
to the generic readers only to word an error.
"""

from __future__ import annotations

from typing import NoReturn

from kipcheck.model import share_partition as reference_model
from kipcheck.model.errors import Error
from kipcheck.model.profiles import PROFILES
from kipcheck.model.share_partition import (
    ACK_TYPES, GROUP_CONFIG_DEFAULTS, GROUP_CONFIG_KEYS, RULES, dead_letters_seen, delivered_violation,
    waited_fetch_violation,
)
from kipcheck.model.share_partition_log import kafka_only
from kipcheck.model.violation import STORAGE_ERRORS, Violation
from kipcheck.oracle.judge import Judge, op
from kipcheck.oracle.judges.fast import share_partition as fastcheck
from kipcheck.oracle.trace import Malformed, Step

ACQUIRE_MODES = ("batch_optimized", "record_limit")
# SP-73: the profiles whose records may be archiving, on their way to a dead-letter queue.
_DEAD_LETTER_PROFILES = frozenset(profile for profile, rules in RULES.items() if reference_model.ARCHIVING in rules.states)


def _is_int(value: object) -> bool:
    return type(value) is int


class SharePartitionJudge(Judge):
    machine = "share-partition"
    config_defaults = {
        "start_offset": 0,
        "delivery_count_limit": 5,
        "record_lock_duration_ms": 30000,
        # Kafka's group.share.partition.max.record.locks (SP-7).
        "max_inflight_records": 2000,
        # SP-26: runs [first, last, state, delivery_count] loaded after a restart (a trace format extension).
        "initial_state": [],
        # SP-40: Kafka 4.2's failure on a batch straddling SPSO with no cached record there (a trace format
        # extension): "accept" it (UNKNOWN_SERVER_ERROR) or "flag" it (INVALID_RECORD_STATE is expected).
        "straddle_npe": "accept",
        # SP-62: the share group's share.isolation.level (a trace format extension, kafka-4.2 only).
        "isolation_level": "read_uncommitted",
        # SP-45, SP-71: "enforce" the Kafka profile's ranges on the settings above, or "waive" them for a
        # test-sized run (a trace format extension).
        "kafka_ranges": "enforce",
        # SP-72, SP-73: a Kafka 4.4 group's share.renew.acknowledge.enable, and whether it has a dead-letter
        # queue (trace format extensions, kafka-4.4 only).
        **GROUP_CONFIG_DEFAULTS,
    }
    profiles = PROFILES
    has_fast_acceptor = True  # oracle/check.py passes reference=True for `kipcheck check --reference`

    def __init__(self, config: dict, profile: str, reference: bool = False) -> None:
        super().__init__(config, profile)
        settings = dict(self.config)
        kafka_ranges = settings.pop("kafka_ranges")
        if kafka_ranges not in ("enforce", "waive"):
            raise Malformed(1, f"config: kafka_ranges must be enforce or waive, found {kafka_ranges!r}")
        self.enforce_ranges = kafka_ranges == "enforce"
        self._range_check(settings)
        self.states = {state: state for state in RULES[self.profile].states}  # SP-73: archiving under kafka-4.4
        partition_class = (reference_model if reference else fastcheck).SharePartition
        # SP-67: (step number, actor, offsets) of the records an acknowledgement riding on a ShareFetch released,
        # for the acquisition of that ShareFetch, the next step.
        self._released_in_fetch: tuple[int, str, frozenset[int]] = (0, "", frozenset())
        try:
            self.model = partition_class(**settings, profile=self.profile)
        except ValueError as error:
            raise Malformed(1, f"config: {error}") from None

    def _range_check(self, settings: dict) -> None:
        """SP-45, SP-71: a setting the profile's Kafka refuses is a violation, unless the header waives the ranges."""
        violation = reference_model.kafka_range_violation(settings, self.profile) if self.enforce_ranges else None
        if violation is not None:
            raise violation

    def _not_positive(self, step: Step, name: str) -> NoReturn:
        """Raise Malformed for args.<name>, which is missing, not an integer or below 1."""
        value = self.arg(step, name, int)
        raise Malformed(step.line, f"args.{name} of {step.op!r} must be >= 1, found {value}")

    # The hot ops read their fields inline and call the helpers above only to word an error.

    @op(args=["count", "producer"])
    def op_append(self, step: Step) -> None:
        count = step.args.get("count")
        if type(count) is not int or count < 1:
            self._not_positive(step, "count")
        self.model.advance(step.at_ms)
        producer = step.args.get("producer")
        if producer is not None:  # SP-61: a transactional append (a trace format extension)
            self._log_step(step, self.model.append, count, self.arg(step, "producer", str))
            return
        self.model.append(count)

    # The trace format extensions of Kafka 4.2's log (SP-60..SP-65): a step the model cannot take is malformed.

    def _log_step(self, step: Step, apply, *args) -> None:
        try:
            apply(*args)
        except ValueError as error:
            raise Malformed(step.line, f"{step.op}: {error}") from None

    @op(args=["producer", "result"])
    def op_end_transaction(self, step: Step) -> None:
        self.model.advance(step.at_ms)
        self._log_step(step, self.model.end_transaction, self.arg(step, "producer", str), self.arg(step, "result", str))

    # Kafka 4.4's group configs and dead-letter queue (SP-70..SP-74): a step the profile lacks is malformed.

    @op(args=list(GROUP_CONFIG_KEYS))
    def op_alter_config(self, step: Step) -> None:
        self.model.advance(step.at_ms)
        self._log_step(step, self.model.alter_config, step.args)
        self._range_check(step.args)  # SP-71: what Kafka 4.4 refuses to alter a group to

    @op(args=["first", "last"])
    def op_dead_lettered(self, step: Step) -> None:
        self.model.advance(step.at_ms)
        self._log_step(step, self.model.dead_lettered, self.arg(step, "first", int), self.arg(step, "last", int))

    def _dead_letters_now(self) -> bool:
        """SP-74: phase 2 may finish for every archiving record before any step: an answer refused while some
        are archiving is judged again with theirs finished. False when none is archiving."""
        runs = self.model.archiving_runs() if self.profile in _DEAD_LETTER_PROFILES else []
        for first, last in runs:
            self.model.dead_lettered(first, last, seen_later=True)
        return bool(runs)

    @op(args=["offset"])
    def op_log_start(self, step: Step) -> None:
        self._log_step(step, self.model.move_log_start, step.at_ms, self.arg(step, "offset", int))

    @op(args=["first", "last"])
    def op_compact(self, step: Step) -> None:
        self._log_step(step, self.model.compact, step.at_ms, self.arg(step, "first", int), self.arg(step, "last", int))

    def _lock_duration(self, step: Step) -> None:
        """SP-46: the lock duration in force for this step's acquisition or renewal (a trace format extension).
        Called only when the step gives one or the model has one: most steps and models have none."""
        lock_duration_ms = step.args.get("lock_duration_ms")
        if lock_duration_ms is not None and (type(lock_duration_ms) is not int or lock_duration_ms < 0):
            raise Malformed(step.line, f"args.lock_duration_ms of {step.op!r} must be an integer >= 0, "
                                       f"found {lock_duration_ms!r}")
        self.model.lock_duration_ms = lock_duration_ms

    # sent_ms (a trace format extension): when the request left; the model takes the acquisition at at_ms, a
    # partial view (SP-81) from sent_ms.
    @op(args=["max_records", "acquire_mode", "wait_ms", "lock_duration_ms", "sent_ms"],
        observed=["records", "archived", "delivered"])
    def op_acquire(self, step: Step) -> None:
        max_records = step.args.get("max_records")
        if type(max_records) is not int or max_records < 1:
            self._not_positive(step, "max_records")
        observed = step.observed
        records = observed.get("records") if observed is not None else None
        if type(records) is not list:
            if records is None:
                raise Malformed(step.line, "acquire needs observed.records: the model continues from the observed answer")
            self.observed(step, "records", list)
        for run in records:
            if type(run) is not list or len(run) != 3 or type(run[0]) is not int or type(run[1]) is not int or type(run[2]) is not int:
                self._bad_run(step, run)
        # SP-42: the request's acquire mode (ShareFetch v2 ShareAcquireMode; a trace format extension).
        mode = step.args.get("acquire_mode", "batch_optimized")
        if mode not in ACQUIRE_MODES:
            raise Malformed(step.line, f"args.acquire_mode of 'acquire' must be one of {', '.join(ACQUIRE_MODES)}, "
                                       f"found {mode!r}")
        archived = observed.get("archived")  # SP-63: a trace format extension
        if archived is not None:
            self._check_archived(step)
        wait_ms = step.args.get("wait_ms")
        if wait_ms is not None and (type(wait_ms) is not int or wait_ms < 1):
            self._not_positive(step, "wait_ms")
        if wait_ms and not records and not archived:  # SP-63: aborted records acquired and archived are an answer
            self.model.advance(step.at_ms)
            violation = waited_fetch_violation(self.model, wait_ms, records)
            if violation is not None:
                raise violation
        if "lock_duration_ms" in step.args or self.model.lock_duration_ms is not None:  # SP-46
            self._lock_duration(step)
        number, actor, released = self._released_in_fetch
        released = released if (number, actor) == (step.number - 1, step.actor) else frozenset()  # SP-67
        try:
            self.model.acquire(step.at_ms, step.actor, max_records, records, mode == "record_limit", archived,
                               released)
        except Violation as refused:
            if not self._dead_letters_now():  # SP-74: a window shortened by phase 2 may hold more new records
                raise
            try:
                self.model.acquire(step.at_ms, step.actor, max_records, records, mode == "record_limit", archived,
                                   released)
            except Violation:
                raise refused from None
        delivered = observed.get("delivered")  # SP-48: a trace format extension
        if delivered is not None:
            violation = delivered_violation(self.model, records, self._delivered_runs(step))
            if violation is not None:
                raise violation

    def _delivered_runs(self, step: Step) -> list[list[int]]:
        runs = self.observed(step, "delivered", list)
        for run in runs:
            if type(run) is not list or len(run) != 2 or not _is_int(run[0]) or not _is_int(run[1]) \
                    or not 0 <= run[0] <= run[1]:
                raise Malformed(step.line, f"observed.delivered entries must be [first, last] integers with "
                                           f"0 <= first <= last, found {run!r}")
        return runs

    def _check_archived(self, step: Step) -> None:
        self._log_step(step, kafka_only, "observed.archived", self.profile)
        for run in self.observed(step, "archived", list):
            if type(run) is not list or len(run) != 2 or not _is_int(run[0]) or not _is_int(run[1]):
                raise Malformed(step.line, f"observed.archived entries must be [first, last] integers, found {run!r}")

    @staticmethod
    def _bad_run(step: Step, run: object) -> NoReturn:
        raise Malformed(step.line, f"observed.records entries must be [first, last, delivery_count] integers, found {run!r}")

    @op(args=["batches", "renew", "received_ms", "lock_duration_ms", "in_fetch"], observed=["error"],
        objects={"args.batches": ["first", "last", "type"]})
    def op_acknowledge(self, step: Step) -> None:
        batches = step.args.get("batches")
        if type(batches) is not list:
            self.arg(step, "batches", list)
        requests = []
        for batch in batches:
            if type(batch) is not dict:
                self._bad_batch(step, batch)
            first, last, ack_type = batch.get("first"), batch.get("last"), batch.get("type")
            if type(first) is not int or type(last) is not int or first < 0 or last < 0 or ack_type not in ACK_TYPES:
                self._bad_batch(step, batch)
            requests.append((first, last, ack_type))
        # SP-41: the request announced renewals (IsRenewAck; a trace format extension, default false).
        renew = step.args.get("renew", False)
        if type(renew) is not bool:
            self.arg(step, "renew", bool)
        # SP-67: the acknowledgements rode on a ShareFetch whose acquisition is the next step (a trace format
        # extension, default false).
        if type(step.args.get("in_fetch", False)) is not bool:
            self.arg(step, "in_fetch", bool)
        # SP-44: when the request was received, if it was answered later (a trace format extension).
        received_ms = step.args.get("received_ms")
        if received_ms is not None and (type(received_ms) is not int or not 0 <= received_ms <= step.at_ms):
            raise Malformed(step.line, f"args.received_ms of 'acknowledge' must be an integer from 0 to at_ms "
                                       f"{step.at_ms}, found {received_ms!r}")
        if "lock_duration_ms" in step.args or self.model.lock_duration_ms is not None:  # SP-46
            self._lock_duration(step)
        observed = step.observed
        error = observed.get("error") if observed is not None else None
        if isinstance(error, str) and error in STORAGE_ERRORS:  # SP-27: the state could not be written: no change
            self.model.storage_failure(step.at_ms, step.actor, requests, renew)
            return
        ruled = self.model.acknowledge(step.at_ms, step.actor, requests, renew, received_ms)
        if step.args.get("in_fetch"):
            spso, speo = self.model.spso, self.model.speo  # only records of the window can be released
            self._released_in_fetch = (step.number, step.actor, frozenset(
                offset for first, last, ack_type in requests if ack_type == "release"
                for offset in range(max(first, spso), min(last + 1, speo))))
        if (error is not None and error != ruled.value and ruled.value != Error.NONE and received_ms is None
                and self._dead_letters_now()):  # SP-74: SPSO past the records phase 2 archived skips them (SP-18)
            retried = self.model.acknowledge(step.at_ms, step.actor, requests, renew)
            ruled = retried if retried.value == error else ruled
        if error is not None and error != ruled.value:
            self.expect(ruled.clause, "error", ruled.value, self.observed(step, "error", str))
        elif error is not None and error != Error.NONE:  # refused as the model demands: the client's mistake
            self.refused(step, error, ruled.clause)

    @staticmethod
    def _bad_batch(step: Step, batch: object) -> NoReturn:
        raise Malformed(step.line, f"args.batches entries must be objects {{first, last, type}} with first, last >= 0 "
                                   f"and type one of {', '.join(ACK_TYPES)}; found {batch!r}")

    @op()
    def op_leave(self, step: Step) -> None:
        self.model.leave(step.at_ms, step.actor)

    @op()
    def op_tick(self, step: Step) -> None:
        self.model.advance(step.at_ms)

    @op(observed=["spso", "speo", "states", "stored_spso"])
    def op_check(self, step: Step) -> None:
        self.model.advance(step.at_ms)
        spso, states = self.observed(step, "spso", int), self.observed(step, "states", list)
        stored = self.observed(step, "stored_spso", int)
        runs = None if states is None else [self._state_run(step, run) for run in states]
        if self.profile in _DEAD_LETTER_PROFILES:  # SP-74: phase 2 may have finished since the last step
            for first, last in dead_letters_seen(self.model, spso, stored, runs):
                self.model.dead_lettered(first, last, seen_later=True)
        # SP-23 (Kafka's profiles: SP-66, SPSO moved by the share state's writes).
        self.expect(RULES[self.profile].start_clause, "spso", self.model.spso, spso)
        if stored is not None and not self.model.stored_start.allows(stored):  # SP-47
            raise Violation("SP-47", f"stored_spso={self.model.stored_start.expected()}", f"stored_spso={stored}")
        self.expect(self.model.speo_clause, "speo", self.model.speo, self.observed(step, "speo", int))
        if runs is not None:
            self.model.compare_snapshot(runs)

    def _state_run(self, step: Step, run: object) -> tuple[int, int, str, int]:
        if (type(run) is not list or len(run) != 4 or not _is_int(run[0]) or not _is_int(run[1])
                or type(run[2]) is not str or run[2] not in self.states or not _is_int(run[3])):
            raise Malformed(step.line, f"observed.states entries must be [first, last, state, delivery_count] "
                                       f"with state one of {', '.join(self.states)}; found {run!r}")
        return run[0], run[1], self.states[run[2]], run[3]
