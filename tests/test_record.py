"""`kipcheck record` in front of the reference broker: correct clients pass, misbehaving ones are caught live.

Clients: confluent-kafka's Producer, Consumer and ShareConsumer (Kafka's Java clients are not driven here),
and a kio client for the requests an application gets wrong.
"""

import dataclasses
import json
import time
import uuid

import pytest
from confluent_kafka.admin import AdminClient

from kipcheck.impl.consumer.connection import BrokerConnection
from kipcheck.oracle.check import check_file
from kipcheck.oracle.conformance.scenarios.clients import (
    create_topic, poll_records, produce, read_plain, share_consumer,
)
from record_support import Recording, TamperingBroker, share_workload

EARLIEST = {"share_auto_offset_reset": "earliest"}


def judged_ok(recording: Recording) -> list:
    """The traces, each passing `kipcheck check` afterwards as it passed live."""
    paths = sorted(recording.trace_dir.glob("*.jsonl"))
    verdicts = [check_file(path) for path in paths]
    assert all(verdicts), [verdict.summary() for verdict in verdicts if not verdict]
    return paths


def test_answers_name_the_proxy_and_plain_traffic_passes_unchanged(start_broker, tmp_path):
    broker = start_broker()
    with Recording([("127.0.0.1", broker.port)], tmp_path / "traces") as recording:
        admin = AdminClient({"bootstrap.servers": recording.bootstrap})
        brokers = admin.list_topics(timeout=30).brokers
        assert [f"{entry.host}:{entry.port}" for entry in brokers.values()] == [recording.bootstrap]
        topic = f"plain-{uuid.uuid4().hex[:6]}"
        create_topic(recording.bootstrap, topic, 2)
        records = [(index % 2, f"k{index}".encode(), b"x" * index) for index in range(200)]
        produce(recording.bootstrap, topic, records)
        assert len(read_plain(recording.bootstrap, topic, 2, 200)) == 200
        produce(recording.bootstrap, topic, [(0, None, b"no answer")], acks=0)  # Produce acks=0: never answered
        assert len(read_plain(recording.bootstrap, topic, 2, 201)) == 201
    assert recording.exit_code == 0, recording.output


def test_share_consumers_through_record_check_pass_with_no_violation(start_broker, tmp_path):
    """Implicit and explicit acknowledgement, two consumers sharing partitions, records released and redelivered:
    a full view, judged by every clause, and no false alarm."""
    broker = start_broker(**EARLIEST)
    with Recording([("127.0.0.1", broker.port)], tmp_path / "traces") as recording:
        topic, group = f"shared-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
        create_topic(recording.bootstrap, topic, 2)
        implicit = share_consumer(recording.bootstrap, group, [topic])
        explicit = share_consumer(recording.bootstrap, group, [topic], explicit=True)
        done, released = share_workload(recording.bootstrap, topic, [implicit, explicit], explicit)
        assert len(done) == 100 and released
    assert recording.exit_code == 0, recording.output
    assert "VIOLATION" not in recording.output
    paths = judged_ok(recording)
    partitions = [path for path in paths if path.name.startswith("share-partition.")]
    assert partitions and all('"view"' not in path.read_text().splitlines()[0] for path in partitions), \
        "the proxy saw the group born and every member: full views"
    acquired = [step for step in recording.acquisitions() if step["observed"]["records"]]
    assert acquired and all("delivered" in step["observed"] for step in acquired), "SP-48 judged on every answer"
    assert "0 with a violation" in recording.output


def join(connection: BrokerConnection, group: str, member_id: str, topic: str) -> None:
    answer = connection.request(76, 1, group_id=group, member_id=member_id, member_epoch=0, rack_id=None,
                                subscribed_topic_names=[topic])
    assert answer.error_code.name == "none", answer


def topic_id(connection: BrokerConnection, topic: str):
    answer = connection.request(3, 12, topics=[{"topic_id": None, "name": topic}], allow_auto_topic_creation=False,
                                include_topic_authorized_operations=False)
    return answer.topics[0].topic_id


def share_fetch(connection, group, member_id, epoch, topic_uuid, acks=()):
    batches = [{"first_offset": first, "last_offset": last, "acknowledge_types": [kind]} for first, last, kind in acks]
    return connection.request(78, 1, group_id=group, member_id=member_id, share_session_epoch=epoch, max_wait=500,
                              min_bytes=1, max_bytes=1 << 20, max_records=100, batch_size=100,
                              topics=[{"topic_id": topic_uuid, "partitions": [{"partition_index": 0,
                                                                                "acknowledgement_batches": batches}]}],
                              forgotten_topics_data=[])


def share_acknowledge(connection, group, member_id, epoch, topic_uuid, acks):
    batches = [{"first_offset": first, "last_offset": last, "acknowledge_types": [kind]} for first, last, kind in acks]
    return connection.request(79, 1, group_id=group, member_id=member_id, share_session_epoch=epoch,
                              topics=[{"topic_id": topic_uuid, "partitions": [{"partition_index": 0,
                                                                                "acknowledgement_batches": batches}]}])


@pytest.fixture
def misbehaving(start_broker, tmp_path):
    """A recording in front of the reference broker, a topic of 10 records, and a kio application joined to a
    share group through the proxy, holding a session: (recording, connection, group, member_id, topic, topic id)."""
    broker = start_broker(**EARLIEST)
    recording = Recording([("127.0.0.1", broker.port)], tmp_path / "traces")
    recording.start()
    topic, group, member_id = f"t-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}", uuid.uuid4().hex[:22]
    create_topic(recording.bootstrap, topic, 1)
    produce(recording.bootstrap, topic, [(0, None, b"v%d" % index) for index in range(10)])
    connection = BrokerConnection("127.0.0.1", recording.ports[0], "misbehaving-app", 30_000, 100_000_000)
    join(connection, group, member_id, topic)
    yield recording, connection, group, member_id, topic, topic_id(connection, topic)
    connection.close()
    recording.stop()


def test_an_application_acknowledging_offsets_it_never_received_is_caught_live(misbehaving):
    """SP-85: the broker refuses the acknowledgement (correctly); the application's bug is what is caught."""
    recording, connection, group, member_id, topic, topic_uuid = misbehaving
    answer = share_fetch(connection, group, member_id, 0, topic_uuid)
    acquired = [(run.first_offset, run.last_offset) for run in answer.responses[0].partitions[0].acquired_records]
    assert acquired == [(0, 9)]
    answer = share_acknowledge(connection, group, member_id, 1, topic_uuid, [(0, 4, 1), (12, 14, 1)])
    line = recording.wait_for("VIOLATION")
    assert "SP-85" in line and "[[12, 14]], never given to it" in line, recording.output
    assert recording.stop() == 1
    assert "VIOLATION SP-85" in recording.output


def test_an_application_acknowledging_with_a_stale_epoch_is_caught_live(misbehaving):
    """SS-40: the broker answers INVALID_SHARE_SESSION_EPOCH (correctly, SS-7); the stale epoch is the bug."""
    recording, connection, group, member_id, topic, topic_uuid = misbehaving
    share_fetch(connection, group, member_id, 0, topic_uuid)
    assert share_acknowledge(connection, group, member_id, 1, topic_uuid, [(0, 4, 1)]).error_code.name == "none"
    answer = share_acknowledge(connection, group, member_id, 1, topic_uuid, [(5, 9, 1)])
    assert answer.error_code.name == "invalid_share_session_epoch"
    line = recording.wait_for("VIOLATION")
    assert "SS-40" in line and "a stale one" in line, recording.output
    assert recording.stop() == 1


def test_an_application_committing_a_range_it_never_fetched_is_caught_live(misbehaving):
    """IC-22: the coordinator accepts the commit; committing records never fetched loses them."""
    recording, connection, group, member_id, topic, topic_uuid = misbehaving
    produce(recording.bootstrap, topic, [(0, None, b"w%d" % index) for index in range(10)])
    fetched = connection.request(1, 12, replica_id=-1, max_wait=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                                 session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=[],
                                 topics=[{"topic": topic, "partitions": [{
                                     "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                                     "last_fetched_epoch": -1, "log_start_offset": -1,
                                     "partition_max_bytes": 1}]}])  # the first batch only: offsets 0..9
    assert fetched.responses[0].partitions[0].records

    def commit(ranges):
        answer = connection.request(8, 9, group_id=f"{group}-ic", generation_id_or_member_epoch=-1, member_id="",
                                    group_instance_id=None, topics=[{"name": topic, "partitions": [{
                                        "partition_index": 0, "committed_offset": -1, "committed_leader_epoch": -1,
                                        "committed_metadata": None, "offset_ranges": ranges}]}])
        return answer.topics[0].partitions[0].error_code

    assert commit((0, 9)) == 0
    time.sleep(0.5)
    assert "VIOLATION" not in recording.output
    assert commit((12, 15)) == 0  # accepted: the coordinator cannot know
    line = recording.wait_for("VIOLATION")
    assert "IC-22" in line and "[[12, 15]], never given to it" in line, recording.output
    assert recording.stop() == 1


def test_record_refuses_bad_flags(tmp_path):
    from kipcheck.cli import main

    assert main(["record", "--listen", "nowhere", "--upstream", "127.0.0.1:9092", "--trace-dir", str(tmp_path)]) == 2
    assert main(["record", "--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:9092", "--trace-dir", str(tmp_path),
                 "--set", "queued.max.request.bytes=0"]) == 2
    assert main(["record", "--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:9092", "--trace-dir", str(tmp_path),
                 "--set", "no.such.setting=1"]) == 2


def forget_delivery_counts(part):
    """A faulty broker: every record a ShareFetch acquires is reported with delivery count 1, so a redelivered
    record looks delivered for the first time (SP-4)."""
    return dataclasses.replace(part, acquired_records=tuple(
        dataclasses.replace(run, delivery_count=type(run.delivery_count)(1)) for run in part.acquired_records))


def test_a_broker_that_forgets_delivery_counts_is_caught(start_broker, tmp_path):
    """The faulty broker (a tampering layer) hands a released record out again with count 1: SP-4."""
    broker = start_broker(**EARLIEST)
    forgetful = TamperingBroker(broker.port, forget_delivery_counts)
    try:
        with Recording([("127.0.0.1", forgetful.port)], tmp_path / "traces") as recording:
            topic, group = f"t-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
            create_topic(recording.bootstrap, topic, 1)
            produce(recording.bootstrap, topic, [(0, None, b"v%d" % index) for index in range(5)])
            consumer = share_consumer(recording.bootstrap, group, [topic], explicit=True)
            counts, deadline = [], time.monotonic() + 60
            while len(counts) < 10 and time.monotonic() < deadline:
                for message in poll_records(consumer, 0.5):
                    counts.append(message.delivery_count())
                    consumer.acknowledge(message, 2 if len(counts) <= 5 else 1)  # release each once
            consumer.close()
            assert counts == [1] * 10, "the tampering layer hid the redelivery from the client"
            line = recording.wait_for("VIOLATION")
        assert "SP-4" in line, recording.output
        assert recording.exit_code == 1
    finally:
        forgetful.stop()


def test_a_consumer_not_behind_the_proxy_makes_a_partial_view_with_no_false_alarm(start_broker, tmp_path):
    """SP-80: a second consumer of the group talks to the broker directly. What it acquires, releases and
    redelivers is invisible to the proxy, whose traces are partial views: no alarm from the unseen member."""
    broker = start_broker(**EARLIEST)
    with Recording([("127.0.0.1", broker.port)], tmp_path / "traces") as recording:
        topic, group = f"t-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
        create_topic(recording.bootstrap, topic, 1)
        unseen = share_consumer(broker.bootstrap, group, [topic], explicit=True)
        seen = share_consumer(recording.bootstrap, group, [topic], explicit=True)
        done, deadline = set(), time.monotonic() + 90

        def poll_both():
            for consumer in (unseen, seen):
                for message in poll_records(consumer, 0.2):
                    # each record is released the first time: either consumer may get it again, count 2
                    redelivered = message.delivery_count() > 1
                    consumer.acknowledge(message, 1 if redelivered else 2)
                    if redelivered:
                        done.add(message.offset())

        for batch in range(10):
            produce(broker.bootstrap, topic, [(0, None, b"v%d" % index) for index in range(10)])
            poll_both()
        while len(done) < 100 and time.monotonic() < deadline:
            poll_both()
        assert len(done) == 100
        for consumer in (unseen, seen):
            consumer.close()
    assert recording.exit_code == 0, recording.output
    partitions = recording.traces("share-partition")
    assert partitions and all('"view": "partial"' in path.read_text().splitlines()[0] for path in partitions)
    assert any('"records": [[' in line for path in partitions for line in path.read_text().splitlines()), \
        "the seen consumer acquired records"
    judged_ok(recording)


def test_the_readme_example_runs_through_record_check_as_written(tmp_path):
    """The README's "Check your own application": the proxy started as it says, the application as written."""
    import contextlib
    import io
    import re
    import shlex
    from pathlib import Path

    from kipcheck.oracle.conformance.targets.embedded import EmbeddedBroker

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    blocks = {language: re.findall(rf"```{language}\n(.*?)```", readme, re.DOTALL) for language in ("sh", "python")}
    broker_settings = dict(setting.split("=", 1) for setting in re.findall(
        r"--set (\S+)", next(block for block in blocks["sh"] if "kipcheck broker --data-dir /tmp/kc --set" in block)))
    command = shlex.split(next(block for block in blocks["sh"] if "kipcheck record --listen" in block))
    assert command[1:3] == ["record", "--listen"] and "--check" in command
    example = next(block for block in blocks["python"] if "127.0.0.1:19092" in block)
    with EmbeddedBroker(tmp_path / "broker", settings=broker_settings) as broker:
        with Recording([("127.0.0.1", broker.port)], tmp_path / "traces") as recording:
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                exec(compile(example.replace("127.0.0.1:19092", recording.bootstrap), "README.md", "exec"), {})
    assert printed.getvalue().splitlines() == ["[0, 1, 2, 3, 4]"]
    assert recording.exit_code == 0 and "0 with a violation" in recording.output, recording.output
    partition = recording.traces("share-partition")[0].read_text()
    assert '"records": [[2, 2, 2]]' in partition, "invoice 2 was delivered again, count 2"


def trace_opened(trace_dir, prefix: str, timeout_s: float = 30) -> str:
    """The header line of the trace whose name starts with `prefix`, once the proxy has written it (the proxy
    observes behind the traffic it forwards: on a loaded machine, after the client has its answer)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for path in trace_dir.glob(f"{prefix}*"):
            header = path.read_text().partition("\n")[0]
            if header:
                return header
        time.sleep(0.05)
    raise AssertionError(f"no trace {prefix}* in {trace_dir} after {timeout_s} s")


def test_a_full_view_that_an_unseen_member_joins_becomes_partial_instead_of_raising_a_false_alarm(
        start_broker, tmp_path):
    """The proxy saw the group born, so its trace starts as a full view; then a consumer joins directly,
    releases records and leaves. What it did breaks the full model's expectations (a record the trace never
    saw delivered comes with count 2); before printing a violation the proxy asks the group's description:
    the member is gone, but the group's epoch moved more often than members joined and left through the proxy,
    so the trace is judged as a partial view instead (SP-80)."""
    broker = start_broker(**EARLIEST)
    with Recording([("127.0.0.1", broker.port)], tmp_path / "traces") as recording:
        topic, group = f"t-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
        create_topic(recording.bootstrap, topic, 1)
        seen = share_consumer(recording.bootstrap, group, [topic], explicit=True)
        produce(broker.bootstrap, topic, [(0, None, b"first")])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the seen consumer's first acquisition: a full view opens
            messages = poll_records(seen, 0.5)
            for message in messages:
                seen.acknowledge(message, 1)
            if messages:
                break
        opened = trace_opened(tmp_path / "traces", f"share-partition.{group}.")  # the proxy judged it full then
        assert json.loads(opened).get("view") != "partial", opened
        unseen = share_consumer(broker.bootstrap, group, [topic], explicit=True)
        produce(broker.bootstrap, topic, [(0, None, b"v%d" % index) for index in range(10)])
        released, deadline = 0, time.monotonic() + 60
        while not released and time.monotonic() < deadline:
            for message in poll_records(unseen, 0.5):
                unseen.acknowledge(message, 2)  # released: delivered again, with count 2
                released += 1
        unseen.close()  # it leaves the group: the next description no longer names it
        redelivered, deadline = 0, time.monotonic() + 60
        while redelivered < released and time.monotonic() < deadline:
            for message in poll_records(seen, 0.5):
                redelivered += message.delivery_count() > 1
                seen.acknowledge(message, 1)
        seen.close()
        assert released and redelivered == released
    assert recording.exit_code == 0, recording.output
    assert "partial view from then on: the group had members the proxy never saw" in recording.output, \
        recording.output
    judged_ok(recording)


def test_poll_spso_writes_checks_of_the_start_offset_the_share_coordinator_stored(start_broker, tmp_path):
    """--poll-spso: DescribeShareGroupOffsets read between requests, as `stored_spso` checks of full views (SP-47)."""
    broker = start_broker(**EARLIEST)
    with Recording([("127.0.0.1", broker.port)], tmp_path / "traces", extra=["--poll-spso", "100"]) as recording:
        topic, group = f"t-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
        create_topic(recording.bootstrap, topic, 1)
        consumer = share_consumer(recording.bootstrap, group, [topic], explicit=True)
        for batch in range(5):
            produce(recording.bootstrap, topic, [(0, None, b"v%d" % index) for index in range(10)])
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                messages = poll_records(consumer, 0.3)
                for message in messages:
                    consumer.acknowledge(message, 1)
                if messages:
                    break
            time.sleep(0.3)  # idle: room for a check
        consumer.close()
    assert recording.exit_code == 0, recording.output
    steps = recording.traces("share-partition")[0].read_text().splitlines()
    checks = [line for line in steps if '"op": "check"' in line]
    assert checks and any('"stored_spso": 0' not in line and '"stored_spso": -1' not in line for line in checks), \
        "the stored start offset read as it advanced"
    judged_ok(recording)
