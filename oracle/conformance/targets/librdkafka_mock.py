"""`--target librdkafka-mock`: confluent-kafka's mock cluster (librdkafka's, `test.mock.num.brokers`), in this process.

An independent implementation of share groups, probed over the wire like any
broker the runner cannot restart; its settings reach the runner by --set. Its
differences from Kafka 4.2 are in spec/librdkafka-mock.md.
"""

from __future__ import annotations

from pathlib import Path

from kipcheck.oracle.conformance.targets import Target


class MockTarget(Target):
    forms = {"librdkafka-mock": "confluent-kafka's mock cluster, in this process (its\n"
                                "differences from Kafka 4.2: spec/librdkafka-mock.md)"}

    def open(self, work_dir: Path) -> None:
        from confluent_kafka import Producer

        self.cluster = Producer({"test.mock.num.brokers": 1, "log_level": 0})  # the mock lives as long as it does
        broker = next(iter(self.cluster.list_topics(timeout=30).brokers.values()))
        self.address = (broker.host, broker.port)
