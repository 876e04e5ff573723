"""The reference broker beside Apache Kafka 4.2: the same workload, the same clients, one run, this machine.

    .venv/bin/python bench/bench_vs_kafka.py [--records 500000] [--partitions 4] [--repeat 3] [--latency-records 300]
    .venv/bin/python bench/bench_vs_kafka.py --before REV   # and the reference broker of git revision REV
    .venv/bin/python bench/bench_vs_kafka.py --quick        # a smoke test: small figures, not to compare

Each broker in turn (the reference broker, then one Kafka 4.2 broker in KRaft mode), alone on the machine,
driven by confluent-kafka's clients (librdkafka), on a topic of --partitions partitions:
- start-up: from launching the broker on fresh storage (Kafka: formatting included) until it first answers a
  client (AdminClient's Metadata), and again on its own storage after a clean stop (no formatting);
- produce: one Producer (acks=all, linger 5 ms) writes --records records of --value-bytes bytes in batches of at
  most 16 KiB (the Java producer's default batch.size); records/s until its last delivery report. That topic is
  the backlog every reader below reads from offset 0, after a share consumer of a group of its own has read a
  fifth of it (a warm-up: Kafka's JIT compiles the paths timed next);
- plain fetch: one Consumer assigned every partition (Fetch);
- share consumption: 1, then 4 ShareConsumers of a new share group (ShareFetch, explicit acknowledgement:
  every record accepted, the acknowledgements ride on the next ShareFetch; a record delivered again counts
  once).
  Each reader is a process of its own, started before the clock, and every reader subscribes at once; a read's
  figure is records/s from the first record's arrival at any reader to the last one's (the records the first
  arrival brought left out). The three reads run --repeat times, interleaved; the medians are printed;
- broker CPU: user + system time of the broker's process (every thread; Kafka: its JVM) during each of the
  above, per record;
- latency: one Producer (acks=all, linger 0) sends --latency-records records, one every 10 ms, each carrying its
  send time; one explicit-acknowledgement ShareConsumer receives them: p50 and p99 of arrival - send
  (CLOCK_MONOTONIC, shared by the processes);
- peak memory: the broker process's resident high-water mark (VmHWM) after all of the above.
Prints one table: figure, reference broker (and with --before, the reference broker of REV), Kafka 4.2, ratio
reference / Kafka (above 1 is the reference broker's advantage for rates, its cost for times, CPU and memory),
and the load average: on a shared machine the rates move with the load, the ratios less.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import confluent_kafka  # noqa: E402
from bench_broker import produce_all, revision_launcher  # noqa: E402  (beside this script)
from confluent_kafka import Consumer, Producer, ShareConsumer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource  # noqa: E402

from kipcheck.oracle.conformance.scenarios.clients import QUIET, create_topic  # noqa: E402
from kipcheck.oracle.conformance.targets.embedded import DEFAULT_LAUNCHER, EmbeddedBroker  # noqa: E402
from kipcheck.oracle.kafka.cluster import KafkaCluster  # noqa: E402
from kipcheck.oracle.kafka.runtime import KafkaUnavailable  # noqa: E402

TOPIC = "bench"
POLL_S = 0.1
MAX_POLL_RECORDS = 500  # a plain reader's records per poll, as many as a ShareFetch brings by default
LATENCY_INTERVAL_S = 0.01
WAIT_S = 300
BATCH_BYTES = 16384  # the producer's batches: the Java producer's default batch.size, about 130 records of 100 B
# Both brokers: share-group members learn their assignment within a second (Kafka's least heartbeat interval).
SHARE_SETTINGS = {"group.share.heartbeat.interval.ms": "1000"}
KAFKA_SETTINGS = {**SHARE_SETTINGS, "group.share.min.heartbeat.interval.ms": "1000"}


def first_answer(bootstrap: str) -> None:
    """Block until the broker answers a client's Metadata request."""
    AdminClient({"bootstrap.servers": bootstrap, **QUIET}).list_topics(timeout=60)


def read_from_earliest(bootstrap: str, groups: list[str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    resources = [ConfigResource("GROUP", group, incremental_configs=[ConfigEntry(
        "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)]) for group in groups]
    for future in admin.incremental_alter_configs(resources).values():
        future.result(60)


def drain(poll, total: int, counter, done) -> None:
    """Poll until every reader together has `total` records; report this reader's first and last arrival and how
    many records the first brought (0, 0, 0 when it got none)."""
    first = last = 0.0
    first_records = 0
    while counter.value < total:
        received = poll()
        if received:
            last = time.monotonic()
            if not first:
                first, first_records = last, received
            with counter.get_lock():
                counter.value += received
    done.put((first, last, first_records))


def share_reader(bootstrap: str, group: str, total: int, counter, ready, go, done) -> None:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                              "share.acknowledgement.mode": "explicit", **QUIET})

    def poll() -> int:
        """Accepts every record, and counts those delivered for the first time."""
        messages = [message for message in consumer.poll(POLL_S) if message.error() is None]
        for message in messages:
            consumer.acknowledge(message)
        return sum(message.delivery_count() == 1 for message in messages)

    wait_for_the_others(ready, go)
    consumer.subscribe([TOPIC])
    drain(poll, total, counter, done)
    consumer.commit_sync(60)  # the last poll's acknowledgements (not timed)
    consumer.close()


def plain_reader(bootstrap: str, partitions: int, total: int, counter, ready, go, done) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-plain", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 100, "queued.min.messages": 10_000_000, **QUIET})
    wait_for_the_others(ready, go)
    consumer.assign([TopicPartition(TOPIC, partition, 0) for partition in range(partitions)])
    drain(lambda: sum(message.error() is None for message in consumer.consume(MAX_POLL_RECORDS, POLL_S)),
          total, counter, done)
    consumer.close()


def wait_for_the_others(ready, go) -> None:
    """Say this reader is ready, then wait until every reader is."""
    with ready.get_lock():
        ready.value += 1
    go.wait(WAIT_S)


def read_rate(reader, readers_args: list[tuple], total: int) -> float:
    """Records/s from the first arrival at any reader to the last arrival (the records that first arrival brought
    left out), the readers started first."""
    context = multiprocessing.get_context("spawn")
    counter, ready, go, done = context.Value("q", 0), context.Value("i", 0), context.Event(), context.Queue()
    processes = [context.Process(target=reader, args=(*reader_args, total, counter, ready, go, done))
                 for reader_args in readers_args]
    for process in processes:
        process.start()
    deadline = time.monotonic() + WAIT_S
    while ready.value < len(processes):   # each has imported its client and made its consumer
        if time.monotonic() > deadline or not all(process.is_alive() for process in processes):
            raise SystemExit("a reader did not start")
        time.sleep(0.01)
    go.set()
    arrivals = [done.get(timeout=WAIT_S) for _ in processes]
    for process in processes:
        process.join(60)
    first, _, first_records = min(arrival for arrival in arrivals if arrival[0])
    elapsed = max(last for _, last, _ in arrivals) - first
    if elapsed <= 0:
        raise SystemExit(f"{total} records arrived in one poll: too few to time (raise --records)")
    return (total - first_records) / elapsed


def latency_reader(bootstrap: str, wanted: int, ready, latencies) -> None:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": "bench-latency",
                              "share.acknowledgement.mode": "explicit", **QUIET})
    consumer.subscribe([TOPIC + "-latency"])
    measured: list[float] = []
    deadline = time.monotonic() + WAIT_S
    while len(measured) < wanted and time.monotonic() < deadline:
        for message in consumer.poll(POLL_S):
            if message.error() is None:
                arrived = time.monotonic()
                consumer.acknowledge(message)
                if message.value() == b"warm-up":
                    ready.set()
                else:
                    measured.append(arrived - float(message.value()))
    latencies.put(measured)
    consumer.close()


def latency_ms(bootstrap: str, records: int) -> tuple[float, float]:
    """(p50, p99) of a share-consumed record's time from send to arrival, in ms."""
    create_topic(bootstrap, TOPIC + "-latency", 1)
    context = multiprocessing.get_context("spawn")
    ready, latencies = context.Event(), context.Queue()
    reader = context.Process(target=latency_reader, args=(bootstrap, records, ready, latencies))
    reader.start()
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, **QUIET})
    deadline = time.monotonic() + WAIT_S
    while not ready.is_set():  # until the reader has joined and been assigned the partition
        assert time.monotonic() < deadline, "the latency reader received nothing"
        producer.produce(TOPIC + "-latency", value=b"warm-up")
        producer.flush(60)
        ready.wait(0.2)
    for _ in range(records):
        producer.produce(TOPIC + "-latency", value=repr(time.monotonic()).encode())
        producer.poll(0)
        time.sleep(LATENCY_INTERVAL_S)
    assert producer.flush(60) == 0
    measured = latencies.get(timeout=WAIT_S)
    reader.join(60)
    assert len(measured) == records, f"the latency reader received {len(measured)} of {records} records"
    centiles = statistics.quantiles(measured, n=100)
    return centiles[49] * 1000, centiles[98] * 1000


def measure(broker, process_ids, peak_memory_bytes, args) -> dict[str, float]:
    """Every figure of one broker, started here on fresh storage and stopped at the end; `process_ids()` lists its
    processes, whose CPU time is the broker's."""
    figures = {"start-up, fresh storage (s)": timed_start(broker)}
    bootstrap, records = broker.bootstrap, args.records
    create_topic(bootstrap, TOPIC, args.partitions)
    share_groups = [f"bench-share-{readers}-{run}" for readers in (1, 4) for run in range(args.repeat)]
    read_from_earliest(bootstrap, ["bench-warm-up", "bench-latency", *share_groups])
    figures["produce (records/s)"], figures["produce: broker CPU (µs/record)"] = rate_and_cpu(
        process_ids, records, lambda: produce_all(bootstrap, TOPIC, records, args.partitions, args.value_bytes,
                                                  **{"batch.size": BATCH_BYTES})[1])
    read_rate(share_reader, [(bootstrap, "bench-warm-up")], records // 5)  # Kafka's JIT compiles its paths
    reads = {"plain fetch": (plain_reader, lambda run: [(bootstrap, args.partitions)]),
             "share, 1 consumer": (share_reader, lambda run: [(bootstrap, f"bench-share-1-{run}")]),
             "share, 4 consumers": (share_reader, lambda run: [(bootstrap, f"bench-share-4-{run}")] * 4)}
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in reads}
    for run in range(args.repeat):   # interleaved, so that each read meets the same spells of load
        for name, (reader, readers_args) in reads.items():
            runs[name].append(rate_and_cpu(process_ids, records, read_rate, reader, readers_args(run), records))
    for name, results in runs.items():
        figures[f"{name} (records/s)"] = statistics.median(rate for rate, _ in results)
        figures[f"{name}: broker CPU (µs/record)"] = statistics.median(cpu for _, cpu in results)
    p50, p99 = latency_ms(bootstrap, args.latency_records)
    figures["share end-to-end latency p50 (ms)"], figures["share end-to-end latency p99 (ms)"] = p50, p99
    figures["peak memory (MiB)"] = peak_memory_bytes() / 2**20
    broker.stop()
    figures["start-up, own storage (s)"] = timed_start(broker)
    broker.stop()
    return figures


def rate_and_cpu(process_ids, records: int, run, *arguments) -> tuple[float, float]:
    """(the records/s `run(*arguments)` returns, the broker's CPU time in µs per record while it ran)."""
    before = cpu_seconds(process_ids())
    rate = run(*arguments)
    return rate, (cpu_seconds(process_ids()) - before) / records * 1e6


def cpu_seconds(process_ids: list[int]) -> float:
    """User and system CPU time of the processes (every thread), from /proc/PID/stat (Linux only)."""
    ticks = 0
    for process_id in process_ids:
        fields = Path(f"/proc/{process_id}/stat").read_text().rsplit(")", 1)[1].split()
        ticks += int(fields[11]) + int(fields[12])   # utime, stime: the stat fields 14 and 15
    return ticks / os.sysconf("SC_CLK_TCK")


def timed_start(broker) -> float:
    began = time.monotonic()
    broker.start()
    first_answer(broker.bootstrap)
    return time.monotonic() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--latency-records", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each read, their median printed (default 3)")
    parser.add_argument("--before", metavar="REV", help="also measure the reference broker of this git revision")
    parser.add_argument("--quick", action="store_true", help="5,000 records, 30 latency records, one run of each read: "
                                                              "a smoke test")
    args = parser.parse_args()
    if args.quick:
        args.records, args.latency_records, args.repeat = 5_000, 30, 1
    with tempfile.TemporaryDirectory(prefix="bench-vs-kafka-") as work, contextlib.ExitStack() as revisions:
        launchers = {"reference": DEFAULT_LAUNCHER}
        if args.before:
            launchers = {f"ref. {args.before}": revisions.enter_context(
                revision_launcher(args.before, Path(work) / "before")), **launchers}
        columns = {name: measure_reference(Path(work) / name, launcher, args) for name, launcher in launchers.items()}
        try:
            kafka = KafkaCluster("4.2", Path(work) / "kafka", KAFKA_SETTINGS)
        except KafkaUnavailable as unavailable:
            raise SystemExit(f"Kafka 4.2 cannot run here: {unavailable}") from None
        try:
            kafka_figures = measure(kafka, lambda: [process.pid for process in kafka.processes.values()],
                                    lambda: kafka.memory_bytes("VmHWM"), args)
        finally:
            kafka.stop()
    print(f"{args.records:,} records of {args.value_bytes} B on {args.partitions} partitions; confluent-kafka "
          f"{confluent_kafka.version()} (librdkafka {confluent_kafka.libversion()[0]}); Kafka {kafka.release}, one broker")
    print(f"{'':<44}" + "".join(f"{name:>14}" for name in columns) + f"{'Kafka 4.2':>14}"
          + "".join(f"{'ratio':>8}" for _ in columns) + "   (ratio: reference / Kafka)")
    for figure, value in kafka_figures.items():
        print(f"{figure:<44}" + "".join(f"{figures[figure]:>14,.2f}" for figures in columns.values())
              + f"{value:>14,.2f}" + "".join(f"{figures[figure] / value:>8.2f}" for figures in columns.values()))
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; Python {sys.version.split()[0]}")


def measure_reference(work: Path, launcher: tuple[str, ...], args) -> dict[str, float]:
    broker = EmbeddedBroker(work, SHARE_SETTINGS, launcher=launcher, traced=False)
    try:
        return measure(broker, lambda: [broker.process.pid], broker.peak_memory_bytes, args)
    finally:
        broker.stop()

if __name__ == "__main__":
    main()
