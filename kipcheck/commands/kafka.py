"""kipcheck kafka: Apache Kafka itself (start a cluster, run one of its classes), fetched through Maven."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import threading
from pathlib import Path

from kipcheck.model.profiles import KAFKA_42, KAFKA_PROFILES

DESCRIPTION = """\
Apache Kafka itself, the anchor kipcheck is measured against. Its jars come
from Maven Central through java/pom.xml (pinned per release line), fetched
into Maven's cache on first use.

  kipcheck kafka start --version 4.2 --port 9092 --data-dir DIR [--set NAME=VALUE ...] [--brokers 3]
      formats KRaft storage (the first time) and runs one combined broker and
      controller on loopback, with share groups on; --brokers 3 adds brokers on
      the next ports. Prints `listening on HOST:PORT[,HOST:PORT...]` once clients
      can use it; SIGTERM or Ctrl-C stops it cleanly.
  kipcheck kafka run-class [--version 4.2] CLASS ARGS...
      runs a class from the same jars: Kafka's own command-line tools, e.g.
      org.apache.kafka.tools.consumer.group.ShareGroupCommand --bootstrap-server 127.0.0.1:9092 --list
  kipcheck kafka share-state --bootstrap HOST:PORT --trace-dir DIR [--version 4.2] [--set NAME=VALUE ...]
      reads back what Kafka's share coordinator stored in __share_group_state
      (a plain consumer, Kafka's own record serde) and writes one share-state
      trace per share-partition, to judge with `kipcheck check DIR`. The
      coordinator settings the records are judged with are asked of the
      brokers; --set gives them where the brokers do not say, e.g.
      share.coordinator.cold.partition.snapshot.interval.ms=300000.
  kipcheck kafka fetch [--version 4.2 ...]
      fetches the jars and builds kipcheck's Java programs against them (what
      `make test` does), and prints each classpath's size.

exit status: 0 done, 1 Kafka failed (or its records could not be read), 2 bad arguments or Kafka cannot run
here (no Java 17+, no JDK for kipcheck's Java programs, no Maven)."""


def configure(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    start = actions.add_parser("start", help="run a Kafka cluster on loopback until SIGTERM")
    _version(start)
    start.add_argument("--port", type=int, default=9092, help="the first broker's port (default 9092; 0: any free)")
    start.add_argument("--data-dir", type=Path, help="storage of every node (default: a temporary directory)")
    start.add_argument("--brokers", type=int, default=1, help="brokers in the cluster, 1 to 9 (default 1)")
    start.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                       help="a broker setting by Kafka's name, e.g. group.share.record.lock.duration.ms=15000")
    start.add_argument("--heap-mb", type=int, default=512, help="each node's JVM heap (default 512)")
    run_class = actions.add_parser("run-class", help="run a class from Kafka's jars (its command-line tools)")
    _version(run_class)
    run_class.add_argument("main_class", metavar="CLASS")
    run_class.add_argument("arguments", nargs=argparse.REMAINDER, metavar="ARGS")
    share_state = actions.add_parser("share-state", help="read the share coordinator's records back as share-state traces")
    _version(share_state)
    share_state.add_argument("--bootstrap", required=True, metavar="HOST:PORT", help="the cluster's bootstrap servers")
    share_state.add_argument("--trace-dir", required=True, type=Path, help="where the traces are written")
    share_state.add_argument("--profile", choices=KAFKA_PROFILES, default=KAFKA_42,
                             help="the profile the traces are judged by (default kafka-4.2; kafka-4.4 for the "
                                  "records of Kafka 4.4, whose archiving state only it names)")
    share_state.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                             help="a share coordinator setting to judge with instead of the brokers' "
                                  "(share.coordinator.snapshot.update.records.per.snapshot, "
                                  "share.coordinator.cold.partition.snapshot.interval.ms)")
    fetch = actions.add_parser("fetch", help="fetch Kafka's jars through Maven and build kipcheck's Java programs")
    fetch.add_argument("--version", action="append", dest="lines", metavar="LINE",
                       help="a release line (repeatable; default every pinned one)")


def _version(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--version", dest="line", default="4.2", metavar="LINE",
                        help="the release line, e.g. 4.2 or 4.4 (its pinned patch release runs; default 4.2)")


def run(args: argparse.Namespace) -> int:
    from kipcheck.oracle.kafka.runtime import KafkaUnavailable

    try:
        return {"start": _start, "run-class": _run_class, "fetch": _fetch, "share-state": _share_state}[args.action](args)
    except KafkaUnavailable as error:
        print(f"kipcheck kafka: {error}", file=sys.stderr)
        return 2


def _fetch(args: argparse.Namespace) -> int:
    from kipcheck.oracle.kafka.runtime import KafkaRuntime, programs_jar, release_lines

    for line in args.lines or sorted(release_lines()):
        runtime = KafkaRuntime.resolve(line)
        programs_jar(line)
        print(f"Apache Kafka {runtime.release}: {len(runtime.classpath.split(os.pathsep))} jars, "
              f"kipcheck's Java programs built against them")
    return 0


def _share_state(args: argparse.Namespace) -> int:
    from kipcheck.oracle.kafka.share_state_topic import SETTING_DEFAULTS, ReadBackFailed, read_back

    settings = _settings(args.set)
    if settings is None:
        return 2
    unknown = sorted(set(settings) - set(SETTING_DEFAULTS))
    if unknown or not all(value.isdigit() for value in settings.values()):
        print(f"kipcheck kafka: --set takes {' or '.join(SETTING_DEFAULTS)} with a whole number, not "
              f"{', '.join(unknown) or settings}", file=sys.stderr)
        return 2
    try:
        done = read_back(args.bootstrap, args.trace_dir, args.line, {name: int(value) for name, value in settings.items()},
                         args.profile)
    except (ReadBackFailed, OSError) as error:
        print(f"kipcheck kafka: {error}", file=sys.stderr)
        return 1
    pruned = f"; {done.pruned_keys} keys start after pruning ({done.skipped} records before their first snapshot " \
             f"not judged)" if done.pruned_keys else ""
    unknown_types = f"; {done.unknown} records of unknown types skipped" if done.unknown else ""
    print(f"{done.records} records of {done.keys} share-partitions read back from __share_group_state{pruned}"
          f"{unknown_types}")
    print(f"{len(done.paths)} traces in {args.trace_dir} (judge them: kipcheck check {args.trace_dir})")
    return 0


def _settings(items: list[str]) -> dict[str, str] | None:
    """--set NAME=VALUE items as a dict; None (the reason printed) when one is not NAME=VALUE."""
    settings = {}
    for item in items:
        name, equals, value = item.partition("=")
        if not equals or not name:
            print(f"kipcheck kafka: --set takes NAME=VALUE, not {item!r}", file=sys.stderr)
            return None
        settings[name] = value
    return settings


def _run_class(args: argparse.Namespace) -> int:
    from kipcheck.oracle.kafka.runtime import LOG4J_CONFIG, KafkaRuntime

    runtime = KafkaRuntime.resolve(args.line)
    log4j = Path(tempfile.mkdtemp(prefix="kipcheck-kafka-")) / "log4j2.properties"
    log4j.write_text(LOG4J_CONFIG)
    command = runtime.java_command(args.main_class, args.arguments, 256, log4j)
    sys.stdout.flush()
    os.execv(command[0], command)  # the tool's own output and exit status, as if run directly


def _start(args: argparse.Namespace) -> int:
    from kipcheck.oracle.kafka.cluster import KafkaCluster, KafkaFailed

    settings = _settings(args.set)
    if settings is None:
        return 2
    if not 0 <= args.port <= 65535 - args.brokers or not 1 <= args.brokers <= 9 or args.heap_mb < 128:
        print("kipcheck kafka: --port must be a TCP port, --brokers 1 to 9, --heap-mb at least 128", file=sys.stderr)
        return 2
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="kipcheck-kafka-"))
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    cluster = KafkaCluster(args.line, data_dir, settings, args.port, args.brokers, args.heap_mb)
    try:
        cluster.start()
    except KafkaFailed as error:
        print(f"kipcheck kafka: Apache Kafka {cluster.release} did not start: {error}", file=sys.stderr)
        return 1
    print(f"Apache Kafka {cluster.release}, data in {data_dir}", file=sys.stderr)
    print(f"listening on {cluster.bootstrap}", flush=True)
    try:
        while not stopping.wait(1.0):
            if not cluster.alive():
                print(f"kipcheck kafka: a node exited:\n{cluster.log_tail()}", file=sys.stderr)
                cluster.kill()
                return 1
    except KeyboardInterrupt:
        pass
    cluster.stop()
    return 0
