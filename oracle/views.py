"""The judge a trace's header asks for: its machine's, or the judges of a partial view and of a client's conduct.

    judge = judge_for(header)       # what oracle/check.py judges every trace with

A header may say `"view": "partial"` (the trace holds the steps of some members only: spec SP-70 and SS-41
say which clauses still hold) and `"conduct": true` (the actors' own requests are judged too: SP-75, SS-40,
IC-22). A full view with conduct is judged by the machine's judge and by the conduct rules, step by step;
a partial view by the view's rules (model/partial_view.py) and, with conduct, the conduct rules.
"""

from __future__ import annotations

from typing import Callable

from kipcheck.model.conduct import Given, session_epoch_violation
from kipcheck.model.errors import Error
from kipcheck.model.share_partition import ACK_TYPES
from kipcheck.model.partial_view import SharePartitionView, unseen_sessions
from kipcheck.oracle import judges
from kipcheck.oracle.judge import Judge
from kipcheck.oracle.judges.ic import IcJudge
from kipcheck.oracle.judges.share_partition import SharePartitionJudge
from kipcheck.oracle.judges.share_session import ShareSessionJudge
from kipcheck.oracle.trace import Header, Malformed, Step

VIEW_MACHINES = ("share-partition", "share-session")
CONDUCT_MACHINES = ("share-partition", "share-session", "ic")


def judge_for(header: Header, reference: bool = False) -> Judge:
    """The judge of a trace with this header (Malformed for a machine or a view no judge knows)."""
    judge_class = judges.judge_class(header.machine)
    if judge_class is None:
        raise Malformed(1, f"unknown machine {header.machine!r} (known: {', '.join(judges.machines())})")
    if header.view == "partial" and header.machine not in VIEW_MACHINES:
        raise Malformed(1, f'"view": "partial" is defined for {" and ".join(VIEW_MACHINES)} traces only')
    if header.conduct and header.machine not in CONDUCT_MACHINES:
        raise Malformed(1, f'"conduct" is defined for {", ".join(CONDUCT_MACHINES)} traces only')
    if header.machine == "share-partition" and (header.view == "partial" or header.conduct):
        return _share_partition(header, reference)
    if header.machine == "share-session" and (header.view == "partial" or header.conduct):
        return ShareSessionViewJudge(header.config, header.profile, header.view == "partial", header.conduct)
    if header.machine == "ic" and header.conduct:
        return IcConductJudge(header.config, header.profile)
    if reference and getattr(judge_class, "has_fast_acceptor", False):
        return judge_class(header.config, header.profile, reference=True)
    return judge_class(header.config, header.profile)


def _share_partition(header: Header, reference: bool) -> Judge:
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

    def judge(self, step: Step) -> None:
        self.first.judge(step)
        self.second.judge(step)


def _declared_as(method: Callable) -> Callable:
    """An op that takes the fields `method` (another judge's op) declares."""
    def declare(handler: Callable) -> Callable:
        handler.fields = method.fields
        return handler
    return declare


def _unjudged(method: Callable) -> Callable:
    """An op that takes the fields `method` declares and judges nothing."""
    def unjudged(self, step: Step) -> None:
        pass
    return _declared_as(method)(unjudged)


class SharePartitionViewJudge(Judge):
    """A share-partition trace judged as a partial view (SP-70: SP-71 to SP-74) and/or for the consumers'
    conduct (SP-75). It reads every op a full trace may hold; those that say nothing about the rules it
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

    @_declared_as(SharePartitionJudge.op_acquire)
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

    @_declared_as(SharePartitionJudge.op_acknowledge)
    def op_acknowledge(self, step: Step) -> None:
        batches = [self._batch(step, batch) for batch in self.arg(step, "batches", list)]
        error = self.observed(step, "error", str)
        if self.given is not None and step.actor not in self.unjudged:
            # SP-75: a consumer acknowledges only records delivered to it (and not yet acknowledged by it).
            self.given.check("SP-75", step.actor, [(first, last) for first, last, _ in batches], "acknowledged")
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

    @_declared_as(SharePartitionJudge.op_leave)
    def op_leave(self, step: Step) -> None:
        if self.view is not None:
            self.view.leave(step.actor)

    def op_reset(self, step: Step) -> None:
        """The share-partition may have been reloaded or reset: its leader restarted or moved (SP-72)."""
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


class ShareSessionViewJudge(ShareSessionJudge):
    """A share-session trace of some of a broker's sessions (SS-41: a full fetch may find the cache full of
    sessions the trace does not show) and/or judged for the members' conduct (SS-40: the epochs they send)."""

    def __init__(self, config: dict, profile: str, partial: bool, conduct: bool) -> None:
        super().__init__(config, profile)
        self.partial, self.conduct = partial, conduct

    @_declared_as(ShareSessionJudge.op_share_fetch)
    def op_share_fetch(self, step: Step) -> None:
        self._judge_epoch(step)
        super().op_share_fetch(step)

    @_declared_as(ShareSessionJudge.op_share_acknowledge)
    def op_share_acknowledge(self, step: Step) -> None:
        self._judge_epoch(step)
        super().op_share_acknowledge(step)

    def _judge_epoch(self, step: Step) -> None:
        if self.conduct:
            session = self.model.by_member.get(step.actor)
            violation = session_epoch_violation(None if session is None else session.epoch,
                                                self.arg(step, "epoch", int))
            if violation is not None:
                raise violation

    def _other_sessions(self, step: Step) -> int:
        """SS-41: in a partial view, a full fetch refused for the session limit found the cache full of
        sessions the trace does not show; any other answer is judged as if there were none."""
        if self.partial:
            return unseen_sessions(self.config["max_sessions"], self.observed(step, "error", str))
        return super()._other_sessions(step)


class IcConductJudge(IcJudge):
    """An ic trace written by an observer of the consumers: with `fetched` steps, judged for IC-22."""

    def __init__(self, config: dict, profile: str) -> None:
        super().__init__(config, profile)
        self.given = Given()

    def op_fetched(self, step: Step) -> None:
        """Offsets a fetch answered the actor with (IC-22)."""
        for first, last in self._ranges_arg(step, "ranges"):
            if not 0 <= first <= last:
                raise Malformed(step.line, "args.ranges of 'fetched' must be [first, last] with 0 <= first <= last")
            self.given.give(step.actor, first, last)

    op_fetched.fields = IcJudge.op_own.fields

    @_declared_as(IcJudge.op_commit)
    def op_commit(self, step: Step) -> None:
        ranges = self._ranges_arg(step, "ranges")
        # IC-22: a member commits only offsets it was answered with.
        self.given.check("IC-22", step.actor, [tuple(pair) for pair in ranges], "committed")
        super().op_commit(step)
