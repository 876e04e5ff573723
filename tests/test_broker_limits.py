"""The broker's limits against a real broker process: frame memory, partitions, file descriptors, exposure.

(The server's own limits, frame pools, idle connections and connection caps,
are tested in-process in test_server_limits.py.)
"""

from __future__ import annotations

import resource
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from kipcheck.impl.consumer.connection import encode_entity
from kipcheck.impl.wire.codec import build
from kipcheck.oracle.conformance.targets.embedded import EmbeddedBroker
from kipcheck.oracle.conformance.probes.raw_client import RawClient

pytestmark = pytest.mark.slow

MiB = 1 << 20
FRAME_BYTES = 32 * MiB
SETTLE_S = 1.0
API_VERSIONS, METADATA, CREATE_TOPICS = 18, 3, 19


def create_topics(port: int, topics: dict[str, int], validate_only: bool = False) -> dict[str, tuple]:
    """{name: (error code, error message)} of one CreateTopics v7 request."""
    client = RawClient(port)
    answer = client.request(CREATE_TOPICS, 7, timeout=30000, validate_only=validate_only, topics=[
        {"name": name, "num_partitions": count, "replication_factor": 1, "assignments": [], "configs": []}
        for name, count in topics.items()])
    client.close()
    return {topic.name: (topic.error_code, topic.error_message) for topic in answer.topics}


def metadata(port: int, names: list[str] | None, allow_create: bool = False) -> dict[str, tuple]:
    """{name: (error code, partition count)}; None asks for every topic."""
    client = RawClient(port)
    topics = None if names is None else [{"name": name, "topic_id": None} for name in names]
    answer = client.request(METADATA, 12, topics=topics, allow_auto_topic_creation=allow_create,
                            include_topic_authorized_operations=False)
    client.close()
    return {topic.name: (topic.error_code, len(topic.partitions)) for topic in answer.topics}


def test_frames_being_read_share_one_bounded_pool(tmp_path):
    """Four connections each send a 32 MiB frame but its last byte: the broker reads one, the others
    wait unread (queued.max.request.bytes = one frame), so it holds one frame, not four."""
    settings = {"socket.request.max.bytes": str(FRAME_BYTES), "queued.max.request.bytes": str(FRAME_BYTES)}
    body = build(load_request_schema(0, 9), transactional_id=None, acks=1, timeout=30000, topic_data=[
        {"name": "nowhere", "partition_data": [{"index": 0, "records": b"\0" * (FRAME_BYTES - 200)}]}])
    frame = memoryview(encode_entity(body, 1, "kipcheck-test"))
    with EmbeddedBroker(tmp_path, settings, traced=False) as broker:
        before = broker.memory_bytes()
        sent_but_last, finish, answers = [], threading.Event(), []

        def client():
            with socket.create_connection(("127.0.0.1", broker.port), timeout=120) as connection:
                connection.sendall(frame[:-1])
                sent_but_last.append(True)
                finish.wait()
                connection.sendall(frame[-1:])
                size = struct.unpack(">i", connection.recv(4, socket.MSG_WAITALL))[0]
                answers.append(connection.recv(size, socket.MSG_WAITALL))

        clients = [threading.Thread(target=client) for _ in range(4)]
        for thread in clients:
            thread.start()
        deadline = time.monotonic() + 60
        while not sent_but_last and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(SETTLE_S)
        held = broker.memory_bytes() - before
        assert len(sent_but_last) == 1, "the broker read more than one 32 MiB frame at once"
        assert held < 3 * FRAME_BYTES, f"{held >> 20} MiB held for frames being read"
        finish.set()
        for thread in clients:
            thread.join(120)
        assert len(answers) == 4  # each connection in turn, once the frame before it was handled


def test_partition_limits_answer_kafkas_errors(tmp_path):
    with EmbeddedBroker(tmp_path, {"max.broker.partitions": "50"}, traced=False) as broker:
        answer = create_topics(broker.port, {"first": 30, "second": 30})
        assert answer["first"] == (ErrorCode.none, None)
        error, message = answer["second"]
        assert error == ErrorCode.policy_violation and "max.broker.partitions (50)" in message
        too_many = create_topics(broker.port, {f"big-{index}": 1000 for index in range(11)})
        assert set(too_many.values()) == {(ErrorCode.policy_violation, "Excessively large number of partitions per request.")}
        assert create_topics(broker.port, {"third": 21}, validate_only=True)["third"][0] == ErrorCode.policy_violation
        assert create_topics(broker.port, {"third": 0})["third"][0] == ErrorCode.invalid_partitions
        assert create_topics(broker.port, {"third": 20})["third"] == (ErrorCode.none, None)
        auto = metadata(broker.port, ["auto"], allow_create=True)  # 50 hosted: no room for auto-creation
        assert auto["auto"][0] == ErrorCode.unknown_topic_or_partition
        assert metadata(broker.port, None) == {"first": (ErrorCode.none, 30), "third": (ErrorCode.none, 20)}
        assert "cannot auto-create topic 'auto': POLICY_VIOLATION" in broker.log_path.read_text()


def test_two_thousand_partitions_with_a_1024_descriptor_soft_limit(tmp_path):
    """The reported case: one request of 2 x 1000 partitions ran the broker out of file descriptors, so it
    could answer nothing and not restart. Now it raises its limit to fit max.broker.partitions at start."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 4096:
        pytest.skip(f"the hard file limit here is {hard}: the broker's defaults need 3,192 descriptors")
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))
    try:
        broker = EmbeddedBroker(tmp_path, traced=False)
        broker.start()  # inherits the 1024 soft limit
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    try:
        assert create_topics(broker.port, {"a": 1000, "b": 1000}) == {"a": (ErrorCode.none, None), "b": (ErrorCode.none, None)}
        assert create_topics(broker.port, {"c": 1})["c"][0] == ErrorCode.policy_violation
        assert broker.stop() == 0
        broker.start()
        assert metadata(broker.port, None) == {"a": (ErrorCode.none, 1000), "b": (ErrorCode.none, 1000)}
    finally:
        broker.stop()


def broker_process(tmp_path, *flags: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "kipcheck", "broker", "--port", "0", "--data-dir", str(tmp_path),
                             *flags], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_limits_that_cannot_fit_the_file_limit_refuse_to_start(tmp_path):
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        pytest.skip("no hard file limit here")
    result = broker_process(tmp_path, "--set", f"max.connections={hard}")
    _, stderr = result.communicate(timeout=60)
    assert result.returncode == 1 and "cannot start" in stderr and "file descriptors" in stderr
    assert "Traceback" not in stderr


def test_listening_beyond_loopback_warns_that_there_is_no_authentication(tmp_path):
    for host, warned in (("0.0.0.0", True), ("127.0.0.1", False)):
        process = broker_process(tmp_path / host, "--host", host)
        try:
            assert process.stdout.readline().startswith("listening on ")
        finally:
            process.send_signal(signal.SIGTERM)
            _, stderr = process.communicate(timeout=60)
        assert ("no authentication" in stderr) is warned, stderr
