"""`--target kafka:4.2` (or any release line java/pom.xml pins): Apache Kafka itself, started by the runner.

The runner starts a KRaft cluster on free loopback ports (oracle/kafka/cluster.py) with KAFKA_SETTINGS, the
embedded broker's test-sized settings under Kafka's names, so that lock expiry, the delivery limit, the
in-flight limit and the session limit are reached within seconds, and Kafka accepts every one of them. It can
kill -9 the cluster and start it again, so the broker-restart probe runs (XM-1 and SP-26 are observable). Kafka
writes no traces of its own; once the runs are over, what its share coordinator stored in __share_group_state is
read back as share-state traces (oracle/kafka/share_state_topic.py) and judged beside the probes'. Between the
two, the portable client scenarios run on the same cluster, each judged by what its clients saw: confluent-kafka's
(share groups, a plain consumer, a consumer group across a kill -9 of the cluster) and, with --java-clients,
Apache Kafka's own Java clients of that line (scenarios/java.py); their share groups' records are read back with
the probes'.
`kafka:4.2x3` runs a cluster of three brokers: the partition leaders, the group coordinator and the share
coordinator may then sit on different brokers. Without --profile, `kafka:4.4` is judged by the kafka-4.4 profile
and `kafka:4.2` by kafka-4.2.
"""

from __future__ import annotations

import re
from pathlib import Path

from kipcheck.model.profiles import KAFKA_42, PROFILES
from kipcheck.oracle.conformance.targets import BrokerSettings, Target, TargetError, TargetOptions
from kipcheck.oracle.conformance.targets.embedded import EMBEDDED_SETTINGS, GROUP_SETTINGS

KAFKA = re.compile(r"^kafka:(?P<line>\d+\.\d+)(?:x(?P<brokers>\d))?$")
# EMBEDDED_SETTINGS but for share.auto.offset.reset, a group config in Kafka (the probes set it per group), and
# with the floor under the heartbeat interval lowered to meet it (Kafka refuses an interval below its floor);
# and the consumer groups' heartbeat the Java scenarios' embedded brokers have (scenarios/java.py), with its floor.
KAFKA_SETTINGS = {
    **{name: value for name, value in EMBEDDED_SETTINGS.items() if name != "share.auto.offset.reset"},
    "group.share.min.heartbeat.interval.ms": EMBEDDED_SETTINGS["group.share.heartbeat.interval.ms"],
    "group.share.max.size": EMBEDDED_SETTINGS["group.share.max.share.sessions"],
    "group.consumer.heartbeat.interval.ms": GROUP_SETTINGS["group.consumer.heartbeat.interval.ms"],
    "group.consumer.min.heartbeat.interval.ms": GROUP_SETTINGS["group.consumer.heartbeat.interval.ms"],
}


class KafkaTarget(Target):
    forms = {"kafka:LINE[x3]": "Apache Kafka itself (a release line java/pom.xml\n"
                               "pins, e.g. kafka:4.2 or kafka:4.4), started here;\n"
                               "x3: a cluster of three brokers"}
    can_restart = True
    given_by = "started with it"
    broker_traces_label = "the share coordinator's records, read back"
    clients_on_target = True
    client_scenarios_label = "client scenarios (those that run on any broker, on this cluster after the probes)"

    def __init__(self, text: str, options: TargetOptions):
        from kipcheck.oracle.kafka.runtime import KafkaUnavailable, release_lines

        super().__init__(text, options)
        match = KAFKA.match(text)
        self.line, self.brokers = match["line"], int(match["brokers"] or 1)
        try:
            pinned = release_lines()
        except KafkaUnavailable as error:
            raise TargetError(str(error)) from None
        if self.line not in pinned:
            raise TargetError(f"no Apache Kafka {self.line} is pinned in java/pom.xml "
                              f"(pinned: {', '.join(f'kafka:{line}' for line in sorted(pinned))})")
        if self.brokers not in (1, 3):
            raise TargetError(f"{text!r}: a Kafka target runs one broker or three (x3)")
        self.given = dict(KAFKA_SETTINGS)
        self.settings = BrokerSettings.from_properties(self.given, self.profile)
        self.cluster = None

    @classmethod
    def accepts(cls, text: str) -> bool:
        return KAFKA.match(text) is not None

    @classmethod
    def default_profile(cls, text: str) -> str:
        """The profile of the release line it runs (kafka:4.4: kafka-4.4), kafka-4.2 for a line without one."""
        profile = f"kafka-{KAFKA.match(text)['line']}"
        return profile if profile in PROFILES else KAFKA_42

    def open(self, work_dir: Path) -> None:
        from kipcheck.oracle.kafka.cluster import KafkaCluster
        from kipcheck.oracle.kafka.runtime import KafkaUnavailable

        try:
            self.cluster = KafkaCluster(self.line, work_dir / "kafka", KAFKA_SETTINGS, brokers=self.brokers)
        except KafkaUnavailable as error:
            raise TargetError(str(error)) from None
        self.cluster.start()
        self.address = ("127.0.0.1", self.cluster.ports[0])
        self.work_dir = work_dir

    def client_scenarios(self) -> list[str]:
        from kipcheck.oracle.conformance import scenarios

        return scenarios.portable_names()

    def run_client_scenario(self, name: str, work_dir: Path):
        """`name` on this cluster (which it may kill -9 and start again), Java clients of this line."""
        from kipcheck.oracle.conformance import scenarios
        from kipcheck.oracle.conformance.scenarios.runner import SharedBroker

        java = {"client_line": self.line} if name in scenarios.java_names() else {}
        return scenarios.scenario(name)(work_dir, profile=self.profile, **java,
                                        shared=SharedBroker(self.cluster.bootstrap, work_dir, self.restart))

    def broker_traces(self) -> list[Path]:
        """The share coordinator's records, read back as share-state traces (ST clauses)."""
        from kipcheck.oracle.kafka.share_state_topic import read_back

        return read_back(self.cluster.bootstrap, self.work_dir / "share-state", self.line,
                         profile=self.profile).paths

    def restart(self) -> None:
        self.cluster.restart()

    def close(self) -> None:
        if self.cluster is not None:
            self.cluster.stop()
