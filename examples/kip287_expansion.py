"""KIP-287 end to end: a per-key running count whose topic and processors grow while a producer keeps writing.

    .venv/bin/python examples/kip287_expansion.py                    # the reference broker, KIP-848, server-side assignor
    .venv/bin/python examples/kip287_expansion.py --broker kafka     # Apache Kafka 4.2, classic protocol, client-side
    .venv/bin/python examples/kip287_expansion.py --kill             # a new processor is killed -9 while it catches up
    .venv/bin/python examples/kip287_expansion.py --bootstrap HOST:PORT   # your own cluster (classic protocol)

The seed's job (KIP-287, "Support processor expansion"): 10 partitions read by
10 processors, each an OS process that keeps a running count per key and
outputs it for every record; the topic grows to 15 partitions, then 5 new
processors join (each catches up from the log without output, says ready, and
takes its partitions over at the offset their old owner committed), then the
topic grows to 18. A producer writes all along (it pauses only while a
partition expansion reads the log ends: spec/expansion.md EX-5); each record's
value is its key's sequence number. Processors use kipcheck's consumer (even
ones) and confluent-kafka's (odd ones) to read.

At the end it checks that the output equals a single-threaded running count
over the records read back from the topic (each key's records in order
across its partition splits): every record output once, with its key's count
at that record, none lost, none doubled; and it judges every trace the
producer, the processors and the broker wrote with `kipcheck check`. Exit
status 0 only when both hold; 1 otherwise, naming what failed. Everything is
kept under --work-dir (a temporary directory by default): outputs/,
traces/, logs/.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from kipcheck.impl.expansion import JobRecord, Output
from kipcheck.impl.expansion.expander import Expander
from kipcheck.impl.expansion.producer import JobProducer
from kipcheck.impl.expansion.tracing import ExpansionTrace
from kipcheck.impl.job import ProcessorSettings, run_processor
from kipcheck.model.expansion import drain_points
from kipcheck.oracle.check import Verdict, check_file
from kipcheck.oracle.kafka.cluster import KafkaCluster
from kipcheck.oracle.kafka.runtime import KafkaUnavailable

TOPIC, GROUP = "orders", "running-count"
SEED = [("partitions", 15), ("processors", 15), ("partitions", 18)]
QUIET = {"log_level": 0}
REFERENCE_SETTINGS = {"group.consumer.assignors": "uniform,range,linear-hashing",
                      "group.consumer.heartbeat.interval.ms": "500", "group.initial.rebalance.delay.ms": "0"}
KAFKA_SETTINGS = {"group.initial.rebalance.delay.ms": "0"}
CATCH_UP_LAG_MAX = 20  # records a new processor may still be behind when it says ready
MAX_RECORDS = 20  # records a processor reads from one partition per round
RATE_MAX = 100_000  # records/s the producer is asked for, at most
PHASE_SECONDS_MAX = 3600.0


def running_count(key: bytes, value: bytes | None, state: int | None) -> tuple[int, int]:
    """The job's function: the key's state is its count; the output is the count after this record."""
    count = (state or 0) + 1
    return count, count


# -- one processor, in a process of its own ------------------------------------------------------

def processor_main(args: argparse.Namespace) -> int:
    """Runs one processor until SIGTERM; every output is one line of its output file, written before the commit
    that covers it (so none is lost when the process dies)."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    work = Path(args.work_dir)
    output = os.open(work / "outputs" / f"processor-{args.index}.{os.getpid()}.jsonl",
                     os.O_WRONLY | os.O_CREAT | os.O_APPEND)

    def emit(out: Output) -> None:
        line = json.dumps([out.partition, out.offset, out.key.decode(), out.value, time.time()])
        os.write(output, line.encode() + b"\n")

    settings = ProcessorSettings(args.bootstrap, GROUP, TOPIC, args.index, args.protocol,
                                 "kio" if args.index % 2 == 0 else "confluent", args.max_records, CATCH_UP_LAG_MAX)
    run_processor(settings, running_count, emit, stop, work / "traces")
    return 0


# -- the job -----------------------------------------------------------------------------------

class Job:
    """The producer, the processors' processes and the expansion tool of one run."""

    def __init__(self, bootstrap: str, work: Path, protocol: str, rate: int, keys: int = 200, seed: int = 287,
                 launcher: tuple[str, ...] = (sys.executable, __file__)):
        self.bootstrap, self.work, self.protocol, self.rate = bootstrap, work, protocol, rate
        self.launcher = launcher  # the command a processor's process runs, before `processor --index ...`
        self.events: list[tuple[float, str]] = []  # (time.time(), what the job did): the run's timeline
        for name in ("outputs", "traces", "logs"):
            (work / name).mkdir(parents=True, exist_ok=True)
        self.keys = [f"customer-{number}".encode() for number in range(keys)]
        self.random = random.Random(seed)
        self.processes: dict[int, subprocess.Popen] = {}
        self.expander = Expander(bootstrap, GROUP, TOPIC)
        record = self.expander.start(10)
        self.producer = JobProducer(Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                                              "linger.ms": 5, **QUIET}), TOPIC, record,
                                    ExpansionTrace.open(work / "traces", "producer", record.initial, CATCH_UP_LAG_MAX))
        self.expander.producers.append(self.producer)
        self.stopping = threading.Event()
        self.sequence: Counter = Counter()
        self.writer = threading.Thread(target=self._produce, name="producer", daemon=True)

    def _produce(self) -> None:
        while not self.stopping.is_set():
            key = self.random.choice(self.keys)
            self.sequence[key] += 1
            self.producer.produce(key, str(self.sequence[key]).encode())
            time.sleep(1 / self.rate)

    def start_processor(self, index: int, max_records: int = MAX_RECORDS) -> None:
        log = open(self.work / "logs" / f"processor-{index}.log", "ab")
        self.processes[index] = subprocess.Popen(
            [*self.launcher, "processor", "--bootstrap", self.bootstrap, "--index", str(index),
             "--protocol", self.protocol, "--work-dir", str(self.work), "--max-records", str(max_records)],
            stdout=log, stderr=log)
        log.close()

    def check_processors(self) -> None:
        dead = {index: process.returncode for index, process in self.processes.items() if process.poll() is not None}
        if dead:
            raise RuntimeError(f"processors ended: {dead} (see {self.work / 'logs'})")

    def stop(self) -> None:
        """The producer and every processor stopped (SIGTERM: each leaves its group)."""
        self.stopping.set()
        if self.writer.is_alive():
            self.writer.join()
        for process in self.processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for index, process in self.processes.items():
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                raise RuntimeError(f"processor {index} ignored SIGTERM")

    def caught_up(self) -> bool:
        """Whether the group committed every partition to its log end (every record was output)."""
        admin = AdminClient({"bootstrap.servers": self.bootstrap, **QUIET})
        request = ConsumerGroupTopicPartitions(GROUP)
        committed = {tp.partition: tp.offset for tp in
                     admin.list_consumer_group_offsets([request])[GROUP].result(30).topic_partitions}
        return all(committed.get(partition, 0) >= end for partition, end in log_ends(self.bootstrap).items())


def run(job: Job, kill: bool, phase_s: float) -> list[int]:
    """The seed's expansions while the producer writes; returns the processors killed -9 (during catch-up)."""
    killed = []
    for index in range(10):
        job.start_processor(index)
    wait_until(job, lambda: len(job.expander.holders()) == 10, "the first processors to hold every partition")
    job.writer.start()
    job.events.append((time.time(), "producing"))
    wait(job, phase_s)
    for kind, count in SEED:
        job.events.append((time.time(), f"{kind} -> {count}"))
        if kind == "partitions":
            job.expander.expand_partitions(count)
        else:
            before = job.expander.store.read().processors
            job.expander.expand_processors(count)
            for index in range(before, count):
                job.start_processor(index, max_records=2 if kill and index == 12 else MAX_RECORDS)
            if kill:
                killed.append(kill_during_catch_up(job, 12))
            job.expander.wait_for_handovers()
        job.events.append((time.time(), f"{kind} = {count}"))
        wait(job, phase_s)
        job.check_processors()
    job.stopping.set()
    job.writer.join()
    job.producer.close()
    job.events.append((time.time(), "produced"))
    wait_until(job, job.caught_up, "the processors to output every record")
    job.events.append((time.time(), "output"))
    return killed


def wait_until(job: Job, condition, what: str, timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        job.check_processors()
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout_s:.0f} s for {what}")
        time.sleep(0.5)


def wait(job: Job, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        job.check_processors()
        time.sleep(0.2)


def kill_during_catch_up(job: Job, index: int) -> int:
    """kill -9 the new processor once it rebuilds state and before it says ready, then start it again."""
    trace = job.work / "traces" / f"expansion.processor-{index}.jsonl"
    deadline = time.monotonic() + 120
    while not (trace.exists() and '"op":"rebuild"' in trace.read_text()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"processor {index} did not start catching up")
        time.sleep(0.005)
    job.processes[index].kill()
    job.processes[index].wait()
    if '"op":"ready"' in trace.read_text():
        raise RuntimeError(f"processor {index} said ready before it was killed: not killed during catch-up")
    job.start_processor(index)
    return index


# -- checking ------------------------------------------------------------------------------------

def log_ends(bootstrap: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "log-ends", **QUIET})
    try:
        partitions = len(consumer.list_topics(TOPIC, timeout=30).topics[TOPIC].partitions)
        return {partition: consumer.get_watermark_offsets(TopicPartition(TOPIC, partition), 30)[1]
                for partition in range(partitions)}
    finally:
        consumer.close()


def read_topic(bootstrap: str) -> list[tuple[int, int, bytes, int]]:
    """Every record of the topic: (partition, offset, key, sequence number)."""
    ends = log_ends(bootstrap)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "read-back", "enable.auto.commit": False,
                         **QUIET})
    consumer.assign([TopicPartition(TOPIC, partition, OFFSET_BEGINNING) for partition in ends])
    records, deadline = [], time.monotonic() + 120
    while len(records) < sum(ends.values()) and time.monotonic() < deadline:
        for message in consumer.consume(1000, 0.5):
            if message.error() is None:
                records.append((message.partition(), message.offset(), message.key(), int(message.value())))
    consumer.close()
    return records


def reference_counts(records, record: JobRecord) -> dict[tuple[int, int], int]:
    """The single-threaded running count: each key's records in order, a split source's before its new
    partition's (a partition's depth is how many splits it is from one of the first ones)."""
    by_key = defaultdict(list)
    for partition, offset, key, _ in records:
        by_key[key].append((len(drain_points(partition, record.splits)), offset, partition))
    expected = {}
    for chain in by_key.values():
        for count, (_, offset, partition) in enumerate(sorted(chain), start=1):
            expected[partition, offset] = count
    return expected


def read_outputs(work: Path) -> list[tuple[int, int, int]]:
    outputs = []
    for path in sorted((work / "outputs").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            partition, offset, _, value, _ = json.loads(line)
            outputs.append((partition, offset, value))
    return outputs


def compare(work: Path, records: list[tuple[int, int, bytes, int]], record: JobRecord) -> list[str]:
    """What differs between the job's output and the reference over the topic's `records` (empty: equal)."""
    expected = reference_counts(records, record)
    problems = [f"{partition}:{offset} is its key's record {sequence} but the reference counts {expected[partition, offset]}"
                for partition, offset, _, sequence in records if expected[partition, offset] != sequence]
    outputs = read_outputs(work)
    times = Counter((partition, offset) for partition, offset, _ in outputs)
    problems += [f"{place} output {count} times" for place, count in times.items() if count > 1]
    problems += [f"{place} never output" for place in expected if place not in times]
    problems += [f"{partition}:{offset} output {value}, the reference says {expected.get((partition, offset))}"
                 for partition, offset, value in outputs if expected.get((partition, offset)) != value]
    return problems


def judge(directories: list[Path], killed_incarnations: list[Path]) -> dict[Path, Verdict]:
    """Every trace under `directories` judged; a killed process's trace loses its partial last line first."""
    for path in killed_incarnations:
        data = path.read_bytes()
        path.write_bytes(data[:data.rfind(b"\n") + 1])
    return {path: check_file(path) for directory in directories for path in sorted(directory.rglob("*.jsonl"))}


# -- the command ---------------------------------------------------------------------------------

@dataclass
class Outcome:
    job: Job
    record: JobRecord  # the job record at the end
    records: list[tuple[int, int, bytes, int]]  # the topic read back: (partition, offset, key, sequence number)
    protocol: str
    killed: list[int]
    problems: list[str]  # how the run or its output went wrong (empty: the output equals the reference)
    verdicts: dict[Path, Verdict]

    @property
    def ok(self) -> bool:
        return not self.problems and bool(self.verdicts) and all(self.verdicts.values())


def execute(args: argparse.Namespace, launcher: tuple[str, ...] = (sys.executable, __file__)) -> Outcome:
    """One run of the job on the broker `args` names, its output compared and its traces judged."""
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="kip287-"))
    broker = start_broker(args, work)
    protocol = args.protocol or ("consumer" if args.broker == "reference" and not args.bootstrap else "classic")
    bootstrap = args.bootstrap or broker.bootstrap
    killed, problems = [], []
    try:
        job = Job(bootstrap, work / "job", protocol, args.rate, launcher=launcher)
        try:
            killed = run(job, args.kill, args.phase_seconds)
        except (RuntimeError, TimeoutError) as error:
            problems.append(f"the run failed: {error}")
        finally:
            job.stop()
        record = job.expander.store.read()
        records = read_topic(bootstrap)
        problems += compare(job.work, records, record)
    finally:
        if broker is not None:
            broker.stop()
    killed_traces = [job.work / "traces" / f"expansion.processor-{index}.jsonl" for index in killed]
    verdicts = judge([job.work / "traces", work / "broker"], killed_traces)
    return Outcome(job, record, records, protocol, killed, problems, verdicts)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.command == "processor":
        return processor_main(args)
    try:
        outcome = execute(args)
    except KafkaUnavailable as reason:
        print(f"Apache Kafka cannot run here: {reason}", file=sys.stderr)
        return 2
    record, failed = outcome.record, [v.summary() for v in outcome.verdicts.values() if not v]
    print(f"{len(read_outputs(outcome.job.work))} outputs over {record.partitions} partitions and "
          f"{record.processors} processors ({outcome.protocol} protocol), killed during catch-up: "
          f"{outcome.killed or 'none'}")
    print(f"output {'equals' if not outcome.problems else 'differs from'} the single-threaded running count"
          + "".join(f"\n  {problem}" for problem in outcome.problems[:20]))
    print(f"{len(outcome.verdicts)} traces judged: {'all ok' if not failed else f'{len(failed)} not ok'}"
          + "".join(f"\n  {summary}" for summary in failed[:20]))
    print(f"work dir: {outcome.job.work.parent}")
    return 0 if outcome.ok else 1


def start_broker(args: argparse.Namespace, work: Path):
    """The reference broker or Apache Kafka under `work`, or None for --bootstrap."""
    if args.bootstrap:
        return None
    if args.broker == "kafka":
        broker = KafkaCluster("4.2", work / "kafka", KAFKA_SETTINGS)
    else:
        from kipcheck.oracle.conformance.targets.embedded import EmbeddedBroker
        broker = EmbeddedBroker(work / "broker", REFERENCE_SETTINGS)
    broker.start()
    return broker


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("command", nargs="?", default="run", choices=["run", "processor"],
                        help="run the job (default); `processor` is one processor, which the job starts")
    parser.add_argument("--broker", choices=["reference", "kafka"], default="reference")
    parser.add_argument("--bootstrap", help="a cluster of your own instead (topics orders and kip287-jobs)")
    parser.add_argument("--protocol", choices=["consumer", "classic"],
                        help="the group protocol (default: consumer on the reference broker, else classic)")
    parser.add_argument("--kill", action="store_true", help="kill -9 a new processor while it catches up")
    parser.add_argument("--rate", type=int, default=300, help="records produced per second (default 300)")
    parser.add_argument("--phase-seconds", type=float, default=4.0,
                        help="seconds of producing before the first expansion and after each (default 4)")
    parser.add_argument("--work-dir", help="where outputs, traces and logs are kept (default: a new temporary one)")
    parser.add_argument("--index", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--max-records", type=int, default=MAX_RECORDS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not 1 <= args.rate <= RATE_MAX or not 0 < args.phase_seconds <= PHASE_SECONDS_MAX:
        parser.error(f"--rate is 1 to {RATE_MAX} records/s and --phase-seconds more than 0 and at most "
                     f"{PHASE_SECONDS_MAX:g}, found {args.rate} and {args.phase_seconds:g}")
    return args


if __name__ == "__main__":
    sys.exit(main())
