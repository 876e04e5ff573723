"""Share-group requests and their answers, as a client sees them, turned into trace steps.

    steps = ShareSteps("kafka-4.2", sessions=lambda member: book, partitions=lambda member, tp: book,
                       held=lambda member: books)
    acquired = steps.share_fetch(member, epoch, tps, acks, "NONE", results, sent_ms, received_ms, max_records=500)
    errors = steps.share_acknowledge(member, epoch, acks, "NONE", results, sent_ms)
    steps.left(at_ms, member)          # the member's records released in every share-partition it may hold

Both writers of traces from the outside use it: the conformance probe (oracle/conformance/probes/probe.py),
which sends the requests itself, and `kipcheck record` (oracle/record/), which sees those of any application
cross it. A member is anything with `name`, `epoch` (of its next request: 0 when it has no session) and `session`
(the topic-partitions of its session); ShareSteps keeps the two up to date as answers come. `results` maps
"topic:partition" to the answer's kio partition (ShareFetch or ShareAcknowledge, any version).

What each answer becomes (spec/conformance.md, "The probe's traces"):
- share-session: the request with its top-level error;
- share-partition: `acknowledge` for each partition it acknowledged, with that partition's acknowledgement
  error (not judged when the answer left the partition out); `acquire` for every partition of the session,
  an answer that leaves one out being an empty acquisition; `leave` for every partition the member may hold
  when a final request succeeds (and, under `kip`, when a member re-opens its session at epoch 0: SS-3).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Callable, Iterable, Protocol

from kipcheck.model.errors import Error

FINAL_EPOCH = -1
MAX_EPOCH = 2**31 - 1
ACK_CODES = {"gap": 0, "accept": 1, "release": 2, "reject": 3, "renew": 4}
ACK_TYPES = {code: name for name, code in ACK_CODES.items()}

Acks = dict[str, list[tuple[int, int, str]]]   # "topic:partition" -> [(first, last, type)]


class Sink(Protocol):
    def add(self, at_ms: int, actor: str, op: str, args: dict, observed: dict | None = None) -> None: ...


@dataclass
class TraceBook:
    """The steps of one trace, in order; `header` is its first line."""

    header: dict
    steps: list[dict] = field(default_factory=list)

    def add(self, at_ms: int, actor: str, op: str, args: dict, observed: dict | None = None) -> None:
        step = {"step": len(self.steps) + 1, "at_ms": at_ms, "actor": actor, "op": op, "args": args}
        if observed is not None:
            step["observed"] = observed
        self.steps.append(step)

    def lines(self) -> list[str]:
        return [json.dumps(self.header)] + [json.dumps(step) for step in self.steps]


class ShareSteps:
    """`sessions(member)`: the share-session trace of the member's requests; `partitions(member, tp)`: the
    share-partition trace a step of the member in tp goes to (None: not written); `held(member)`: the
    share-partition traces of every partition where the member may hold records (where `leave` goes)."""

    def __init__(self, profile: str, sessions: Callable[[object], Sink],
                 partitions: Callable[[object, str], Sink | None], held: Callable[[object], Iterable[Sink]]):
        self.profile = profile
        self.sessions = sessions
        self.partitions = partitions
        self.held = held

    def share_fetch(self, member, epoch: int, tps: Iterable[str], acks: Acks, error: str, results: dict,
                    sent_ms: int, received_ms: int, max_records: int, forget: Iterable[str] = (),
                    wait_ms: int = 0, observed: dict | None = None, acquire_args: dict | None = None) -> dict[str, list]:
        """The steps of one ShareFetch; {tp: acquired runs [first, last, delivery_count]} ({} when refused).
        `acquire_args`: more args of its acquire steps (trace format extensions such as `sent_ms`)."""
        added = set(tps) | set(acks)
        self.sessions(member).add(sent_ms, member.name, "share_fetch", {
            "epoch": epoch, "add": sorted(added), "forget": sorted(forget), "acks": session_acks(acks)},
            {"error": error, **(observed or {})})
        if error != Error.NONE:
            return {}
        if epoch == 0 and member.epoch != 0 and self.profile == "kip":
            self.left(sent_ms, member)  # SS-3: under kip, re-opening releases the old session's records
        session_advanced(member, epoch, added, set(forget))
        for tp, batches in acks.items():
            self.acknowledged(tp, sent_ms, member, batches, results.get(tp), "acknowledge_error_code")
        if epoch == FINAL_EPOCH:
            self.left(sent_ms, member)
            return {}
        acquired = {}
        for tp in sorted(member.session | set(results)):  # a session partition left out of the answer got nothing
            part = results.get(tp)
            if part is not None and part.error_code.name != "none":
                continue
            runs = [] if part is None else coalesce([[run.first_offset, run.last_offset, run.delivery_count]
                                                     for run in part.acquired_records])
            acquired[tp] = runs
        for tp, runs in acquired.items():
            book = self.partitions(member, tp)
            if book is None:
                continue
            args = {"max_records": max_records, **(acquire_args or {})}
            if wait_ms and member.session == {tp}:
                args["wait_ms"] = wait_ms  # SP-28: a lone fetcher of a one-partition session that waited
            book.add(received_ms, member.name, "acquire", args, {"records": [list(run) for run in runs]})
        return acquired

    def share_acknowledge(self, member, epoch: int, acks: Acks, error: str, results: dict,
                          sent_ms: int) -> dict[str, str | None]:
        """The steps of one ShareAcknowledge; {tp: acknowledgement error} ({} when the request was refused)."""
        self.sessions(member).add(sent_ms, member.name, "share_acknowledge", {"epoch": epoch,
                                                                             "acks": session_acks(acks)},
                                  {"error": error})
        if error != Error.NONE:
            return {}
        session_advanced(member, epoch, set(acks), set())
        errors = {tp: self.acknowledged(tp, sent_ms, member, batches, results.get(tp), "error_code")
                  for tp, batches in acks.items()}
        if epoch == FINAL_EPOCH:
            self.left(sent_ms, member)
        return errors

    def acknowledged(self, tp: str, at_ms: int, member, batches, part, error_field: str) -> str | None:
        """An acknowledge step; its error is not judged when the answer left the partition out."""
        error = None if part is None else error_name(getattr(part, error_field))
        book = self.partitions(member, tp)
        if book is not None:
            book.add(at_ms, member.name, "acknowledge",
                     {"batches": [{"first": first, "last": last, "type": kind} for first, last, kind in batches]},
                     None if error is None else {"error": error})
        return error

    def left(self, at_ms: int, member) -> None:
        for book in self.held(member):
            book.add(at_ms, member.name, "leave", {})


def session_advanced(member, epoch: int, added: set[str], forgotten: set[str]) -> None:
    """The member's session after a successful request of `epoch` (SS-8, SS-9, SS-12, SS-14, SS-16)."""
    if epoch == FINAL_EPOCH:
        member.epoch, member.session = 0, set()
        return
    member.session = added if epoch == 0 else (member.session | added) - forgotten
    member.epoch = 1 if epoch == MAX_EPOCH else epoch + 1


def session_acks(acks: Acks) -> list[dict]:
    return [{"tp": tp, "first": first, "last": last, "type": kind} for tp, batches in acks.items()
            for first, last, kind in batches]


def error_name(error_code) -> str:
    from kio.schema.errors import ErrorCode

    return ErrorCode(int(error_code)).name.upper()


def coalesce(runs: list[list[int]]) -> list[list[int]]:
    """Contiguous runs of equal delivery count merged (the trace's `records` shape)."""
    merged: list[list[int]] = []
    for first, last, count in runs:
        if merged and merged[-1][1] + 1 == first and merged[-1][2] == count:
            merged[-1][1] = last
        else:
            merged.append([first, last, count])
    return merged
