"""`kipcheck record --check` in front of Apache Kafka 4.2, one broker and three: correct traffic, no false alarm.

Clients: confluent-kafka's Producer and ShareConsumer (Kafka's Java clients are not driven here). Kafka starts a
share group at the log end unless its group config says otherwise, so each test sets share.auto.offset.reset
to earliest for its group (IncrementalAlterConfigs, GROUP resource), through the proxy.
"""

import uuid

from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from kipcheck.oracle.check import check_file
from kipcheck.oracle.conformance.scenarios.clients import create_topic, share_consumer
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
    return paths


def test_share_consumers_in_front_of_kafka_pass_with_no_violation(start_kafka, tmp_path):
    """With --poll-spso too: the start offset Kafka's share coordinator stored, judged by SP-47."""
    kafka = start_kafka("4.2")
    with Recording([("127.0.0.1", kafka.ports[0])], tmp_path / "traces", extra=["--poll-spso", "200"]) as recording:
        paths = run_and_judge(recording, 2)
    partitions = [path for path in paths if path.name.startswith("share-partition.")]
    assert len(partitions) == 2
    assert any('"stored_spso"' in path.read_text() for path in partitions), "the stored start offset was read"


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
