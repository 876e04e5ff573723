"""What `kipcheck record` holds is bounded, and what it could not observe it says, never silently."""

import socket
import struct
import time
import uuid

from kipcheck.oracle.conformance.scenarios.clients import create_topic, poll_records, produce, read_plain, share_consumer
from record_support import Recording

EARLIEST = {"share_auto_offset_reset": "earliest"}


def test_an_answer_above_record_observe_max_bytes_is_forwarded_unread_and_said(start_broker, tmp_path):
    broker = start_broker(**EARLIEST)
    with Recording([("127.0.0.1", broker.port)], tmp_path / "traces",
                   settings={"record.observe.max.bytes": "2000"}) as recording:
        topic, group = f"t-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
        create_topic(recording.bootstrap, topic, 1)
        produce(recording.bootstrap, topic, [(0, None, b"x" * 100) for _ in range(100)])
        consumer = share_consumer(recording.bootstrap, group, [topic])
        got, deadline = 0, time.monotonic() + 60
        while got < 100 and time.monotonic() < deadline:
            got += len(poll_records(consumer, 0.5))
        consumer.close()
        assert got == 100, "the client is served whatever the proxy reads"
    assert recording.exit_code == 0, recording.output
    assert "not observed: " in recording.output and "record.observe.max.bytes (2000)" in recording.output


def test_frames_wait_for_room_in_queued_max_request_bytes_and_none_is_lost(start_broker, tmp_path):
    broker = start_broker()
    with Recording([("127.0.0.1", broker.port)], tmp_path / "traces", check=False,
                   settings={"queued.max.request.bytes": "20000",
                             "queued.max.request.bytes.per.connection": "10000"}) as recording:
        topic = f"t-{uuid.uuid4().hex[:6]}"
        create_topic(recording.bootstrap, topic, 1)
        produce(recording.bootstrap, topic, [(0, None, b"y" * 1000) for _ in range(500)], **{"batch.size": 8000})
        assert len(read_plain(recording.bootstrap, topic, 1, 500)) == 500
    assert recording.exit_code == 0, recording.output


def test_a_request_above_socket_request_max_bytes_closes_its_connection_only(start_broker, tmp_path):
    broker = start_broker()
    with Recording([("127.0.0.1", broker.port)], tmp_path / "traces",
                   settings={"socket.request.max.bytes": "1000"}) as recording:
        with socket.create_connection(("127.0.0.1", recording.ports[0]), timeout=10) as client:
            client.sendall(struct.pack(">i", 5000) + b"\0" * 100)
            assert client.recv(1) == b"", "the proxy closed the connection"
        recording.wait_for("a request frame of 5000 bytes (allowed 8 to 1000)")
        topic = f"t-{uuid.uuid4().hex[:6]}"
        create_topic(recording.bootstrap, topic, 1)  # other connections are served
    assert recording.exit_code == 0, recording.output


def test_batch_spans_read_offsets_from_headers_and_leave_out_a_batch_cut_short():
    import harness

    from kipcheck.impl.wire.batches import batch_spans, marker_batch

    first, second = harness.record_batch(3), harness.record_batch(2)
    second = second[:0] + (3).to_bytes(8, "big") + second[8:]  # base offset 3
    marker = marker_batch(producer_id=7, producer_epoch=0, control_type=1)
    marker = (5).to_bytes(8, "big") + marker[8:]
    records = first + second + marker
    assert batch_spans(records) == [(0, 2, False, 3), (3, 4, False, 2), (5, 5, True, 1)]
    assert batch_spans(records[:-1]) == [(0, 2, False, 3), (3, 4, False, 2)], "a fetch answer may end inside a batch"
    assert batch_spans(b"") == []
