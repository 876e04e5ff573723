"""The probe scenarios: a named catalogue of hostile and crash cases, and seeded swarm runs drawn from the models.

    CATALOGUE["late-ack"](probe) -> str            # what it did, for the report
    swarm(seed)(probe) -> str                       # a generated run: sizes, behaviours and faults drawn per seed

Each scenario drives one Probe (its own group and topics); the probe writes what
the clients saw as traces, which the runner judges. A scenario raises
NotObservable when its target cannot do what it needs (a restart, a known
session limit). The catalogue names the bugs each scenario is there to expose.
"""

from __future__ import annotations

import random
from typing import Callable

from kipcheck.model.profiles import is_kafka
from kipcheck.oracle.conformance.probes.probe import SLACK_MS, Probe

WAIT_MS = 1_500  # a fetch's MaxWaitMs when the probe expects records


class NotObservable(Exception):
    """The scenario needs something this target does not offer (the message says what)."""


def _one_partition(probe: Probe, batches: list[int]) -> str:
    topic = probe.topic(1)
    probe.produce(topic, 0, batches)
    return f"{topic}:0"


def _all_of(runs: list, kind: str = "accept") -> list[tuple[int, int, str]]:
    """One acknowledgement of `kind` for each acquired run [first, last, delivery_count]."""
    return [(first, last, kind) for first, last, _ in runs]


def session_limit(probe: Probe) -> str:
    """Sessions up to the broker's limit, one past it (SHARE_SESSION_LIMIT_REACHED), then room again after a close.

    Kafka 4.2 keeps the session limit at least the largest group (ShareGroupConfig.validate), so the sessions are
    spread over as many groups as it takes: the limit is the broker's, shared by every group (SS-5)."""
    limit = probe.target.settings.max_sessions
    if limit > 64:
        raise NotObservable(f"session limit {limit}: give a small group.share.max.share.sessions with --set")
    per_group = probe.target.settings.max_group_size - 1   # beside the opener that initialized the group's topic
    if per_group < 1:
        raise NotObservable("group.share.max.size 1 leaves no room beside the member that initializes a topic")
    probes = [probe] + [probe.neighbour(f"g{index}") for index in range(1, -(-(limit + 1) // per_group))]
    tps = [_one_partition(each, [1]) for each in probes]
    members = []
    for index in range(limit + 1):
        group = index // per_group
        members.append((probes[group], tps[group], probes[group].member(f"m{index}")))
    for each, tp, member in members:
        each.fetch(member, [tp], max_records=1)
    first_probe, _, first_member = members[0]
    first_probe.close(first_member)
    last_probe, last_tp, last_member = members[-1]
    last_probe.fetch(last_member, [last_tp], max_records=1)
    for each, _, member in members[1:]:
        each.close(member)
    return (f"{limit + 1} sessions asked for in {len(probes)} group(s) with a limit of {limit}, "
            "then one after a close")


def wrong_epochs(probe: Probe) -> str:
    """Wrong, stale and unknown epochs, a ShareAcknowledge at epoch 0, and a session re-opened at epoch 0."""
    tp = _one_partition(probe, [5])
    alice, bob = probe.member("alice"), probe.member("bob")
    held = probe.fetch(alice, [tp], max_records=5).get(tp, [])
    held += probe.fetch(alice, [tp], max_records=5).get(tp, [])   # epoch 1 used: it is stale from now on
    probe.fetch(alice, [tp], epoch=alice.epoch + 5)
    probe.fetch(alice, [tp], epoch=alice.epoch - 1)
    probe.acknowledge(alice, {tp: _all_of(held)}, epoch=0)
    probe.fetch(bob, [tp], epoch=3)
    probe.acknowledge(bob, {tp: [(0, 0, "accept")]}, epoch=7)
    probe.fetch(alice, [tp], max_records=5, epoch=0)           # re-open while holding records
    held = probe.fetch(alice, [tp], max_records=5, wait_ms=WAIT_MS).get(tp, [])
    probe.close(alice, {tp: _all_of(held)})
    return "epochs +5, -1, 0 on ShareAcknowledge, unknown member, re-open at 0"


def hostile_acks(probe: Probe) -> str:
    """Foreign, duplicate, past-the-end and below-SPSO acknowledgements, and one request mixing good and bad."""
    tp = _one_partition(probe, [4, 4])
    alice, bob = probe.member("alice"), probe.member("bob")
    held = probe.fetch(alice, [tp], max_records=4, wait_ms=WAIT_MS).get(tp, [])
    if not held:
        return "nothing acquired"
    first, last = held[0][0], held[-1][1]
    bobs = probe.fetch(bob, [tp], max_records=1).get(tp, [])
    probe.acknowledge(bob, {tp: [(first, last, "accept")]})          # foreign
    probe.acknowledge(alice, {tp: [(first, first, "accept")]})
    probe.acknowledge(alice, {tp: [(first, first, "accept")]})       # duplicate
    probe.acknowledge(alice, {tp: [(last, last + 50, "accept")]})    # past the end
    speo = probe.window_end(tp)
    probe.acknowledge(bob, {tp: [(speo, speo, "accept")]})           # at SPEO
    probe.acknowledge(bob, {tp: [(speo - 1, speo, "accept")]})       # reaching SPEO
    probe.acknowledge(alice, {tp: [(first + 1, first + 1, "accept"), (last + 20, last + 21, "reject")]})  # mixed
    probe.acknowledge(alice, {tp: [(0, 0, "release")]})              # below SPSO once it moved
    rest = probe.fetch(alice, [tp], max_records=8, wait_ms=WAIT_MS).get(tp, [])
    probe.close(alice, {tp: [(first + 1, last, "accept"), *_all_of(rest)]})
    probe.close(bob, {tp: _all_of(bobs)})
    return f"hostile acknowledgements around [{first}, {last}]"


def late_ack(probe: Probe) -> str:
    """A lock expires, then its holder acknowledges (too late); another member gets the records, counted again, and
    lets their lock expire in turn."""
    tp = _one_partition(probe, [3])
    alice, bob = probe.member("alice"), probe.member("bob")
    held = probe.fetch(alice, [tp], max_records=3, wait_ms=WAIT_MS).get(tp, [])
    probe.wait_for_lock_expiry()
    probe.acknowledge(alice, {tp: _all_of(held)})
    again = probe.fetch(bob, [tp], max_records=3, wait_ms=WAIT_MS).get(tp, [])
    probe.wait_for_lock_expiry()  # a re-acquired record's lock expires too
    third = probe.fetch(alice, [tp], max_records=3, wait_ms=WAIT_MS).get(tp, [])
    probe.close(alice, {tp: _all_of(third)})
    probe.close(bob)
    return f"held {held}, acknowledged after expiry, re-acquired {again}, expired again, then {third}"


def partial_ack_then_expiry(probe: Probe) -> str:
    """Part of an acquisition acknowledged (batches split inside it), the rest left to expire, then read again."""
    tp = _one_partition(probe, [10])
    alice, bob = probe.member("alice"), probe.member("bob")
    held = probe.fetch(alice, [tp], max_records=10, wait_ms=WAIT_MS).get(tp, [])
    if held:
        first = held[0][0]
        probe.acknowledge(alice, {tp: [(first + 2, first + 4, "accept"), (first + 6, first + 6, "reject")]})
    probe.wait_for_lock_expiry()
    again = probe.fetch(bob, [tp], max_records=10, wait_ms=WAIT_MS).get(tp, [])
    probe.close(bob, {tp: _all_of(again, "release")})
    last = probe.fetch(alice, [tp], max_records=10, wait_ms=WAIT_MS).get(tp, [])
    probe.close(alice, {tp: _all_of(last)})
    return f"partial acknowledgement of {held}, then {again} after expiry"


def final_fetch_with_acks(probe: Probe) -> str:
    """Acknowledgements in the final (-1) ShareFetch and ShareAcknowledge: applied before the rest is released."""
    tp = _one_partition(probe, [4, 4])
    alice, bob = probe.member("alice"), probe.member("bob")
    held = probe.fetch(alice, [tp], max_records=8, wait_ms=WAIT_MS).get(tp, [])
    offsets = [offset for first, last, _ in held for offset in range(first, last + 1)]
    half = offsets[:len(offsets) // 2]
    probe.close(alice, {tp: [(half[0], half[-1], "accept")]} if half else {})
    again = probe.fetch(bob, [tp], max_records=8, wait_ms=WAIT_MS).get(tp, [])
    probe.close(bob, {tp: _all_of(again)}, with_acknowledge=True)
    return f"final ShareFetch accepting {len(half)} of {len(offsets)}, the rest re-read and accepted by a final ShareAcknowledge"


def poison_message(probe: Probe) -> str:
    """One record released on every delivery: archived at the delivery limit, never delivered again."""
    tp = _one_partition(probe, [1])
    alice = probe.member("alice")
    for _ in range(probe.target.settings.delivery_limit + 1):
        held = probe.fetch(alice, [tp], max_records=1, wait_ms=WAIT_MS).get(tp, [])
        probe.acknowledge(alice, {tp: _all_of(held, "release")})
    probe.close(alice)
    return f"released {probe.target.settings.delivery_limit} times"


def consumer_crash(probe: Probe) -> str:
    """A consumer's connection drops while it holds records: they come back to another with the count + 1."""
    tp = _one_partition(probe, [6])
    alice, bob = probe.member("alice"), probe.member("bob")
    held = probe.fetch(alice, [tp], max_records=6, wait_ms=WAIT_MS).get(tp, [])
    probe.disconnect(alice)
    again = probe.fetch(bob, [tp], max_records=6, wait_ms=WAIT_MS).get(tp, [])
    probe.close(bob, {tp: _all_of(again)})
    return f"held {held}; after the crash another member got {again}"


def interleaved_release(probe: Probe) -> str:
    """A member's records interleaved with another's; its session ends: all of them are released."""
    tp = _one_partition(probe, [3, 3, 3, 3])
    alice, bob, carol = probe.member("alice"), probe.member("bob"), probe.member("carol")
    probe.fetch(alice, [tp], max_records=3, wait_ms=WAIT_MS)
    bobs = probe.fetch(bob, [tp], max_records=3, wait_ms=WAIT_MS).get(tp, [])
    probe.fetch(alice, [tp], max_records=3, wait_ms=WAIT_MS)
    probe.close(alice)
    got = []
    for _ in range(3):
        got += probe.fetch(carol, [tp], max_records=20, wait_ms=WAIT_MS).get(tp, [])
    probe.close(carol, {tp: _all_of(got)} if got else {})
    probe.close(bob, {tp: _all_of(bobs)})
    return f"the released member's records re-read: {got}"


def inflight_limit(probe: Probe) -> str:
    """Members acquire, release and acquire again near the in-flight limit (group.share.partition.max.record.locks)."""
    limit = probe.target.settings.max_record_locks
    if limit > 200:
        raise NotObservable(f"in-flight limit {limit}: give a small group.share.partition.max.record.locks with --set")
    tp = _one_partition(probe, [5] * (limit // 5 + 4))
    members = [probe.member(f"m{index}") for index in range(3)]
    held = {member.name: probe.fetch(member, [tp], max_records=limit // 5, wait_ms=WAIT_MS).get(tp, [])
            for member in members}  # three quarters of the room taken: released records can fill the rest
    for member in members[:2]:
        probe.acknowledge(member, {tp: _all_of(held[member.name], "release")})
    for member in members:
        held[member.name] += probe.fetch(member, [tp], max_records=limit, wait_ms=WAIT_MS).get(tp, [])
    for member in members:
        probe.close(member, {tp: _all_of(held[member.name])})
    return f"three members around an in-flight limit of {limit}"


def broker_restart(probe: Probe) -> str:
    """Accepted, twice-released and held records on three partitions, the broker killed -9 and restarted, then every
    partition read again: each must serve what it persisted (XM-1)."""
    if not probe.target.can_restart:
        raise NotObservable("the runner cannot restart this broker")
    topic = probe.topic(3)
    tps = [f"{topic}:{index}" for index in range(3)]
    for index in range(3):
        probe.produce(topic, index, [3, 3])
    alice = probe.member("alice")
    for tp in tps:
        held = probe.fetch(alice, [tp], max_records=6, wait_ms=WAIT_MS).get(tp, [])
        offsets = [offset for first, last, _ in held for offset in range(first, last + 1)]
        if len(offsets) < 4:
            continue
        probe.acknowledge(alice, {tp: [(offsets[0], offsets[0], "accept"), (offsets[2], offsets[3], "release")]})
        for _ in range(3):  # released again and again: persisted with counts 1, 2, 3 (and a share-state snapshot)
            again = probe.fetch(alice, [tp], max_records=2, wait_ms=WAIT_MS).get(tp, [])
            probe.acknowledge(alice, {tp: _all_of(again, "release")})
    probe.restart()
    readers = [probe.member(f"reader{index}") for index in range(3)]
    read = 0
    for reader, tp in zip(readers, tps):
        for _ in range(3):
            got = probe.fetch(reader, [tp], max_records=6, wait_ms=WAIT_MS).get(tp, [])
            read += sum(last - first + 1 for first, last, _ in got)
            probe.acknowledge(reader, {tp: _all_of(got)})
        probe.close(reader)
    return f"restart with held and released records; {read} records read from 3 partitions after it"


def piggybacked_acks(probe: Probe) -> str:
    """Acknowledgements in a ShareFetch that also acquires, as real clients send them: accept some, release others,
    and take new records in the same request; then another member finds the released ones only."""
    tp = _one_partition(probe, [3, 3, 3])
    alice, bob = probe.member("alice"), probe.member("bob")
    held = probe.fetch(alice, [tp], max_records=3, wait_ms=WAIT_MS).get(tp, [])
    if not held:
        return "nothing acquired"
    first, last, _ = held[0]
    acks = [(first, first, "accept"), (first + 1, last, "release")] if last > first else [(first, last, "release")]
    more = probe.fetch(alice, [tp], max_records=3, wait_ms=WAIT_MS, acks={tp: acks}).get(tp, [])
    rest = probe.fetch(alice, [tp], max_records=6, wait_ms=WAIT_MS, acks={tp: _all_of(more)}).get(tp, [])
    again = probe.fetch(bob, [tp], max_records=9, wait_ms=WAIT_MS).get(tp, [])  # nothing: alice holds the rest
    probe.close(alice, {tp: _all_of(rest)}, with_acknowledge=True)
    probe.close(bob, {tp: _all_of(again)}, with_acknowledge=True)
    return f"acquired {held}, then {more} while acknowledging, then {rest} while accepting; bob got {again}"


def forgotten_partition(probe: Probe) -> str:
    """A member forgets a partition (ForgottenTopicsData) while it holds records there: it acquires there no more,
    though records arrive; under kafka-4.2 its session's end leaves those records held until their locks expire
    (SS-30), and another member finds them then."""
    topic = probe.topic(2)
    kept, forgotten = f"{topic}:0", f"{topic}:1"
    probe.produce(topic, 0, [2, 2])
    probe.produce(topic, 1, [3])
    alice, bob = probe.member("alice"), probe.member("bob")
    held = probe.fetch(alice, [forgotten], max_records=3, wait_ms=WAIT_MS)
    for tp, runs in probe.fetch(alice, [kept], max_records=2, wait_ms=WAIT_MS).items():
        held[tp] = held.get(tp, []) + runs
    probe.produce(topic, 1, [2])   # acquirable, were the partition still fetched
    later = probe.fetch(alice, [], max_records=10, forget=[forgotten])
    probe.close(alice, {kept: _all_of(held.get(kept, []) + later.get(kept, []))}, with_acknowledge=True)
    first_look = probe.fetch(bob, [forgotten], max_records=10, wait_ms=WAIT_MS).get(forgotten, [])
    probe.wait_for_lock_expiry()
    second_look = probe.fetch(bob, [forgotten], max_records=10, wait_ms=WAIT_MS).get(forgotten, [])
    probe.close(bob, {forgotten: _all_of(second_look or first_look)}, with_acknowledge=True)
    return (f"forgot {forgotten} holding {held.get(forgotten, [])}, then acquired {later}; another member got "
            f"{first_look}, and {second_look} after the locks expired")


def _kafka_v2(probe: Probe, what: str) -> None:
    if not is_kafka(probe.target.profile):
        raise NotObservable(f"{what} is Kafka's (ShareFetch v2, from 4.2): judged under the Kafka profiles")
    if not probe.speaks_v2:
        raise NotObservable(f"{what} needs ShareFetch and ShareAcknowledge v2, which the broker does not serve")


def renewed_locks(probe: Probe) -> str:
    """RENEW (KIP-1222) just before a lock's deadline, by ShareAcknowledge and by a renewing ShareFetch; once the
    first deadline has passed, the renewed records are still the member's to accept."""
    _kafka_v2(probe, "RENEW")
    tp = _one_partition(probe, [4])
    alice = probe.member("alice")
    held = probe.fetch(alice, [tp], max_records=4, wait_ms=WAIT_MS).get(tp, [])
    offsets = [offset for first, last, _ in held for offset in range(first, last + 1)]
    if len(offsets) < 2:
        return f"acquired {held}: too few to renew"
    low, high = probe.timers.windows[-1]
    probe.timers.sleep_until(low - SLACK_MS - 100)   # about as late as a request may go before the deadline window
    half = offsets[len(offsets) // 2]
    probe.acknowledge(alice, {tp: [(offsets[0], half - 1, "renew")]}, renew=True)
    probe.fetch(alice, [], acks={tp: [(half, offsets[-1], "renew")]}, renew=True)
    probe.timers.sleep_until(high + 1)   # the first deadline has passed; the renewed ones have not
    errors = probe.acknowledge(alice, {tp: [(offsets[0], offsets[-1], "accept")]})
    probe.close(alice)
    return f"renewed {offsets[0]}-{offsets[-1]} before the deadline, accepted after it: {errors.get(tp)}"


def record_limit(probe: Probe) -> str:
    """The record_limit acquire mode (KIP-1206): each fetch takes exactly MaxRecords records while there are
    that many, whatever the log batches."""
    _kafka_v2(probe, "the record_limit acquire mode")
    tp = _one_partition(probe, [5, 5])
    alice, bob = probe.member("alice"), probe.member("bob")
    got = []
    for member in (alice, bob, alice, bob):
        got.append(probe.fetch(member, [tp], max_records=3, wait_ms=WAIT_MS, record_limit=True).get(tp, []))
    probe.close(alice, {tp: _all_of(got[0] + got[2])})
    probe.close(bob, {tp: _all_of(got[1] + got[3])})
    return f"record_limit fetches of 3: {got}"


def lock_kept(probe: Probe) -> str:
    """A lock lasts as long as the broker says (the AcquisitionLockTimeoutMs of its answer, or its setting): just
    before the deadline another member finds nothing, and the holder's acceptance is still good."""
    tp = _one_partition(probe, [3])
    alice, bob = probe.member("alice"), probe.member("bob")
    held = probe.fetch(alice, [tp], max_records=3, wait_ms=WAIT_MS).get(tp, [])
    if not held:
        return "nothing acquired"
    low, _ = probe.timers.windows[-1]
    probe.timers.sleep_until(low - 3 * SLACK_MS - WAIT_MS // 3)
    other = probe.fetch(bob, [tp], max_records=3, wait_ms=WAIT_MS // 3).get(tp, [])
    errors = probe.acknowledge(alice, {tp: _all_of(held)})
    probe.close(alice)
    probe.close(bob, {tp: _all_of(other)})
    return f"held {held} to just before the deadline: another member got {other}, the holder's accept {errors.get(tp)}"


def swarm(seed: int) -> Callable[[Probe], str]:
    """A generated run: the partitions, batch sizes, members, and each step's kind (fetch, acknowledge with a random
    or hostile choice of records and types, acknowledge inside the next fetch, forget a partition, renew a lock, let
    locks expire, crash, re-open, close) drawn from `seed`; on a broker serving version 2 under a Kafka profile, fetches
    may use the record_limit acquire mode."""
    def run(probe: Probe) -> str:
        rng = random.Random(seed)
        topic = probe.topic(rng.choice([1, 1, 2]))
        tps = sorted(book for book in probe.partitions if book.startswith(f"{topic}:"))
        for tp in tps:
            probe.produce(topic, int(tp.rpartition(":")[2]), [rng.randint(1, 6) for _ in range(rng.randint(1, 6))])
        members = [probe.member(f"m{index}") for index in range(rng.randint(1, 3))]
        swarm_run = SwarmRun(probe, rng, tps, {member.name: {tp: [] for tp in tps} for member in members})
        v2 = probe.speaks_v2 and is_kafka(probe.target.profile)
        weights = {"fetch": 5, "ack": 4, "piggyback": 3, "hostile": rng.choice([0, 1, 3]), "expire": rng.choice([0, 1]),
                   "crash": rng.choice([0, 1]), "reopen": rng.choice([0, 1]), "close": 1,
                   "forget": rng.choice([0, 2]) if len(tps) > 1 else 0, "renew": rng.choice([0, 2]) if v2 else 0}
        swarm_run.record_limit = v2 and rng.random() < 0.5
        kinds = [kind for kind, weight in weights.items() for _ in range(weight)]
        steps = rng.randint(4, 14)
        for _ in range(steps):
            swarm_run.step(rng.choice(members), rng.choice(kinds), members)
        for member in members:
            probe.close(member)
        return f"seed {seed}: {len(tps)} partition(s), {len(members)} member(s), {steps} steps"

    return run


class SwarmRun:
    """The state of one swarm run: what each member holds, per partition, as the answers said."""

    def __init__(self, probe: Probe, rng: random.Random, tps: list[str], held: dict[str, dict[str, list]]):
        self.probe, self.rng, self.tps, self.held = probe, rng, tps, held
        self.record_limit = False

    def step(self, member, kind: str, members: list) -> None:
        probe, rng, held = self.probe, self.rng, self.held[member.name]
        tp = rng.choice(self.tps)
        if kind == "fetch":
            self._fetch(member, [tp], {}, rng.choice([0, WAIT_MS]))
        elif kind in ("ack", "piggyback", "renew") and held[tp]:
            first, last, _ = held[tp][rng.randrange(len(held[tp]))]
            low = rng.randint(first, last)
            high = rng.randint(low, last)
            ack_type = "renew" if kind == "renew" else rng.choice(["accept", "release", "reject"])
            if ack_type != "renew":
                held[tp] = _without(held[tp], low, high)
            acks = {tp: [(low, high, ack_type)]}
            if kind == "piggyback" and member.epoch != 0:
                self._fetch(member, [tp], acks, rng.choice([0, WAIT_MS]))
            elif kind == "renew" and rng.random() < 0.5 and member.epoch != 0:
                probe.fetch(member, [], acks=acks, renew=True)
            else:
                probe.acknowledge(member, acks, renew=kind == "renew")
        elif kind == "hostile":
            other = rng.choice(members)
            first, last, _ = rng.choice(self.held[other.name][tp] or [[0, 0, 0]])
            probe.acknowledge(member, {tp: [(first, last + rng.choice([0, 0, 5]), rng.choice(["accept", "reject"]))]})
        elif kind == "forget" and member.epoch != 0 and member.session:
            gone = rng.choice(sorted(member.session))
            held[gone] = []   # left to their locks: not acknowledged in a partition the session forgot
            self._fetch(member, [], {}, 0, forget=[gone])
        elif kind == "expire":
            probe.wait_for_lock_expiry()
        elif kind == "crash":
            probe.disconnect(member)
            self.held[member.name] = {tp: [] for tp in self.tps}
        elif kind == "reopen":
            self._fetch(member, [tp], {}, 0, epoch=0)
        elif kind == "close":
            probe.close(member)
            self.held[member.name] = {tp: [] for tp in self.tps}

    def _fetch(self, member, tps: list[str], acks: dict, wait_ms: int, epoch: int | None = None,
               forget: list[str] = ()) -> None:
        """A fetch of `tps` (record_limit when the run uses it and the session holds one partition)."""
        session = set(tps) | set(acks) if (member.epoch if epoch is None else epoch) == 0 else \
            (member.session | set(tps) | set(acks)) - set(forget)
        record_limit = self.record_limit and len(session) == 1 and self.rng.random() < 0.6
        got = self.probe.fetch(member, tps, max_records=self.rng.randint(1, 8), wait_ms=wait_ms, acks=acks,
                               epoch=epoch, forget=forget, record_limit=record_limit)
        for tp, runs in got.items():
            self.held[member.name][tp] += runs


def _without(runs: list, low: int, high: int) -> list:
    """The runs [first, last, count] less the offsets low..high."""
    kept = []
    for first, last, count in runs:
        if first < low:
            kept.append([first, min(last, low - 1), count])
        if last > high:
            kept.append([max(first, high + 1), last, count])
    return kept


CATALOGUE: dict[str, Callable[[Probe], str]] = {
    "session-limit": session_limit,
    "wrong-epochs": wrong_epochs,
    "hostile-acks": hostile_acks,
    "late-ack": late_ack,
    "partial-ack-then-expiry": partial_ack_then_expiry,
    "final-fetch-with-acks": final_fetch_with_acks,
    "poison-message": poison_message,
    "consumer-crash": consumer_crash,
    "interleaved-release": interleaved_release,
    "inflight-limit": inflight_limit,
    "broker-restart": broker_restart,
    "piggybacked-acks": piggybacked_acks,
    "forgotten-partition": forgotten_partition,
    "renewed-locks": renewed_locks,
    "record-limit": record_limit,
    "lock-kept": lock_kept,
}
