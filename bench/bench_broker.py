"""Benchmark the reference broker with real clients on loopback (a script, not a test).

    .venv/bin/python bench/bench_broker.py [--records 100000] [--consumers 3] [--partitions 3] [--traced]

Two runs on their own topics, each timed the same way: the readers are started
and connected first, then one confluent-kafka Producer (acks=all, linger 5 ms)
writes --records records, and the time is taken from the first produce to the
arrival of the last record at a reader (CLOCK_MONOTONIC, shared by the
processes). What the readers do after that (an idle reader's last poll, the
share readers' final acknowledgement, closing) is not timed.
- plain: N Consumers (Fetch), each assigned its share of the partitions from
  offset 0; librdkafka's pause of `fetch.queue.backoff.ms` when its queue
  passes `queued.min.messages` is kept out of the way (queued.min.messages
  above the record count);
- share: N ShareConsumers (ShareFetch, implicit acknowledgement) of one group.
Prints records/s end to end for each (and the producer's own rate in each
run), the ratio share/plain, and the memory per in-flight record in
impl/share's SharePartition with 2000 records in flight per partition
(tracemalloc), acquired in whole produce batches and, the worst case, one
record at a time. The broker runs without traces unless --traced.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from kipcheck.impl.share.config import ShareConfig
from kipcheck.impl.share.partition import SharePartition
from kipcheck.oracle.conformance.scenarios.clients import QUIET, create_topic
from kipcheck.oracle.conformance.targets.embedded import EmbeddedBroker

ROOT = Path(__file__).resolve().parent.parent
SETTLE_S = 3.0  # after every reader polled once: time to join the share group and get an assignment
POLL_S = 0.1


def produce_all(bootstrap: str, topic: str, records: int, partitions: int, value_bytes: int,
                **config) -> tuple[float, float]:
    """(monotonic time of the first produce, records/s until the last delivery report); `config` adds to the
    Producer's."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.num.messages": 10000,
                         **QUIET, **config})
    value = b"x" * value_bytes
    started = time.monotonic()
    for index in range(records):
        while True:
            try:
                producer.produce(topic, value=value, partition=index % partitions)
                break
            except BufferError:
                producer.poll(0.01)
    left = producer.flush(120)
    assert left == 0, f"{left} records not delivered"
    return started, records / (time.monotonic() - started)


def read_until_done(poll, total: int, counter, ready, done) -> None:
    """Poll until every reader together has `total` records; report when this reader's last one arrived."""
    poll()              # connect (and, for a share consumer, join) before the producer starts
    with ready.get_lock():
        ready.value += 1
    last_arrival = 0.0
    while counter.value < total:
        received = poll()
        if received:
            last_arrival = time.monotonic()
            with counter.get_lock():
                counter.value += received
    done.put(last_arrival)


def plain_reader(bootstrap: str, topic: str, partitions: list[int], total: int, counter, ready, done) -> None:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-plain", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 100, "queued.min.messages": 10_000_000, **QUIET})
    consumer.assign([TopicPartition(topic, partition, 0) for partition in partitions])
    read_until_done(lambda: sum(1 for message in consumer.consume(10000, POLL_S) if message.error() is None),
                    total, counter, ready, done)
    consumer.close()


def share_reader(bootstrap: str, topic: str, group: str, total: int, counter, ready, done) -> None:
    from confluent_kafka import ShareConsumer

    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, **QUIET})
    consumer.subscribe([topic])
    read_until_done(lambda: sum(1 for message in consumer.poll(POLL_S) if message.error() is None),
                    total, counter, ready, done)
    consumer.commit_sync(60)  # the last poll's records are acknowledged too (not timed)
    consumer.close()


def end_to_end(bootstrap: str, topic: str, args, reader, reader_args: list[tuple]) -> tuple[float, float]:
    """(records/s from the first produce to the last arrival, the producer's records/s)."""
    context = multiprocessing.get_context("spawn")
    counter, ready, done = context.Value("q", 0), context.Value("i", 0), context.Queue()
    readers = [context.Process(target=reader, args=(bootstrap, topic, *extra, args.records, counter, ready, done))
               for extra in reader_args]
    for process in readers:
        process.start()
    deadline = time.monotonic() + 120
    while ready.value < len(readers):
        assert time.monotonic() < deadline, "the readers did not start"
        time.sleep(0.05)
    time.sleep(SETTLE_S)
    started, produce_rate = produce_all(bootstrap, topic, args.records, args.partitions, args.value_bytes)
    last_arrival = max(done.get(timeout=600) for _ in readers)
    for process in readers:
        process.join(60)
    return args.records / (last_arrival - started), produce_rate


def consume_rates(bootstrap: str, args) -> dict[str, tuple[float, float]]:
    owned = [[partition for partition in range(args.partitions) if partition % args.consumers == index]
             for index in range(args.consumers)]
    create_topic(bootstrap, "bench-plain", args.partitions)
    create_topic(bootstrap, "bench-share", args.partitions)
    return {"plain": end_to_end(bootstrap, "bench-plain", args, plain_reader, [(mine,) for mine in owned if mine]),
            "share": end_to_end(bootstrap, "bench-share", args, share_reader, [("bench-share",)] * args.consumers)}


@contextlib.contextmanager
def revision_launcher(revision: str, directory: Path):
    """A launcher running `kipcheck broker` from git revision `revision`: a worktree, its folders laid out as
    the package kipcheck (as pyproject.toml maps them) on PYTHONPATH ahead of this checkout's install; the
    worktree is removed on leaving."""
    tree = directory / "tree"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), revision], check=True,
                   capture_output=True)
    try:
        package = directory / "packages" / "kipcheck"
        package.mkdir(parents=True)
        for item in (tree / "kipcheck").iterdir():
            (package / item.name).symlink_to(item)
        for folder in ("spec", "model", "impl", "oracle"):
            (package / folder).symlink_to(tree / folder)
        code = (f"import sys; sys.path.insert(0, {str(directory / 'packages')!r}); "
                "from kipcheck.cli import main; raise SystemExit(main())")
        yield (sys.executable, "-c", code, "broker")
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False,
                       capture_output=True)


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
            rates = consume_rates(broker.bootstrap, args)
    (share, share_produce), (plain, plain_produce) = rates["share"], rates["plain"]
    print(f"records: {args.records} x {args.value_bytes} B on {args.partitions} partitions, "
          f"{args.consumers} consumers, broker traces {'on' if args.traced else 'off'}")
    print("end to end: from the first produce to the last record's arrival at a reader")
    print(f"{'':<32}{'share (ShareFetch+ack)':>24}{'plain (Fetch)':>16}{'share/plain':>14}")
    print(f"{'records/s end to end':<32}{share:>24,.0f}{plain:>16,.0f}{share / plain:>14.2f}")
    print(f"{'producer records/s in that run':<32}{share_produce:>24,.0f}{plain_produce:>16,.0f}")
    for shape, size in memory_per_inflight_record().items():
        print(f"memory per in-flight record, {shape}: {size:,.1f} bytes (2000 in flight per partition)")


if __name__ == "__main__":
    main()
