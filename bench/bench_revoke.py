"""Benchmark a cooperative rebalance under load: KIP-983's revoke-delay versus today's blocking callback (a script).

    .venv/bin/python bench/bench_revoke.py [--quick] [--partitions 12] [--processing-ms 10] [--flush-ms 1000:2000]
        [--modes delay,callback,naive] [--timeline] [--traced]

The workload KIP-983 was written for: asynchronous processing with a slow
commit path. One run, one broker, one topic with a backlog, and one KIP-848
group per mode reading it at the same time, so every mode meets the same
machine load. Each group starts with four members (kipcheck's consumer under
revoke_app's ProcessingApp, one process each: one worker per partition,
`--processing-ms` per record, a partition paused when `--queue` HIGH records
wait for its worker and resumed at LOW, a poll handing out at most HIGH
records; each partition's state flushed by a thread of its own, each flush
taking `--flush-ms` LOW to HIGH ms, and only flushed offsets committed, so
records are in flight and state unflushed whenever a rebalance starts). After
a warm-up a fifth member joins, and `--leave-after-s` later one of the first
four leaves (a clean close: finish, flush, commit, leave). The three members
that stay are the ones measured. Modes (revoke_app.py):

- delay: KIP-983, revokes delayed until the partition's records are
  processed, flushed and committed, the poll loop running on meanwhile;
- callback: on_revoke waits inside poll for the revoked partitions' records
  and their flush, commits synchronously and returns;
- naive: on_revoke commits what the workers finished, unflushed, and returns
  at once (the control: it must show records processed twice and lost, or
  the counts prove nothing).

Printed per mode:
- records processed twice (a (partition, offset) processed by two members, or
  twice by one), and records lost (below a partition's last committed offset,
  and never flushed after being processed: their state is gone);
- the untouched partitions: held by one of the three staying members from the
  steady window to the end, never moved; their throughput, records/s per
  partition, before (`--steady-s` before the join), during the join's
  rebalance (until the joiner processes every partition it was first given),
  during the leave's (until the leaver closed and every partition moved since
  is processed again), and after both (to the end of `--settle-s`); the
  ratios to before; the worst 250 ms of the rebalances as a share of before;
  the partition-seconds (250 ms buckets) in which an untouched partition
  processed nothing; each rebalance's duration.
Clocks: every process stamps events with CLOCK_MONOTONIC (time.monotonic),
one clock machine-wide. The figures move with the machine's load; modes run
side by side so they move together. `--processing-ms` is 10 by default: at 5
the three groups' 36 partitions ask for 7,200 records/s of event logging, and
on two shared cores the steady rate itself falls short.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

from confluent_kafka import Producer

from kipcheck.oracle.conformance.scenarios.clients import QUIET, create_topic
from kipcheck.oracle.conformance.targets.embedded import EmbeddedBroker
from kipcheck.oracle.conformance.scenarios.groups import MemberProcess
from kipcheck.oracle.conformance.scenarios.revoke_app import MODES

SETTINGS = {"group.consumer.heartbeat.interval.ms": "500", "group.consumer.session.timeout.ms": "10000",
            "group.min.session.timeout.ms": "1000"}
TOPIC, BUCKET_MS = "work", 250
START_UP_S = 20


def produce_backlog(bootstrap: str, partitions: int, per_partition: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 10000, **QUIET})
    for index in range(partitions * per_partition):
        while True:
            try:
                producer.produce(TOPIC, value=b"%d" % index, partition=index % partitions)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(300) == 0, "backlog not delivered"


def member(name: str, broker: EmbeddedBroker, mode: str, args) -> MemberProcess:
    trace_dir = str(broker.trace_dir) if args.traced else "-"
    # a poll hands out at most HIGH records: what a worker holds stays near the queue's bound
    settings = f"queue={args.queue},max.poll.records={args.queue.split(':')[0]}" + (
        f",flush={args.flush_ms}" if args.flush_ms != "none" else "")
    command = ["kipcheck.oracle.conformance.scenarios.revoke_member", broker.bootstrap, f"bench-{mode}", TOPIC, mode,
               str(args.processing_ms), trace_dir, settings]
    return MemberProcess(name, broker, f"bench-{mode}", "consumer", "-", command=command)


def wait(condition, what: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.1)


def run(args) -> dict[str, dict]:
    """Every mode's group side by side; returns each mode's members' events and the moments that matter."""
    with tempfile.TemporaryDirectory(prefix="kipcheck-bench-revoke-") as work, \
            EmbeddedBroker(Path(work), SETTINGS, traced=args.traced) as broker:
        create_topic(broker.bootstrap, TOPIC, args.partitions)
        total_s = args.warmup_s + args.leave_after_s + args.settle_s
        # enough for the whole run at full speed, the members' start-up (up to START_UP_S) included
        produce_backlog(broker.bootstrap, args.partitions, int((total_s + START_UP_S) * 1.2 * 1000 / args.processing_ms))
        groups = {mode: {name: member(f"{mode}-{name}", broker, mode, args)
                         for name in ("a", "b", "c", "leaver")} for mode in args.modes}
        try:
            for members in groups.values():
                for process in members.values():
                    wait(lambda: len(process.records()) > 0, f"{process.name} to process records")
            time.sleep(args.warmup_s)
            for mode, members in groups.items():
                members["joiner"] = member(f"{mode}-joiner", broker, mode, args)
            for members in groups.values():  # its log opens as it subscribes: the rebalance starts there
                wait(members["joiner"].log_path.exists, "the joiner to start")
            joined_ms = time.monotonic() * 1000
            time.sleep(args.leave_after_s)
            left_ms = time.monotonic() * 1000
            for members in groups.values():  # every leaver told at once; each finishes, commits and leaves
                members["leaver"].process.send_signal(signal.SIGTERM)
            time.sleep(args.settle_s)
            until_ms = time.monotonic() * 1000  # stopping the members moves partitions too: not measured
        finally:
            for members in groups.values():
                for process in members.values():
                    process.stop()
        if args.traced:
            from kipcheck.oracle.check import check_file
            bad = [verdict.summary() for path in sorted(broker.trace_dir.glob("*.jsonl"))
                   if (verdict := check_file(path)).status != "ok"]
            print(f"traces: {len(list(broker.trace_dir.glob('*.jsonl')))} judged, {len(bad)} not allowed", *bad,
                  sep="\n  ")
        return {mode: {"events": {name: process.events() for name, process in members.items()},
                       "joined_ms": joined_ms, "left_ms": left_ms, "until_ms": until_ms}
                for mode, members in groups.items()}


def measure(events: dict[str, list[dict]], joined_ms: float, left_ms: float, until_ms: float,
            steady_s: float) -> dict:
    """The figures of one mode. The join's rebalance lasts until the joiner processes every partition it was
    first given; the leave's until the leaver closed and every partition moved since is processed again."""
    records = [(name, event["partition"], event["offset"], event["at_ms"])
               for name, member_events in events.items() for event in member_events
               if event["event"] == "record" and event["at_ms"] < until_ms]
    twice = sum(count - 1 for count in Counter((p, o) for _, p, o, _ in records).values() if count > 1)
    steady_from = joined_ms - steady_s * 1000
    owners: dict[int, set[str]] = defaultdict(set)
    for name, partition, _, at_ms in records:
        if at_ms >= steady_from:
            owners[partition].add(name)
    untouched = sorted(p for p, names in owners.items() if len(names) == 1 and names <= {"a", "b", "c"})
    moved = sorted(p for p, names in owners.items() if len(names) > 1)
    restarts = {partition: _first(records, _final_owner(records, partition), partition, joined_ms)
                for partition in moved}
    given = next((event["partitions"] for event in events["joiner"] if event["event"] == "assign"), [])
    join_end = max([_first(records, "joiner", partition, joined_ms) for partition in given] + [joined_ms + 1])
    closed = [event["at_ms"] for event in events["leaver"] if event["event"] == "closed"]
    leave_end = max([at for at in restarts.values() if at >= left_ms] + closed + [left_ms + 1])
    window_end = max(join_end, leave_end)
    buckets = list(_buckets(joined_ms, window_end))
    return {"twice": twice, "lost": lost(events), "untouched": untouched, "moved": moved,
            "before": _rate(records, untouched, steady_from, joined_ms),
            "join": _rate(records, untouched, joined_ms, join_end),
            "leave": _rate(records, untouched, left_ms, leave_end),
            "after": _rate(records, untouched, window_end, until_ms),
            "worst": min((_rate(records, untouched, start, start + BUCKET_MS) for start in buckets), default=0.0),
            "idle_s": sum(BUCKET_MS / 1000 for partition in untouched for start in buckets
                          if not _rate(records, [partition], start, start + BUCKET_MS)),
            "join_s": (join_end - joined_ms) / 1000, "leave_s": (leave_end - left_ms) / 1000,
            "timeline": [round(_rate(records, untouched, start, start + BUCKET_MS))
                         for start in _buckets(steady_from, window_end)],
            "restarts": {partition: round((at - joined_ms) / 1000, 1) for partition, at in restarts.items()}}


def _first(records, name: str, partition: int, from_ms: float) -> float:
    """When `name` first processed a record of `partition` at or after `from_ms` (inf if never)."""
    return min((at for owner, p, _, at in records if p == partition and owner == name and at >= from_ms),
               default=float("inf"))


def lost(events: dict[str, list[dict]]) -> int:
    """Records below a partition's last committed offset whose processing no member made durable.

    Durable: processed by a member, then covered by one of its "flushed" events (the slow commit path);
    without flushing, processed is durable. Counted over the whole run, the members' closing included."""
    flushing = any(event["event"] == "flushed" for member_events in events.values() for event in member_events)
    durable: set[tuple[int, int]] = set()
    committed: dict[int, tuple[float, int]] = {}
    for member_events in events.values():
        processed: dict[int, list[int]] = defaultdict(list)
        for event in member_events:
            if event["event"] == "record":
                processed[event["partition"]].append(event["offset"])
                if not flushing:
                    durable.add((event["partition"], event["offset"]))
            elif event["event"] in ("revoke", "lost"):  # a later ownership starts with no state
                for partition in event["partitions"]:
                    processed.pop(partition, None)
            elif event["event"] == "flushed":
                durable.update((event["partition"], offset) for offset in processed[event["partition"]]
                               if offset < event["offset"])
            elif event["event"] == "commit":
                for partition, offset in event["offsets"].items():
                    committed[int(partition)] = max(committed.get(int(partition), (0, 0)), (event["at_ms"], offset))
    return sum(1 for partition, (_, offset) in committed.items() for below in range(offset)
               if (partition, below) not in durable)


def _final_owner(records, partition: int) -> str:
    return max((at, name) for name, p, _, at in records if p == partition)[1]


def _buckets(start_ms: float, end_ms: float):
    while start_ms + BUCKET_MS <= end_ms:
        yield start_ms
        start_ms += BUCKET_MS


def _rate(records, partitions: list[int], from_ms: float, to_ms: float) -> float:
    """Records/s per partition of `partitions` processed in [from_ms, to_ms)."""
    if not partitions or to_ms <= from_ms:
        return 0.0
    count = sum(1 for _, p, _, at in records if p in partitions and from_ms <= at < to_ms)
    return count / len(partitions) / ((to_ms - from_ms) / 1000)


QUICK = {"warmup_s": 4, "steady_s": 3, "leave_after_s": 2, "settle_s": 8}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--processing-ms", type=float, default=10)
    parser.add_argument("--modes", default="delay,callback,naive")
    parser.add_argument("--warmup-s", type=float, default=8)
    parser.add_argument("--steady-s", type=float, default=4)
    parser.add_argument("--leave-after-s", type=float, default=3)
    parser.add_argument("--settle-s", type=float, default=12)
    parser.add_argument("--quick", action="store_true",
                        help="shorter phases: " + ", ".join(f"--{key.replace('_', '-')} {value}"
                                                            for key, value in QUICK.items()))
    parser.add_argument("--queue", default="40:10", help="HIGH:LOW records waiting for a partition's worker: "
                        "the application pauses the partition at HIGH and resumes it at LOW (default 40:10)")
    parser.add_argument("--flush-ms", default="1000:2000", help="LOW:HIGH ms each flush of a partition's state "
                        "takes before its commit (default 1000:2000); none: a commit needs no flush")
    parser.add_argument("--traced", action="store_true", help="consumers and broker write traces, judged at the end")
    parser.add_argument("--timeline", action="store_true",
                        help="also print the untouched partitions' records/s per partition, 250 ms at a time")
    args = parser.parse_args(argv)
    if args.quick:
        vars(args).update(QUICK)
    args.modes = args.modes.split(",")
    if set(args.modes) - set(MODES):
        parser.error(f"--modes must be among {', '.join(MODES)}, found {','.join(args.modes)}")
    if args.flush_ms != "none" and not _bounds(args.flush_ms):
        parser.error(f"--flush-ms must be LOW:HIGH milliseconds (0 <= LOW <= HIGH) or none, found {args.flush_ms!r}")
    print(f"{args.partitions} partitions, {args.processing_ms} ms per record, queue {args.queue}, state flushed in "
          f"{args.flush_ms} ms before each commit, side by side: {', '.join(args.modes)}; "
          f"4 members, a 5th joins, {args.leave_after_s} s later one leaves")
    print("untouched partitions' records/s per partition: before the join, during the join's rebalance, during "
          "the leave's, after both; the worst 250 ms of the rebalances and the partition-seconds in which an "
          "untouched partition processed nothing; each rebalance's duration")
    print(f"{'mode':<9}{'twice':>6}{'lost':>6}{'untouched':>10}{'before':>8}{'join':>7}{'leave':>7}{'after':>7}"
          f"{'join/before':>12}{'leave/before':>13}{'after/before':>13}{'worst 250ms':>12}{'idle p*s':>9}"
          f"{'join s':>7}{'leave s':>8}")
    for mode, run_result in run(args).items():
        figures = measure(run_result["events"], run_result["joined_ms"], run_result["left_ms"],
                          run_result["until_ms"], args.steady_s)
        before = figures["before"] or float("nan")
        print(f"{mode:<9}{figures['twice']:>6}{figures['lost']:>6}{len(figures['untouched']):>10}"
              f"{figures['before']:>8.1f}{figures['join']:>7.1f}{figures['leave']:>7.1f}{figures['after']:>7.1f}"
              f"{figures['join'] / before:>12.2f}{figures['leave'] / before:>13.2f}{figures['after'] / before:>13.2f}"
              f"{figures['worst'] / before:>12.2f}{figures['idle_s']:>9.1f}{figures['join_s']:>7.1f}"
              f"{figures['leave_s']:>8.1f}", flush=True)
        if args.timeline:
            print(f"  {mode} timeline from {args.steady_s} s before the join:", *figures["timeline"])
            print(f"  {mode} moved partitions restarted at (s after the join):", figures["restarts"])
    print(f"load: {statistics.mean(os.getloadavg()):.1f} (1/5/15-minute load average, mean)")
    return 0


def _bounds(text: str) -> bool:
    low, _, high = text.partition(":")
    try:
        return 0 <= float(low) <= float(high)
    except ValueError:
        return False


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
