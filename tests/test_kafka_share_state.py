"""Kafka's share coordinator, read back: what Apache Kafka stored in __share_group_state during a real share-group
workload, decoded by Kafka's own record serde and judged as share-state traces under kafka-4.2; and the same
records corrupted, caught at the clause each corruption breaks.

Skipped, with the reason in pytest's summary, where Java 17 (with javac) or Maven is missing; `make test` installs
them.
"""

from __future__ import annotations

import copy
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from kipcheck.oracle.check import check_file, check_lines
from kipcheck.oracle.kafka.share_state_topic import (
    ReadBackFailed, ShareKey, StoredRecord, StoredRecords, parse_dump, read_records, to_traces, trace_header,
    trace_name, write_traces,
)
from kipcheck.oracle.trace import dumps

QUIET = {"log_level": 0}
WAIT_S = 90
# Small enough that a test's workload passes several snapshots and lock timeouts in seconds.
SETTINGS = {"share.coordinator.snapshot.update.records.per.snapshot": "3",
            "group.share.min.record.lock.duration.ms": "1000", "group.share.record.lock.duration.ms": "2000",
            "group.share.delivery.count.limit": "3",
            "group.share.min.heartbeat.interval.ms": "1000", "group.share.heartbeat.interval.ms": "1000"}
UPDATES_PER_SNAPSHOT = 3
COLD_INTERVAL_MS = 300_000  # Kafka's default: no cold snapshot in the main run


# The workload: real clients against the real broker.

def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})  # held while its future is awaited
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)


def set_earliest(bootstrap: str, *groups: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    for group in groups:
        earliest = ConfigResource("GROUP", group, incremental_configs=[ConfigEntry(
            "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
        for future in admin.incremental_alter_configs([earliest]).values():
            future.result(30)


def produce(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, **QUIET})
    for number in range(count):
        producer.produce(topic, value=f"{topic}-{number}".encode())
    assert producer.flush(30) == 0


def share_consumer(bootstrap: str, group: str, topic: str, explicit: bool = True) -> ShareConsumer:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                              "share.acknowledgement.mode": "explicit" if explicit else "implicit", **QUIET})
    consumer.subscribe([topic])
    return consumer


def poll(consumer: ShareConsumer) -> list:
    return [message for message in consumer.poll(1.0) if message.error() is None]


def acknowledge_until(consumer: ShareConsumer, choose, done) -> dict[int, list[int]]:
    """Poll, acknowledging each record as `choose(offset, delivery_count)` says, until `done(deliveries)`."""
    deliveries: dict[int, list[int]] = {}
    deadline = time.monotonic() + WAIT_S
    while not done(deliveries):
        assert time.monotonic() < deadline, f"the workload stalled; deliveries so far {deliveries}"
        messages = poll(consumer)
        for message in messages:
            deliveries.setdefault(message.offset(), []).append(message.delivery_count())
            consumer.acknowledge(message, choose(message.offset(), message.delivery_count()))
        if messages:
            results = consumer.commit_sync(30)
            assert all(error is None for error in (results or {}).values()), results
    return deliveries


def release_reject_accept(offset: int, delivery_count: int) -> int:
    """Every third record released at each delivery (archived at the limit, 3), every third rejected, the rest
    accepted."""
    return (AcknowledgeType.RELEASE, AcknowledgeType.REJECT, AcknowledgeType.ACCEPT)[offset % 3]


def share_group_workload(kafka) -> dict[int, list[int]]:
    """Accept, release (to the delivery limit), reject, a lock timeout, then Kafka killed -9 and restarted (the
    share-partition's new leader epoch), more records accepted one by one, the group's offsets reset to the
    earliest and every record accepted again, and the group deleted."""
    create_topic(kafka.bootstrap, "jobs")
    set_earliest(kafka.bootstrap, "workers")
    produce(kafka.bootstrap, "jobs", 3)
    holder = share_consumer(kafka.bootstrap, "workers", "jobs")  # polls once, never acknowledges: its locks time out
    deadline = time.monotonic() + WAIT_S
    while not (held := poll(holder)):
        assert time.monotonic() < deadline, "the holder got no records"
    produce(kafka.bootstrap, "jobs", 9)
    worker = share_consumer(kafka.bootstrap, "workers", "jobs")
    deliveries = acknowledge_until(worker, release_reject_accept, lambda seen: len(seen) == 12 and all(
        seen[offset][-1] == 3 for offset in range(0, 12, 3)))  # released up to the limit, then archived
    worker.close()
    holder.close()
    assert [message.offset() for message in held] == [0, 1, 2]
    assert deliveries[0] == [2, 3], "the held record came back after its lock timed out, then hit the limit"
    kafka.kill()
    kafka.start()
    worker = share_consumer(kafka.bootstrap, "workers", "jobs")
    for _ in range(2 * UPDATES_PER_SNAPSHOT):  # one record, so one write, at a time: two snapshots' worth
        produce(kafka.bootstrap, "jobs", 1)
        deliveries |= acknowledge_until(worker, lambda offset, count: AcknowledgeType.ACCEPT, lambda seen: seen)
    worker.close()
    records = 12 + 2 * UPDATES_PER_SNAPSHOT
    assert sorted(deliveries) == list(range(records))
    reset = subprocess.run([sys.executable, "-m", "kipcheck", "kafka", "run-class", "--version", kafka.runtime.line,
                            "org.apache.kafka.tools.consumer.group.ShareGroupCommand", "--bootstrap-server",
                            kafka.bootstrap, "--reset-offsets", "--group", "workers", "--topic", "jobs",
                            "--to-earliest", "--execute"], capture_output=True, text=True, timeout=120)
    assert reset.returncode == 0, reset.stderr  # InitializeShareGroupState again, on a key with a state
    worker = share_consumer(kafka.bootstrap, "workers", "jobs")
    again = acknowledge_until(worker, lambda offset, count: AcknowledgeType.ACCEPT, lambda seen: len(seen) == records)
    worker.close()
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap, **QUIET})  # DeleteShareGroupState: a tombstone
    assert admin.delete_consumer_groups(["workers"], request_timeout=30)["workers"].result(30) is None
    return {offset: deliveries[offset] + again[offset] for offset in deliveries}


@dataclass
class Run:
    line: str
    stored: StoredRecords
    trace_dir: Path
    printed: str


@pytest.fixture(scope="module", params=["4.2", "4.4"])
def coordinator_run(request, start_kafka_once, tmp_path_factory) -> Run:
    """One share-group workload per Kafka line, its coordinator's records read back by `kipcheck kafka share-state`
    (and, for the tests that corrupt them, by read_records)."""
    from kipcheck.oracle.kafka.runtime import KafkaUnavailable, programs_jar

    line = request.param
    try:
        programs_jar(line)
    except KafkaUnavailable as reason:
        pytest.skip(f"kipcheck's Java programs cannot be built here: {reason}")
    kafka = start_kafka_once(line, name=f"share-state-{line}", **SETTINGS)
    share_group_workload(kafka)
    trace_dir = tmp_path_factory.mktemp(f"traces-{line}")
    done = subprocess.run([sys.executable, "-m", "kipcheck", "kafka", "share-state", "--version", line,
                           "--bootstrap", kafka.bootstrap, "--trace-dir", str(trace_dir)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    stored = read_records(kafka.bootstrap, line)
    kafka.stop()
    return Run(line, stored, trace_dir, done.stdout)


def judge(stored: StoredRecords, updates_per_snapshot: int = UPDATES_PER_SNAPSHOT,
          cold_interval_ms: int = COLD_INTERVAL_MS, profile: str = "kafka-4.2"):
    """The verdict on each key's trace, as `kipcheck check` gives it."""
    header = trace_header(updates_per_snapshot, cold_interval_ms, profile)
    return [check_lines([dumps({"format": "kipcheck-trace", "version": 1, **header}),
                         *(dumps({"step": number, **step}) for number, step in enumerate(trace.steps, start=1))],
                        str(trace.key))
            for trace in to_traces(stored)]


def ops(steps: list[dict]) -> list[tuple]:
    """Each step's op, with the record it observed (and a read's leader epoch, when it carries one)."""
    return [(step["op"], step["observed"].get("record"), step["args"].get("leader_epoch")) for step in steps]


# What Kafka stored passes.

def test_what_kafkas_share_coordinator_stored_passes_under_kafka_42(coordinator_run):
    judged = subprocess.run([sys.executable, "-m", "kipcheck", "check", str(coordinator_run.trace_dir)],
                            capture_output=True, text=True, timeout=300)
    assert judged.returncode == 0, judged.stdout + judged.stderr
    records = len(coordinator_run.stored.records)
    assert f"{records} records of 1 share-partitions read back" in coordinator_run.printed
    [trace] = to_traces(coordinator_run.stored)
    steps = ops(trace.steps)
    # The run reached every kind of record the coordinator writes for a share-partition: the initialize's
    # snapshot, a write's update and, past 3 updates, a write's snapshot; after the restart, the new leader's
    # read; the reset's initialize of a key that has a state; the group's deletion's tombstone.
    assert steps[0] == ("initialize", "snapshot", None) and steps.count(("initialize", "snapshot", None)) == 2
    assert steps[-1] == ("delete", "tombstone", None)
    assert steps.count(("write", "update", None)) >= 2 * UPDATES_PER_SNAPSHOT
    assert steps.count(("write", "snapshot", None)) >= 2
    assert any(op == "read" and record in ("update", "snapshot") and epoch > 0 for op, record, epoch in steps)
    assert not trace.pruned and trace.records == records


def test_what_kafka_stored_passes_under_the_profile_of_its_line(coordinator_run):
    """Kafka 4.4.0's records pass under kafka-4.4 too: no negative epoch (ST-40), no start offset going back
    (ST-41), the state epoch of each write the key's (the read back's writes carry it, not -1)."""
    verdicts = judge(coordinator_run.stored, profile=f"kafka-{coordinator_run.line}")
    assert verdicts and all(verdict.status == "ok" for verdict in verdicts), [verdict.summary() for verdict in verdicts]


# The same records, corrupted: each caught at the clause it breaks.

def first_index(records: list[StoredRecord], kind: str, where) -> int:
    return next(index for index, record in enumerate(records) if record.type == kind and where(record))


def write_snapshot(records: list[StoredRecord], nth: int = 0) -> int:
    """The `nth` snapshot a write produced (the initialize's snapshot has no batches)."""
    return [index for index, record in enumerate(records)
            if record.type == "snapshot" and record.value["stateBatches"]][nth]


def with_value(record: StoredRecord, **changes) -> StoredRecord:
    return replace(record, value={**copy.deepcopy(record.value), **changes})


def count_down(records, nth: int = 0):
    """A snapshot in which a delivery count went down: below the count an earlier record stored for one of its
    offsets (merging never lowers a count, ST-8)."""
    index = write_snapshot(records, nth)
    batches = copy.deepcopy(records[index].value["stateBatches"])
    earlier = [batch for record in records[:index] if record.value for batch in record.value["stateBatches"]]
    batch, before = next((batch, before) for batch in batches for before in earlier
                         if before["firstOffset"] <= batch["lastOffset"] and batch["firstOffset"] <= before["lastOffset"])
    batch["deliveryCount"] = before["deliveryCount"] - 1
    records[index] = with_value(records[index], stateBatches=batches)


def acknowledged_made_available(records):
    """A snapshot holding an acknowledged record as available again, at the same delivery count."""
    index = write_snapshot(records)
    batches = copy.deepcopy(records[index].value["stateBatches"])
    next(batch for batch in batches if batch["deliveryState"] == 2)["deliveryState"] = 0
    records[index] = with_value(records[index], stateBatches=batches)


def offset_forgotten(records):
    """A snapshot that dropped a record above the start offset that the updates before it named."""
    index = write_snapshot(records)
    records[index] = with_value(records[index], stateBatches=records[index].value["stateBatches"][1:])


def snapshot_too_early(records):
    """The update before the first write's snapshot lost: that snapshot now follows 2 updates, not 3."""
    del records[write_snapshot(records) - 1]


def state_epoch_raised(records):
    """A write's snapshot with a higher state epoch than InitializeShareGroupState set (KAFKA-19456's bug)."""
    index = write_snapshot(records)
    records[index] = with_value(records[index], stateEpoch=records[index].value["stateEpoch"] + 1)


def leader_epoch_lowered(records):
    """After the new leader's read, a read with the old leader epoch that still wrote its record."""
    index = first_index(records, "update", where=lambda record: record.value["leaderEpoch"] > 0)
    records.insert(index + 1, with_value(records[index], leaderEpoch=records[index].value["leaderEpoch"] - 1,
                                         stateBatches=[]))


def write_after_delete(records):
    """An update after the tombstone of DeleteShareGroupState, with no InitializeShareGroupState between."""
    records.append(records[first_index(records, "update", where=lambda record: True)])


def write_before_initialize(records):
    """An update with no InitializeShareGroupState before it."""
    del records[0]


def cold_too_soon(records):
    """A snapshot of the cold-partition job written long before the interval passed."""
    index = write_snapshot(records)
    records[index] = with_value(records[index], createTimestamp=records[index].value["writeTimestamp"] - 1)


@pytest.mark.parametrize("corrupt, clause", [
    (count_down, "ST-8"), (acknowledged_made_available, "ST-8"), (offset_forgotten, "ST-8"),
    (snapshot_too_early, "ST-10"), (state_epoch_raised, "ST-5"), (leader_epoch_lowered, "ST-32"),
    (write_before_initialize, "ST-3"), (write_after_delete, "ST-33"), (cold_too_soon, "ST-34"),
], ids=lambda value: getattr(value, "__name__", value))
def test_corrupted_records_are_caught_at_the_clause_they_break(coordinator_run, corrupt, clause):
    [verdict] = judge(coordinator_run.stored)
    assert verdict.status == "ok", verdict.summary()
    records = list(coordinator_run.stored.records)
    corrupt(records)
    [verdict] = judge(replace(coordinator_run.stored, records=records))
    assert (verdict.status, verdict.clause) == ("violation", clause), verdict.summary()


def test_a_pruned_history_is_judged_from_its_first_snapshot_without_record_kinds(coordinator_run):
    """The coordinator deletes the records below every key's latest snapshot (ST-35): a history read after that
    starts later, with an update count no record tells. Here it starts at an update, which is skipped."""
    records = coordinator_run.stored.records
    start = write_snapshot(records) - 1  # the pruned log starts at an update, just before a snapshot
    pruned = StoredRecords({records[0].partition: records[start].offset}, records[start:])
    [trace] = to_traces(pruned)
    assert trace.pruned and trace.skipped == 1
    assert ops(trace.steps)[:2] == [("initialize", None, None), ("write", None, None)]
    assert all("record" not in step["observed"] for step in trace.steps)
    [verdict] = judge(pruned)
    assert verdict.status == "ok", verdict.summary()
    count_down(pruned.records, nth=1)  # what pruning leaves is still judged for its states
    [verdict] = judge(pruned)
    assert (verdict.status, verdict.clause) == ("violation", "ST-8"), verdict.summary()


# A cold key beside a busy one (ST-34's shard-wide skip: spec/kafka-findings.md), then the same shard pruned.

@dataclass
class BusyShard:
    stored: StoredRecords          # as written
    pruned: StoredRecords          # after the coordinator pruned it
    cold_interval_ms: int


@pytest.fixture(scope="module")
def busy_shard(start_kafka_once) -> BusyShard:
    """One shard (__share_group_state has one partition) holding an idle group's key and a busy group's key,
    cold-partition snapshots every 2 s; read back, then Kafka restarted pruning every 500 ms and read back again."""
    cold_interval_ms = 2000
    kafka = start_kafka_once("4.2", name="busy-shard", **SETTINGS, **{
        "share.coordinator.state.topic.num.partitions": "1",
        "share.coordinator.cold.partition.snapshot.interval.ms": str(cold_interval_ms)})
    create_topic(kafka.bootstrap, "jobs")
    set_earliest(kafka.bootstrap, "idle", "busy")
    produce(kafka.bootstrap, "jobs", 2)
    idle = share_consumer(kafka.bootstrap, "idle", "jobs")
    acknowledge_until(idle, lambda offset, count: AcknowledgeType.ACCEPT, lambda seen: len(seen) == 2)
    idle.close()
    busy = share_consumer(kafka.bootstrap, "busy", "jobs")
    producer = Producer({"bootstrap.servers": kafka.bootstrap, **QUIET})
    end = time.monotonic() + 4.5 * cold_interval_ms / 1000
    while time.monotonic() < end:  # a write every few milliseconds: the busy key is never cold for long
        producer.produce("jobs", value=b"more")
        producer.flush(30)
        for message in poll(busy):
            busy.acknowledge(message, AcknowledgeType.ACCEPT)
        busy.commit_sync(30)
    busy.close()
    stored = read_records(kafka.bootstrap, "4.2")
    kafka.stop()
    kafka.settings["share.coordinator.state.topic.prune.interval.ms"] = "500"
    kafka.start()
    deadline = time.monotonic() + WAIT_S
    while not (pruned := read_records(kafka.bootstrap, "4.2")).pruned(0):
        assert time.monotonic() < deadline, "the coordinator never pruned __share_group_state"
        time.sleep(1)
    kafka.stop()
    return BusyShard(stored, pruned, cold_interval_ms)


def judged_traces(stored: StoredRecords, cold_interval_ms: int, directory: Path) -> dict[str, object]:
    """Each key's trace written as `kipcheck kafka share-state` writes it, and its verdict, by group."""
    traces = to_traces(stored)
    paths = write_traces(traces, directory, trace_header(UPDATES_PER_SNAPSHOT, cold_interval_ms))
    return {trace.key.group: (trace, check_file(path)) for trace, path in zip(traces, paths)}


def test_a_cold_key_is_snapshotted_again_while_another_key_of_its_shard_is_busy(busy_shard, tmp_path):
    """Kafka's cold-partition job skips only when every key of the shard is cold: the idle group's key gets a
    cold snapshot every interval while the busy group keeps writing snapshots, and the profile allows it."""
    judged = judged_traces(busy_shard.stored, busy_shard.cold_interval_ms, tmp_path)
    assert set(judged) == {"idle", "busy"}
    for trace, verdict in judged.values():
        assert verdict.status == "ok", verdict.summary()
    idle_ops = [op for op, record, _ in ops(judged["idle"][0].steps) if record is not None]
    assert ["cold_snapshot", "cold_snapshot"] in [idle_ops[index:index + 2] for index in range(len(idle_ops))], \
        f"no cold snapshot of a key whose last snapshot was cold: {idle_ops}"


def test_a_log_the_coordinator_pruned_passes_judged_for_its_states(busy_shard, tmp_path):
    judged = judged_traces(busy_shard.pruned, busy_shard.cold_interval_ms, tmp_path)
    for trace, verdict in judged.values():
        assert trace.pruned and verdict.status == "ok", verdict.summary()
        assert trace.steps[0]["op"] == "initialize" and trace.steps[0]["actor"].startswith("__share_group_state-0@")
        assert all("record" not in step["observed"] for step in trace.steps)
    # The records read back start at the log start the pruning moved: the first ones written are gone. (Not a
    # smaller count: the coordinator keeps writing cold snapshots after the restart, as many as it pruned at times.)
    first_read = busy_shard.pruned.records[0].offset
    assert first_read >= busy_shard.pruned.log_starts[0] > busy_shard.stored.records[0].offset


# The reading itself: clear errors, safe names.

def test_output_that_is_not_a_share_coordinator_record_is_refused_naming_the_line():
    good = b'{"partition":0,"log_start":0,"end":1}'
    with pytest.raises(ReadBackFailed, match="line 2 of the records read back"):
        parse_dump([good, b'{"partition":0,"offset":0,"timestamp":1,"type":"snapshot","key":{}}'])
    with pytest.raises(ReadBackFailed, match="line 1"):
        parse_dump([b"Exception in thread main"])
    stored = parse_dump([good, b'{"partition":0,"offset":0,"timestamp":1,"type":"unknown","record_type":9}'])
    assert stored.unknown == 1 and stored.records == []


def test_trace_names_escape_any_group_id():
    assert trace_name(ShareKey("workers", "AAAA", 3)) == "share-state-workers-AAAA-3.jsonl"
    assert "/" not in trace_name(ShareKey("../etc/passwd", "AAAA", 0))
    assert len(trace_name(ShareKey("g" * 5000, "AAAA", 0))) < 200
    assert trace_name(ShareKey("g" * 5000, "AAAA", 0)) != trace_name(ShareKey("g" * 4999, "AAAA", 0))


@pytest.mark.parametrize("arguments, message", [
    (["--set", "share.coordinator.snapshot.update.records.per.snapshot"], "--set takes NAME=VALUE"),
    (["--set", "log.retention.ms=5"], "--set takes share.coordinator"),
    (["--set", "share.coordinator.snapshot.update.records.per.snapshot=many"], "with a whole number"),
])
def test_the_share_state_command_refuses_bad_settings_with_one_clear_line(arguments, message, tmp_path):
    result = subprocess.run([sys.executable, "-m", "kipcheck", "kafka", "share-state", "--bootstrap", "127.0.0.1:1",
                             "--trace-dir", str(tmp_path), *arguments], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr
