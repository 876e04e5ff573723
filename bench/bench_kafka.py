"""How long does Apache Kafka take to start here, and how much memory does it hold, beside the reference broker?

For each pinned release line (or --version), one broker and then a three-broker cluster: wall-clock seconds
from launching the JVMs until every broker serves clients (ApiVersions, and node 1's metadata lists every
broker), on fresh storage (formatting included) and again after a kill -9 (recovery), and resident memory
after start-up and at the peak over a small share-group workload (1,000 records produced and share-consumed).
The reference broker's start and peak memory under the same workload are printed beside, from the same run.

    .venv/bin/python bench/bench_kafka.py
    .venv/bin/python bench/bench_kafka.py --version 4.2 --runs 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from kipcheck.oracle.conformance.targets.embedded import EmbeddedBroker
from kipcheck.oracle.kafka.cluster import KafkaCluster
from kipcheck.oracle.kafka.runtime import release_lines

RECORDS = 1_000
QUIET = {"log_level": 0}


def workload(bootstrap: str) -> None:
    """RECORDS records produced, then share-consumed to the end by one member (implicit acknowledgement)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    admin.create_topics([NewTopic("bench", 1, 1)])["bench"].result(60)
    earliest = ConfigResource("GROUP", "bench", incremental_configs=[ConfigEntry(
        "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([earliest]).values():
        future.result(60)
    producer = Producer({"bootstrap.servers": bootstrap, **QUIET})
    for number in range(RECORDS):
        producer.produce("bench", value=b"x" * 100, key=str(number).encode())
    producer.flush(60)
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": "bench", **QUIET})
    consumer.subscribe(["bench"])
    received, deadline = 0, time.monotonic() + 120
    while received < RECORDS and time.monotonic() < deadline:
        received += sum(message.error() is None for message in consumer.poll(1.0))
    consumer.close()
    if received < RECORDS:
        raise SystemExit(f"the workload received {received} of {RECORDS} records")


def timed(action) -> float:
    began = time.monotonic()
    action()
    return time.monotonic() - began


def bench_kafka(line: str, brokers: int, runs: int) -> dict:
    fresh, recovered, resident, peak = [], [], [], []
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix="bench-kafka-") as work:
            cluster = KafkaCluster(line, Path(work), brokers=brokers)
            fresh.append(timed(cluster.start))
            resident.append(cluster.memory_bytes("VmRSS"))
            workload(cluster.bootstrap)
            peak.append(cluster.memory_bytes("VmHWM"))
            cluster.kill()
            recovered.append(timed(cluster.start))
            cluster.stop()
    return {"name": f"Kafka {cluster.release}, {brokers} broker{'s' * (brokers > 1)}", "fresh": fresh,
            "recovered": recovered, "resident": resident, "peak": peak}


def bench_reference(runs: int) -> dict:
    fresh, recovered, resident, peak = [], [], [], []
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix="bench-reference-") as work:
            broker = EmbeddedBroker(Path(work), {"share.auto.offset.reset": "earliest"}, traced=False)
            fresh.append(timed(broker.start))
            resident.append(broker.memory_bytes())
            workload(broker.bootstrap)
            peak.append(broker.peak_memory_bytes())
            broker.kill()
            recovered.append(timed(broker.start))
            broker.stop()
    return {"name": "reference broker", "fresh": fresh, "recovered": recovered, "resident": resident, "peak": peak}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="append", dest="lines", help="a release line (default: every pinned one)")
    parser.add_argument("--runs", type=int, default=2, help="runs of each (default 2; medians printed)")
    args = parser.parse_args()
    rows = [bench_reference(args.runs)]
    for line in args.lines or sorted(release_lines()):
        rows += [bench_kafka(line, 1, args.runs), bench_kafka(line, 3, args.runs)]
    print(f"{'':<28}{'start, fresh':>14}{'after kill -9':>15}{'resident':>11}{'peak':>9}   (medians of {args.runs})")
    for row in rows:
        print(f"{row['name']:<28}{statistics.median(row['fresh']):>12.2f} s{statistics.median(row['recovered']):>13.2f}"
              f" s{statistics.median(row['resident']) / 2**20:>7.0f} MiB{statistics.median(row['peak']) / 2**20:>5.0f}"
              f" MiB")
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; Python {sys.version.split()[0]}")


if __name__ == "__main__":
    main()
