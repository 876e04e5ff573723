"""KIP-932 share sessions: the share session cache of one broker (seed 002, "The sessions are handled as follows").

One cache serves one share group; a member has at most one session, keyed by
its member id. The broker's cache may also hold other groups' sessions: their
number, when a full fetch is decided, is `other_sessions` (SS-5). Every request has exactly one allowed answer, so the model is
deterministic: each request method decides the answer, applies it and
returns it. Clause ids refer to spec/share-session.md.

Library API (pure; callers compare an observed error with `Answer.error`):

    cache = ShareSessionCache(profile="kip")          # or "kafka-4.2", "kafka-4.4"; max_sessions=2000
    answer = cache.share_fetch(member, epoch, add=("orders:0",), forget=(), has_acks=False,
                               other_sessions=0)   # other groups' sessions in the broker's cache
    answer = cache.share_acknowledge(member, epoch)
    answer = cache.disconnect(member)                  # the member's connection closed
    answer = cache.storage_failure(error)              # a request refused with a storage error (SS-18)
    answer = cache.acknowledgement_threw(member, epoch) # kafka-4.2: its acknowledgements threw (SS-32)
    answer.error         # "NONE" or a Kafka error name
    answer.clause        # the clause that decides this answer
    answer.acknowledges  # the request's acknowledgements are processed
    answer.releases      # the member's acquired records are released (session discarded)
    answer.released      # kafka-4.2: the topic-partitions they are released in, the session's (SS-30)
    answer.group_empty   # kafka-4.2: a disconnect left the group no session; its share-partitions go (SS-31)
    cache.sessions()     # Ruled({member: epoch}, clause of the last request)
    cache.fetchable(member)  # the topic-partitions a ShareFetch the model just accepted may acquire in (SS-19)
    cache.by_member      # {member: Session(epoch, partitions)}: readable, and settable to
                         # start from any state (e.g. an epoch of Integer.MAX_VALUE)
    cache.connected      # kafka-4.2: members whose connection opened a session and has not closed since,
                         # the session perhaps ended by a final request since (SS-31)

`releases` is the effect a share-partition model needs: when it is true, every
record the member holds in the session's share-partitions becomes available
again (SP rules decide the details).

The cache is written as the KIP's text. Where Apache Kafka 4.2 departs from it
(the clauses marked `profile: kafka-4.2`), the KIP's rule is one method of
`KipRules` and Kafka's is the same method of `Kafka42Rules`, which extends it;
the cache asks the rules of its profile. Kafka 4.4's share session cache is
Kafka 4.2's: its rules are `Kafka42Rules` (every clause marked `kafka-4.2`
here is marked `kafka-4.4` too).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, NamedTuple

from kipcheck.model.errors import Error
from kipcheck.model.profiles import KAFKA_42, KAFKA_44, KIP, PROFILES
from kipcheck.model.violation import STORAGE_ERRORS, Ruled

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_EPOCH = 2**31 - 1  # Integer.MAX_VALUE


class Answer(NamedTuple):
    error: str
    clause: str
    acknowledges: bool = False
    releases: bool = False
    released: frozenset[str] = frozenset()
    group_empty: bool = False


@dataclass(frozen=True)
class Session:
    epoch: int
    partitions: frozenset[str] = frozenset()


def next_epoch(epoch: int) -> int:
    # SS-9: the epoch after Integer.MAX_VALUE is 1, since 0 and -1 are taken.
    return 1 if epoch == MAX_EPOCH else epoch + 1


@dataclass
class ShareSessionCache:
    profile: str = "kip"
    max_sessions: int = 2000
    by_member: dict[str, Session] = field(default_factory=dict)
    connected: set[str] = field(default_factory=set)
    _last_clause: str = field(default="SS-1", init=False, repr=False)

    def __post_init__(self) -> None:
        assert self.profile in PROFILES, self.profile
        assert self.max_sessions >= 0

    @property
    def rules(self) -> KipRules:
        """The rules where the profiles differ: the KIP's, or Kafka's over them."""
        return RULES[self.profile]

    def sessions(self) -> Ruled:
        """SS-1: every member's session epoch; the clause is the one that decided the last request."""
        return Ruled({member: session.epoch for member, session in self.by_member.items()}, self._last_clause)

    def share_fetch(
        self, member: str, epoch: int, add: Iterable[str] = (), forget: Iterable[str] = (), has_acks: bool = False,
        other_sessions: int = 0,
    ) -> Answer:
        assert other_sessions >= 0
        add, forget = frozenset(add), frozenset(forget)
        if epoch == INITIAL_EPOCH:
            answer = self._open(member, add, has_acks, other_sessions)
        elif epoch == FINAL_EPOCH:
            answer = self._final_fetch(member, add, forget)
        else:
            answer = self._incremental(member, epoch, "SS-8", add, forget)
        return self._decided(answer)

    def fetchable(self, member: str) -> frozenset[str]:
        """The topic-partitions a ShareFetch just accepted for `member` may acquire records in."""
        # SS-19: only those of its session, as the request left it (SS-8, SS-16); a final request
        # removed the session and acquires nothing.
        session = self.by_member.get(member)
        return session.partitions if session is not None else frozenset()

    def share_acknowledge(self, member: str, epoch: int) -> Answer:
        if epoch == INITIAL_EPOCH:
            # SS-13: ShareAcknowledge cannot open a session (Kafka 4.2 answers before the lookup).
            answer = Answer(Error.INVALID_SHARE_SESSION_EPOCH, "SS-13")
        elif epoch == FINAL_EPOCH:
            answer = self._close(member)
        else:
            answer = self._incremental(member, epoch, "SS-14")
        return self._decided(answer)

    def disconnect(self, member: str) -> Answer:
        """The connection on which the member last opened a session closed: never refused; `releases` says
        whether the session was still there."""
        # SS-17: the session, if any, is removed and its records released, in both profiles
        # (kip: read as a final request without acknowledgements, SS-12).
        session = self.by_member.pop(member, None)
        opened_here = member in self.connected or session is not None
        self.connected.discard(member)
        # SS-30 (kafka-4.2): the records are released in the session's share-partitions only.
        # SS-31 (kafka-4.2): the close of a connection that opened a session, even one a final request has
        # ended since, drops the group's share-partitions if the group has no session left.
        released = session.partitions if session is not None else frozenset()
        group_empty = self.rules.drops_empty_groups and opened_here and not self.by_member
        return self._decided(Answer(Error.NONE, "SS-17", releases=session is not None, released=released,
                                    group_empty=group_empty))

    def storage_failure(self, error: str) -> Answer:
        """A request refused with `error`, one of STORAGE_ERRORS: allowed, and it changes nothing."""
        assert error in STORAGE_ERRORS, error
        # SS-18: the broker could not reach or write what the request needs; as a refusal, SS-15 applies.
        return self._decided(Answer(error, "SS-18"))

    def acknowledgement_threw(self, member: str, epoch: int) -> Answer:
        """A request carrying acknowledgements (an incremental or final ShareFetch or ShareAcknowledge) that one
        of its share-partitions threw on (SP-40): allowed only where `rules.acknowledgements_throw`."""
        assert self.rules.acknowledgements_throw and epoch != INITIAL_EPOCH
        # SS-32: the session is looked up and its epoch checked first, as for any request.
        if member not in self.by_member:
            return self._decided(Answer(Error.SHARE_SESSION_NOT_FOUND, "SS-6"))
        if epoch == FINAL_EPOCH:  # SS-32: thrown before the session is removed: it stays, epoch and all
            return self._decided(Answer(Error.UNKNOWN_SERVER_ERROR, "SS-32"))
        answer = self._incremental(member, epoch, "SS-32")
        if answer.error != Error.NONE:
            return self._decided(answer)
        # SS-32: the epoch was bumped before the acknowledgements threw.
        self._last_clause = "SS-32"
        return answer._replace(error=Error.UNKNOWN_SERVER_ERROR)

    def _decided(self, answer: Answer) -> Answer:
        # SS-15: a refused request changes nothing, so the check after it is ruled by SS-15;
        # SS-5 is the one refusal that changes the cache (the old session is gone).
        unchanged = answer.error != Error.NONE and answer.clause != "SS-5"
        self._last_clause = "SS-15" if unchanged else answer.clause
        return answer

    def _open(self, member: str, add: frozenset[str], has_acks: bool, other_sessions: int) -> Answer:
        if has_acks:
            # SS-2: a full fetch request cannot carry acknowledgements.
            return Answer(Error.INVALID_REQUEST, "SS-2")
        return self.rules.reopen(self, member, add, other_sessions)

    def _new_session(self, member: str, add: frozenset[str]) -> None:
        # SS-16: a full fetch names the complete set; its forget list is ignored.
        self.by_member[member] = Session(1, add)
        self.connected.add(member)  # SS-31: Kafka remembers the connection that opened it

    def _incremental(
        self, member: str, epoch: int, clause: str, add: frozenset[str] = frozenset(), forget: frozenset[str] = frozenset(),
    ) -> Answer:
        session = self.by_member.get(member)
        if session is None:
            # SS-6: a non-zero epoch needs a session in the cache.
            return Answer(Error.SHARE_SESSION_NOT_FOUND, "SS-6")
        if session.epoch != epoch:
            # SS-7: an incremental epoch (and any epoch below -1) must equal the cached one.
            return Answer(Error.INVALID_SHARE_SESSION_EPOCH, "SS-7")
        # SS-8: ShareFetch adds then forgets partitions; SS-14: ShareAcknowledge keeps them.
        # Both increment the epoch and process the acknowledgements.
        self.by_member[member] = Session(next_epoch(epoch), (session.partitions | add) - forget)
        return Answer(Error.NONE, clause, acknowledges=True)

    def _final_fetch(self, member: str, add: frozenset[str], forget: frozenset[str]) -> Answer:
        if add or forget:
            return self.rules.final_fetch_with_changes(self, member)
        return self._close(member)

    def _close(self, member: str) -> Answer:
        if member not in self.by_member:
            # SS-6: a final epoch needs a session in the cache.
            return Answer(Error.SHARE_SESSION_NOT_FOUND, "SS-6")
        # SS-12: -1 is the final request's only epoch, never checked against the cached one;
        # acknowledgements are processed, then the session goes and its records are released
        # (SS-30, kafka-4.2: in the session's share-partitions only).
        session = self.by_member.pop(member)
        return Answer(Error.NONE, "SS-12", acknowledges=True, releases=True, released=session.partitions)


class KipRules:
    """The KIP's rules where Kafka 4.2 departs from them (the clauses marked `profile: kip`)."""

    # SS-31 is Kafka's: under the KIP a closed connection ends one session, never a group's partitions.
    drops_empty_groups = False
    # SS-32 is Kafka's bug (SP-40): under the KIP an acknowledgement never fails the whole request.
    acknowledgements_throw = False

    def reopen(self, cache: ShareSessionCache, member: str, add: frozenset[str], other_sessions: int) -> Answer:
        """ShareFetch epoch 0 (after SS-2): the member's session starts again."""
        # SS-3: the existing session is discarded releasing its records, and a new one is created.
        releases = cache.by_member.pop(member, None) is not None
        cache._new_session(member, add)
        return Answer(Error.NONE, "SS-3", releases=releases)

    def final_fetch_with_changes(self, cache: ShareSessionCache, member: str) -> Answer:
        """ShareFetch epoch -1 with topic-partitions to add or forget."""
        # SS-10: a final fetch cannot change the set of topic-partitions (checked before the lookup).
        return Answer(Error.INVALID_REQUEST, "SS-10")


class Kafka42Rules(KipRules):
    """What Apache Kafka 4.2 does differently (the clauses marked `profile: kafka-4.2`), and why."""

    # SS-31: Kafka's cache tells the group when a closed connection that had opened a session leaves it
    # without one, and the group drops its share-partitions (reloaded from the share coordinator when used).
    drops_empty_groups = True
    # SS-32: an acknowledgement straddling SPSO throws inside SharePartition (SP-40); KafkaApis answers the whole
    # request UNKNOWN_SERVER_ERROR after the session's epoch was bumped (a final request's session stays).
    acknowledgements_throw = True

    def reopen(self, cache: ShareSessionCache, member: str, add: frozenset[str], other_sessions: int) -> Answer:
        # SS-4: Kafka removes the old session from the cache without releasing its records: they stay
        # acquired until their locks time out.
        cache.by_member.pop(member, None)
        if len(cache.by_member) + other_sessions >= cache.max_sessions:
            # SS-5: the broker's cache, this group's sessions and other groups', is full (Kafka's
            # group.share.max.share.sessions); the member's old session is already gone.
            return Answer(Error.SHARE_SESSION_LIMIT_REACHED, "SS-5")
        cache._new_session(member, add)
        return Answer(Error.NONE, "SS-4")

    def final_fetch_with_changes(self, cache: ShareSessionCache, member: str) -> Answer:
        # SS-11: Kafka dropped the KIP's check (KAFKA-18932): the lists are accepted and ignored.
        answer = cache._close(member)
        return answer._replace(clause="SS-11") if answer.error == Error.NONE else answer


# Kafka 4.4's ShareSessionCache, ShareSessionContext and their callers in KafkaApis are 4.2's, rule for rule.
RULES = {KIP: KipRules(), KAFKA_42: Kafka42Rules(), KAFKA_44: Kafka42Rules()}
