"""Share-group requests and their answers, as a client sees them, turned into trace steps.

    steps = ShareSteps("kafka-4.2", sessions=lambda member: book, partitions=lambda member, tp: books[tp],
                       held=lambda member: tps, read_records=True)
    acquired = steps.share_fetch(member, epoch, tps, acks, "NONE", results, sent_ms, received_ms, max_records=500)
    errors = steps.share_acknowledge(member, epoch, acks, "NONE", results, sent_ms)
    steps.left(at_ms, member)          # the member's records released where its session lets go of them (SS-30)

Both writers of traces from the outside use it: the conformance probe (oracle/conformance/probes/probe.py),
which sends the requests itself, and `kipcheck record` (oracle/record/), which sees those of any application
cross it. A member is anything with `name`, `epoch` (of its next request: 0 when it has no session) and `session`
(the topic-partitions of its session); ShareSteps keeps the two up to date as answers come. `results` maps
"topic:partition" to the answer's kio partition (ShareFetch or ShareAcknowledge, any version).

What each answer becomes (spec/conformance.md, "The probe's traces"):
- share-session: the request with its top-level error, and where a ShareFetch acquired (`acquired_in`, SS-19);
- share-partition: `acknowledge` for each partition it acknowledged, with that partition's acknowledgement
  error (not judged when the answer left the partition out; `renew` and its lock duration when the request
  announced renewals, SP-41); `acquire` for every partition of the session, an answer that leaves one out
  being an empty acquisition (with `read_records`, the offsets of the records its bytes held: `delivered`,
  SP-48); `leave` when a final request succeeds, in the partitions of the session it closed under the Kafka
  profiles (SS-30), in every partition the member may hold (`held`) under `kip` (and there, when a member
  re-opens its session at epoch 0: SS-3).
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from typing import Callable, Iterable, Protocol

from kipcheck.model.errors import Error
from kipcheck.model.profiles import is_kafka

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
    topic-partitions where the member may hold records (where `leave` may go); `read_records`: decode the record
    bytes of every ShareFetch answer (`delivered`, SP-48)."""

    def __init__(self, profile: str, sessions: Callable[[object], Sink],
                 partitions: Callable[[object, str], Sink | None], held: Callable[[object], Iterable[str]],
                 read_records: bool = False):
        self.profile = profile
        self.sessions = sessions
        self.partitions = partitions
        self.held = held
        self.read_records = read_records

    def share_fetch(self, member, epoch: int, tps: Iterable[str], acks: Acks, error: str, results: dict,
                    sent_ms: int, received_ms: int, max_records: int, forget: Iterable[str] = (),
                    wait_ms: int = 0, observed: dict | None = None, acquire_args: dict | None = None,
                    renew_lock_ms: int | None = None) -> dict[str, list]:
        """The steps of one ShareFetch; {tp: acquired runs [first, last, delivery_count]} ({} when refused).
        `acquire_args`: more args of its acquire steps (trace format extensions such as `sent_ms`);
        `renew_lock_ms`: a renewing fetch (IsRenewAck: its acknowledgements may renew, for that long, and it
        acquires nothing, SP-41)."""
        added = set(tps) | set(acks)
        request = {"epoch": epoch, "add": sorted(added), "forget": sorted(forget), "acks": session_acks(acks)}
        observed = {"error": error, **(observed or {})}
        if error != Error.NONE:
            self.sessions(member).add(sent_ms, member.name, "share_fetch", request, observed)
            return {}
        if epoch == 0 and member.epoch != 0 and self.profile == "kip":
            self.left(sent_ms, member)  # SS-3: under kip, re-opening releases the old session's records
        session = member.session
        session_advanced(member, epoch, added, set(forget))
        acquires = epoch != FINAL_EPOCH and renew_lock_ms is None
        for tp, batches in acks.items():
            self.acknowledged(tp, sent_ms, member, batches, results.get(tp), "acknowledge_error_code", renew_lock_ms,
                              in_fetch=acquires and _acquires_in(member, results, tp))
        acquired = {}
        if epoch == FINAL_EPOCH:
            self.left(sent_ms, member, session)
        elif acquires:
            acquired = self._acquired(member, results, received_ms,
                                      {"max_records": max_records, **(acquire_args or {})}, wait_ms)
        if any(acquired.values()):  # SS-19: where the answer acquired, judged against the session
            observed["acquired_in"] = sorted(tp for tp, runs in acquired.items() if runs)
        self.sessions(member).add(sent_ms, member.name, "share_fetch", request, observed)
        return acquired

    def _acquired(self, member, results: dict, received_ms: int, acquire_args: dict, wait_ms: int) -> dict[str, list]:
        """An `acquire` step for every partition of the session and of the answer ({tp: acquired runs}): a session
        partition left out of the answer got nothing. With `read_records`, the records its bytes held
        (`delivered`, SP-48)."""
        acquired = {}
        for tp in sorted(member.session | set(results)):  # a session partition left out of the answer got nothing
            if not _acquires_in(member, results, tp):
                continue
            part = results.get(tp)
            runs = [] if part is None else coalesce([[run.first_offset, run.last_offset, run.delivery_count]
                                                     for run in part.acquired_records])
            acquired[tp] = runs
            book = self.partitions(member, tp)
            if book is None:
                continue
            args = dict(acquire_args)
            if wait_ms and member.session == {tp}:
                args["wait_ms"] = wait_ms  # SP-28: a lone fetcher of a one-partition session that waited
            step_observed = {"records": [list(run) for run in runs]}
            if self.read_records and part is not None:
                delivered = delivered_runs(part.records)  # None: records that cannot be read, not judged
                if delivered is not None and (delivered or runs):
                    step_observed["delivered"] = delivered
            book.add(received_ms, member.name, "acquire", args, step_observed)
        return acquired

    def share_acknowledge(self, member, epoch: int, acks: Acks, error: str, results: dict,
                          sent_ms: int, renew_lock_ms: int | None = None) -> dict[str, str | None]:
        """The steps of one ShareAcknowledge; {tp: acknowledgement error} ({} when the request was refused).
        `renew_lock_ms`: IsRenewAck, its renewals restart locks for that long (SP-41, SP-46)."""
        self.sessions(member).add(sent_ms, member.name, "share_acknowledge", {"epoch": epoch,
                                                                             "acks": session_acks(acks)},
                                  {"error": error})
        if error != Error.NONE:
            return {}
        session = member.session
        session_advanced(member, epoch, set(), set())  # SS-14: the session keeps its partitions
        errors = {tp: self.acknowledged(tp, sent_ms, member, batches, results.get(tp), "error_code", renew_lock_ms)
                  for tp, batches in acks.items()}
        if epoch == FINAL_EPOCH:
            self.left(sent_ms, member, session)
        return errors

    def acknowledged(self, tp: str, at_ms: int, member, batches, part, error_field: str,
                     renew_lock_ms: int | None = None, in_fetch: bool = False) -> str | None:
        """An acknowledge step; its error is not judged when the answer left the partition out. `renew_lock_ms`:
        the request announced renewals (IsRenewAck), which restart locks for that long (SP-41, SP-46). `in_fetch`:
        they rode on a ShareFetch that also acquires, whose acquire step comes next (SP-67)."""
        error = None if part is None else error_name(getattr(part, error_field))
        book = self.partitions(member, tp)
        if book is not None:
            args = {"batches": [{"first": first, "last": last, "type": kind} for first, last, kind in batches]}
            if renew_lock_ms is not None:
                args.update(renew=True, lock_duration_ms=renew_lock_ms)
            if in_fetch:
                args["in_fetch"] = True
            book.add(at_ms, member.name, "acknowledge", args, None if error is None else {"error": error})
        return error

    def left(self, at_ms: int, member, session: set[str] | None = None) -> None:
        """`leave` where the member's records are released: under the Kafka profiles in the partitions of the
        session that ended (`session`, else its session now), SS-30; under kip in every one it may hold."""
        session = member.session if session is None else session
        for tp in self.held(member):
            book = self.partitions(member, tp)
            if book is not None and (not is_kafka(self.profile) or tp in session):
                book.add(at_ms, member.name, "leave", {})


def _acquires_in(member, results: dict, tp: str) -> bool:
    """Whether a ShareFetch's answer makes an acquisition in `tp` (empty when the answer left a session partition
    out), not an error."""
    part = results.get(tp)
    return (tp in member.session or part is not None) and (part is None or part.error_code.name == "none")


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


def answer_lock_ms(answer) -> int | None:
    """A ShareFetch or ShareAcknowledge answer's AcquisitionLockTimeoutMs; None when it says none (a version
    without the field, or no positive duration)."""
    timeout = getattr(answer, "acquisition_lock_timeout", None)
    lock_ms = int(timeout.total_seconds() * 1000) if timeout is not None else 0
    return lock_ms if lock_ms > 0 else None


def delivered_runs(records: bytes | None) -> list[list[int]] | None:
    """The offsets of the records in a ShareFetch answer's record bytes, as runs [first, last] in the order the
    records come (a record sent twice makes runs overlap). A transaction marker is the one record of its control
    batch; a batch that does not read (a bad CRC, a payload its codec cannot decompress) delivers nothing. Every
    codec Kafka has is read. None when what was delivered is unknown: a batch with a compression type Kafka does
    not have (5 to 7), or one decompressing past receive.message.max.bytes (impl/consumer/records.py)."""
    from kipcheck.impl.consumer.errors import KafkaError
    from kipcheck.impl.consumer.records import last_offset, record_offsets, split_batches
    from kipcheck.impl.wire.batches import ATTRIBUTES_OFFSET, CONTROL, InvalidBatch, read_header

    offsets: list[int] = []
    for batch in split_batches(bytes(records or b"")):
        (base_offset,) = struct.unpack_from(">q", batch, 0)
        try:
            if batch[ATTRIBUTES_OFFSET + 1] & CONTROL:
                read_header(batch)
                offsets += range(base_offset, last_offset(batch) + 1)
            else:
                offsets += record_offsets("", 0, batch)
        except InvalidBatch:
            continue
        except KafkaError as error:
            if error.error in (Error.UNSUPPORTED_COMPRESSION_TYPE, Error.MESSAGE_TOO_LARGE):
                return None
    runs: list[list[int]] = []
    for offset in offsets:
        if runs and offset == runs[-1][1] + 1:
            runs[-1][1] = offset
        else:
            runs.append([offset, offset])
    return runs
