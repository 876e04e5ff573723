"""kipcheck record: a Kafka-protocol proxy that writes traces of what crosses it, and judges them as they are written."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path

from kipcheck.commands import stop_on_signals

DESCRIPTION = """\
Stand between applications and a Kafka cluster (Apache Kafka, the reference
broker, any broker speaking Kafka's protocol) and write traces of what crosses
it: one listening port per broker (the --listen port for the first --upstream,
the next ports for the next ones, and for brokers the cluster names later), every
broker address in answers rewritten so that clients stay behind the proxy, bytes
forwarded unchanged otherwise, answers kept in order per connection. It speaks
PLAINTEXT only (no TLS, no SASL), and has no authentication of its own: it gives
whoever can connect to it the cluster's access, so listen on loopback unless that
is what you want.

Traces (in --trace-dir; spec/conformance.md and spec/share-partition.md SP-80 say
how they are written and judged):
  share-session.BROKER.GROUP.MEMBER.jsonl    each member's share sessions with one
      broker (a partial view of the broker's cache, SS-41; its epochs judged, SS-40)
  share-partition.GROUP.TOPIC:PARTITION.jsonl   from the first acquisition seen; a
      full view when the proxy saw the group born and sees every member (judged by
      every clause, among them SP-48: the record bytes of each answer hold exactly
      the records it acquired), a partial view otherwise (SP-80) and for compacted
      topics; acknowledgements of records never delivered are judged too (SP-85)
  ic.GROUP.TOPIC:PARTITION.jsonl    individual commits (OffsetCommit with ranges),
      with what each client fetched: a range committed that it never fetched is IC-22

With --check each step is judged as it is written, and a violation is printed the
moment it happens (clause, what was allowed, what was observed, the trace file). On
SIGTERM or SIGINT the proxy stops, writes what it holds, prints a table of the
traces and what it did not observe, and exits 0 (no violation) or 1.

Limits (--set NAME=VALUE): socket.request.max.bytes (104857600),
receive.message.max.bytes (104857600), queued.max.request.bytes (209715200: frames
held at once, every connection together), queued.max.request.bytes.per.connection
(104857600), max.in.flight.requests.per.connection (64), max.connections (500),
record.observe.max.bytes (67108864: a larger answer is forwarded unread, and said
so). The share settings the traces are judged with, as the cluster has them:
group.share.record.lock.duration.ms (30000), group.share.delivery.count.limit (5),
group.share.partition.max.record.locks (2000), group.share.max.share.sessions (2000),
group.share.max.size (200), group.share.min.record.lock.duration.ms (15000).

--poll-spso MS asks DescribeShareGroupOffsets every MS for the start offset the
share coordinator stored for the full views' share-partitions (it may trail the
leader's SPSO: spec/share-partition.md SP-47), written as `check` steps of
`stored_spso` when no request was in flight.

Clients: confluent-kafka's (librdkafka's) Producer, Consumer and ShareConsumer are
what it is shown working with; any client speaking the protocol may be used.

exit status: 0 no violation, 1 a violation (with --check), 2 bad flags, 3 cannot start."""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--listen", required=True, metavar="HOST:PORT",
                        help="where to listen for the first upstream broker (port 0: free ports)")
    parser.add_argument("--upstream", required=True, action="append", metavar="HOST:PORT",
                        help="a broker of the cluster (repeatable; others are found in its answers)")
    parser.add_argument("--trace-dir", required=True, type=Path, help="write the traces here")
    parser.add_argument("--check", action="store_true", help="judge every step as it is written")
    parser.add_argument("--profile", choices=("kip", "kafka-4.2"), default="kafka-4.2",
                        help="whose semantics judge the traces (default kafka-4.2)")
    parser.add_argument("--poll-spso", type=int, metavar="MS",
                        help="read the stored start offset with DescribeShareGroupOffsets every MS (SP-47)")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", dest="settings",
                        help="a limit or a share setting (repeatable)")
    parser.add_argument("--log-level", default="WARNING", choices=("DEBUG", "INFO", "WARNING", "ERROR"))


def run(args: argparse.Namespace) -> int:
    sys.modules.setdefault("hypothesis", None)  # as `kipcheck broker` does: kio's strategies are not needed here
    from kipcheck.oracle.record.settings import RecordSettings

    try:
        listen = _address(args.listen, "--listen")
        upstreams = [_address(text, "--upstream") for text in args.upstream]
        settings = RecordSettings.from_properties(_properties(args.settings), args.profile)
        if args.poll_spso is not None and args.poll_spso < 1:
            raise ValueError(f"--poll-spso {args.poll_spso}: expected a number of milliseconds >= 1")
    except ValueError as error:
        print(f"kipcheck record: {error}", file=sys.stderr)
        return 2
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        stream=sys.stderr)
    return asyncio.run(_record(args, listen, upstreams, settings))


def _address(text: str, flag: str) -> tuple[str, int]:
    host, colon, port = text.rpartition(":")
    if not colon or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{flag} {text!r}: expected HOST:PORT")
    return host, int(port)


def _properties(settings: list[str]) -> dict[str, str]:
    properties = {}
    for setting in settings:
        name, equals, value = setting.partition("=")
        if not equals or not name.strip():
            raise ValueError(f"--set {setting!r}: expected NAME=VALUE")
        properties[name.strip()] = value.strip()
    return properties


async def _record(args: argparse.Namespace, listen: tuple[str, int], upstreams: list[tuple[str, int]],
                  settings) -> int:
    from kipcheck.oracle.record.admin import Admin
    from kipcheck.oracle.record.observe import Observer
    from kipcheck.oracle.record.proxy import Proxy
    from kipcheck.oracle.record.shelf import Shelf

    shelf = Shelf(args.trace_dir, args.check, sys.stdout, min_lock_duration_ms=settings.min_lock_duration_ms)
    admin = Admin(upstreams)
    observer = Observer(shelf, admin, args.profile, settings)
    proxy = Proxy(upstreams, *listen, settings, observer)
    try:
        await proxy.start()
    except OSError as error:
        print(f"kipcheck record: cannot start: {error}", file=sys.stderr)
        return 3
    stop = stop_on_signals()
    for port, host, upstream_port in proxy.listening:
        print(f"listening on {listen[0]}:{port} for {host}:{upstream_port}", flush=True)
    poller = asyncio.create_task(_poll(proxy, observer, args.poll_spso)) if args.poll_spso else None
    await stop.wait()
    if poller is not None:
        poller.cancel()
    await proxy.stop()
    observer.settled(None)
    shelf.close()
    admin.close()
    return shelf.summary(observer.not_observed)


async def _poll(proxy, observer, interval_ms: int) -> None:
    while True:
        await asyncio.sleep(interval_ms / 1000)
        observer.poll_start_offsets(proxy.now_ms, idle=proxy.pending.earliest() is None)
