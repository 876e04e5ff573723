"""Apache Kafka itself, started by kipcheck: real clients use it, it survives kill -9, its tools run from its jars.

Skipped, with the reason in pytest's summary, where Java 17 or Maven is missing; `make test` installs both.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

QUIET = {"log_level": 0}


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, **QUIET})
    for value in values:
        producer.produce(topic, value=value)
    assert producer.flush(30) == 0


def share_consume(bootstrap: str, topic: str, group: str, wanted: int) -> list[tuple[int, bytes, int]]:
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    earliest = ConfigResource("GROUP", group, incremental_configs=[ConfigEntry(
        "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([earliest]).values():
        future.result(30)
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, **QUIET})
    consumer.subscribe([topic])
    received = []
    deadline = time.monotonic() + 60
    while len(received) < wanted and time.monotonic() < deadline:
        received += [(message.offset(), message.value(), message.delivery_count())
                     for message in consumer.poll(1.0) if message.error() is None]
    consumer.close()
    return received


def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


@pytest.mark.parametrize("line", ["4.2", "4.4"])
def test_a_share_consumer_reads_what_was_produced_and_it_survives_kill_9(start_kafka, line):
    kafka = start_kafka(line)
    create_topic(kafka.bootstrap, "orders")
    produce(kafka.bootstrap, "orders", [f"order-{number}".encode() for number in range(3)])
    assert share_consume(kafka.bootstrap, "orders", "packers", 3) == [
        (0, b"order-0", 1), (1, b"order-1", 1), (2, b"order-2", 1)]
    kafka.kill()
    assert not kafka.alive()
    kafka.start()
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": "after-restart",
                         "auto.offset.reset": "earliest", **QUIET})
    consumer.subscribe(["orders"])
    values = []
    deadline = time.monotonic() + 60
    while len(values) < 3 and time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is not None and message.error() is None:
            values.append(message.value())
    consumer.close()
    assert values == [b"order-0", b"order-1", b"order-2"]


def test_three_brokers_lead_different_partitions(start_kafka):
    kafka = start_kafka("4.2", brokers=3)
    assert len(kafka.bootstrap.split(",")) == 3
    create_topic(kafka.bootstrap, "spread", partitions=6)
    metadata = AdminClient({"bootstrap.servers": kafka.bootstrap, **QUIET}).list_topics("spread", timeout=30)
    assert len(metadata.brokers) == 3
    assert {partition.leader for partition in metadata.topics["spread"].partitions.values()} == {1, 2, 3}


def test_kafkas_own_tools_run_from_its_jars(start_kafka):
    kafka = start_kafka("4.2")
    create_topic(kafka.bootstrap, "tools")
    produce(kafka.bootstrap, "tools", [b"one"])
    assert share_consume(kafka.bootstrap, "tools", "tool-group", 1) == [(0, b"one", 1)]
    listed = subprocess.run([sys.executable, "-m", "kipcheck", "kafka", "run-class",
                             "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
                             "--bootstrap-server", kafka.bootstrap, "--list"],
                            capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    assert "tool-group" in listed.stdout.split()


def test_the_start_command_says_where_it_listens_and_stops_on_sigterm(tmp_path, start_kafka):
    start_kafka("4.2", name="availability")  # skips here, with the reason, where Kafka cannot run
    process = subprocess.Popen([sys.executable, "-m", "kipcheck", "kafka", "start", "--port", "0",
                                "--data-dir", str(tmp_path / "cli")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    try:
        line = process.stdout.readline()
        assert line.startswith("listening on 127.0.0.1:"), process.stderr.read()
        bootstrap = line.split()[-1]
        create_topic(bootstrap, "cli")
        process.send_signal(signal.SIGTERM)
        assert process.wait(90) == 0
    finally:
        process.kill()


@pytest.mark.parametrize("arguments, message", [
    (["start", "--version", "9.9"], "no Apache Kafka 9.9 is pinned"),
    (["start", "--set", "justaname"], "--set takes NAME=VALUE"),
    (["start", "--brokers", "12"], "--brokers 1 to 9"),
])
def test_bad_arguments_exit_2_with_one_clear_line(arguments, message):
    result = subprocess.run([sys.executable, "-m", "kipcheck", "kafka", *arguments], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr


def test_kipchecks_java_programs_are_built_once_and_again_when_a_source_changes(tmp_path, monkeypatch):
    """java/src compiled by Maven against a pinned line (here from a fresh copy of java/, as on a new machine)."""
    import os
    import shutil

    from kipcheck.oracle.kafka import runtime

    try:
        runtime.KafkaRuntime.resolve("4.2")
        runtime.javac_binary()
    except runtime.KafkaUnavailable as reason:
        pytest.skip(f"kipcheck's Java programs cannot be built here: {reason}")
    shutil.copy(runtime.POM, tmp_path / "pom.xml")
    shutil.copytree(runtime.PROGRAM_SOURCES.parent.parent, tmp_path / "src")
    monkeypatch.setattr(runtime, "POM", tmp_path / "pom.xml")
    monkeypatch.setattr(runtime, "PROGRAM_SOURCES", tmp_path / "src" / "main" / "java")
    builds = []
    maven = runtime._maven
    monkeypatch.setattr(runtime, "_maven", lambda arguments, purpose: builds.append(arguments) or maven(arguments, purpose))
    jar = runtime.programs_jar("4.2")
    assert jar == tmp_path / "target" / "kafka-4.2" / "kipcheck-kafka-1.jar" and jar.exists()
    assert runtime.programs_jar("4.2") == jar and len(builds) == 1, "built once"
    source = next(runtime.PROGRAM_SOURCES.rglob("*.java"))
    os.utime(source, (jar.stat().st_mtime + 5, jar.stat().st_mtime + 5))
    assert runtime.programs_jar("4.2") == jar and len(builds) == 2, "built again after its source changed"


def test_without_javac_the_programs_are_unavailable_with_the_reason(tmp_path, monkeypatch):
    from kipcheck.oracle.kafka import runtime

    java = tmp_path / "jre" / "bin" / "java"  # a Java runtime: java, no javac
    java.parent.mkdir(parents=True)
    java.write_text("")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jre"))
    monkeypatch.setattr(runtime, "POM", tmp_path / "pom.xml")  # nothing built here yet
    (tmp_path / "pom.xml").write_text("<project/>")
    with pytest.raises(runtime.KafkaUnavailable, match="needs a JDK's javac.*openjdk-17-jdk-headless"):
        runtime.programs_jar("4.2")


def test_a_port_taken_before_kafka_binds_it_is_chosen_again(tmp_path, start_kafka):
    from kipcheck.oracle.kafka.cluster import KafkaCluster

    start_kafka("4.2", name="availability").stop()  # skips here, with the reason, where Kafka cannot run
    cluster = KafkaCluster("4.2", tmp_path / "taken")
    first_choice = cluster.ports[0]
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", first_choice))
        squatter.listen()
        cluster.start()
        try:
            assert cluster.ports[0] != first_choice
            create_topic(cluster.bootstrap, "moved")
        finally:
            cluster.stop()
