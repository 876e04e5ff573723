"""`kipcheck record --check` in front of Apache Kafka 4.2, one broker and three: correct traffic, no false alarm.

Clients: confluent-kafka's Producer and ShareConsumer (Kafka's Java clients are not driven here). Kafka starts a
share group at the log end unless its group config says otherwise, so each test sets share.auto.offset.reset
to earliest for its group (IncrementalAlterConfigs, GROUP resource), through the proxy.
"""

import time
import uuid

from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from kipcheck.oracle.check import check_file
from kipcheck.oracle.conformance.scenarios.clients import create_topic, poll_records, produce, share_consumer
from record_support import Recording, share_workload


def earliest(bootstrap: str, group: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def run_and_judge(recording: Recording, partitions: int) -> list:
    topic, group = f"t-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    create_topic(recording.bootstrap, topic, partitions)
    earliest(recording.bootstrap, group)
    implicit = share_consumer(recording.bootstrap, group, [topic])
    explicit = share_consumer(recording.bootstrap, group, [topic], explicit=True)
    done, released = share_workload(recording.bootstrap, topic, [implicit, explicit], explicit, partitions)
    assert len(done) == 100 and released
    assert recording.stop() == 0, recording.output
    assert "VIOLATION" not in recording.output
    paths = sorted(recording.trace_dir.glob("*.jsonl"))
    verdicts = [check_file(path) for path in paths]
    assert all(verdicts), [verdict.summary() for verdict in verdicts if not verdict]
    partitions = [path for path in paths if path.name.startswith("share-partition.")]
    assert all('"view"' not in path.read_text().splitlines()[0] for path in partitions), \
        f"the proxy saw the group born and every member: full views\n{recording.output}"
    acquired = [step for step in recording.acquisitions() if step["observed"]["records"]]
    assert acquired and all("delivered" in step["observed"] for step in acquired), "SP-48 judged on every answer"
    return paths


def test_share_consumers_in_front_of_kafka_pass_with_no_violation(start_kafka, tmp_path):
    kafka = start_kafka("4.2")
    with Recording([("127.0.0.1", kafka.ports[0])], tmp_path / "traces") as recording:
        paths = run_and_judge(recording, 2)
    assert len([path for path in paths if path.name.startswith("share-partition.")]) == 2


def test_a_three_broker_cluster_behind_one_proxy(start_kafka, tmp_path):
    """One listener per broker; Metadata and DescribeCluster name the proxy's three (FindCoordinator its own:
    the consumers' heartbeats cross it); a member's sessions with each leader."""
    kafka = start_kafka("4.2", brokers=3)
    upstreams = [("127.0.0.1", port) for port in kafka.ports]
    with Recording(upstreams, tmp_path / "traces") as recording:
        admin = AdminClient({"bootstrap.servers": recording.bootstrap})
        brokers = admin.list_topics(timeout=30).brokers  # Metadata
        assert sorted(entry.port for entry in brokers.values()) == sorted(recording.ports)
        assert {entry.host for entry in brokers.values()} == {"127.0.0.1"}
        cluster = admin.describe_cluster().result(30)  # DescribeCluster
        assert sorted(node.port for node in cluster.nodes) == sorted(recording.ports)
        paths = run_and_judge(recording, 3)
    sessions = {path.name.split(".")[1] for path in paths if path.name.startswith("share-session.")}
    assert len(sessions) > 1, f"sessions with several brokers: {sessions}"


def test_a_compacted_topic_is_traced_as_partial_views(start_kafka, tmp_path):
    """The proxy does not follow compaction (SP-65): a batch the cleaner removed would look like one Kafka did not
    send (SP-48). Kafka describes the topic's cleanup.policy, and its traces are partial views from the start."""
    kafka = start_kafka("4.2")
    with Recording([("127.0.0.1", kafka.ports[0])], tmp_path / "traces") as recording:
        topic, group = f"t-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
        create_topic(recording.bootstrap, topic, 1, configs={"cleanup.policy": "compact"})
        earliest(recording.bootstrap, group)
        produce(recording.bootstrap, topic, [(0, b"key-%d" % (index % 5), b"v%d" % index) for index in range(20)])
        consumer = share_consumer(recording.bootstrap, group, [topic])
        given, deadline = set(), time.monotonic() + 60
        while len(given) < 20 and time.monotonic() < deadline:
            given.update(message.offset() for message in poll_records(consumer, 0.5))
        consumer.close()
        assert given == set(range(20))
    assert recording.exit_code == 0 and "VIOLATION" not in recording.output, recording.output
    assert f"topic {topic}: partial views (it is compacted" in recording.output
    [path] = recording.traces("share-partition")
    assert '"view": "partial"' in path.read_text().partition("\n")[0]
    assert check_file(path)
