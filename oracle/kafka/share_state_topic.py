"""Kafka's share coordinator, read back: the records it stored in __share_group_state, as share-state traces.

A plain consumer reads every record from the beginning and Kafka's own record serde decodes it
(java/src/main/java/dev/kipcheck/kafka/ShareGroupStateDump.java); each share-partition key
(group:topicId:partition) becomes one trace, judged by the share-state machine like any other. How each record
becomes steps, and what can and cannot be judged from records alone: spec/share-state.md, "Read back from
Kafka's records".

    read_back(bootstrap, trace_dir, line="4.2")    # what `kipcheck kafka share-state` runs -> ReadBack
    stored = read_records(bootstrap, "4.2")        # StoredRecords, decoded by Kafka's serde
    traces = to_traces(stored)                     # pure: one KeyTrace per key
    write_traces(traces, trace_dir, trace_header(updates_per_snapshot=3, cold_snapshot_interval_ms=300000))
"""

from __future__ import annotations

import hashlib
import subprocess
import tempfile
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, NamedTuple

import msgspec

from kipcheck.model.errors import Error
from kipcheck.oracle.kafka.runtime import LOG4J_CONFIG, KafkaRuntime
from kipcheck.oracle.trace import write_trace

PROGRAM = "dev.kipcheck.kafka.ShareGroupStateDump"
READ_TIMEOUT_MS = 120_000
# The broker settings the records are judged with (the share-state config each names).
UPDATES_PER_SNAPSHOT = "share.coordinator.snapshot.update.records.per.snapshot"
COLD_SNAPSHOT_INTERVAL = "share.coordinator.cold.partition.snapshot.interval.ms"
SETTING_DEFAULTS = {UPDATES_PER_SNAPSHOT: 500, COLD_SNAPSHOT_INTERVAL: 300_000}
# ShareSnapshotValue / ShareUpdateValue DeliveryState ids, named as in the trace format.
# Kafka 4.4 adds archiving (3), a record on its way to a dead-letter queue, which only the kafka-4.4 profile names.
STATES = {0: "available", 1: "acquired", 2: "acknowledged", 3: "archiving", 4: "archived"}
# The fields of each record's value, as the share coordinator's schemas name them (a tombstone has no value).
BATCH_FIELDS = {"firstOffset", "lastOffset", "deliveryState", "deliveryCount"}
VALUE_FIELDS = {
    "snapshot": {"snapshotEpoch", "stateEpoch", "leaderEpoch", "startOffset", "deliveryCompleteCount",
                 "createTimestamp", "writeTimestamp", "stateBatches"},
    "update": {"snapshotEpoch", "leaderEpoch", "startOffset", "deliveryCompleteCount", "stateBatches"},
    "tombstone": set(),
}


class ReadBackFailed(RuntimeError):
    """The records could not be read or are not what Kafka's share coordinator writes; the message says which."""


class ShareKey(NamedTuple):
    group: str
    topic_id: str
    partition: int

    def __str__(self) -> str:
        return f"{self.group}:{self.topic_id}:{self.partition}"


@dataclass(frozen=True)
class StoredRecord:
    partition: int          # of __share_group_state
    offset: int
    timestamp: int
    type: str               # snapshot, update or tombstone
    key: ShareKey
    value: dict[str, Any] | None  # the schema's fields (ShareSnapshotValue / ShareUpdateValue); None: a tombstone


@dataclass
class StoredRecords:
    log_starts: dict[int, int]                   # partition -> its log start offset when read
    records: list[StoredRecord]                  # in partition and offset order
    unknown: int = 0                             # records of a type the share coordinator does not know (skipped)

    def pruned(self, partition: int) -> bool:
        """True when the coordinator deleted the partition's first records (ST-35), before or while they were
        read (its log start is asked last): the keys' histories start later."""
        return self.log_starts.get(partition, 0) > 0


@dataclass
class KeyTrace:
    key: ShareKey
    steps: list[dict[str, Any]]
    records: int
    pruned: bool = False     # its partition was pruned: judged from its first snapshot on, record kinds unobserved
    skipped: int = 0         # records before that snapshot, which no trace can start from


@dataclass
class ReadBack:
    records: int
    keys: int
    paths: list[Path] = field(default_factory=list)
    pruned_keys: int = 0
    skipped: int = 0
    unknown: int = 0
    settings: dict[str, int] = field(default_factory=dict)


# Reading: Kafka's records through its own serde.

def read_records(bootstrap: str, line: str = "4.2", timeout_ms: int = READ_TIMEOUT_MS) -> StoredRecords:
    """Every record of __share_group_state, read from the beginning to each partition's last stable offset."""
    runtime = KafkaRuntime.resolve(line)
    with tempfile.TemporaryDirectory(prefix="kipcheck-share-state-") as work:
        log4j = Path(work) / "log4j2.properties"
        log4j.write_text(LOG4J_CONFIG)
        command = runtime.java_command(PROGRAM, [bootstrap, str(timeout_ms)], 256, log4j, programs=True)
        try:
            done = subprocess.run(command, capture_output=True, timeout=timeout_ms / 1000 + 60)
        except subprocess.TimeoutExpired:
            raise ReadBackFailed(f"reading __share_group_state from {bootstrap} took longer than "
                                 f"{timeout_ms / 1000 + 60:.0f} s") from None
    if done.returncode != 0:
        tail = "\n".join(done.stderr.decode(errors="replace").strip().splitlines()[-10:])
        raise ReadBackFailed(f"reading __share_group_state from {bootstrap} failed (exit {done.returncode}):\n{tail}")
    return parse_dump(done.stdout.splitlines())


def parse_dump(lines: Iterable[bytes | str]) -> StoredRecords:
    """ShareGroupStateDump's output: record lines (partitions interleaved), then partition lines."""
    stored = StoredRecords({}, [])
    for number, text in enumerate(lines, start=1):
        try:
            line = msgspec.json.decode(text)
            if set(line) == {"partition", "log_start", "end"}:
                stored.log_starts[line["partition"]] = line["log_start"]
            elif line["type"] == "unknown":
                stored.unknown += 1
            else:
                stored.records.append(_record(line))
        except (msgspec.DecodeError, KeyError, TypeError, ValueError) as error:
            raise ReadBackFailed(f"line {number} of the records read back is not a share coordinator record "
                                 f"({error}): {text[:200]!r}") from None
    stored.records.sort(key=lambda record: (record.partition, record.offset))
    return stored


def _record(line: dict[str, Any]) -> StoredRecord:
    key, value = line["key"], line.get("value")
    if line["type"] not in VALUE_FIELDS:
        raise ValueError(f"unknown type {line['type']!r}")
    if (value is None) != (line["type"] == "tombstone") or set(value or {}) != VALUE_FIELDS[line["type"]]:
        raise ValueError(f"a {line['type']} holds {', '.join(sorted(VALUE_FIELDS[line['type']])) or 'no value'}")
    for batch in (value or {}).get("stateBatches", []):
        if set(batch) != BATCH_FIELDS or batch["deliveryState"] not in STATES:
            raise ValueError(f"a state batch {batch}: Kafka's has {', '.join(sorted(BATCH_FIELDS))}, with a "
                             f"DeliveryState in {sorted(STATES)}")
    return StoredRecord(int(line["partition"]), int(line["offset"]), int(line["timestamp"]), line["type"],
                        ShareKey(str(key["groupId"]), str(key["topicId"]), int(key["partition"])), value)


def broker_settings(bootstrap: str, timeout_s: float = 30) -> dict[str, int]:
    """The share coordinator settings of the cluster's brokers (they must agree), Kafka's defaults where unset."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, ConfigResource

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    found: dict[str, set[int]] = {name: set() for name in SETTING_DEFAULTS}
    try:
        for broker in sorted(admin.list_topics(timeout=timeout_s).brokers):
            resource = ConfigResource("BROKER", str(broker))
            described = admin.describe_configs([resource])[resource].result(timeout_s)
            for name, default in SETTING_DEFAULTS.items():
                entry = described.get(name)
                found[name].add(int(entry.value) if entry is not None and entry.value is not None else default)
    except KafkaException as error:
        raise ReadBackFailed(f"the brokers at {bootstrap} did not tell their share coordinator settings: {error}") \
            from None
    disagreeing = [name for name, values in found.items() if len(values) > 1]
    if disagreeing:
        raise ReadBackFailed(f"the brokers disagree on {', '.join(disagreeing)}: give the value to judge with")
    return {name: values.pop() if values else SETTING_DEFAULTS[name] for name, values in found.items()}


# Turning records into traces.

def to_traces(stored: StoredRecords) -> list[KeyTrace]:
    """One trace per key, its records in topic order (a key's records all live in one partition)."""
    readings: dict[ShareKey, _KeyReading] = {}
    for record in stored.records:
        if record.key not in readings:
            readings[record.key] = _KeyReading(record.key, stored.pruned(record.partition))
        readings[record.key].read(record)
    return [reading.trace() for reading in readings.values()]


def trace_header(updates_per_snapshot: int, cold_snapshot_interval_ms: int, profile: str = "kafka-4.2") -> dict[str, Any]:
    """The traces' header: the broker's settings are the share-state config they are judged with."""
    return {"machine": "share-state", "profile": profile,
            "config": {"deltas_per_checkpoint": updates_per_snapshot,
                       "cold_snapshot_interval_ms": cold_snapshot_interval_ms}}


class _KeyReading:
    """One key's records as share-state steps. It keeps only what the records themselves say the coordinator
    holds (whether the key has a state, its state epoch and leader epoch) to tell which request wrote each
    record; everything else, the merge above all, is the model's to judge."""

    def __init__(self, key: ShareKey, pruned: bool):
        self.key = key
        self.pruned = pruned
        self.steps: list[dict[str, Any]] = []
        self.records = self.skipped = 0
        self.started = not pruned        # a pruned history starts at the key's first snapshot
        self.has_state = False
        self.state_epoch = self.leader_epoch = 0
        self.at_ms = 0

    def trace(self) -> KeyTrace:
        return KeyTrace(self.key, self.steps, self.records, self.pruned, self.skipped)

    def read(self, record: StoredRecord) -> None:
        self.records += 1
        value = record.value
        if not self.started and record.type != "snapshot":
            self.skipped += 1
            return
        self.at_ms = max(self.at_ms, value["writeTimestamp"] if record.type == "snapshot" else record.timestamp)
        actor = f"__share_group_state-{record.partition}@{record.offset}"
        if record.type == "tombstone":
            self._step(actor, "delete", {}, "tombstone")
            self.has_state = False
        elif record.type == "update":
            self._update(actor, value)
        elif not self.started:
            self._restore(actor, value)
        else:
            self._snapshot(actor, value)

    def _update(self, actor: str, value: dict[str, Any]) -> None:
        batches = _batches(value["stateBatches"])
        if value["leaderEpoch"] not in (-1, self.leader_epoch) and not batches:
            # A read with a new leader epoch records it as a write of no batches would (ST-32).
            self._step(actor, "read", {"leader_epoch": value["leaderEpoch"]}, "update")
        else:
            self._write(actor, self.state_epoch, value, batches, "update")
        if value["leaderEpoch"] != -1:
            self.leader_epoch = value["leaderEpoch"]

    def _snapshot(self, actor: str, value: dict[str, Any]) -> None:
        batches = _batches(value["stateBatches"])
        if value["createTimestamp"] != value["writeTimestamp"]:
            # Only the cold-partition job keeps the state's create time (ST-34).
            self._step(actor, "cold_snapshot", {}, "snapshot")
        elif not self.has_state or (not batches and (value["stateEpoch"] != self.state_epoch or
                                                     value["leaderEpoch"] == 0)):
            # InitializeShareGroupState (ST-2): no batches, leader epoch 0, the request's state epoch. A write's
            # snapshot holding nothing at leader epoch 0 reads the same; as an initialize it is judged the same.
            self._step(actor, "initialize", {"state_epoch": value["stateEpoch"], "start_offset": value["startOffset"]},
                       "snapshot")
        elif value["leaderEpoch"] != self.leader_epoch:
            self._step(actor, "read", {"leader_epoch": value["leaderEpoch"]}, "snapshot")
        else:
            self._write(actor, self.state_epoch, value, batches, "snapshot")
        self._stored(actor, value, batches)

    def _restore(self, actor: str, value: dict[str, Any]) -> None:
        """The first snapshot of a pruned history: the state it holds, reached by an initialize and a write."""
        batches = _batches(value["stateBatches"])
        self._step(actor, "initialize", {"state_epoch": value["stateEpoch"], "start_offset": value["startOffset"]})
        if batches:
            self._write(actor, value["stateEpoch"], value, batches)
        self.started = True
        self._stored(actor, value, batches)

    def _write(self, actor: str, state_epoch: int, value: dict[str, Any], batches: list[dict[str, Any]],
               record: str | None = None) -> None:
        """A write of the record's batches at its start offset. A ShareUpdate holds no state epoch: the step
        carries the key's, which the write that Kafka accepted cannot have been below (ST-5), and which every
        profile takes (kafka-4.4 refuses -1, ST-40)."""
        self._step(actor, "write", {"state_epoch": state_epoch, "start_offset": value["startOffset"],
                                    "batches": batches}, record)

    def _stored(self, actor: str, value: dict[str, Any], batches: list[dict[str, Any]]) -> None:
        """The state a snapshot holds, as a read would answer it (ST-1): what the steps before must have built."""
        self.steps.append({"at_ms": self.at_ms, "actor": actor, "op": "read", "args": {},
                           "observed": {"error": Error.NONE, "state_epoch": value["stateEpoch"],
                                        "start_offset": value["startOffset"], "batches": batches}})
        self.has_state = True
        self.state_epoch, self.leader_epoch = value["stateEpoch"], value["leaderEpoch"]

    def _step(self, actor: str, op: str, args: dict[str, Any], record: str | None = None) -> None:
        observed: dict[str, Any] = {} if op == "cold_snapshot" else {"error": Error.NONE}
        if record is not None and not self.pruned:
            # ST-31: which record the request appended; after pruning the update count is unknown (ST-35).
            observed["record"] = record
        self.steps.append({"at_ms": self.at_ms, "actor": actor, "op": op, "args": args, "observed": observed})


def _batches(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"first": row["firstOffset"], "last": row["lastOffset"], "state": STATES[row["deliveryState"]],
             "delivery_count": row["deliveryCount"]} for row in rows]


# Writing them.

def trace_name(key: ShareKey) -> str:
    """A file name for the key's trace: the group id escaped (it is any string), shortened with a hash if long."""
    group = urllib.parse.quote(key.group, safe="")
    if len(group) > 100:
        group = f"{group[:80]}~{hashlib.sha256(key.group.encode()).hexdigest()[:12]}"
    return f"share-state-{group}-{key.topic_id}-{key.partition}.jsonl"


def write_traces(traces: list[KeyTrace], trace_dir: Path, header: dict[str, Any]) -> list[Path]:
    trace_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for trace in traces:
        path = trace_dir / trace_name(trace.key)
        write_trace(str(path), header, trace.steps)
        paths.append(path)
    return paths


def read_back(bootstrap: str, trace_dir: Path, line: str = "4.2", settings: dict[str, int] | None = None,
              profile: str = "kafka-4.2") -> ReadBack:
    """Read a cluster's share coordinator records and write one share-state trace per key into `trace_dir`.
    `settings` gives the coordinator settings to judge with; those it leaves out are asked of the brokers."""
    given = dict(settings or {})
    wanted = given if set(SETTING_DEFAULTS) <= set(given) else {**broker_settings(bootstrap), **given}
    stored = read_records(bootstrap, line)
    traces = to_traces(stored)
    header = trace_header(wanted[UPDATES_PER_SNAPSHOT], wanted[COLD_SNAPSHOT_INTERVAL], profile)
    return ReadBack(len(stored.records), len(traces), write_traces(traces, trace_dir, header),
                    sum(trace.pruned for trace in traces), sum(trace.skipped for trace in traces), stored.unknown,
                    wanted)
