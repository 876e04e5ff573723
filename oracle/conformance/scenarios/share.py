"""Share-group scenarios: real confluent-kafka clients against the embedded reference broker, then its traces judged.

Each scenario starts a broker (targets/embedded.EmbeddedBroker) in its own work dir,
drives it with confluent-kafka clients, checks what the clients saw, stops the
broker cleanly and judges every trace it wrote with the oracle
(`kipcheck check`). Its ScenarioResult passes only if the clients saw what the
protocol promises AND every trace is allowed by the models.

    result = SCENARIOS["consumer-killed"](work_dir)      # profile="kip" for the KIP text

`launcher` (see EmbeddedBroker) lets a test run a scenario against a broker
with a seeded bug, to show the oracle catches it.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable

from confluent_kafka import AcknowledgeType

from kipcheck.oracle.conformance.scenarios.clients import (Delivered, as_delivered, create_topic, poll_records, produce,
                                                  read_from_earliest, read_plain, share_consumer)
from kipcheck.oracle.conformance.targets.embedded import DEFAULT_LAUNCHER, EmbeddedBroker
from kipcheck.oracle.conformance.outside import Leaves
from kipcheck.oracle.conformance.scenarios.runner import WAIT_S, ScenarioResult, check, portable_scenario, run_scenario

FAST_GROUPS = {"group.share.heartbeat.interval.ms": "1000", "share.auto.offset.reset": "earliest"}


def _consume_until(consumers, done: Callable[[list[Delivered]], bool], timeout_s: float = WAIT_S) -> list[Delivered]:
    """Poll every consumer (one thread each, implicit acknowledgement) until done(all delivered) or the deadline."""
    delivered: list[Delivered] = []
    lock, stop = threading.Lock(), threading.Event()

    def loop(consumer):
        while not stop.is_set():
            records = [as_delivered(message) for message in poll_records(consumer, 0.5)]
            with lock:
                delivered.extend(records)
                if done(delivered):
                    stop.set()
        consumer.commit_sync(30)

    threads = [threading.Thread(target=loop, args=(consumer,), daemon=True) for consumer in consumers]
    for thread in threads:
        thread.start()
    stop.wait(timeout_s)
    stop.set()
    for thread in threads:
        thread.join(60)
    return delivered


def _values(records) -> set[bytes]:
    return {record.value for record in records}


# -- scenarios -----------------------------------------------------------------------------


def _share_groups(broker: EmbeddedBroker) -> str:
    create_topic(broker.bootstrap, "orders", 3)
    expected = set()
    for producer_config in ({}, {"compression.type": "lz4"}, {"compression.type": "zstd"},
                            {"compression.type": "gzip"}, {"enable.idempotence": True}):
        tag = producer_config.get("compression.type", "idempotent" if producer_config else "plain")
        records = [(index % 3, f"k{index}".encode(), f"{tag}-{index}".encode()) for index in range(60)]
        produce(broker.bootstrap, "orders", records, **producer_config)
        expected |= {value for _, _, value in records}
    read_from_earliest(broker.bootstrap, "billing")
    consumers = [share_consumer(broker.bootstrap, "billing", ["orders"]) for _ in range(3)]
    try:
        delivered = _consume_until(consumers, lambda seen: _values(seen) >= expected)
    finally:
        for consumer in consumers:
            consumer.close()
    check(_values(delivered) >= expected, f"{len(expected - _values(delivered))} of {len(expected)} records never delivered")
    attempts = [(record.partition, record.offset, record.delivery_count) for record in delivered]
    check(len(attempts) == len(set(attempts)), "a record was delivered twice with the same delivery count")
    check(all(record.delivery_count >= 1 for record in delivered), "a delivery count below 1")
    return f"{len(expected)} records from 5 producers delivered to 3 share consumers ({len(delivered)} deliveries)"


def _explicit_acknowledgement(broker: EmbeddedBroker) -> str:
    create_topic(broker.bootstrap, "tasks", 1)
    produce(broker.bootstrap, "tasks", [(0, None, f"task-{index}".encode()) for index in range(12)])
    read_from_earliest(broker.bootstrap, "workers")
    consumer = share_consumer(broker.bootstrap, "workers", ["tasks"], explicit=True)
    first: dict[int, int] = {}      # offset -> delivery count of its first delivery
    released, redelivered, final = set(), {}, set()
    deadline = time.monotonic() + WAIT_S
    try:
        while time.monotonic() < deadline and not (len(first) == 12 and released <= set(redelivered)):
            for message in poll_records(consumer):
                offset = message.offset()
                check(offset not in final, f"offset {offset} was delivered again after ACCEPT/REJECT")
                if offset in first:
                    redelivered[offset] = message.delivery_count()
                    consumer.acknowledge(message, AcknowledgeType.ACCEPT)
                    final.add(offset)
                    continue
                first[offset] = message.delivery_count()
                kind = (AcknowledgeType.RELEASE, AcknowledgeType.REJECT, AcknowledgeType.ACCEPT)[offset % 3]
                consumer.acknowledge(message, kind)
                (released if offset % 3 == 0 else final).add(offset)
            results = consumer.commit_sync(30)
            check(all(error is None for error in (results or {}).values()), f"acknowledgement failed: {results}")
    finally:
        consumer.close()
    check(len(first) == 12, f"only {len(first)} of 12 records delivered")
    check(set(first.values()) == {1}, f"first deliveries with counts {sorted(set(first.values()))}, expected 1")
    check(released <= set(redelivered), f"released offsets {sorted(released - set(redelivered))} never came back")
    check(all(redelivered[offset] == 2 for offset in released),
           f"released records came back with delivery counts {redelivered}, expected 2")
    return f"12 records: {len(released)} released and redelivered with count 2, {len(final) - len(released)} accepted or rejected once"


def delivery_limit(work_dir: Path, launcher: tuple[str, ...] = DEFAULT_LAUNCHER,
        profile: str = "kafka-4.2") -> ScenarioResult:
    """Records released on every delivery are archived at group.share.delivery.count.limit=2: never a third delivery."""
    def body(broker: EmbeddedBroker) -> str:
        create_topic(broker.bootstrap, "poison", 1)
        produce(broker.bootstrap, "poison", [(0, None, f"poison-{index}".encode()) for index in range(6)])
        consumer = share_consumer(broker.bootstrap, "medics", ["poison"], explicit=True)
        counts: dict[int, list[int]] = {}
        deadline = time.monotonic() + WAIT_S
        try:
            while time.monotonic() < deadline and not (len(counts) == 6 and all(len(seen) >= 2 for seen in counts.values())):
                for message in poll_records(consumer):
                    counts.setdefault(message.offset(), []).append(message.delivery_count())
                    consumer.acknowledge(message, AcknowledgeType.RELEASE)
                consumer.commit_sync(30)
            for message in poll_records(consumer, 3.0):  # a third delivery would show up here (and in the traces)
                counts.setdefault(message.offset(), []).append(message.delivery_count())
                consumer.acknowledge(message, AcknowledgeType.ACCEPT)
        finally:
            consumer.close()
        check(len(counts) == 6, f"only {len(counts)} of 6 records delivered")
        check(all(seen == [1, 2] for seen in counts.values()), f"delivery counts per offset {counts}, expected [1, 2] each")
        return "6 records released twice each were archived at the delivery limit 2"

    return run_scenario("delivery-limit", work_dir, {**FAST_GROUPS, "group.share.delivery.count.limit": "2"}, body, launcher, profile)


def consumer_killed(work_dir: Path, launcher: tuple[str, ...] = DEFAULT_LAUNCHER,
        profile: str = "kafka-4.2") -> ScenarioResult:
    """A consumer killed -9 while holding records: its connection closes, they come back with delivery count + 1."""
    return _held_records_return("consumer-killed", work_dir, launcher, profile, signal.SIGKILL)


def consumer_frozen(work_dir: Path, launcher: tuple[str, ...] = DEFAULT_LAUNCHER,
        profile: str = "kafka-4.2") -> ScenarioResult:
    """A consumer frozen (SIGSTOP) while holding records, connection open: they come back when the 2000 ms lock expires."""
    return _held_records_return("consumer-frozen", work_dir, launcher, profile, signal.SIGSTOP)


def _held_records_return(name: str, work_dir: Path, launcher: tuple[str, ...], profile: str,
                         stop_signal: int) -> ScenarioResult:
    def body(broker: EmbeddedBroker) -> str:
        create_topic(broker.bootstrap, "jobs", 1)
        produce(broker.bootstrap, "jobs", [(0, None, f"job-{index}".encode()) for index in range(20)])
        holder = subprocess.Popen([sys.executable, "-m", "kipcheck.oracle.conformance.scenarios.holder", broker.bootstrap,
                                   "crew", "jobs"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        try:
            held = json.loads(holder.stdout.readline() or "[]")
            holder.send_signal(stop_signal)
            check(bool(held), "the holding consumer received nothing")
            counts = {(partition, offset): count for partition, offset, count in held}
            consumer = share_consumer(broker.bootstrap, "crew", ["jobs"])
            try:
                delivered = _consume_until([consumer], lambda seen: set(counts) <= {(r.partition, r.offset) for r in seen})
            finally:
                consumer.close()
        finally:
            holder.kill()
            holder.wait()
            holder.stdout.close()
        again = {(record.partition, record.offset): record.delivery_count for record in delivered}
        check(set(counts) <= set(again), f"held records {sorted(set(counts) - set(again))} never came back")
        wrong = {key: (counts[key], again[key]) for key in counts if again[key] != counts[key] + 1}
        check(not wrong, f"redelivered with wrong delivery counts (first, again): {wrong}")
        how = "a killed consumer (connection closed)" if stop_signal == signal.SIGKILL else "a frozen consumer (lock expired)"
        return f"{len(counts)} records held by {how} came back with delivery count + 1"

    # Kafka 4.2 takes a 2 s lock only with its lower bound lowered from 15 s (SP-45).
    settings = {**FAST_GROUPS, "group.share.record.lock.duration.ms": "2000", "group.share.min.record.lock.duration.ms": "1000"}
    return run_scenario(name, work_dir, settings, body, launcher, profile)


def broker_killed(work_dir: Path, launcher: tuple[str, ...] = DEFAULT_LAUNCHER,
        profile: str = "kafka-4.2") -> ScenarioResult:
    """The broker killed -9 and restarted: accepted records never come back, held ones do, the log is intact.

    Every second record of the first poll is accepted, so the share-partitions reload with acknowledged
    records and holes above their SPSO: their post-restart traces start from that state (SP-26) and are judged.
    """
    def body(broker: EmbeddedBroker) -> str:
        create_topic(broker.bootstrap, "ledger", 2)
        values = {f"entry-{index}".encode() for index in range(60)}
        produce(broker.bootstrap, "ledger", [(index % 2, None, f"entry-{index}".encode()) for index in range(60)],
                **{"compression.type": "zstd"})
        consumer = share_consumer(broker.bootstrap, "auditors", ["ledger"], explicit=True)
        deadline, batch = time.monotonic() + WAIT_S, []
        while not batch and time.monotonic() < deadline:
            batch = poll_records(consumer)
        check(len(batch) >= 2, f"first poll gave {len(batch)} records")
        accepted = {(message.partition(), message.offset()) for message in batch[1::2]}
        for message in batch[1::2]:
            consumer.acknowledge(message, AcknowledgeType.ACCEPT)
        results = consumer.commit_sync(30)
        check(all(error is None for error in (results or {}).values()), f"acknowledgement failed: {results}")
        held = {(message.partition(), message.offset()) for message in batch[0::2]}
        broker.kill_and_start()
        consumer.close()
        survivor = share_consumer(broker.bootstrap, "auditors", ["ledger"])
        remaining = {(record.partition(), record.offset()) for record in read_plain(broker.bootstrap, "ledger", 2, 60)}
        try:
            delivered = _consume_until([survivor], lambda seen: remaining - accepted <= {(r.partition, r.offset) for r in seen})
        finally:
            survivor.close()
        seen = {(record.partition, record.offset) for record in delivered}
        check(len(remaining) == 60, f"the log holds {len(remaining)} of 60 records after the restart")
        check(not seen & accepted, f"accepted records {sorted(seen & accepted)} were delivered again after the restart")
        check(held <= seen, f"held records {sorted(held - seen)} never came back after the restart")
        check(remaining - accepted <= seen, f"{len(remaining - accepted - seen)} unacknowledged records never delivered")
        stored = {record.value() for record in read_plain(broker.bootstrap, "ledger", 2, 60)}
        check(stored == values, "produced values changed across the restart")
        reloaded = _reloaded_partition_traces(broker.trace_dir)
        check(bool(reloaded), "no share-partition trace starts from the state reloaded after the restart (SP-26)")
        return (f"{len(accepted)} accepted before kill -9 never redelivered; {len(held)} held came back; "
                f"60 records intact; {len(reloaded)} reloaded share-partition trace(s) judged")

    return run_scenario("broker-killed", work_dir, FAST_GROUPS, body, launcher, profile)


def _reloaded_partition_traces(trace_dir: Path) -> list[Path]:
    """Share-partition traces headed by a state reloaded from the share coordinator (config.initial_state, SP-26)."""
    return [path for path in sorted(Path(trace_dir).glob("share-partition.*.jsonl"))
            if "initial_state" in json.loads(path.read_bytes().split(b"\n", 1)[0]).get("config", {})]


def _plain_fetch(broker: EmbeddedBroker) -> str:
    create_topic(broker.bootstrap, "events", 2)
    sent, base_ms = {}, 1_700_000_000_123
    for codec in ("none", "lz4", "gzip"):
        records = [(index % 2, f"{codec}-key-{index}".encode(), f"{codec}-{index}".encode()) for index in range(40)]
        produce(broker.bootstrap, "events", records, timestamp_ms=base_ms, **{"compression.type": codec})
        sent.update({value: (key, base_ms + index) for index, (_, key, value) in enumerate(records)})
    received = read_plain(broker.bootstrap, "events", 2, len(sent))
    got = {record.value(): (record.key(), record.timestamp()[1]) for record in received}
    check(got == sent, f"{len(set(sent) - set(got))} records missing, or keys or millisecond timestamps changed")
    offsets = [(record.partition(), record.offset()) for record in received]
    check(len(offsets) == len(set(offsets)), "a plain fetch returned one offset twice")
    return f"{len(sent)} records read back by a plain consumer"


share_groups = portable_scenario(
    "share-groups", _share_groups,
    "Plain, lz4, zstd, gzip and idempotent producers; three share consumers on three partitions, implicit acks.",
    Leaves(share_groups=("billing",), topics=(("orders", 3),)), FAST_GROUPS)
explicit_acknowledgement = portable_scenario(
    "explicit-acknowledgement", _explicit_acknowledgement,
    "Explicit ACCEPT / RELEASE / REJECT: released records come back with delivery count 2, the others never.",
    Leaves(share_groups=("workers",), topics=(("tasks", 1),)), FAST_GROUPS)
plain_fetch = portable_scenario(
    "plain-fetch", _plain_fetch,
    "A plain Consumer (Fetch) reads what plain, lz4 and gzip producers wrote, keys and timestamps intact.",
    Leaves(topics=(("events", 2),)), needs_traces=False)

SCENARIOS: dict[str, Callable[..., ScenarioResult]] = {
    "share-groups": share_groups,
    "explicit-acknowledgement": explicit_acknowledgement,
    "delivery-limit": delivery_limit,
    "consumer-killed": consumer_killed,
    "consumer-frozen": consumer_frozen,
    "broker-killed": broker_killed,
    "plain-fetch": plain_fetch,
}
