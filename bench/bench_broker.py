"""Benchmark the reference broker with real clients on loopback (a script, not a test).

    .venv/bin/python bench/bench_broker.py [--records 100000] [--consumers 3] [--partitions 3] [--traced]

Prints:
- records/s produced (one confluent-kafka Producer, acks=all, linger 5 ms);
- records/s delivered and acknowledged to N ShareConsumers (implicit
  acknowledgement, one process each), beside N plain Consumers reading the
  same records with Fetch from the same broker, and the ratio;
- memory per in-flight record in impl/share's SharePartition with 2000
  records in flight per partition (tracemalloc), for records acquired in
  whole produce batches and, the worst case, one record at a time.
The broker runs without traces unless --traced (tracing writes a line per
acquisition and acknowledgement).
"""

from __future__ import annotations

import argparse
import multiprocessing
import tempfile
import time
import tracemalloc
from pathlib import Path

from kipcheck.impl.share.config import ShareConfig
from kipcheck.impl.share.partition import SharePartition
from kipcheck.oracle.conformance.clients import QUIET, create_topic
from kipcheck.oracle.conformance.embedded import EmbeddedBroker

TOPIC = "bench"


def produce_all(bootstrap: str, records: int, partitions: int, value_bytes: int) -> float:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": 10000, **QUIET})
    value = b"x" * value_bytes
    started = time.perf_counter()
    for index in range(records):
        while True:
            try:
                producer.produce(TOPIC, value=value, partition=index % partitions)
                break
            except BufferError:
                producer.poll(0.01)
    left = producer.flush(120)
    elapsed = time.perf_counter() - started
    assert left == 0, f"{left} records not delivered"
    return records / elapsed


def plain_reader(bootstrap: str, partitions: list[int], expected: int, start, done) -> None:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-plain", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 100, **QUIET})
    consumer.assign([TopicPartition(TOPIC, partition, 0) for partition in partitions])
    start.wait()
    received = 0
    while received < expected:
        received += sum(1 for message in consumer.consume(10000, 1.0) if message.error() is None)
    done.put(time.perf_counter())
    consumer.close()


def share_reader(bootstrap: str, total: int, counter, start, done) -> None:
    from confluent_kafka import ShareConsumer

    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": "bench-share", **QUIET})
    consumer.subscribe([TOPIC])
    start.wait()  # joining the group is part of what is timed (about one heartbeat round trip)
    while counter.value < total:
        received = sum(1 for message in consumer.poll(0.5) if message.error() is None)
        with counter.get_lock():
            counter.value += received
    consumer.commit_sync(60)  # the last poll's records are acknowledged too
    done.put(time.perf_counter())
    consumer.close()


def timed(processes: list, start, done) -> float:
    """Start the readers together; seconds until the last one finished."""
    for process in processes:
        process.start()
    time.sleep(3)  # let every reader connect and join before the clock starts
    started = time.perf_counter()
    start.set()
    finished = max(done.get(timeout=600) for _ in processes)
    for process in processes:
        process.join(60)
    return finished - started


def consume_rates(bootstrap: str, records: int, partitions: int, consumers: int) -> tuple[float, float]:
    context = multiprocessing.get_context("spawn")
    start, done = context.Event(), context.Queue()
    owned = [[partition for partition in range(partitions) if partition % consumers == index] for index in range(consumers)]
    plain = [context.Process(target=plain_reader, args=(bootstrap, mine, records * len(mine) // partitions, start, done))
             for mine in owned if mine]
    plain_rate = records / timed(plain, start, done)
    start, done, counter = context.Event(), context.Queue(), context.Value("q", 0)
    share = [context.Process(target=share_reader, args=(bootstrap, records, counter, start, done)) for _ in range(consumers)]
    share_rate = records / timed(share, start, done)
    return share_rate, plain_rate


def memory_per_inflight_record(partitions: int = 20, inflight: int = 2000, batch_records: int = 100) -> dict[str, float]:
    """Bytes of SharePartition state per ACQUIRED record, 2000 in flight per partition."""
    config = ShareConfig(max_inflight_records=inflight, profile="kafka-4.2")
    results = {}
    for shape, per_acquire in (("acquired in batches of 100", batch_records), ("acquired one record at a time", 1)):
        tracemalloc.start()
        before = tracemalloc.take_snapshot()
        held = []
        for _ in range(partitions):
            share_partition = SharePartition(config, 0)
            for base in range(0, inflight, per_acquire):
                share_partition.on_append(base, per_acquire, 0)
            for member in range(inflight // per_acquire):
                share_partition.acquire(f"member-{member % 10}", per_acquire, 0)
            assert share_partition.speo - share_partition.spso == inflight
            held.append(share_partition)
        grown = sum(stat.size_diff for stat in tracemalloc.take_snapshot().compare_to(before, "filename"))
        tracemalloc.stop()
        results[shape] = grown / (partitions * inflight)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--consumers", type=int, default=3)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--traced", action="store_true", help="let the broker write its traces")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kipcheck-bench-") as work_dir:
        settings = {"share.auto.offset.reset": "earliest", "group.share.heartbeat.interval.ms": "1000",
                    "group.share.partition.max.record.locks": "10000"}
        with EmbeddedBroker(Path(work_dir), settings, traced=args.traced) as broker:
            create_topic(broker.bootstrap, TOPIC, args.partitions)
            produced = produce_all(broker.bootstrap, args.records, args.partitions, args.value_bytes)
            share_rate, plain_rate = consume_rates(broker.bootstrap, args.records, args.partitions, args.consumers)
    print(f"records: {args.records} x {args.value_bytes} B on {args.partitions} partitions, "
          f"{args.consumers} consumers, broker traces {'on' if args.traced else 'off'}")
    print(f"produce:                        {produced:>10,.0f} records/s")
    print(f"{'':<32}{'share (ShareFetch+ack)':>24}{'plain (Fetch)':>16}{'share/plain':>14}")
    print(f"{'consume, records/s':<32}{share_rate:>24,.0f}{plain_rate:>16,.0f}{share_rate / plain_rate:>14.2f}")
    for shape, size in memory_per_inflight_record().items():
        print(f"memory per in-flight record, {shape}: {size:,.1f} bytes (2000 in flight per partition)")


if __name__ == "__main__":
    main()
