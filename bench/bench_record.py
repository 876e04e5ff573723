"""What `kipcheck record --check` costs: throughput and added latency, through it against direct, in one run.

    .venv/bin/python bench/bench_record.py [--records 50000] [--consumers 2] [--partitions 2] [--round-trips 1000]

One reference broker (or Apache Kafka 4.2 with --kafka), and `kipcheck record --check` in front of it, both
on loopback; the same clients, the same way, once direct and once through the proxy, alternating, each on a
fresh topic and share group:
- throughput end to end (bench_broker.end_to_end): share consumers (implicit acknowledgement) started and
  joined first, then one Producer (acks=all) writes --records records; records/s from the first produce to
  the last record's arrival, and the producer's own records/s in that run. Through the proxy both the
  produce and the share consumption (ShareFetch with acknowledgements, every answer traced and judged) cross it.
- latency: --round-trips sequential round trips of each kind, timed at the client: a Produce of one record
  (acks=all: produce then flush), and a ShareFetch of one record acknowledging the previous one (a kio client,
  the path the proxy decodes, traces and judges). p50 and p99 of each, direct and through, and what the
  proxy adds.
Prints the ratios through/direct (the goal: at least 0.7) and the proxy's summary line.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from bench_broker import end_to_end, share_reader  # noqa: E402  (beside this script)
from record_support import Recording  # noqa: E402  (the tests' way to run kipcheck record)

from kipcheck.impl.consumer.connection import BrokerConnection  # noqa: E402
from kipcheck.oracle.conformance.scenarios.clients import QUIET, create_topic  # noqa: E402


def throughput(bootstrap: str, args) -> tuple[float, float]:
    topic, group = f"bench-{uuid.uuid4().hex[:6]}", f"bench-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, args.partitions)
    set_earliest(bootstrap, group, args.kafka)
    return end_to_end(bootstrap, topic, args, share_reader, [(group,)] * args.consumers)


def set_earliest(bootstrap: str, group: str, kafka: bool) -> None:
    """Kafka starts a share group at the log end unless its group config says earliest."""
    if not kafka:
        return
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    for future in AdminClient({"bootstrap.servers": bootstrap}).incremental_alter_configs([resource]).values():
        future.result(30)


def produce_round_trips(bootstrap: str, count: int) -> list[float]:
    from confluent_kafka import Producer

    topic = f"bench-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, 1)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all", **QUIET})
    producer.produce(topic, b"warm-up")
    producer.flush(30)
    times = []
    for _ in range(count):
        started = time.perf_counter()
        producer.produce(topic, b"x" * 100)
        assert producer.flush(30) == 0
        times.append((time.perf_counter() - started) * 1000)
    return times


def one_batch_each(bootstrap: str, topic: str, count: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, **QUIET})
    for _ in range(count):
        producer.produce(topic, b"x" * 100)
        producer.flush(30)


def share_fetch_round_trips(bootstrap: str, count: int, kafka: bool) -> list[float]:
    """ShareFetches of one record (Kafka acquires a whole produced batch), each accepting what the one before
    acquired (a kio client: the path the proxy decodes, traces and judges)."""
    topic, group, member = f"bench-{uuid.uuid4().hex[:6]}", f"bench-{uuid.uuid4().hex[:6]}", uuid.uuid4().hex[:22]
    create_topic(bootstrap, topic, 1)
    set_earliest(bootstrap, group, kafka)
    one_batch_each(bootstrap, topic, count + 1)
    host, port = bootstrap.rsplit(":", 1)
    connection = BrokerConnection(host, int(port), "bench-share-fetch", 30_000, 100_000_000)
    connection.request(76, 1, group_id=group, member_id=member, member_epoch=0, rack_id=None,
                       subscribed_topic_names=[topic])
    topic_id = connection.request(3, 12, topics=[{"topic_id": None, "name": topic}], allow_auto_topic_creation=False,
                                  include_topic_authorized_operations=False).topics[0].topic_id
    times, epoch, previous, deadline = [], 0, [], time.monotonic() + 120
    while len(times) < count and time.monotonic() < deadline:
        acks = [{"first_offset": first, "last_offset": last, "acknowledge_types": [1]} for first, last in previous]
        started = time.perf_counter()
        answer = connection.request(78, 1, group_id=group, member_id=member, share_session_epoch=epoch, max_wait=500,
                                    min_bytes=1, max_bytes=1 << 20, max_records=1, batch_size=1,
                                    topics=[{"topic_id": topic_id, "partitions": [{
                                        "partition_index": 0, "acknowledgement_batches": acks}]}],
                                    forgotten_topics_data=[])
        elapsed = (time.perf_counter() - started) * 1000
        epoch = 1 if epoch == 0 else epoch + 1
        previous = [(run.first_offset, run.last_offset) for topic_answer in answer.responses
                    for part in topic_answer.partitions for run in part.acquired_records]
        if previous and acks:
            times.append(elapsed)
    connection.close()
    return times


def percentile(times: list[float], fraction: float) -> float:
    return statistics.quantiles(times, n=100)[int(fraction * 100) - 1] if len(times) > 1 else times[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--consumers", type=int, default=2)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--round-trips", type=int, default=1000)
    parser.add_argument("--kafka", action="store_true", help="Apache Kafka 4.2 instead of the reference broker")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kipcheck-bench-record-") as work_dir:
        cluster = start_cluster(Path(work_dir), args.kafka)
        try:
            port = cluster.ports[0] if args.kafka else cluster.port
            with Recording([("127.0.0.1", port)], Path(work_dir) / "traces",
                           settings={"group.share.partition.max.record.locks": "10000"}) as recording:
                results = measure(f"127.0.0.1:{port}", recording.bootstrap, args)
            summary = [line for line in recording.lines if " traces, " in line]
        finally:
            cluster.stop()
    report(results, args, summary, recording.exit_code)


def start_cluster(work_dir: Path, kafka: bool):
    settings = {"group.share.partition.max.record.locks": "10000"}
    if kafka:
        from kipcheck.oracle.kafka.cluster import KafkaCluster

        cluster = KafkaCluster("4.2", work_dir / "kafka", settings)
    else:
        from kipcheck.oracle.conformance.targets.embedded import EmbeddedBroker

        cluster = EmbeddedBroker(work_dir / "broker", {**settings, "share.auto.offset.reset": "earliest",
                                                       "group.share.heartbeat.interval.ms": "1000"}, traced=False)
    cluster.start()
    return cluster


def measure(direct: str, through: str, args) -> dict[str, dict]:
    results: dict[str, dict] = {"direct": {}, "record": {}}
    for name, bootstrap in (("direct", direct), ("record", through), ("direct", direct), ("record", through)):
        share, produced = throughput(bootstrap, args)
        best = results[name]
        best["share"], best["produce"] = max(best.get("share", 0), share), max(best.get("produce", 0), produced)
    for name, bootstrap in (("direct", direct), ("record", through)):
        results[name]["produce_ms"] = produce_round_trips(bootstrap, args.round_trips)
        results[name]["share_fetch_ms"] = share_fetch_round_trips(bootstrap, args.round_trips, args.kafka)
    return results


def report(results: dict, args, summary: list[str], exit_code: int | None) -> None:
    direct, record = results["direct"], results["record"]
    print(f"{args.records} records x {args.value_bytes} B, {args.partitions} partitions, {args.consumers} share "
          f"consumers, {'Apache Kafka 4.2' if args.kafka else 'the reference broker'}; best of two runs each")
    print(f"{'':<40}{'direct':>12}{'record':>12}{'record/direct':>15}")
    for key, label in (("share", "share consumption records/s (e2e)"), ("produce", "produce records/s")):
        print(f"{label:<40}{direct[key]:>12,.0f}{record[key]:>12,.0f}{record[key] / direct[key]:>15.2f}")
    for key, label in (("produce_ms", "Produce round trip"), ("share_fetch_ms", "ShareFetch round trip")):
        for fraction in (0.5, 0.99):
            d, r = percentile(direct[key], fraction), percentile(record[key], fraction)
            print(f"{label + f' p{int(fraction * 100)} ms':<40}{d:>12.2f}{r:>12.2f}{'added':>9} {r - d:.2f} ms")
    print(f"kipcheck record --check: exit {exit_code}; {' '.join(summary)}")


if __name__ == "__main__":
    main()
