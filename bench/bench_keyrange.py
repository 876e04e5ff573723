"""Key-range consumers sharing one partition: the seed's promise, with broker-side and client-side filtering.

    .venv/bin/python bench/bench_keyrange.py [--records 1600] [--processing-ms 5] [--consumers 1,2,4,8]

One partition of --records records (keys user-0 .. user-999) on the reference broker (a subprocess, no
traces). For each consumer count k, k kio consumers of one group share the partition by key range
(model/key_range_assign.split(k)), each in its own thread; processing a record takes --processing-ms
(a sleep: the processing-bound consumer the seed has in mind); each consumer commits the ranges it
processed (commit_ranges) every 50 records. Two ways of filtering, each in its own group, in one run:
- broker: each consumer fetches with its KeyRanges, the broker sends only its records;
- client: each consumer fetches the whole partition and drops the records of other ranges itself.
Prints, per k and mode, the records/s from the first poll until every record was processed, the ratio to
one consumer of the same mode, and the record bytes all k consumers fetched; the goal is >= 6x at 8 consumers. Each
run checks that every record was processed exactly once.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kipcheck.impl.consumer import Consumer, TopicPartition
from kipcheck.model.key_hash import in_ranges, record_hash
from kipcheck.model.key_range_assign import split
from kipcheck.oracle.conformance.scenarios.clients import QUIET
from kipcheck.oracle.conformance.targets.embedded import EmbeddedBroker

TOPIC = "bench-keyrange"
TP = TopicPartition(TOPIC, 0)
COMMIT_EVERY = 50


def prepare(bootstrap: str, records: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    admin.create_topics([NewTopic(TOPIC, 1, 1, config={"accept.range.fetch": "true"})])[TOPIC].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, **QUIET})
    for number in range(records):
        producer.produce(TOPIC, key=f"user-{number % 1000}".encode(), value=b"x" * 100)
    assert producer.flush(60) == 0


def share_run(bootstrap: str, group: str, count: int, records: int, processing_s: float,
              broker_side: bool) -> tuple[float, int]:
    """(records/s, bytes fetched) of `count` consumers sharing the partition; checks each record is processed once."""
    processed: list[list[int]] = [[] for _ in range(count)]
    consumers = [Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                           "fetch.max.wait.ms": 50, "max.poll.records": 50}) for _ in range(count)]
    shares = split(count)
    for consumer, share in zip(consumers, shares):
        consumer.assign({TP: [share]} if broker_side else [TP])
    done = threading.Event()

    def work(consumer: Consumer, share: tuple[int, int], offsets: list[int]) -> None:
        pending: list[int] = []
        while not done.is_set():
            for record in consumer.poll(100):
                if not broker_side and not in_ranges(record_hash(record.key, record.offset), [share]):
                    continue                      # client-side filtering: another consumer's key
                time.sleep(processing_s)
                offsets.append(record.offset)
                pending.append(record.offset)
                if len(pending) >= COMMIT_EVERY:
                    consumer.commit_ranges({TP: [(offset, offset) for offset in pending]})
                    pending.clear()
            if sum(len(each) for each in processed) >= records:
                done.set()
        if pending:
            consumer.commit_ranges({TP: [(offset, offset) for offset in pending]})

    threads = [threading.Thread(target=work, args=(consumer, share, offsets))
               for consumer, share, offsets in zip(consumers, shares, processed)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    fetched_bytes = sum(consumer.fetcher.fetched_bytes for consumer in consumers)
    for consumer in consumers:
        consumer.close()
    every = sorted(offset for offsets in processed for offset in offsets)
    assert every == list(range(records)), f"{len(every)} processed, {len(set(every))} distinct, of {records}"
    return records / elapsed, fetched_bytes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1600)
    parser.add_argument("--processing-ms", type=float, default=5.0)
    parser.add_argument("--consumers", default="1,2,4,8", help="consumer counts, comma-separated")
    arguments = parser.parse_args()
    try:
        counts = [int(count) for count in arguments.consumers.split(",")]
    except ValueError:
        parser.error(f"--consumers must be integers separated by commas, found {arguments.consumers!r}")
    if arguments.records < 1 or arguments.processing_ms < 0 or not counts or min(counts) < 1:
        parser.error("--records and the consumer counts must be positive, --processing-ms not negative")
    with tempfile.TemporaryDirectory() as directory, EmbeddedBroker(Path(directory), traced=False) as broker:
        prepare(broker.bootstrap, arguments.records)
        print(f"one partition, {arguments.records:,} records, {arguments.processing_ms} ms per record")
        print(f"{'consumers':>9}{'broker rec/s':>14}{'x one':>7}{'fetched KB':>12}"
              f"{'client rec/s':>14}{'x one':>7}{'fetched KB':>12}", flush=True)
        base: dict[bool, float] = {}
        for count in counts:
            line = f"{count:>9}"
            for broker_side in (True, False):
                group = f"bench-{'broker' if broker_side else 'client'}-{count}"
                rate, fetched_bytes = share_run(broker.bootstrap, group, count, arguments.records,
                                                arguments.processing_ms / 1000, broker_side)
                base.setdefault(broker_side, rate)
                line += f"{rate:>14,.0f}{rate / base[broker_side]:>7.2f}{fetched_bytes / 1024:>12,.0f}"
            print(line, flush=True)


if __name__ == "__main__":
    main()
