"""What the judged fixtures start: the reference broker and Apache Kafka, on free loopback ports.

The reference broker's runner is imported here and nowhere else in this package (one line to follow if
it moves); Apache Kafka's only when a test asks for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kipcheck.oracle.conformance.targets.embedded import BrokerFailed, EmbeddedBroker


class TargetUnavailable(Exception):
    """The target cannot run here (Apache Kafka without Java 17 or Maven); the message says why."""


class TargetFailed(Exception):
    """The target did not start; the message ends with its log."""


@dataclass
class JudgedTarget:
    """What a judged fixture gives its test.

    `bootstrap`: where clients connect. `trace_dir`: the traces judged after the test (the reference
    broker writes its own there; Kafka writes none, so for Kafka what the test and its hooks write).
    `target`: the running system itself, an EmbeddedBroker or a KafkaCluster: `kill()`, `start()`,
    `log_tail()` and the rest.
    """

    target: Any
    trace_dir: Path

    @property
    def bootstrap(self) -> str:
        return self.target.bootstrap

    def stop(self) -> str | None:
        """Stop the target. None, or what the test should hear of: it ended on its own before the test
        did (a test that kills it calls kill(), and start() again if it wants it back), or would not stop."""
        try:
            exit_code = self.target.stop()
        except RuntimeError as error:  # BrokerFailed, KafkaFailed: their message ends with the log
            return str(error)
        if exit_code:
            return f"the broker ended on its own before the test did, exit code {exit_code}:\n{self.target.log_tail()}"
        return None


def start_reference_broker(work_dir: Path, trace_dir: Path, profile: str, settings: dict[str, str]) -> JudgedTarget:
    broker = EmbeddedBroker(work_dir, settings, profile=profile)
    broker.trace_dir = trace_dir
    try:
        broker.start()
    except BrokerFailed as error:
        raise TargetFailed(f"the reference broker did not start: {error}") from None
    return JudgedTarget(broker, trace_dir)


def start_kafka(work_dir: Path, trace_dir: Path, line: str, brokers: int, settings: dict[str, str]) -> JudgedTarget:
    from kipcheck.oracle.kafka.cluster import KafkaCluster, KafkaFailed
    from kipcheck.oracle.kafka.runtime import KafkaUnavailable

    try:
        cluster = KafkaCluster(line, work_dir, settings, brokers=brokers)
    except KafkaUnavailable as reason:
        raise TargetUnavailable(f"Apache Kafka cannot run here: {reason}") from None
    try:
        cluster.start()
    except KafkaFailed as error:
        cluster.kill()
        raise TargetFailed(f"Apache Kafka {line} did not start: {error}") from None
    trace_dir.mkdir(parents=True, exist_ok=True)
    return JudgedTarget(cluster, trace_dir)


def read_back_share_state(kafka: JudgedTarget) -> str | None:
    """Kafka's share coordinator records, read back as share-state traces into `trace_dir/share-state`
    (spec/share-state.md, "Read back from Kafka's records"). None, or why they could not be read."""
    from kipcheck.oracle.kafka.share_state_topic import ReadBackFailed, read_back

    try:
        read_back(kafka.bootstrap, kafka.trace_dir / "share-state", line=kafka.target.runtime.line)
    except ReadBackFailed as error:
        return f"Kafka's share coordinator records could not be read back: {error}"
    return None
