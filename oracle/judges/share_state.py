"""Judge for `share-state` traces (KIP-932 share coordinator: checkpoint and delta records, replay)."""

from __future__ import annotations

from typing import Any

import msgspec

from kipcheck.model.errors import Error
from kipcheck.model.profiles import KAFKA_PROFILES, PROFILES, is_kafka
from kipcheck.model.share_state import (
    COLD_SNAPSHOT_INTERVAL_MS, RECORD_KINDS, RULES, UNCHANGED, Answer, Batch, ShareCoordinator, canonical,
)
from kipcheck.model.violation import STORAGE_ERRORS, Violation
from kipcheck.oracle.judge import Judge, op
from kipcheck.oracle.trace import Malformed, Step

BATCH_FIELDS = ("first", "last", "state", "delivery_count")


class ShareStateJudge(Judge):
    machine = "share-state"
    # None: the profile's default (256 under kip, 500 under the Kafka profiles).
    # cold_snapshot_interval_ms: share.coordinator.cold.partition.snapshot.interval.ms (ST-34, the Kafka profiles).
    config_defaults = {"deltas_per_checkpoint": None, "cold_snapshot_interval_ms": COLD_SNAPSHOT_INTERVAL_MS}
    profiles = PROFILES

    def __init__(self, config: dict, profile: str) -> None:
        super().__init__(config, profile)
        limit = self.config["deltas_per_checkpoint"]
        highest = RULES[self.profile].deltas_max  # ST-9, ST-10
        if limit is not None and (type(limit) is not int or not 0 <= limit <= highest):
            raise Malformed(1, f"config 'deltas_per_checkpoint' must be an integer in 0..{highest}, found {limit!r}")
        if self.config["cold_snapshot_interval_ms"] < 0:
            raise Malformed(1, "config 'cold_snapshot_interval_ms' must be >= 0")
        self.model = ShareCoordinator(self.profile, limit,
                                      cold_snapshot_interval_ms=self.config["cold_snapshot_interval_ms"])

    def judge(self, step: Step) -> None:
        self.model.advance(step.at_ms)  # ST-34: cold-partition snapshots read the clock
        super().judge(step)

    @op(args=["state_epoch", "start_offset"], observed=["error", "record"])
    def op_initialize(self, step: Step) -> None:
        state_epoch, start_offset = self.arg(step, "state_epoch", int), self._start_offset(step)
        answer = None if self._failed(step) else self.model.initialize(state_epoch, start_offset)
        self._expect_answer(step, answer, "ST-31")

    @op(args=["state_epoch", "start_offset", "batches", "leader_epoch"], observed=["error", "record"],
        objects={"args.batches": BATCH_FIELDS})
    def op_write(self, step: Step) -> None:
        state_epoch, start_offset = self.arg(step, "state_epoch", int), self._start_offset(step)
        batches = _batches(step, self.arg(step, "batches", list), f"args.batches of {step.op!r}",
                           self.model.rules.states)
        for batch in batches:
            if batch.first < 0 or batch.first > batch.last or batch.delivery_count < 0:
                raise Malformed(step.line, f"args.batches needs 0 <= first <= last and delivery_count >= 0, found {batch}")
        leader_epoch = self._leader_epoch(step)
        answer = None if self._failed(step) else self.model.write(state_epoch, start_offset, batches, leader_epoch)
        self._expect_answer(step, answer, self.model.update_count_clause)

    @op()
    def op_failover(self, step: Step) -> None:
        self.model.failover()

    # The share coordinator's own records (the Kafka profiles only, trace format extensions: ST-30..ST-35).

    @op(observed=["error", "record"])
    def op_delete(self, step: Step) -> None:
        self._kafka_only(step)
        self._expect_answer(step, None if self._failed(step) else self.model.delete(), "ST-33")

    @op(observed=["record"])
    def op_cold_snapshot(self, step: Step) -> None:
        self._kafka_only(step)
        # ST-34: whether the job snapshots a key already cold again depends on the other keys of its shard, which
        # a trace of one key does not show; a snapshot observed says one of them was not cold.
        self.model.cold_snapshot(shard_cold=self.observed(step, "record", str) != "snapshot")
        self._expect_record(step, "ST-34")

    @op()
    def op_prune(self, step: Step) -> None:
        self._kafka_only(step)
        self.model.prune()

    def _kafka_only(self, step: Step, what: str | None = None) -> None:
        if not is_kafka(self.profile):
            raise Malformed(step.line, f"{what or 'op ' + repr(step.op)} is defined only under the Kafka profiles "
                                       f"({', '.join(KAFKA_PROFILES)}) (ST-30)")

    def _leader_epoch(self, step: Step) -> int | None:
        if "leader_epoch" not in step.args:
            return None
        self._kafka_only(step, "args.leader_epoch")
        leader_epoch = self.arg(step, "leader_epoch", int)
        if leader_epoch < UNCHANGED:
            raise Malformed(step.line, f"args.leader_epoch must be an epoch or -1, found {leader_epoch}")
        return leader_epoch

    def _expect_answer(self, step: Step, answer: Answer | None, clause: str) -> None:
        """The error of `answer` (None: the request failed on storage, ST-18), then the record it appended,
        decided by `clause` when it succeeded and by the refusing clause when it did not."""
        if answer is not None:
            self._expect_error(step, answer)
        self._expect_record(step, "ST-18" if answer is None else clause if answer.error == Error.NONE else answer.clause)

    def _expect_record(self, step: Step, clause: str) -> None:
        """ST-31: the record the request appended, when observed (a failed or refused request appends none)."""
        record = self.observed(step, "record", str)
        if record is None:
            return
        self._kafka_only(step, "observed.record")
        if record not in RECORD_KINDS:
            raise Malformed(step.line, f"observed.record must be one of {', '.join(RECORD_KINDS)}, found {record!r}")
        self.expect(clause, "record", self.model.appended, record)

    @op(args=["leader_epoch"], observed=["error", "state_epoch", "start_offset", "batches", "record"],
        objects={"observed.batches": BATCH_FIELDS})
    def op_read(self, step: Step) -> None:
        leader_epoch = self._leader_epoch(step)
        answer = None if self._failed(step) else self.model.read(leader_epoch)
        self._expect_answer(step, answer, "ST-32")
        state = self.model.state
        if answer is None or answer.error != Error.NONE or state is None:
            return
        for name in ("state_epoch", "start_offset"):
            self.expect(self.model.ruled(name), name, getattr(state, name), self.observed(step, name, int))
        observed = self.observed(step, "batches", list)
        if observed is not None:
            self.expect(self.model.ruled("batches"), "batches", _rows(state.batches),
                        _rows(_disjoint(step, observed, self.model.rules.states)))

    def _failed(self, step: Step) -> bool:
        """True when the step answered a storage error, which changes nothing (ST-18; ST-13 for
        COORDINATOR_LOAD_IN_PROGRESS, allowed under kip only while loading)."""
        error = self.observed(step, "error", str)
        if error not in STORAGE_ERRORS:
            return False
        self.model.appended = "none"
        self.model.storage_failure(error)
        return True

    def _expect_error(self, step: Step, answer: Answer) -> None:
        self.expect(answer.clause, "error", answer.error, self.observed(step, "error", str))

    def _start_offset(self, step: Step) -> int:
        start_offset = self.arg(step, "start_offset", int)
        if start_offset < UNCHANGED:
            raise Malformed(step.line, f"args.start_offset must be an offset or -1, found {start_offset}")
        return start_offset


def _batches(step: Step, rows: list[Any], where: str, states: tuple[str, ...]) -> list[Batch]:
    """`rows` as batches, each state one of the profile's `states` (archiving under kafka-4.4 only)."""
    batches = []
    for row in rows:
        if not isinstance(row, dict) or set(row) != set(BATCH_FIELDS):
            raise Malformed(step.line, f"{where} must be objects {{first, last, state, delivery_count}}, found {row!r}")
        first, last, state, delivery_count = (row[name] for name in BATCH_FIELDS)
        if any(type(value) is not int for value in (first, last, delivery_count)) or state not in states:
            raise Malformed(step.line, f"{where}: integers and a state in {', '.join(states)}, found {row!r}")
        batches.append(Batch(first, last, state, delivery_count))
    return batches


def _disjoint(step: Step, rows: list[Any], states: tuple[str, ...]) -> list[Batch]:
    batches = sorted(_batches(step, rows, f"observed.batches of {step.op!r}", states))
    for before, after in zip(batches, batches[1:]):
        if after.first <= before.last:
            # ST-1: one offset has one state.
            shown = msgspec.json.encode([list(batch) for batch in batches]).decode()
            raise Violation("ST-1", "disjoint batches", f"batches={shown}")
    return batches


def _rows(batches: Any) -> list[list[Any]]:
    """Batches as [first, last, state, delivery_count] rows, equal neighbours joined (runs do not matter)."""
    return [list(batch) for batch in canonical(batches)]
