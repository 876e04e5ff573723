"""What the impossible-count check (impl/wire/frame_check) adds to decoding a request.

    .venv/bin/python bench/bench_frame_check.py [--repeat 5] [--seconds 0.3]

Times, per request kind, kio's decode of header and body alone and
`check_frame` alone (microseconds per frame, best of --repeat runs of about
--seconds each, one core), and prints the check's cost as a share of the decode:
- Produce v10 as librdkafka sends it: 1 partition with a 16 KiB batch, and
  10 partitions of 3 topics;
- ShareFetch v1: a session-opening fetch of 8 partitions, and an incremental
  fetch whose partition carries 20 acknowledgement batches (one type each, as
  librdkafka sends them), and one of 200 per-offset types;
- ShareAcknowledge v1 with 20 batches; Metadata v12 by topic id (3 topics).
"""

from __future__ import annotations

import argparse
import time
import uuid

from kio.index import load_request_schema
from kio.serial import entity_reader
from kipcheck.impl.consumer.connection import encode_entity
from kipcheck.impl.wire.codec import build
from kipcheck.impl.wire.frame_check import check_frame


def request(api_key: int, version: int, **body) -> bytes:
    return encode_entity(build(load_request_schema(api_key, version), body), 1, "kipcheck-bench")[4:]


def produce(partitions_per_topic: int, topics: int, batch_bytes: int) -> bytes:
    data = [{"name": f"topic-{topic}", "partition_data": [{"index": index, "records": b"\0" * batch_bytes}
                                                          for index in range(partitions_per_topic)]}
            for topic in range(topics)]
    return request(0, 10, transactional_id=None, acks=-1, timeout=30000, topic_data=data)


def share_fetch(partitions: int, batches: int, types_per_batch: int = 1, epoch: int = 1) -> bytes:
    acks = [{"first_offset": index * types_per_batch, "last_offset": (index + 1) * types_per_batch - 1,
             "acknowledge_types": [1] * types_per_batch} for index in range(batches)]
    topics = [{"topic_id": uuid.uuid4(), "partitions": [{"partition_index": index, "acknowledgement_batches": acks}
                                                        for index in range(partitions)]}]
    return request(78, 1, group_id="group", member_id="m" * 22, share_session_epoch=epoch, max_wait=500,
                   min_bytes=1, max_bytes=52428800, max_records=500, batch_size=500, topics=topics,
                   forgotten_topics_data=[])


def frames() -> dict[str, bytes]:
    acks = [{"first_offset": index, "last_offset": index, "acknowledge_types": [1]} for index in range(20)]
    return {
        "Produce v10, 1 partition x 16 KiB": produce(1, 1, 16384),
        "Produce v10, 3 topics x 10 partitions x 1 KiB": produce(10, 3, 1024),
        "ShareFetch v1, open 8 partitions": share_fetch(8, 0, epoch=0),
        "ShareFetch v1, 20 ack batches": share_fetch(1, 20),
        "ShareFetch v1, 200 per-offset types": share_fetch(1, 1, 200),
        "ShareAcknowledge v1, 20 ack batches": request(79, 1, group_id="group", member_id="m" * 22,
                                                       share_session_epoch=3, topics=[{"topic_id": uuid.uuid4(),
                                                       "partitions": [{"partition_index": 0, "acknowledgement_batches": acks}]}]),
        "Metadata v12, 3 topic ids": request(3, 12, topics=[{"topic_id": uuid.uuid4(), "name": None} for _ in range(3)],
                                             allow_auto_topic_creation=False, include_topic_authorized_operations=False),
    }


def per_frame_us(function, repeat: int, seconds: float) -> float:
    count = 1
    while True:  # calibrate: enough calls to take about `seconds`
        started = time.process_time()
        for _ in range(count):
            function()
        if time.process_time() - started >= seconds / 10:
            break
        count *= 2
    calls = count * 10
    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        for _ in range(calls):
            function()
        best = min(best, (time.process_time() - started) / calls)
    return best * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=0.3)
    args = parser.parse_args()
    print(f"{'request':48} {'bytes':>7} {'kio decode us':>14} {'check us':>9} {'check/decode':>13}")
    for name, frame in frames().items():
        api_key, version = int.from_bytes(frame[:2], "big"), int.from_bytes(frame[2:4], "big")
        request_class = load_request_schema(api_key, version)
        header_reader, body_reader = entity_reader(request_class.__header_schema__), entity_reader(request_class)

        def decode():
            _, header_size = header_reader(frame, 0)
            body_reader(frame, header_size)

        decode_us = per_frame_us(decode, args.repeat, args.seconds)
        check_us = per_frame_us(lambda: check_frame(request_class, frame), args.repeat, args.seconds)
        print(f"{name:48} {len(frame):7} {decode_us:14.2f} {check_us:9.2f} {check_us / decode_us:12.0%}")


if __name__ == "__main__":
    main()
