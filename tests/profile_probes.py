"""Probes of the kafka-4.2 profile's corrections over the wire, against any broker: Apache Kafka 4.2.2 and 4.4.0
(tests/test_kafka42_profile_live.py) or the reference broker (`reference_broker`: tests/test_log_start_embedded.py).

Each probe drives a broker through the conformance probe (kio) into a situation, asserts what it answered
(AcquiredRecords, error codes, the start offset the share coordinator stored, read with DescribeShareGroupOffsets),
and has its traces judged under the profile; `rejected` shows the judge refuses the same trace changed to what a
rule before its correction expected. The log start offset moves by DeleteRecords; the probe writes the `log_start`
step the share-partition leader learns of at its next fetch (SP-64).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from kipcheck.oracle.check import Verdict, check_file, check_lines
from kipcheck.oracle.conformance.probes.probe import DESCRIBE_OFFSETS, Probe
from kipcheck.oracle.conformance.probes.tolerance import Timers
from kipcheck.oracle.conformance.targets import TargetOptions, resolve
from kipcheck.oracle.conformance.targets.embedded import EmbeddedBroker

WAIT_MS = 1000
# No answer waits for the write of a lock's expiry (SP-47), and on a loaded machine the broker's timer and that
# write may come later than the probe's tolerance: a second for them before a write that should see SPSO moved.
EXPIRY_WRITTEN_S = 1.0


@dataclass(frozen=True)
class Broker:
    """A broker reached over the wire, the profile it is judged by, its share settings, and an admin client
    connected to it already."""

    bootstrap: str
    profile: str
    settings: dict[str, str]
    admin: AdminClient = field(compare=False)


# The reference broker's settings for these probes: Kafka's lock in tests/test_kafka42_profile_live.py, one a test
# can outwait.
REFERENCE_SETTINGS = {"group.share.record.lock.duration.ms": "2000", "group.share.min.record.lock.duration.ms": "1000"}


def reference_broker(work_dir: Path, launcher: tuple[str, ...] | None = None) -> EmbeddedBroker:
    """The reference broker under kafka-4.2 with REFERENCE_SETTINGS (or `launcher`'s, a broker with a seeded bug)."""
    options = {} if launcher is None else {"launcher": launcher}
    return EmbeddedBroker(work_dir, REFERENCE_SETTINGS, profile="kafka-4.2", **options)


def over_the_wire(broker: EmbeddedBroker) -> Broker:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 0})
    admin.list_topics(timeout=30)   # connected before a scenario times a lock
    return Broker(broker.bootstrap, "kafka-4.2", REFERENCE_SETTINGS, admin)


def probe_of(broker: Broker, name: str) -> Probe:
    return Probe(resolve(f"wire://{broker.bootstrap}", TargetOptions(broker.profile, broker.settings)), name, Timers())


def one_partition(broker: Broker, name: str, batch_sizes: list[int], *members: str) -> tuple[Probe, str, list]:
    """A probe of a topic of one partition holding log batches of these sizes, and its members, joined."""
    probe = probe_of(broker, name)
    topic = probe.topic(1)
    probe.produce(topic, 0, batch_sizes)
    return probe, f"{topic}:0", [probe.member(member) for member in members]


def judged(probe: Probe, directory: Path) -> list[Path]:
    """The probe's traces, each judged ok under its profile (with the fast acceptor and with the plain model)."""
    paths = probe.finish(directory)
    for path in paths:
        for reference in (False, True):
            verdict = check_file(path, reference=reference)
            assert verdict.status == "ok", verdict.summary()
    return [path for path in paths if "share-partition" in path.name]


def changed(path: Path, pick, change) -> tuple[int, list[Verdict]]:
    """The trace with its one step `pick` chooses changed in place by `change`: (that step, the verdicts of the
    fast acceptor and of the plain model)."""
    header, *lines = path.read_text().splitlines()
    steps = [json.loads(line) for line in lines]
    (chosen,) = [step for step in steps if pick(step)]
    change(chosen)
    text = [header, *map(json.dumps, steps)]
    return chosen["step"], [check_lines(text, reference=reference) for reference in (False, True)]


def rejected(path: Path, pick, change, clause: str) -> None:
    """The judge rejects the trace changed so, at the changed step, naming `clause`."""
    step, verdicts = changed(path, pick, change)
    for verdict in verdicts:
        assert (verdict.status, verdict.step, verdict.clause) == ("violation", step, clause), verdict.summary()


def acknowledged(batches: list[tuple[int, int, str]]):
    wanted = [{"first": first, "last": last, "type": kind} for first, last, kind in batches]
    return lambda step: step["op"] == "acknowledge" and step["args"]["batches"] == wanted


def stored(probe: Probe, tp: str) -> int:
    """The start offset the share coordinator stored, as the probe's last `check` read it."""
    return probe.partitions[tp].steps[-1]["observed"]["stored_spso"]

def delete_records(broker: Broker, topic: str, offset: int, partition: int = 0) -> None:
    """DeleteRecords: the partition of `topic` starts at `offset` (through the module's admin client, connected
    already: a fresh one spends a lock's worth of time finding the broker on a loaded machine)."""
    for future in broker.admin.delete_records([TopicPartition(topic, partition, offset)], request_timeout=30).values():
        future.result(30)


class LockRanOut(Exception):
    """The machine was too slow for a scenario: a lock it needs held had expired before the step that needs it."""


def still_held(probe: Probe, earliest_expiry_ms: int) -> None:
    """Raise LockRanOut unless the probe's last answer came before `earliest_expiry_ms`, the low end of the
    lock's deadline window: the lock surely still held then."""
    if probe.timers.now_ms() >= earliest_expiry_ms:
        raise LockRanOut


ATTEMPTS = 3


def while_a_lock_holds(scenario, name: str):
    """The scenario run on a fresh topic and group until a run is not too slow for its lock (at most ATTEMPTS):
    what a run that outlived the lock saw says nothing of the rule under test."""
    for attempt in range(ATTEMPTS):
        try:
            return scenario(f"{name}-{attempt}")
        except LockRanOut:
            continue
    pytest.fail(f"every one of {ATTEMPTS} runs of {name} outlived the lock it needs held: the machine is too slow")


def log_start(probe: Probe, tp: str, offset: int) -> None:
    """The trace's `log_start` step (SP-64), written before the fetch at which the leader learns of it."""
    probe.partitions[tp].add(probe.timers.now_ms(), "delete-records", "log_start", {"offset": offset})


FETCHES_TO_FIRST_RECORDS = 5


def first_acquired(probe: Probe, member, tp: str) -> list:
    """What the first of `member`'s fetches (each waiting up to WAIT_MS) that acquires anything acquires: besides
    the read that meets the moved log start, a leader loading a share-partition the group coordinator initialized
    a moment ago answers nothing (Kafka 4.4 on a loaded machine)."""
    for _ in range(FETCHES_TO_FIRST_RECORDS):
        if runs := probe.fetch(member, [tp], max_records=20, wait_ms=WAIT_MS).get(tp):
            return runs
    return []


def acquired_past_log_start(probe: Probe, member, tps: list[str]) -> dict[str, list]:
    """What two fetches of `member` acquire once the log start moved: the leader learns of it from a read answered
    OFFSET_OUT_OF_RANGE, and then answers that partition nothing, or reads again at once."""
    held: dict[str, list] = {tp: [] for tp in tps}
    for _ in range(2):
        for tp, runs in probe.fetch(member, tps, max_records=20).items():
            held[tp] += runs
    return held

def stranded_by_the_log_start(broker: Broker, name: str) -> Probe:
    probe, tp, (alice, bob, carol) = one_partition(broker, name, [5, 5, 5, 5], "alice", "bob", "carol")
    topic = tp.rpartition(":")[0]
    assert probe.fetch(alice, [tp], max_records=5, wait_ms=WAIT_MS) == {tp: [[0, 4, 1]]}
    alice_expires_from, _ = probe.timers.windows[-1]
    assert probe.fetch(bob, [tp], max_records=5) == {tp: [[5, 9, 1]]}
    assert probe.acknowledge(bob, {tp: [(5, 9, "release")]}) == {tp: "NONE"}
    delete_records(broker, topic, 7)
    log_start(probe, tp, 7)
    assert acquired_past_log_start(probe, carol, [tp]) == {tp: [[7, 9, 2], [10, 19, 1]]}
    written = []
    for batch in ((7, 14, "accept"), (15, 19, "accept"), (0, 4, "accept")):
        who = alice if batch[0] == 0 else carol
        assert probe.acknowledge(who, {tp: [batch]}) == {tp: "NONE"}
        written.append(stored(probe, tp))
    still_held(probe, alice_expires_from)
    probe.wait_for_lock_expiry()
    time.sleep(EXPIRY_WRITTEN_S)
    probe.produce(topic, 0, [5])
    assert probe.fetch(carol, [tp], max_records=20) == {tp: [[20, 24, 1]]}
    assert probe.acknowledge(carol, {tp: [(20, 24, "accept")]}) == {tp: "NONE"}
    written.append(stored(probe, tp))
    assert written == [7, 7, 7, 20], "\n".join(probe.partitions[tp].lines())
    for member in (alice, bob, carol):
        probe.close(member)
    return probe

def below_the_log_start(broker: Broker, name: str) -> Probe:
    probe = probe_of(broker, name)
    topic = probe.topic(2)
    tp0, tp1 = f"{topic}:0", f"{topic}:1"
    for partition in (0, 1):
        probe.produce(topic, partition, [5, 5, 5])
    alice, bob = probe.member("alice"), probe.member("bob")
    assert probe.fetch(alice, [tp0], max_records=5, wait_ms=WAIT_MS) == {tp0: [[0, 4, 1]]}
    alice_expires_from, _ = probe.timers.windows[-1]
    for partition, tp in enumerate((tp0, tp1)):
        delete_records(broker, topic, 12, partition)
        log_start(probe, tp, 12)
    acquired = acquired_past_log_start(probe, bob, [tp0, tp1])
    still_held(probe, alice_expires_from)
    assert acquired == {tp0: [[10, 14, 1]], tp1: [[12, 14, 1]]}
    assert probe.acknowledge(bob, {tp0: [(10, 14, "accept")], tp1: [(12, 14, "accept")]}) == {tp0: "NONE",
                                                                                            tp1: "NONE"}
    written = [stored(probe, tp0)]
    probe.wait_for_lock_expiry()
    time.sleep(EXPIRY_WRITTEN_S)
    probe.produce(topic, 0, [5])
    assert probe.fetch(bob, [tp0], max_records=20) == {tp0: [[15, 19, 1]], tp1: []}
    assert probe.acknowledge(bob, {tp0: [(15, 19, "accept")]}) == {tp0: "NONE"}
    written.append(stored(probe, tp0))
    assert written == [12, 15]
    for member in (alice, bob):
        probe.close(member)
    return probe

def stored_from_subscription(broker: Broker, name: str) -> Probe:
    """ST-2: a share-partition's state is initialized when a member subscribes, with no start offset (-1), and the
    reset is the leader's, in memory: the share coordinator answers -1 until the first write, though the log start
    moved to 12 before the first fetch (which acquires from 12), and a describe of all the group's offsets lists
    the partition from the subscription on."""
    probe = probe_of(broker, name)
    topic = probe.topic(1)   # a member subscribes and is assigned the partition, initialized
    tp = f"{topic}:0"
    probe.produce(topic, 0, [5, 5, 5])
    assert stored_once_initialized(probe) == {tp: -1}
    probe.check(tp)
    delete_records(broker, topic, 12)
    log_start(probe, tp, 12)
    bob = probe.member("bob")
    assert first_acquired(probe, bob, tp) == [[12, 14, 1]]   # each fetch followed by a check
    assert probe.acknowledge(bob, {tp: [(12, 14, "accept")]}) == {tp: "NONE"}
    checks = [step["observed"]["stored_spso"] for step in probe.partitions[tp].steps if step["op"] == "check"]
    assert len(checks) >= 2 and checks == [-1] * (len(checks) - 1) + [12], "\n".join(probe.partitions[tp].lines())
    probe.close(bob)
    return probe


INITIALIZED_WITHIN_S = 30.0


def stored_once_initialized(probe: Probe) -> dict[str, int]:
    """all_stored_offsets once the group lists a share-partition: Kafka's group coordinator initializes the
    subscribed partitions after the heartbeat that assigned them, asynchronously (seconds on a loaded machine)."""
    deadline = time.monotonic() + INITIALIZED_WITHIN_S
    while not (stored := all_stored_offsets(probe)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return stored


def all_stored_offsets(probe: Probe) -> dict[str, int]:
    """DescribeShareGroupOffsets naming no topics: every share-partition the group has a state for, and its start
    offset."""
    answer = probe.coordinator.request(DESCRIBE_OFFSETS, 0, groups=[{"group_id": probe.group, "topics": None}])
    (group,) = answer.groups
    assert group.error_code.name == "none", group.error_code
    return {f"{topic.topic_name}:{part.partition_index}": part.start_offset
            for topic in group.topics for part in topic.partitions}


def step_after(trace: Path, pick) -> int:
    steps = [json.loads(line) for line in trace.read_text().splitlines()[1:]]
    (index,) = [index for index, step in enumerate(steps) if pick(step)]
    return steps[index + 1]["step"]
