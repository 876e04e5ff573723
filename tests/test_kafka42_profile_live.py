"""The kafka-4.2 profile's corrections read from Kafka 4.2's code (SP-66, SP-65, SP-41, SP-43), reproduced on a
live Apache Kafka 4.2.2, and on Kafka 4.4.0 under kafka-4.4, which keeps them: each probe drives Kafka over the
wire (the conformance probe, kio) into the situation, asserts what Kafka answered (AcquiredRecords, error codes,
the start offset the share coordinator stored, read with DescribeShareGroupOffsets), has its traces judged under
the profile, and shows the judge rejects the same trace changed to what the rule before its correction expected.
And a finding (SP-64): Kafka acquires records below the log start offset while it caches records below them.

The log start offset moves by DeleteRecords and batches go by compaction (a compacted topic whose segments roll
after a second, the cleaner every 200 ms); the probe writes the `log_start` and `compact` steps the
share-partition leader learns of at its next fetch (SP-64, SP-65). One Kafka of each line serves the module.

Skipped, with the reason in pytest's summary, where Java 17 or Maven is missing; `make test` installs both.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from kipcheck.oracle.check import Verdict, check_file, check_lines
from kipcheck.oracle.conformance.probes.probe import Probe
from kipcheck.oracle.conformance.probes.tolerance import Timers
from kipcheck.oracle.conformance.scenarios.clients import produce
from kipcheck.oracle.conformance.targets import TargetOptions, resolve

pytestmark = pytest.mark.slow

QUIET = {"log_level": 0}
# A lock Kafka accepts and a test can outwait; the broker's default delivery limit (5: redelivery throttled from
# the third delivery on, SP-43); the log cleaner looking for work every 200 ms (SP-65).
SETTINGS = {"group.share.record.lock.duration.ms": "2000", "group.share.min.record.lock.duration.ms": "1000",
            "group.share.heartbeat.interval.ms": "1000", "group.share.min.heartbeat.interval.ms": "1000",
            "log.cleaner.backoff.ms": "200"}
WAIT_MS = 1000
COMPACTION_WAIT_S = 30.0
# No answer waits for the write of a lock's expiry (SP-47), and on a loaded machine Kafka's timer and that write
# may come later than the probe's tolerance: a second for them before a write that should see SPSO moved.
EXPIRY_WRITTEN_S = 1.0


# Kafka 4.4 computes a share group's assignment at most once a second by default: a new member would be assigned
# its partitions, and they initialized, only after the probe's first fetch.
LINES = {"4.2": {}, "4.4": {"group.share.assignment.interval.ms": "0"}}


@dataclass(frozen=True)
class Kafka:
    bootstrap: str
    profile: str
    settings: dict[str, str]
    admin: AdminClient = field(compare=False)


@pytest.fixture(scope="module", params=sorted(LINES))
def kafka(request, start_kafka_once, tmp_path_factory) -> Kafka:
    """Kafka 4.2.2, judged under kafka-4.2, then Kafka 4.4.0 under kafka-4.4 (which keeps these corrections)."""
    settings = {**SETTINGS, **LINES[request.param]}
    cluster = start_kafka_once(request.param, name=f"kafka-{request.param}",
                               **{name.replace(".", "_"): value for name, value in settings.items()})
    bootstrap = f"127.0.0.1:{cluster.ports[0]}"
    kafka = Kafka(bootstrap, f"kafka-{request.param}", settings, AdminClient({"bootstrap.servers": bootstrap, **QUIET}))
    _warm_up(kafka, tmp_path_factory.mktemp("warm-up"))
    return kafka


def _warm_up(kafka: Kafka, directory: Path) -> None:
    """One share group's first requests, which a fresh Kafka answers slowly (over a second for the first
    DescribeShareGroupOffsets): a probe that met that while a lock ran would record no `check` there."""
    probe = probe_of(kafka, "warm-up")
    topic = probe.topic(1)
    probe.produce(topic, 0, [1])
    member = probe.member("member")
    probe.fetch(member, [f"{topic}:0"], max_records=1, wait_ms=WAIT_MS)
    probe.close(member, {f"{topic}:0": [(0, 0, "accept")]})
    probe.finish(directory)
    kafka.admin.list_topics(timeout=30)   # the admin client connected before any test times a lock


def probe_of(kafka: Kafka, name: str) -> Probe:
    return Probe(resolve(f"wire://{kafka.bootstrap}", TargetOptions(kafka.profile, kafka.settings)), name, Timers())


def one_partition(kafka: Kafka, name: str, batch_sizes: list[int], *members: str) -> tuple[Probe, str, list]:
    """A probe of a topic of one partition holding log batches of these sizes, and its members, joined."""
    probe = probe_of(kafka, name)
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


def test_sp41_a_renewal_failing_part_way_keeps_the_records_before_it_renewed(kafka, tmp_path):
    """SP-41: alice holds 0-4 of a cached batch 0-9, bob 5-9; alice's RENEW of 0-9 fails at 5
    (INVALID_RECORD_STATE), yet 0-4 stay renewed: accepted after their first lock ran out, the answer is NONE.
    Before the correction the model renewed none of a failing batch: the accept would have been refused."""
    probe, tp, (alice, bob) = one_partition(kafka, "renew", [10], "alice", "bob")
    assert probe.fetch(alice, [tp], max_records=10, wait_ms=WAIT_MS) == {tp: [[0, 9, 1]]}
    _, first_lock_ends = probe.timers.windows[-1]
    assert probe.acknowledge(alice, {tp: [(5, 9, "release")]}) == {tp: "NONE"}
    assert probe.fetch(bob, [tp], max_records=10) == {tp: [[5, 9, 2]]}
    # Late enough that the renewed deadline falls clear after the first one (Timers keeps requests out of both).
    probe.timers.sleep_until(first_lock_ends - 1100)
    assert probe.acknowledge(alice, {tp: [(0, 9, "renew")]}, renew=True) == {tp: "INVALID_RECORD_STATE"}
    probe.timers.sleep_until(first_lock_ends + 1)
    assert probe.acknowledge(alice, {tp: [(0, 4, "accept")]}) == {tp: "NONE"}
    probe.close(alice)
    probe.close(bob)
    (trace,) = judged(probe, tmp_path)
    rejected(trace, acknowledged([(0, 4, "accept")]),
             lambda step: step["observed"].update(error="INVALID_RECORD_STATE"), "SP-9")


def test_sp43_a_throttled_batch_met_after_others_ends_the_acquisition(kafka, tmp_path):
    """SP-43 (limit 5, throttled from 3 deliveries): cached batches 0-2 and 3-5 (two acquisitions), 3-5 delivered
    three times; with both released, an acquisition of 20 takes 0-2 and ends at 3-5: not 3-5, not 6-8 past
    it. Then 3-5 come one at a time. Before the correction nothing forbade records past the throttled ones."""
    probe, tp, (alice, bob) = one_partition(kafka, "throttle", [3, 3, 3], "alice", "bob")
    assert probe.fetch(alice, [tp], max_records=3, wait_ms=WAIT_MS) == {tp: [[0, 2, 1]]}
    counts = []
    for _ in range(3):
        (held,) = probe.fetch(alice, [tp], max_records=3)[tp]
        counts.append(held)
        last = [(0, 2, "release")] if len(counts) == 3 else []
        assert probe.acknowledge(alice, {tp: [*last, (3, 5, "release")]}) == {tp: "NONE"}
    assert counts == [[3, 5, 1], [3, 5, 2], [3, 5, 3]]
    assert probe.fetch(bob, [tp], max_records=20) == {tp: [[0, 2, 2]]}
    assert probe.fetch(bob, [tp], max_records=20) == {tp: [[3, 3, 4]]}
    assert probe.fetch(alice, [tp], max_records=20) == {tp: [[4, 4, 4]]}
    probe.close(alice)
    probe.close(bob)
    (trace,) = judged(probe, tmp_path)
    rejected(trace, lambda step: step["op"] == "acquire" and step["observed"].get("records") == [[0, 2, 2]],
             lambda step: step["observed"].update(records=[[0, 2, 2], [6, 8, 1]], delivered=[[0, 8]]), "SP-43")


def test_sp43_a_throttled_record_in_the_same_cached_batch_is_acquired_after_others(kafka, tmp_path):
    """SP-43: when the throttled records share a cached batch with the ones acquired before them (one acquisition
    of 0-5, 3-5 released three times), Kafka takes them too, alone past SPEO: 0-2 and 3-5, not 6-8. The trace
    cannot tell the two cases apart, so the clause forbids only records above a throttled one left available."""
    probe, tp, (alice, bob) = one_partition(kafka, "throttle-shared", [3, 3, 3], "alice", "bob")
    assert probe.fetch(alice, [tp], max_records=6, wait_ms=WAIT_MS) == {tp: [[0, 5, 1]]}
    for count in (2, 3):
        assert probe.acknowledge(alice, {tp: [(3, 5, "release")]}) == {tp: "NONE"}
        assert probe.fetch(alice, [tp], max_records=3) == {tp: [[3, 5, count]]}
    assert probe.acknowledge(alice, {tp: [(0, 2, "release"), (3, 5, "release")]}) == {tp: "NONE"}
    assert probe.fetch(bob, [tp], max_records=20) == {tp: [[0, 2, 2], [3, 5, 4]]}
    probe.close(alice)
    probe.close(bob)
    (trace,) = judged(probe, tmp_path)
    rejected(trace, lambda step: step["op"] == "acquire" and step["observed"].get("records") == [[0, 2, 2], [3, 5, 4]],
             lambda step: step["observed"].update(records=[[0, 2, 2], [3, 5, 4], [6, 8, 1]], delivered=[[0, 8]]),
             "SP-43")


def delete_records(kafka: Kafka, topic: str, offset: int, partition: int = 0) -> None:
    """DeleteRecords: the partition of `topic` starts at `offset` (through the module's admin client, connected
    already: a fresh one spends a lock's worth of time finding the broker on a loaded machine)."""
    for future in kafka.admin.delete_records([TopicPartition(topic, partition, offset)], request_timeout=30).values():
        future.result(30)


class LockRanOut(Exception):
    """The machine was too slow for a scenario: a lock it needs held had expired before the step that needs it."""


def still_held(probe: Probe, lock_ends_ms: int) -> None:
    """Raise LockRanOut unless the lock whose deadline window ends at `lock_ends_ms` surely still held when the
    probe's last answer came (the window's low end: the deadline less the probe's tolerance)."""
    if probe.timers.now_ms() >= lock_ends_ms - 2 * probe.timers.tolerance_ms:
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


def acquired_past_log_start(probe: Probe, member, tps: list[str]) -> dict[str, list]:
    """What two fetches of `member` acquire once the log start moved: the leader learns of it from a read answered
    OFFSET_OUT_OF_RANGE, and then answers that partition nothing, or reads again at once."""
    held: dict[str, list] = {tp: [] for tp in tps}
    for _ in range(2):
        for tp, runs in probe.fetch(member, tps, max_records=20).items():
            held[tp] += runs
    return held


def test_sp66_a_record_the_log_start_stranded_holds_spso_until_its_lock_expires(kafka, tmp_path):
    """SP-66, SP-64: alice holds 0-4; the log start moves to 7 (DeleteRecords) while 5-9 are available. Carol
    accepts 7-19, in two requests: the second write still carries SPSO 7, since alice's 0-4, acquired below SPSO,
    hold it. Once their lock expired, the next write carries 20. Alice's accept of 0-4 is skipped (below SPSO).
    Before the correction SPSO moved after every step, and the second write would carry 15."""
    probe = while_a_lock_holds(lambda name: _stranded_by_the_log_start(kafka, name), "log-start")
    (trace,) = judged(probe, tmp_path)
    second_write = acknowledged([(15, 19, "accept")])
    check_after = _step_after(trace, second_write)
    rejected(trace, lambda step: step["step"] == check_after,
             lambda step: step["observed"].update(stored_spso=15), "SP-47")


def _stranded_by_the_log_start(kafka: Kafka, name: str) -> Probe:
    probe, tp, (alice, bob, carol) = one_partition(kafka, name, [5, 5, 5, 5], "alice", "bob", "carol")
    topic = tp.rpartition(":")[0]
    assert probe.fetch(alice, [tp], max_records=5, wait_ms=WAIT_MS) == {tp: [[0, 4, 1]]}
    _, alice_lock_ends = probe.timers.windows[-1]
    assert probe.fetch(bob, [tp], max_records=5) == {tp: [[5, 9, 1]]}
    assert probe.acknowledge(bob, {tp: [(5, 9, "release")]}) == {tp: "NONE"}
    delete_records(kafka, topic, 7)
    log_start(probe, tp, 7)
    assert acquired_past_log_start(probe, carol, [tp]) == {tp: [[7, 9, 2], [10, 19, 1]]}
    written = []
    for batch in ((7, 14, "accept"), (15, 19, "accept"), (0, 4, "accept")):
        who = alice if batch[0] == 0 else carol
        assert probe.acknowledge(who, {tp: [batch]}) == {tp: "NONE"}
        written.append(stored(probe, tp))
    still_held(probe, alice_lock_ends)
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


def test_sp64_records_below_the_log_start_are_acquired_while_records_below_it_are_cached(kafka, tmp_path):
    """SP-64, a finding: batches 0-4, 5-9, 10-14 in two partitions; the log start moves to 12, inside 10-14 and past
    SPEO. Where nothing is cached (partition 1) the fetch from SPEO acquires 12-14; where alice still holds 0-4
    (partition 0), stranded below SPSO, Kafka acquires 10-14: records below the log start offset. Accepted, their
    write carries SPSO 12; once every lock expired, the next write carries 15."""
    probe = while_a_lock_holds(lambda name: _below_the_log_start(kafka, name), "below-log-start")
    stranded, plain = judged(probe, tmp_path)
    # Kafka starts at 12 where it caches nothing below: 10-14 there is rejected.
    rejected(plain, lambda step: step["op"] == "acquire" and step["observed"].get("records") == [[12, 14, 1]],
             lambda step: step["observed"].update(records=[[10, 14, 1]]), "SP-64")
    rejected(stranded, lambda step: step["op"] == "acquire" and step["observed"].get("records") == [[10, 14, 1]],
             lambda step: step["observed"].update(records=[[11, 14, 1]]), "SP-64")


def _below_the_log_start(kafka: Kafka, name: str) -> Probe:
    probe = probe_of(kafka, name)
    topic = probe.topic(2)
    tp0, tp1 = f"{topic}:0", f"{topic}:1"
    for partition in (0, 1):
        probe.produce(topic, partition, [5, 5, 5])
    alice, bob = probe.member("alice"), probe.member("bob")
    assert probe.fetch(alice, [tp0], max_records=5, wait_ms=WAIT_MS) == {tp0: [[0, 4, 1]]}
    _, alice_lock_ends = probe.timers.windows[-1]
    for partition, tp in enumerate((tp0, tp1)):
        delete_records(kafka, topic, 12, partition)
        log_start(probe, tp, 12)
    acquired = acquired_past_log_start(probe, bob, [tp0, tp1])
    still_held(probe, alice_lock_ends)
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


def _step_after(trace: Path, pick) -> int:
    steps = [json.loads(line) for line in trace.read_text().splitlines()[1:]]
    (index,) = [index for index, step in enumerate(steps) if pick(step)]
    return steps[index + 1]["step"]


def compacted_topic(probe: Probe, bootstrap: str, partitions: int) -> str:
    """A topic of the probe made compacted, its segments rolled a second after their first record."""
    topic = probe.topic(partitions)
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    resource = ConfigResource("TOPIC", topic, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        for name, value in (("cleanup.policy", "compact"), ("segment.ms", "1000"),
                            ("min.cleanable.dirty.ratio", "0.01"))])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)
    return topic


def produce_keyed(probe: Probe, bootstrap: str, topic: str, partitions: int, keys: list[str]) -> None:
    """One log batch of these keys in each partition, appended to the traces."""
    for partition in range(partitions):
        produce(bootstrap, topic, [(partition, key.encode(), b"value") for key in keys])
        probe.produce(topic, partition, [])


def test_sp65_compaction_leaves_holes_and_new_records_start_at_speo_from_inside_the_window(kafka, tmp_path):
    """SP-65: batches 0-4, 5-9 and 10-14 (whose keys replace 5-9's) in two partitions; compaction removes 5-9
    before anything is fetched. Partition 0, 0-4 released: a fetch from inside the window acquires 0-4 and new
    records from SPEO 5, the removed offsets among them (the old rule started them at 10). Partition 1, 0-4 held:
    the fetch starts at SPEO and the new records at 10; 5-9 are a hole of Kafka's cache, so a gap of 7-9 is INVALID_REQUEST (the
    old rule had them archived: INVALID_RECORD_STATE) and an accept of 7-12 reaches over it to 10, not held."""
    probe = probe_of(kafka, "compact")
    topic = compacted_topic(probe, kafka.bootstrap, 2)
    tp0, tp1 = f"{topic}:0", f"{topic}:1"
    produce_keyed(probe, kafka.bootstrap, topic, 2, [f"a{index}" for index in range(5)])
    rolls_after = time.monotonic() + 1.1   # segment.ms past the first batch's timestamp
    for _ in range(2):
        produce_keyed(probe, kafka.bootstrap, topic, 2, [f"k{index}" for index in range(5)])
    time.sleep(max(0.0, rolls_after - time.monotonic()))
    produce_keyed(probe, kafka.bootstrap, topic, 2, [f"d{index}" for index in range(5)])   # rolls the segment
    _wait_compacted(probe, topic, 2, (5, 9))
    for tp in (tp0, tp1):
        probe.partitions[tp].add(probe.timers.now_ms(), "cleaner", "compact", {"first": 5, "last": 9})
    alice, dave, bob, erin = (probe.member(name) for name in ("alice", "dave", "bob", "erin"))
    assert probe.fetch(alice, [tp0], max_records=5, wait_ms=WAIT_MS) == {tp0: [[0, 4, 1]]}
    assert probe.acknowledge(alice, {tp0: [(0, 4, "release")]}) == {tp0: "NONE"}
    assert probe.fetch(dave, [tp1], max_records=5, wait_ms=WAIT_MS) == {tp1: [[0, 4, 1]]}
    # The fetch reads the first segment only (0-14): 15-19 wait for the next one.
    assert probe.fetch(bob, [tp0], max_records=50) == {tp0: [[0, 4, 2], [5, 14, 1]]}
    assert probe.fetch(erin, [tp1], max_records=50) == {tp1: [[10, 14, 1]]}
    answers = [probe.acknowledge(erin, {tp1: [batch]})[tp1]
               for batch in ((7, 9, "gap"), (7, 12, "accept"), (10, 14, "accept"))]
    assert answers == ["INVALID_REQUEST", "INVALID_RECORD_STATE", "NONE"]
    assert probe.acknowledge(dave, {tp1: [(0, 4, "accept")]}) == {tp1: "NONE"}
    assert probe.acknowledge(bob, {tp0: [(0, 4, "accept"), (5, 9, "gap"), (10, 14, "accept")]}) == {tp0: "NONE"}
    for member in (alice, dave, bob, erin):
        probe.close(member)
    inside, at_speo = judged(probe, tmp_path)
    rejected(inside, lambda step: step["op"] == "acquire" and step["actor"] == "bob",
             lambda step: step["observed"].update(records=[[0, 4, 2], [10, 14, 1]]), "SP-6")
    rejected(at_speo, acknowledged([(7, 9, "gap")]),
             lambda step: step["observed"].update(error="INVALID_RECORD_STATE"), "SP-14")


def _wait_compacted(probe: Probe, topic: str, partitions: int, batch: tuple[int, int]) -> None:
    deadline = time.monotonic() + COMPACTION_WAIT_S
    while any(batch in probe.log_batches(topic, partition) for partition in range(partitions)):
        if time.monotonic() > deadline:
            pytest.fail(f"the log cleaner did not remove batch {batch} of {topic} in {COMPACTION_WAIT_S:.0f} s")
        time.sleep(0.2)
