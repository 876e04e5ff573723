"""Throughput of impl/share: records per second through append -> acquire -> acknowledge.

    .venv/bin/python bench/bench_share_engine.py [--records 200000] [--batch 100] [--max-records 500]
                                                  [--members 3] [--fsync] [--trace] [--release-every 0]

Drives one SharePartition (profile kafka-4.2) with a durable ShareCoordinator
on a temporary data dir, as a broker would: every produced batch is appended,
members take turns fetching (max_records) and acknowledging what they got
(accept; every Nth fetch is released instead, to exercise redelivery). One
coordinator write, and with --fsync one fsync, per acknowledgement request.
"""

from __future__ import annotations

import argparse
import tempfile
import time

from kipcheck.impl.share.config import ShareConfig
from kipcheck.impl.share.coordinator import ShareCoordinator
from kipcheck.impl.share.partition import SharePartition
from kipcheck.impl.share.tracing import TraceWriter


def run(records: int, batch: int, max_records: int, members: int, fsync: bool, trace: bool,
        release_every: int) -> dict:
    config = ShareConfig(auto_offset_reset="earliest", max_inflight_records=10000)
    with tempfile.TemporaryDirectory() as directory:
        writer = TraceWriter(f"{directory}/traces", config) if trace else None
        coordinator = ShareCoordinator(f"{directory}/data", config, fsync=fsync, trace_writer=writer)
        partition = SharePartition.load(config, coordinator, "g:t:0", 0, 0, 0, writer)
        names = [f"member-{index}" for index in range(members)]
        started = time.perf_counter()
        acknowledged = fetches = 0
        now_ms = 0
        while acknowledged < records:
            now_ms += 1
            if partition.log_end_offset < records and partition.log_end_offset - partition.spso < 5000:
                partition.on_append(partition.log_end_offset, batch, now_ms)
            member = names[fetches % members]
            fetches += 1
            acquired = partition.acquire(member, max_records, now_ms)
            release = release_every and fetches % release_every == 0
            acks = [(first, last, "release" if release else "accept") for first, last, _ in acquired]
            if acks:
                assert partition.acknowledge(member, acks, now_ms) == "NONE"
                if not release:
                    acknowledged += sum(last - first + 1 for first, last, _ in acquired)
        elapsed = time.perf_counter() - started
        coordinator.close()
        if writer:
            writer.close()
    return {"records": acknowledged, "seconds": round(elapsed, 3), "records_per_second": int(acknowledged / elapsed),
            "fetches": fetches}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--max-records", type=int, default=500)
    parser.add_argument("--members", type=int, default=3)
    parser.add_argument("--fsync", action="store_true")
    parser.add_argument("--trace", action="store_true")
    parser.add_argument("--release-every", type=int, default=0)
    arguments = parser.parse_args()
    print(run(arguments.records, arguments.batch, arguments.max_records, arguments.members, arguments.fsync,
              arguments.trace, arguments.release_every))


if __name__ == "__main__":
    main()
