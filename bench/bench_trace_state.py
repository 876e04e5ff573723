"""What the broker's --trace-state costs: share consumption end to end, traced with and without it, side by side.

    .venv/bin/python bench/bench_trace_state.py [--records 30000] [--partitions 3] [--consumers 3] [--runs 2]

Three brokers, one after the other in one run, each measured as bench_broker.py
measures share consumption (real confluent-kafka ShareConsumers, implicit
acknowledgement; from the first produce to the last record's arrival): without
traces, with --trace-dir, and with --trace-dir --trace-state (a `check` of the
share-partition's state after every step). Prints records/s of each (best of
--runs), the bytes of trace written per record, and the ratios to the traced
broker without --trace-state.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_broker import end_to_end, share_reader  # noqa: E402

from kipcheck.oracle.conformance.clients import create_topic  # noqa: E402
from kipcheck.oracle.conformance.embedded import DEFAULT_LAUNCHER, EmbeddedBroker  # noqa: E402

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=30_000)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--consumers", type=int, default=3)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--runs", type=int, default=2, help="runs per mode; the best is kept (default 2)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kipcheck-bench-trace-state-") as work_dir:
        results = {mode: measure(mode, args, Path(work_dir)) for mode in MODES}
    print(f"share consumption of {args.records} records x {args.value_bytes} B, {args.partitions} partitions, "
          f"{args.consumers} ShareConsumers (best of {args.runs})")
    traced_rate = results["traced"][0]
    for mode, (rate, per_record) in results.items():
        print(f"  {mode:<24} {rate:>10,.0f} records/s  {rate / traced_rate:>5.2f} x traced  "
              f"{per_record:>7.1f} trace bytes/record")


if __name__ == "__main__":
    main()
