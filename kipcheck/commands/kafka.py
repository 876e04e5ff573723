"""kipcheck kafka: Apache Kafka itself (start a cluster, run one of its classes), fetched through Maven."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import threading
from pathlib import Path

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
  kipcheck kafka fetch [--version 4.2 ...]
      fetches the jars (what `make test` does) and prints each classpath's size.

exit status: 0 done, 1 Kafka failed, 2 bad arguments or Kafka cannot run here (no Java 17+, no Maven)."""


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
    fetch = actions.add_parser("fetch", help="fetch Kafka's jars through Maven")
    fetch.add_argument("--version", action="append", dest="lines", metavar="LINE",
                       help="a release line (repeatable; default every pinned one)")


def _version(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--version", dest="line", default="4.2", metavar="LINE",
                        help="the release line, e.g. 4.2 or 4.4 (its pinned patch release runs; default 4.2)")


def run(args: argparse.Namespace) -> int:
    from kipcheck.oracle.kafka.runtime import KafkaUnavailable

    try:
        return {"start": _start, "run-class": _run_class, "fetch": _fetch}[args.action](args)
    except KafkaUnavailable as error:
        print(f"kipcheck kafka: {error}", file=sys.stderr)
        return 2


def _fetch(args: argparse.Namespace) -> int:
    from kipcheck.oracle.kafka.runtime import KafkaRuntime, release_lines

    for line in args.lines or sorted(release_lines()):
        runtime = KafkaRuntime.resolve(line)
        print(f"Apache Kafka {runtime.release}: {len(runtime.classpath.split(os.pathsep))} jars")
    return 0


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

    settings = {}
    for item in args.set:
        name, equals, value = item.partition("=")
        if not equals or not name:
            print(f"kipcheck kafka: --set takes NAME=VALUE, not {item!r}", file=sys.stderr)
            return 2
        settings[name] = value
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
