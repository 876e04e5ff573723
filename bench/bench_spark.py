"""Spark benchmarks: `kipcheck check --spark` against the plain checker, and the two connectors.

    .venv/bin/python bench/bench_spark.py check                 # 1,000 traces of 10,000 steps
    .venv/bin/python bench/bench_spark.py check --traces 300 --repeat 2 --workers 2
    .venv/bin/python bench/bench_spark.py connectors            # the headline: keyrange k = 1 .. 32; share vs rate
    .venv/bin/python bench/bench_spark.py connectors --records 2000 --ranges 1,4,16 --share-records 2000

`check` generates share-partition traces (bench_check.py's generator, seeds 1..N) into a
temporary directory and times, in one run, wall clock: the single-process checker
(check_file on each, one core), then check_on_spark with local[1], local[2] and on a Spark
standalone cluster of --workers one-core workers started on loopback (impl/spark/standalone.py;
the cluster's own start-up is printed apart), each including its session's start-up (timed
alone too, on one small trace), best of --repeat rounds (interleaved); it prints the times, the ratios to the single process and to
local[1] (one core to two), and the load average before and after: on a shared machine the
cores are not all the checker's.

`connectors` starts the reference broker, fills one-partition topics, and prints:
(1) kipcheck-keyrange batch reads with keyRangesPerPartition k = 1, 2, 4, 8, 16, 32 (--ranges) and a
processing-bound job (--work-ms per record, sleeping, as a call to another service would: tasks may
outnumber cores) on local[N], N the largest k, so k tasks run at once, with broker-side key-range fetch
(keyRangeFetch=broker: each task fetches its own records) and client-side filtering
(keyRangeFetch=client: each of the k tasks fetches the whole partition), side by side: rows/s, the
ratio to k=1 of the same mode, the bound (all records over the largest slice's: the key hash's spread
caps the speed-up), the record bytes the k tasks fetched (their read_slice run again in this process,
counting its consumer's fetched bytes), rows/s of the same reads without processing, and the load
average. Before each k a job holding k tasks a second starts the Python workers k tasks need (Spark
keeps an idle worker a minute) and loads the connector in each: what is timed is the reading and the
processing, not the workers' start-up. (2) kipcheck-share as an availableNow stream into the noop sink beside Spark's built-in
`rate` source into the same sink, the machine's ceiling (rows over the micro-batches' busy time). A
share micro-batch is one poll, so it holds at most the partition's in-flight limit
(group.share.partition.max.record.locks, Kafka's default 2,000).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import tempfile
import time
from pathlib import Path

from kipcheck.oracle.check import check_file
from kipcheck.oracle.spark_check import check_on_spark

HERE = Path(__file__).resolve().parent
SMALL_TRACE = HERE.parent / "oracle" / "examples" / "share-partition" / "kip-lock-expiry.jsonl"
WORKERS_HELD_S = 1.0


def trace_generator():
    spec = importlib.util.spec_from_file_location("bench_check", HERE / "bench_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.generate


def timed_on_spark(paths: list[str], master: str, plain: list) -> float:
    """Wall-clock seconds of check_on_spark on `master` (its session's start-up included), which must agree."""
    started = time.perf_counter()
    verdicts = check_on_spark(paths, master)
    elapsed = time.perf_counter() - started
    assert verdicts == plain, f"{master} disagrees with the plain checker"
    return elapsed


def generated_traces(folder: str, traces: int, steps: int) -> list[str]:
    generate = trace_generator()
    paths = [str(Path(folder) / f"trace-{seed}.jsonl") for seed in range(1, traces + 1)]
    started = time.perf_counter()
    for seed, path in enumerate(paths, 1):
        generate(Path(path), steps, "kip", seed)
    size_mb = sum(os.path.getsize(path) for path in paths) / 1e6
    print(f"generated {traces} traces x {steps} steps ({size_mb:.0f} MB) in {time.perf_counter() - started:.0f} s")
    return paths


def bench_check(options) -> None:
    from kipcheck.impl.spark.standalone import StandaloneCluster

    with tempfile.TemporaryDirectory() as folder, contextlib.ExitStack() as stack:
        paths = generated_traces(folder, options.traces, options.steps)
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        started = time.perf_counter()
        plain = [check_file(path) for path in paths]
        single_s = time.perf_counter() - started
        assert all(plain), "the generated traces must pass"
        masters = {"spark local[1]": "local[1]", "spark local[2]": "local[2]"}
        if options.workers:
            started = time.perf_counter()
            cluster = stack.enter_context(StandaloneCluster(Path(folder) / "cluster", workers=options.workers))
            print(f"standalone cluster of {options.workers} one-core workers up in "
                  f"{time.perf_counter() - started:.0f} s")
            masters[f"spark {options.workers} workers"] = cluster.master_url
        small = [str(SMALL_TRACE)]
        best = dict.fromkeys(masters, float("inf"))
        start_up = dict.fromkeys(masters, float("inf"))
        for _ in range(options.repeat):  # interleaved: each round sees about the same load on every master
            for name, master in masters.items():
                start_up[name] = min(start_up[name], timed_on_spark(small, master, [check_file(SMALL_TRACE)]))
                best[name] = min(best[name], timed_on_spark(paths, master, plain))
        print(f"{'single process':26} {single_s:7.1f} s  1.00x")
        for name, elapsed in best.items():
            print(f"{name:26} {elapsed:7.1f} s  {single_s / elapsed:.2f}x, {best['spark local[1]'] / elapsed:.2f}x "
                  f"local[1] (best of {options.repeat}; start-up included, alone {start_up[name]:.1f} s)")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


def slow(work_ms: float):
    """A mapInArrow function that spends `work_ms` per record (sleeping: an I/O-bound job)."""
    def process(batches):
        for batch in batches:
            time.sleep(batch.num_rows * work_ms / 1000)
            yield batch
    return process


def held(seconds: float):
    """A mapInArrow function that loads the connector and holds its task `seconds` once, keeping nothing:
    tasks overlap, so each starts its own Python workers, and every worker has the connector loaded."""
    def process(batches):
        import kipcheck.impl.spark.keyrange  # noqa: F401 (a worker may read a slice next: loaded already)
        time.sleep(seconds)
        for _ in batches:
            pass
        yield from ()
    return process


def rows_per_second(action) -> tuple[int, float]:
    started = time.perf_counter()
    rows = action()
    return rows, rows / (time.perf_counter() - started)


def fetched_bytes(bootstrap: str, topic: str, ranges: int, fetch: str) -> int:
    """The record bytes the k tasks of a batch read fetch: the tasks' own code (read_slice), run here."""
    from kipcheck.impl.spark import keyrange

    settings = keyrange.settings_of({"kafka.bootstrap.servers": bootstrap, "subscribe": topic,
                                     "keyRangesPerPartition": str(ranges), "keyRangeFetch": fetch}, streaming=False)
    counted: list[int] = []
    for piece in keyrange.KeyRangeBatchReader(settings).partitions():
        for _ in keyrange.read_slice(settings, piece, counted):
            pass
    return sum(counted)


def balance_bound(keys: list[bytes], ranges: int) -> float:
    """The speed-up k tasks can reach at most: all records over the largest slice's (the key hash's spread)."""
    from kipcheck.model.key_hash import in_ranges, record_hash
    from kipcheck.model.key_range_assign import split

    hashes = [record_hash(key, offset) for offset, key in enumerate(keys)]
    return len(keys) / max(sum(1 for value in hashes if in_ranges(value, [share])) for share in split(ranges))


def bench_keyrange(spark, bootstrap: str, topic: str, keys: list[bytes], work_ms: float, all_ranges: list[int]) -> None:
    records = len(keys)
    print(f"kipcheck-keyrange, one partition of {records} records ({len(set(keys))} keys), batch reads, "
          f"{work_ms} ms per record, {spark.sparkContext.master}; bound: records over the largest slice's")
    print(f"  {'fetch':7}{'k':>3}{'rows/s':>10}{'vs k=1':>8}{'bound':>7}{'fetched KiB':>13}{'read only rows/s':>18}"
          f"{'load':>6}")
    def reader(ranges, fetch):
        return (spark.read.format("kipcheck-keyrange").option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", topic).option("keyRangesPerPartition", ranges).option("keyRangeFetch", fetch))
    base: dict[str, float] = {}
    bounds = {ranges: balance_bound(keys, ranges) for ranges in all_ranges}
    for ranges in all_ranges:
        # k tasks at once need k Python workers reading and k processing; Spark keeps an idle one a minute,
        # so without this the timed job would start the ones the smaller k before it did not need, and a
        # worker that only processed so far would load the connector (about 0.5 s of CPU) to read a slice.
        reader(ranges, "broker").load().mapInArrow(held(WORKERS_HELD_S), "key binary").count()
        for fetch in ("broker", "client"):  # interleaved: both modes see the same machine load
            frame = reader(ranges, fetch).load()
            rows, rate = rows_per_second(lambda: frame.mapInArrow(slow(work_ms), frame.schema).count())
            assert rows == records, f"read {rows} rows of {records}"
            base.setdefault(fetch, rate)
            _, read_rate = rows_per_second(lambda: frame.count())
            kib = fetched_bytes(bootstrap, topic, ranges, fetch) / 1024
            print(f"  {fetch:7}{ranges:>3}{rate:>10.0f}{rate / base[fetch]:>7.2f}x{bounds[ranges]:>6.2f}x"
                  f"{kib:>13,.0f}{read_rate:>18.0f}"
                  f"{os.getloadavg()[0]:>6.1f}", flush=True)


def streamed_rate(query, timeout_s: float = 600) -> tuple[int, float]:
    """Rows and rows/s over the micro-batches of a finished or stopped query (its start-up excluded)."""
    progress = [entry for entry in query.recentProgress if entry["numInputRows"]]
    rows = sum(entry["numInputRows"] for entry in progress)
    busy_ms = sum(entry["durationMs"]["triggerExecution"] for entry in progress)
    return rows, rows / max(busy_ms / 1000, 1e-9)


def bench_share_and_rate(spark, bootstrap: str, topic: str, folder: str) -> None:
    query = (spark.readStream.format("kipcheck-share").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", topic).option("kafka.group.id", "bench").option("maxOffsetsPerTrigger", 20_000)
             .option("stagingLocation", f"{folder}/staging").option("kafkaConsumer.pollTimeoutMs", 5000).load()
             .writeStream.format("noop").option("checkpointLocation", f"{folder}/share-checkpoint")
             .trigger(availableNow=True).start())
    query.awaitTermination(600)
    rows, rate = streamed_rate(query)
    print(f"kipcheck-share, availableNow into noop: {rows} rows, {rate:8.0f} rows/s (micro-batch time only)")
    query = (spark.readStream.format("rate").option("rowsPerSecond", 2_000_000).load().writeStream.format("noop")
             .option("checkpointLocation", f"{folder}/rate-checkpoint").start())
    time.sleep(20)
    query.stop()
    rows, rate = streamed_rate(query)
    print(f"Spark's rate source into noop (the ceiling): {rows} rows, {rate:8.0f} rows/s (micro-batch time only)")


def bench_connectors(options) -> None:
    from kipcheck.impl.spark import local_session, register
    from kipcheck.oracle.conformance.scenarios.clients import create_topic, produce
    from kipcheck.oracle.conformance.targets.embedded import EmbeddedBroker

    with tempfile.TemporaryDirectory() as folder:
        with EmbeddedBroker(Path(folder) / "broker", {"share.auto.offset.reset": "earliest"}, traced=False) as broker:
            keys = [b"key-%d" % (index % options.keys) for index in range(options.records)]
            for topic, records in (("headline", options.records), ("share", options.share_records)):
                create_topic(broker.bootstrap, topic, 1, configs={"accept.range.fetch": "true"})
                for first in range(0, records, 10_000):
                    produce(broker.bootstrap, topic, [(0, b"key-%d" % (index % options.keys), b"x" * 100)
                                                      for index in range(first, min(first + 10_000, records))])
            spark = local_session(f"local[{max(options.ranges)}]", "kipcheck-bench")
            register(spark)
            bench_keyrange(spark, broker.bootstrap, "headline", keys, options.work_ms, options.ranges)
            bench_share_and_rate(spark, broker.bootstrap, "share", folder)
            spark.stop()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("check")
    check.add_argument("--traces", type=int, default=1000)
    check.add_argument("--steps", type=int, default=10_000)
    check.add_argument("--workers", type=int, default=2,
                       help="one-core workers of the standalone cluster on loopback (0: no cluster)")
    check.add_argument("--repeat", type=int, default=1, help="time each Spark master this many times, keep the best")
    connectors = commands.add_parser("connectors")
    connectors.add_argument("--records", type=int, default=6_000, help="records in the one-partition topic")
    connectors.add_argument("--keys", type=int, default=6_000,
                            help="distinct keys, record i having key i modulo --keys (default: one a record)")
    connectors.add_argument("--work-ms", type=float, default=5.0, help="processing time per record")
    connectors.add_argument("--share-records", type=int, default=100_000)
    connectors.add_argument("--ranges", default="1,2,4,8,16,32", help="keyRangesPerPartition values, comma-separated")
    options = parser.parse_args()
    if options.command == "connectors":
        try:
            options.ranges = [int(ranges) for ranges in options.ranges.split(",")]
        except ValueError:
            parser.error(f"--ranges must be integers separated by commas, found {options.ranges!r}")
        if min(options.ranges) < 1 or options.records < 1 or options.keys < 1:
            parser.error("--ranges, --records and --keys must be positive")
    (bench_check if options.command == "check" else bench_connectors)(options)


if __name__ == "__main__":
    main()
