"""ShareSessionCache: the share sessions of one broker, keyed by (group, member).

The real counterpart of model/share_session.py. It decides the session part
of ShareFetch and ShareAcknowledge; the broker then processes the
acknowledgements and fetch on the share partitions, and releases the member's
records when the answer says so.

    cache = ShareSessionCache(config)          # config.max_share_sessions, config.profile
    answer = cache.share_fetch(group, member, epoch, add=[tp...], forget=[tp...], acks=[...], now_ms=...)
    answer = cache.share_acknowledge(group, member, epoch, acks=[...], now_ms=...)
        tp is "topic:partition"; acks are the request's (tp, first, last, ack_type)
        (only whether there are any matters here; they are traced as given)
    answer = cache.close_member(group, member, now_ms)    # connection closed / member left
    answer.error        "NONE" or Kafka's error name; on an error nothing changed
    answer.process      True: process this request's acks (and fetch) now
    answer.release      True: release the member's records (after processing acks)
    answer.released     where: kafka-4.2, the closed session's topic-partitions (Kafka 4.2's releaseSession,
                        spec SS-30); None (kip), every share-partition of the group
    answer.group_empty  kafka-4.2: a closed connection left the group no session, so the broker drops the
                        group's share-partitions and reloads them from the share coordinator when next used
                        (Kafka 4.2's onGroupEmpty, spec SS-31)
    answer.partitions   the session's topic-partitions after the request (empty once closed)
    cache.epoch_of(group, member) -> int | None ; cache.sessions() -> {(group, member): epoch}

Rules (profile "kafka-4.2", Kafka 4.2's ShareSessionCache and KafkaApis):
- ShareFetch epoch 0: INVALID_REQUEST if it carries acks. Otherwise an
  existing session of the member is replaced WITHOUT releasing its records;
  if none exists and the cache is full, SHARE_SESSION_LIMIT_REACHED. New
  session at epoch 1 with the `add` partitions.
- ShareFetch epoch > 0 and ShareAcknowledge epoch > 0: SHARE_SESSION_NOT_FOUND
  without a session, INVALID_SHARE_SESSION_EPOCH if the epoch differs from the
  cached one; else add/forget are applied and the epoch is incremented
  (2147483647 wraps to 1). ShareFetch and ShareAcknowledge share one counter.
- ShareFetch epoch -1: SHARE_SESSION_NOT_FOUND without a session; the epoch is
  not checked and add/forget are ignored; acks are processed, the session is
  removed and the member's records released.
- ShareAcknowledge epoch 0: INVALID_SHARE_SESSION_EPOCH (checked first).
  ShareAcknowledge epoch -1: SHARE_SESSION_NOT_FOUND or close + release.
- An epoch below -1 is an incremental epoch that never matches: NOT_FOUND
  without a session, else INVALID_SHARE_SESSION_EPOCH (SS-7).
- Epoch 0 with a full cache: the member's old session is removed first, then
  SHARE_SESSION_LIMIT_REACHED if still full (SS-5; `closed` says it went).
Profile "kip" (seed 002's table) differs: epoch 0 on an existing session
releases its records (SS-3); a final ShareFetch (-1) with topics to add or
forget is INVALID_REQUEST (SS-10); the cache has no limit (the seed sets
none). A refused request changes nothing else (SS-15).
Traces: with a tracing.TraceWriter, each group's requests go to that group's
share-session trace (actor = member), and `close_member` that took a session
writes `disconnect` (SS-17), as does every `close_member` under kafka-4.2 (the
close of a connection whose session a final request ended may still empty the
group, SS-31); `trace_check(group, now_ms)` adds a check.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

from kipcheck.impl.share.config import ShareConfig
from kipcheck.model.errors import Error

Ack = tuple[str, int, int, str]   # (tp, first, last, ack_type)
MAX_EPOCH = 2**31 - 1
FINAL_EPOCH = -1


@dataclass(slots=True)
class SessionAnswer:
    error: str
    process: bool = False
    release: bool = False
    partitions: frozenset[str] = frozenset()
    opened: bool = False
    closed: bool = False
    released: frozenset[str] | None = None
    group_empty: bool = False


@dataclass(slots=True)
class _Session:
    epoch: int
    partitions: set[str] = field(default_factory=set)


class ShareSessionCache:
    def __init__(self, config: ShareConfig, trace_writer=None) -> None:
        self.config = config
        self._sessions: dict[tuple[str, str], _Session] = {}   # SS-1: at most one per (group, member)
        self._kip = config.profile == "kip"
        self._trace_writer = trace_writer

    def __len__(self) -> int:
        return len(self._sessions)

    def epoch_of(self, group: str, member: str) -> int | None:
        session = self._sessions.get((group, member))
        return session.epoch if session else None

    def sessions(self) -> dict[tuple[str, str], int]:
        return {key: session.epoch for key, session in self._sessions.items()}

    def trace_check(self, group: str, now_ms: int) -> None:
        """Write a `check` step with the group's sessions to its share-session trace, if traced."""
        if self._trace_writer is not None:
            epochs = {member: session.epoch for (owner, member), session in self._sessions.items() if owner == group}
            self._trace_writer.sessions(group).check(now_ms, epochs)

    def partitions_of(self, group: str, member: str) -> frozenset[str]:
        session = self._sessions.get((group, member))
        return frozenset(session.partitions) if session else frozenset()

    # -- requests ----------------------------------------------------------------------------

    def share_fetch(self, group: str, member: str, epoch: int, add: Iterable[str] = (),
                    forget: Iterable[str] = (), acks: Sequence[Ack] = (), now_ms: int = 0) -> SessionAnswer:
        add, forget = list(add), list(forget)
        other_sessions = None
        if epoch == 0:
            # The limit is broker-wide; the group's trace records how many sessions it does not show (SS-5).
            other_sessions = self._other_sessions(group, member)
            answer = self._open(group, member, add, bool(acks))
        elif epoch == FINAL_EPOCH:
            answer = self._close_final(group, member, bool(add or forget))
        else:
            answer = self._advance(group, member, epoch, add, forget)
        if self._trace_writer is not None:
            self._trace_writer.sessions(group).share_fetch(now_ms, member, epoch, add, forget, list(acks), answer.error,
                                                           other_sessions, self._traced_release(answer))
        return answer

    def _traced_release(self, answer: SessionAnswer) -> list[str] | None:
        """The `released` a kafka-4.2 trace records (spec SS-30): where the answer releases records."""
        if self._kip or answer.error != Error.NONE:
            return None
        return sorted(answer.released or ()) if answer.release else []

    def share_acknowledge(self, group: str, member: str, epoch: int, acks: Sequence[Ack] = (),
                          now_ms: int = 0) -> SessionAnswer:
        if epoch == 0:   # SS-13
            answer = SessionAnswer(Error.INVALID_SHARE_SESSION_EPOCH)
        elif epoch == FINAL_EPOCH:
            answer = self._close_final(group, member, False)
        else:   # SS-14: the epoch moves, the partitions stay
            answer = self._advance(group, member, epoch, (), ())
        if self._trace_writer is not None:
            self._trace_writer.sessions(group).share_acknowledge(now_ms, member, epoch, list(acks), answer.error,
                                                                 self._traced_release(answer))
        return answer

    def close_member(self, group: str, member: str, now_ms: int = 0) -> SessionAnswer:
        """The connection that opened the member's session closed: drop the session and release its records.
        Under kafka-4.2 a group left with no session is empty, also when a final request had already closed
        the session (Kafka 4.2 checks on every such close, spec SS-31)."""
        session = self._sessions.pop((group, member), None)
        if session is None and self._kip:
            return SessionAnswer(Error.NONE, release=True)
        group_empty = not self._kip and not any(owner == group for owner, _ in self._sessions)
        answer = SessionAnswer(Error.NONE, release=session is not None, closed=session is not None,
                               group_empty=group_empty,
                               released=None if self._kip else frozenset(session.partitions if session else ()))
        if self._trace_writer is not None:   # SS-17; kafka-4.2: SS-30, SS-31
            self._trace_writer.sessions(group).disconnect(now_ms, member, self._traced_release(answer),
                                                          None if self._kip else group_empty)
        return answer

    def _other_sessions(self, group: str, member: str) -> int:
        """Sessions of other groups in the cache, when `member` of `group` asks for a new one."""
        return len(self._sessions) - sum(1 for owner, _ in self._sessions if owner == group)

    # -- the three kinds of epoch ------------------------------------------------------------

    def _open(self, group: str, member: str, add: list[str], has_acks: bool) -> SessionAnswer:
        if has_acks:   # SS-2: checked first, the existing session stays
            return SessionAnswer(Error.INVALID_REQUEST)
        key = (group, member)
        existing = self._sessions.pop(key, None)
        if not self._kip and len(self._sessions) >= self.config.max_share_sessions:
            # Kafka removes the old session before it tries to create the new one (SS-5).
            return SessionAnswer(Error.SHARE_SESSION_LIMIT_REACHED, closed=existing is not None)
        session = _Session(1, set(add))   # SS-16: the forget list is ignored
        self._sessions[key] = session
        # kip: the old session's records are released (SS-3); Kafka 4.2 keeps them locked until timeout (SS-4).
        return SessionAnswer(Error.NONE, process=True, release=existing is not None and self._kip,
                             partitions=frozenset(session.partitions), opened=True)

    def _advance(self, group: str, member: str, epoch: int, add: Iterable[str], forget: Iterable[str]) -> SessionAnswer:
        # An epoch below -1 is incremental and never matches (SS-7), as in Kafka 4.2.
        session = self._sessions.get((group, member))
        if session is None:
            return SessionAnswer(Error.SHARE_SESSION_NOT_FOUND)   # SS-6
        if session.epoch != epoch:
            return SessionAnswer(Error.INVALID_SHARE_SESSION_EPOCH)
        session.partitions.update(add)   # SS-8
        session.partitions.difference_update(forget)
        session.epoch = 1 if epoch == MAX_EPOCH else epoch + 1   # SS-9: after Integer.MAX_VALUE comes 1
        return SessionAnswer(Error.NONE, process=True, partitions=frozenset(session.partitions))

    def _close_final(self, group: str, member: str, has_topics: bool) -> SessionAnswer:
        if self._kip and has_topics:   # SS-10; Kafka 4.2 ignores them (SS-11)
            return SessionAnswer(Error.INVALID_REQUEST)
        session = self._sessions.pop((group, member), None)
        if session is None:
            return SessionAnswer(Error.SHARE_SESSION_NOT_FOUND)
        # SS-12: its acknowledgements are processed, then the session goes and its records are released
        return SessionAnswer(Error.NONE, process=True, release=True, partitions=frozenset(session.partitions),
                             closed=True, released=None if self._kip else frozenset(session.partitions))
