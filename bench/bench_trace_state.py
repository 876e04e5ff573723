"""What the broker's --trace-state costs: share consumption end to end, traced with and without it, side by side.

    .venv/bin/python bench/bench_trace_state.py [--records 30000] [--partitions 3] [--consumers 3] [--runs 2]

Three brokers, one after the other in one run, each measured as bench_broker.py
measures share consumption (real confluent-kafka ShareConsumers, implicit
acknowledgement; from the first produce to the last record's arrival): without
traces, with --trace-dir, and with --trace-dir --trace-state (a `check` of the
share-partition's state after every step). Prints records/s of each (best of
--runs), the bytes of trace written per record, and the ratios to the traced
broker without --trace-state. Real clients acquire large batches, so few steps
are traced per record: the end-to-end cost is small and within the noise.

So the cost per step is measured too, in this process, on the broker's own
SharePartition writing its trace through impl/share's TraceWriter: cycles of
acquire one record / release it, with 10 and with 1000 other records held in
the window (each by another member, so every `check` writes that many runs),
with and without trace_state, side by side. A check writes the whole window,
so its cost grows with the number of runs in flight.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_broker import end_to_end, share_reader  # noqa: E402

from kipcheck.impl.share.config import ShareConfig  # noqa: E402
from kipcheck.impl.share.partition import SharePartition  # noqa: E402
from kipcheck.impl.share.tracing import TraceWriter  # noqa: E402
from kipcheck.oracle.conformance.scenarios.clients import create_topic  # noqa: E402
from kipcheck.oracle.conformance.targets.embedded import DEFAULT_LAUNCHER, EmbeddedBroker  # noqa: E402

SETTINGS = {"share.auto.offset.reset": "earliest", "group.share.heartbeat.interval.ms": "1000",
            "group.share.partition.max.record.locks": "10000"}
MODES = {"untraced": (False, ()), "traced": (True, ()), "traced + --trace-state": (True, ("--trace-state",))}


def measure(mode: str, args, work_dir: Path) -> tuple[float, float]:
    """(best records/s, trace bytes per record) of one broker mode."""
    traced, flags = MODES[mode]
    best = 0.0
    trace_bytes = 0
    for run in range(args.runs):
        run_dir = work_dir / f"{mode.replace(' ', '')}-{run}"
        with EmbeddedBroker(run_dir, SETTINGS, traced=traced, launcher=(*DEFAULT_LAUNCHER, *flags)) as broker:
            create_topic(broker.bootstrap, "bench-share", args.partitions)
            rate, _ = end_to_end(broker.bootstrap, "bench-share", args, share_reader, [()] * args.consumers)
        best = max(best, rate)
        trace_bytes = sum(path.stat().st_size for path in (run_dir / "traces").glob("*.jsonl")) if traced else 0
    return best, trace_bytes / args.records


def per_step_microseconds(window_runs: int, trace_state: bool, cycles: int, work_dir: Path) -> float:
    """CPU microseconds per traced step of an acquire/release cycle, `window_runs` records held meanwhile."""
    config = ShareConfig(max_inflight_records=window_runs + 10, record_lock_duration_ms=10**9,
                         delivery_count_limit=10**9)
    writer = TraceWriter(work_dir / f"steps-{window_runs}-{trace_state}", config)
    partition = SharePartition(config, 0, trace=writer.partition("bench:t:0", config))
    partition.trace_state = trace_state
    for offset in range(window_runs + 1):
        partition.on_append(offset, 1, 0)
    for member in range(window_runs):
        partition.acquire(f"holder-{member}", 1, 0)
    started = time.process_time()
    for _ in range(cycles):
        [(first, last, _)] = partition.acquire("worker", 1, 0)
        partition.acknowledge("worker", [(first, last, "release")], 0)  # the window stays as it is
    elapsed = time.process_time() - started
    writer.close()
    return elapsed / (2 * cycles) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=30_000)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--consumers", type=int, default=3)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--runs", type=int, default=2, help="runs per mode; the best is kept (default 2)")
    parser.add_argument("--cycles", type=int, default=5000, help="acquire/release cycles per step measurement")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kipcheck-bench-trace-state-") as work_dir:
        results = {mode: measure(mode, args, Path(work_dir)) for mode in MODES}
        steps = {(runs, state): per_step_microseconds(runs, state, args.cycles, Path(work_dir))
                 for runs in (10, 1000) for state in (False, True)}
    print(f"share consumption of {args.records} records x {args.value_bytes} B, {args.partitions} partitions, "
          f"{args.consumers} ShareConsumers (best of {args.runs})")
    traced_rate = results["traced"][0]
    for mode, (rate, per_record) in results.items():
        print(f"  {mode:<24} {rate:>10,.0f} records/s  {rate / traced_rate:>5.2f} x traced  "
              f"{per_record:>7.1f} trace bytes/record")

    print(f"CPU per traced share-partition step ({args.cycles} acquire/release cycles, one core):")
    for runs in (10, 1000):
        plain, with_state = steps[(runs, False)], steps[(runs, True)]
        print(f"  {runs:>5} other records held: {plain:>7.1f} us traced, {with_state:>8.1f} us with --trace-state "
              f"({with_state / plain:.1f} x)")


if __name__ == "__main__":
    main()
