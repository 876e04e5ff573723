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

from kipcheck.oracle.conformance.probes.probe import Probe

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


def swarm(seed: int) -> Callable[[Probe], str]:
    """A generated run: the batch sizes, members, and each step's kind (fetch, acknowledge with a random or hostile
    choice of records and types, let locks expire, crash, re-open, close) drawn from `seed`."""
    def run(probe: Probe) -> str:
        rng = random.Random(seed)
        tp = _one_partition(probe, [rng.randint(1, 6) for _ in range(rng.randint(1, 6))])
        members = [probe.member(f"m{index}") for index in range(rng.randint(1, 3))]
        held: dict[str, list] = {member.name: [] for member in members}
        weights = {"fetch": 5, "ack": 5, "hostile": rng.choice([0, 1, 3]), "expire": rng.choice([0, 1]),
                   "crash": rng.choice([0, 1]), "reopen": rng.choice([0, 1]), "close": 1}
        kinds = [kind for kind, weight in weights.items() for _ in range(weight)]
        steps = rng.randint(4, 14)
        for _ in range(steps):
            member = rng.choice(members)
            kind = rng.choice(kinds)
            if kind == "fetch":
                held[member.name] += probe.fetch(member, [tp], max_records=rng.randint(1, 8),
                                                 wait_ms=rng.choice([0, WAIT_MS])).get(tp, [])
            elif kind == "ack" and held[member.name]:
                first, last, _ = held[member.name].pop(rng.randrange(len(held[member.name])))
                low = rng.randint(first, last)
                probe.acknowledge(member, {tp: [(low, rng.randint(low, last), rng.choice(["accept", "release", "reject"]))]})
            elif kind == "hostile":
                other = rng.choice(members)
                runs = held[other.name] or [[0, 0, 0]]
                first, last, _ = rng.choice(runs)
                probe.acknowledge(member, {tp: [(first, last + rng.choice([0, 0, 5]), rng.choice(["accept", "reject"]))]})
            elif kind == "expire":
                probe.wait_for_lock_expiry()
            elif kind == "crash":
                probe.disconnect(member)
                held[member.name] = []
            elif kind == "reopen":
                held[member.name] += probe.fetch(member, [tp], max_records=rng.randint(1, 8), epoch=0).get(tp, [])
            else:
                probe.close(member)
                held[member.name] = []
        for member in members:
            probe.close(member)
        return f"seed {seed}: {len(members)} member(s), {steps} steps"

    return run


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
}
