"""kipcheck broker: run the reference broker (KIP-932 share groups over the Kafka wire protocol)."""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import logging
import sys
from pathlib import Path

from kipcheck.commands import stop_on_signals
from kipcheck.model.profiles import PROFILES

DESCRIPTION = """\
Run a one-node Kafka broker that serves KIP-932 share groups and consumer
groups (classic and KIP-848) to real clients (confluent-kafka's
ShareConsumer, Producer and Consumer): ApiVersions, Metadata, CreateTopics,
Produce, ListOffsets, Fetch, FindCoordinator, InitProducerId, AddPartitionsToTxn,
EndTxn (transactional producers; Fetch and share groups read_committed), ShareGroupHeartbeat, ShareGroupDescribe, ShareFetch, ShareAcknowledge,
JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch,
OffsetDelete, ConsumerGroupHeartbeat, ConsumerGroupDescribe, ListGroups,
DescribeGroups, and IncrementalAlterConfigs and DescribeConfigs for a share
group's share.record.lock.duration.ms and share.auto.offset.reset (resource
type GROUP). Prints "listening on HOST:PORT" when ready.

Settings (--set NAME=VALUE, Kafka's names): group.share.record.lock.duration.ms
(30000), group.share.min.record.lock.duration.ms (15000),
group.share.max.record.lock.duration.ms (60000), group.share.delivery.count.limit
(5), group.share.partition.max.record.locks (2000), group.share.max.share.sessions
(2000), share.auto.offset.reset (latest;
earliest; by_duration:<ISO-8601 duration such as PT1H>),
share.isolation.level (read_uncommitted; read_committed under profile kafka-4.2),
share.coordinator.snapshot.update.records.per.snapshot (500),
group.share.session.timeout.ms (45000), group.share.heartbeat.interval.ms (5000),
group.share.max.size (200), group.consumer.session.timeout.ms (45000),
group.consumer.heartbeat.interval.ms (5000), group.consumer.assignors
(uniform,range), group.consumer.max.size (1000), group.min.session.timeout.ms
(6000), group.max.session.timeout.ms (1800000), group.initial.rebalance.delay.ms
(3000), group.max.size (1000), offset.metadata.max.bytes (4096),
offsets.topic.segment.bytes (104857600), num.partitions (1), auto.create.topics.enable (true),
log.segment.bytes (1073741824),
log.flush.interval.messages, log.flush.interval.ms (1000), node.id (0),
advertised.listeners (PLAINTEXT://HOST:PORT; default the address listened on).
Under --profile kafka-4.2 the broker refuses to start, as Kafka 4.2 does, with
a share setting outside Kafka's range: delivery.count.limit 2..10,
partition.max.record.locks 100..10000, record.lock.duration.ms within the min
(1000..30000) and max (30000..3600000), max.share.sessions >= group.share.max.size.

Profiles: the broker serves kafka-4.2 (Apache Kafka 4.2's share groups, the
default) and kip (the KIP-932 text). It does not serve kafka-4.4: that profile
judges Apache Kafka 4.4 (and 4.3) itself, whose group-level share configs and
dead-letter queues this broker does not have; use it with `kipcheck check` and
`kipcheck conform --target kafka:4.4` (spec/README.md, "Profiles").

Individual commit and key-range fetch (seed 000's names; spec/ic.md, spec/key-range-assign.md):
accept.individual.commit (true), individual.commit.max.ranges (1000000: ranges held per
group and partition, MAX_INDIVIDUAL_COMMIT_REACHED past it), individual.commit.log.segment.bytes
(10485760), max.bytes.key.range.cache (209715200), max.bytes.fetcher.filtering (104857600: the most
filtering one batch may cost, its decompressed bytes and 96 bytes a record; past it the partition
answers MESSAGE_TOO_LARGE).
The topic config accept.range.fetch (false) is set by CreateTopics or IncrementalAlterConfigs.

Limits on what clients can make the broker hold (Kafka's names where Kafka
has the setting):
  socket.request.max.bytes (104857600)  largest request frame; a larger one
      closes its connection.
  queued.max.request.bytes (104857600)  bytes of request frames being read
      or handled, broker-wide; at least socket.request.max.bytes. A connection
      reads nothing more until its next frame fits (Kafka mutes it).
  queued.max.request.bytes.per.connection (16777216)  the same for one
      connection's pipelined requests (this broker's own); a frame alone on
      its connection is always read.
  connections.max.idle.ms (600000)  a connection with no request in flight
      that completes no frame and is sent no answer for this long is closed.
  max.connections (1000)  the broker accepts no more until one closes.
  max.connections.per.ip (2147483647)  more from one address are closed at once.
  max.broker.partitions (2000)  partitions of all topics together (KIP-578's
      name); CreateTopics beyond it answers POLICY_VIOLATION, and so does a
      request for more than 10,000 partitions in all (Kafka's own bound).
  message.max.bytes (1048588)  the largest produced batch; a larger one
      answers MESSAGE_TOO_LARGE.
  log.message.timestamp.after.max.ms (3600000), log.message.timestamp.before.max.ms
      (9223372036854775807)  how far a record's timestamp may lie ahead of or
      behind the broker's clock; beyond, INVALID_TIMESTAMP.
  num.io.threads (8)  threads that decode frames above 64 KiB, encode their
      answers, read produced records and filter key-range fetches, off the
      event loop. A request whose decoded form would hold more than
      queued.max.request.bytes.per.connection closes its connection.
  queued.request.min.bytes.per.second (1048576)  while a reader waits for
      room in queued.max.request.bytes, a frame arriving slower is closed
      (this broker's own).
  individual.commit.max.ranges.per.commit (100000)  an OffsetCommit partition
      carrying more ranges answers INVALID_REQUEST (this broker's own).
At max.connections a new connection closes the one idle the longest (a frame
trickling in counts as idle), as Kafka's KIP-402 eviction does; it waits for
a slot only while every connection has a request being handled. Every
produced record is read as Kafka's LogValidator reads it (compressed ones
through a bounded streaming decompressor) and refused with Kafka's error.
The broker raises its open-file limit to fit max.connections and the files it
keeps open, and will not start if the hard limit (ulimit -Hn) is lower.

Network: the broker has no authentication, authorization or encryption. It
listens on loopback by default; with another --host it prints a warning.

Durability: produced batches are written to the OS before the produce is
answered (they survive kill -9 of the broker) and fsync'd every
log.flush.interval.ms, after log.flush.interval.messages batches, when a
segment rolls, and at a clean stop; share-group state is fsync'd before every
acknowledgement is answered, committed offsets before every OffsetCommit is
answered. A write the disk refuses (full, read-only, an I/O
error) is answered with Kafka's retriable error (Produce and CreateTopics:
KAFKA_STORAGE_ERROR; ShareAcknowledge and ShareFetch: COORDINATOR_NOT_AVAILABLE),
leaves the files as they were, and the next request writes again as soon as the
disk accepts it. At most 512 files are open at once (half the process's file
limit if that is lower); segment files reopen on demand. SIGTERM or SIGINT
stops cleanly (traces flushed, files fsync'd).

With --trace-dir the broker writes its share-partition, share-session and
share-state traces there; judge them with `kipcheck check DIR/*.jsonl`. With
--trace-state too, every share-partition step is followed by a `check` of the
partition's state, so a wrong state is caught when it happens, even if a crash
or a later reload would hide it (bench/bench_trace_state.py measures the cost).

exit status: 0 after a clean stop, 1 if the broker cannot start, 2 bad flags."""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback only)")
    parser.add_argument("--port", type=int, default=9092, help="port (0 picks a free one; default 9092)")
    parser.add_argument("--data-dir", required=True, type=Path, help="directory for logs and share state")
    parser.add_argument("--trace-dir", type=Path, help="write the broker's traces here")
    parser.add_argument("--trace-state", action="store_true",
                        help="with --trace-dir: a check of the share-partition's state after every step")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", dest="settings",
                        help="a Kafka config setting (repeatable)")
    parser.add_argument("--profile", choices=PROFILES, default="kafka-4.2",
                        help="whose share-group semantics to serve: kafka-4.2 (default) or kip; kafka-4.4 is a "
                             "judging profile, which the broker refuses with its reason")
    parser.add_argument("--log-level", default="WARNING", choices=("DEBUG", "INFO", "WARNING", "ERROR"))


def run(args: argparse.Namespace) -> int:
    _without_hypothesis()
    from kipcheck.impl.broker.config import known_names, split_properties

    properties = {}
    for setting in args.settings:
        name, equals, value = setting.partition("=")
        if not equals or not name.strip():
            print(f"kipcheck broker: --set {setting!r}: expected NAME=VALUE", file=sys.stderr)
            return 2
        properties[name.strip()] = value.strip()
    if not 0 <= args.port <= 65535:
        print(f"kipcheck broker: --port {args.port}: expected 0..65535", file=sys.stderr)
        return 2
    try:
        config, share_config = split_properties(properties, args.profile)
    except ValueError as error:
        # The list of names helps with a misspelt one; a value out of range is said in one line.
        names = f"\n  broker settings: {', '.join(known_names())}" if str(error).startswith("unknown") else ""
        print(f"kipcheck broker: {error}{names}", file=sys.stderr)
        return 2
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        stream=sys.stderr)
    return asyncio.run(_serve(args, config, share_config))


def _without_hypothesis() -> None:
    """Keep hypothesis out of the broker process.

    kio registers hypothesis strategies for its types whenever hypothesis can be
    imported, and hypothesis then builds a unicode table in `.hypothesis/` under the
    working directory: 1.5 s and 200 MiB at start-up and a stray directory, for a
    test library a broker never uses. A None entry in sys.modules makes its import
    fail as if it were not installed. A process that already imported it (a test
    starting the broker in-process) keeps it.
    """
    sys.modules.setdefault("hypothesis", None)


async def _serve(args: argparse.Namespace, config, share_config) -> int:
    from kipcheck.impl.broker.broker import Broker

    try:
        if args.trace_state and args.trace_dir is None:
            print("kipcheck broker: --trace-state needs --trace-dir", file=sys.stderr)
            return 2
        broker = Broker(args.data_dir, config, share_config, args.trace_dir, args.trace_state)
        host, port = await broker.start(args.host, args.port)
    except OSError as error:
        print(f"kipcheck broker: cannot start: {error}", file=sys.stderr)
        return 1
    stop = stop_on_signals()
    warning = exposure_warning(host)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    print(f"listening on {host}:{port}", flush=True)
    await stop.wait()
    await broker.stop()
    print("stopped", flush=True)
    return 0


def exposure_warning(host: str) -> str | None:
    """A warning when the address listened on (an IP literal) is reachable from other machines."""
    if ipaddress.ip_address(host).is_loopback:
        return None
    return (f"kipcheck broker: WARNING: listening on {host}, reachable from other machines. This broker has no "
            "authentication, authorization or encryption: anyone who can connect can create topics and produce, "
            "read and acknowledge every record. Listen on 127.0.0.1 (the default) unless that is what you want.")
