"""Kafka's own command-line tools against the reference broker and against Apache Kafka 4.2: the same commands on
the same state, their output compared once normalised.

Both brokers get the same topics and groups from Kafka's Java clients (share groups with a state and without
members, a share group and a classic group with a live member, a KIP-848 group with committed offsets), then
every tool runs against both, in one JVM for the module (oracle/kafka/tools.py), and what each printed (and its
exit status) must be the same: kafka-share-groups (list, describe members, offsets and state, reset-offsets,
delete-offsets, delete), kafka-consumer-groups (the same), kafka-topics (create, describe, list), kafka-configs
(a group's share settings, described and altered), kafka-log-dirs and kafka-features. The normalisation, and
the differences it lets through, are spec/conformance.md's "Kafka's tools" rules: ids, hosts and ports, and
column widths (which follow the ids' lengths) are masked; Kafka's min.insync.replicas topic config (the
reference broker has no replication), the log dir's path, its partitions' sizes (the producer's batching sets
them) and the features' epoch are dropped; kafka-features
may name fewer features on the reference broker, each as Kafka names it. `kafka-topics --alter --partitions`
grows a topic on both (CreatePartitions). A seeded bug in the
reference broker's AlterShareGroupOffsets is caught by the comparison, and `kipcheck kafka run-class` prints
what the module's tool JVM prints. Admin requests the tools never send (groups, topics and partitions no one has)
go to both brokers raw, their errors compared; where Kafka fails, spec/kafka-findings.md says so.

Skipped, with the reason, where Kafka cannot run (no Java 17 with javac, no Maven).
"""

from __future__ import annotations

import difflib
import re
import subprocess
import sys
import time

import pytest

from kipcheck.oracle.conformance.scenarios.clients import create_topic, produce
from kipcheck.oracle.conformance.targets.embedded import GROUP_SETTINGS, EmbeddedBroker
from kipcheck.oracle.conformance.targets.kafka import KAFKA_SETTINGS
from kipcheck.oracle.kafka.java_clients import JavaClients
from kipcheck.oracle.kafka.runtime import KafkaUnavailable
from kipcheck.oracle.kafka.tools import KafkaTools

pytestmark = pytest.mark.slow

SHARE_GROUPS = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"
CONSUMER_GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
TOPICS = "org.apache.kafka.tools.TopicCommand"
CONFIGS = "org.apache.kafka.tools.ConfigCommand"
LOG_DIRS = "org.apache.kafka.tools.LogDirsCommand"
FEATURES = "org.apache.kafka.tools.FeatureCommand"
# Kafka's node id, so that leaders and replicas print alike; fast heartbeats, as the Kafka target's.
REFERENCE_SETTINGS = {"node.id": "1", **GROUP_SETTINGS, "group.share.heartbeat.interval.ms": "1000"}
EARLIEST = {"share.auto.offset.reset": "earliest"}
WAIT_S = 60
# The reference broker with a seeded bug: AlterShareGroupOffsets answers NONE and changes nothing.
RESET_IGNORED = (sys.executable, "-c", "import sys; from kipcheck.impl.broker.share_engine import ShareEngine; "
                 "from kipcheck.model.errors import Error; "
                 "ShareEngine.reset_start = lambda self, group, tp, start_offset, at_ms: Error.NONE; "
                 "from kipcheck.cli import main; sys.exit(main(sys.argv[1:]))", "broker")


@pytest.fixture(scope="module")
def tools(tmp_path_factory):
    try:
        runner = KafkaTools("4.2", tmp_path_factory.mktemp("tools") / "tools.log")
    except KafkaUnavailable as reason:
        pytest.skip(f"Apache Kafka cannot run here: {reason}")
    yield runner
    runner.program.stop()


@pytest.fixture(scope="module")
def brokers(tools, start_kafka_once, tmp_path_factory):
    """{"reference": bootstrap, "kafka": bootstrap}, each holding the same topics and groups."""
    reference = EmbeddedBroker(tmp_path_factory.mktemp("reference"), REFERENCE_SETTINGS)
    reference.start()
    kafka = start_kafka_once("4.2", **{name.replace(".", "_"): value for name, value in KAFKA_SETTINGS.items()})
    clients = []
    try:
        for bootstrap in (reference.bootstrap, kafka.bootstrap):
            clients.append(_prepare(bootstrap, tmp_path_factory.mktemp("clients")))
        yield {"reference": reference.bootstrap, "kafka": kafka.bootstrap}
    finally:
        for java in clients:
            java.stop()
        reference.stop()


def _prepare(bootstrap: str, work_dir) -> JavaClients:
    """Topics, and groups made by Kafka's Java clients; the clients of the live groups stay in the JVM returned."""
    create_topic(bootstrap, "orders", 2)
    create_topic(bootstrap, "refunds", 1)
    produce(bootstrap, "orders", [(index % 2, None, f"order-{index}".encode()) for index in range(10)])
    produce(bootstrap, "refunds", [(0, None, f"refund-{index}".encode()) for index in range(4)])
    java = JavaClients(bootstrap, work_dir / "java.log")
    for group in ("auditors", "watchers"):
        java.set_group_config(group, EARLIEST)
    auditor = java.share_consumer("auditor", "auditors", ["orders"], {"share.acknowledgement.mode": "explicit"})
    seen, deadline = set(), time.monotonic() + WAIT_S
    while len(seen) < 10 and time.monotonic() < deadline:   # the first three of each partition accepted
        records = [record for record in auditor.poll(300) if record.delivery_count == 1]
        auditor.acknowledge([record for record in records if record.offset < 3], "ACCEPT")
        auditor.acknowledge([record for record in records if record.offset >= 3], "RELEASE")
        seen |= {(record.partition, record.offset) for record in records}
    auditor.commit_sync()
    auditor.close()
    billing = java.consumer("billing", "billing", ["orders", "refunds"], {"group.protocol": "consumer"})
    _poll(billing, 14)
    billing.commit_sync()
    billing.close()
    _poll(java.share_consumer("watcher", "watchers", ["orders"]), 1)
    _poll(java.consumer("ledger", "ledger", ["refunds"], {"group.protocol": "classic"}), 4)
    return java


def _share_state(bootstrap: str, group: str, work_dir) -> None:
    """`group` has a state on both partitions of "orders", every record accepted, and no members."""
    with JavaClients(bootstrap, work_dir / f"{group}.log") as java:
        java.set_group_config(group, EARLIEST)
        consumer = java.share_consumer(group, group, ["orders"])
        _poll(consumer, 10)
        consumer.commit_sync()
        consumer.close()


def _poll(consumer, count: int) -> list:
    seen, deadline = [], time.monotonic() + WAIT_S
    while len(seen) < count and time.monotonic() < deadline:
        seen += consumer.poll(300)
    assert len(seen) >= count, f"{consumer.name} got {len(seen)} of {count} records"
    return seen


# -- normalising -------------------------------------------------------------------------------------------------

def normalise(text: str) -> str:
    """Mask what differs between any two brokers: ids, hosts and ports, the log dir and its partitions' sizes, the
    features' epoch, and the column widths the ids' lengths set; drop Kafka's min.insync.replicas topic config."""
    text = re.sub(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", "<id>", text)
    text = re.sub(r"(?<![\w.-])[A-Za-z0-9_-]{22}(?![\w.-])", "<id>", text)   # Kafka's Uuid.toString()
    text = re.sub(r"127\.0\.0\.1:\d+", "<host:port>", text)
    text = re.sub(r'"logDir":"[^"]*"', '"logDir":"<dir>"', text)
    text = re.sub(r'"size":\d+', '"size":<bytes>', text)   # how the producer batched its records
    text = re.sub(r"Epoch: \d+", "Epoch: <epoch>", text)
    text = re.sub(r"min\.insync\.replicas=1,?", "", text)
    return re.sub(r"[ \t]+", " ", text)


def compare(tools: KafkaTools, brokers: dict, steps: list[tuple[str, str]]) -> None:
    """Run each step against both brokers, in order; every normalised output and exit status must be the same."""
    differences = []
    for tool, arguments in steps:
        runs = {name: tools.run(tool, "--bootstrap-server", bootstrap, *arguments.split())
                for name, bootstrap in brokers.items()}
        printed = {name: normalise(f"exit {run.exit}\n{run.out}") for name, run in runs.items()}
        if printed["reference"] != printed["kafka"]:
            diff = "\n".join(difflib.unified_diff(printed["kafka"].splitlines(), printed["reference"].splitlines(),
                                                  "kafka", "reference", lineterm="", n=1))
            differences.append(f"{tool.rsplit('.', 1)[1]} {arguments}:\n{diff}\n"
                               f"reference stderr: {runs['reference'].err.strip()[:600]}")
    assert not differences, "\n\n".join(differences)


# -- the tools ---------------------------------------------------------------------------------------------------

SHARE_GROUP_STEPS = [
    (SHARE_GROUPS, "--list"),
    (SHARE_GROUPS, "--list --state"),
    (SHARE_GROUPS, "--describe --group auditors"),
    (SHARE_GROUPS, "--describe --group auditors --offsets"),
    (SHARE_GROUPS, "--describe --group auditors --members"),
    (SHARE_GROUPS, "--describe --group auditors --state"),
    (SHARE_GROUPS, "--describe --group watchers --members"),
    (SHARE_GROUPS, "--describe --group watchers --state"),
    (SHARE_GROUPS, "--describe --group nobody"),
    (SHARE_GROUPS, "--reset-offsets --group auditors --topic orders --to-earliest --dry-run"),
    (SHARE_GROUPS, "--reset-offsets --group auditors --topic orders:1 --to-latest --execute"),
    (SHARE_GROUPS, "--describe --group auditors --offsets"),
    (SHARE_GROUPS, "--reset-offsets --group auditors --topic orders --to-datetime 2020-01-01T00:00:00.000 --execute"),
    (SHARE_GROUPS, "--describe --group auditors --offsets"),
    (SHARE_GROUPS, "--reset-offsets --group watchers --topic orders --to-latest --execute"),
    (SHARE_GROUPS, "--reset-offsets --group auditors --topic nothing --to-earliest --execute"),
    (SHARE_GROUPS, "--delete-offsets --group watchers --topic orders"),
    (SHARE_GROUPS, "--delete-offsets --group auditors --topic orders"),
    (SHARE_GROUPS, "--describe --group auditors --offsets"),
    (SHARE_GROUPS, "--delete --group watchers"),
    (SHARE_GROUPS, "--delete --group auditors"),
    (SHARE_GROUPS, "--delete --group nobody"),
    (SHARE_GROUPS, "--list"),
]


def test_share_groups_tool(tools, brokers):
    """kafka-share-groups.sh: DescribeShareGroupOffsets (with its lag), AlterShareGroupOffsets,
    DeleteShareGroupOffsets and DeleteGroups, refused while the group has a member, as Kafka refuses them."""
    compare(tools, brokers, SHARE_GROUP_STEPS)


CONSUMER_GROUP_STEPS = [
    (CONSUMER_GROUPS, "--list"),
    (CONSUMER_GROUPS, "--list --type"),
    (CONSUMER_GROUPS, "--describe --group billing"),
    (CONSUMER_GROUPS, "--describe --group billing --members"),
    (CONSUMER_GROUPS, "--describe --group billing --state"),
    (CONSUMER_GROUPS, "--describe --group ledger"),
    (CONSUMER_GROUPS, "--describe --group ledger --members"),
    (CONSUMER_GROUPS, "--describe --group ledger --state"),
    (CONSUMER_GROUPS, "--reset-offsets --group billing --topic orders --to-earliest --execute"),
    (CONSUMER_GROUPS, "--reset-offsets --group ledger --topic refunds --to-earliest --execute"),
    (CONSUMER_GROUPS, "--describe --group billing --offsets"),
    (CONSUMER_GROUPS, "--delete-offsets --group billing --topic orders"),
    (CONSUMER_GROUPS, "--describe --group billing --offsets"),
    (CONSUMER_GROUPS, "--delete --group ledger"),
    (CONSUMER_GROUPS, "--delete --group billing"),
    (CONSUMER_GROUPS, "--delete --group nobody"),
    (CONSUMER_GROUPS, "--list"),
]


def test_consumer_groups_tool(tools, brokers):
    """kafka-consumer-groups.sh on a KIP-848 group without members and a classic group with one; the group is
    deleted while it holds offsets (spec/consumer-groups.md: an empty group without offsets is forgotten at once
    here, at Kafka's next cleanup there)."""
    compare(tools, brokers, CONSUMER_GROUP_STEPS)


def test_topics_configs_log_dirs_and_features_tools(tools, brokers):
    """kafka-topics.sh (CreateTopics' configs, DescribeTopicPartitions), kafka-configs.sh on a group's share
    settings, kafka-log-dirs.sh (DescribeLogDirs) and kafka-features.sh (the features ApiVersions tells,
    UpdateFeatures)."""
    compare(tools, brokers, [
        (TOPICS, "--create --topic made --partitions 3"),
        (TOPICS, "--create --topic made --partitions 3"),
        (TOPICS, "--describe --topic made"),
        (TOPICS, "--describe --topic nothing"),
        (TOPICS, "--list --exclude-internal"),
        (CONFIGS, "--describe --entity-type groups --entity-name watchers"),
        (CONFIGS, "--alter --entity-type groups --entity-name watchers --add-config share.record.lock.duration.ms=20000"),
        (CONFIGS, "--describe --entity-type groups --entity-name watchers"),
        (CONFIGS, "--alter --entity-type groups --entity-name watchers --add-config share.record.lock.duration.ms=1"),
        (CONFIGS, "--alter --entity-type groups --entity-name watchers --delete-config share.record.lock.duration.ms"),
        (CONFIGS, "--describe --entity-type groups --entity-name watchers"),
        (LOG_DIRS, "--describe --topic-list orders,refunds"),
        (FEATURES, "upgrade --feature share.version=1"),
        (FEATURES, "upgrade --feature nothing.version=1"),
    ])
    reference, kafka = (tools.run(FEATURES, "--bootstrap-server", brokers[name], "describe") for name in
                        ("reference", "kafka"))
    named = normalise(reference.out).splitlines()
    assert reference.exit == 0 and named, reference.err
    assert set(named) <= set(normalise(kafka.out).splitlines()), f"{reference.out}\nKafka:\n{kafka.out}"
    assert {line.split()[1] for line in named} == {"group.version", "share.version"}


def test_alter_partitions_tool(tools, brokers):
    """kafka-topics.sh --alter --partitions (CreatePartitions): grown, refused when not an increase, described."""
    compare(tools, brokers, [
        (TOPICS, "--create --topic grown --partitions 1"),
        (TOPICS, "--alter --topic grown --partitions 3"),
        (TOPICS, "--alter --topic grown --partitions 2"),
        (TOPICS, "--alter --topic nothing --partitions 2"),
        (TOPICS, "--describe --topic grown"),
    ])


def test_a_reset_the_reference_broker_answers_but_ignores_is_caught(tools, brokers, tmp_path):
    """The comparison can fail: the same reset and describe that match on the reference broker differ on one whose
    AlterShareGroupOffsets answers NONE and changes nothing."""
    steps = [(SHARE_GROUPS, "--reset-offsets --group resetters --topic orders --to-earliest --execute"),
             (SHARE_GROUPS, "--describe --group resetters --offsets")]
    broken = EmbeddedBroker(tmp_path / "broken", REFERENCE_SETTINGS, launcher=RESET_IGNORED)
    broken.start()
    try:
        create_topic(broken.bootstrap, "orders", 2)
        produce(broken.bootstrap, "orders", [(index % 2, None, f"order-{index}".encode()) for index in range(10)])
        for bootstrap in (brokers["reference"], brokers["kafka"], broken.bootstrap):
            _share_state(bootstrap, "resetters", tmp_path)
        compare(tools, brokers, steps)
        with pytest.raises(AssertionError, match="LAG"):
            compare(tools, {"reference": broken.bootstrap, "kafka": brokers["kafka"]}, steps)
    finally:
        broken.stop()


def test_the_normalisation_keeps_what_tells_brokers_apart():
    kafka = "GROUP TOPIC PARTITION START-OFFSET LAG\nauditors orders 0 3 2"
    assert normalise(kafka) != normalise(kafka.replace(" 3 2", " 3 1"))
    assert normalise(kafka) != normalise(kafka.replace("orders", "refunds"))
    assert normalise("Leader: 1 Replicas: 1") != normalise("Leader: 0 Replicas: 0")


def test_run_class_prints_what_the_tool_jvm_prints(tools, brokers):
    """`kipcheck kafka run-class`, one JVM per tool as a user runs it, against the reference broker."""
    arguments = [SHARE_GROUPS, "--bootstrap-server", brokers["reference"], "--list"]
    alone = subprocess.run([sys.executable, "-m", "kipcheck", "kafka", "run-class", *arguments],
                           capture_output=True, text=True, timeout=120)
    assert (alone.returncode, alone.stdout) == (0, tools.run(*arguments).out)


# What an admin client may send that the tools never do, to both brokers: each answer's errors the same. Not sent:
# a partition past the topic's count, which Kafka 4.2.2 answers NONE, as the reference broker does, after 30 s
# (spec/kafka-findings.md).
ODD_ADMIN_REQUESTS = {
    "alter below the log start": (91, {"group_id": "oddities", "topics": [
        {"topic_name": "orders", "partitions": [{"partition_index": 0, "start_offset": -5}]}]}),
    "alter past the log end": (91, {"group_id": "oddities", "topics": [
        {"topic_name": "orders", "partitions": [{"partition_index": 1, "start_offset": 1000}]}]}),
    "alter a partition the topic lacks": (91, {"group_id": "oddities", "topics": [
        {"topic_name": "orders", "partitions": [{"partition_index": 7, "start_offset": 0}]}]}),
    "alter an unknown topic": (91, {"group_id": "oddities", "topics": [
        {"topic_name": "nothing", "partitions": [{"partition_index": 0, "start_offset": 0}]}]}),
    "alter an unknown group": (91, {"group_id": "newcomers", "topics": [
        {"topic_name": "orders", "partitions": [{"partition_index": 0, "start_offset": 0}]}]}),
    "alter an empty group id": (91, {"group_id": "", "topics": []}),
    "delete an unknown topic's offsets": (92, {"group_id": "oddities", "topics": [{"topic_name": "nothing"}]}),
    "delete an unknown group's offsets": (92, {"group_id": "nobody", "topics": [{"topic_name": "orders"}]}),
    "describe the offsets of the group an alter made": (90, {"groups": [{"group_id": "newcomers", "topics": None}]}),
    "describe the group an alter made": (77, {"group_ids": ["newcomers"], "include_authorized_operations": False}),
    "alter a consumer group's id": (91, {"group_id": "committers", "topics": [
        {"topic_name": "orders", "partitions": [{"partition_index": 0, "start_offset": 0}]}]}),
    "describe partition -1": (90, {"groups": [{"group_id": "oddities", "topics": [
        {"topic_name": "orders", "partitions": [-1]}]}]}),
    "describe an unknown topic": (90, {"groups": [{"group_id": "oddities", "topics": [
        {"topic_name": "nothing", "partitions": [0]}]}]}),
    "describe an unknown group": (90, {"groups": [{"group_id": "nobody", "topics": None}]}),
}


LATEST_VERSIONS = {77: 1, 90: 1, 91: 0, 92: 0}
# Where Kafka 4.2.2 fails (spec/kafka-findings.md): partition -1 throws in its group coordinator, the reference
# broker answers it as any partition without a state.
KAFKA_BUGS = {"describe partition -1": ([("error_code", -1)], [("error_code", 0), ("start_offset", -1), ("lag", -1),
                                                                ("error_code", 0)])}


def errors_of(answer) -> list:
    """Every error code in an answer, in order, and its start offsets (what a request changed or read)."""
    if isinstance(answer, (list, tuple)):
        return [found for element in answer for found in errors_of(element)]
    if not hasattr(answer, "__dataclass_fields__"):
        return []
    fields = {name: getattr(answer, name) for name in answer.__dataclass_fields__}
    return [(name, value if name == "group_state" else int(value)) for name, value in fields.items()
            if name in ("error_code", "start_offset", "lag", "group_state")] + \
        [found for name, value in fields.items() for found in errors_of(value) if name != "error_code"]


def test_odd_share_group_offsets_requests_are_answered_as_kafka_answers(brokers, tmp_path):
    """AlterShareGroupOffsets, DeleteShareGroupOffsets and DescribeShareGroupOffsets with what the tools never
    send (a start below the log start or past its end, partitions and topics that do not exist, unknown and empty
    group ids): the same errors, and the same start offsets read back, on both brokers."""
    from kipcheck.oracle.conformance.probes.raw_client import RawClient

    answers = {}
    for name, bootstrap in brokers.items():
        _share_state(bootstrap, "oddities", tmp_path)
        client = RawClient(int(bootstrap.rsplit(":", 1)[1]))
        try:
            committed = client.request(8, 8, group_id="committers", generation_id_or_member_epoch=-1, member_id="",
                                       group_instance_id=None, topics=[{"name": "orders", "partitions": [
                                           {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                                            "committed_metadata": None}]}])
            assert errors_of(committed) == [("error_code", 0)], committed
            answers[name] = {case: errors_of(client.request(api_key, LATEST_VERSIONS[api_key], **body))
                             for case, (api_key, body) in ODD_ADMIN_REQUESTS.items()}
            answers[name]["read back"] = errors_of(client.request(90, 1, groups=[
                {"group_id": "oddities", "topics": None}]))
        finally:
            client.close()
    different = {case: (answers["kafka"][case], answers["reference"][case]) for case in answers["kafka"]
                 if answers["kafka"][case] != answers["reference"][case]}
    assert different == KAFKA_BUGS, "\n".join(f"{case}: Kafka {kafka}, reference {reference}"
                                              for case, (kafka, reference) in different.items())
