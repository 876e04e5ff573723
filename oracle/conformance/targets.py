"""What `kipcheck conform --target` points at: a broker address, its share settings, and what the runner may do to it.

    target = open_target("embedded", work_dir, profile="kafka-4.2")   # the reference broker, started here
    target = open_target("wire://10.0.0.5:9092", work_dir, settings={"group.share.record.lock.duration.ms": "15000"})
    target.address            # (host, port)
    target.settings           # BrokerSettings: what the trace headers say the broker runs with
    target.can_restart        # embedded: kill -9 and start again; wire: no
    target.broker_traces()    # the traces the broker wrote itself (embedded), judged beside the probes'
    target.close()
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

from kipcheck.oracle.conformance.embedded import DEFAULT_LAUNCHER, EmbeddedBroker

WIRE = re.compile(r"^wire://(?P<host>[^:/\s]+):(?P<port>\d{1,5})$")
TARGET_FORMS = "embedded, wire://HOST:PORT, librdkafka-mock, reference, python:MODULE:FACTORY"
MOCK = "librdkafka-mock"

# The embedded broker's settings: short locks and small limits, so that expiry, the delivery limit, the in-flight
# limit, the session limit and share-state snapshots are all reached within seconds. Each is within Kafka 4.2's
# ranges (spec SP-45), which the broker holds its settings to under kafka-4.2: the shortest lock Kafka allows needs
# the lowest group.share.min.record.lock.duration.ms, and the in-flight limit is Kafka's least.
EMBEDDED_SETTINGS = {
    "group.share.record.lock.duration.ms": "2000",
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.delivery.count.limit": "3",
    "group.share.partition.max.record.locks": "100",
    "group.share.max.share.sessions": "6",
    "share.coordinator.snapshot.update.records.per.snapshot": "3",
    "share.auto.offset.reset": "earliest",
    "group.share.heartbeat.interval.ms": "1000",
}


class TargetError(ValueError):
    """A target or setting the runner cannot use; the message says why."""


@dataclass(frozen=True)
class BrokerSettings:
    """The broker's share settings, under Kafka's names, as the runner must know them to write trace headers."""

    lock_ms: int = 30_000
    delivery_limit: int = 5
    max_record_locks: int = 2_000
    max_sessions: int = 2_000
    max_group_size: int = 200

    NAMES = {"group.share.record.lock.duration.ms": "lock_ms", "group.share.delivery.count.limit": "delivery_limit",
             "group.share.partition.max.record.locks": "max_record_locks",
             "group.share.max.share.sessions": "max_sessions", "group.share.max.size": "max_group_size"}

    @classmethod
    def from_properties(cls, properties: dict[str, str], profile: str) -> "BrokerSettings":
        values = {}
        for name, raw in properties.items():
            if name not in cls.NAMES:
                continue  # settings the traces do not name (the broker's own business)
            if not str(raw).isdigit() or int(raw) < 1:
                raise TargetError(f"{name} must be a positive integer, found {raw!r}")
            values[cls.NAMES[name]] = int(raw)
        settings = cls(**values)
        if profile == "kafka-4.2" and settings.max_group_size > settings.max_sessions:
            # Kafka 4.2 keeps group.share.max.size at most group.share.max.share.sessions (ShareGroupConfig.validate):
            # a broker given only its session limit holds no larger group.
            settings = replace(settings, max_group_size=settings.max_sessions)
        return settings

    def partition_config(self) -> dict:
        return {"delivery_count_limit": self.delivery_limit, "record_lock_duration_ms": self.lock_ms,
                "max_inflight_records": self.max_record_locks}


def embedded_settings(profile: str) -> dict[str, str]:
    """EMBEDDED_SETTINGS under `profile`: Kafka 4.2 refuses fewer share sessions than members of its largest share
    group (ShareGroupConfig.validate), so under kafka-4.2 the group size is bounded by the session limit too."""
    if profile != "kafka-4.2":
        return EMBEDDED_SETTINGS
    return {**EMBEDDED_SETTINGS, "group.share.max.size": EMBEDDED_SETTINGS["group.share.max.share.sessions"]}


class EmbeddedTarget:
    """The reference broker (or `launcher`, a command that serves the same flags) started on a free loopback port."""

    can_restart = True

    def __init__(self, work_dir: Path, profile: str, launcher: tuple[str, ...] = DEFAULT_LAUNCHER):
        # --trace-state: the broker's own traces show its state after every step, not only at the clean stop.
        settings = embedded_settings(profile)
        self.broker = EmbeddedBroker(work_dir / "broker", settings, profile=profile,
                                     launcher=(*launcher, "--trace-state"))
        self.profile = profile
        self.settings = BrokerSettings.from_properties(settings, profile)
        self.name = "embedded"
        self.broker.start()

    @property
    def address(self) -> tuple[str, int]:
        return "127.0.0.1", self.broker.port

    def restart(self) -> None:
        self.broker.kill()
        self.broker.start()

    def broker_traces(self) -> list[Path]:
        """Stop the broker cleanly (its traces end with a `check` of every share-partition) and list them."""
        self.broker.stop()
        return sorted(self.broker.trace_dir.glob("*.jsonl"))

    def close(self) -> None:
        self.broker.stop()


class WireTarget:
    """Any broker with share groups, reached at HOST:PORT; the runner can neither restart it nor read its traces."""

    can_restart = False

    def __init__(self, host: str, port: int, profile: str, settings: dict[str, str]):
        self.address = (host, port)
        self.profile = profile
        self.settings = BrokerSettings.from_properties(settings, profile)
        self.name = f"wire://{host}:{port}"

    def restart(self) -> None:
        raise TargetError(f"{self.name}: the runner cannot restart a broker it did not start")

    def broker_traces(self) -> list[Path]:
        return []

    def close(self) -> None:
        pass


class MockTarget(WireTarget):
    """confluent-kafka's mock cluster (librdkafka's, `test.mock.num.brokers`), running in this process: an
    independent implementation of share groups. Its differences from Kafka 4.2 are in spec/librdkafka-mock.md."""

    def __init__(self, profile: str, settings: dict[str, str]):
        from confluent_kafka import Producer

        self.cluster = Producer({"test.mock.num.brokers": 1, "log_level": 0})  # the mock lives as long as it does
        broker = next(iter(self.cluster.list_topics(timeout=30).brokers.values()))
        super().__init__(broker.host, broker.port, profile, settings)
        self.name = MOCK


def parse_target(text: str) -> tuple[str, tuple[str, int] | None]:
    """("embedded" | "wire" | "librdkafka-mock" | "python", (host, port) for wire); TargetError names the forms.
    `reference` is python: with impl/share's SharePartition (inprocess.REFERENCE)."""
    if text in ("embedded", MOCK):
        return text, None
    if text == "reference" or text.startswith("python:"):
        return "python", None
    match = WIRE.match(text)
    if match is None:
        raise TargetError(f"unknown target {text!r} (accepted: {TARGET_FORMS})")
    port = int(match["port"])
    if not 0 < port < 65536:
        raise TargetError(f"port {port} of {text!r} is not a TCP port (1..65535)")
    return "wire", (match["host"], port)
