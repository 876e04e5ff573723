"""A share-partition trace as a partial view (SP-80: SP-81 to SP-84) and/or judged for the consumers' conduct
(SP-85)."""

from __future__ import annotations

from typing import Callable

from kipcheck.model.conduct import Given
from kipcheck.model.errors import Error
from kipcheck.model.partial_view import SharePartitionView
from kipcheck.model.share_partition import ACK_TYPES
from kipcheck.oracle.judge import Judge
from kipcheck.oracle.judges.share_partition import SharePartitionJudge
from kipcheck.oracle.trace import Header, Malformed, Step
from kipcheck.oracle.views import declared_as


def judge(header: Header, reference: bool) -> Judge:
    if header.view == "partial":
        return SharePartitionViewJudge(header.config, header.profile, header.conduct, judge_view=True)
    full_config = {key: value for key, value in header.config.items() if key != "min_lock_duration_ms"}
    return Both(SharePartitionJudge(full_config, header.profile, reference),
                SharePartitionViewJudge(header.config, header.profile, conduct=True, judge_view=False))


class Both(Judge):
    """Two judges of one trace: the machine's, then the conduct rules; the first that refuses a step names it."""

    machine = "share-partition"

    def __init__(self, first: Judge, second: Judge) -> None:
        self.first, self.second = first, second

    @property
    def model(self):
        """The machine's model (what a picture of a counterexample draws)."""
        return self.first.model

    @property
    def refusals(self):
        """The requests the target rightly refused, as the machine's judge saw them."""
        return self.first.refusals

    def judge(self, step: Step) -> None:
        self.first.judge(step)
        self.second.judge(step)


def _unjudged(method: Callable) -> Callable:
    """An op that takes the fields `method` declares and judges nothing."""
    def unjudged(self, step: Step) -> None:
        pass
    return declared_as(method)(unjudged)


class SharePartitionViewJudge(Judge):
    """A share-partition trace judged as a partial view (SP-80: SP-81 to SP-84) and/or for the consumers'
    conduct (SP-85). It reads every op a full trace may hold; those that say nothing about the rules it
    judges (append, check, the log's ops) are read and left unjudged."""

    machine = "share-partition"
    config_defaults = {**SharePartitionJudge.config_defaults, "min_lock_duration_ms": 15000}
    profiles = SharePartitionJudge.profiles

    def __init__(self, config: dict, profile: str, conduct: bool, judge_view: bool) -> None:
        super().__init__(config, profile)
        for name in ("delivery_count_limit", "min_lock_duration_ms", "max_inflight_records"):
            if self.config[name] < 0:
                raise Malformed(1, f"config {name!r} must be >= 0, found {self.config[name]}")
        self.view = SharePartitionView(self.config["delivery_count_limit"], self.config["min_lock_duration_ms"],
                                       self.config["max_inflight_records"]) if judge_view else None
        self.given = Given() if conduct else None
        self.unjudged: set[str] = set()  # members whose conduct the trace stopped following

    @declared_as(SharePartitionJudge.op_acquire)
    def op_acquire(self, step: Step) -> None:
        runs = self.observed(step, "records", list)
        if runs is None or not all(type(run) is list and len(run) == 3 and all(type(value) is int for value in run)
                                   and 0 <= run[0] <= run[1] for run in runs):
            raise Malformed(step.line, f"acquire needs observed.records: [first, last, delivery_count] runs, "
                                       f"found {runs!r}")
        sent_ms = self.arg(step, "sent_ms", int, step.at_ms)
        if not 0 <= sent_ms <= step.at_ms:
            raise Malformed(step.line, f"args.sent_ms of 'acquire' must be from 0 to at_ms {step.at_ms}, "
                                       f"found {sent_ms}")
        if self.view is not None:
            self.view.acquire(step.at_ms, sent_ms, step.actor, runs)
        if self.given is not None:
            for first, last, _ in runs:
                self.given.give(step.actor, first, last)

    @declared_as(SharePartitionJudge.op_acknowledge)
    def op_acknowledge(self, step: Step) -> None:
        batches = [self._batch(step, batch) for batch in self.arg(step, "batches", list)]
        error = self.observed(step, "error", str)
        if self.given is not None and step.actor not in self.unjudged:
            # SP-85: a consumer acknowledges only records delivered to it (and not yet acknowledged by it).
            self.given.check("SP-85", step.actor, [(first, last) for first, last, _ in batches], "acknowledged")
            if error == Error.NONE:
                for first, last, kind in batches:
                    if kind in ("accept", "reject", "gap"):
                        self.given.take_back(step.actor, first, last)
        if self.view is not None:
            self.view.acknowledge(step.at_ms, step.actor, batches, error)

    @staticmethod
    def _batch(step: Step, batch: object) -> tuple[int, int, str]:
        if (type(batch) is not dict or type(batch.get("first")) is not int or type(batch.get("last")) is not int
                or not 0 <= batch["first"] <= batch["last"] or batch.get("type") not in ACK_TYPES):
            raise Malformed(step.line, f"args.batches entries must be objects {{first, last, type}} with "
                                       f"0 <= first <= last and type one of {', '.join(ACK_TYPES)}; found {batch!r}")
        return batch["first"], batch["last"], batch["type"]

    @declared_as(SharePartitionJudge.op_leave)
    def op_leave(self, step: Step) -> None:
        if self.view is not None:
            self.view.leave(step.actor)

    def op_reset(self, step: Step) -> None:
        """The share-partition may have been reloaded or reset: its leader restarted or moved (SP-82)."""
        self._partial_only(step)
        self.view.reset()

    def op_unseen(self, step: Step) -> None:
        """The view stops following the actor (what it was given, and holds, is no longer known)."""
        self._partial_only(step)
        self.view.leave(step.actor)
        self.unjudged.add(step.actor)

    op_reset.fields = op_unseen.fields = SharePartitionJudge.op_tick.fields

    def _partial_only(self, step: Step) -> None:
        if self.view is None:
            raise Malformed(step.line, f"op {step.op!r} belongs to partial views (\"view\": \"partial\") only")

    # Ops that say nothing about the rules judged here: read, and left unjudged.
    op_append = _unjudged(SharePartitionJudge.op_append)
    op_end_transaction = _unjudged(SharePartitionJudge.op_end_transaction)
    op_log_start = _unjudged(SharePartitionJudge.op_log_start)
    op_compact = _unjudged(SharePartitionJudge.op_compact)
    op_tick = _unjudged(SharePartitionJudge.op_tick)
    op_check = _unjudged(SharePartitionJudge.op_check)
