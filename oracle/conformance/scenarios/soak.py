"""Soak: real clients against the reference broker while it is killed -9 in a loop and its disk fills and empties.

    with small_disk(work_dir / "data", 8 << 20):           # a tmpfs of 8 MiB (root only: DiskUnavailable)
        result = run_soak(work_dir, SoakPlan(duration_s=60, seed=1))
    print(result.summary())                                # result.ok: nothing acknowledged was lost

One idempotent Producer writes numbered records at a steady rate; ShareConsumers
(implicit acknowledgement) poll and call commit_sync after every poll, whose
per-partition answer says which acknowledgements the broker accepted. Meanwhile
a killer thread kills the broker with SIGKILL at seeded-random moments and
restarts it on the same dirs and port, and a filler thread fills the data dir's
filesystem to the last byte with a ballast file, holds it full (past its drawn
time until the broker has refused a write: a broker down or restarting, or a
producer waiting to reconnect, would otherwise let a whole cycle pass
unnoticed), then deletes it.

At the end the producer is flushed, the consumers close, the broker is killed
once more and restarted, and the records are read back with a plain Consumer
(Fetch) and drained from the share group by a fresh ShareConsumer. Counted:
- produced, acknowledged (producer delivery success), read back;
- lost: acknowledged but not read back (must be 0);
- delivered to the share group (distinct records), redelivered (deliveries
  beyond a record's first), share-acknowledged (commit_sync said so);
- acknowledgements lost: share-acknowledged records the final drain delivered
  again (must be 0); never delivered: acknowledged records the share group never
  got (must be 0).
The summary names the first records of each kind of loss, to look up in the
data dir and the broker's log. The run is reproducible in its choices from
`seed` (timings vary with the load).
"""

from __future__ import annotations

import contextlib
import os
import random
import subprocess
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, ShareConsumer, TopicPartition

from kipcheck.oracle.check import Verdict
from kipcheck.oracle.conformance.scenarios.clients import QUIET, create_topic
from kipcheck.oracle.conformance.targets.embedded import BrokerFailed, EmbeddedBroker
from kipcheck.oracle.conformance.scenarios.runner import judge_traces

TOPIC, GROUP = "soak", "soak-group"
BALLAST_CHUNK_BYTES = 64 * 1024
IDLE_S = 5.0           # the final reads stop after this long with nothing new (by default)
FINAL_READ_S = 120.0   # and in any case after this long
FULL_UNTIL_REFUSED_S = 10.0   # a full disk is held at most this long waiting for the broker to refuse a write
EXAMPLES_MAX = 10      # records the summary names per kind of loss (to look them up in the data and the log)


class DiskUnavailable(RuntimeError):
    """A small filesystem cannot be mounted here (not root, or mount not permitted)."""


@contextlib.contextmanager
def small_disk(path: Path, size_bytes: int):
    """A tmpfs of `size_bytes` mounted at `path` for the duration of the block."""
    if os.geteuid() != 0:
        raise DiskUnavailable("mounting a tmpfs needs root")
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_bytes}", "tmpfs", str(path)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        raise DiskUnavailable(f"mount -t tmpfs failed: {mounted.stderr.strip() or mounted.returncode}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


@dataclass(frozen=True)
class SoakPlan:
    duration_s: float = 60.0
    records_per_s: int = 500
    partitions: int = 3
    consumers: int = 2
    kill_every_s: tuple[float, float] = (3.0, 8.0)
    disk_full_for_s: tuple[float, float] = (1.0, 3.0)
    disk_free_for_s: tuple[float, float] = (2.0, 5.0)
    seed: int = 0
    settings: dict = field(default_factory=lambda: {
        "share.auto.offset.reset": "earliest", "group.share.heartbeat.interval.ms": "1000",
        "group.share.record.lock.duration.ms": "15000"})


@dataclass
class SoakResult:
    plan: SoakPlan
    produced: int = 0
    acknowledged: int = 0
    read_back: int = 0
    lost: int = 0
    share_delivered: int = 0
    redelivered: int = 0
    share_acknowledged: int = 0
    acknowledgements_lost: int = 0
    never_delivered: int = 0
    kills: int = 0
    disk_full_cycles: int = 0
    storage_errors: int = 0
    traces: list[Verdict] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    examples: list[str] = field(default_factory=list)   # "lost: record-12, ...", one line per kind of loss
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.lost == 0 and self.acknowledgements_lost == 0 and self.never_delivered == 0 \
            and self.acknowledged > 0 and not self.errors

    def summary(self) -> str:
        return "\n".join([
            f"soak: {self.seconds:.0f} s, seed {self.plan.seed}, {self.kills} kill -9, "
            f"{self.disk_full_cycles} disk-full cycles ({self.storage_errors} writes refused by the broker)",
            f"records produced {self.produced}, acknowledged {self.acknowledged}, read back {self.read_back}, "
            f"lost {self.lost} (must be 0)",
            f"share group: delivered {self.share_delivered} distinct, redelivered {self.redelivered}, "
            f"acknowledged {self.share_acknowledged}, acknowledgements lost {self.acknowledgements_lost} (must be 0), "
            f"acknowledged records never delivered {self.never_delivered} (must be 0)",
            *self.examples,
            f"traces: {sum(verdict.status == 'ok' for verdict in self.traces)} of {len(self.traces)} pass "
            "kipcheck check (a retriable failure that changes nothing is not yet a clause: not judged here)",
            *self.errors,
            "verdict: " + ("nothing acknowledged was lost" if self.ok else "FAILED")])


class Deliveries:
    """What the share consumers saw, shared by their threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts: Counter[bytes] = Counter()
        self.acknowledged: set[bytes] = set()

    def saw(self, values: list[bytes]) -> None:
        with self.lock:
            self.counts.update(values)

    def accepted(self, values: list[bytes]) -> None:
        with self.lock:
            self.acknowledged.update(values)


def run_soak(work_dir: Path, plan: SoakPlan) -> SoakResult:
    """Run the soak in `work_dir` (its `data` dir should be a small_disk); see the module docstring."""
    started, result = time.monotonic(), SoakResult(plan)
    rng = random.Random(plan.seed)
    broker = EmbeddedBroker(work_dir, plan.settings)
    broker.start()
    stop, deliveries = threading.Event(), Deliveries()
    try:
        create_topic(broker.bootstrap, TOPIC, plan.partitions)
        producer = SoakProducer(broker.bootstrap)
        workers = [threading.Thread(target=producer.run, args=(stop, plan.records_per_s)),
                   threading.Thread(target=_kill_loop, args=(broker, plan, random.Random(rng.random()), stop, result)),
                   threading.Thread(target=_fill_loop, args=(broker, plan, random.Random(rng.random()), stop, result))]
        workers += [threading.Thread(target=consume_loop, args=(broker.bootstrap, deliveries, stop))
                    for _ in range(plan.consumers)]
        for worker in workers:
            worker.start()
        stop.wait(plan.duration_s)
        stop.set()
        for worker in workers:
            worker.join(FINAL_READ_S)
        producer.finish()
        broker.kill_and_start()
        tally(result, broker.bootstrap, producer, deliveries)
    finally:
        broker.stop()
    result.storage_errors = storage_refusals(broker)
    result.traces = judge_traces(broker.trace_dir)
    result.seconds = time.monotonic() - started
    return result


def tally(result: SoakResult, bootstrap: str, producer: "SoakProducer", deliveries: Deliveries,
          idle_s: float = IDLE_S) -> None:
    """Read everything back (plain Fetch, then a fresh share group member) and count into `result`."""
    if producer.fatal is not None:
        result.errors.append(f"the producer failed: {producer.fatal}")
    acknowledged = set(producer.acknowledged)
    stored = read_back(bootstrap, result.plan.partitions, acknowledged, idle_s)
    drained = drain_share_group(bootstrap, idle_s)
    deliveries.saw(drained)
    lost, acknowledgements_lost = acknowledged - stored, set(drained) & deliveries.acknowledged
    never_delivered = acknowledged - set(deliveries.counts)
    result.produced, result.acknowledged = producer.produced, len(acknowledged)
    result.read_back, result.lost = len(stored), len(lost)
    result.share_delivered = len(deliveries.counts)
    result.redelivered = sum(deliveries.counts.values()) - len(deliveries.counts)
    result.share_acknowledged = len(deliveries.acknowledged)
    result.acknowledgements_lost = len(acknowledgements_lost)
    result.never_delivered = len(never_delivered)
    for kind, values in (("lost", lost), ("acknowledgements lost", acknowledgements_lost),
                         ("never delivered", never_delivered)):
        if values:
            named = ", ".join(value.decode(errors="replace").rstrip(".") for value in sorted(values)[:EXAMPLES_MAX])
            result.examples.append(f"{kind}: {named}{', ...' if len(values) > EXAMPLES_MAX else ''}")


class SoakProducer:
    """One idempotent Producer writing "record-N" (padded to `value_bytes`) over the partitions at a steady rate."""

    def __init__(self, bootstrap: str, value_bytes: int = 0):
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5,
                                  "message.timeout.ms": 300_000, **QUIET})
        self.value_bytes = value_bytes
        self.produced = 0
        self.acknowledged: list[bytes] = []
        self.failed = 0
        self.fatal: str | None = None   # librdkafka's fatal error, if the producer had one

    def _delivered(self, error, message) -> None:
        if error is None:
            self.acknowledged.append(message.value())
        else:
            self.failed += 1

    def run(self, stop: threading.Event, records_per_s: int, limit: int | None = None) -> None:
        """Produce until `stop` (at most `limit` records), serving delivery reports; `finish` waits for the rest."""
        started = time.monotonic()
        try:
            while not stop.is_set():
                self._produce_due(min(int((time.monotonic() - started) * records_per_s), limit or 1 << 62))
                self.producer.poll(0.01)
        except KafkaException as error:   # fatal (an idempotent producer's sequence lost): reported
            self.fatal = str(error)

    def _produce_due(self, due: int) -> None:
        while self.produced < due:
            value = f"record-{self.produced}".encode().ljust(self.value_bytes, b".")
            try:
                self.producer.produce(TOPIC, value=value, on_delivery=self._delivered)
            except BufferError:
                return
            self.produced += 1

    def finish(self) -> None:
        """Wait for every record's outcome (the broker is up: the killer restarts it before it stops)."""
        if self.fatal is None:
            self.producer.flush(FINAL_READ_S)


def consume_loop(bootstrap: str, deliveries: Deliveries, stop: threading.Event) -> None:
    """A ShareConsumer of the group until `stop`: each poll's records seen, then accepted where commit_sync says."""
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": GROUP, **QUIET})
    consumer.subscribe([TOPIC])
    while not stop.is_set():
        try:
            messages = [message for message in consumer.poll(0.5) if message.error() is None]
            deliveries.saw([message.value() for message in messages])
            if messages:
                answers = consumer.commit_sync(15) or {}
                ok = {(part.topic, part.partition) for part, error in answers.items() if error is None}
                deliveries.accepted([message.value() for message in messages
                                     if (message.topic(), message.partition()) in ok])
        except KafkaException:
            continue  # the broker is down, or answered a retriable error: poll again
    with contextlib.suppress(KafkaException):
        consumer.close()


def _kill_loop(broker: EmbeddedBroker, plan: SoakPlan, rng: random.Random, stop: threading.Event,
               result: SoakResult) -> None:
    while not stop.wait(rng.uniform(*plan.kill_every_s)):
        broker.kill()
        result.kills += 1
        try:
            broker.start()
        except BrokerFailed as error:
            result.errors.append(f"restart {result.kills} failed: {error}")
            stop.set()


def _fill_loop(broker: EmbeddedBroker, plan: SoakPlan, rng: random.Random, stop: threading.Event,
               result: SoakResult) -> None:
    ballast = broker.data_dir / "ballast"
    while not stop.wait(rng.uniform(*plan.disk_free_for_s)):
        refused, deadline = storage_refusals(broker), time.monotonic() + FULL_UNTIL_REFUSED_S
        fill(ballast)
        result.disk_full_cycles += 1
        stop.wait(rng.uniform(*plan.disk_full_for_s))
        while storage_refusals(broker) == refused and time.monotonic() < deadline and not stop.wait(0.1):
            pass   # not refused yet: see the module docstring
        ballast.unlink()
    ballast.unlink(missing_ok=True)


def storage_refusals(broker: EmbeddedBroker) -> int:
    """The writes the broker refused so far, every start together (its log names each one)."""
    log = broker.log_path.read_text(errors="replace") if broker.log_path.exists() else ""
    return log.count(" not stored: ") + log.count(" not written: ")


def fill(path: Path) -> int:
    """Write zeros to `path` until its filesystem is full; returns the bytes written."""
    written = 0
    chunk = bytes(BALLAST_CHUNK_BYTES)
    with open(path, "wb", buffering=0) as file:
        while True:
            try:
                count = file.write(chunk)   # the last one is short: the filesystem's last page
            except OSError:
                return written
            if not count:
                return written
            written += count


def read_back(bootstrap: str, partitions: int, expected: set[bytes], idle_s: float = IDLE_S) -> set[bytes]:
    """Every value in the topic (plain Fetch from offset 0), until `expected` are all seen or nothing new comes."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "soak-reader", "enable.auto.commit": False,
                         **QUIET})
    consumer.assign([TopicPartition(TOPIC, partition, 0) for partition in range(partitions)])
    seen: set[bytes] = set()
    try:
        _read_until(lambda: [message.value() for message in consumer.consume(1000, 0.5) if message.error() is None],
                    seen, expected, idle_s)
    finally:
        consumer.close()
    return seen


def drain_share_group(bootstrap: str, idle_s: float = IDLE_S) -> list[bytes]:
    """What a fresh ShareConsumer of the group gets (and accepts) until nothing new comes."""
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": GROUP, **QUIET})
    consumer.subscribe([TOPIC])
    delivered: list[bytes] = []

    def poll() -> list[bytes]:
        with contextlib.suppress(KafkaException):
            values = [message.value() for message in consumer.poll(0.5) if message.error() is None]
            delivered.extend(values)
            return values
        return []

    try:
        _read_until(poll, set(), None, idle_s)
    finally:
        with contextlib.suppress(KafkaException):
            consumer.close()
    return delivered


def _read_until(read, seen: set[bytes], expected: set[bytes] | None, idle_s: float) -> None:
    """Call `read` until every `expected` value is in `seen` (None: never), `idle_s` pass with nothing new,
    or FINAL_READ_S pass."""
    deadline, idle_since = time.monotonic() + FINAL_READ_S, time.monotonic()
    while time.monotonic() < deadline and time.monotonic() - idle_since < idle_s:
        values = set(read()) - seen
        if values:
            seen |= values
            idle_since = time.monotonic()
        if expected is not None and expected <= seen:
            return
